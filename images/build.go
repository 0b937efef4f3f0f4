package images

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/lockstep-sandbox/lockstep/internal/safefile"
	"github.com/lockstep-sandbox/lockstep/internal/shellquote"
)

// Options configures Build and Lookup. The zero value builds into the
// default cache from this machine's apt sources.
type Options struct {
	// CacheDir holds the images; "" means <os.UserCacheDir>/lockstep/images.
	CacheDir string
	// AptRoot is where the machine's apt sources are read; "" means
	// LOCKSTEP_APT_ROOT or /.
	AptRoot string
	// Lock allows installed packages the recipe does not list (the
	// dependencies of a shorter list), so that Image.Manifest can be
	// committed as the new closure. Listed packages must still match.
	Lock bool
	// Rebuild builds even when a matching image is cached, replacing it.
	Rebuild bool
	// Log receives stage progress (Info) and every external command as a
	// shell line (Debug); nil discards.
	Log *slog.Logger
}

// Image is a built root file system.
type Image struct {
	Name string
	// Dir is the image directory; Root (= Dir/root) is the file system.
	Dir, Root string
	// RecipeKey is the recipe's Key; ManifestHash the Manifest's Hash.
	RecipeKey, ManifestHash string
	Manifest                Manifest
	// Cached is true when Build found the image rather than making it.
	Cached bool
	// Record is image.json.
	Record Record
}

// Record is the schema-versioned image.json beside the root.
type Record struct {
	Schema         int     `json:"schema_version"`
	Name           string  `json:"name"`
	Suite          string  `json:"suite"`
	Builder        string  `json:"builder"`
	RecipeKey      string  `json:"recipe_key"`
	ManifestSHA256 string  `json:"manifest_sha256"`
	Packages       int     `json:"packages"`
	Locked         bool    `json:"lock_build"`
	Debootstrap    string  `json:"debootstrap"`
	BuiltAt        string  `json:"built_at"`
	Seconds        float64 `json:"build_seconds"`
}

const recordSchema = 1

// BuildError is a failed build step; Error is one line, Tail holds the end
// of the build log for the caller to show.
type BuildError struct {
	Step string
	Err  error
	Log  string
	Tail string
}

func (e *BuildError) Error() string {
	if e.Log != "" {
		return fmt.Sprintf("%s: %v (log: %s)", e.Step, e.Err, e.Log)
	}
	return fmt.Sprintf("%s: %v", e.Step, e.Err)
}

func (e *BuildError) Unwrap() error { return e.Err }

// ErrNotBuilt is returned by Lookup when the recipe's image is not cached.
var ErrNotBuilt = errors.New("image not built")

func (o *Options) cacheDir() (string, error) {
	if o.CacheDir != "" {
		return o.CacheDir, nil
	}
	c, err := os.UserCacheDir()
	if err != nil {
		return "", fmt.Errorf("find the cache directory: %w", err)
	}
	return filepath.Join(c, "lockstep", "images"), nil
}

func (o *Options) log() *slog.Logger {
	if o.Log != nil {
		return o.Log
	}
	return slog.New(slog.DiscardHandler)
}

// Lookup returns the cached image of r after checking it: the manifest
// re-derived from the root's dpkg status must hash to what image.json and
// manifest.txt record, and must match the recipe. ErrNotBuilt when absent.
func Lookup(r *Recipe, opts Options) (*Image, error) {
	cache, err := opts.cacheDir()
	if err != nil {
		return nil, err
	}
	return check(r, filepath.Join(cache, r.DirName()))
}

