# junit.sh: a small test harness for bash, part of the exercise (no extra packages).
# Source it, define functions named test_*, then call: junit_run <suite> <report.xml>.
# Tests run in name order; times come from $EPOCHREALTIME (bash 5), so the harness itself
# starts no programs beyond the tests' own.
# Each test runs in its own subshell with `set -e`; a non-zero status is a failure
# whose output becomes the <failure> text. The report is JUnit XML, the form
# Gradle, Maven Surefire and pytest --junitxml write.

junit_escape() {
	sed -e 's/&/\&amp;/g' -e 's/</\&lt;/g' -e 's/>/\&gt;/g' -e 's/"/\&quot;/g'
}

junit_run() {
	local suite=$1 report=$2
	local name out status start us total=0 tests=0 failures=0 cases="" names=() _a _b
	while read -r _a _b name; do
		[[ $name == test_* ]] && names+=("$name")
	done <<<"$(declare -F)"
	for name in "${names[@]}"; do
		start=${EPOCHREALTIME/./}
		out=$( (set -e; "$name") 2>&1)
		status=$?
		us=$((${EPOCHREALTIME/./} - start))
		total=$((total + us))
		tests=$((tests + 1))
		if ((status == 0)); then
			printf '%s::%s PASSED\n' "$suite" "$name"
			cases+="  <testcase classname=\"$suite\" name=\"$name\" time=\"$(junit_seconds "$us")\"/>"$'\n'
		else
			failures=$((failures + 1))
			printf '%s::%s FAILED (status %d)\n%s\n' "$suite" "$name" "$status" "$out"
			cases+="  <testcase classname=\"$suite\" name=\"$name\" time=\"$(junit_seconds "$us")\">"$'\n'
			cases+="    <failure message=\"exit status $status\">$(printf '%s' "$out" | junit_escape)</failure>"$'\n'
			cases+="  </testcase>"$'\n'
		fi
	done
	mkdir -p "$(dirname "$report")"
	{
		printf '<?xml version="1.0" encoding="UTF-8"?>\n'
		printf '<testsuite name="%s" tests="%d" failures="%d" errors="0" skipped="0" time="%s">\n' \
			"$suite" "$tests" "$failures" "$(junit_seconds "$total")"
		printf '%s' "$cases"
		printf '</testsuite>\n'
	} >"$report"
	printf '%d tests, %d failed\n' "$tests" "$failures"
	((failures == 0))
}

# junit_seconds writes microseconds as seconds with three decimals.
junit_seconds() {
	printf '%d.%03d' $(($1 / 1000000)) $(($1 / 1000 % 1000))
}
