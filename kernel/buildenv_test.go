package kernel

import (
	"io"
	"log/slog"
	"slices"
	"strings"
	"testing"
)

// TestBuildEnvIsWhole runs a real program the way the build runs make and
// reads its environment back: exactly buildEnv, with the fixed timestamp,
// user, host and build number, and none of the caller's variables that
// change what kbuild produces.
func TestBuildEnvIsWhole(t *testing.T) {
	t.Setenv("KCFLAGS", "-DEVIL")
	t.Setenv("LOCALVERSION", "-evil")
	t.Setenv("KBUILD_BUILD_TIMESTAMP", "now")
	t.Setenv("TMPDIR", t.TempDir())
	want := buildEnv("/src/linux", "/cache/.build-x/obj")
	c := command{log: slog.New(slog.NewTextHandler(io.Discard, nil)), env: want, onlyEnv: true}
	out, err := c.output(t.Context(), "env")
	if err != nil {
		t.Fatal(err)
	}
	got := strings.Split(out, "\n")
	slices.Sort(got)
	sorted := slices.Sorted(slices.Values(want))
	if !slices.Equal(got, sorted) {
		t.Errorf("make's environment =\n%s\nwant exactly\n%s", strings.Join(got, "\n"), strings.Join(sorted, "\n"))
	}
	for _, w := range []string{
		"KBUILD_BUILD_TIMESTAMP=" + BuildTimestamp, "KBUILD_BUILD_USER=lockstep", "KBUILD_BUILD_HOST=lockstep",
		"KBUILD_BUILD_VERSION=1", "LC_ALL=C", "TZ=UTC",
		"KCFLAGS=-ffile-prefix-map=/src/linux/= -ffile-prefix-map=/cache/.build-x/obj/=",
	} {
		if !slices.Contains(got, w) {
			t.Errorf("make's environment lacks %s", w)
		}
	}
}

// TestBuildTimestampParses: usr/gen_initramfs.sh turns the timestamp into
// the initramfs mtimes with `date -d`, and uses the clock when that fails.
func TestBuildTimestampParses(t *testing.T) {
	c := command{log: slog.New(slog.NewTextHandler(io.Discard, nil))}
	out, err := c.output(t.Context(), "date", "-d", BuildTimestamp, "+%s")
	if err != nil || out != "0" {
		t.Errorf("date -d %q +%%s = %q, %v; want 0", BuildTimestamp, out, err)
	}
}