func check(r *Recipe, dir string) (*Image, error) {
	b, err := os.ReadFile(filepath.Join(dir, "image.json"))
	if os.IsNotExist(err) {
		return nil, fmt.Errorf("image %s (%s): %w; build it with: lockstep image build %s", r.Name, dir, ErrNotBuilt, r.Name)
	}
	if err != nil {
		return nil, fmt.Errorf("image %s: %w", r.Name, err)
	}
	var rec Record
	if err := json.Unmarshal(b, &rec); err != nil {
		return nil, fmt.Errorf("image %s: image.json: %w", r.Name, err)
	}
	if rec.Schema != recordSchema || rec.RecipeKey != r.Key() {
		return nil, fmt.Errorf("image %s: image.json has schema %d and recipe key %.16s, want schema %d and key %.16s", r.Name, rec.Schema, rec.RecipeKey, recordSchema, r.Key())
	}
	root := filepath.Join(dir, "root")
	m, err := manifestOf(root)
	if err != nil {
		return nil, fmt.Errorf("image %s: %w", r.Name, err)
	}
	stored, err := os.ReadFile(filepath.Join(dir, "manifest.txt"))
	if err != nil {
		return nil, fmt.Errorf("image %s: %w", r.Name, err)
	}
	if h := m.Hash(); h != rec.ManifestSHA256 || !bytes.Equal(stored, m.Render()) {
		return nil, fmt.Errorf("image %s: the root's packages hash to %s, image.json records %s; rebuild with: lockstep image build --rebuild %s", r.Name, h, rec.ManifestSHA256, r.Name)
	}
	if d := m.Diff(r, rec.Locked); len(d) > 0 {
		return nil, fmt.Errorf("image %s does not match its recipe: %s", r.Name, strings.Join(d, "; "))
	}
	return &Image{Name: r.Name, Dir: dir, Root: root, RecipeKey: rec.RecipeKey, ManifestHash: rec.ManifestSHA256, Manifest: m, Record: rec}, nil
}

func manifestOf(root string) (Manifest, error) {
	st, err := os.ReadFile(filepath.Join(root, "var/lib/dpkg/status"))
	if err != nil {
		return nil, fmt.Errorf("read the root's dpkg status: %w", err)
	}
	return ParseDpkgStatus(st)
}

// Build makes the image of r (or returns the cached one, checked, unless
// opts.Rebuild): debootstrap --variant=minbase of r.Suite from the machine's
// own apt URIs, then apt-get install of every listed name=version in a
// chroot, then the check that the installed set is exactly the list. The
// root is assembled in a temporary directory and renamed into place.
func Build(ctx context.Context, r *Recipe, opts Options) (img *Image, err error) {
	log := opts.log()
	cache, err := opts.cacheDir()
	if err != nil {
		return nil, err
	}
	final := filepath.Join(cache, r.DirName())
	if !opts.Rebuild {
		log.Info(r.Name+": checking the cached image", "dir", final)
		if img, err := check(r, final); err == nil {
			img.Cached = true
			return img, nil
		} else if !errors.Is(err, ErrNotBuilt) {
			log.Warn("cached image refused; rebuilding", "err", err)
		}
	}
	debootstrap, srcs, err := buildTools(r, opts)
	if err != nil {
		return nil, err
	}
	tmp, logf, err := buildDir(cache, r)
	if err != nil {
		return nil, err
	}
	logPath := logf.Name()
	b := &builder{ctx: ctx, log: log, out: logf, logPath: logPath, root: filepath.Join(tmp, "root")}
	defer func() {
		b.unmountAll()
		logf.Close()
		if err != nil {
			keepFailed(log, err, tmp, logPath, filepath.Join(cache, r.DirName()+".failed.log"))
		}
	}()
	start := time.Now()
	debVersion := strings.TrimSpace(strings.TrimPrefix(b.output(debootstrap, "--version"), "debootstrap"))
	if err := b.bootstrap(debootstrap, r.Suite, srcs[0].URI, filepath.Join(cache, "debs")); err != nil {
		return nil, err
	}
	if err := b.install(r, srcs, opts.Lock); err != nil {
		return nil, err
	}
	m, err := b.finish(r, opts.Lock)
	if err != nil {
		return nil, err
	}
	rec := Record{Schema: recordSchema, Name: r.Name, Suite: r.Suite, Builder: BuilderVersion, RecipeKey: r.Key(),
		ManifestSHA256: m.Hash(), Packages: len(m), Locked: opts.Lock, Debootstrap: debVersion,
		BuiltAt: time.Now().UTC().Format(time.RFC3339), Seconds: time.Since(start).Round(time.Millisecond).Seconds()}
	if err := writeImage(tmp, final, m, rec); err != nil {
		return nil, err
	}
	log.Info("image built", "dir", final, "manifest", rec.ManifestSHA256, "elapsed", time.Since(start).Round(time.Second))
	return &Image{Name: r.Name, Dir: final, Root: filepath.Join(final, "root"), RecipeKey: rec.RecipeKey,
		ManifestHash: rec.ManifestSHA256, Manifest: m, Record: rec}, nil
}

