package readroot

import (
	"bytes"
	"strings"
	"testing"
)

// FuzzParseManifest: a manifest that parses renders back to the same bytes,
// and no accepted path can leave the root.
func FuzzParseManifest(f *testing.F) {
	sum := strings.Repeat("0f", 32)
	f.Add([]byte(sum + "  org/a/1.0/a.pom\n" + sum + "  org/b.jar\n"))
	f.Add([]byte(sum + "  ../x\n"))
	f.Add([]byte(sum + "  a\r\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		m, err := ParseManifest(data)
		if err != nil {
			return
		}
		if !bytes.Equal(m.Render(), data) {
			t.Fatalf("render of %q is %q", data, m.Render())
		}
		for _, e := range m {
			if checkRel(e.Path) != nil || strings.Contains(e.Path, "\n") {
				t.Fatalf("accepted path %q", e.Path)
			}
		}
	})
}
