package lazyre

import (
	"os"
	"os/exec"
	"strings"
	"testing"
)

func TestMethods(t *testing.T) {
	r := New(`^a(b+)c$`)
	if !r.MatchString("abbc") || r.MatchString("ac") {
		t.Error("MatchString")
	}
	if m := r.FindStringSubmatch("abbc"); len(m) != 2 || m[1] != "bb" {
		t.Errorf("FindStringSubmatch = %q", m)
	}
	if m := r.FindStringSubmatchIndex("abbc"); len(m) != 4 || m[2] != 1 || m[3] != 3 {
		t.Errorf("FindStringSubmatchIndex = %v", m)
	}
	if got := New(`b+`).ReplaceAllString("abbcb", "-"); got != "a-c-" {
		t.Errorf("ReplaceAllString = %q", got)
	}
}

// TestBadExpressionFailsTests: in a test binary a bad expression panics in
// New, so a package's tests catch it even if no test calls it.
func TestBadExpressionFailsTests(t *testing.T) {
	defer func() {
		if recover() == nil {
			t.Error("New(`(`) did not panic in a test binary")
		}
	}()
	New(`(`)
}

// TestLazyOutsideTests runs this test binary under another name, where New
// must not compile: a bad expression panics only when used.
func TestLazyOutsideTests(t *testing.T) {
	if os.Getenv("LAZYRE_CHILD") == "1" {
		r := New(`(`)
		os.Stdout.WriteString("made\n")
		r.MatchString("x")
		return
	}
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	renamed := t.TempDir() + "/lazyre-child"
	data, err := os.ReadFile(self)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(renamed, data, 0o755); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(renamed, "-test.run=^TestLazyOutsideTests$")
	cmd.Env = append(os.Environ(), "LAZYRE_CHILD=1")
	out, err := cmd.CombinedOutput()
	if err == nil || !strings.Contains(string(out), "made\n") || !strings.Contains(string(out), "missing closing )") {
		t.Errorf("child: err %v, output:\n%s\nwant New to return and the first use to panic", err, out)
	}
}
