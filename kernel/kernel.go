package kernel

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"time"

	"github.com/lockstep-sandbox/lockstep/internal/safefile"
)

// Builder fetches, configures, builds, caches and verifies pinned kernels.
// The zero value is ready to use.
type Builder struct {
	// CacheDir holds one directory per cache key plus downloads/ and
	// sources/. Zero: $XDG_CACHE_HOME/lockstep/kernels, or
	// ~/.cache/lockstep/kernels when XDG_CACHE_HOME is unset.
	CacheDir string
	// Log receives progress (Info) and every external command as a shell
	// line (Debug). Nil: nothing is logged.
	Log *slog.Logger
	// Jobs is make's -j. Zero: the number of CPUs.
	Jobs int
	// ProgressInterval is how often long stages log a progress line.
	// Zero: 3 s.
	ProgressInterval time.Duration
	// Pins replaces the pin table. Nil: AllPins(), the shipped pins and
	// those of pin files.
	Pins []Pin
	// Fragment replaces the embedded configuration fragment. Nil: Fragment().
	Fragment []byte
	// Recorded replaces the embedded recorded-bzImage table. Nil:
	// RecordedImages().
	Recorded []RecordedImage
}

// Path returns the path of the verified bzImage for pin (a version from the
// pin table; "" means DefaultPin), building it first when it is not cached.
// log may be nil.
func Path(ctx context.Context, pin string, log *slog.Logger) (string, error) {
	r, err := (&Builder{Log: log}).Build(ctx, pin)
	if err != nil {
		return "", err
	}
	return r.BzImage, nil
}

// Result is a verified kernel in the cache.
type Result struct {
	Verified
	Pin      Pin
	Key      string
	CacheHit bool          // true when nothing was built
	Elapsed  time.Duration // wall time of the whole call, verification included
	// NewRow is the table row that would record this kernel, set when it
	// is unrecorded (Verified.Recorded is nil): this machine's toolchain,
	// the key and the bzImage's SHA-256.
	NewRow *RecordedImage
	// Image is set for a debian-image pin: Debian's kernel with its own
	// modules (Verified.Record is then nil: nothing was built).
	Image *Image
}

