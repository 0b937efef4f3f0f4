package workflows

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"

	"gopkg.in/yaml.v3"
)

// TestSimStandIns: every third-party action prune-kvm.yml, kernel-matrix.yml
// and the composite actions use has a stand-in under workflows/sim/
// (scripts/act-sim.sh maps each to it), and the stand-in declares every input the YAML passes,
// so the simulation runs the workflow as written rather than failing on a
// new action or input.
func TestSimStandIns(t *testing.T) {
	root := repoRoot(t)
	files := []string{filepath.Join(root, ".github/workflows/prune-kvm.yml"), filepath.Join(root, ".github/workflows/kernel-matrix.yml")}
	actions, _ := filepath.Glob(filepath.Join(root, "workflows/*/action.yml"))
	files = append(files, actions...)
	usesRE := regexp.MustCompile(`^actions/([a-z-]+(?:/[a-z]+)?)@[0-9a-f]{40}$`)
	seen := 0
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		var doc yaml.Node
		if err := yaml.Unmarshal(data, &doc); err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		for _, step := range findSteps(&doc) {
			m := usesRE.FindStringSubmatch(step.uses)
			if m == nil {
				continue
			}
			seen++
			standIn := filepath.Join(root, "workflows/sim", m[1], "action.yml")
			sdata, err := os.ReadFile(standIn)
			if err != nil {
				t.Errorf("%s uses %s: no stand-in %s", filepath.Base(f), step.uses, standIn)
				continue
			}
			var sa struct {
				Inputs map[string]any `yaml:"inputs"`
			}
			if err := yaml.Unmarshal(sdata, &sa); err != nil {
				t.Fatalf("%s: %v", standIn, err)
			}
			for _, in := range step.with {
				if _, ok := sa.Inputs[in]; !ok {
					t.Errorf("%s passes %s the input %q; its stand-in %s does not declare it", filepath.Base(f), step.uses, in, strings.TrimPrefix(standIn, root+"/"))
				}
			}
		}
	}
	if seen == 0 {
		t.Fatal("found no third-party action; the pattern no longer matches the YAML")
	}
}

type usesStep struct {
	uses string
	with []string
}

// findSteps returns every mapping with a "uses" key, with the keys of its "with".
func findSteps(n *yaml.Node) []usesStep {
	var out []usesStep
	if n.Kind == yaml.MappingNode {
		var s usesStep
		for i := 0; i+1 < len(n.Content); i += 2 {
			k, v := n.Content[i].Value, n.Content[i+1]
			switch k {
			case "uses":
				s.uses = v.Value
			case "with":
				for j := 0; j+1 < len(v.Content); j += 2 {
					s.with = append(s.with, v.Content[j].Value)
				}
			}
		}
		if s.uses != "" {
			out = append(out, s)
		}
	}
	for _, c := range n.Content {
		out = append(out, findSteps(c)...)
	}
	return out
}

// standInScript is the run: script of the one step of a stand-in action.
func standInScript(t *testing.T, action string) string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(repoRoot(t), "workflows/sim", action, "action.yml"))
	if err != nil {
		t.Fatal(err)
	}
	var a struct {
		Runs struct {
			Steps []struct {
				Run string `yaml:"run"`
			} `yaml:"steps"`
		} `yaml:"runs"`
	}
	if err := yaml.Unmarshal(data, &a); err != nil || len(a.Runs.Steps) != 1 {
		t.Fatalf("%s: %v, %d steps", action, err, len(a.Runs.Steps))
	}
	return a.Runs.Steps[0].Run
}

// TestSimCacheConcurrentJobs: the simulation's matrix jobs share this host,
// so two restore the same kernel path at once (a fresh-clone CI failed on
// it: "cp: cannot create regular file …/build.log: No such file or
// directory", one job's rm -rf under the other's cp), and two save one key
// at once. Twenty rounds of two restores and two saves side by side: every
// run succeeds, the restored path and the saved entry are whole.
func TestSimCacheConcurrentJobs(t *testing.T) {
	restore, save := standInScript(t, "cache/restore"), standInScript(t, "cache/save")
	cache, src := t.TempDir(), t.TempDir()
	blob := strings.Repeat("lockstep kernel cache entry\n", 1<<16)
	for _, f := range []string{"bzImage", "config", "build.log", "build.txt"} {
		if err := os.WriteFile(filepath.Join(src, f), []byte(blob), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	run := func(script, path, key string) error {
		cmd := exec.Command("bash", "-euo", "pipefail", "-c", script)
		cmd.Env = append(os.Environ(), "LOCKSTEP_SIM_CACHE="+cache, "CACHE_PATH="+path, "KEY="+key,
			"GITHUB_OUTPUT="+filepath.Join(t.TempDir(), "out"))
		if out, err := cmd.CombinedOutput(); err != nil {
			return fmt.Errorf("%v: %s", err, out)
		}
		return nil
	}
	if err := run(save, src, "k"); err != nil {
		t.Fatal(err)
	}
	dst := filepath.Join(t.TempDir(), "kernels", "k")
	for round := range 20 {
		var wg sync.WaitGroup
		errs := make([]error, 4)
		for i := range 2 {
			wg.Go(func() { errs[i] = run(restore, dst, "k") })
			wg.Go(func() { errs[2+i] = run(save, src, fmt.Sprintf("new-%d", round)) })
		}
		wg.Wait()
		if err := errors.Join(errs...); err != nil {
			t.Fatalf("round %d: %v", round, err)
		}
		for _, dir := range []string{dst, filepath.Join(cache, fmt.Sprintf("new-%d", round))} {
			ents, err := os.ReadDir(dir)
			if err != nil || len(ents) != 4 {
				t.Fatalf("round %d: %s holds %d files (%v), want the 4 of the entry", round, dir, len(ents), err)
			}
		}
	}
}
