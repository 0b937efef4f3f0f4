package verdict

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"sort"
	"strconv"
	"strings"
	"testing"
)

// loadRun reads a run captured by testdata/capture.sh.
func loadRun(t testing.TB, name string) Run {
	t.Helper()
	dir := filepath.Join("testdata", "runs", name)
	st, err := os.ReadFile(filepath.Join(dir, "status"))
	if err != nil {
		t.Fatal(err)
	}
	status, err := strconv.Atoi(strings.TrimSpace(string(st)))
	if err != nil {
		t.Fatalf("%s/status: %v", dir, err)
	}
	log, err := os.ReadFile(filepath.Join(dir, "log"))
	if err != nil {
		t.Fatal(err)
	}
	r := Run{Status: status, Log: log}
	for _, f := range reportFiles(t, dir) {
		data, err := os.ReadFile(filepath.Join(dir, "reports", f))
		if err != nil {
			t.Fatal(err)
		}
		r.Reports = append(r.Reports, Report{Path: f, Data: data})
	}
	return r
}

// reportFiles lists the captured reports of a run, relative to its
// reports/ folder (which is the working directory's layout), sorted.
func reportFiles(t testing.TB, dir string) []string {
	t.Helper()
	var out []string
	root := filepath.Join(dir, "reports")
	err := filepath.WalkDir(root, func(p string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(p, ".xml") {
			return err
		}
		rel, _ := filepath.Rel(root, p)
		out = append(out, filepath.ToSlash(rel))
		return nil
	})
	if err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
	sort.Strings(out)
	return out
}

// TestJudgeCapturedRuns judges real runs of the reference exercises and of
// variants of them, captured on this host (see testdata/runs/*/command).
func TestJudgeCapturedRuns(t *testing.T) {
	tests := []struct {
		Name      string
		Class     ExitClass
		Ran       bool
		NoSource  bool
		Infra     bool
		Problem   error // nil: a usable reference
		Passed    int
		Failed    []string
		Skipped   int
		Unreadble []string
	}{
		{Name: "generic-pass", Class: Success, Ran: true, Passed: 6},
		{Name: "python-pass", Class: Success, Ran: true, Passed: 9},
		{Name: "c-pass", Class: Success, Ran: true, Passed: 10},
		{Name: "fixture-pass", Class: Success, Ran: true, Passed: 2},
		{Name: "python-skip", Class: Success, Ran: true, Passed: 8, Skipped: 1},
		{Name: "broken-fail", Class: TestsFailed, Ran: true, Problem: ErrFailsOwnTests, Passed: 1,
			Failed: []string{"failing-test.test_arithmetic"}},
		{Name: "python-fail-native-tb", Class: TestsFailed, Ran: true, Problem: ErrFailsOwnTests, Passed: 8,
			Failed: []string{"tests.test_calc.test_evaluate[7 / 2-3.0]"}},
		{Name: "python-no-tests", Class: Failure, NoSource: true, Problem: ErrNoTests},
		{Name: "python-module-not-found", Class: TestsFailed, Ran: true, Infra: true, Problem: ErrInfrastructure,
			Failed: []string{"tests.test_calc"}},
		{Name: "python-traceback-first", Class: Failure, Infra: true, Problem: ErrInfrastructure},
		{Name: "generic-no-reports", Class: Success, Problem: ErrNoTests},
		{Name: "generic-killed", Class: Signalled, Ran: true, Problem: ErrFailsOwnTests, Passed: 6},
		{Name: "generic-cut-report", Class: TestsFailed, Problem: ErrNoTests,
			Unreadble: []string{"test-reports/shell-tests.xml"}},
		{Name: "gradle-no-source", Class: Success, NoSource: true, Problem: ErrNoTests},
		{Name: "gradle-junit", Class: TestsFailed, Ran: true, Problem: ErrFailsOwnTests, Passed: 2, Skipped: 1,
			Failed: []string{"calc.CalcTest.failsOnPurpose"}},
		{Name: "maven-junit", Class: TestsFailed, Ran: true, Problem: ErrFailsOwnTests, Passed: 2, Skipped: 1,
			Failed: []string{"calc.CalcTest.failsOnPurpose"}},
		{Name: "maven-skip-tests", Class: Success, NoSource: true, Problem: ErrNoTests},
		{Name: "maven-no-tests", Class: Success, NoSource: true, Problem: ErrNoTests},
		{Name: "maven-offline-missing", Class: Failure, Infra: true, Problem: ErrInfrastructure},
	}
	for _, tt := range tests {
		t.Run(tt.Name, func(t *testing.T) {
			v := Judge(loadRun(t, tt.Name))
			if v.ExitClass != tt.Class {
				t.Errorf("Judge(%s).ExitClass = %s, want %s", tt.Name, v.ExitClass, tt.Class)
			}
			if v.TestsRan != tt.Ran || v.NoSource != tt.NoSource || v.InfraFailure != tt.Infra {
				t.Errorf("Judge(%s) tests_ran, no_source, infra_failure = %v, %v, %v, want %v, %v, %v (evidence %q)",
					tt.Name, v.TestsRan, v.NoSource, v.InfraFailure, tt.Ran, tt.NoSource, tt.Infra, v.Evidence)
			}
			if (v.NoSource || v.InfraFailure) && v.Evidence == "" {
				t.Errorf("Judge(%s).Evidence is empty for a finding", tt.Name)
			}
			var passed, skipped int
			var failed, unreadable []string
			for _, p := range v.Tests {
				switch p.Outcome {
				case Passed:
					passed++
				case Skipped:
					skipped++
				case Failed:
					failed = append(failed, p.ID)
				case Unreadable:
					unreadable = append(unreadable, p.ID)
				}
			}
			if passed != tt.Passed || skipped != tt.Skipped || !reflect.DeepEqual(failed, tt.Failed) ||
				!reflect.DeepEqual(unreadable, tt.Unreadble) {
				t.Errorf("Judge(%s) passed %d, skipped %d, failed %q, unreadable %q; want %d, %d, %q, %q",
					tt.Name, passed, skipped, failed, unreadable, tt.Passed, tt.Skipped, tt.Failed, tt.Unreadble)
			}
			err := v.ReferenceProblem()
			switch {
			case tt.Problem == nil && err != nil:
				t.Errorf("Judge(%s).ReferenceProblem() = %v, want nil", tt.Name, err)
			case tt.Problem != nil && !errors.Is(err, tt.Problem):
				t.Errorf("Judge(%s).ReferenceProblem() = %v, want %v", tt.Name, err, tt.Problem)
			}
			if !v.Same(Judge(loadRun(t, tt.Name))) {
				t.Errorf("Judge(%s) is not Same as itself", tt.Name)
			}
		})
	}
}

