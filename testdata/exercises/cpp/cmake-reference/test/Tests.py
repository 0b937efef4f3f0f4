"""The grader of lockstep's cpp reference exercise, a Python program as Artemis's C++ graders are.

It finds the test sources under src/, registers one test program for each in CMakeLists.txt (in
place of its add_executable line), configures with CMake into build/ with the address and
undefined-behaviour sanitizers, builds each program, runs each in a scratch directory of its own
that tempfile.mkdtemp makes under /tmp (its working directory, where Catch2's JUnit reporter writes
its report; removed afterwards), and writes test-reports/tests-results.xml with a case for the
configure step, one for each build, one for each run (its status) and one for each test case
Catch2 ran. It ends with status 0 whatever its tests found: the report is the result. Every step
(the configure, each build, each test program) runs as Artemis's graders run one: its standard input on a pseudo-terminal whose
output translation the grader turns off, its output on a second one that the grader reads.
"""
import io
import os
import pty
import select
import shutil
import subprocess
import sys
import tempfile
import termios
import time
import xml.etree.ElementTree as ET

BUILD = os.path.abspath("build")
REPORT = "test-reports/tests-results.xml"
# Where the cases run, named as Artemis's graders name it: tempfile would quietly fall back to
# the working directory where it cannot remove a probe file in /tmp.
SCRATCH = "/tmp"
TIMEOUT = 600  # seconds for one configure, build or run, room for an emulated CPU
FLAGS = "-g -fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=all"


class Report:
    def __init__(self, name):
        self.suite = ET.Element("testsuite", name=name)
        self.failures = 0

    def add(self, classname, name, failure=None, seconds=0.0, skipped=None):
        el = ET.SubElement(self.suite, "testcase", classname=classname, name=name, time="%.3f" % seconds)
        if skipped:
            ET.SubElement(el, "skipped", message=skipped)
        elif failure:
            ET.SubElement(el, "failure", message=failure.splitlines()[0]).text = failure
            self.failures += 1
        print("%s.%s: %s" % (classname, name, "skipped" if skipped else "failed" if failure else "passed"), flush=True)
        return failure is None and skipped is None

    def write(self, path):
        self.suite.set("tests", str(len(self.suite)))
        self.suite.set("failures", str(self.failures))
        ET.ElementTree(self.suite).write(path, encoding="utf-8", xml_declaration=True)


def register_tests():
    """Replaces the add_executable line of CMakeLists.txt and what follows with one test program
    per source under src/; returns the programs' names."""
    tests = sorted(os.path.splitext(f)[0] for f in os.listdir("src") if f.endswith(".cpp"))
    with open("CMakeLists.txt") as f:
        lines = f.readlines()
    keep = []
    for line in lines:
        if line.strip().startswith("add_executable"):
            break
        keep.append(line)
    for t in tests:
        keep += ["add_executable(%s src/%s.cpp)\n" % (t, t),
                 "target_link_libraries(%s assignment catch_main)\n" % t,
                 "add_test(NAME %s COMMAND %s)\n" % (t, t)]
    with open("CMakeLists.txt", "w") as f:
        f.writelines(keep)
    return tests


def run_on_terminals(argv, cwd, log):
    """Runs argv in cwd in a session of its own, its standard input on a new pseudo-terminal with
    ONLCR off (tcgetattr, tcsetattr), its standard output and error on a second one, whose
    controller the grader reads into log until the program ends. Returns the status."""
    in_ctl, in_term = pty.openpty()
    attrs = termios.tcgetattr(in_term)
    attrs[1] &= ~termios.ONLCR
    termios.tcsetattr(in_term, termios.TCSANOW, attrs)
    out_ctl, out_term = pty.openpty()
    try:
        proc = subprocess.Popen(argv, stdin=in_term, stdout=out_term, stderr=out_term, cwd=cwd, start_new_session=True)
    finally:
        os.close(in_term)
        os.close(out_term)
    deadline = time.monotonic() + TIMEOUT
    try:
        while time.monotonic() < deadline:
            ready, _, _ = select.select([out_ctl], [], [], 1)
            if not ready:
                if proc.poll() is not None:
                    break
                continue
            try:
                chunk = os.read(out_ctl, 65536)
            except OSError:  # EIO: the program closed the terminal's last descriptor
                break
            if not chunk:
                break
            log.write(chunk)
        else:
            proc.kill()
    finally:
        os.close(in_ctl)
        os.close(out_ctl)
    return proc.wait(timeout=TIMEOUT)


def step(report, classname, name, argv):
    started = time.monotonic()
    log = io.BytesIO()
    status = run_on_terminals(argv, None, log)
    failure = None
    if status != 0:
        failure = "%s: status %d\n%s" % (" ".join(argv), status, log.getvalue()[-8000:].decode(errors="replace"))
    return report.add(classname, name, failure, time.monotonic() - started)


def run_tests(report, test):
    """Runs build/<test> in a new scratch directory under /tmp; each test case of its Catch2
    JUnit report becomes a case."""
    scratch = tempfile.mkdtemp(prefix=test + "-", dir=SCRATCH)
    try:
        xml = os.path.join(scratch, test + ".xml")
        with open(os.path.join(scratch, "output.txt"), "wb+") as out:
            status = run_on_terminals([os.path.join(BUILD, test), "--reporter", "junit", "--out", xml], scratch, out)
            out.seek(0)
            output = out.read().decode(errors="replace")
        try:
            cases = list(ET.parse(xml).getroot().iter("testcase"))
        except (OSError, ET.ParseError) as e:
            report.add("run", test, "status %d and no Catch2 report (%s)\n%s" % (status, e, output[-8000:]))
            return
        # As Artemis's TestCatch2: the program's own case fails when it ends with another status
        # than 0 (a failed test, or a sanitizer's error after the report was written).
        report.add("run", test, None if status == 0 else "status %d\n%s" % (status, output[-8000:]))
        for case in cases:
            failure = case.find("failure")
            if failure is None:
                failure = case.find("error")
            report.add(case.get("classname"), case.get("name"),
                       None if failure is None else "%s\n%s" % (failure.get("message"), failure.text or ""),
                       float(case.get("time", "0")))
    finally:
        shutil.rmtree(scratch)


def main():
    report = Report("cpp-grader")
    tests = register_tests()
    configured = step(report, "build", "configure", ["cmake", "-S", ".", "-B", BUILD, "-DCMAKE_BUILD_TYPE=Debug",
                                                     "-DCMAKE_CXX_FLAGS=" + FLAGS, "-DCMAKE_EXE_LINKER_FLAGS=-fsanitize=address,undefined"])
    for t in tests:
        if not configured:
            report.add("build", "compile_" + t, skipped="needs configure to pass first")
            continue
        if step(report, "build", "compile_" + t, ["cmake", "--build", BUILD, "--target", t]):
            try:
                run_tests(report, t)
            except (OSError, subprocess.SubprocessError, ET.ParseError) as e:
                report.add("run", t, "%s: %s" % (type(e).__name__, e))
    report.write(REPORT)
    return 0


if __name__ == "__main__":
    sys.exit(main())
