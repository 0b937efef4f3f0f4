#!/bin/bash
# Runs .github/workflows/prune-kvm.yml, as written, on this machine: the
# workflow's YAML and its composite actions (workflows/*) are executed by
# act (github.com/nektos/act, pinned below), every job on this host
# (-P <label>=-self-hosted), in `needs` order with the matrix, `${{ }}`
# expressions, GITHUB_OUTPUT, GITHUB_ENV, GITHUB_PATH and
# GITHUB_STEP_SUMMARY (the runner's set-up is scripts/act-sim.sh's, shared
# with the other simulations). The third-party actions are replaced by local
# stand-ins (workflows/sim/): checkout and setup-go check what is there,
# cache and upload/download-artifact copy to and from directories. The
# artifact store is OUT itself, so OUT ends with each job's artefacts as the
# workflow names them (per key: default-prune-<key>/, prune-root-<key>/,
# kvm-<key>-<runner>/, merged-base-<key>/, summary-<key>/), and the merge
# jobs' step summaries, key by key, as OUT/summary.md. --key all runs every
# key of the exercise tree (the plan job's matrix).
#
# By default (--runner host) the runner is this host, foreign to the prune image in one respect:
# its apt sources (LOCKSTEP_APT_DIR) name only an Ubuntu-signed archive, so
# a kernel fetch needs the repository variable LOCKSTEP_DEBIAN_MIRROR (passed
# on when set in the environment); `sudo` is a shim that runs the command
# (the runner's user is root here). LOCKSTEP_PRUNE_BASE=offline makes the
# prune image's base locally (scripts/prune-base.sh) where no registry is
# reachable. The simulated Actions cache starts empty: the kvm jobs'
# `lockstep kernel build` finds the kernel in this machine's kernel cache
# (a self-hosted runner's warm disk) or builds it, which on this
# runner needs LOCKSTEP_DEBIAN_MIRROR.
#
# --runner foreign runs every job on a foreign runner's root instead of this
# host's (scripts/runner-root.sh: another Debian suite, so Python and its
# libraries live at other paths than in the prune image; apt sources with no
# Debian archive at all; scripts/runner-chroot.sh): act itself runs chrooted
# there, the prune job's `docker` is that root's docker.io client talking to
# this machine's podman (a socket under OUT/.sim), and the kvm jobs'
# `lockstep kernel build` uses that runner's own kernel cache (its /root),
# built once for its compiler from LOCKSTEP_DEBIAN_MIRROR (passed on as the
# repository variable, from this machine's apt sources when unset).
#
# usage: scripts/prune-kvm-sim.sh --key K [--source fixture|reference] [--out DIR] [--runner host|foreign]
# Exit: act's status (0 every job passed). Needs: Go (to build act once into
# ~/.cache/lockstep/tools), docker or podman for the container prune (see
# docs/ci.md for the offline base image), QEMU.
set -euo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
key='' source='' out='' runner=host
while (($#)); do
	case $1 in
	--key) key=${2:?} && shift 2 ;;
	--source) source=${2:?} && shift 2 ;;
	--out) out=${2:?} && shift 2 ;;
	--runner) runner=${2:?} && shift 2 ;;
	*) sed -n '/^# usage:/,/^# docs/p' "$0" >&2 && exit 2 ;;
	esac
done
[[ $key =~ ^[a-z0-9-]+$ ]] || { echo "prune-kvm-sim: --key must match ^[a-z0-9-]+\$, got '$key'" >&2 && exit 2; }
[[ $runner == host || $runner == foreign ]] || { echo "prune-kvm-sim: --runner must be host or foreign, got '$runner'" >&2 && exit 2; }
source=${source:-$([[ $key == fixture || $key == all ]] && echo fixture || echo reference)}
tools=${XDG_CACHE_HOME:-$HOME/.cache}/lockstep/tools
sim_name='prune-kvm-sim'
# shellcheck source=scripts/act-sim.sh
. "$repo/scripts/act-sim.sh"

