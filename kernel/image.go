package kernel

import (
	"archive/tar"
	"bufio"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/lockstep-sandbox/lockstep/internal/debian"
	"github.com/lockstep-sandbox/lockstep/internal/safefile"
)

// Names in the cache entry of a debian-image pin: the vmlinuz as BzImageName,
// the package's /lib/modules/<release> tree, and the record.
const (
	ModulesName     = "modules"
	ImageRecordName = "image.txt"
)

// imageFormat names the layout of an image entry; bump it when it changes,
// so old entries stop matching.
const imageFormat = "lockstep-kernel-image 1"

// imageKey is a debian-image pin's cache key: nothing is built, so the row
// (which holds the .deb's and the vmlinuz's SHA-256) and the layout are all
// the entry depends on.
func imageKey(pin Pin) string {
	return Key(KeyInputs{PinRow: pin.Row, Builder: imageFormat})
}

// Release is the kernel release (uname -r) of a debian-image pin, from its
// vmlinuz's name: boot/vmlinuz-6.1.0-57-amd64 is 6.1.0-57-amd64.
func (p Pin) Release() string {
	_, r, _ := strings.Cut(filepath.Base(p.Inner), "vmlinuz-")
	return r
}

// ImageRecord is image.txt: the pin row an image entry was unpacked from,
// its release, and the SHA-256 of every module file, so that the files a
// guest loads can be checked on every use.
type ImageRecord struct {
	Row     string
	Release string
	Modules map[string]string // path below modules/ → SHA-256
}

// Marshal renders the record: "row", "release", then one "module" line a
// file, sorted.
func (r *ImageRecord) Marshal() []byte {
	var b strings.Builder
	fmt.Fprintf(&b, "format %s\nrow %s\nrelease %s\n", imageFormat, r.Row, r.Release)
	names := make([]string, 0, len(r.Modules))
	for n := range r.Modules {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		fmt.Fprintf(&b, "module %s %s\n", r.Modules[n], n)
	}
	return []byte(b.String())
}

