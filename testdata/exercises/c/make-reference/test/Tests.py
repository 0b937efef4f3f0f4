"""The grader of lockstep's c reference exercise, a Python program as Artemis's C graders are.

It checks that the build left the program and the unit tests in ../assignment, runs the unit
tests (their JUnit report, written into the case's scratch directory, becomes one case each here)
and every input/output case of io.txt, each run in a scratch directory of its own that
tempfile.mkdtemp makes under /tmp (the program's working directory, kept there with its captured
output and removed afterwards), and writes ../test-reports/tests-results.xml. Like Artemis's
graders it ends with status 0 whatever its tests found: the report is the result.
"""
import os
import shutil
import subprocess
import sys
import tempfile
import time
import xml.etree.ElementTree as ET

ASSIGNMENT = os.path.abspath("../assignment")
REPORT = "../test-reports/tests-results.xml"
# Where the cases run, named as Artemis's graders name it: tempfile would quietly fall back to
# the working directory where it cannot remove a probe file in /tmp.
SCRATCH = "/tmp"
TIMEOUT = 120  # seconds for one run, room for an emulated CPU


class Report:
    def __init__(self, name):
        self.suite = ET.Element("testsuite", name=name)
        self.counts = {"tests": 0, "failures": 0, "skipped": 0}

    def add(self, name, failure=None, seconds=0.0, skipped=None):
        el = ET.SubElement(self.suite, "testcase", classname="rpn-grader", name=name, time="%.3f" % seconds)
        self.counts["tests"] += 1
        if skipped:
            ET.SubElement(el, "skipped", message=skipped)
            self.counts["skipped"] += 1
        elif failure:
            ET.SubElement(el, "failure", message=failure.splitlines()[0]).text = failure
            self.counts["failures"] += 1
        print("%s: %s" % (name, "skipped" if skipped else "failed: " + failure if failure else "passed"), flush=True)

    def write(self, path):
        for k, v in self.counts.items():
            self.suite.set(k, str(v))
        ET.ElementTree(self.suite).write(path, encoding="utf-8", xml_declaration=True)


def scratch_run(argv):
    """Runs argv in a new scratch directory under /tmp; returns its status, its standard output
    and the files it left there (name -> bytes), and removes the directory."""
    scratch = tempfile.mkdtemp(prefix="rpn-", dir=SCRATCH)
    try:
        with open(os.path.join(scratch, "stdout.txt"), "w+") as out, open(os.path.join(scratch, "stderr.txt"), "w") as err:
            done = subprocess.run([a.replace("{scratch}", scratch) for a in argv], stdin=subprocess.DEVNULL,
                                  stdout=out, stderr=err, cwd=scratch, timeout=TIMEOUT)
            out.seek(0)
            stdout = out.read()
        files = {}
        for name in os.listdir(scratch):
            with open(os.path.join(scratch, name), "rb") as f:
                files[name] = f.read()
        return done.returncode, stdout, files
    finally:
        shutil.rmtree(scratch)


def unit_tests(report):
    """Runs the unit tests; each case of their report becomes a case here."""
    started = time.monotonic()
    status, stdout, files = scratch_run([os.path.join(ASSIGNMENT, "test_rpn"), "{scratch}/unit.xml"])
    if "unit.xml" not in files:
        report.add("unit_tests", "test_rpn wrote no report (status %d)\n%s" % (status, stdout), time.monotonic() - started)
        return
    for case in ET.fromstring(files["unit.xml"]).iter("testcase"):
        failure = case.find("failure")
        report.add("unit." + case.get("name"), None if failure is None else failure.get("message") + ": " + (failure.text or ""))


def io_tests(report):
    """Runs every case of io.txt."""
    with open("io.txt") as f:
        lines = [line.rstrip("\n") for line in f if line.strip() and not line.startswith("#")]
    for line in lines:
        name, args, want_out, want_status = line.split("\t")
        want_out = want_out.replace("\\n", "\n")
        started = time.monotonic()
        status, out, _ = scratch_run([os.path.join(ASSIGNMENT, "rpn")] + args.split())
        failure = None
        if status != int(want_status) or out != want_out:
            failure = "status %d, output %r; want status %s, output %r" % (status, out, want_status, want_out)
        report.add("io." + name, failure, time.monotonic() - started)


def main():
    report = Report("rpn-grader")
    missing = [p for p in ("rpn", "test_rpn") if not os.access(os.path.join(ASSIGNMENT, p), os.X_OK)]
    report.add("compile", "make exercise left no %s in assignment/" % ", ".join(missing) if missing else None)
    for run in (unit_tests, io_tests):
        if missing:
            report.add(run.__name__, skipped="needs compile to pass first")
            continue
        try:
            run(report)
        except (OSError, subprocess.SubprocessError, ET.ParseError, ValueError) as e:
            report.add(run.__name__, "%s: %s" % (type(e).__name__, e))
    report.write(REPORT)
    return 0


if __name__ == "__main__":
    sys.exit(main())
