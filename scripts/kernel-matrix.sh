#!/bin/bash
# The stages of .github/workflows/kernel-matrix.yml, one per job step: every
# shipped base (bases/BaseLanguage-<key>.cfg) on every kernel pin, one leg
# per base and kernel, then one bases × kernels table. Every stage is a
# `lockstep` call; this script only turns the workflow's inputs (lists of
# words, extra pin rows as text) into its flags.
#
# usage: scripts/kernel-matrix.sh STAGE [options]
#   pins      write --extra-pins' rows (kernel/pins.txt's grammar) to
#             <out>/extra-pins.txt and print LOCKSTEP_PINS=<that file> (a line
#             for GITHUB_ENV), so every later lockstep call of the job sees
#             them; no rows: nothing
#   plan      print plan=<JSON> (a line for GITHUB_OUTPUT): lockstep verify
#             --plan, {"kernels": [...], "legs": [{"base", "kernel"}, ...]}
#   verify    one leg: lockstep verify --base-dir of --bases' one base on the
#             one pin of --pins, its --json document to <out>/<base>-<pin>.json
#   summary   the table from the legs' documents under --legs: Markdown to
#             <out>/summary.md (and, under Actions, to the step summary), the
#             report page to <out>/kernel-matrix.html
#   --bases "K …"        base keys (empty: every base of bases/)        [""]
#   --pins "P …"         kernel pins (empty: every pin of the table)   [""]
#   --extra-pins TEXT    pin rows added to the table (pins stage)       [""]
#   --exercises DIR      the testing root                [testdata/exercises]
#   --out DIR            where the stage writes       [<repo>/out/kernel-matrix]
#   --legs DIR           summary: the legs' documents            [<out>/legs]
#
# Exit: the lockstep call's status (verify and summary: 0 every cell passed,
# 1 any failed, 3 any indeterminate, inconclusive or missing); 2 usage.
set -euo pipefail

repo=$(cd "$(dirname "$0")/.." && pwd)
if ! command -v lockstep >/dev/null && [[ -x $repo/bin/lockstep ]]; then
	PATH="$repo/bin:$PATH"
fi
usage() {
	sed -n '/^# usage:/,/^# Exit:/p' "$0" | sed 's/^# \{0,1\}//' >&2
	exit 2
}

stage=${1:-}
case $stage in
pins | plan | verify | summary) shift ;;
*) usage ;;
esac
bases='' pins='' extra='' exercises=testdata/exercises out=$repo/out/kernel-matrix legs=''
while (($#)); do
	case $1 in
	--bases) bases=${2-} && shift 2 ;;
	--pins) pins=${2-} && shift 2 ;;
	--extra-pins) extra=${2-} && shift 2 ;;
	--exercises) exercises=${2:?} && shift 2 ;;
	--out) out=${2:?} && shift 2 ;;
	--legs) legs=${2:?} && shift 2 ;;
	*) usage ;;
	esac
done
cd "$repo"

# The selection as lockstep's flags: a --key per base, a --kernel per pin.
sel=(--base-dir bases --exercises "$exercises")
read -ra words <<<"$bases"
for k in "${words[@]}"; do sel+=(--key "$k"); done
read -ra words <<<"$pins"
for p in "${words[@]}"; do sel+=(--kernel "$p"); done

# Each leg runs one guest at a time on the runner's CPUs, with room for the
# JVM of java-maven and a boot a loaded runner (or TCG) makes slow.
guest=(--mem 2048 --timeout 2h --boot-timeout 10m)

mkdir -p "$out"
case $stage in
pins)
	if [[ -n ${extra//[[:space:]]/} ]]; then
		printf '%s\n' "$extra" >"$out/extra-pins.txt"
		echo "LOCKSTEP_PINS=$out/extra-pins.txt"
	fi
	;;
plan)
	plan=$(lockstep verify --plan "${sel[@]}")
	echo "plan=$plan"
	;;
verify)
	[[ ${#words[@]} -eq 1 && $bases =~ ^[a-z0-9_-]+$ ]] || {
		echo "kernel-matrix: verify is one leg: one --bases key and one --pins pin, got '$bases' and '$pins'" >&2
		exit 2
	}
	lockstep verify "${sel[@]}" "${guest[@]}" --json >"$out/$bases-$pins.json"
	;;
summary)
	legs=${legs:-$out/legs}
	mkdir -p "$legs"
	rc=0
	lockstep verify --summarise "$legs" "${sel[@]}" --html "$out/kernel-matrix.html" >"$out/summary.md" || rc=$?
	if [[ -n ${GITHUB_STEP_SUMMARY:-} ]]; then
		printf '## Kernel matrix\n\n' >>"$GITHUB_STEP_SUMMARY"
		cat "$out/summary.md" >>"$GITHUB_STEP_SUMMARY"
	fi
	cat "$out/summary.md"
	exit "$rc"
	;;
esac
