package kernel

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/lockstep-sandbox/lockstep/internal/safefile"
)

const unpackedMarker = ".lockstep-unpacked"

// BuildError is a failed configure or build step; Tail holds the end of its
// log for the report, Log the full log's path.
type BuildError struct {
	Stage string // "configure" or "build"
	Log   string
	Tail  string
	Err   error
}

func (e *BuildError) Error() string {
	return fmt.Sprintf("%s failed: %v (log: %s)", e.Stage, e.Err, e.Log)
}

func (e *BuildError) Unwrap() error { return e.Err }

// UnreproducedError is a fresh build whose bzImage differs from the one the
// recorded-bzImage table holds for its key. The build is not cached: every
// later use would refuse it.
type UnreproducedError struct {
	Version string
	Row     RecordedImage
	Got     string // the fresh bzImage's SHA-256
	Kept    string // the entry, left outside the cache for comparison
}

func (e *UnreproducedError) Error() string {
	return fmt.Sprintf("kernel %s built here has bzImage sha256 %s, but %s records %s for this pin, fragment and toolchain: "+
		"the build did not reproduce (a host tool the key does not cover, such as lz4, awk or perl, may differ, or the row is wrong); "+
		"not cached, kept in %s", e.Version, e.Got, e.Row.Where(), e.Row.BzImageSHA256, e.Kept)
}

// sources returns the unpacked source tree for pin, fetching, checking and
// unpacking it first when the cache lacks it. Nothing is unpacked before the
// download's (and for a .deb the inner tarball's) SHA-256 matched the pin.
func (b *Builder) sources(ctx context.Context, pin Pin) (string, error) {
	parent := filepath.Join(b.root(), "sources")
	dir := filepath.Join(parent, pin.SHA256)
	if top, err := os.ReadFile(filepath.Join(dir, unpackedMarker)); err == nil {
		return filepath.Join(dir, strings.TrimSpace(string(top))), nil
	}
	if err := os.MkdirAll(parent, 0o755); err != nil {
		return "", fmt.Errorf("create source cache: %w", err)
	}
	unlock, err := lockFile(ctx, dir+".lock", b.log())
	if err != nil {
		return "", err
	}
	defer unlock()
	if top, err := os.ReadFile(filepath.Join(dir, unpackedMarker)); err == nil {
		return filepath.Join(dir, strings.TrimSpace(string(top))), nil
	}
	os.RemoveAll(dir) // a half-written tree from a crashed run has no marker

	file, err := b.download(ctx, pin)
	if err != nil {
		return "", err
	}
	b.removeStale(filepath.Join(parent, ".unpack-"+pin.SHA256[:12]+"-*"))
	tmp, err := os.MkdirTemp(parent, ".unpack-"+pin.SHA256[:12]+"-")
	if err != nil {
		return "", fmt.Errorf("create unpack dir: %w", err)
	}
	defer os.RemoveAll(tmp)
	tarball := file
	if pin.Source == SourceDebian {
		tarball = filepath.Join(parent, filepath.Base(tmp)+".tar")
		defer os.Remove(tarball)
		stop := progress(b.log(), b.interval(), "unpack", func() string { return pin.Inner })
		sum, err := b.extractDebMember(ctx, file, pin.Inner, tarball)
		stop()
		if err != nil {
			return "", err
		}
		if sum != pin.InnerSHA256 {
			return "", &HashError{What: filepath.Base(file) + ":" + pin.Inner, Want: pin.InnerSHA256, Got: sum}
		}
	}
	listing := &lastLineWriter{w: io.Discard}
	stop := progress(b.log(), b.interval(), "unpack", listing.LastLine)
	var stderr bytes.Buffer
	err = command{log: b.log(), stdout: listing, stderr: &stderr}.run(ctx, "tar", "-x", "-v", "-f", tarball, "-C", tmp)
	stop()
	if err != nil {
		return "", fmt.Errorf("unpack %s: %w: %s", tarball, err, firstLine(stderr.String()))
	}
	ents, err := os.ReadDir(tmp)
	if err != nil {
		return "", err
	}
	if len(ents) != 1 || !ents[0].IsDir() {
		return "", fmt.Errorf("unpack %s: want one top-level directory, found %d entries", tarball, len(ents))
	}
	top := ents[0].Name()
	if _, err := os.Stat(filepath.Join(tmp, top, "Makefile")); err != nil {
		return "", fmt.Errorf("unpack %s: %s is not a kernel tree: %w", tarball, top, err)
	}
	if err := os.WriteFile(filepath.Join(tmp, unpackedMarker), []byte(top+"\n"), 0o644); err != nil {
		return "", err
	}
	if err := os.Rename(tmp, dir); err != nil {
		return "", fmt.Errorf("store sources: %w", err)
	}
	return filepath.Join(dir, top), nil
}

