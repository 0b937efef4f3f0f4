#!/bin/bash
# Re-makes the shipped bases (bases/, docs/prune.md "Shipped bases"): for every
# built language, the default prune of its reference exercise on this
# machine's kernel, the audit observer on the pinned kernel in a guest (the
# ABI-10 sidecar), then the orchestrator's merge of all of them, installed
# into bases/ with a README of how it was made. Slow (docs/prune.md has the
# times), so it is not in CI; CI checks the result (verify.TestShippedBases).
# The languages run --jobs at a time (a language's prune, then its
# observation), started in the order of --keys: the default lists the slowest
# first, so that no long prune starts last and runs alone.
#
# usage: scripts/bases.sh [--out DIR] [--keys k1,k2,…] [--jobs N] [--pin P] [--no-install] [--merge-only]
#   --out DIR      work directory: path_sets/<key>/, core/, logs/   [<repo>/out/bases]
#   --keys LIST    the languages, in the order they start (every one needs
#                  its reference exercise under testdata/exercises)
#                                   [java-maven,cpp,c-gcc,r,c,python,generic]
#   --jobs N       languages at once                                     [2]
#   --pin P        the observers' kernel pin                             [7.2.13]
#   --no-install   leave bases/ as it is (the results stay under --out)
#   --merge-only   no prune, no observation: merge and install what
#                  --out/path_sets holds (its times from --out/logs/times.tsv)
# Needs root, LOCKSTEP_DISPOSABLE=1 (the prunes delete and recreate their
# working directory and plant canaries on this machine), the toolchains of
# the exercises' READMEs, and bin/lockstep (make build).
# Exit: 0 every base was made and installed (a failed observation is
# reported, and its language merged without ABI-10 rows); 1 a prune or the
# merge failed (bases/ untouched); 2 usage.
set -euo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
out=$repo/out/bases keys=java-maven,cpp,c-gcc,r,c,python,generic jobs=2 pin=7.2.13 install=1 merge_only=0
while (($#)); do
	case $1 in
	--out) out=${2:?--out needs a value} && shift 2 ;;
	--keys) keys=${2:?--keys needs a value} && shift 2 ;;
	--jobs) jobs=${2:?--jobs needs a value} && shift 2 ;;
	--pin) pin=${2:?--pin needs a value} && shift 2 ;;
	--no-install) install=0 && shift ;;
	--merge-only) merge_only=1 && shift ;;
	*) sed -n '/^# usage:/,/^# Exit:/p' "$0" | sed 's/^# \{0,1\}//' >&2 && exit 2 ;;
	esac
done
die() {
	echo "bases: $*" >&2
	exit 1
}
[[ $jobs =~ ^[1-9][0-9]*$ ]] || die "--jobs $jobs: want a count of languages at once, 1 or more"
((merge_only)) || [[ ${LOCKSTEP_DISPOSABLE:-} == 1 ]] || die "the prunes run on this machine's kernel and delete what an exercise leaves behind: set LOCKSTEP_DISPOSABLE=1 on a machine you can throw away"
[[ $(id -u) == 0 ]] || die "needs root (a private mount namespace per prune, the observer's guest)"
lockstep=$repo/bin/lockstep
[[ -x $lockstep ]] || die "$lockstep is missing; run: make build"
IFS=, read -ra langs <<<"$keys"
mkdir -p "$out/logs" "$out/path_sets"
out=$(cd "$out" && pwd)
times=$out/logs/times.tsv
((merge_only)) || : >"$times"

# timed NAME CMD…: run CMD with its output in logs/NAME.log; its status and
# seconds go to times.tsv. Returns CMD's status.
timed() {
	local name=$1 t0=$SECONDS rc=0
	shift
	echo "bases: $name" >&2
	"$@" >"$out/logs/$name.log" 2>&1 || rc=$?
	printf '%s\t%s\t%s\n' "$name" "$rc" "$((SECONDS - t0))" >>"$times"
	return "$rc"
}

