#!/bin/bash
# Reference exercise "c", laid out and built as Artemis's C (FACT) grading build lays out and
# builds one: the student's program in assignment/, the grader in test/. The build puts the
# grader's Makefile in place of the student's, builds its target exercise in assignment/ (the
# program and the unit tests, executed from there: runs_compiled_programs), then runs the grader,
# a Python program (test/Tests.py) that runs each case in a scratch directory of its own under
# /tmp and writes test-reports/tests-results.xml. No variable of the grader's is changed: TMPDIR
# is unset, so gcc and Python write their temporary files in /tmp.
set -euo pipefail
mkdir -p test-reports
rm -f assignment/GNUmakefile assignment/Makefile
cp -f test/Makefile assignment/Makefile
make -C assignment exercise
cd test
exec python3 Tests.py
