package tool

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestPolicyFmtWriteKeepsItsFile: `policy fmt -w` resolved the path again
// when it wrote, after the parse; a link swapped in meanwhile made it write
// the policy text into the link's target (as root, any file: a policy row
// is a valid shell line). The Parsed hook stands for a long parse: it
// swaps p.cfg for a link to another file. Now the write is refused, the
// other file is untouched, and the file read was not replaced either.
func TestPolicyFmtWriteKeepsItsFile(t *testing.T) {
	dir := t.TempDir()
	cfg, victim, moved := filepath.Join(dir, "p.cfg"), filepath.Join(dir, "victim.sh"), filepath.Join(dir, "read.cfg")
	messy := "[write]\n/tmp\n[read]\n/usr   # system\n"
	if err := os.WriteFile(cfg, []byte(messy), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(victim, []byte("#!/bin/sh\necho victim\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	var out, errb strings.Builder
	tl := &Tool{Out: &out, Err: &errb, Write: true}
	tl.Parsed = func(string) {
		if err := os.Rename(cfg, moved); err != nil {
			t.Error(err)
		}
		if err := os.Symlink(victim, cfg); err != nil {
			t.Error(err)
		}
	}
	code := tl.Fmt([]string{cfg})
	if got, _ := os.ReadFile(victim); string(got) != "#!/bin/sh\necho victim\n" {
		t.Errorf("fmt -w wrote into %s, the file a link swapped in during the parse names:\n%s", victim, got)
	}
	if code != statusFail || !strings.Contains(errb.String(), "now names another file than the one read") {
		t.Errorf("fmt -w with a swapped path = %d, stderr %q; want 1 saying the path names another file now", code, errb.String())
	}
	if got, _ := os.ReadFile(moved); string(got) != messy {
		t.Errorf("the file read was changed to %q", got)
	}
	// Unswapped, the same run rewrites the file it read.
	tl.Parsed = nil
	os.Remove(cfg)
	if err := os.Rename(moved, cfg); err != nil {
		t.Fatal(err)
	}
	errb.Reset()
	if code := tl.Fmt([]string{cfg}); code != statusOK {
		t.Fatalf("fmt -w = %d, %s", code, errb.String())
	}
	if got, _ := os.ReadFile(cfg); string(got) != "[read]\n# system\n/usr\n\n[write]\n/tmp\n" {
		t.Errorf("fmt -w wrote %q", got)
	}
}
