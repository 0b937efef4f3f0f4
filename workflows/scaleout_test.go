package workflows

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"gopkg.in/yaml.v3"

	"github.com/lockstep-sandbox/lockstep/internal/lockstepbin"
)

// target is one entry of the plan job's matrix.
type target struct {
	Key    string `json:"key"`
	Source string `json:"source"`
}

// targetsExpr is the matrix every per-key job takes from the plan job.
const targetsExpr = "${{ fromJSON(needs.plan.outputs.targets) }}"

// plan runs the plan stage of scripts/prune-kvm.sh, as the plan job does,
// and returns the matrix it prints for GITHUB_OUTPUT, or the exit status.
func plan(t *testing.T, bin string, args ...string) ([]target, int) {
	t.Helper()
	root := repoRoot(t)
	cmd := exec.CommandContext(t.Context(), filepath.Join(root, "scripts", "prune-kvm.sh"), append([]string{"plan"}, args...)...)
	cmd.Env = append(os.Environ(), "PATH="+filepath.Dir(bin)+string(os.PathListSeparator)+os.Getenv("PATH"))
	out, err := cmd.Output()
	if ee, ok := err.(*exec.ExitError); ok {
		return nil, ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	line, ok := strings.CutPrefix(strings.TrimSpace(string(out)), "targets=")
	if !ok || strings.Contains(line, "\n") {
		t.Fatalf("plan printed %q, want one line targets=<JSON>", out)
	}
	var ts []target
	if err := json.Unmarshal([]byte(line), &ts); err != nil {
		t.Fatalf("plan printed %q: %v", line, err)
	}
	return ts, 0
}

// treeKeys are the keys of testdata/exercises, sorted: what --key all
// prunes. Written out, not discovered: the plan job's matrix is checked
// against the tree as it is, not against a second run of the discovery
// the plan itself uses.
var treeKeys = []string{"broken", "c", "c-gcc", "cpp", "fixture", "generic", "java-maven", "python", "r"}

// TestPlanMatrixIsTheExerciseKeys: with key all the plan job's matrix is
// every key of the exercise tree, each once, in key order, with source
// reference but the fixture's; one key is a matrix of one, and a source
// that does not fit the key is refused before any job starts.
func TestPlanMatrixIsTheExerciseKeys(t *testing.T) {
	bin := lockstepbin.Build(t)
	exercises := filepath.Join(repoRoot(t), "testdata", "exercises")
	ts, code := plan(t, bin, "--key", "all", "--source", "fixture", "--exercises", exercises)
	if code != 0 {
		t.Fatalf("plan --key all exited %d", code)
	}
	var keys []string
	for _, tg := range ts {
		keys = append(keys, tg.Key)
		want := "reference"
		if tg.Key == "fixture" {
			want = "fixture"
		}
		if tg.Source != want {
			t.Errorf("key %s: source %q, want %q", tg.Key, tg.Source, want)
		}
	}
	if want := treeKeys; !slices.Equal(keys, want) {
		t.Errorf("the plan's keys %v, want the exercise tree's %v", keys, want)
	}
	if ts, code := plan(t, bin, "--key", "generic", "--source", "reference"); code != 0 || !slices.Equal(ts, []target{{"generic", "reference"}}) {
		t.Errorf("plan --key generic = %v (exit %d), want the one key", ts, code)
	}
	if _, code := plan(t, bin, "--key", "generic", "--source", "fixture"); code != 2 {
		t.Errorf("plan --key generic --source fixture exited %d, want 2", code)
	}
}

// pkvmJob is what the scale-out tests read of a job of prune-kvm.yml.
type pkvmJob struct {
	Needs    any               `yaml:"needs"`
	If       string            `yaml:"if"`
	Outputs  map[string]string `yaml:"outputs"`
	Strategy struct {
		FailFast *bool                `yaml:"fail-fast"`
		Matrix   map[string]yaml.Node `yaml:"matrix"`
	} `yaml:"strategy"`
	Steps []struct {
		ID   string            `yaml:"id"`
		Uses string            `yaml:"uses"`
		Run  string            `yaml:"run"`
		With map[string]string `yaml:"with"`
	} `yaml:"steps"`
}

func loadPruneKVM(t *testing.T) map[string]pkvmJob {
	t.Helper()
	return loadJobs(t, ".github/workflows/prune-kvm.yml")
}

// checkKernelBuiltOnce: the workflow's job kernel builds the pinned kernel
// (the kernel action without restore-only) and job user only restores it.
func checkKernelBuiltOnce(t *testing.T, jobs map[string]pkvmJob, user string) {
	t.Helper()
	restore := map[string]string{}
	for _, name := range []string{"kernel", user} {
		for _, s := range jobs[name].Steps {
			if s.Uses == "./workflows/kernel" {
				restore[name] = s.With["restore-only"]
			}
		}
	}
	if r, ok := restore["kernel"]; !ok || r == "true" {
		t.Errorf("job kernel: the kernel action with restore-only %q (found %v), want it building", r, ok)
	}
	if restore[user] != "true" {
		t.Errorf("job %s: the kernel action with restore-only %q, want \"true\" (the kernel job built it)", user, restore[user])
	}
}

// loadJobs reads the jobs of the workflow file (relative to the repository).
func loadJobs(t *testing.T, file string) map[string]pkvmJob {
	t.Helper()
	src, err := os.ReadFile(filepath.Join(repoRoot(t), file))
	if err != nil {
		t.Fatal(err)
	}
	var wf struct {
		Jobs map[string]pkvmJob `yaml:"jobs"`
	}
	if err := yaml.Unmarshal(src, &wf); err != nil {
		t.Fatal(err)
	}
	return wf.Jobs
}

// leg is one job of a run: a matrix combination's values by expression.
type leg map[string]string

// legs expands a job's matrix for the plan's targets: target from the plan
// job, any other dimension a literal list.
func legs(t *testing.T, name string, j pkvmJob, ts []target) []leg {
	t.Helper()
	out := []leg{{}}
	for dim, n := range j.Strategy.Matrix {
		var next []leg
		var values []leg
		switch {
		case dim == "target":
			if n.Value != targetsExpr {
				t.Errorf("job %s: matrix.target = %q, want %q", name, n.Value, targetsExpr)
			}
			for _, tg := range ts {
				values = append(values, leg{"matrix.target.key": tg.Key, "matrix.target.source": tg.Source})
			}
		default:
			var list []string
			if err := n.Decode(&list); err != nil {
				t.Fatalf("job %s: matrix.%s: %v", name, dim, err)
			}
			for _, v := range list {
				values = append(values, leg{"matrix." + dim: v})
			}
		}
		for _, l := range out {
			for _, v := range values {
				m := leg{}
				for k, x := range l {
					m[k] = x
				}
				for k, x := range v {
					m[k] = x
				}
				next = append(next, m)
			}
		}
		out = next
	}
	return out
}

var exprRefRE = regexp.MustCompile(`\$\{\{\s*([a-z.]+)\s*\}\}`)

// resolve replaces a leg's matrix expressions in s; anything left is an
// expression the test cannot resolve.
func resolve(t *testing.T, s string, l leg) string {
	t.Helper()
	r := exprRefRE.ReplaceAllStringFunc(s, func(m string) string {
		e := exprRefRE.FindStringSubmatch(m)[1]
		if v, ok := l[e]; ok {
			return v
		}
		return m
	})
	if strings.Contains(r, "${{") {
		t.Errorf("artefact name %q: an expression other than the matrix's is left: %q", s, r)
	}
	return r
}

// TestArtefactNamesPerKey expands every job of prune-kvm.yml over the keys
// of the exercise tree (key all): every artefact a leg uploads has a name
// no other leg uses, the name of a per-key job's artefact carries its key,
// and every artefact a leg downloads is one some leg uploads for its key.
func TestArtefactNamesPerKey(t *testing.T) {
	var ts []target
	for _, k := range treeKeys {
		ts = append(ts, target{Key: k, Source: "reference"})
	}
	if len(ts) < 2 {
		t.Fatalf("the exercise tree has %d keys; the test needs two or more", len(ts))
	}
	jobs := loadPruneKVM(t)
	uploaded := map[string]string{}
	type download struct{ job, name string }
	var downloads []download
	legCount := 0
	for name, j := range jobs {
		for _, l := range legs(t, name, j, ts) {
			legCount++
			for _, s := range j.Steps {
				switch {
				case strings.HasPrefix(s.Uses, "actions/upload-artifact@"):
					n := resolve(t, s.With["name"], l)
					if prev, dup := uploaded[n]; dup {
						t.Errorf("artefact %q is uploaded by %s and by %s", n, prev, name)
					}
					uploaded[n] = name
					if k := l["matrix.target.key"]; k != "" && !strings.Contains(n, k) {
						t.Errorf("job %s, key %s: artefact %q does not carry the key", name, k, n)
					}
				case strings.HasPrefix(s.Uses, "actions/download-artifact@"):
					if s.With["name"] == "" {
						t.Errorf("job %s downloads by pattern %q; want each artefact by its name", name, s.With["pattern"])
						continue
					}
					downloads = append(downloads, download{name, resolve(t, s.With["name"], l)})
				}
			}
		}
	}
	for _, d := range downloads {
		if _, ok := uploaded[d.name]; !ok {
			t.Errorf("job %s downloads %q, which no job uploads", d.job, d.name)
		}
	}
	// plan, kernel ×2, and per key prune, kvm ×2, merge.
	if want := 3 + 4*len(ts); legCount != want {
		t.Errorf("%d jobs for %d keys, want %d (plan, a kernel per runner image, and per key a prune, two kvm and a merge)", legCount, len(ts), want)
	}
	t.Logf("%d keys: %d jobs, %d artefacts", len(ts), legCount, len(uploaded))
}
