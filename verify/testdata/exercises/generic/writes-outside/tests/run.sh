#!/bin/bash
# The tests of writes-outside; the JUnit report goes to test-reports/writes-outside.xml.
set -uo pipefail
. tests/junit.sh

test_arithmetic() { [[ $((6 * 7)) -eq 42 ]]; }
test_cache_outside() { echo cached >/srv/lockstep-verify-cache && rm -f /srv/lockstep-verify-cache; }

junit_run writes-outside test-reports/writes-outside.xml
