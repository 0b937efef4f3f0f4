package harness

import (
	"bytes"
	"debug/elf"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/klauspost/compress/zstd"
	"github.com/ulikunitz/xz"
)

// GuestModules are the modules a distribution kernel (built with virtio,
// 9p and overlayfs as modules, as Debian's are) needs for a guest; a
// pinned kernel has them built in and needs none.
var GuestModules = []string{"virtio_pci", "virtio_mmio", "virtio_console", "9pnet_virtio", "9p", "overlay", "virtio_rng"}

// RootImageModules are what a distribution kernel needs besides
// GuestModules to mount an Options.RootImage (ext4 asks the crypto API
// for crc32c at mount time, a dependency modinfo does not name).
var RootImageModules = []string{"virtio_blk", "crc32c_generic", "ext4"}

// ResolveModules finds each named module under dir (a /lib/modules/<release>
// tree, .ko, .ko.xz or .ko.zst) and returns the files in load order, every
// module after the modules it depends on (from its .modinfo "depends=").
// A module the kernel has built in (listed in dir/modules.builtin) needs
// no file and is skipped; any other name not found is an error.
func ResolveModules(dir string, names []string) ([]string, error) {
	index, err := moduleFiles(dir)
	if err != nil {
		return nil, fmt.Errorf("modules %s: %w", dir, err)
	}
	r := &moduleOrder{dir: dir, index: index, builtin: builtinModules(dir), state: map[string]int{}}
	for _, n := range names {
		if err := r.visit(n, ""); err != nil {
			return nil, err
		}
	}
	return r.order, nil
}

// moduleFiles maps each module name under dir to its file.
func moduleFiles(dir string) (map[string]string, error) {
	index := map[string]string{}
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		base := d.Name()
		for _, ext := range []string{".ko", ".ko.xz", ".ko.zst"} {
			if n, ok := strings.CutSuffix(base, ext); ok {
				index[modName(n)] = p
			}
		}
		return nil
	})
	return index, err
}

// moduleOrder puts modules in load order, depth first.
type moduleOrder struct {
	dir     string
	index   map[string]string // name → file
	builtin map[string]bool
	state   map[string]int // 1 visiting, 2 done
	order   []string
}

// visit puts name after its dependencies; from is the module that needs
// it ("" for one asked for).
func (r *moduleOrder) visit(name, from string) error {
	name = modName(name)
	switch r.state[name] {
	case 1:
		return fmt.Errorf("module %s: dependency cycle through %s", name, from)
	case 2:
		return nil
	}
	p, ok := r.index[name]
	if !ok && r.builtin[name] {
		r.state[name] = 2
		return nil
	}
	if !ok {
		if from == "" {
			return fmt.Errorf("module %s: not found under %s", name, r.dir)
		}
		return fmt.Errorf("module %s (needed by %s): not found under %s", name, from, r.dir)
	}
	r.state[name] = 1
	deps, err := moduleDepends(p)
	if err != nil {
		return err
	}
	for _, d := range deps {
		if err := r.visit(d, name); err != nil {
			return err
		}
	}
	r.state[name] = 2
	r.order = append(r.order, p)
	return nil
}

func modName(n string) string { return strings.ReplaceAll(n, "-", "_") }

// builtinModules reads dir/modules.builtin (one kernel/…/name.ko path a
// line, as depmod's input lists what the kernel has built in); a missing
// file means none.
func builtinModules(dir string) map[string]bool {
	b, err := os.ReadFile(filepath.Join(dir, "modules.builtin"))
	if err != nil {
		return nil
	}
	out := map[string]bool{}
	for _, l := range strings.Split(string(b), "\n") {
		if n, ok := strings.CutSuffix(filepath.Base(strings.TrimSpace(l)), ".ko"); ok {
			out[modName(n)] = true
		}
	}
	return out
}

// moduleDepends reads "depends=" from a module's .modinfo section; a .ko.xz
// or .ko.zst (Debian 13 compresses its modules) is decompressed first.
func moduleDepends(path string) ([]string, error) {
	raw, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("module %s: %w", path, err)
	}
	if raw, err = decompressModule(path, raw); err != nil {
		return nil, fmt.Errorf("module %s: %w", path, err)
	}
	f, err := elf.NewFile(bytes.NewReader(raw))
	if err != nil {
		return nil, fmt.Errorf("module %s: %w", path, err)
	}
	defer f.Close()
	sec := f.Section(".modinfo")
	if sec == nil {
		return nil, nil
	}
	data, err := sec.Data()
	if err != nil {
		return nil, fmt.Errorf("module %s: .modinfo: %w", path, err)
	}
	for _, kv := range bytes.Split(data, []byte{0}) {
		if v, ok := bytes.CutPrefix(kv, []byte("depends=")); ok {
			if len(v) == 0 {
				return nil, nil
			}
			return strings.Split(string(v), ","), nil
		}
	}
	return nil, nil
}

// decompressModule returns a module file's ELF bytes: raw itself for a
// .ko, decompressed for a .ko.xz or .ko.zst.
func decompressModule(path string, raw []byte) ([]byte, error) {
	var r io.Reader
	switch {
	case strings.HasSuffix(path, ".xz"):
		x, err := xz.NewReader(bytes.NewReader(raw))
		if err != nil {
			return nil, err
		}
		r = x
	case strings.HasSuffix(path, ".zst"):
		z, err := zstd.NewReader(bytes.NewReader(raw))
		if err != nil {
			return nil, err
		}
		defer z.Close()
		r = z
	default:
		return raw, nil
	}
	return io.ReadAll(io.LimitReader(r, 64<<20))
}
