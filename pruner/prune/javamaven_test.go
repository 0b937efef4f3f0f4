package prune

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/lockstep-sandbox/lockstep/derive/placement"
	"github.com/lockstep-sandbox/lockstep/enforcer/policy"
	"github.com/lockstep-sandbox/lockstep/exercise"
	"github.com/lockstep-sandbox/lockstep/record"
)

// The java-maven reference exercise's pinned repository, Maven's default
// local repository for root (make toolchains fills it), and the file the
// tampering tests change.
const (
	mavenRepo   = "/root/.m2/repository"
	tamperedPom = "org/junit/jupiter/junit-jupiter-api/5.9.2/junit-jupiter-api-5.9.2.pom"
)

// needMaven skips where Debian's Maven and JDK are not installed.
func needMaven(t *testing.T) {
	t.Helper()
	for _, tool := range []string{"mvn", "javac"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("%s is not installed; see testdata/exercises/java-maven/maven-reference/README.md for the apt-get command", tool)
		}
	}
	if _, err := os.Stat(mavenRepo); err != nil {
		t.Skipf("%s: the local repository is not filled; run make toolchains", mavenRepo)
	}
}

// javaMaven copies the java-maven reference exercise, lets change edit the
// copy and its prune.json (decoded), and reads it.
func javaMaven(t *testing.T, change func(dir string, cfg map[string]any)) *exercise.Exercise {
	t.Helper()
	orig := readExercise(t, "java-maven/maven-reference")
	dir := filepath.Join(t.TempDir(), "java-maven", "maven-reference")
	if err := exercise.FreshCopy(orig.Dir, dir); err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(filepath.Join(dir, "prune.json"))
	if err != nil {
		t.Fatal(err)
	}
	var cfg map[string]any
	if err := json.Unmarshal(data, &cfg); err != nil {
		t.Fatal(err)
	}
	change(dir, cfg)
	if data, err = json.Marshal(cfg); err != nil {
		t.Fatal(err)
	}
	write(t, filepath.Join(dir, "prune.json"), string(data), 0o644)
	ex, err := exercise.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	return ex
}

// copyRepo copies the pinned repository and returns the copy's root.
func copyRepo(t *testing.T) string {
	t.Helper()
	// In /var/tmp: the seed java.cfg writes /tmp, and a write right above
	// a pinned root aborts the prune.
	base, err := os.MkdirTemp("/var/tmp", "lockstep-maven-repo-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(base) })
	repo := filepath.Join(base, "repository")
	if out, err := exec.Command("cp", "-a", mavenRepo, repo).CombinedOutput(); err != nil {
		t.Fatalf("cp -a %s: %v\n%s", mavenRepo, err, out)
	}
	return repo
}

func javaOptions(t *testing.T) Options {
	opts := hostOptions(t)
	opts.BaselineRuns, opts.VerificationRuns = 1, 1
	opts.SkipLimits, opts.SkipContainment = true, true
	return opts
}

// TestHostJavaMavenAborts shows each wrong reason that must abort the
// java-maven prune, and the abort's reason.
func TestHostJavaMavenAborts(t *testing.T) {
	needHost(t)
	needMaven(t)
	t.Setenv("LOCKSTEP_DISPOSABLE", "1")
	cases := []struct {
		name string
		// change edits the copy and returns what the abort must say.
		change func(t *testing.T, dir string, cfg map[string]any, opts *Options) string
		runs   int
	}{
		{"no tests", func(t *testing.T, dir string, _ map[string]any, _ *Options) string {
			if err := os.RemoveAll(filepath.Join(dir, "src", "test")); err != nil {
				t.Fatal(err)
			}
			return "baseline run 1: the reference run ran no tests"
		}, 1},
		{"a version the repository lacks", func(t *testing.T, dir string, _ map[string]any, _ *Options) string {
			pom := filepath.Join(dir, "pom.xml")
			data, err := os.ReadFile(pom)
			if err != nil {
				t.Fatal(err)
			}
			write(t, pom, strings.Replace(string(data), "<junit.version>5.9.2<", "<junit.version>5.99.0<", 1), 0o644)
			return "baseline run 1: the reference run failed for an infrastructure reason"
		}, 1},
		{"a manifest that does not match", func(t *testing.T, _ string, _ map[string]any, opts *Options) string {
			opts.SeedDir = t.TempDir()
			for _, name := range []string{"java.cfg", "java-kept.cfg", "maven-repo.sha256"} {
				data, err := readSeedFile("", name)
				if err != nil {
					t.Fatal(err)
				}
				if name == "maven-repo.sha256" {
					data = []byte(strings.Replace(string(data), "  "+tamperedPom+"\n", "  "+tamperedPom+".missing\n", 1))
				}
				write(t, filepath.Join(opts.SeedDir, name), string(data), 0o644)
			}
			return mavenRepo + "/" + tamperedPom + ".missing is missing"
		}, 0},
		{"a tampered repository file", func(t *testing.T, _ string, cfg map[string]any, _ *Options) string {
			repo := copyRepo(t)
			cfg["pinned_read_roots"] = []map[string]string{{"path": repo, "manifest": "maven-repo.sha256"}}
			write(t, filepath.Join(repo, tamperedPom), "<project/>\n", 0o644)
			return filepath.Join(repo, tamperedPom) + " has SHA-256"
		}, 0},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			opts := javaOptions(t)
			var want string
			ex := javaMaven(t, func(dir string, cfg map[string]any) { want = c.change(t, dir, cfg, &opts) })
			res, err := Prune(t.Context(), ex, opts)
			if err != nil {
				t.Fatal(err)
			}
			if res.Aborted == nil {
				t.Fatalf("the prune gave a policy:\n%s", res.Cfg)
			}
			if !strings.Contains(res.Aborted.Aborted, want) {
				t.Errorf("aborted with %q, want %q", res.Aborted.Aborted, want)
			}
			if res.TotalRuns() != c.runs {
				t.Errorf("%d runs %v before the abort, want %d", res.TotalRuns(), res.Runs, c.runs)
			}
			t.Logf("aborted after %d runs: %s", res.TotalRuns(), res.Aborted.Aborted)
		})
	}
}