// buildTools checks what a build needs (root, debootstrap) and returns
// debootstrap's path and the machine's apt sources for r's suite.
func buildTools(r *Recipe, opts Options) (string, []SuiteSource, error) {
	if os.Geteuid() != 0 {
		return "", nil, errors.New("building an image needs root (debootstrap and chroot); run it as root")
	}
	debootstrap, err := exec.LookPath("debootstrap")
	if err != nil {
		return "", nil, errors.New("debootstrap is not installed; install it with: apt-get install debootstrap")
	}
	aptRootDir := opts.AptRoot
	if aptRootDir == "" {
		aptRootDir = aptRoot()
	}
	all, err := HostSources(aptRootDir)
	if err != nil {
		return "", nil, err
	}
	srcs, err := SourcesFor(r.Suite, all)
	if err != nil {
		return "", nil, err
	}
	return debootstrap, srcs, nil
}

// buildDir makes the temporary build directory of r in cache and the build
// log inside it; on an error nothing is left.
func buildDir(cache string, r *Recipe) (string, *os.File, error) {
	if err := os.MkdirAll(cache, 0o755); err != nil {
		return "", nil, fmt.Errorf("create the image cache: %w", err)
	}
	tmp, err := os.MkdirTemp(cache, r.DirName()+".tmp-")
	if err != nil {
		return "", nil, fmt.Errorf("create a build directory: %w", err)
	}
	if err := os.Chmod(tmp, 0o755); err != nil {
		os.RemoveAll(tmp)
		return "", nil, err
	}
	logf, err := os.Create(filepath.Join(tmp, "build.log"))
	if err != nil {
		os.RemoveAll(tmp)
		return "", nil, fmt.Errorf("create the build log: %w", err)
	}
	return tmp, logf, nil
}

// keepFailed cleans up after a failed build: the log is kept at keep (and
// named in err's BuildError) and tmp removed, unless something is still
// mounted below it.
func keepFailed(log *slog.Logger, err error, tmp, logPath, keep string) {
	if mounted(tmp) {
		log.Error("build directory still has mounts; left in place", "dir", tmp)
		return
	}
	if lb, rerr := os.ReadFile(logPath); rerr == nil && safefile.WriteFile(keep, lb, 0o644) == nil {
		var be *BuildError
		if errors.As(err, &be) {
			be.Log = keep
		}
	}
	_ = os.RemoveAll(tmp)
}

// bootstrap runs debootstrap --variant=minbase of suite from uri into the
// root, its downloads cached in debs.
func (b *builder) bootstrap(debootstrap, suite, uri, debs string) error {
	b.log.Info("debootstrap", "suite", suite, "variant", "minbase", "uri", uri)
	if err := os.MkdirAll(debs, 0o755); err != nil {
		return err
	}
	return b.run("debootstrap", debootstrap, "--variant=minbase", "--arch=amd64", "--components=main",
		"--cache-dir="+debs, suite, b.root, uri)
}