// TestSameAcrossCaptures checks that different captured runs never agree,
// in particular a cut report and a run without tests, except within the
// pinned groups: runs without any test agree when their exit class does,
// whatever their status (as in Phobos, the status is not part of the
// outcome), and the Gradle and Maven builds of the same JUnit tests agree.
func TestSameAcrossCaptures(t *testing.T) {
	groups := [][]string{
		{"generic-pass"}, {"python-pass"}, {"c-pass"}, {"fixture-pass"}, {"python-skip"}, {"broken-fail"},
		{"python-fail-native-tb"}, {"python-module-not-found"}, {"generic-killed"}, {"generic-cut-report"},
		{"python-no-tests", "python-traceback-first", "maven-offline-missing"},
		{"generic-no-reports", "gradle-no-source", "maven-skip-tests", "maven-no-tests"},
		{"gradle-junit", "maven-junit"},
	}
	group := map[string]int{}
	vs := map[string]Verdict{}
	for i, g := range groups {
		for _, n := range g {
			group[n] = i
			vs[n] = Judge(loadRun(t, n))
		}
	}
	dirs, _ := filepath.Glob(filepath.Join("testdata", "runs", "*"))
	if len(dirs) != len(vs) {
		t.Errorf("testdata/runs holds %d captures, the groups name %d", len(dirs), len(vs))
	}
	for a := range vs {
		for b := range vs {
			if want := group[a] == group[b]; vs[a].Same(vs[b]) != want {
				t.Errorf("Judge(%s).Same(Judge(%s)) = %v, want %v", a, b, !want, want)
			}
		}
	}
}

