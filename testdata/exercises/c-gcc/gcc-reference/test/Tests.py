"""The grader of lockstep's c-gcc reference exercise, a Python program as Artemis's C graders are.

It builds the student's program with make in ../assignment (plain, with AddressSanitizer, with
UndefinedBehaviorSanitizer), runs every case in a scratch directory of its own that
tempfile.mkdtemp makes under /tmp (the program's working directory; its input and output files
are kept there and removed afterwards), drives the program on a pipe, from a file and on a
pseudo-terminal (where it prompts), and writes a JUnit report to ../test-reports/. Like Artemis's
graders it ends with status 0 whatever its tests found: the report is the result.
"""
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

ASSIGNMENT = os.path.abspath("../assignment")
REPORT = "../test-reports/tests-results.xml"
# Where the cases run, named as Artemis's graders name it: tempfile would quietly fall back to
# the working directory where it cannot remove a probe file in /tmp.
SCRATCH = "/tmp"
TIMEOUT = 120  # seconds for one build or one run, room for an emulated CPU
INPUT = "hello world\nthree little words\nquit\n"
WANT = "HELLO WORLD (2)\nTHREE LITTLE WORDS (3)\n"


class Failed(Exception):
    """A case's check failed; the message says what was wanted and what came."""


def build(target):
    done = subprocess.run(["make", "-C", ASSIGNMENT, target], capture_output=True, text=True, timeout=TIMEOUT)
    if done.returncode != 0:
        raise Failed("make %s: status %d\n%s%s" % (target, done.returncode, done.stdout, done.stderr))
    if not os.access(os.path.join(ASSIGNMENT, target + ".out"), os.X_OK):
        raise Failed("make %s made no %s.out" % (target, target))


def run_piped(exe, scratch):
    """Runs exe in scratch with INPUT on a pipe; returns what it wrote."""
    with open(os.path.join(scratch, "stdout.txt"), "w+") as out:
        done = subprocess.run([exe], input=INPUT, stdout=out, stderr=subprocess.STDOUT, text=True,
                              cwd=scratch, timeout=TIMEOUT)
        out.seek(0)
        return done.returncode, out.read()


def run_from_file(exe, scratch):
    """Runs exe in scratch with a file it finds there as its standard input."""
    path = os.path.join(scratch, "input.txt")
    with open(path, "w") as f:
        f.write(INPUT)
    with open(path) as stdin, open(os.path.join(scratch, "stdout.txt"), "w+") as out:
        done = subprocess.run([exe], stdin=stdin, stdout=out, stderr=subprocess.STDOUT, cwd=scratch, timeout=TIMEOUT)
        out.seek(0)
        return done.returncode, out.read()


def run_on_terminal(exe, scratch):
    """Runs exe in scratch in a session of its own on a new pseudo-terminal without echo, types
    INPUT on it and returns what it wrote, carriage returns dropped."""
    master, slave = pty.openpty()
    attrs = termios.tcgetattr(slave)
    attrs[3] &= ~termios.ECHO
    termios.tcsetattr(slave, termios.TCSANOW, attrs)
    proc = subprocess.Popen([exe], stdin=slave, stdout=slave, stderr=slave, cwd=scratch, start_new_session=True)
    os.close(slave)
    os.write(master, INPUT.encode())
    got, deadline = b"", time.monotonic() + TIMEOUT
    while time.monotonic() < deadline:
        ready, _, _ = select.select([master], [], [], 1)
        if not ready:
            if proc.poll() is not None:
                break
            continue
        try:
            chunk = os.read(master, 4096)
        except OSError:  # EIO: the program closed the terminal's last descriptor
            break
        if not chunk:
            break
        got += chunk
    os.close(master)
    status = proc.wait(timeout=TIMEOUT)
    with open(os.path.join(scratch, "stdout.txt"), "wb") as f:
        f.write(got)
    return status, got.decode(errors="replace").replace("\r", "")


def check_run(runner, target, want):
    """A case: runs ../assignment/<target>.out with runner in a new scratch directory under /tmp."""
    def case():
        scratch = tempfile.mkdtemp(prefix="caps-%s-" % target, dir=SCRATCH)
        try:
            status, out = runner(os.path.join(ASSIGNMENT, target + ".out"), scratch)
        finally:
            shutil.rmtree(scratch)
        if status != 0 or out != want:
            raise Failed("status %d, output %r; want status 0, output %r" % (status, out, want))
    return case


CASES = [
    ("compile", lambda: build("caps"), []),
    ("compile_asan", lambda: build("asan"), []),
    ("compile_ubsan", lambda: build("ubsan"), []),
    ("output_pipe", check_run(run_piped, "caps", WANT), ["compile"]),
    ("output_file", check_run(run_from_file, "caps", WANT), ["compile"]),
    ("output_terminal", check_run(run_on_terminal, "caps", "> " + WANT.replace("\n", "\n> ")), ["compile"]),
    ("output_pipe_asan", check_run(run_piped, "asan", WANT), ["compile_asan"]),
    ("output_terminal_asan", check_run(run_on_terminal, "asan", "> " + WANT.replace("\n", "\n> ")), ["compile_asan"]),
    ("output_pipe_ubsan", check_run(run_piped, "ubsan", WANT), ["compile_ubsan"]),
]


def main():
    suite = ET.Element("testsuite", name="caps-grader")
    passed, counts = set(), {"tests": 0, "failures": 0, "skipped": 0}
    for name, case, needs in CASES:
        started = time.monotonic()
        el = ET.SubElement(suite, "testcase", classname="caps", name=name)
        counts["tests"] += 1
        missing = [n for n in needs if n not in passed]
        try:
            if missing:
                ET.SubElement(el, "skipped", message="needs %s to pass first" % ", ".join(missing))
                counts["skipped"] += 1
            else:
                case()
                passed.add(name)
        except (Failed, OSError, subprocess.SubprocessError) as e:
            ET.SubElement(el, "failure", message=str(e).splitlines()[0] if str(e) else type(e).__name__).text = str(e)
            counts["failures"] += 1
        el.set("time", "%.3f" % (time.monotonic() - started))
        print("%s: %s" % (name, "passed" if name in passed else "not passed"), flush=True)
    for k, v in counts.items():
        suite.set(k, str(v))
    ET.ElementTree(suite).write(REPORT, encoding="utf-8", xml_declaration=True)
    print("%d passed, %d failed" % (len(passed), counts["failures"]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
