package main

import (
	"bytes"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/lockstep-sandbox/lockstep/internal/cli"
)

var update = flag.Bool("update", false, "rewrite docs/cli.md from the verb table")

// renderCLIDoc renders every verb's help into the Markdown of docs/cli.md, so
// the page and `--help` come from one source.
func renderCLIDoc() []byte {
	var b bytes.Buffer
	b.WriteString("# lockstep command line\n\n")
	b.WriteString("Generated from the verb table by `go test ./cmd/lockstep -run TestCLIDoc -update`; do not edit by hand.\n\n")
	b.WriteString("Global flag: `-v` (progress and every external command on stderr). Exit codes: docs/exit-codes.md.\n\n")
	for _, v := range verbs.Sorted() {
		fmt.Fprintf(&b, "- [`%s`](#%s): %s\n", v.Name, v.Name, v.Short)
	}
	for _, v := range verbs.Sorted() {
		fmt.Fprintf(&b, "\n## %s\n\n```\n", v.Name)
		cli.PrintVerbHelp(&b, v)
		b.WriteString("```\n")
	}
	return b.Bytes()
}

func TestCLIDoc(t *testing.T) {
	path := filepath.Join("..", "..", "docs", "cli.md")
	got := renderCLIDoc()
	if *update {
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("read %s: %v (run: go test ./cmd/lockstep -run TestCLIDoc -update)", path, err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("docs/cli.md is stale: run go test ./cmd/lockstep -run TestCLIDoc -update and review the diff")
	}
}

func TestEveryVerbHasHelp(t *testing.T) {
	for _, v := range verbs.Sorted() {
		t.Run(v.Name, func(t *testing.T) {
			if v.Usage == "" || v.Short == "" {
				t.Errorf("verb %s: Usage and Short must be set", v.Name)
			}
			if !strings.Contains(v.Example, "$ lockstep "+v.Name) {
				t.Errorf("verb %s: Example = %q, want a '$ lockstep %s …' line", v.Name, v.Example, v.Name)
			}
			var out, errb bytes.Buffer
			code := run(t.Context(), []string{v.Name, "--help"}, &cli.Stdio{Out: &out, Err: &errb})
			if code != cli.ExitOK || !strings.Contains(out.String(), "usage: lockstep "+v.Name) {
				t.Errorf("lockstep %s --help = %d, stdout %q, want 0 and the usage line", v.Name, code, out.String())
			}
		})
	}
}

func TestUnknownVerbIsUsageError(t *testing.T) {
	var out, errb bytes.Buffer
	if code := run(t.Context(), []string{"no-such-verb"}, &cli.Stdio{Out: &out, Err: &errb}); code != cli.ExitUsage {
		t.Errorf("run(no-such-verb) = %d, want %d", code, cli.ExitUsage)
	}
	if !strings.Contains(errb.String(), "lockstep help") {
		t.Errorf("stderr = %q, want a hint naming 'lockstep help'", errb.String())
	}
}

func TestNoVerbIsUsageError(t *testing.T) {
	var out, errb bytes.Buffer
	if code := run(t.Context(), nil, &cli.Stdio{Out: &out, Err: &errb}); code != cli.ExitUsage {
		t.Errorf("run() = %d, want %d", code, cli.ExitUsage)
	}
}
