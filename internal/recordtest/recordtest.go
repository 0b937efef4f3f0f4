package recordtest

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// Cfg is the policy the sample records vouch for.
const Cfg = `[read]
/etc/ld.so.cache
/usr
[execute]
/usr/bin
[write]
/var/tmp/testing-dir
[create]
/var/tmp/testing-dir
[bind]
allow 5000 udp
[connect]
allow 127.0.0.1:*
[limits]
timeout = 90
nofile = 256
`

// Golden fails t unless got is testdata/name, which it first writes when
// update is set (the test package's -update flag).
func Golden(t testing.TB, name string, got []byte, update bool) {
	t.Helper()
	path := filepath.Join("testdata", name)
	if update {
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test -update to write it)", err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("%s differs from the golden file; got\n%s", name, got)
	}
}

// MatchesPython fails t unless doc is byte for byte what Python's
// json.dumps(indent=2, sort_keys=True) makes of it, with a newline: a
// record lockstep writes and one Phobos writes for the same content are
// the same bytes. Without python3 the test is skipped.
func MatchesPython(t testing.TB, doc []byte) {
	t.Helper()
	py, err := exec.LookPath("python3")
	if err != nil {
		t.Skip("python3 is not installed (scripts/deps.sh installs it)")
	}
	cmd := exec.Command(py, "-c", "import json,sys; d=json.load(sys.stdin); sys.stdout.write(json.dumps(d, indent=2, sort_keys=True)+'\\n')")
	cmd.Stdin = bytes.NewReader(doc)
	theirs, err := cmd.Output()
	if err != nil {
		t.Fatalf("python3: %v", err)
	}
	if !bytes.Equal(doc, theirs) {
		t.Errorf("the document differs from Python's json.dumps:\nours:\n%s\npython:\n%s", doc, theirs)
	}
}