// install points the root's apt at srcs and installs every package of r in
// a chroot (a lock build first upgrades to what the sources offer now).
func (b *builder) install(r *Recipe, srcs []SuiteSource, lock bool) error {
	var list strings.Builder
	for _, s := range srcs {
		fmt.Fprintf(&list, "deb %s %s main\n", s.URI, s.Suite)
	}
	if err := os.WriteFile(filepath.Join(b.root, "etc/apt/sources.list"), []byte(list.String()), 0o644); err != nil {
		return err
	}
	apt := []string{"apt-get", "-o", "APT::Sandbox::User=root"}
	if v := hostAptValue("Acquire::Check-Valid-Until"); v != "" {
		apt = append(apt, "-o", "Acquire::Check-Valid-Until="+v)
	}
	if err := b.mount("proc", filepath.Join(b.root, "proc"), "proc"); err != nil {
		return err
	}
	b.log.Info("apt-get update", "sources", len(srcs))
	if err := b.chroot("apt-get update", append(slices.Clip(apt), "update")...); err != nil {
		return err
	}
	if lock {
		// A new closure starts from what the sources offer now (apt-cache
		// policy's candidates), security updates included.
		b.log.Info("apt-get dist-upgrade (lock build)")
		if err := b.chroot("apt-get dist-upgrade", append(slices.Clip(apt),
			"dist-upgrade", "-y", "--no-install-recommends", "-o", "Dpkg::Options::=--force-confold", "-o", "Dpkg::Use-Pty=0")...); err != nil {
			return err
		}
	}
	install := append(slices.Clip(apt), "install", "-y", "--no-install-recommends", "--allow-downgrades",
		"-o", "Dpkg::Options::=--force-confold", "-o", "Dpkg::Use-Pty=0")
	for _, p := range r.Packages {
		install = append(install, p.String())
	}
	b.log.Info("apt-get install", "packages", len(r.Packages))
	return b.chroot("apt-get install", install...)
}

// finish unmounts and scrubs the root and returns its manifest, which must
// be exactly r's packages.
func (b *builder) finish(r *Recipe, lock bool) (Manifest, error) {
	b.unmountAll()
	if err := scrub(b.root); err != nil {
		return nil, &BuildError{Step: "clean the root", Err: err}
	}
	m, err := manifestOf(b.root)
	if err != nil {
		return nil, &BuildError{Step: "read the manifest", Err: err}
	}
	if d := m.Diff(r, lock); len(d) > 0 {
		return nil, &BuildError{Step: "check the installed packages against images/" + r.Name + "/packages.txt",
			Err: fmt.Errorf("%d differences: %s", len(d), strings.Join(d, "; "))}
	}
	return m, nil
}

// writeImage writes the manifest and image.json into tmp and renames tmp
// into place at final.
func writeImage(tmp, final string, m Manifest, rec Record) error {
	if err := os.WriteFile(filepath.Join(tmp, "manifest.txt"), m.Render(), 0o644); err != nil {
		return err
	}
	rb, _ := json.MarshalIndent(rec, "", "  ")
	if err := os.WriteFile(filepath.Join(tmp, "image.json"), append(rb, '\n'), 0o644); err != nil {
		return err
	}
	return replace(tmp, final)
}

// replace renames tmp to final; an existing final is moved aside first and
// removed after (it is never left half-replaced).
func replace(tmp, final string) error {
	old := ""
	if _, err := os.Stat(final); err == nil {
		if mounted(final) {
			return fmt.Errorf("replace %s: something is mounted below it", final)
		}
		old = final + ".old-" + filepath.Base(tmp)
		if err := os.Rename(final, old); err != nil {
			return fmt.Errorf("move the old image aside: %w", err)
		}
	}
	if err := os.Rename(tmp, final); err != nil {
		return fmt.Errorf("move the image into place: %w", err)
	}
	if old != "" {
		return os.RemoveAll(old)
	}
	return nil
}

// scrub removes what names this machine or changes from build to build
// without being part of the system: apt's lists, caches and sources, the
// copied resolv.conf and hostname, logs.
func scrub(root string) error {
	for _, glob := range []string{
		"var/lib/apt/lists/*", "var/cache/apt/*.bin", "var/cache/apt/archives/*.deb",
		"etc/apt/sources.list", "var/log/apt/*", "var/log/*.log", "var/cache/debconf/*-old",
	} {
		ms, _ := filepath.Glob(filepath.Join(root, glob))
		for _, m := range ms {
			if fi, err := os.Lstat(m); err == nil && fi.IsDir() {
				continue // lists/partial, archives/partial stay as apt made them
			}
			if err := os.Remove(m); err != nil {
				return err
			}
		}
	}
	if err := os.WriteFile(filepath.Join(root, "etc/resolv.conf"), nil, 0o644); err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(root, "etc/hostname"), []byte("lockstep-guest\n"), 0o644)
}

type builder struct {
	ctx     context.Context
	log     *slog.Logger
	out     io.Writer
	logPath string
	root    string
	mounts  []string
}

