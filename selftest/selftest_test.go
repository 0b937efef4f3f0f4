package selftest

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/lockstep-sandbox/lockstep/observer/proof"
)

// TestReadReport: the host trusts the guest's report only when it is of this
// schema and says the status the guest exited with.
func TestReadReport(t *testing.T) {
	for _, tc := range []struct {
		name, body string
		status     int
		err        string
	}{
		{"missing", "", 0, "the guest wrote no report (status 0)"},
		{"not json", "{", 0, "is not a schema-"},
		{"other schema", `{"schema": 99, "status": 0}`, 0, "is not a schema-"},
		{"status differs", `{"schema": 1, "status": 1}`, 0, "the guest exited 0 but its report says status 1"},
		{"agrees", `{"schema": 1, "status": 3}`, 3, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			if tc.body != "" {
				if err := os.WriteFile(filepath.Join(dir, ReportFile), []byte(tc.body), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			rep, err := readReport(dir, tc.status)
			if tc.err == "" {
				if err != nil || rep.Status != tc.status {
					t.Fatalf("readReport = %+v, %v; want status %d", rep, err, tc.status)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Fatalf("readReport = %v; want an error with %q", err, tc.err)
			}
		})
	}
	if proof.Schema != 1 {
		t.Fatalf("proof.Schema is %d: update the cases above", proof.Schema)
	}
}
