#!/bin/bash
# Runs every Fuzz function of the module (found in its *_test.go files, so
# none can be left out): FUZZTIME each, POLICY_FUZZTIME for the policy
# parser. Counted in executions by default, not seconds: a time budget can
# end while a worker minimises a new input, which go test reports as
# "context deadline exceeded".
set -euo pipefail
cd "$(dirname "$0")/.."
GO=${GO:-go}
FUZZTIME=${FUZZTIME:-20000x}
POLICY_FUZZTIME=${POLICY_FUZZTIME:-30s}

n=0
while IFS= read -r file; do
	dir=./$(dirname "$file")
	while IFS= read -r fn; do
		t=$FUZZTIME
		[[ $dir/$fn == ./enforcer/policy/FuzzParse ]] && t=$POLICY_FUZZTIME
		echo "fuzz: $dir $fn ($t)"
		"$GO" test -run '^$' -fuzz "^$fn\$" -fuzztime "$t" "$dir" </dev/null
		n=$((n + 1))
	done < <(sed -n 's/^func \(Fuzz[A-Za-z0-9_]*\)(.*/\1/p' "$file")
done < <(git ls-files '*_test.go' | grep -v '/testdata/' | sort)
if ((n == 0)); then
	echo "fuzz: no Fuzz function found (is this a git checkout?)" >&2
	exit 1
fi
echo "fuzz: $n targets"
