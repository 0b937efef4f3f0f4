package orchestrate

import (
	"fmt"
	"io"
	"strings"

	"github.com/lockstep-sandbox/lockstep/internal/cli"
)

// Markdown renders the summary for a CI step summary ($GITHUB_STEP_SUMMARY).
func (s *Summary) Markdown() string {
	var b strings.Builder
	b.WriteString("## lockstep orchestrate\n\n")
	fmt.Fprintf(&b, "Wrote %d files to `%s`.", len(s.Files), s.CoreDir)
	if len(s.KVMDirs) > 1 {
		fmt.Fprintf(&b, " The sidecars of %d observer runs agreed; `%s` stands for all.", len(s.KVMDirs), s.KVMDirs[0])
	}
	b.WriteString("\n\n| language | exercises | base rows | ABI-10 rows | base hash |\n| --- | ---: | ---: | --- | --- |\n")
	for _, l := range s.Languages {
		fmt.Fprintf(&b, "| %s | %d | %d | %s | `%s` |\n", l.Name, len(l.Exercises), l.BaseRows, rowsCell(l.ABI10Rows), l.BaseHash)
	}
	b.WriteString("\n| exercise | remainder rows | ABI-10 rows | .cfg SHA-256 |\n| --- | ---: | --- | --- |\n")
	for _, l := range s.Languages {
		for _, e := range l.Exercises {
			fmt.Fprintf(&b, "| %s_%s | %d | %s | `%s` |\n", l.Name, e.Name, e.Rows, rowsCell(e.ABI10Rows), e.CfgSHA256[:12])
		}
	}
	if len(s.UnknownRoots) > 0 {
		b.WriteString("\nMerged with `--allow-unknown-root`: these records have no root digest, so the root each exercise was pruned on and the root it was observed on were not compared:\n\n")
		for _, u := range s.UnknownRoots {
			fmt.Fprintf(&b, "- %s: `%s` (beside `%s`, root `%s`)\n", u.Exercise, mdEscape(u.Record), mdEscape(u.Beside), u.BesideRoot)
		}
	}
	if len(s.Warnings) > 0 {
		b.WriteString("\nWarnings:\n\n")
		for _, w := range s.Warnings {
			fmt.Fprintf(&b, "- %s\n", mdEscape(w))
		}
	}
	return b.String()
}

// Markdown renders a refusal for a CI step summary.
func (r *Refusal) Markdown() string {
	var b strings.Builder
	n := fmt.Sprintf("%d problems", len(r.Problems))
	if len(r.Problems) == 1 {
		n = "1 problem"
	}
	fmt.Fprintf(&b, "## lockstep orchestrate: refused\n\nNothing was written. %s:\n\n", n)
	for _, p := range r.Problems {
		fmt.Fprintf(&b, "- %s\n", mdEscape(p))
	}
	return b.String()
}

func rowsCell(rows []string) string {
	if len(rows) == 0 {
		return "none"
	}
	return "`" + strings.Join(rows, "`, `") + "`"
}

func mdEscape(s string) string {
	return strings.NewReplacer("|", `\|`, "\n", " ", "<", "&lt;", ">", "&gt;").Replace(s)
}

// WriteText writes the summary as `lockstep orchestrate` prints it: a line
// per language, then what was written where.
func (s *Summary) WriteText(w io.Writer) {
	for _, l := range s.Languages {
		fmt.Fprintf(w, "%s: %s, base %s, %s, %s\n", l.Name, cli.Plural(len(l.Exercises), "exercise"), cli.Plural(l.BaseRows, "row"),
			cli.Plural(len(l.ABI10Rows), "ABI-10 row"), l.BaseHash)
	}
	fmt.Fprintf(w, "wrote %s to %s\n", cli.Plural(len(s.Files), "file"), s.CoreDir)
}
