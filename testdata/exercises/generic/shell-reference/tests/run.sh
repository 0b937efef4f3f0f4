#!/bin/bash
# The tests of build/wordfreq; the JUnit report goes to test-reports/shell-tests.xml.
set -uo pipefail
. tests/junit.sh

wordfreq() { bash build/wordfreq "$@"; }

test_counts_words() {
	got=$(printf 'b a b\nc b a\n' | wordfreq)
	[[ $got == $'3 b\n2 a\n1 c' ]]
}

test_ignores_case() {
	got=$(printf 'Go go GO\n' | wordfreq)
	[[ $got == '3 go' ]]
}

test_strips_punctuation() {
	got=$(printf 'stop. Stop! (stop), go?\n' | wordfreq)
	[[ $got == $'3 stop\n1 go' ]]
}

test_top_n() {
	got=$(printf 'a a a b b c d\n' | wordfreq -n 2)
	[[ $(printf '%s\n' "$got" | wc -l) -eq 2 ]]
	# Not `printf | grep -q` under pipefail: printf writes line by line, and
	# grep -q may exit after the first, failing the pipeline with SIGPIPE.
	[[ $'\n'$got$'\n' == *$'\n3 a\n'* ]]
}

test_empty_input() {
	got=$(printf '' | wordfreq)
	[[ -z $got ]]
}

test_version_stamped() {
	grep -q '^# wordfreq 1\.2:' build/wordfreq
}

junit_run shell-reference test-reports/shell-tests.xml
