#!/bin/bash
# Runs a consumer's workflow: testdata/consumer stands for a user's
# repository with its own exercise tree (exercises/, key python) and its own
# prune-kvm workflow, which calls lockstep's composite actions as any user's
# would, by `lockstep-sandbox/lockstep/workflows/<action>@<revision>`. act
# (scripts/act-bin.sh) runs that workflow on this host, every job
# self-hosted, with this checkout mapped as that remote repository at that
# revision (`--local-repository`): the actions run from this checkout's
# files, never from a local path in the consumer's YAML. As in
# scripts/prune-kvm-sim.sh (the set-up of scripts/act-sim.sh), the third-party actions map to the stand-ins of
# workflows/sim/ and the artifact store is OUT, so OUT ends with the
# consumer's artefacts: default-prune/, prune-root/, kvm-ubuntu-24.04/,
# kvm-ubuntu-26.04/, merged-base/ (the base to adopt) and summary/.
#
# usage: scripts/consumer-sim.sh [--out DIR]        [DIR: <repo>/out/consumer-sim]
# Exit: act's status (0 every job passed), or 1 when the merged base lacks
# the consumer's UDP row. Needs what make prune-kvm-sim needs.
set -euo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
out=''
while (($#)); do
	case $1 in
	--out) out=${2:?--out needs a value} && shift 2 ;;
	*) sed -n '/^# usage:/,/^# Exit/p' "$0" >&2 && exit 2 ;;
	esac
done
out=${out:-$repo/out/consumer-sim}
consumer=$repo/testdata/consumer
workflow=.github/workflows/prune-kvm.yml
die() {
	echo "consumer-sim: $*" >&2
	exit 1
}
sim_name='consumer-sim'
# shellcheck source=scripts/act-sim.sh
. "$repo/scripts/act-sim.sh"
sim_init "$out"

# The remote lockstep: this checkout's tracked files as they are in the
# working tree (act copies the mapped directory into every step that uses
# one of its actions, so results and builds under out/ and bin/ stay out).
mkdir -p "$sim/lockstep"
git -C "$repo" ls-files -z | tar -C "$repo" --null --ignore-failed-read -T - -c | tar -C "$sim/lockstep" -x
# The consumer's repository, a git repository of its own.
mkdir -p "$sim/consumer" && cp -a "$consumer/." "$sim/consumer/"
git -C "$sim/consumer" init -q
git -C "$sim/consumer" add -A
git -C "$sim/consumer" -c user.name=consumer -c user.email=consumer@localhost commit -q -m "the consumer's exercises and workflow"

# The revision the consumer names lockstep at: one, mapped to this checkout.
mapfile -t revs < <(grep -hoE 'uses: lockstep-sandbox/lockstep/workflows/[a-z-]+@[^ ]+' "$consumer/$workflow" | sed 's/.*@//' | sort -u)
((${#revs[@]} == 1)) || die "$workflow names lockstep at ${#revs[@]} revisions (${revs[*]:-none}); want one"
if grep -qE 'uses: \./' "$consumer/$workflow"; then
	die "$workflow calls an action by a local path; a consumer calls lockstep's actions by lockstep-sandbox/lockstep/workflows/<action>@<revision>"
fi
maps=(--local-repository "lockstep-sandbox/lockstep@${revs[0]}=$sim/lockstep")
sim_map_actions "$consumer/$workflow"
echo '{}' >"$sim/event.json"
sim_act_args "$workflow" "$sim/event.json"
echo "consumer-sim: $(basename "$act") runs testdata/consumer's $workflow, lockstep-sandbox/lockstep@${revs[0]} mapped to this checkout, into $out" >&2
rc=0
sim_run "$sim/consumer" || rc=$?
python3 "$repo/scripts/act-times.py" "$sim/act.json" >"$out/times.md" || true
cat "$out/summary/summary.md" "$out/times.md" 2>/dev/null || true
sim_errors "$rc"
((rc == 0)) || exit "$rc"
grep -qx 'allow 6000 udp' "$out/merged-base/Abi10-python.cfg" 2>/dev/null ||
	die "act passed, but $out/merged-base/Abi10-python.cfg does not hold allow 6000 udp"
echo "consumer-sim: the consumer's merged base is $out/merged-base (Abi10-python.cfg: allow 6000 udp)" >&2
