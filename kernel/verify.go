package kernel

import (
	"bytes"
	"errors"
	"fmt"
	"path/filepath"
	"strings"

	"github.com/lockstep-sandbox/lockstep/internal/safefile"
)

// Names of the files in a cache entry.
const (
	BzImageName = "bzImage"
	ConfigName  = "config"
	RecordName  = "build.txt"
	LogName     = "build.log"
)

// ErrRefused means a built kernel failed verification and must not boot.
var ErrRefused = errors.New("kernel refused")

// VerifyError names every check a cached kernel failed.
type VerifyError struct {
	Dir      string   // the cache entry
	Version  string   // the pin it was checked against
	Failures []string // one per failed check, each naming the check
	// Unfit is true when the stored config lacks a required option: the
	// kernel is then also unfit (exit 3), not only refused.
	Unfit bool
}

func (e *VerifyError) Error() string {
	return fmt.Sprintf("kernel %s in %s refused: %s", e.Version, e.Dir, strings.Join(e.Failures, "; "))
}

// Is makes errors.Is(err, ErrRefused) true, and errors.Is(err, ErrUnfit)
// when a required option is missing.
func (e *VerifyError) Is(target error) bool {
	return target == ErrRefused || (e.Unfit && target == ErrUnfit)
}

// Verified is what verification proved about a cache entry.
type Verified struct {
	Dir           string
	BzImage       string // path
	Config        string // path
	Record        *Record
	HeaderVersion string
	Options       int // required options checked
	// Recorded is the row of the recorded-bzImage table the bzImage
	// matched; nil when no row records the key (unrecorded: build.txt
	// alone vouched for the bzImage).
	Recorded *RecordedImage
}

// VerifyDir checks a cache entry against pin, key (the expected cache key,
// "" to skip) and the required options: build.txt parses and names this pin
// and key; the bzImage's SHA-256 equals the one the embedded table
// (RecordedImages) records for key, when a row does, and build.txt's; every
// required option is in the stored config and its SHA-256 equals build.txt's;
// the version string the bzImage's setup header points to starts with the
// pin's version. With key "", the key build.txt names picks the row. Every
// failed check is reported, in one *VerifyError.
func VerifyDir(dir string, pin Pin, key string, required []string) (*Verified, error) {
	return verifyDir(dir, pin, key, required, RecordedImages())
}

// verifyDir is VerifyDir with the recorded-bzImage table given.
func verifyDir(dir string, pin Pin, key string, required []string, recorded []RecordedImage) (*Verified, error) {
	v := &Verified{Dir: dir, BzImage: filepath.Join(dir, BzImageName), Config: filepath.Join(dir, ConfigName), Options: len(required)}
	var fail []string
	unfit := false
	failf := func(format string, a ...any) { fail = append(fail, fmt.Sprintf(format, a...)) }
	refuse := func() error { return &VerifyError{Dir: dir, Version: pin.Version, Failures: fail, Unfit: unfit} }

	raw, err := safefile.ReadFile(filepath.Join(dir, RecordName), 1<<20)
	if err != nil {
		failf("build.txt: %v", err)
		return nil, refuse()
	}
	rec, err := ParseRecord(raw)
	if err != nil {
		failf("%v", err)
		return nil, refuse()
	}
	v.Record = rec
	if rec.Version != pin.Version {
		failf("build.txt version is %q, want %q", rec.Version, pin.Version)
	}
	if rec.Pin != pin.Row {
		failf("build.txt pin row is %q, want %q", rec.Pin, pin.Row)
	}
	if key != "" && rec.Key != key {
		failf("build.txt key is %s, want %s", rec.Key, key)
	}

	rowKey := key
	if rowKey == "" {
		rowKey = rec.Key
	}
	row := lookupRecorded(recorded, rowKey)
	img, err := safefile.ReadFile(v.BzImage, 256<<20)
	if err != nil {
		failf("bzImage: %v", err)
	} else {
		got := sha256Hex(img)
		// The table first: build.txt sits beside the bzImage and whoever
		// rewrote one can rewrite the other.
		if row != nil && got != row.BzImageSHA256 {
			failf("bzImage sha256 is %s, %s records %s for this pin, fragment and toolchain (key %s)", got, row.Where(), row.BzImageSHA256, rowKey)
		}
		if got != rec.BzImageSHA256 {
			failf("bzImage sha256 is %s, build.txt says %s", got, rec.BzImageSHA256)
		}
		hv, err := HeaderVersion(bytes.NewReader(img))
		switch {
		case err != nil:
			failf("bzImage header version: %v", err)
		case !versionMatches(hv, pin.Version):
			failf("bzImage header version is %q, want it to start with %q", hv, pin.Version)
		default:
			v.HeaderVersion = hv
		}
	}

	cfg, err := safefile.ReadFile(v.Config, 16<<20)
	if err != nil {
		failf("config: %v", err)
	} else {
		if err := CheckConfig("config", cfg, required); err != nil {
			var u *UnfitError
			errors.As(err, &u)
			unfit = true
			failf("config lacks required option(s) %s", strings.Join(u.Missing, ", "))
		}
		if got := sha256Hex(cfg); got != rec.ConfigSHA256 {
			failf("config sha256 is %s, build.txt says %s", got, rec.ConfigSHA256)
		}
	}
	if len(fail) > 0 {
		return nil, refuse()
	}
	v.Recorded = row
	return v, nil
}

// VerifyImage checks a bzImage that sits in a cache entry (beside its
// build.txt and config) against the pin build.txt names, with the embedded
// required options. Callers handed a bzImage path use it before booting.
func VerifyImage(bzImage string) (*Verified, error) {
	dir := filepath.Dir(bzImage)
	raw, err := safefile.ReadFile(filepath.Join(dir, RecordName), 1<<20)
	if err != nil {
		return nil, &VerifyError{Dir: dir, Version: "?", Failures: []string{fmt.Sprintf("build.txt: %v (only cached kernels can be verified)", err)}}
	}
	rec, err := ParseRecord(raw)
	if err != nil {
		return nil, &VerifyError{Dir: dir, Version: "?", Failures: []string{err.Error()}}
	}
	pin, err := Lookup(rec.Version)
	if err != nil {
		return nil, &VerifyError{Dir: dir, Version: rec.Version, Failures: []string{fmt.Sprintf("build.txt names %v", err)}}
	}
	frag, err := FragmentFor(pin.Version, fragment)
	if err != nil {
		return nil, &VerifyError{Dir: dir, Version: rec.Version, Failures: []string{err.Error()}}
	}
	return VerifyDir(dir, pin, "", RequiredOptions(frag))
}
