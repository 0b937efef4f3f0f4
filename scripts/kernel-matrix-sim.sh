#!/bin/bash
# Runs .github/workflows/kernel-matrix.yml, as written, on this machine: act
# executes the workflow's YAML and lockstep's composite actions with every
# job on this host, the runner set-up of scripts/act-sim.sh (the stand-ins of
# workflows/sim/ for the third-party actions; the artifact store is OUT).
# The workflow's inputs are BASES, PINS and EXTRA (a file of pin rows). The
# simulated Actions cache starts empty: each kernel job's `lockstep kernel
# build` finds its pin in this machine's kernel cache (a self-hosted runner's
# warm disk) or builds it, and the verify legs restore it from the simulated
# cache. OUT ends with every leg's artefact (verify-<base>-<pin>/), the
# summary job's (kernel-matrix/: summary.md, kernel-matrix.html), and
# OUT/summary.md: the bases × kernels table, then every job's and step's
# time from act's log.
#
# usage: scripts/kernel-matrix-sim.sh [--out DIR] [--bases "K …"] [--pins "P …"] [--extra-pins FILE]
#   DIR: <repo>/out/kernel-matrix-sim; no --bases: every base of bases/; no
#   --pins: every pin of the table (kernel/pins.txt and the extra rows)
# Exit: act's status (0 every job passed), or 1 when act passed but OUT holds
# no table. Needs: Go (to build act once into ~/.cache/lockstep/tools), QEMU,
# and each pin's kernel in this machine's cache or its source reachable.
set -euo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
out='' bases='' pins='' extra=''
while (($#)); do
	case $1 in
	--out) out=${2:?--out needs a value} && shift 2 ;;
	--bases) bases=${2-} && shift 2 ;;
	--pins) pins=${2-} && shift 2 ;;
	--extra-pins) extra=${2:?--extra-pins needs a file} && shift 2 ;;
	*) sed -n '/^# usage:/,/^# Exit/p' "$0" >&2 && exit 2 ;;
	esac
done
sim_name='kernel-matrix-sim'
# shellcheck source=scripts/act-sim.sh
. "$repo/scripts/act-sim.sh"
sim_init "${out:-$repo/out/kernel-matrix-sim}"
workflow=.github/workflows/kernel-matrix.yml

rows=''
if [[ -n $extra ]]; then
	rows=$(cat "$extra")
fi
# The event: the workflow_dispatch inputs, as JSON strings.
python3 -c 'import json, sys; print(json.dumps({"inputs": {"bases": sys.argv[1], "pins": sys.argv[2], "extra-pins": sys.argv[3]}}))' \
	"$bases" "$pins" "$rows" >"$sim/event.json"
sim_map_actions "$repo/$workflow"
sim_act_args "$workflow" "$sim/event.json"
make -s -C "$repo" build >&2
echo "$sim_name: $(basename "$act") runs $workflow (bases '${bases:-every one}', pins '${pins:-every one}') into $out" >&2
rc=0
sim_run_host || rc=$?
: >"$out/summary.md"
if [[ -f $out/kernel-matrix/summary.md ]]; then
	cat "$out/kernel-matrix/summary.md" >>"$out/summary.md"
elif ((rc == 0)); then
	echo "$sim_name: act passed, but the summary job left no kernel-matrix/summary.md" >&2
	rc=1
fi
printf '\n' >>"$out/summary.md"
python3 "$repo/scripts/act-times.py" "$sim/act.json" >>"$out/summary.md" || true
cat "$out/summary.md"
sim_errors "$rc"
exit "$rc"
