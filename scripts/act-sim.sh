# shellcheck shell=bash disable=SC2154 # repo and sim_name are the sourcing script's
# The act runner set-up every simulation of a workflow shares
# (scripts/prune-kvm-sim.sh, scripts/consumer-sim.sh,
# scripts/kernel-matrix-sim.sh source it): act itself (scripts/act-bin.sh),
# OUT and its .sim directory, the runner's sudo and podman, the stand-ins of
# the third-party actions (workflows/sim/), the repository variable and act's
# common arguments. Every job runs on this host (-P <label>=-self-hosted),
# one job at a time, with the Actions cache and artifact store as
# directories ($LOCKSTEP_SIM_CACHE, $LOCKSTEP_SIM_ARTIFACTS: OUT itself).
#
# Needs $repo (the checkout) and $sim_name (the simulation's name, for messages)
# set by the sourcing script. Sets: act, out, sim, maps, vars, act_args.

# sim_init OUT: act, an empty OUT (absolute from here on) with OUT/.sim
# (bin/, cache/, apt/), a sudo that runs the command where the host has none
# (the runner's user is root), and podman's set-up where podman and runc are
# installed.
sim_init() {
	act=$("$repo/scripts/act-bin.sh")
	out=$1
	rm -rf "$out" && mkdir -p "$out"
	out=$(cd "$out" && pwd)
	sim=$out/.sim
	mkdir -p "$sim/apt/sources.list.d" "$sim/bin" "$sim/cache"
	# The runner's apt sources: an Ubuntu-signed archive only (a placeholder
	# host; nothing is fetched from it).
	cp "$repo/workflows/sim/runner/ubuntu.sources" "$sim/apt/sources.list.d/"
	if ! command -v sudo >/dev/null; then
		printf '#!/bin/sh\n# sudo of the simulated runner: its user is root already.\nexec "$@"\n' >"$sim/bin/sudo"
		chmod +x "$sim/bin/sudo"
	fi
	# The container engine, when it is podman: its default runtime (crun)
	# refuses hosts whose cgroups are in hybrid mode, where runc runs; and a
	# sandboxed host may refuse the file and process limits podman sets by
	# default (1048576 open files), so the container gets common ones, soft
	# equal to hard: podman's docker-compatible API (the foreign runner's
	# docker) swaps a pair's soft and hard limits, and runc refuses a soft
	# limit above the hard one ("error setting rlimit type 7: invalid
	# argument").
	if command -v podman >/dev/null && command -v runc >/dev/null; then
		printf '[containers]\ndefault_ulimits = ["nofile=4096:4096", "nproc=4096:4096"]\n[engine]\nruntime = "runc"\n' >"$sim/containers.conf"
		export CONTAINERS_CONF=$sim/containers.conf
	fi
	maps=() vars=()
}

# sim_map_actions FILE…: every third-party action FILE… and lockstep's
# composite actions use, at the ref they pin, mapped to its stand-in
# (appended to maps).
sim_map_actions() {
	local ref a
	while read -r ref; do
		a=${ref%@*} a=${a#actions/}
		[[ -d $repo/workflows/sim/$a ]] || { echo "$sim_name: no stand-in for $ref in workflows/sim/" >&2 && exit 1; }
		maps+=(--local-repository "$ref=$repo/workflows/sim/$a")
	done < <(grep -rhoE 'uses: actions/[a-z-]+(/[a-z]+)?@[0-9a-f]{40}' "$@" "$repo"/workflows/*/action.yml |
		sed -E 's/^uses: //; s#^(actions/[a-z-]+)/[a-z]+@#\1@#' | sort -u)
}

# sim_act_args WORKFLOW EVENT: act's arguments for a workflow_dispatch of
# WORKFLOW with the event file EVENT. The repository variable
# LOCKSTEP_DEBIAN_MIRROR is passed on when set in the environment. The
# kernel's cache key names the runner image by LOCKSTEP_KERNEL_CACHE_IMAGE
# here, not ImageOS: act gives every leg of a matrix job the ImageOS of the
# first leg it ran, so the legs of one host would name different images
# (workflows/kernel).
sim_act_args() {
	if [[ -n ${LOCKSTEP_DEBIAN_MIRROR:-} ]]; then
		vars=(--var "LOCKSTEP_DEBIAN_MIRROR=$LOCKSTEP_DEBIAN_MIRROR")
	fi
	act_args=(workflow_dispatch -W "$1" -e "$2"
		-P ubuntu-24.04=-self-hosted -P ubuntu-26.04=-self-hosted --env LOCKSTEP_KERNEL_CACHE_IMAGE=act-self-hosted
		"${maps[@]}" "${vars[@]}" --action-offline-mode --no-cache-server --concurrent-jobs 1 --json)
}

# sim_run DIR [ENV…]: act with act_args, from DIR, the artifact store and
# cache under OUT, the log to OUT/.sim/act.json; ENV is a command prefix
# (env -u … NAME=value) for act's environment. Returns act's status.
sim_run() {
	local dir=$1
	shift
	(
		cd "$dir" || exit
		export LOCKSTEP_SIM_ARTIFACTS=$out LOCKSTEP_SIM_CACHE=$sim/cache PATH=$sim/bin:$PATH
		"$@" "$act" "${act_args[@]}"
	) >"$sim/act.json" 2>"$sim/act.stderr"
}

# sim_run_host: sim_run from the checkout with this host as the runner: its
# apt sources the placeholder's (LOCKSTEP_APT_DIR), so a kernel fetch needs
# the repository variable, as on GitHub's Ubuntu runners.
sim_run_host() {
	sim_run "$repo" env -u LOCKSTEP_DEBIAN_MIRROR LOCKSTEP_APT_DIR="$sim/apt"
}

# sim_errors RC: when act failed, say so with the log's last errors.
sim_errors() {
	if (($1 != 0)); then
		echo "$sim_name: act exited $1; the log is $sim/act.json" >&2
		grep -h '"level":"error"' "$sim/act.json" | tail -n 5 >&2 || true
	fi
}