// TestSameIgnoresOrderAndFindings checks Same on report order, log findings
// and the status within one exit class.
func TestSameIgnoresOrderAndFindings(t *testing.T) {
	c := loadRun(t, "c-pass")
	rev := c
	rev.Reports = []Report{c.Reports[1], c.Reports[0]}
	rev.Log = append([]byte("ModuleNotFoundError: No module named 'x'\n"), c.Log...)
	a, b := Judge(c), Judge(rev)
	if !b.InfraFailure {
		t.Fatalf("Judge(reordered).InfraFailure = false, want true")
	}
	if !a.Same(b) {
		t.Errorf("Same(c-pass, reordered c-pass with an infra line) = false, want true")
	}
	failing := loadRun(t, "broken-fail")
	other := failing
	other.Status = 2
	if !Judge(failing).Same(Judge(other)) {
		t.Errorf("Same(status 1, status 2) with the same failing test = false, want true")
	}
	other.Status = 0
	if Judge(failing).Same(Judge(other)) {
		t.Errorf("Same(status 1, status 0) = true, want false (exit classes differ)")
	}
}

// TestLogFindings covers log lines one at a time. Gradle 4's plain lines and
// the Maven lines are as the gradle-* and maven-* captures show them; the
// "> Task" form of Gradle 5 and later is its documented output form, not a
// capture (Debian ships no newer Gradle).
func TestLogFindings(t *testing.T) {
	tests := []struct {
		Name     string
		Line     string
		NoSource bool
		Infra    bool
	}{
		{"gradle compileJava", "> Task :compileJava NO-SOURCE", true, false},
		{"gradle 4 plain compileJava", ":compileJava NO-SOURCE", true, false},
		{"gradle 4 plain subproject test", ":app:test NO-SOURCE", true, false},
		{"gradle 4 plain processResources", ":processResources NO-SOURCE", false, false},
		{"gradle subproject compileTestJava", "> Task :app:lib:compileTestJava NO-SOURCE", true, false},
		{"gradle kotlin", "> Task :compileKotlin NO-SOURCE", true, false},
		{"gradle test", "> Task :test NO-SOURCE", true, false},
		{"gradle subproject test", "> Task :core:test NO-SOURCE", true, false},
		{"gradle coloured", "\x1b[1m> Task :test\x1b[m NO-SOURCE", true, false},
		{"gradle processResources", "> Task :processResources NO-SOURCE", false, false},
		{"gradle processTestResources", "> Task :app:processTestResources NO-SOURCE", false, false},
		{"gradle test up to date", "> Task :test UP-TO-DATE", false, false},
		{"gradle compileJava ran", "> Task :compileJava", false, false},
		{"maven no tests", "[INFO] No tests to run.", true, false},
		{"maven no tests bang", "[WARNING] No tests to run!", true, false},
		{"maven skipped", "[INFO] Tests are skipped.", true, false},
		{"maven crlf", "[INFO] Tests are skipped.\r", true, false},
		{"maven tests run", "[INFO] Tests run: 3, Failures: 0, Errors: 0, Skipped: 0", false, false},
		{"maven offline", "[ERROR] Failed to execute goal on project x: Cannot access central in offline mode and the artifact junit:junit:jar:4.13.2 has not been downloaded from it before.", false, true},
		{"pytest quiet", "no tests ran in 0.01s", true, false},
		{"pytest bars", "============================ no tests ran in 0.00s =============================", true, false},
		{"pytest prose", "there were no tests ran by hand", false, false},
		{"fatal python", "Fatal Python error: init_fs_encoding: failed to get the Python codec of the filesystem encoding", false, true},
		{"pytest internal", "INTERNALERROR> Traceback (most recent call last):", false, true},
		{"conftest", "ImportError while loading conftest '/x/conftest.py'.", false, true},
		{"traceback alone", "Traceback (most recent call last):", false, true},
		{"plain", "BUILD SUCCESSFUL in 3s", false, false},
	}
	for _, tt := range tests {
		t.Run(tt.Name, func(t *testing.T) {
			v := Judge(Run{Status: 0, Log: []byte("start\n" + tt.Line + "\nend\n")})
			if v.NoSource != tt.NoSource || v.InfraFailure != tt.Infra {
				t.Errorf("Judge(log %q) no_source, infra_failure = %v, %v, want %v, %v",
					tt.Line, v.NoSource, v.InfraFailure, tt.NoSource, tt.Infra)
			}
		})
	}
}

// TestTracebackAfterNamedTest checks the "before any test" rule on the
// captured pytest run with native tracebacks: the same traceback moved
// before the first test name is an infrastructure failure.
func TestTracebackAfterNamedTest(t *testing.T) {
	r := loadRun(t, "python-fail-native-tb")
	if v := Judge(r); v.InfraFailure {
		t.Fatalf("Judge(python-fail-native-tb).InfraFailure = true (%q), want false", v.Evidence)
	}
	r.Log = append([]byte("Traceback (most recent call last):\n  File \"x\"\n"), r.Log...)
	if v := Judge(r); !v.InfraFailure {
		t.Errorf("Judge(traceback first).InfraFailure = false, want true")
	}
}

