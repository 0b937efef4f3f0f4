package verdict

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/lockstep-sandbox/lockstep/internal/lazyre"
)

// ExitClass sorts a run's end into one of five classes.
type ExitClass string

// The exit classes, spelled as Phobos's verdict.py spells them.
const (
	Success     ExitClass = "success"      // status 0
	TestsFailed ExitClass = "tests-failed" // non-zero with a failed test, or an unreadable report
	Failure     ExitClass = "failure"      // any other non-zero status
	Timeout     ExitClass = "timeout"      // the runner's deadline or status 124
	Signalled   ExitClass = "signalled"    // status ≥ 128 (128 + signal)
)

// TimeoutStatus is the status lockstep's enforcer (and coreutils' timeout)
// ends a command with when its time ran out; Phobos used 14.
const TimeoutStatus = 124

// Outcome is one test's result.
type Outcome string

// The outcomes of a test. Unreadable stands for a whole report that could
// not be read; its test ID is the report's path.
const (
	Passed     Outcome = "passed"
	Failed     Outcome = "failed"
	Skipped    Outcome = "skipped"
	Unreadable Outcome = "unreadable"
)

// Test is one (test, outcome) pair. In JSON it is the two-element array
// [id, outcome], as Phobos writes its pairs.
type Test struct {
	ID      string
	Outcome Outcome
}

func (t Test) less(o Test) bool {
	if t.ID != o.ID {
		return t.ID < o.ID
	}
	return t.Outcome < o.Outcome
}

// MarshalJSON writes the pair as [id, outcome].
func (t Test) MarshalJSON() ([]byte, error) {
	return json.Marshal([2]string{t.ID, string(t.Outcome)})
}

// UnmarshalJSON reads [id, outcome], refusing an unknown outcome.
func (t *Test) UnmarshalJSON(b []byte) error {
	var pair []string
	if err := json.Unmarshal(b, &pair); err != nil {
		return fmt.Errorf("test pair: %w", err)
	}
	if len(pair) != 2 {
		return fmt.Errorf("test pair has %d elements, want 2 ([id, outcome])", len(pair))
	}
	switch o := Outcome(pair[1]); o {
	case Passed, Failed, Skipped, Unreadable:
		t.ID, t.Outcome = pair[0], o
		return nil
	}
	return fmt.Errorf("test %q has outcome %q, want passed, failed, skipped or unreadable", pair[0], pair[1])
}

// Run is what one run of an exercise left behind.
type Run struct {
	// Status is the command's exit status; a death by signal N is 128+N.
	Status int
	// TimedOut says the runner's own deadline ended the run.
	TimedOut bool
	// Log is the run's stdout and stderr, interleaved as written.
	Log []byte
	// Reports are the JUnit files found where the exercise's report globs
	// point; nil means none was found.
	Reports []Report
}

// Verdict is what a run showed. Its JSON form is part of the exercise
// record (package record).
type Verdict struct {
	ExitClass ExitClass `json:"exit_class"`
	// Tests are the (test, outcome) pairs, sorted by ID then outcome,
	// without duplicates; never nil.
	Tests []Test `json:"tests"`
	// TestsRan is false when there was no report, an unreadable report, or
	// no test case in the reports.
	TestsRan bool `json:"tests_ran"`
	// NoSource says the build reported that it ran no tests.
	NoSource bool `json:"no_source"`
	// InfraFailure says the build's own machinery broke.
	InfraFailure bool `json:"infra_failure"`
	// Evidence is the log line behind NoSource or InfraFailure ("" if
	// neither), cut to 200 bytes.
	Evidence string `json:"evidence,omitempty"`
}

