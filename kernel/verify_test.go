package kernel

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// tLogHandler sends the builder's progress to t.Log.
type tLogHandler struct{ t testing.TB }

func (h tLogHandler) Enabled(context.Context, slog.Level) bool { return true }
func (h tLogHandler) Handle(_ context.Context, r slog.Record) error {
	var b strings.Builder
	b.WriteString(r.Message)
	r.Attrs(func(a slog.Attr) bool { b.WriteString(" " + a.String()); return true })
	h.t.Log(b.String())
	return nil
}
func (h tLogHandler) WithAttrs([]slog.Attr) slog.Handler { return h }
func (h tLogHandler) WithGroup(string) slog.Handler      { return h }

var realKernelMu sync.Mutex

// realKernel returns the cached, verified DefaultPin kernel, building it
// (many minutes) when the cache lacks it, as `go test` on a fresh machine must.
// It skips only when the machine has no compiler to build or key it with.
func realKernel(t testing.TB) *Result {
	t.Helper()
	if _, err := toolchain(); err != nil {
		t.Skipf("cannot key or build kernels here: %v", err)
	}
	realKernelMu.Lock()
	defer realKernelMu.Unlock()
	r, err := (&Builder{Log: slog.New(tLogHandler{t})}).Build(t.Context(), DefaultPin)
	if err != nil {
		t.Fatalf("Build(%s): %v", DefaultPin, err)
	}
	return r
}

func TestHeaderVersionRealBzImage(t *testing.T) {
	r := realKernel(t)
	f, err := os.Open(r.BzImage)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	got, err := HeaderVersion(f)
	if err != nil {
		t.Fatalf("HeaderVersion(%s): %v", r.BzImage, err)
	}
	if !strings.HasPrefix(got, DefaultPin+" (lockstep@lockstep) #") {
		t.Errorf("HeaderVersion(%s) = %q, want %q", r.BzImage, got, DefaultPin+" (lockstep@lockstep) #…")
	}
	if got != r.Record.KernelVersion {
		t.Errorf("HeaderVersion = %q, build.txt kernel-version = %q", got, r.Record.KernelVersion)
	}
	// The same string is in the decompressed kernel's linux_banner, which
	// we cannot read here; cross-check the offset arithmetic by hand instead.
	img, _ := os.ReadFile(r.BzImage)
	off := int(binary.LittleEndian.Uint16(img[0x20E:])) + 0x200
	if !bytes.HasPrefix(img[off:], []byte(got+"\x00")) {
		t.Errorf("version string is not NUL-terminated at 0x200+[0x20E] = %#x", off)
	}
}

func TestVerifyRealKernel(t *testing.T) {
	r := realKernel(t)
	pin, _ := Lookup(DefaultPin)
	req := RequiredOptions(Fragment())
	if r.Options != len(req) || r.Record.Version != DefaultPin || r.Record.ABI != pin.ABI {
		t.Errorf("Build result = %+v, want %d options checked for pin %s", r, len(req), DefaultPin)
	}
	// A cache hit verifies in well under the 2 s the issue allows.
	start := time.Now()
	hit, err := (&Builder{}).Build(t.Context(), DefaultPin)
	if err != nil {
		t.Fatal(err)
	}
	if d := time.Since(start); !hit.CacheHit || d > 2*time.Second {
		t.Errorf("second Build: CacheHit=%v in %s, want a hit under 2s", hit.CacheHit, d)
	}
	if p, err := Path(t.Context(), DefaultPin, nil); err != nil || p != r.BzImage {
		t.Errorf("Path = %q, %v; want %q", p, err, r.BzImage)
	}
	if v, err := VerifyImage(r.BzImage); err != nil || v.HeaderVersion == "" {
		t.Errorf("VerifyImage(%s) = %v, %v", r.BzImage, v, err)
	}
}