func TestTimeout(t *testing.T) {
	r := loadRun(t, "generic-pass")
	r.TimedOut = true
	if v := Judge(r); v.ExitClass != Timeout {
		t.Errorf("Judge(timed out).ExitClass = %s, want %s", v.ExitClass, Timeout)
	}
	r.TimedOut, r.Status = false, TimeoutStatus
	if v := Judge(r); v.ExitClass != Timeout {
		t.Errorf("Judge(status 124).ExitClass = %s, want %s", v.ExitClass, Timeout)
	}
}

func TestReadErrorIsUnreadable(t *testing.T) {
	v := Judge(Run{Reports: []Report{{Path: "test-reports/x.xml", Err: os.ErrPermission}}})
	want := []Test{{ID: "test-reports/x.xml", Outcome: Unreadable}}
	if !reflect.DeepEqual(v.Tests, want) || v.TestsRan || v.ExitClass != TestsFailed {
		t.Errorf("Judge(unreadable) = %+v, want tests %v, tests_ran false, tests-failed", v, want)
	}
}

func TestVerdictJSON(t *testing.T) {
	v := Judge(loadRun(t, "broken-fail"))
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	want := `{"exit_class":"tests-failed","tests":[["failing-test.test_arithmetic","failed"],["failing-test.test_greets","passed"]],"tests_ran":true,"no_source":false,"infra_failure":false}`
	if string(b) != want {
		t.Errorf("json.Marshal(verdict) = %s, want %s", b, want)
	}
	var back Verdict
	if err := json.Unmarshal(b, &back); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(back, v) {
		t.Errorf("round trip = %+v, want %+v", back, v)
	}
	for _, bad := range []string{`["a"]`, `["a","b","c"]`, `["a","maybe"]`, `{"id":"a"}`} {
		var p Test
		if err := json.Unmarshal([]byte(bad), &p); err == nil {
			t.Errorf("json.Unmarshal(%s, &Test) = nil error, want one", bad)
		}
	}
}

func TestParseJUnitRefusals(t *testing.T) {
	tests := []struct{ Name, XML string }{
		{"empty", ""},
		{"not xml", "hello"},
		{"other root", "<html><testcase name='a'/></html>"},
		{"cut", "<testsuite><testcase name='a'>"},
		{"two roots", "<testsuite/><testsuite/>"},
		{"nameless case", "<testsuite><testcase classname='x'/></testsuite>"},
		{"text after root", "<testsuite/>trailing"},
		{"mismatched", "<testsuite><testcase name='a'></testsuite>"},
	}
	for _, tt := range tests {
		t.Run(tt.Name, func(t *testing.T) {
			if cases, err := ParseJUnit([]byte(tt.XML)); err == nil {
				t.Errorf("ParseJUnit(%q) = %v, nil; want an error", tt.XML, cases)
			}
		})
	}
}

func TestParseJUnitDialects(t *testing.T) {
	// Nested suites (Gradle aggregate), Surefire's flakyFailure, error and
	// skipped children, a failure nested below another element (not direct).
	const x = `<?xml version="1.0"?>
<testsuites>
  <testsuite name="outer">
    <testsuite name="inner">
      <testcase classname="a.B" name="ok"/>
      <testcase classname="a.B" name="flaky"><flakyFailure message="m"/><system-out>x</system-out></testcase>
      <testcase classname="a.B" name="err"><error type="E"/></testcase>
      <testcase classname="a.B" name="skip"><skipped/></testcase>
      <testcase classname="a.B" name="both"><skipped/><failure/></testcase>
      <testcase name="bare"><properties><property name="failure" value="x"/></properties></testcase>
    </testsuite>
  </testsuite>
</testsuites>`
	got, err := ParseJUnit([]byte(x))
	if err != nil {
		t.Fatal(err)
	}
	want := []Case{
		{"a.B", "ok", Passed}, {"a.B", "flaky", Passed}, {"a.B", "err", Failed},
		{"a.B", "skip", Skipped}, {"a.B", "both", Failed}, {"", "bare", Passed},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("ParseJUnit = %+v, want %+v", got, want)
	}
	if id := got[5].ID(); id != "bare" {
		t.Errorf("Case{Name: bare}.ID() = %q, want bare", id)
	}
}

