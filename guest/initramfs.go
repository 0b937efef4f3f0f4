package guest

import (
	"context"
	"crypto/sha256"
	"debug/elf"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"hash"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/klauspost/compress/gzip"
	"github.com/klauspost/compress/zstd"
	"github.com/lockstep-sandbox/lockstep/guest/proto"
	"github.com/u-root/mkuimage/cpio"
	"github.com/u-root/mkuimage/ldd"
	"github.com/u-root/mkuimage/uimage/initramfs"
)

// Compression formats of the initramfs.
const (
	CompressGzip = "gzip"
	CompressZstd = "zstd"
	CompressNone = "none"
)

// InitramfsOptions says what goes into a guest's initramfs.
type InitramfsOptions struct {
	// Init is the executable that becomes /init; "" is this executable.
	// It must run without anything else from the initramfs: build it with
	// CGO_ENABLED=0 (a dynamic one gets its libraries through ldd).
	Init string
	// Job is written as /job.json. Its Extra field is filled in here.
	Job *proto.Job
	// Strace, when not "", is a host strace binary to carry (with its
	// shared libraries) under /extra, for a root that lacks strace.
	Strace string
	// Modules are kernel module files to carry, in load order, for a
	// kernel that has virtio, 9p or overlayfs as modules.
	Modules []string
	// Output is the path of the initramfs file to write.
	Output string
	// Compression is CompressGzip, CompressZstd or CompressNone; "" is
	// CompressGzip.
	Compression string
	// TempDir is a directory for scratch files; "" is the directory of
	// Output.
	TempDir string
	// CacheDir, when not "", keeps compressed base archives keyed by the
	// SHA-256 of their content (the eight most recently used are kept).
	CacheDir string
	// Log receives, at debug level, what a base archive built holds; nil
	// discards it.
	Log *slog.Logger
}

// Initramfs writes an initramfs with mkuimage (its cpio and initramfs
// packages, as its files option does; no Go code is built): o.Init as
// /init, /dev/console, strace with its libraries under /extra when asked,
// and the job as /job.json.
//
// The file is two concatenated cpio archives, as the kernel allows: first a
// small uncompressed one with job.json, then the compressed base with
// everything else. The base depends only on the init binary, strace and
// the compression, so with o.CacheDir set it is built once and reused: a
// warm build hashes the init binary and copies the cached base.
// Initramfs returns the hex SHA-256 of the file.
func Initramfs(ctx context.Context, o InitramfsOptions) (string, error) {
	if o.Job == nil || o.Output == "" {
		return "", fmt.Errorf("initramfs: want a job and an output path")
	}
	init := o.Init
	if init == "" {
		exe, err := os.Executable()
		if err != nil {
			return "", fmt.Errorf("initramfs: find this executable: %w", err)
		}
		init = exe
	}
	tmp := o.TempDir
	if tmp == "" {
		tmp = filepath.Dir(o.Output)
	}
	var extra []string
	if o.Strace != "" {
		var err error
		if extra, err = straceFiles(o.Strace); err != nil {
			return "", err
		}
	}
	o.Job.Extra = extra
	o.Job.Modules = nil
	for i, m := range o.Modules {
		o.Job.Modules = append(o.Job.Modules, moduleArchivePath(i, m))
	}
	basePath, err := baseArchive(ctx, o, init, extra, tmp)
	if err != nil {
		return "", err
	}
	if o.CacheDir == "" {
		defer os.Remove(basePath)
	}
	base, err := openBase(ctx, o, basePath, init, extra, tmp)
	if err != nil {
		return "", err
	}
	defer base.Close()
	return writeJobArchive(o, tmp, base)
}

// openBase opens the base archive at path, held open from here: another
// process pruning the cache cannot take it away mid-copy. One pruned
// between the lookup and the open is built again.
func openBase(ctx context.Context, o InitramfsOptions, path, init string, extra []string, tmp string) (*os.File, error) {
	base, err := os.Open(path)
	if errors.Is(err, os.ErrNotExist) && o.CacheDir != "" {
		if path, err = baseArchive(ctx, o, init, extra, tmp); err != nil {
			return nil, err
		}
		base, err = os.Open(path)
	}
	if err != nil {
		return nil, fmt.Errorf("initramfs: base: %w", err)
	}
	return base, nil
}

