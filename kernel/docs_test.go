package kernel

import (
	"bytes"
	"flag"
	"fmt"
	"os"
	"strings"
	"testing"
)

var update = flag.Bool("update", false, "rewrite the generated parts of docs/kernels.md")

const docsPath = "../docs/kernels.md"

// renderRequired is the generated block of docs/kernels.md: every required
// option, from the embedded fragment.
func renderRequired() string {
	var b strings.Builder
	req := RequiredOptions(Fragment())
	fmt.Fprintf(&b, "Required options (%d, generated from `kernel/fragment.config` by `go test ./kernel -run TestDocsRequiredOptions -update`):\n\n", len(req))
	b.WriteString("```\n")
	for _, r := range req {
		b.WriteString(r + "\n")
	}
	b.WriteString("```\n")
	return b.String()
}

func TestDocsRequiredOptions(t *testing.T) {
	doc, err := os.ReadFile(docsPath)
	if err != nil {
		t.Fatal(err)
	}
	const open, end = "<!-- required-options -->\n", "<!-- /required-options -->\n"
	i, j := bytes.Index(doc, []byte(open)), bytes.Index(doc, []byte(end))
	if i < 0 || j < i {
		t.Fatalf("%s lacks the %q … %q markers", docsPath, open, end)
	}
	want := renderRequired()
	if got := string(doc[i+len(open) : j]); got != want {
		if !*update {
			t.Fatalf("%s is stale: run go test ./kernel -run TestDocsRequiredOptions -update", docsPath)
		}
		out := append(append(append([]byte(nil), doc[:i+len(open)]...), want...), doc[j:]...)
		if err := os.WriteFile(docsPath, out, 0o644); err != nil {
			t.Fatal(err)
		}
	}
}
