#!/bin/bash
# Reference exercise "c-gcc", laid out and built as Artemis's C (GCC) grading build lays out and
# builds one: the student's program in assignment/, the grader in test/. The build keeps the two
# variable lines of the student's Makefile, puts the grader's Makefile in its place and writes the
# lines into it with sed -i (a new file renamed over the old: create and delete in assignment/),
# compiles every source once as a syntax check, then runs the grader, a Python program
# (test/Tests.py) that builds with make, runs each case in a scratch directory of its own under
# /tmp and writes test-reports/tests-results.xml. No variable of the grader's is changed: TMPDIR
# is unset, so gcc and Python write their temporary files in /tmp.
set -euo pipefail
mkdir -p test-reports
include_dirs=$(grep -m 1 'INCLUDEDIRS\s*=' assignment/Makefile)
source_files="$(grep -m 1 'SOURCE\s*=' assignment/Makefile) ../test/sanitizers.c"
rm -f assignment/GNUmakefile assignment/makefile
cp -f test/Makefile assignment/Makefile
sed -i "s~\bINCLUDEDIRS\s*=.*~${include_dirs}~; s~\bSOURCE\s*=.*~${source_files}~" assignment/Makefile
gcc -c -Wall assignment/*.c
cd test
exec python3 Tests.py
