package report

import "testing"

// TestKeyedFile: the key goes before the report's extension, and no report
// stays none.
func TestKeyedFile(t *testing.T) {
	if got := KeyedFile("/tmp/observe.html", "c"); got != "/tmp/observe-c.html" {
		t.Errorf("KeyedFile = %q", got)
	}
	if got := KeyedFile("", "c"); got != "" {
		t.Errorf("KeyedFile of no report = %q, want none", got)
	}
}
