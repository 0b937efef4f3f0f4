#!/bin/bash
# Times reference exercises as the observer's reference runs take them, for the time factor under
# TCG (docs/observe.md, "Time limits under TCG"): each exercise's build script, unsandboxed, from a
# fresh copy in a scratch working directory, with the exercise package's environment (PATH,
# LANG=C.UTF-8, HOME the working directory), on one CPU (the observer pins its guest's runs to
# one). One line per run: label, exercise, run, exit status, wall seconds. Run it on the host,
# then in a guest with the exercises and this script shared:
#
#   scripts/time-exercise.sh testdata/exercises host 3 r/testthat-reference python/pytest-reference
#   lockstep boot --kernel 7.2.13 --accel tcg --mem 2048 --cpus 2 --timeout 40m \
#       --share "$PWD/testdata/exercises:/run/lockstep/share/ex" --share "$PWD/scripts:/run/lockstep/share/s" -- \
#       /run/lockstep/share/s/time-exercise.sh /run/lockstep/share/ex tcg 3 r/testthat-reference python/pytest-reference
set -uo pipefail
[[ $# -ge 4 ]] || { echo "usage: time-exercise.sh <exercises root> <label> <runs> <family/exercise>..." >&2; exit 2; }
root=$1 label=$2 runs=$3
shift 3
work=$(mktemp -d /var/tmp/time-exercise.XXXXXX)
trap 'rm -rf "$work"' EXIT
for ex in "$@"; do
	for ((i = 1; i <= runs; i++)); do
		rm -rf "$work/run" && cp -a "$root/$ex" "$work/run"
		t0=$EPOCHREALTIME
		(cd "$work/run" && env -i PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin LANG=C.UTF-8 HOME="$work/run" \
			taskset -c 0 bash ./build_script.sh >/dev/null 2>&1)
		st=$?
		t1=$EPOCHREALTIME
		us=$((${t1/./} - ${t0/./}))
		printf '%s %s run %d: status %d, %d.%02d s\n' "$label" "$ex" "$i" "$st" $((us / 1000000)) $((us / 10000 % 100))
	done
done
