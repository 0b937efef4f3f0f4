#!/bin/bash
# The enforcer's demo (called from `make demo`): one file granted, one not.
# `cat` of the granted file works; `cat` of the other is refused by Landlock
# with EACCES. Exits non-zero if either outcome is not what it should be.
set -euo pipefail
cd "$(dirname "$0")/.."
LOCKSTEP=${LOCKSTEP:-bin/lockstep}
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
echo "granted: hello from lockstep" > "$dir/granted.txt"
echo "secret: you should not see this" > "$dir/secret.txt"
cat > "$dir/demo.cfg" <<CFG
# Let cat start (binary, loader, libraries) and read one file.
[read]
/usr
/etc/ld.so.cache
$dir/granted.txt

[execute]
/usr
CFG

echo "== policy ($dir/demo.cfg)"
cat "$dir/demo.cfg"
echo
echo "== allowed: lockstep run --config demo.cfg -- cat granted.txt"
"$LOCKSTEP" run --config "$dir/demo.cfg" -- cat "$dir/granted.txt" 2>&1
echo "-> exit $? (allowed)"
echo
echo "== refused: lockstep run --config demo.cfg -- cat secret.txt"
set +e
out=$("$LOCKSTEP" run --config "$dir/demo.cfg" -- cat "$dir/secret.txt" 2>&1)
status=$?
set -e
echo "$out"
if [ "$status" -eq 0 ] || ! grep -q "Permission denied" <<<"$out"; then
	echo "-> exit $status: expected a refusal (EACCES, Permission denied)" >&2
	exit 1
fi
echo "-> exit $status (refused by Landlock: EACCES)"
