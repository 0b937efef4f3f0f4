package main

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/lockstep-sandbox/lockstep/internal/cli"
)

// complete sources the bash completion script and runs it on each line of
// words (the last word is the one being completed), returning each line's
// candidates joined by spaces.
func complete(t *testing.T, script string, lines [][]string) []string {
	t.Helper()
	if _, err := exec.LookPath("bash"); err != nil {
		t.Skip("bash is not installed")
	}
	path := filepath.Join(t.TempDir(), "lockstep.bash")
	if err := os.WriteFile(path, []byte(script), 0o644); err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	fmt.Fprintf(&b, "source %s\n", path)
	for _, words := range lines {
		fmt.Fprintf(&b, "COMP_WORDS=(lockstep")
		for _, w := range words {
			fmt.Fprintf(&b, " '%s'", w)
		}
		fmt.Fprintf(&b, "); COMP_CWORD=%d; COMPREPLY=(); _lockstep; echo \"${COMPREPLY[*]}\"\n", len(words))
	}
	out, err := exec.Command("bash", "-c", b.String()).Output()
	if err != nil {
		t.Fatalf("bash: %v\n%s", err, out)
	}
	got := strings.Split(strings.TrimSuffix(string(out), "\n"), "\n")
	if len(got) != len(lines) {
		t.Fatalf("bash printed %d lines for %d completions:\n%s", len(got), len(lines), out)
	}
	return got
}

// TestCompletionBash: the script, sourced in bash, completes "lockstep ob"
// to observe, every verb from nothing, every flag of every verb from "-",
// each verb's subcommands, and nothing after --.
func TestCompletionBash(t *testing.T) {
	code, script, _ := runCLI(t, "completion", "bash")
	if code != cli.ExitOK {
		t.Fatalf("completion bash: status %d", code)
	}
	lines := [][]string{{"ob"}, {""}, {"help", "pr"}, {"run", "--config", "p.cfg", "--", "-"}}
	vs := verbs.Sorted()
	for _, v := range vs {
		lines = append(lines, []string{v.Name, "-"}, []string{v.Name, ""})
	}
	got := complete(t, script, lines)
	if got[0] != "observe" {
		t.Errorf("lockstep ob<TAB> = %q, want observe", got[0])
	}
	if got[2] != "probe prune" {
		t.Errorf("lockstep help pr<TAB> = %q, want probe prune", got[2])
	}
	if got[3] != "" {
		t.Errorf("a word after -- completed to %q, want nothing (file names)", got[3])
	}
	all := " " + got[1] + " "
	for i, v := range vs {
		if !strings.Contains(all, " "+v.Name+" ") {
			t.Errorf("lockstep <TAB> = %q lacks %s", got[1], v.Name)
		}
		flags := " " + got[4+2*i] + " "
		for _, f := range cli.VerbFlags(v) {
			if !strings.Contains(flags, " "+f+" ") {
				t.Errorf("lockstep %s -<TAB> = %q lacks %s", v.Name, got[4+2*i], f)
			}
		}
		if subs := strings.Join(cli.Subcommands(v), " "); got[5+2*i] != subs {
			t.Errorf("lockstep %s <TAB> = %q, want %q", v.Name, got[5+2*i], subs)
		}
	}
	if subs := cli.Subcommands(verbs["policy"]); strings.Join(subs, " ") != "check fmt hash diff union" {
		t.Errorf("policy's subcommands = %q", subs)
	}
	for _, hidden := range []string{"guest"} {
		if strings.Contains(all, " "+hidden+" ") {
			t.Errorf("lockstep <TAB> offers the hidden verb %s", hidden)
		}
	}
}

func TestCompletionShells(t *testing.T) {
	code, zsh, _ := runCLI(t, "completion", "zsh")
	_, bash, _ := runCLI(t, "completion", "bash")
	if code != cli.ExitOK || !strings.HasPrefix(zsh, "#compdef lockstep\n") || !strings.Contains(zsh, "bashcompinit") || !strings.HasSuffix(zsh, bash) {
		t.Errorf("completion zsh: status %d, want #compdef, bashcompinit and the bash script:\n%s", code, zsh)
	}
	for _, args := range [][]string{{"completion"}, {"completion", "fish"}, {"completion", "bash", "zsh"}} {
		if code, _, _ := runCLI(t, args...); code != cli.ExitUsage {
			t.Errorf("lockstep %s: status %d, want %d", strings.Join(args, " "), code, cli.ExitUsage)
		}
	}
}
