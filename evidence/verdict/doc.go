// Package verdict decides what one run of an exercise showed: its exit
// status, its log and the JUnit XML reports its tests wrote, read together.
// An exit status alone is not a result; two runs agree only when the same
// tests ran with the same outcomes.
//
// # Reading a run
//
//	v := verdict.Judge(verdict.Run{Status: status, Log: log, Reports: reports})
//	if err := v.ReferenceProblem(); err != nil {
//		// the unsandboxed reference cannot anchor a prune
//	}
//	if !v.Same(reference) {
//		// the sandboxed run differs: look for the refusal that explains it
//	}
//
// A [Verdict] has an exit class (success, tests-failed, failure, timeout,
// signalled), the set of (test, outcome) pairs read from the reports, and
// three findings taken from the log:
//
//   - tests_ran is false when no report was found, when a report is
//     unreadable or cut short, or when the reports hold no test case;
//   - no_source marks a build that ran no tests and said so: Gradle's
//     "> Task :compileJava NO-SOURCE" or, from Gradle 4's plain console,
//     ":compileJava NO-SOURCE" (and the other compile and test tasks, in
//     subprojects too, never tasks such as :processResources), Maven's
//     "No tests to run." / "No tests to run!" / "Tests are skipped.", pytest's
//     "no tests ran" (which it ends with status 5);
//   - infra_failure marks a run whose own machinery broke: a Python
//     "Traceback (most recent call last):" before any reported test is named
//     in the log, "ModuleNotFoundError", "Fatal Python error", pytest's
//     "INTERNALERROR>" and "ImportError while loading conftest", Maven's
//     "in offline mode and the artifact".
//
// [Verdict.Same] compares exit class and test outcomes only, independent of
// order; the findings do not take part. [Verdict.ReferenceProblem] is
// stricter than Phobos: a reference must also succeed with every test passed
// or skipped, so an exercise broken for a reason unrelated to any sandbox
// aborts its prune instead of being matched, failure for failure, by a
// policy.
//
// # JUnit XML
//
// [ParseJUnit] reads the dialects Gradle, Maven Surefire and pytest write: a
// <testsuites> or <testsuite> root, suites nested to any depth, and per
// <testcase> the outcome from its direct children (<failure> or <error> →
// failed, <skipped> → skipped, otherwise passed; Surefire's <flakyFailure>
// and <rerunFailure> do not change a pass). A test's identity is
// "classname.name". A report that does not parse, or ends early, is recorded
// as one pair (report path, "unreadable").
package verdict