// copyEntry copies a cache entry's files into a fresh directory.
func copyEntry(t *testing.T, from string) string {
	t.Helper()
	to := filepath.Join(t.TempDir(), filepath.Base(from))
	if err := os.Mkdir(to, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, n := range []string{BzImageName, ConfigName, RecordName} {
		b, err := os.ReadFile(filepath.Join(from, n))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(to, n), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return to
}

func TestVerifyTampered(t *testing.T) {
	r := realKernel(t)
	pin, _ := Lookup(DefaultPin)
	req := RequiredOptions(Fragment())
	if _, err := VerifyDir(copyEntry(t, r.Dir), pin, r.Key, req); err != nil {
		t.Fatalf("VerifyDir(untouched copy) = %v", err)
	}
	img, _ := os.ReadFile(r.BzImage)
	hv := r.HeaderVersion
	tests := []struct {
		Name   string
		Tamper func(t *testing.T, dir string)
		Pin    Pin
		Want   []string // each must be in the error
	}{
		{"FlippedByteInBzImage", func(t *testing.T, dir string) {
			b := append([]byte(nil), img...)
			b[len(b)/2] ^= 0x01
			write(t, filepath.Join(dir, BzImageName), b)
		}, pin, []string{"bzImage sha256 is ", ", build.txt says " + r.Record.BzImageSHA256}},
		{"RequiredOptionRemoved", func(t *testing.T, dir string) {
			cfg, _ := os.ReadFile(filepath.Join(dir, ConfigName))
			write(t, filepath.Join(dir, ConfigName), bytes.Replace(cfg, []byte("CONFIG_SECURITY_LANDLOCK=y\n"), []byte("# CONFIG_SECURITY_LANDLOCK is not set\n"), 1))
		}, pin, []string{"config lacks required option(s) CONFIG_SECURITY_LANDLOCK=y", "config sha256 is "}},
		{"HeaderVersionOfAnotherKernel", func(t *testing.T, dir string) {
			// Rewrite the header string and the record's hash so that only
			// the version check can notice.
			b := append([]byte(nil), img...)
			off := int(binary.LittleEndian.Uint16(b[0x20E:])) + 0x200
			copy(b[off:], "7.2.99")
			write(t, filepath.Join(dir, BzImageName), b)
			rec, _ := os.ReadFile(filepath.Join(dir, RecordName))
			write(t, filepath.Join(dir, RecordName), bytes.Replace(rec, []byte(r.Record.BzImageSHA256), []byte(sha256Hex(b)), 1))
		}, pin, []string{`bzImage header version is "7.2.99`, `want it to start with "7.2.13"`}},
		{"OtherPin", func(t *testing.T, dir string) {}, func() Pin { p, _ := Lookup("7.2.9"); return p }(),
			[]string{`build.txt version is "7.2.13", want "7.2.9"`, `header version is "` + hv + `", want it to start with "7.2.9"`}},
		{"MissingRecord", func(t *testing.T, dir string) { os.Remove(filepath.Join(dir, RecordName)) }, pin,
			[]string{"build.txt: stat "}},
	}
	for _, tt := range tests {
		t.Run(tt.Name, func(t *testing.T) {
			dir := copyEntry(t, r.Dir)
			tt.Tamper(t, dir)
			v, err := VerifyDir(dir, tt.Pin, "", req)
			var ve *VerifyError
			if v != nil || !errors.As(err, &ve) || !errors.Is(err, ErrRefused) {
				t.Fatalf("VerifyDir = %v, %v; want a *VerifyError", v, err)
			}
			for _, w := range tt.Want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("VerifyDir error = %q\nwant it to contain %q", err, w)
				}
			}
			// Only a missing option makes the kernel unfit (exit 3).
			if got, want := errors.Is(err, ErrUnfit), tt.Name == "RequiredOptionRemoved"; got != want {
				t.Errorf("errors.Is(VerifyDir error, ErrUnfit) = %v, want %v", got, want)
			}
		})
	}
}

// TestBuildRefusesTamperedCache runs Build against a temporary cache that
// holds a tampered copy of the real kernel under its real key: the builder
// must refuse it, naming the check, and must not rebuild over it.
func TestBuildRefusesTamperedCache(t *testing.T) {
	r := realKernel(t)
	cache := t.TempDir()
	dir := filepath.Join(cache, r.Key)
	if err := os.Rename(copyEntry(t, r.Dir), dir); err != nil {
		t.Fatal(err)
	}
	b := &Builder{CacheDir: cache}
	if _, err := b.Build(t.Context(), DefaultPin); err != nil {
		t.Fatalf("Build on an intact copy = %v", err)
	}
	img, _ := os.ReadFile(filepath.Join(dir, BzImageName))
	img[0x300] ^= 0x80
	write(t, filepath.Join(dir, BzImageName), img)
	_, err := b.Build(t.Context(), DefaultPin)
	if !errors.Is(err, ErrRefused) || !strings.Contains(err.Error(), "bzImage sha256 is") {
		t.Fatalf("Build on a flipped byte = %v, want ErrRefused naming the bzImage sha256 check", err)
	}
	if _, err := Path(t.Context(), DefaultPin, nil); err != nil {
		t.Errorf("the real cache was affected: %v", err)
	}
	if _, err := b.Verify(t.Context(), "7.2.9"); !errors.Is(err, ErrNotBuilt) {
		t.Errorf("Verify(7.2.9) on a cache without it = %v, want ErrNotBuilt", err)
	}
}