# prune KEY: the default prune on this kernel, in a private mount namespace
# whose /var/tmp and canary directory are its own, so that it shares
# /var/tmp/testing-dir with no other run on this machine.
prune() {
	local dir=$out/path_sets/$1 priv=$out/private/$1
	rm -rf "$dir" "$priv" && mkdir -p "$dir" "$priv"
	# shellcheck disable=SC2016 # the inner script expands its own arguments
	unshare -m --propagation private /bin/bash -c '
		set -eu
		mount --bind "$1" /var/tmp
		mkdir -p /srv/lockstep-prune-canary && mount -t tmpfs lockstep-canary /srv/lockstep-prune-canary
		exec "$2" prune --on-host --key "$3" --exercises "$4" --out "$5"
	' _ "$priv" "$lockstep" "$1" "$repo/testdata/exercises" "$dir"
}

# language KEY: its prune, then its observation. A failed prune leaves
# logs/failed-KEY; an observation that fails leaves the language without its
# ABI-10 record in the merge (the README says so), its .abi10.json as evidence.
language() {
	local k=$1
	if ! timed "prune-$k" prune "$k"; then
		: >"$out/logs/failed-$k"
		return 1
	fi
	timed "observe-$k" "$lockstep" observe --key "$k" --exercises "$repo/testdata/exercises" \
		--path-sets "$out/path_sets/$k" --kernel "$pin" --mem 2048 --timeout 2h ||
		echo "bases: the observation of $k failed; see $out/logs/observe-$k.log" >&2
}

if ((!merge_only)); then
	rm -f "$out"/logs/failed-*
	for k in "${langs[@]}"; do
		while (($(jobs -rp | wc -l) >= jobs)); do wait -n || true; done
		language "$k" &
	done
	wait
	for k in "${langs[@]}"; do
		[[ ! -e $out/logs/failed-$k ]] || die "the prune of $k failed; see $out/logs/prune-$k.log"
	done
fi
# The merge takes the languages in a stable order, whatever order they ran in.
keys=$(printf '%s\n' "${langs[@]}" | sort | paste -sd,)
IFS=, read -ra langs <<<"$keys"

# The orchestrator reads one directory of every language's files: the
# policies and records, and the ABI-10 records the observer verified.
merged=$out/merge-input
rm -rf "$merged" && mkdir -p "$merged"
for k in "${langs[@]}"; do
	for f in "$out/path_sets/$k/${k}"_*.cfg "$out/path_sets/$k/${k}"_*.json; do
		case $f in
		*.abi10.json | *.abi10.cfg) grep -q '"verified": true' "${f%.abi10.*}.abi10.json" || continue ;;
		esac
		cp "$f" "$merged/"
	done
done
timed orchestrate "$lockstep" orchestrate --langs "$keys" --path-dir "$merged" --core-dir "$out/core" --json ||
	die "the merge failed; see $out/logs/orchestrate.log"
((install)) || exit 0

# Install: the merged tree, each language's records and observer run, and
# the README (scripts/bases-readme.py), replacing bases/ as a whole.
new=$repo/.bases.new
rm -rf "$new" && cp -a "$out/core" "$new"
for k in "${langs[@]}"; do
	mkdir -p "$new/path_sets/$k"
	cp "$out/path_sets/$k/${k}"_*.cfg "$out/path_sets/$k/${k}"_*.json "$new/path_sets/$k/"
	if [[ -f $out/path_sets/$k/run.json ]]; then cp "$out/path_sets/$k/run.json" "$new/path_sets/$k/"; fi
done
python3 "$repo/scripts/bases-readme.py" --bases "$new" --times "$times" --pin "$pin" --keep "$repo/bases/README.md" \
	--lockstep "$("$lockstep" version | head -1), source revision $(git -C "$repo" rev-parse --short HEAD 2>/dev/null || echo unknown)" >"$new/README.md"
rm -rf "$repo/bases.old"
if [[ -d $repo/bases ]]; then mv "$repo/bases" "$repo/bases.old"; fi
mv "$new" "$repo/bases" && rm -rf "$repo/bases.old"
echo "bases: installed into $repo/bases" >&2