# The container prune needs docker or podman: where neither answers, podman
# and runc from Debian's packages (as root).
if ! { command -v docker >/dev/null && docker info >/dev/null 2>&1; } && ! command -v podman >/dev/null; then
	echo "prune-kvm-sim: installing podman and runc (apt-get)" >&2
	apt-get update -qq >&2
	DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends podman runc >&2
fi
sim_init "${out:-$repo/out/prune-kvm-sim}"
# The offline path to the prune image's base (docs/ci.md): with
# LOCKSTEP_PRUNE_BASE=offline, a debootstrapped stand-in imported under the
# pinned reference's name and tag.
if [[ ${LOCKSTEP_PRUNE_BASE:-} == offline ]]; then
	LOCKSTEP_PRUNE_BASE=$("$repo/scripts/prune-base.sh")
	export LOCKSTEP_PRUNE_BASE
fi

make -s -C "$repo" build >&2

# run_foreign: act, with the arguments above, chrooted into the foreign
# runner's root (scripts/runner-root.sh, scripts/runner-chroot.sh). Bound at
# their own paths: the workspace, OUT (artifacts, the engine's socket), act's
# directory (the runner's temporary directory, which the prune job's
# `docker run -v` names to the engine), act itself, and Go's toolchain and
# caches (setup-go's part). The prune job's docker daemon is this machine's
# podman, served on a socket under OUT for this run only.
run_foreign() {
	local rroot goroot gomod gocache svc
	rroot=$("$repo/scripts/runner-root.sh")
	podman system service --time=0 "unix://$sim/podman.sock" >"$sim/podman.log" 2>&1 &
	svc=$!
	# shellcheck disable=SC2064 # the PID is meant to be expanded now
	trap "kill $svc 2>/dev/null || true" EXIT
	for _ in $(seq 100); do
		[[ -S $sim/podman.sock ]] && break
		sleep 0.1
	done
	goroot=$(go env GOROOT) gomod=$(go env GOMODCACHE) gocache=$(go env GOCACHE)
	mkdir -p "$HOME/.cache/act" "$gomod" "$gocache"
	"$repo/scripts/runner-chroot.sh" --root "$rroot" --bind "$repo" --bind "$out" --bind "$HOME/.cache/act" \
		--bind "$tools" --bind "$goroot" --bind "$gomod" --bind "$gocache" -- \
		env -u LOCKSTEP_DEBIAN_MIRROR -u LOCKSTEP_APT_DIR -C "$repo" PATH="$sim/bin:$goroot/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin" \
		GOMODCACHE="$gomod" GOCACHE="$gocache" DOCKER_HOST="unix://$sim/podman.sock" \
		LOCKSTEP_SIM_ARTIFACTS="$out" LOCKSTEP_SIM_CACHE="$sim/cache" \
		"$act" "${act_args[@]}"
}

sim_map_actions "$repo/.github/workflows/prune-kvm.yml"
printf '{"inputs": {"key": "%s", "source": "%s"}}\n' "$key" "$source" >"$sim/event.json"
if [[ $runner == foreign && -z ${LOCKSTEP_DEBIAN_MIRROR:-} ]]; then
	LOCKSTEP_DEBIAN_MIRROR=$("$repo/scripts/debian-mirror.sh")
fi
sim_act_args .github/workflows/prune-kvm.yml "$sim/event.json"
echo "prune-kvm-sim: $(basename "$act") runs .github/workflows/prune-kvm.yml (key $key, source $source, $runner runner) into $out" >&2
rc=0
if [[ $runner == host ]]; then
	sim_run_host || rc=$?
else
	run_foreign >"$sim/act.json" 2>"$sim/act.stderr" || rc=$?
fi
# Every key's merge job summary, in key order.
: >"$out/summary.md"
for f in "$out"/summary-*/summary.md; do
	[[ -f $f ]] && cat "$f" >>"$out/summary.md"
done
# Job and step times, from act's log.
python3 "$repo/scripts/act-times.py" "$sim/act.json" >>"$out/summary.md" || true
cat "$out/summary.md" 2>/dev/null || true
sim_errors "$rc"
exit "$rc"