var (
	ansi = lazyre.New(`\x1b\[[0-9;?]*[ -/]*[@-~]`)
	// Gradle's compile and test tasks without sources, in any (sub)project:
	// "> Task :app:test NO-SOURCE" (Gradle 5+), ":app:test NO-SOURCE" (the
	// plain console of Gradle 4, as Debian ships it).
	gradleNoSource = lazyre.New(`^(?:> Task )?(?::[^\s:]+)*:(?:compile(?:Test)?(?:Java|Kotlin|Groovy|Scala)|test) NO-SOURCE$`)
	mavenNoTests   = lazyre.New(`^(?:\[(?:INFO|WARNING|WARN)\] )?(?:No tests to run[.!]|Tests are skipped\.)$`)
	pytestNoTests  = lazyre.New(`^(?:=+ )?no tests ran(?: in [0-9.]+s)?(?: \([^)]*\))?(?: =+)?$`)
	traceback      = "Traceback (most recent call last):"
	infraAnywhere  = []string{
		"ModuleNotFoundError",
		"Fatal Python error",
		"INTERNALERROR>",
		"ImportError while loading conftest",
		"in offline mode and the artifact",
	}
)

// Judge reads one run. It never fails: what cannot be read becomes part of
// the verdict (an unreadable report, tests_ran false).
func Judge(r Run) Verdict {
	pairs, names, unreadable := tests(r.Reports)
	failed := false
	for _, t := range pairs {
		if t.Outcome == Failed {
			failed = true
		}
	}
	v := Verdict{
		Tests:    pairs,
		TestsRan: len(r.Reports) > 0 && !unreadable && len(names) > 0,
	}
	switch {
	case r.TimedOut || r.Status == TimeoutStatus:
		v.ExitClass = Timeout
	case r.Status >= 128:
		v.ExitClass = Signalled
	case unreadable:
		v.ExitClass = TestsFailed
	case r.Status == 0:
		v.ExitClass = Success
	case failed:
		v.ExitClass = TestsFailed
	default:
		v.ExitClass = Failure
	}
	v.readLog(r.Log, names)
	return v
}

// readLog sets NoSource, InfraFailure and Evidence from the log. names are
// the reported tests' names: a traceback counts as an infrastructure failure
// only when no reported test is named in the log before it.
func (v *Verdict) readLog(full []byte, names []string) {
	rest, start := full, 0
	for len(rest) > 0 {
		line := rest
		if i := bytes.IndexByte(rest, '\n'); i >= 0 {
			line, rest = rest[:i], rest[i+1:]
		} else {
			rest = nil
		}
		lineStart := start
		start += len(line) + 1
		s := strings.TrimRight(string(line), "\r \t")
		if strings.IndexByte(s, 0x1b) >= 0 {
			s = ansi.ReplaceAllString(s, "")
		}
		if !v.NoSource && noSourceLine(s) {
			v.NoSource = true
			v.note(s)
		}
		if v.InfraFailure {
			continue
		}
		for _, p := range infraAnywhere {
			if strings.Contains(s, p) {
				v.InfraFailure = true
				v.note(s)
				break
			}
		}
		if !v.InfraFailure && strings.Contains(s, traceback) && !anyNamed(names, full[:lineStart]) {
			v.InfraFailure = true
			v.note(s)
		}
	}
}

// noSourceLine reports whether a log line says the build ran no tests; cheap
// substring checks keep the regular expressions off ordinary lines.
func noSourceLine(s string) bool {
	switch {
	case strings.HasSuffix(s, " NO-SOURCE"):
		return gradleNoSource.MatchString(s)
	case strings.Contains(s, "No tests to run") || strings.Contains(s, "Tests are skipped."):
		return mavenNoTests.MatchString(s)
	case strings.Contains(s, "no tests ran"):
		return pytestNoTests.MatchString(strings.TrimSpace(s))
	}
	return false
}

// note keeps the first finding's line as evidence.
func (v *Verdict) note(line string) {
	if v.Evidence != "" {
		return
	}
	if len(line) > 200 {
		line = line[:200]
	}
	v.Evidence = strings.ToValidUTF8(line, "\uFFFD")
}

// anyNamed reports whether one of names occurs in log.
func anyNamed(names []string, log []byte) bool {
	for _, n := range names {
		if n != "" && bytes.Contains(log, []byte(n)) {
			return true
		}
	}
	return false
}

