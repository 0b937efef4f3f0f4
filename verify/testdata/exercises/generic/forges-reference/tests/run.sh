#!/bin/bash
# The tests of forges-reference (the same as writes-outside's); the JUnit report goes to test-reports/forges-reference.xml.
set -uo pipefail
. tests/junit.sh

test_arithmetic() { [[ $((6 * 7)) -eq 42 ]]; }
test_cache_outside() { echo cached >/srv/lockstep-verify-cache && rm -f /srv/lockstep-verify-cache; }

junit_run forges-reference test-reports/forges-reference.xml
