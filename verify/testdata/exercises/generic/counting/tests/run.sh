#!/bin/bash
# The tests of the counting exercise; the JUnit report goes to test-reports/counting.xml.
set -uo pipefail
. tests/junit.sh

test_wc_lines() { [[ $(printf 'a\nb\nc\n' | wc -l) -eq 3 ]]; }
test_sort_uniq() { [[ $(printf 'b\na\nb\n' | sort | uniq -c | awk '{print $1 $2}' | tr -d '\n') == 1a2b ]]; }
test_tmp_file() { f=$(mktemp); echo hi >"$f"; [[ $(cat "$f") == hi ]]; rm -f "$f"; }
test_seq_sum() { [[ $(seq 1 10 | awk '{s+=$1} END {print s}') -eq 55 ]]; }

junit_run counting test-reports/counting.xml