func (b *builder) command(name string, args ...string) *exec.Cmd {
	cmd := exec.CommandContext(b.ctx, name, args...)
	cmd.Cancel = func() error { return cmd.Process.Signal(syscall.SIGTERM) }
	cmd.WaitDelay = 10 * time.Second
	cmd.Env = []string{"PATH=/usr/sbin:/usr/bin:/sbin:/bin", "LC_ALL=C", "DEBIAN_FRONTEND=noninteractive", "HOME=/root"}
	b.log.Debug("run", "cmd", shellquote.Join(append([]string{name}, args...)))
	return cmd
}

func (b *builder) run(step, name string, args ...string) error {
	cmd := b.command(name, args...)
	fmt.Fprintf(b.out, "$ %s\n", shellquote.Join(cmd.Args))
	cmd.Stdout, cmd.Stderr = b.out, b.out
	// Progress every 10 s while the step runs: its name, the time it has
	// taken and the last line it wrote.
	done := make(chan struct{})
	start := time.Now()
	go func() {
		t := time.NewTicker(10 * time.Second)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-t.C:
				b.log.Info("waiting for "+step, "elapsed", time.Since(start).Round(time.Second), "last", tail(b.logPath, 1))
			}
		}
	}()
	err := cmd.Run()
	close(done)
	if err != nil {
		return &BuildError{Step: step, Err: err, Log: b.logPath, Tail: tail(b.logPath, 20)}
	}
	return nil
}

func (b *builder) chroot(step string, args ...string) error {
	return b.run(step, "chroot", append([]string{b.root}, args...)...)
}

func (b *builder) output(name string, args ...string) string {
	out, _ := b.command(name, args...).Output()
	return string(out)
}

func (b *builder) mount(src, target, fstype string) error {
	if err := syscall.Mount(src, target, fstype, syscall.MS_NOSUID|syscall.MS_NODEV|syscall.MS_NOEXEC, ""); err != nil {
		return &BuildError{Step: "mount " + fstype + " on " + target, Err: err}
	}
	b.mounts = append(b.mounts, target)
	return nil
}

func (b *builder) unmountAll() {
	for i := len(b.mounts) - 1; i >= 0; i-- {
		if err := syscall.Unmount(b.mounts[i], 0); err != nil {
			_ = syscall.Unmount(b.mounts[i], syscall.MNT_DETACH)
		}
	}
	b.mounts = nil
}

// mounted reports whether anything is mounted at or below dir.
func mounted(dir string) bool {
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return true // cannot tell: assume yes, so nothing is removed
	}
	defer f.Close()
	dir = filepath.Clean(dir)
	s := bufio.NewScanner(f)
	for s.Scan() {
		fs := strings.Fields(s.Text())
		if len(fs) > 4 && (fs[4] == dir || strings.HasPrefix(fs[4], dir+"/")) {
			return true
		}
	}
	return false
}

// hostAptValue returns one value of the machine's apt configuration, or "".
func hostAptValue(key string) string {
	out, err := exec.Command("apt-config", "dump", key).Output()
	if err != nil {
		return ""
	}
	for _, line := range strings.Split(string(out), "\n") {
		if k, v, ok := strings.Cut(line, " "); ok && k == key {
			return strings.Trim(strings.TrimSuffix(v, ";"), `"`)
		}
	}
	return ""
}

func tail(path string, n int) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return ""
	}
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// Cached lists the image directories in the cache with their records,
// current or not; a directory without a readable image.json is skipped.
func Cached(opts Options) ([]Record, []string, error) {
	cache, err := opts.cacheDir()
	if err != nil {
		return nil, nil, err
	}
	ents, err := os.ReadDir(cache)
	if os.IsNotExist(err) {
		return nil, nil, nil
	}
	if err != nil {
		return nil, nil, err
	}
	var recs []Record
	var dirs []string
	for _, e := range ents {
		b, err := os.ReadFile(filepath.Join(cache, e.Name(), "image.json"))
		if err != nil {
			continue
		}
		var rec Record
		if json.Unmarshal(b, &rec) != nil {
			continue
		}
		recs = append(recs, rec)
		dirs = append(dirs, filepath.Join(cache, e.Name()))
	}
	return recs, dirs, nil
}