// writeJobArchive writes o.Output: an uncompressed archive of the job,
// then base; it returns the file's hex SHA-256.
func writeJobArchive(o InitramfsOptions, tmp string, base *os.File) (string, error) {
	jobPath := filepath.Join(tmp, "job.json")
	b, err := json.MarshalIndent(o.Job, "", "\t")
	if err != nil {
		return "", fmt.Errorf("initramfs: encode job: %w", err)
	}
	if err := os.WriteFile(jobPath, b, 0o644); err != nil {
		return "", fmt.Errorf("initramfs: write job: %w", err)
	}
	out := &compressedCPIO{path: o.Output, compression: CompressNone, appendFile: base}
	if err := writeArchive(out, nil, []string{jobPath + ":" + strings.TrimPrefix(proto.JobFile, "/")}); err != nil {
		return "", fmt.Errorf("initramfs: job archive: %w", err)
	}
	return hex.EncodeToString(out.sum.Sum(nil)), nil
}

// baseVersion changes whenever the base archive's layout does, so cached
// bases from older builders are not reused.
const baseVersion = "lockstep-initramfs-base-1"

// baseArchive returns the path of the compressed base archive, building it
// (into the cache when there is one).
func baseArchive(ctx context.Context, o InitramfsOptions, init string, extra []string, tmp string) (string, error) {
	comp := o.Compression
	if comp == "" {
		comp = CompressGzip
	}
	target := filepath.Join(tmp, "base.cpio")
	if o.CacheDir != "" {
		var hit bool
		var err error
		if target, hit, err = cachedBase(o, init, extra, comp); err != nil || hit {
			return target, err
		}
	}
	if err := ctx.Err(); err != nil {
		return "", err
	}
	// Checked only when the base is built: a cached base holds an init
	// that passed, and a warm boot opens nothing more.
	if err := staticInit(init); err != nil {
		return "", err
	}
	files := []string{init + ":init"}
	for _, f := range extra {
		files = append(files, f+":"+filepath.Join(strings.TrimPrefix(extraDir, "/"), strings.TrimPrefix(f, "/")))
	}
	for i, m := range o.Modules {
		files = append(files, m+":"+strings.TrimPrefix(moduleArchivePath(i, m), "/"))
	}
	if err := writeBase(target, comp, files, o.Log); err != nil {
		return "", err
	}
	if o.CacheDir != "" {
		pruneCache(o.CacheDir, 8)
	}
	return target, nil
}

// cachedBase is the cache's path for the base of init, extra and the
// modules under compression comp, and whether it is there (then marked
// recently used, so pruning keeps it).
func cachedBase(o InitramfsOptions, init string, extra []string, comp string) (string, bool, error) {
	key, err := baseKey(init, append(append([]string{}, extra...), o.Modules...), comp)
	if err != nil {
		return "", false, err
	}
	target := filepath.Join(o.CacheDir, key+".cpio."+comp)
	if _, err := os.Stat(target); err == nil {
		now := time.Now()
		os.Chtimes(target, now, now)
		return target, true, nil
	}
	if err := os.MkdirAll(o.CacheDir, 0o755); err != nil {
		return "", false, fmt.Errorf("initramfs: cache: %w", err)
	}
	return target, false, nil
}

