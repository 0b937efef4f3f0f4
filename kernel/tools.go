package kernel

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

// hostTool is a program the kernel build runs, with the Debian package
// that provides it.
type hostTool struct{ name, pkg string }

// baseTools are what every configure and build of a pin runs: kbuild
// itself, Kconfig's parser generators, the timeconst and capflags
// scripts, the unpacking of the source, and objtool's libelf (a header,
// so named by its path).
var baseTools = []hostTool{
	{"make", "make"}, {"gcc", "gcc"}, {"ld", "binutils"}, {"flex", "flex"}, {"bison", "bison"},
	{"bc", "bc"}, {"perl", "perl"}, {"awk", "mawk"}, {"xz", "xz-utils"},
	{"/usr/include/libelf.h", "libelf-dev"},
}

// compressors maps each CONFIG_KERNEL_<X>=y a fragment can choose to the
// program that compresses vmlinux for the bzImage, the last step of a build.
var compressors = map[string]hostTool{
	"CONFIG_KERNEL_GZIP=y": {"gzip", "gzip"},
	"CONFIG_KERNEL_LZ4=y":  {"lz4", "lz4"},
	"CONFIG_KERNEL_ZSTD=y": {"zstd", "zstd"},
	"CONFIG_KERNEL_XZ=y":   {"xz", "xz-utils"},
	"CONFIG_KERNEL_LZO=y":  {"lzop", "lzop"},
}

// MissingToolsError names every host program a build needs and this
// machine lacks, with the Debian packages that provide them.
type MissingToolsError struct {
	Tools    []string
	Packages []string
}

func (e *MissingToolsError) Error() string {
	return fmt.Sprintf("the kernel build needs %s, not found in PATH (Debian: apt-get install %s)",
		strings.Join(e.Tools, ", "), strings.Join(e.Packages, " "))
}

// checkTools returns a *MissingToolsError when a program the build of
// frag runs is missing. A build that lacks one fails only at the step
// that runs it (for the compressor, minutes in, after the link), so this
// runs before anything is fetched.
func checkTools(frag []byte, look func(string) (string, error)) error {
	need := append([]hostTool(nil), baseTools...)
	for _, opt := range RequiredOptions(frag) {
		if t, ok := compressors[opt]; ok {
			need = append(need, t)
		}
	}
	e := &MissingToolsError{}
	seen := map[string]bool{}
	for _, t := range need {
		if seen[t.name] {
			continue
		}
		seen[t.name] = true
		if _, err := look(t.name); err != nil {
			e.Tools = append(e.Tools, t.name)
			e.Packages = append(e.Packages, t.pkg)
		}
	}
	if len(e.Tools) > 0 {
		return e
	}
	return nil
}

// lookTool finds a program in PATH, or a file named by its absolute path.
func lookTool(name string) (string, error) {
	if filepath.IsAbs(name) {
		_, err := os.Stat(name)
		return name, err
	}
	return exec.LookPath(name)
}
