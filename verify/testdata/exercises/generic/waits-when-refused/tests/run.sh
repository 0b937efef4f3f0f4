#!/bin/bash
# The tests of waits-when-refused; the JUnit report goes to test-reports/waits-when-refused.xml.
set -uo pipefail
. tests/junit.sh

test_cache_outside() {
	until echo cached 2>/dev/null >/srv/lockstep-verify-wait; do sleep 1; done
	rm -f /srv/lockstep-verify-wait
}

junit_run waits-when-refused test-reports/waits-when-refused.xml