// writeBase writes the base archive to target, through a temporary file
// beside it: the directories and device nodes PID 1 needs, then files
// ("src:dst" each). log, if not nil, hears of it at debug level.
func writeBase(target, comp string, files []string, log *slog.Logger) error {
	records, err := cpio.ArchiveFromRecords([]cpio.Record{
		cpio.Directory("dev", 0o755),
		cpio.Directory("proc", 0o755),
		cpio.Directory("sys", 0o755),
		cpio.Directory("mnt", 0o755),
		cpio.Directory("tmp", 0o1777),
		cpio.CharDev("dev/console", 0o600, 5, 1),
		cpio.CharDev("dev/null", 0o666, 1, 3),
	})
	if err != nil {
		return fmt.Errorf("initramfs: base records: %w", err)
	}
	pf, err := os.CreateTemp(filepath.Dir(target), filepath.Base(target)+".part*")
	if err != nil {
		return fmt.Errorf("initramfs: %w", err)
	}
	part := pf.Name()
	pf.Close()
	out := &compressedCPIO{path: part, compression: comp}
	// strace's libraries are listed in files; /init is static: no ldd.
	if err := writeArchive(out, records, files); err != nil {
		os.Remove(part)
		return fmt.Errorf("initramfs: base archive: %w", err)
	}
	if log != nil {
		log.Debug("initramfs base archive built", "files", len(files), "compression", comp, "path", target)
	}
	if err := os.Rename(part, target); err != nil {
		os.Remove(part)
		return fmt.Errorf("initramfs: %w", err)
	}
	return nil
}

