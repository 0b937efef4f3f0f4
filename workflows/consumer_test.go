package workflows

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"gopkg.in/yaml.v3"
)

// lockstepUsesRE is how a consumer calls a lockstep action: by the remote
// repository, the action's folder and a revision.
var lockstepUsesRE = regexp.MustCompile(`^lockstep-sandbox/lockstep/workflows/([a-z-]+)@([0-9a-f]{40})$`)

// TestConsumerWorkflow holds testdata/consumer's workflow (the stand-in for a
// user's repository that make consumer-sim runs) to what a user's must be:
// the rules of every workflow here, lockstep's actions called only by
// lockstep-sandbox/lockstep/workflows/<action>@<revision> at one revision,
// each such action one of workflows/, given only inputs it declares and
// every input it requires.
func TestConsumerWorkflow(t *testing.T) {
	repo := loadRepo(t)
	file := filepath.Join(repo.root, "testdata", "consumer", ".github", "workflows", "prune-kvm.yml")
	src, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	c := &checker{repo: repo, file: rel(repo.root, file)}
	wf := c.checkWorkflow(src)
	for _, p := range c.problems {
		t.Error(p)
	}
	if wf == nil {
		return
	}
	revs := map[string]bool{}
	called := map[string]bool{}
	for _, id := range sortedKeys(wf.Jobs) {
		steps, err := decodeSteps(wf.Jobs[id].Steps)
		if err != nil {
			t.Fatalf("job %s: %v", id, err)
		}
		for _, s := range steps {
			if strings.HasPrefix(s.Uses, "./") || strings.HasPrefix(s.Uses, "../") {
				t.Errorf("line %d: uses %s: a consumer has no lockstep checkout; call lockstep-sandbox/lockstep/workflows/<action>@<revision>", s.Line, s.Uses)
				continue
			}
			if strings.HasPrefix(s.Uses, "actions/") {
				continue
			}
			m := lockstepUsesRE.FindStringSubmatch(s.Uses)
			if m == nil {
				t.Errorf("line %d: uses %q is neither a pinned actions/ action nor lockstep-sandbox/lockstep/workflows/<action>@<40-hex revision>", s.Line, s.Uses)
				continue
			}
			revs[m[2]] = true
			called[m[1]] = true
			checkInputs(t, repo.root, m[1], s)
		}
	}
	if len(revs) != 1 {
		t.Errorf("lockstep is called at %d revisions %v; want one (setup builds lockstep from it for the other actions)", len(revs), sortedKeys(revs))
	}
	for _, a := range []string{"setup", "prune", "enable-kvm", "kernel", "observe", "orchestrate"} {
		if !called[a] {
			t.Errorf("the consumer's workflow never calls lockstep's %s action", a)
		}
	}
}

// checkInputs compares a step's with: against the inputs of
// workflows/<name>/action.yml.
func checkInputs(t *testing.T, root, name string, s step) {
	t.Helper()
	src, err := os.ReadFile(filepath.Join(root, "workflows", name, "action.yml"))
	if err != nil {
		t.Errorf("line %d: lockstep has no action %s: %v", s.Line, name, err)
		return
	}
	var a struct {
		Inputs map[string]struct {
			Required bool `yaml:"required"`
		} `yaml:"inputs"`
	}
	if err := yaml.Unmarshal(src, &a); err != nil {
		t.Fatalf("workflows/%s/action.yml: %v", name, err)
	}
	for k := range s.With {
		if _, ok := a.Inputs[k]; !ok {
			t.Errorf("line %d: %s is given input %q, which workflows/%s/action.yml does not declare", s.Line, name, k, name)
		}
	}
	for k, in := range a.Inputs {
		if _, ok := s.With[k]; in.Required && !ok {
			t.Errorf("line %d: %s lacks its required input %q", s.Line, name, k)
		}
	}
}