func (b *Builder) log() *slog.Logger {
	if b.Log == nil {
		return slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	return b.Log
}

func (b *Builder) interval() time.Duration {
	if b.ProgressInterval <= 0 {
		return 3 * time.Second
	}
	return b.ProgressInterval
}

func (b *Builder) jobs() int {
	if b.Jobs > 0 {
		return b.Jobs
	}
	return runtime.NumCPU()
}

// fragment is the configuration fragment as applied to pin: the builder's
// (or the embedded) fragment with the pin version's overlays (FragmentFor).
func (b *Builder) fragment(pin Pin) ([]byte, error) {
	base := fragment
	if b.Fragment != nil {
		base = b.Fragment
	}
	return FragmentFor(pin.Version, base)
}

// Required returns the options every kernel this builder makes for pin
// must have.
func (b *Builder) Required(pin Pin) ([]string, error) {
	f, err := b.fragment(pin)
	if err != nil {
		return nil, err
	}
	return RequiredOptions(f), nil
}

// DefaultCacheDir is where kernels are cached unless Builder.CacheDir says
// otherwise.
func DefaultCacheDir() string {
	base := os.Getenv("XDG_CACHE_HOME")
	if base == "" {
		home, err := os.UserHomeDir()
		if err != nil {
			home = os.TempDir()
		}
		base = filepath.Join(home, ".cache")
	}
	return filepath.Join(base, "lockstep", "kernels")
}

func (b *Builder) recorded() []RecordedImage {
	if b.Recorded != nil {
		return b.Recorded
	}
	return RecordedImages()
}

func (b *Builder) root() string {
	if b.CacheDir != "" {
		return b.CacheDir
	}
	return DefaultCacheDir()
}

// lockEntry makes the cache and takes the lock of its entry dir (a built
// kernel, an unpacked image), reporting whether the entry is there once the
// lock is held: another process made it while this one waited.
func (b *Builder) lockEntry(ctx context.Context, dir string) (unlock func(), made bool, err error) {
	if err := os.MkdirAll(b.root(), 0o755); err != nil {
		return nil, false, fmt.Errorf("create kernel cache: %w", err)
	}
	if unlock, err = lockFile(ctx, dir+".lock", b.log()); err != nil {
		return nil, false, err
	}
	_, err = os.Stat(dir)
	return unlock, err == nil, nil
}

// Lookup returns the builder's pin for version ("" means DefaultPin).
func (b *Builder) Lookup(version string) (Pin, error) {
	if b.Pins != nil {
		return lookupIn(b.Pins, version)
	}
	return Lookup(version)
}

// Toolchain is the first line of `gcc --version`, `make --version` and
// `ld --version`.
type Toolchain struct{ Compiler, Make, Binutils string }

var toolchain = sync.OnceValues(func() (Toolchain, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var t Toolchain
	c := command{log: slog.New(slog.NewTextHandler(io.Discard, nil))}
	for _, x := range []struct {
		name string
		dst  *string
	}{{"gcc", &t.Compiler}, {"make", &t.Make}, {"ld", &t.Binutils}} {
		out, err := c.output(ctx, x.name, "--version")
		if err != nil {
			return t, fmt.Errorf("%s --version: %w (kernel builds and cache keys need gcc, make and binutils)", x.name, err)
		}
		*x.dst = firstLine(out)
	}
	return t, nil
})

// Key returns pin's cache key with this machine's compiler, make and
// binutils; a debian-image pin's key is its row's alone (imageKey).
func (b *Builder) Key(pin Pin) (string, error) {
	if pin.Source == SourceDebianImage {
		return imageKey(pin), nil
	}
	t, err := toolchain()
	if err != nil {
		return "", err
	}
	frag, err := b.fragment(pin)
	if err != nil {
		return "", err
	}
	return Key(KeyInputs{PinRow: pin.Row, Fragment: frag, Builder: BuilderVersion, Compiler: t.Compiler, Make: t.Make, Binutils: t.Binutils}), nil
}

// ErrNotBuilt means the pin's kernel is not in the cache.
var ErrNotBuilt = errors.New("kernel not built")

// Verify checks the cached kernel for version without building anything:
// ErrNotBuilt when it is absent, a *VerifyError when a check fails.
func (b *Builder) Verify(ctx context.Context, version string) (*Result, error) {
	start := time.Now()
	pin, err := b.Lookup(version)
	if err != nil {
		return nil, err
	}
	if pin.Source == SourceDebianImage {
		r, err := b.verifyImage(pin)
		if r != nil {
			r.Elapsed = time.Since(start)
		}
		return r, err
	}
	key, err := b.Key(pin)
	if err != nil {
		return nil, err
	}
	dir := filepath.Join(b.root(), key)
	if _, err := os.Stat(dir); err != nil {
		return nil, fmt.Errorf("%w: %s has no %s (run: lockstep kernel build --pin %s)", ErrNotBuilt, pin.Version, dir, pin.Version)
	}
	req, err := b.Required(pin)
	if err != nil {
		return nil, err
	}
	v, err := verifyDir(dir, pin, key, req, b.recorded())
	if err != nil {
		return nil, err
	}
	r := &Result{Verified: *v, Pin: pin, Key: key, CacheHit: true, Elapsed: time.Since(start)}
	if v.Recorded == nil {
		t, err := toolchain()
		if err != nil {
			return nil, err
		}
		r.NewRow = &RecordedImage{Version: pin.Version, Compiler: t.Compiler, Make: t.Make, Binutils: t.Binutils, Key: key, BzImageSHA256: v.Record.BzImageSHA256}
	}
	return r, nil
}

// Build returns the verified kernel for version, building it first when it
// is not cached. Two processes building one key do it once: the second waits
// for the first's lock and then finds the result. A cached kernel that fails
// verification is refused, never silently rebuilt.
func (b *Builder) Build(ctx context.Context, version string) (*Result, error) {
	start := time.Now()
	pin, err := b.Lookup(version)
	if err != nil {
		return nil, err
	}
	if pin.Source == SourceDebianImage {
		return b.buildImage(ctx, pin, start)
	}
	key, err := b.Key(pin)
	if err != nil {
		return nil, err
	}
	dir := filepath.Join(b.root(), key)
	if r, err := b.Verify(ctx, pin.Version); !errors.Is(err, ErrNotBuilt) {
		if err != nil {
			return nil, err
		}
		r.Elapsed = time.Since(start)
		b.log().Debug("kernel: cache hit", "pin", pin.Version, "dir", dir)
		if r.Recorded == nil {
			b.log().Info("kernel: cached kernel is unrecorded: "+BzImagesFile+" has no row for its key, so only its own build.txt vouches for it", "pin", pin.Version, "key", key[:16])
		}
		return r, nil
	}
	frag, err := b.fragment(pin)
	if err != nil {
		return nil, err
	}
	if err := checkTools(frag, lookTool); err != nil {
		return nil, err
	}
	unlock, made, err := b.lockEntry(ctx, dir)
	if err != nil {
		return nil, err
	}
	defer unlock()
	if made { // another process built it meanwhile
		return b.Verify(ctx, pin.Version)
	}
	b.log().Info("kernel: building", "pin", pin.Version, "key", key[:16], "cache", dir)
	if err := b.build(ctx, pin, key, dir, start); err != nil {
		return nil, err
	}
	r, err := b.Verify(ctx, pin.Version)
	if err != nil {
		return nil, fmt.Errorf("fresh build: %w", err)
	}
	r.CacheHit = false
	r.Elapsed = time.Since(start)
	return r, nil
}

// Entry is one row of List: a pin and what the cache holds for it, or a
// cache directory that no pin's current key names.
type Entry struct {
	Pin       *Pin   // nil for a stale directory
	Key       string // the current key, or the stale directory's name
	Dir       string
	State     string // "verified (recorded)", "verified (unrecorded)", "refused: …", "building …", "not built", "stale"
	Source    string // "downloaded", "unpacked", or ""
	Record    *Record
	KeyErrMsg string // why no key could be computed, if so
}

// List reports every pin with its cache state, then cache directories no
// pin's key names (left by an older fragment, compiler or builder).
func (b *Builder) List(ctx context.Context) ([]Entry, error) {
	pins := b.Pins
	if pins == nil {
		var err error
		if pins, err = AllPins(); err != nil {
			return nil, err
		}
	}
	known := map[string]bool{}
	var out []Entry
	for i := range pins {
		p := pins[i]
		e := Entry{Pin: &p, Source: b.sourceState(p)}
		key, err := b.Key(p)
		if err != nil {
			e.State, e.KeyErrMsg = "unknown", err.Error()
			out = append(out, e)
			continue
		}
		e.Key, e.Dir = key, filepath.Join(b.root(), key)
		known[key] = true
		r, err := b.Verify(ctx, p.Version)
		switch {
		case errors.Is(err, ErrNotBuilt) && lockHeld(e.Dir+".lock"):
			e.State = "building (another process holds the lock)"
		case errors.Is(err, ErrNotBuilt):
			e.State = "not built"
		case err != nil:
			var ve *VerifyError
			if errors.As(err, &ve) {
				e.State = "refused: " + strings.Join(ve.Failures, "; ")
			} else {
				e.State = "error: " + err.Error()
			}
		case r.Image != nil:
			e.State = fmt.Sprintf("verified (Debian's image, release %s, %d module files)", r.Image.Record.Release, len(r.Image.Record.Modules))
		case r.Recorded == nil:
			e.State, e.Record = "verified (unrecorded)", r.Record
		default:
			e.State, e.Record = "verified (recorded)", r.Record
		}
		out = append(out, e)
	}
	ents, err := os.ReadDir(b.root())
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return out, fmt.Errorf("read kernel cache: %w", err)
	}
	for _, d := range ents {
		if d.IsDir() && len(d.Name()) == 64 && !known[d.Name()] {
			e := Entry{Key: d.Name(), Dir: filepath.Join(b.root(), d.Name()), State: "stale"}
			if raw, err := safefile.ReadFile(filepath.Join(e.Dir, RecordName), 1<<20); err == nil {
				e.Record, _ = ParseRecord(raw)
			}
			out = append(out, e)
		}
	}
	return out, nil
}

func (b *Builder) sourceState(p Pin) string {
	if _, err := os.Stat(filepath.Join(b.root(), "sources", p.SHA256, unpackedMarker)); err == nil {
		return "unpacked"
	}
	if _, err := os.Stat(filepath.Join(b.root(), "downloads", p.SHA256+"-"+downloadName(p))); err == nil {
		return "downloaded"
	}
	return ""
}