// baseKey is the SHA-256 over the builder version, the compression and the
// content of every file in the base.
func baseKey(init string, extra []string, comp string) (string, error) {
	h := sha256.New()
	fmt.Fprintf(h, "%s\x00%s\x00", baseVersion, comp)
	for _, f := range append([]string{init}, extra...) {
		fmt.Fprintf(h, "%s\x00", f)
		fi, err := os.Lstat(f)
		if err != nil {
			return "", fmt.Errorf("initramfs: %w", err)
		}
		if fi.Mode()&os.ModeSymlink != 0 {
			l, _ := os.Readlink(f)
			fmt.Fprintf(h, "-> %s\x00", l)
			continue
		}
		r, err := os.Open(f)
		if err != nil {
			return "", fmt.Errorf("initramfs: %w", err)
		}
		_, err = io.Copy(h, r)
		r.Close()
		if err != nil {
			return "", fmt.Errorf("initramfs: hash %s: %w", f, err)
		}
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

// pruneCache keeps the keep most recently used bases.
func pruneCache(dir string, keep int) {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return
	}
	type aged struct {
		name string
		mod  time.Time
	}
	var bases []aged
	for _, e := range ents {
		if fi, err := e.Info(); err == nil && strings.Contains(e.Name(), ".cpio.") && !strings.Contains(e.Name(), ".part") {
			bases = append(bases, aged{e.Name(), fi.ModTime()})
		}
	}
	sort.Slice(bases, func(i, j int) bool { return bases[i].mod.After(bases[j].mod) })
	for i := keep; i < len(bases); i++ {
		os.Remove(filepath.Join(dir, bases[i].name))
	}
}

// writeArchive writes files ("host path:archive path") over base (nil for
// none) to out, as mkuimage's files option does (uimage.ParseExtraFiles
// without ldd, then initramfs.Write), byte for byte. Package uimage itself
// is not linked: it carries mkuimage's Go builder (gobusybox,
// golang.org/x/tools, go/types), 2.6 MB of this binary whose initialisers
// ran at every start, in every guest too.
func writeArchive(out initramfs.WriteOpener, base *cpio.Archive, files []string) error {
	fs := initramfs.NewFiles()
	for _, f := range files {
		src, dst, ok := strings.Cut(f, ":")
		if !ok || src == "" || dst == "" {
			return fmt.Errorf("archive entry %q: want <host path>:<archive path>", f)
		}
		abs, err := filepath.Abs(filepath.Clean(src))
		if err != nil {
			return fmt.Errorf("archive entry %q: %w", f, err)
		}
		if err := fs.AddFileNoFollow(abs, filepath.Clean(dst)); err != nil {
			return fmt.Errorf("add %q to the archive: %w", f, err)
		}
	}
	opts := &initramfs.Opts{Files: fs, OutputFile: out}
	if base != nil {
		opts.BaseArchive = &initramfs.Archive{Archive: base}
	}
	return initramfs.Write(opts)
}

// straceFiles returns strace and every library it loads (symlinks and their
// targets), sorted.
func straceFiles(strace string) ([]string, error) {
	abs, err := filepath.Abs(strace)
	if err != nil {
		return nil, fmt.Errorf("initramfs: strace path: %w", err)
	}
	libs, err := ldd.FList(abs)
	if err != nil {
		return nil, fmt.Errorf("initramfs: libraries of %s: %w", abs, err)
	}
	seen := map[string]bool{abs: true}
	out := []string{abs}
	for _, l := range libs {
		if !seen[l] {
			seen[l] = true
			out = append(out, l)
		}
	}
	sort.Strings(out[1:])
	return out, nil
}

// compressedCPIO is an initramfs.WriteOpener that writes a newc cpio
// through gzip (klauspost), zstd or nothing, hashing the file as it goes.
type compressedCPIO struct {
	path        string
	compression string
	// appendFile, when set, is copied after this archive (padded to four
	// bytes, where the kernel looks for the next cpio header).
	appendFile *os.File
	sum        hash.Hash
}

type cpioFileWriter struct {
	cpio.RecordWriter
	comp       io.WriteCloser // nil without compression
	f          *os.File
	w          io.Writer // f and the hash
	appendFile *os.File
}

func (c *compressedCPIO) OpenWriter() (initramfs.Writer, error) {
	f, err := os.OpenFile(c.path, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		return nil, err
	}
	c.sum = sha256.New()
	w := io.MultiWriter(f, c.sum)
	var comp io.WriteCloser
	switch c.compression {
	case "", CompressGzip:
		comp, err = gzip.NewWriterLevel(w, gzip.BestSpeed)
	case CompressZstd:
		// The kernel's zstd decoder wants single-segment frames with a
		// small window.
		comp, err = zstd.NewWriter(w, zstd.WithEncoderLevel(zstd.SpeedFastest),
			zstd.WithWindowSize(1<<20), zstd.WithEncoderConcurrency(2))
	case CompressNone:
	default:
		err = fmt.Errorf("compression %q: want %s, %s or %s", c.compression, CompressGzip, CompressZstd, CompressNone)
	}
	if err != nil {
		f.Close()
		return nil, err
	}
	var rw cpio.RecordWriter
	if comp != nil {
		rw = cpio.Newc.Writer(comp)
	} else {
		rw = cpio.Newc.Writer(w)
	}
	return &cpioFileWriter{RecordWriter: rw, comp: comp, f: f, w: w, appendFile: c.appendFile}, nil
}

func (w *cpioFileWriter) Finish() error {
	err := cpio.WriteTrailer(w)
	if w.comp != nil {
		if cerr := w.comp.Close(); err == nil {
			err = cerr
		}
	}
	if err == nil && w.appendFile != nil {
		err = w.appendPadded()
	}
	if cerr := w.f.Close(); err == nil {
		err = cerr
	}
	return err
}

func (w *cpioFileWriter) appendPadded() error {
	off, err := w.f.Seek(0, io.SeekCurrent)
	if err != nil {
		return err
	}
	if pad := (4 - off%4) % 4; pad > 0 {
		if _, err := w.w.Write(make([]byte, pad)); err != nil {
			return err
		}
	}
	_, err = io.Copy(w.w, w.appendFile)
	return err
}

// moduleArchivePath is where the i-th module lands in the initramfs.
func moduleArchivePath(i int, host string) string {
	return fmt.Sprintf("/modules/%02d-%s", i, filepath.Base(host))
}

// staticInit refuses an init the guest's kernel could not start: one that
// needs a program interpreter (a dynamically linked build, e.g. a test
// binary built with cgo), which the initramfs does not carry. Without this
// the guest panics with "Failed to execute /init (error -2)".
func staticInit(path string) error {
	f, err := elf.Open(path)
	if err != nil {
		return fmt.Errorf("initramfs: init %s: %w", path, err)
	}
	defer f.Close()
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP {
			return fmt.Errorf("initramfs: init %s is dynamically linked (it needs a program interpreter the guest does not have); build it with CGO_ENABLED=0", path)
		}
	}
	return nil
}
