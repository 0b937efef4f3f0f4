package kernel

import (
	"errors"
	"os/exec"
	"strings"
	"testing"
)

func TestCheckTools(t *testing.T) {
	have := func(missing ...string) func(string) (string, error) {
		return func(name string) (string, error) {
			for _, m := range missing {
				if name == m {
					return "", exec.ErrNotFound
				}
			}
			return "/usr/bin/" + name, nil
		}
	}
	if err := checkTools(Fragment(), have()); err != nil {
		t.Fatalf("checkTools with every tool present = %v, want nil", err)
	}
	// The shipped fragment's compressor is required: a machine without it
	// would fail only after the link, minutes into the build.
	var comp string
	for line, tool := range compressors {
		if strings.Contains(string(Fragment()), "\n"+line+"\n") {
			comp = tool.name
		}
	}
	if comp == "" {
		t.Fatal("the fragment chooses none of the known compressors (CONFIG_KERNEL_<X>=y)")
	}
	err := checkTools(Fragment(), have(comp, "bison", "/usr/include/libelf.h"))
	var me *MissingToolsError
	if !errors.As(err, &me) {
		t.Fatalf("checkTools without %s, bison and libelf.h = %v, want *MissingToolsError", comp, err)
	}
	for _, want := range []string{comp, "bison", "libelf-dev", "apt-get install"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not name %q", err, want)
		}
	}
	if len(me.Tools) != 3 {
		t.Errorf("missing tools %q, want 3", me.Tools)
	}
	// A compressor the fragment does not choose is not required.
	if err := checkTools([]byte("CONFIG_KERNEL_GZIP=y\n"), have("lz4", "zstd", "lzop")); err != nil {
		t.Errorf("checkTools(gzip fragment) without lz4/zstd/lzop = %v, want nil", err)
	}
}