// build makes the kernel for pin in a temporary directory beside dir and
// renames it to dir when everything, build.txt included, is written.
func (b *Builder) build(ctx context.Context, pin Pin, key, dir string, start time.Time) (err error) {
	src, err := b.sources(ctx, pin)
	if err != nil {
		return err
	}
	// The caller holds key's lock, so any earlier build directory of this
	// key was left by a process that died mid-build.
	b.removeStale(filepath.Join(b.root(), ".build-"+key[:12]+"-*"))
	work, err := os.MkdirTemp(b.root(), ".build-"+key[:12]+"-")
	if err != nil {
		return fmt.Errorf("create build dir: %w", err)
	}
	frag, err := b.fragment(pin)
	if err != nil {
		os.RemoveAll(work)
		return err
	}
	logPath := filepath.Join(work, LogName)
	failedLog := dir + ".failed.log"
	defer func() {
		if err != nil {
			// Keep the log where the error message says it is.
			os.Rename(logPath, failedLog)
			var be *BuildError
			if errors.As(err, &be) {
				be.Log = failedLog
			}
		}
		os.RemoveAll(work)
	}()
	logf, err := os.Create(logPath)
	if err != nil {
		return err
	}
	defer logf.Close()
	kb := b.newKernelBuild(src, work, logf)
	cfg, err := kb.configure(ctx, frag, dir)
	if err != nil {
		return err
	}
	img, err := kb.compile(ctx, pin)
	if err != nil {
		return err
	}
	rec, err := kb.record(pin, key, frag, img, cfg, start)
	if err != nil {
		return err
	}
	if err := kb.finish(logf, map[string][]byte{BzImageName: img, ConfigName: cfg, RecordName: rec.Marshal()}); err != nil {
		return err
	}
	if err := b.store(work, dir, pin, rec); err != nil {
		return err
	}
	os.Remove(failedLog)
	os.Remove(dir + ".unfit.config")
	b.log().Info("kernel: built", "pin", pin.Version, "build", rec.BuildDuration, "cpu", rec.BuildCPU, "total", rec.Duration, "bzImage", fmt.Sprintf("%d bytes", len(img)))
	return nil
}

// kernelBuild is one build's make: the source tree, the object directory
// inside the build directory, and the log every step writes.
type kernelBuild struct {
	b        *Builder
	mk       command
	work     string
	obj      string
	logPath  string
	lw       *lastLineWriter
	buildDur time.Duration
	cpu      time.Duration
}

func (b *Builder) newKernelBuild(src, work string, logf *os.File) *kernelBuild {
	lw := &lastLineWriter{w: logf}
	obj := filepath.Join(work, "obj")
	return &kernelBuild{b: b, work: work, obj: obj, logPath: logf.Name(), lw: lw,
		mk: command{log: b.log(), dir: src, env: buildEnv(src, obj), onlyEnv: true, stdout: lw, stderr: lw}}
}

func (kb *kernelBuild) makeArgs(extra ...string) []string {
	return append([]string{"O=" + kb.obj, "ARCH=x86_64"}, extra...)
}

