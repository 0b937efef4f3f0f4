#!/bin/bash
# Reference exercise "c-gcc": Debian's gcc with the address and undefined-behaviour sanitizers.
# The program compiles into assignment/ and runs from there (runs_compiled_programs); the
# tester (UBSan only: it forks, and AddressSanitizer cannot find a forked child's stack
# without /proc/self/maps) drives it on a pseudo-terminal. The sanitizers' options are
# compiled in (tests/sanitizers.c says why). TMPDIR keeps gcc's temporary files in assignment/.
set -euo pipefail
export TMPDIR="$PWD/assignment"
common=(-std=c11 -O1 -g -Wall -Wextra -Werror -fno-omit-frame-pointer -fno-sanitize-recover=all)
flags=("${common[@]}" -fsanitize=address,undefined)
gcc "${flags[@]}" -o assignment/caps assignment/caps.c assignment/text.c tests/sanitizers.c
gcc "${flags[@]}" -o assignment/unit tests/unit.c assignment/text.c tests/sanitizers.c
gcc "${common[@]}" -fsanitize=undefined -o assignment/tester tests/tester.c
mkdir -p test-reports
status=0
./assignment/unit test-reports/unit.xml || status=$?
./assignment/tester test-reports/tester.xml || status=$?
exit "$status"