func FuzzParseJUnit(f *testing.F) {
	dirs, _ := filepath.Glob(filepath.Join("testdata", "runs", "*"))
	for _, dir := range dirs {
		for _, file := range reportFiles(f, dir) {
			data, err := os.ReadFile(filepath.Join(dir, "reports", file))
			if err != nil {
				f.Fatal(err)
			}
			f.Add(data)
		}
	}
	f.Add([]byte("<testsuite><testcase name='a'><failure/></testcase></testsuite>"))
	f.Fuzz(func(t *testing.T, data []byte) {
		cases, err := ParseJUnit(data)
		if err != nil {
			if cases != nil {
				t.Fatalf("ParseJUnit returned %d cases with error %v", len(cases), err)
			}
		} else {
			for _, c := range cases {
				if c.Name == "" {
					t.Fatalf("ParseJUnit returned a case without a name: %+v", c)
				}
				switch c.Outcome {
				case Passed, Failed, Skipped:
				default:
					t.Fatalf("ParseJUnit returned outcome %q", c.Outcome)
				}
			}
		}
		v := Judge(Run{Status: 1, Log: data, Reports: []Report{{Path: "r.xml", Data: data}}})
		if (err != nil) != (len(v.Tests) == 1 && v.Tests[0].Outcome == Unreadable) {
			t.Fatalf("Judge disagrees with ParseJUnit (err %v): %v", err, v.Tests)
		}
		if !sort.SliceIsSorted(v.Tests, func(i, j int) bool { return v.Tests[i].less(v.Tests[j]) }) {
			t.Fatalf("Judge returned unsorted tests %v", v.Tests)
		}
		for i := 1; i < len(v.Tests); i++ {
			if v.Tests[i] == v.Tests[i-1] {
				t.Fatalf("Judge returned a duplicate pair %v", v.Tests[i])
			}
		}
		if !v.Same(v) {
			t.Fatalf("a verdict is not Same as itself")
		}
	})
}

func BenchmarkParseJUnit(b *testing.B) {
	data, err := os.ReadFile(filepath.Join("testdata", "runs", "python-pass", "reports", "test-reports", "pytest.xml"))
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	b.SetBytes(int64(len(data)))
	for b.Loop() {
		if _, err := ParseJUnit(data); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkJudge(b *testing.B) {
	r := loadRun(b, "python-fail-native-tb")
	b.ReportAllocs()
	b.SetBytes(int64(len(r.Log)))
	for b.Loop() {
		Judge(r)
	}
}

func TestStopped(t *testing.T) {
	tests := []struct {
		Name   string
		Status int
		Before string
		Want   string
	}{
		{"policy refused", 125, "lockstep run: p.cfg:3: unknown section [reed]\n", "lockstep run: p.cfg:3: unknown section [reed]"},
		// The enforcer's words, as `lockstep run` printed them on this host.
		{"kernel cannot enforce", 125, "lockstep run: unenforceable: [bind] allow 5000 udp needs Landlock ABI 10 (UDP port rules)\nlockstep run: refused. Nothing ran.\n",
			"lockstep run: unenforceable: [bind] allow 5000 udp needs Landlock ABI 10 (UDP port rules)"},
		{"other lockstep line", 125, "lockstep: cannot read policy\n", "lockstep: cannot read policy"},
		{"usage", 2, "lockstep run: no command given after --\nusage: lockstep run --config <file>… -- <cmd>…\n", "usage: lockstep run --config <file>… -- <cmd>…"},
		{"command's own 125", 125, "lockstep: OK abi=7 handled=fs,net,scope rules=3 net=tcp-ports hash=sha256:00\n", ""},
		{"marker beside another status", 1, "lockstep run: p.cfg:3: unknown section [reed]\n", ""},
		{"cannot execute is a refusal", 126, "lockstep run: fork/exec /bin/bash: permission denied\n", ""},
		{"usage text with 125", 125, "usage: lockstep run --config <file>\n", ""},
	}
	for _, tt := range tests {
		if got := Stopped(tt.Status, []byte(tt.Before)); got != tt.Want {
			t.Errorf("%s: Stopped(%d, %q) = %q, want %q", tt.Name, tt.Status, tt.Before, got, tt.Want)
		}
	}
}
