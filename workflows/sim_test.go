package workflows

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"gopkg.in/yaml.v3"
)

// TestSimStandIns: every third-party action prune-kvm.yml and the composite
// actions use has a stand-in under workflows/sim/ (scripts/prune-kvm-sim.sh
// maps each to it), and the stand-in declares every input the YAML passes,
// so the simulation runs the workflow as written rather than failing on a
// new action or input.
func TestSimStandIns(t *testing.T) {
	root := repoRoot(t)
	files := []string{filepath.Join(root, ".github/workflows/prune-kvm.yml")}
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