func write(t *testing.T, path string, b []byte) {
	t.Helper()
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
}

func TestHeaderVersionErrors(t *testing.T) {
	mk := func(flag uint16, magic string, off uint16, tail string) []byte {
		b := make([]byte, 0x400)
		binary.LittleEndian.PutUint16(b[0x1FE:], flag)
		copy(b[0x202:], magic)
		binary.LittleEndian.PutUint16(b[0x20E:], off)
		if 0x200+int(off) < len(b) {
			copy(b[0x200+int(off):], tail)
		}
		return b
	}
	tests := []struct {
		Name, Want string
		Img        []byte
	}{
		{"Good", "", mk(0xAA55, "HdrS", 0x100, "7.2.13 (x@y) #1\x00junk")},
		{"TooShort", "read setup header", []byte("MZ")},
		{"NoBootFlag", "boot flag at 0x1FE is 0x0000", mk(0, "HdrS", 0x100, "7\x00")},
		{"NoMagic", `magic at 0x202 is "HdrX"`, mk(0xAA55, "HdrX", 0x100, "7\x00")},
		{"ZeroOffset", "kernel_version field at 0x20E is 0", mk(0xAA55, "HdrS", 0, "")},
		{"PastEnd", "read version string at 0x1200", mk(0xAA55, "HdrS", 0x1000, "")},
		{"NoNUL", "has no NUL", mk(0xAA55, "HdrS", 0x100, strings.Repeat("7", 0x100))},
		{"Empty", "is empty", mk(0xAA55, "HdrS", 0x100, "\x00")},
	}
	for _, tt := range tests {
		t.Run(tt.Name, func(t *testing.T) {
			got, err := HeaderVersion(bytes.NewReader(tt.Img))
			if tt.Want == "" {
				if err != nil || got != "7.2.13 (x@y) #1" {
					t.Errorf("HeaderVersion = %q, %v; want \"7.2.13 (x@y) #1\"", got, err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tt.Want) {
				t.Errorf("HeaderVersion = %q, %v; want error containing %q", got, err, tt.Want)
			}
		})
	}
}

func TestVersionMatches(t *testing.T) {
	tests := []struct {
		Header, Version string
		Want            bool
	}{
		{"7.2.13 (lockstep@lockstep) #1 SMP", "7.2.13", true},
		{"7.2.13", "7.2.13", true},
		{"7.2.13-rc1 (x)", "7.2.13", true},
		{"7.2.13+ (x)", "7.2.13", true},
		{"7.2.13 (x)", "7.2.1", false},
		{"7.2.130 (x)", "7.2.13", false},
		{"6.12.1 (x)", "7.2.13", false},
		{"", "7.2.13", false},
	}
	for _, tt := range tests {
		if got := versionMatches(tt.Header, tt.Version); got != tt.Want {
			t.Errorf("versionMatches(%q, %q) = %v, want %v", tt.Header, tt.Version, got, tt.Want)
		}
	}
}

func FuzzHeaderVersion(f *testing.F) {
	b := make([]byte, 0x400)
	binary.LittleEndian.PutUint16(b[0x1FE:], 0xAA55)
	copy(b[0x202:], "HdrS")
	binary.LittleEndian.PutUint16(b[0x20E:], 0x100)
	copy(b[0x300:], "7.2.13 (x@y) #1\x00")
	f.Add(b)
	f.Add([]byte("MZ"))
	f.Fuzz(func(t *testing.T, img []byte) {
		v, err := HeaderVersion(bytes.NewReader(img))
		if err != nil {
			if v != "" {
				t.Fatal("version with error")
			}
			return
		}
		if v == "" || strings.IndexByte(v, 0) >= 0 || len(v) > maxVersionLen {
			t.Fatalf("HeaderVersion = %q", v)
		}
	})
}

// BenchmarkVerifyDir is the cost of a cache hit's verification (hashing a
// few MB and reading the header), which every boot pays.
func BenchmarkVerifyDir(b *testing.B) {
	r := realKernel(b)
	pin, _ := Lookup(DefaultPin)
	req := RequiredOptions(Fragment())
	b.ReportAllocs()
	for b.Loop() {
		if _, err := VerifyDir(r.Dir, pin, r.Key, req); err != nil {
			b.Fatal(err)
		}
	}
}