// configure writes the kernel's .config and returns it, checked against
// what frag requires; an unfit config is kept as dir.unfit.config.
func (kb *kernelBuild) configure(ctx context.Context, frag []byte, dir string) ([]byte, error) {
	// Configure: tinyconfig, then the fragment, then olddefconfig; later
	// assignments win, as in scripts/kconfig/merge_config.sh.
	stop := progress(kb.b.log(), kb.b.interval(), "configure", kb.lw.Last)
	err := kb.mk.run(ctx, "make", kb.makeArgs("tinyconfig")...)
	if err == nil {
		err = appendFile(filepath.Join(kb.obj, ".config"), frag)
	}
	if err == nil {
		err = kb.mk.run(ctx, "make", kb.makeArgs("olddefconfig")...)
	}
	stop()
	if err != nil {
		return nil, &BuildError{Stage: "configure", Log: kb.logPath, Tail: kb.lw.Tail(), Err: err}
	}
	cfg, err := os.ReadFile(filepath.Join(kb.obj, ".config"))
	if err != nil {
		return nil, err
	}
	if err := CheckConfig(filepath.Join(kb.obj, ".config"), cfg, RequiredOptions(frag)); err != nil {
		// Keep the unfit config for inspection beside the failed log.
		werr := safefile.WriteFile(dir+".unfit.config", cfg, 0o644)
		var u *UnfitError
		if errors.As(err, &u) && werr == nil {
			u.Config = dir + ".unfit.config"
		}
		return nil, err
	}
	return cfg, nil
}

// compile makes the bzImage and returns it, noting the build's wall and CPU
// time.
func (kb *kernelBuild) compile(ctx context.Context, pin Pin) ([]byte, error) {
	kb.b.log().Info("kernel: compiling", "pin", pin.Version, "jobs", kb.b.jobs(), "log", kb.logPath)
	buildStart := time.Now()
	stop := progress(kb.b.log(), kb.b.interval(), "build", kb.lw.Last)
	mkBuild := kb.mk
	mkBuild.cpu = &kb.cpu
	err := mkBuild.run(ctx, "make", kb.makeArgs(fmt.Sprintf("-j%d", kb.b.jobs()), "bzImage")...)
	stop()
	if err != nil {
		return nil, &BuildError{Stage: "build", Log: kb.logPath, Tail: kb.lw.Tail(), Err: err}
	}
	kb.buildDur = time.Since(buildStart)
	img, err := os.ReadFile(filepath.Join(kb.obj, "arch", "x86", "boot", "bzImage"))
	if err != nil {
		return nil, fmt.Errorf("read built bzImage: %w", err)
	}
	return img, nil
}

// record is build.txt of the built kernel.
func (kb *kernelBuild) record(pin Pin, key string, frag, img, cfg []byte, start time.Time) (*Record, error) {
	hv, err := HeaderVersion(bytes.NewReader(img))
	if err != nil {
		return nil, fmt.Errorf("built bzImage: %w", err)
	}
	t, err := toolchain()
	if err != nil {
		return nil, err
	}
	return &Record{
		Key: key, Pin: pin.Row, Version: pin.Version, ABI: pin.ABI, Source: pin.Describe(),
		SourceSHA256: pin.SHA256, InnerSHA256: pin.InnerSHA256, FragmentSHA256: sha256Hex(frag),
		Builder: BuilderVersion, Compiler: t.Compiler, Make: t.Make, Binutils: t.Binutils,
		BzImageSHA256: sha256Hex(img), BzImageSize: int64(len(img)), ConfigSHA256: sha256Hex(cfg),
		KernelVersion: hv, Duration: time.Since(start).Round(time.Second).String(),
		BuildDuration: kb.buildDur.Round(time.Second).String(), BuildCPU: kb.cpu.Round(time.Second).String(), Jobs: kb.b.jobs(),
		Built: time.Now().UTC().Format(time.RFC3339),
	}, nil
}

