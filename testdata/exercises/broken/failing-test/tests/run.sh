#!/bin/bash
# Broken on purpose: test_arithmetic fails on every machine, sandboxed or not, so a prune
# of this exercise must abort ("the reference fails its own tests") and write no policy.
set -uo pipefail
. tests/junit.sh

test_greets() {
	[[ $(printf 'hello %s' world) == 'hello world' ]]
}

test_arithmetic() {
	# Deliberately wrong: 2 + 2 is 4, so this test always fails.
	(( 2 + 2 == 5 ))
}

junit_run failing-test test-reports/broken.xml
