#!/bin/bash
# Captures real runs of the reference exercises (and variants of them) on this host, for
# verdict_test.go. Run from the repository root:
#
#   evidence/verdict/testdata/capture.sh [case…]
#
# With case names, only those cases are captured again; without, all of them.
# Each case becomes evidence/verdict/testdata/runs/<case>/ with
#   status      the build script's exit status,
#   log         its stdout and stderr, interleaved (2>&1),
#   command     the variant applied and the command that ran,
#   reports/    every file the default report globs match afterwards (build/test-results/**/*.xml,
#               target/surefire-reports/*.xml, test-reports/*.xml), at its relative path.
# A case runs a fresh copy of testdata/exercises/<family>/<exercise> (or of
# evidence/verdict/testdata/projects/<project>) in a scratch working directory, as
# `/bin/bash ./build_script.sh` with a clean environment, like exercise. The Gradle cases
# need Debian's gradle (4.4.1), junit4 and libhamcrest-java packages, the Maven cases its maven,
# libsurefire-java, libmaven-compiler-plugin-java, libmaven-resources-plugin-java and
# libmaven-jar-plugin-java; all run offline.
set -euo pipefail
root=$(pwd)
out=$root/evidence/verdict/testdata/runs
ex=$root/testdata/exercises
work=$(mktemp -d /var/tmp/lockstep-capture.XXXXXX)
trap 'rm -rf "$work"' EXIT
only=("$@")
if ((${#only[@]} == 0)); then
	rm -rf "$out"
fi
mkdir -p "$out"

shopt -s globstar nullglob

# capture <case> <exercise> <variant description> [variant shell command run in the copy]
# An exercise named projects/<name> is evidence/verdict/testdata/projects/<name>.
capture() {
	local name=$1 exercise=$2 what=$3 change=${4:-}
	if ((${#only[@]} > 0)) && [[ " ${only[*]} " != *" $name "* ]]; then
		return
	fi
	rm -rf "${out:?}/$name"
	local dir=$work/testing-dir src=$ex/$exercise
	[[ $exercise != projects/* ]] || src=$root/evidence/verdict/testdata/$exercise
	rm -rf "$dir"
	cp -a "$src" "$dir"
	if [[ -n $change ]]; then
		(cd "$dir" && eval "$change")
	fi
	local status=0
	(cd "$dir" && env -i PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
		LANG=C.UTF-8 HOME="$dir" /bin/bash ./build_script.sh >"$work/log" 2>&1) || status=$?
	mkdir -p "$out/$name/reports"
	printf '%d\n' "$status" >"$out/$name/status"
	cp "$work/log" "$out/$name/log"
	{
		printf 'exercise: %s\n' "${src#"$root"/}"
		printf 'variant: %s\n' "$what"
		[[ -z $change ]] || printf 'change: %s\n' "$change"
		printf 'command: env -i PATH=... LANG=C.UTF-8 HOME=<dir> /bin/bash ./build_script.sh 2>&1 (in a fresh copy)\n'
		printf 'host: %s, %s\n' "$(uname -sr)" "$(date -u +%Y-%m-%dT%H:%M:%SZ)"
	} >"$out/$name/command"
	local f
	for f in "$dir"/build/test-results/**/*.xml "$dir"/target/surefire-reports/*.xml "$dir"/test-reports/*.xml; do
		f=${f#"$dir"/}
		mkdir -p "$out/$name/reports/$(dirname "$f")"
		cp "$dir/$f" "$out/$name/reports/$f"
	done
	echo "capture: $name status=$status" >&2
}

capture generic-pass generic/shell-reference "as committed"
capture python-pass python/pytest-reference "as committed"
capture c-pass c/make-reference "as committed"
capture fixture-pass fixture/udp-fixture "as committed"
capture broken-fail broken/failing-test "as committed"
capture python-no-tests python/pytest-reference "no test files (pytest ends with status 5)" \
	'rm tests/test_calc.py'
capture python-module-not-found python/pytest-reference "the code under test is missing" \
	'rm -r calc'
capture python-traceback-first python/pytest-reference "a Python traceback before any test runs" \
	"sed -i 's|^exec python3 -m pytest|python3 -c \"import json; json.loads(\\x27{\\x27)\"\\nexec python3 -m pytest|' build_script.sh"
capture python-fail-native-tb python/pytest-reference "one failing test, native tracebacks after the test names" \
	"sed -i 's/(\"7 \\/ 2\", 3.5)/(\"7 \\/ 2\", 3.0)/' tests/test_calc.py && sed -i 's/-p no:cacheprovider/-p no:cacheprovider --tb=native/' build_script.sh"
capture python-skip python/pytest-reference "one test skipped" \
	"sed -i 's/^def test_unbalanced/@pytest.mark.skip(reason=\"variant\")\\ndef test_unbalanced/' tests/test_calc.py"
capture generic-no-reports generic/shell-reference "tests write no report" \
	"sed -i 's|test-reports/shell-tests.xml|/dev/null|' tests/run.sh"
capture generic-killed generic/shell-reference "the build kills itself after its tests (SIGKILL)" \
	"printf 'kill -KILL \$\$\\n' >>build_script.sh"
capture generic-cut-report generic/shell-reference "the report is cut short after the tests (head -c 300)" \
	"printf 'head -c 300 test-reports/shell-tests.xml >test-reports/cut && mv test-reports/cut test-reports/shell-tests.xml\\n' >>build_script.sh"
capture gradle-no-source projects/gradle-no-source "a Gradle 4.4.1 build without sources (plain console)"
capture gradle-junit projects/gradle-junit "Gradle 4.4.1 with JUnit 4: pass, expected exception, a deliberate failure, a skip"
capture maven-junit projects/maven-junit "Maven 3.8 + Surefire 2.22.3 with JUnit 4: pass, expected exception, a deliberate failure, a skip"
capture maven-skip-tests projects/maven-junit "Maven with -DskipTests" \
	"sed -i 's/\\\${MAVEN_ARGS:-}/-DskipTests/' build_script.sh"
capture maven-no-tests projects/maven-junit "Maven with no test sources" \
	'rm -r src/test'
capture maven-offline-missing projects/maven-junit "the repository copied with its relative links, which then dangle: offline, the plugin jar is missing" \
	"sed -i 's/cp -rL /cp -r /' build_script.sh"
