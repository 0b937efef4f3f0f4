#!/bin/bash
# Reference exercise "cpp", laid out and built as Artemis's C++ grading build lays out and builds
# one: the student's solution in assignment/, the grader in test/, whose CMake project adds the
# solution as a subdirectory (so it is copied into test/ first). The grader is a Python program
# (test/Tests.py) that registers the test sources in its CMakeLists.txt, configures and builds
# with CMake into test/build (the sanitizers on), runs each test program in a scratch directory of
# its own under /tmp and writes test/test-reports/tests-results.xml. No variable of the grader's
# is changed: TMPDIR is unset, so g++ and Python write their temporary files in /tmp.
set -euo pipefail
cp -R assignment test/assignment
cd test
mkdir -p test-reports
exec python3 Tests.py
