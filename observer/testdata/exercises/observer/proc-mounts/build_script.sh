#!/bin/bash
# The observer's /proc/mounts exercise: its program reads the mount table and, refused it,
# falls back (as a JVM reading its mount table does); the JUnit report goes to
# test-reports/proc-mounts.xml. Bash builtins only, besides mkdir.
set -uo pipefail

# root_type prints the root file system's type from /proc/mounts, or "unknown" when the
# table cannot be read.
root_type() {
	local mnt type rest
	while read -r _ mnt type rest; do
		if [[ $mnt == / ]]; then
			echo "$type"
			return
		fi
	done 2>/dev/null </proc/mounts
	echo unknown
}

cases="" failures=0
check() {
	local name=$1
	shift
	if "$@"; then
		echo "proc-mounts::$name PASSED"
		cases+="<testcase classname=\"proc-mounts\" name=\"$name\" time=\"0.001\"/>"
	else
		echo "proc-mounts::$name FAILED"
		failures=$((failures + 1))
		cases+="<testcase classname=\"proc-mounts\" name=\"$name\" time=\"0.001\"><failure message=\"failed\"/></testcase>"
	fi
}

test_root_type_named() { [[ -n $(root_type) ]]; }
test_reads_own_input() { [[ $(<tests/input.txt) == "proc-mounts input" ]]; }

check test_root_type_named test_root_type_named
check test_reads_own_input test_reads_own_input
mkdir -p test-reports
printf '<testsuite name="proc-mounts" tests="2" failures="%d">%s</testsuite>\n' "$failures" "$cases" >test-reports/proc-mounts.xml
echo "2 tests, $failures failed"
((failures == 0))
