// Package report renders lockstep's results as one self-contained HTML
// page: no scripts, no network (a Content-Security-Policy forbids fetching
// anything), styles and the timings chart (SVG) inline.
//
// The page shows the verdict matrix in colour (kernels × exercises for
// verify and observe, the two kernels for repro), per exercise or
// difference the strace refusals beside the audit records with matched
// pairs joined on one row, the policy rows added (or that would grant), a
// bar chart of the timings (boot, runs, teardown) and the provenance (pins,
// bzImage and policy hashes, accel, QEMU).
//
// [Repro], [Verify] and [Observe] build a [Page] from each verb's result;
// [Render] writes it. [ReproText], [VerifyText], [BaseDirText] and
// [ObserveText] write the same results as the text the verbs print on
// stdout. The test renders pages in a real headless Chromium
// (Debian's chromium package), checks the DOM and the console, and saves a
// screenshot (docs/report.png).
package report
