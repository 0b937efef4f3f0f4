#!/bin/bash
# Tests of the compiled program assignment/rpn, run as a program (it is executed from the
# compiled-programs directory); the JUnit report goes to test-reports/c-cli.xml.
set -uo pipefail
. tests/junit.sh

test_prints_result() {
	[[ $(./assignment/rpn 3 4 + 2 '*') == 14 ]]
}

test_malformed_exits_1() {
	status=0
	./assignment/rpn 1 + 2>/dev/null || status=$?
	((status == 1))
}

test_reports_on_stderr() {
	err=$(./assignment/rpn + 2>&1 >/dev/null) || true
	grep -q 'malformed expression' <<<"$err"
}

junit_run rpn-cli test-reports/c-cli.xml
