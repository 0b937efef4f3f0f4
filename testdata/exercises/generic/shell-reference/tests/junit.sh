# junit.sh: a small test harness for bash, part of the exercise (no extra packages).
# Source it, define functions named test_*, then call: junit_run <suite> <report.xml>.
# Each test runs in its own subshell with `set -e`; a non-zero status is a failure
# whose output becomes the <failure> text. The report is JUnit XML, the form
# Gradle, Maven Surefire and pytest --junitxml write.

junit_escape() {
	sed -e 's/&/\&amp;/g' -e 's/</\&lt;/g' -e 's/>/\&gt;/g' -e 's/"/\&quot;/g'
}

junit_run() {
	local suite=$1 report=$2
	local name out status start end secs total=0 tests=0 failures=0 cases=""
	for name in $(declare -F | awk '$3 ~ /^test_/ { print $3 }'); do
		start=$(date +%s%N)
		out=$( (set -e; "$name") 2>&1)
		status=$?
		end=$(date +%s%N)
		secs=$(awk -v a="$start" -v b="$end" 'BEGIN { printf "%.3f", (b - a) / 1e9 }')
		total=$(awk -v a="$total" -v b="$secs" 'BEGIN { printf "%.3f", a + b }')
		tests=$((tests + 1))
		if ((status == 0)); then
			printf '%s::%s PASSED\n' "$suite" "$name"
			cases+="  <testcase classname=\"$suite\" name=\"$name\" time=\"$secs\"/>"$'\n'
		else
			failures=$((failures + 1))
			printf '%s::%s FAILED (status %d)\n%s\n' "$suite" "$name" "$status" "$out"
			cases+="  <testcase classname=\"$suite\" name=\"$name\" time=\"$secs\">"$'\n'
			cases+="    <failure message=\"exit status $status\">$(printf '%s' "$out" | junit_escape)</failure>"$'\n'
			cases+="  </testcase>"$'\n'
		fi
	done
	mkdir -p "$(dirname "$report")"
	{
		printf '<?xml version="1.0" encoding="UTF-8"?>\n'
		printf '<testsuite name="%s" tests="%d" failures="%d" errors="0" skipped="0" time="%s">\n' \
			"$suite" "$tests" "$failures" "$total"
		printf '%s' "$cases"
		printf '</testsuite>\n'
	} >"$report"
	printf '%d tests, %d failed\n' "$tests" "$failures"
	((failures == 0))
}
