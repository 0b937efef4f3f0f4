#!/bin/bash
# Reference exercise "c-gcc": Debian's gcc with the address and undefined-behaviour sanitizers.
# The program compiles into assignment/ and runs from there (runs_compiled_programs); the
# tester drives it on a pseudo-terminal. Leak detection is off: LeakSanitizer aborts under
# ptrace, which the pruner observes with. TMPDIR keeps gcc's temporary files in assignment/.
set -euo pipefail
export ASAN_OPTIONS=detect_leaks=0 TMPDIR="$PWD/assignment"
flags=(-std=c11 -O1 -g -Wall -Wextra -Werror -fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=all)
gcc "${flags[@]}" -o assignment/caps assignment/caps.c assignment/text.c
gcc "${flags[@]}" -o assignment/unit tests/unit.c assignment/text.c
gcc "${flags[@]}" -o assignment/tester tests/tester.c
mkdir -p test-reports
status=0
./assignment/unit test-reports/unit.xml || status=$?
./assignment/tester test-reports/tester.xml || status=$?
exit "$status"