// TestHostJavaMavenNoSeed: without the seed java.cfg, the JVM's and
// Surefire's random names in /tmp are never granted and the prune aborts.
func TestHostJavaMavenNoSeed(t *testing.T) {
	needHost(t)
	needMaven(t)
	needSlow(t, "the prune grows for minutes before it aborts")
	t.Setenv("LOCKSTEP_DISPOSABLE", "1")
	ex := javaMaven(t, func(_ string, cfg map[string]any) { delete(cfg, "seed") })
	res, err := Prune(t.Context(), ex, javaOptions(t))
	if err != nil {
		t.Fatal(err)
	}
	if res.Aborted == nil {
		t.Fatalf("the prune without a seed gave a policy:\n%s", res.Cfg)
	}
	ev, _ := json.Marshal(res.Aborted.Evidence)
	if !strings.Contains(res.Aborted.Aborted, "without an attributable denial") || !strings.Contains(string(ev), "/tmp/") {
		t.Errorf("aborted with %q, want a failure without an attributable denial with a /tmp name in the record", res.Aborted.Aborted)
	}
	t.Logf("aborted after %d runs %v: %s", res.TotalRuns(), res.Runs, res.Aborted.Aborted)
}

// TestHostJavaMaven prunes the java-maven reference exercise on this host:
// the policy reads Debian's Maven repository as one [read] entry with its
// comment and nothing beneath it, keeps the kept seed's row with its
// reason, and its record vouches for it.
func TestHostJavaMaven(t *testing.T) {
	needHost(t)
	needMaven(t)
	needSlow(t, "a JVM prune takes 87 runs, 15 to 30 minutes here")
	t.Setenv("LOCKSTEP_DISPOSABLE", "1")
	ex := readExercise(t, "java-maven/maven-reference")
	start := time.Now()
	res, err := Prune(t.Context(), ex, javaOptions(t))
	if err != nil {
		t.Fatal(err)
	}
	if res.Aborted != nil {
		t.Fatalf("aborted: %s\n%v", res.Aborted.Aborted, res.Aborted.Evidence["last_failing_log_tail"])
	}
	t.Logf("%d runs %v in %v:\n%s", res.TotalRuns(), res.Runs, time.Since(start).Round(time.Second), res.Cfg)
	if !res.Policy.FS[mavenRepo][policy.Read] || res.Policy.Comments[mavenRepo] != placement.PinnedComment(mavenRepo) {
		t.Errorf("%s is not one [read] entry with the pinned comment", mavenRepo)
	}
	for q, secs := range res.Policy.FS {
		if policy.Beneath(q, mavenRepo) {
			t.Errorf("the policy names %s beneath the pinned repository", q)
		}
		if (q == mavenRepo || policy.Beneath(mavenRepo, q)) && (secs[policy.Write] || secs[policy.Create] || secs[policy.Delete]) {
			t.Errorf("the policy writes %s, on or above the pinned repository", q)
		}
	}
	if !strings.Contains(res.Policy.Comments["/sys/fs/cgroup"], "kept: from the kept seed java-kept.cfg") {
		t.Errorf("the kept row [read] /sys/fs/cgroup is missing or without its reason")
	}
	paths, err := res.Write(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	rec, err := record.ReadExercise(paths[1])
	if err != nil {
		t.Fatal(err)
	}
	if err := rec.Vouches(res.Cfg); err != nil {
		t.Error(err)
	}
}

// needSlow skips a test that takes many minutes unless LOCKSTEP_SLOW_TESTS=1
// (make test-slow): make test, and so CI, would pay for it on every landing
// while it checks nothing the other java-maven tests do not reach quickly
// except the whole prune.
func needSlow(t *testing.T, why string) {
	t.Helper()
	if os.Getenv("LOCKSTEP_SLOW_TESTS") != "1" {
		t.Skipf("%s: runs with LOCKSTEP_SLOW_TESTS=1 (make test-slow)", why)
	}
}