// finish writes files into the build directory, removes the objects and
// closes the log: the directory then holds what the cache keeps.
func (kb *kernelBuild) finish(logf *os.File, files map[string][]byte) error {
	for name, data := range files {
		if err := os.WriteFile(filepath.Join(kb.work, name), data, 0o644); err != nil {
			return err
		}
	}
	if err := os.RemoveAll(kb.obj); err != nil {
		return fmt.Errorf("remove objects: %w", err)
	}
	if err := logf.Close(); err != nil {
		return err
	}
	return os.Chmod(kb.work, 0o755) // MkdirTemp made it 0700
}

// store renames the finished build directory work to dir, unless a recorded
// build of the key made a different bzImage: that build did not reproduce,
// and work is kept as dir.unreproduced instead.
func (b *Builder) store(work, dir string, pin Pin, rec *Record) error {
	if row := lookupRecorded(b.recorded(), rec.Key); row != nil && row.BzImageSHA256 != rec.BzImageSHA256 {
		kept := dir + ".unreproduced"
		os.RemoveAll(kept)
		if err := os.Rename(work, kept); err != nil {
			kept = "nowhere (" + err.Error() + ")"
		}
		return &UnreproducedError{Version: pin.Version, Row: *row, Got: rec.BzImageSHA256, Kept: kept}
	}
	if err := os.Rename(work, dir); err != nil {
		return fmt.Errorf("store kernel: %w", err)
	}
	return nil
}

// BuildTimestamp is the build time every kernel claims (uname -v and the
// mtimes of the built-in initramfs). A fixed date, not the clock, so two
// builds of one key give the same bytes; `date -d` must parse it, or
// usr/gen_initramfs.sh falls back to the clock.
const BuildTimestamp = "Thu Jan  1 00:00:00 UTC 1970"

// buildEnv is the whole environment make runs in. Nothing of the caller's
// passes but PATH and TMPDIR: KCFLAGS, LOCALVERSION, ARCH, CROSS_COMPILE or
// MAKEFLAGS there would change the bytes behind the same cache key. The
// rest pins what kbuild would otherwise take from the machine: the
// clock, user and host name (docs: Documentation/kbuild/reproducible-builds.rst),
// the build number (.version), the locale and time zone of the scripts, and
// the absolute source and object paths (kbuild maps only the source tree's
// away in __FILE__; the file-prefix maps also cover debug information, off
// today, should a fragment switch it on).
func buildEnv(src, obj string) []string {
	prefixMaps := "-ffile-prefix-map=" + src + "/= -ffile-prefix-map=" + obj + "/="
	env := []string{
		"PATH=" + os.Getenv("PATH"),
		"LC_ALL=C",
		"TZ=UTC",
		"KBUILD_BUILD_TIMESTAMP=" + BuildTimestamp,
		"SOURCE_DATE_EPOCH=0",
		"KBUILD_BUILD_USER=lockstep",
		"KBUILD_BUILD_HOST=lockstep",
		"KBUILD_BUILD_VERSION=1",
		"KCFLAGS=" + prefixMaps,
		"KAFLAGS=" + prefixMaps,
	}
	if d := os.Getenv("TMPDIR"); d != "" {
		env = append(env, "TMPDIR="+d)
	}
	return env
}

func appendFile(path string, data []byte) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		return fmt.Errorf("append fragment: %w", err)
	}
	if _, err := io.Copy(f, bytes.NewReader(append([]byte("\n"), data...))); err != nil {
		f.Close()
		return fmt.Errorf("append fragment: %w", err)
	}
	return f.Close()
}

// removeStale deletes what a process that died mid-step left behind; callers
// hold the lock that covers pattern.
func (b *Builder) removeStale(pattern string) {
	stale, _ := filepath.Glob(pattern)
	for _, d := range stale {
		b.log().Info("kernel: removing what a dead process left", "path", d)
		os.RemoveAll(d)
	}
}