// Same reports whether two runs agree: the same exit class and the same set
// of (test, outcome) pairs. NoSource, InfraFailure and Evidence do not take
// part; a cut report never agrees with a run without tests.
func (v Verdict) Same(o Verdict) bool {
	if v.ExitClass != o.ExitClass || len(v.Tests) != len(o.Tests) {
		return false
	}
	for i := range v.Tests {
		if v.Tests[i] != o.Tests[i] {
			return false
		}
	}
	return true
}

// Reasons a reference run cannot anchor a prune; ReferenceProblem wraps one.
var (
	ErrNoTests        = errors.New("the reference run ran no tests")
	ErrInfrastructure = errors.New("the reference run failed for an infrastructure reason")
	ErrFailsOwnTests  = errors.New("the reference fails its own tests")
)

// ReferenceProblem returns nil when the run can serve as the unsandboxed
// reference a prune matches: tests ran, none was reported missing or
// unreadable, the build's machinery did not break, it succeeded, and every
// test passed or was skipped. Otherwise the error wraps ErrNoTests,
// ErrInfrastructure or ErrFailsOwnTests and names the evidence.
func (v Verdict) ReferenceProblem() error {
	switch {
	case v.NoSource:
		return fmt.Errorf("%w: the log says %q", ErrNoTests, v.Evidence)
	case v.InfraFailure:
		return fmt.Errorf("%w: the log says %q", ErrInfrastructure, v.Evidence)
	case !v.TestsRan:
		for _, t := range v.Tests {
			if t.Outcome == Unreadable {
				return fmt.Errorf("%w: report %s is unreadable", ErrNoTests, t.ID)
			}
		}
		if len(v.Tests) == 0 {
			return fmt.Errorf("%w: no JUnit report with a test case was found (exit class %s)", ErrNoTests, v.ExitClass)
		}
		return fmt.Errorf("%w (exit class %s)", ErrNoTests, v.ExitClass)
	}
	var bad []string
	for _, t := range v.Tests {
		if t.Outcome == Failed {
			bad = append(bad, t.ID)
		}
	}
	if len(bad) > 0 {
		more := ""
		if len(bad) > 5 {
			more = fmt.Sprintf(" and %d more", len(bad)-5)
			bad = bad[:5]
		}
		return fmt.Errorf("%w: %s failed%s (exit class %s)", ErrFailsOwnTests, strings.Join(bad, ", "), more, v.ExitClass)
	}
	if v.ExitClass != Success {
		return fmt.Errorf("%w: every test passed but the run ended with exit class %s", ErrFailsOwnTests, v.ExitClass)
	}
	return nil
}

// RefusedStatus is the status lockstep's enforcer exits with when it refused
// to run anything (bad policy, a rule the kernel cannot enforce, a hash
// mismatch); UsageStatus the one for a wrong command line.
const (
	RefusedStatus = 125
	UsageStatus   = 2
)

// Stopped tells a run the enforcer stopped before the command started from
// one the command ended: it returns the enforcer's own line when the status
// is one the enforcer stops with (125 refused, 2 usage) and that line is in
// beforeStart, the output printed before the command's start sentinel (all
// of it if the command never started; see exercise.Result.BeforeStart).
// Otherwise "". The enforcer's "lockstep: OK …" status line is not a stop,
// and neither is the command's own 125 or 2: the pruner treats a stop as a
// defect of its own, never as a policy that is too narrow, and a status of
// 126 (cannot execute) or 127 as a refusal to attribute.
func Stopped(status int, beforeStart []byte) string {
	if status != RefusedStatus && status != UsageStatus {
		return ""
	}
	for _, line := range strings.Split(string(beforeStart), "\n") {
		line = strings.TrimRight(line, "\r")
		switch {
		case status == RefusedStatus && strings.HasPrefix(line, "lockstep run: "),
			status == RefusedStatus && strings.HasPrefix(line, "lockstep: ") && !strings.HasPrefix(line, "lockstep: OK "),
			status == UsageStatus && strings.HasPrefix(line, "usage: lockstep run"):
			return line
		}
	}
	return ""
}