// ParseImageRecord reads image.txt.
func ParseImageRecord(src []byte) (*ImageRecord, error) {
	r := &ImageRecord{Modules: map[string]string{}}
	sc := bufio.NewScanner(strings.NewReader(string(src)))
	sc.Buffer(nil, 1<<16)
	for n := 1; sc.Scan(); n++ {
		k, v, _ := strings.Cut(sc.Text(), " ")
		switch k {
		case "format":
			if v != imageFormat {
				return nil, fmt.Errorf("%s:%d: format %q, want %q", ImageRecordName, n, v, imageFormat)
			}
		case "row":
			r.Row = v
		case "release":
			r.Release = v
		case "module":
			sum, name, ok := strings.Cut(v, " ")
			if !ok || !sha256RE.MatchString(sum) || name == "" || strings.Contains(name, "..") || strings.HasPrefix(name, "/") {
				return nil, fmt.Errorf("%s:%d: %q is not \"module <sha256> <path>\"", ImageRecordName, n, sc.Text())
			}
			r.Modules[name] = sum
		default:
			return nil, fmt.Errorf("%s:%d: unknown line %q", ImageRecordName, n, sc.Text())
		}
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	if r.Row == "" || r.Release == "" {
		return nil, fmt.Errorf("%s lacks its row or release", ImageRecordName)
	}
	return r, nil
}

// buildImage returns the verified entry of a debian-image pin, unpacking
// the package's vmlinuz and modules first when it is not cached.
func (b *Builder) buildImage(ctx context.Context, pin Pin, start time.Time) (*Result, error) {
	key := imageKey(pin)
	dir := filepath.Join(b.root(), key)
	if r, err := b.verifyImage(pin); !errors.Is(err, ErrNotBuilt) {
		if r != nil {
			r.Elapsed = time.Since(start)
		}
		return r, err
	}
	unlock, made, err := b.lockEntry(ctx, dir)
	if err != nil {
		return nil, err
	}
	defer unlock()
	if made { // another process unpacked it meanwhile
		return b.verifyImage(pin)
	}
	deb, err := b.download(ctx, pin)
	if err != nil {
		return nil, err
	}
	b.removeStale(filepath.Join(b.root(), ".image-"+key[:12]+"-*"))
	tmp, err := os.MkdirTemp(b.root(), ".image-"+key[:12]+"-")
	if err != nil {
		return nil, fmt.Errorf("create image dir: %w", err)
	}
	defer os.RemoveAll(tmp)
	b.log().Info("kernel: unpacking Debian's image", "pin", pin.Version, "package", pin.Package+"="+pin.PackageVersion)
	rec, err := unpackImage(deb, pin, tmp)
	if err != nil {
		return nil, err
	}
	if err := safefile.WriteFile(filepath.Join(tmp, ImageRecordName), rec.Marshal(), 0o644); err != nil {
		return nil, err
	}
	if err := os.Rename(tmp, dir); err != nil {
		return nil, fmt.Errorf("store image: %w", err)
	}
	r, err := b.verifyImage(pin)
	if err != nil {
		return nil, fmt.Errorf("fresh image: %w", err)
	}
	r.CacheHit, r.Elapsed = false, time.Since(start)
	return r, nil
}

// unpackImage writes the pin's vmlinuz (its SHA-256 checked against the
// pin) and the package's modules tree into dir and returns the record.
func unpackImage(debPath string, pin Pin, dir string) (*ImageRecord, error) {
	d, err := debian.OpenDeb(debPath)
	if err != nil {
		return nil, err
	}
	defer d.Close()
	if d.Name != pin.Package || d.Version != pin.PackageVersion {
		return nil, fmt.Errorf("%s is %s=%s, pin %s wants %s=%s", debPath, d.Name, d.Version, pin.Version, pin.Package, pin.PackageVersion)
	}
	rel := pin.Release()
	rec := &ImageRecord{Row: pin.Row, Release: rel, Modules: map[string]string{}}
	var bzSum string
	err = d.Walk(func(name string, h *tar.Header, r io.Reader) error {
		if h.Typeflag != tar.TypeReg {
			return nil
		}
		if name == pin.Inner {
			sum, err := writeHashed(filepath.Join(dir, BzImageName), r)
			bzSum = sum
			return err
		}
		sub, ok := moduleSubpath(name, rel)
		if !ok {
			return nil
		}
		sum, err := writeHashed(filepath.Join(dir, ModulesName, filepath.FromSlash(sub)), r)
		rec.Modules[sub] = sum
		return err
	})
	if err != nil {
		return nil, err
	}
	switch {
	case bzSum == "":
		return nil, fmt.Errorf("%s has no member %s (inner= of pin %s)", debPath, pin.Inner, pin.Version)
	case bzSum != pin.InnerSHA256:
		return nil, &HashError{What: pin.Inner + " in " + filepath.Base(debPath), Want: pin.InnerSHA256, Got: bzSum}
	case len(rec.Modules) == 0:
		return nil, fmt.Errorf("%s has no modules under lib/modules/%s", debPath, rel)
	}
	return rec, nil
}

// moduleSubpath is name's path below the release's modules directory, which
// a merged-/usr package has under usr/lib/modules.
func moduleSubpath(name, rel string) (string, bool) {
	for _, p := range []string{"lib/modules/" + rel + "/", "usr/lib/modules/" + rel + "/"} {
		if sub, ok := strings.CutPrefix(name, p); ok && sub != "" && !strings.Contains(sub, "..") {
			return sub, true
		}
	}
	return "", false
}

func writeHashed(dest string, r io.Reader) (string, error) {
	if err := os.MkdirAll(filepath.Dir(dest), 0o755); err != nil {
		return "", err
	}
	f, err := os.OpenFile(dest, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		return "", err
	}
	h := sha256.New()
	if _, err := io.Copy(io.MultiWriter(f, h), r); err != nil {
		f.Close()
		return "", fmt.Errorf("write %s: %w", dest, err)
	}
	return hex.EncodeToString(h.Sum(nil)), f.Close()
}

// verifyImage checks a debian-image pin's cache entry: image.txt names this
// row and the release, the vmlinuz's SHA-256 is the pin's inner-sha256, and
// its header names the release. ErrNotBuilt when there is no entry.
func (b *Builder) verifyImage(pin Pin) (*Result, error) {
	key := imageKey(pin)
	dir := filepath.Join(b.root(), key)
	if _, err := os.Stat(dir); err != nil {
		return nil, fmt.Errorf("%w: %s has no %s (run: lockstep kernel build --pin %s)", ErrNotBuilt, pin.Version, dir, pin.Version)
	}
	v := &Verified{Dir: dir, BzImage: filepath.Join(dir, BzImageName)}
	var fail []string
	raw, err := safefile.ReadFile(filepath.Join(dir, ImageRecordName), 64<<20)
	var rec *ImageRecord
	if err == nil {
		rec, err = ParseImageRecord(raw)
	}
	switch {
	case err != nil:
		fail = append(fail, ImageRecordName+": "+err.Error())
	case rec.Row != pin.Row:
		fail = append(fail, fmt.Sprintf("%s names the row %q, not this pin's", ImageRecordName, rec.Row))
	case rec.Release != pin.Release():
		fail = append(fail, fmt.Sprintf("%s names release %s, the pin %s", ImageRecordName, rec.Release, pin.Release()))
	}
	if err := checkFileSHA256(v.BzImage, BzImageName, pin.InnerSHA256); err != nil {
		fail = append(fail, "vmlinuz: "+err.Error())
	}
	if hv, err := fileHeaderVersion(v.BzImage); err != nil {
		fail = append(fail, "header: "+err.Error())
	} else if v.HeaderVersion = hv; !strings.HasPrefix(hv, pin.Release()+" ") {
		fail = append(fail, fmt.Sprintf("header version %q does not start with release %s", hv, pin.Release()))
	}
	if len(fail) > 0 {
		return nil, &VerifyError{Dir: dir, Version: pin.Version, Failures: fail}
	}
	return &Result{Verified: *v, Pin: pin, Key: key, CacheHit: true, Image: &Image{Modules: filepath.Join(dir, ModulesName), Record: rec}}, nil
}

func fileHeaderVersion(path string) (string, error) {
	f, err := safefile.Open(path)
	if err != nil {
		return "", err
	}
	defer f.Close()
	return HeaderVersion(f)
}

// Image is what a debian-image pin adds to its Result: the modules the
// guest loads, and their recorded SHA-256s.
type Image struct {
	Modules string // the package's /lib/modules/<release> tree in the cache
	Record  *ImageRecord
}

// CheckModules re-hashes the module files a guest is about to load (paths
// below Modules) against the record, so a cache entry altered after it was
// unpacked is refused for what it would load.
func (im *Image) CheckModules(paths []string) error {
	var bad []string
	for _, p := range paths {
		sub, err := filepath.Rel(im.Modules, p)
		if err != nil || strings.HasPrefix(sub, "..") {
			bad = append(bad, p+": not below "+im.Modules)
			continue
		}
		want, ok := im.Record.Modules[filepath.ToSlash(sub)]
		if !ok {
			bad = append(bad, p+": not in "+ImageRecordName)
			continue
		}
		if err := checkFileSHA256(p, sub, want); err != nil {
			bad = append(bad, err.Error())
		}
	}
	if len(bad) > 0 {
		return fmt.Errorf("%w: modules of %s: %s", ErrRefused, filepath.Dir(im.Modules), strings.Join(bad, "; "))
	}
	return nil
}
