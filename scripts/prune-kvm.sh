#!/bin/bash
# The prune-kvm pipeline: the default prune, the audit observer in a guest on
# the pinned kernel twice (two guest sizes standing for two runner images), the
# orchestrator merging both, checks, and a summary. `make prune-kvm` runs every
# stage here; the jobs of .github/workflows/prune-kvm.yml run one stage each
# through the composite actions in workflows/, so CI and a laptop run the same
# commands. Every step is a `lockstep` verb; this script only sequences them.
#
# usage: scripts/prune-kvm.sh [STAGE] --key K [options]
#   STAGE   all (default) | root | plan | prune | observe | merge | check | summary
#           root: make the root every guest of `all` boots (below) and print its path
#           plan: print the workflow's matrix, `targets=[{"key":…,"source":…},…]`
#                 (a line for GITHUB_OUTPUT): the one key, or with --key all every
#                 key of the exercise tree (lockstep prune --list-keys), each with
#                 source reference but the key fixture, which keeps --source
#   --key K                  exercise key (fixture, generic, …; all: plan only)  [required]
#   --source fixture|reference   fixture: the observer's UDP fixture (key fixture);
#                            reference: the key's reference exercises      [fixture]
#   --exercises DIR          exercise tree (<family>/<exercise>/prune.json)
#                                                          [<repo>/testdata/exercises]
#   --out DIR                results: default-prune/, kvm-<name>/, merged-base/,
#                            summary.json (orchestrate --json), summary.md
#                                                           [<repo>/out/prune-kvm/<key>]
#   --pin P                  kernel pin of the observers                   [7.2.13]
#   --prune-kernel K         where the default prune runs: a pin or bzImage (a guest;
#                            it should stand for the container kernels, below
#                            Landlock ABI 10), `host` (this machine's kernel, only in
#                            a disposable machine: CI, or LOCKSTEP_DISPOSABLE=1), or
#                            `container` (host kernel inside images/prune/Dockerfile,
#                            with docker, else podman; $LOCKSTEP_CONTAINER_ENGINE
#                            chooses; $LOCKSTEP_PRUNE_BASE is the Dockerfile's BASE,
#                            `offline` the stand-in of scripts/prune-base.sh; unset,
#                            the pinned base, or that stand-in with a warning when
#                            no image registry gives it within 30 s).
#                            The container's root is exported to
#                            <out>/prune-root/root.tar for the observers.
#                            Unset: lockstep prune's own default.   [$PRUNE_KERNEL]
#   --root DIR | --image NAME  guest root for prune and observe. Default for all
#                            with a guest prune: the prune image's root (docker or
#                            podman: built, exported, unpacked under <out>/prune-root),
#                            else, with neither, the lockstep image generic; with
#                            --prune-kernel container, the exported container root;
#                            host, and a stage run alone: this machine's /
#   --root-tar FILE          observe: unpack the prune's exported root (root.tar)
#                            into <out>/prune-root/root and boot the guest from it
#   observe: --name N --mem MB --cpus N   one observer run into <out>/kvm-<N>
#   merge:   --kvm N (twice)  the observer runs to compare and merge
#                            [all: small and large; merge alone: every <out>/kvm-*]
#
# Exit: 0 every stage passed; otherwise the failing lockstep verb's status
# (1 failed, 3 indeterminate, 70 guest setup failed) or 1 for a failed check;
# 2 usage. A stage that observed nothing is never reported as passing.
set -euo pipefail

repo=$(cd "$(dirname "$0")/.." && pwd)
# The lockstep on PATH (make prune-kvm puts the fresh bin/ first), else bin/.
if ! command -v lockstep >/dev/null && [[ -x $repo/bin/lockstep ]]; then
	PATH="$repo/bin:$PATH"
fi

usage() {
	sed -n '/^# usage:/,/^# Exit:/p' "$0" | sed 's/^# \{0,1\}//' >&2
	exit 2
}
die() {
	echo "prune-kvm: $*" >&2
	exit 1
}

stage=all
case ${1:-} in
all | root | plan | prune | observe | merge | check | summary) stage=$1 && shift ;;
-h | --help) usage ;;
esac

key='' source=fixture exercises=$repo/testdata/exercises out='' pin=7.2.13
prune_kernel=${PRUNE_KERNEL:-} root='' image='' root_tar='' name='' mem='' cpus=''
kvms=()
while (($#)); do
	case $1 in
	--key) key=${2:?--key needs a value} && shift 2 ;;
	--source) source=${2:?--source needs a value} && shift 2 ;;
	--exercises) exercises=${2:?--exercises needs a value} && shift 2 ;;
	--out) out=${2:?--out needs a value} && shift 2 ;;
	--pin) pin=${2:?--pin needs a value} && shift 2 ;;
	--prune-kernel) prune_kernel=${2?--prune-kernel needs a value} && shift 2 ;;
	--root) root=${2:?--root needs a value} && shift 2 ;;
	--image) image=${2:?--image needs a value} && shift 2 ;;
	--root-tar) root_tar=${2:?--root-tar needs a value} && shift 2 ;;
	--name) name=${2:?--name needs a value} && shift 2 ;;
	--mem) mem=${2:?--mem needs a value} && shift 2 ;;
	--cpus) cpus=${2:?--cpus needs a value} && shift 2 ;;
	--kvm) kvms+=("${2:?--kvm needs a value}") && shift 2 ;;
	*) echo "prune-kvm: unknown argument $1" >&2 && usage ;;
	esac
done
[[ $key =~ ^[a-z0-9-]+$ ]] || { echo "prune-kvm: --key must match ^[a-z0-9-]+\$ (it names files), got '$key'" >&2 && usage; }
if [[ $key == all && $stage != plan ]]; then
	echo "prune-kvm: --key all is the plan stage's (the workflow's matrix); run the other stages per key" >&2 && usage
fi
case $source in
fixture) [[ $key == fixture || $key == all ]] || { echo "prune-kvm: --source fixture needs --key fixture, got '$key'" >&2 && usage; } ;;
reference) ;;
*) echo "prune-kvm: --source must be fixture or reference, got '$source'" >&2 && usage ;;
esac
# Before anything is looked up or made: a usage error is exit 2 with or
# without a built lockstep, and leaves no --out behind.
if [[ $stage == observe && (-z $name || -z $mem || -z $cpus) ]]; then
	echo "prune-kvm: observe needs --name, --mem and --cpus" >&2 && usage
fi
[[ -d $exercises ]] || die "exercise tree $exercises does not exist"
exercises=$(cd "$exercises" && pwd)

# do_plan prints the matrix of the workflow's per-key jobs (see usage).
do_plan() {
	local keys=() k s json='' listed
	if [[ $key == all ]]; then
		listed=$(lockstep prune --list-keys --exercises "$exercises") || die "listing the keys of $exercises failed"
		mapfile -t keys <<<"$listed"
	else
		keys=("$key")
	fi
	for k in "${keys[@]}"; do
		s=$source
		[[ $key == all && $k != fixture ]] && s=reference
		json+=${json:+,}"{\"key\":\"$k\",\"source\":\"$s\"}"
	done
	echo "targets=[$json]"
}
if [[ $stage == plan ]]; then
	do_plan
	exit 0
fi
out=${out:-$repo/out/prune-kvm/$key}
mkdir -p "$out/status"
out=$(cd "$out" && pwd)
command -v lockstep >/dev/null || die "lockstep is not on PATH and $repo/bin/lockstep is missing; run: make build"
if [[ -n $image ]]; then
	[[ -z $root ]] || { echo "prune-kvm: give --root or --image, not both" >&2 && usage; }
	root=$(lockstep image path "$image")
fi
if [[ -n $root_tar ]]; then
	[[ -z $root && -z $image ]] || { echo "prune-kvm: give one of --root, --image and --root-tar" >&2 && usage; }
	[[ -f $root_tar ]] || die "--root-tar $root_tar is not a file"
	root=$out/prune-root/root
fi
root_args=()
if [[ -n $root ]]; then
	root_args=(--root "$root")
fi

# note STAGE STATUS TEXT: remember a stage's outcome for the summary.
note() {
	local n
	n=$(find "$out/status" -type f | wc -l)
	printf '%s\t%s\n' "$2" "$3" >"$out/status/$(printf %02d $((n + 1)))-$1"
}

# step NAME TEXT CMD…: run one stage's command, note its status, stop on failure.
step() {
	local n=$1 text=$2 rc=0
	shift 2
	echo "prune-kvm: $text" >&2
	local t0=$SECONDS
	("$@") || rc=$?
	note "$n" "$rc" "$text ($((SECONDS - t0)) s)"
	if ((rc != 0)); then
		echo "prune-kvm: $text failed with status $rc" >&2
		exit "$rc"
	fi
}

do_prune() {
	local dir=$out/default-prune
	rm -rf "$dir" && mkdir -p "$dir"
	case $prune_kernel in
	host)
		if [[ ${LOCKSTEP_DISPOSABLE:-} != 1 && ${CI:-} != true ]]; then
			die "--prune-kernel host deletes what an exercise leaves behind on this machine: only on a disposable machine (CI), or set LOCKSTEP_DISPOSABLE=1"
		fi
		step prune "default prune of $key on this machine's kernel $(uname -r)" \
			env LOCKSTEP_DISPOSABLE=1 lockstep prune --on-host --key "$key" --exercises "$exercises" --out "$dir"
		;;
	container)
		local engine
		engine=$(container_engine) || die "--prune-kernel container needs docker or podman (a working one: '<engine> info' must answer)"
		build_image "$engine"
		# As Compose starts it: no network, cgroup limits. CAP_SYS_ADMIN and
		# no AppArmor profile only so that each run can start cold in a mount
		# namespace of its own (docs/prune.md, "Cold runs"); the run itself
		# has CAP_SYS_ADMIN dropped. lockstep is mounted under /run, outside
		# the root's digest (docs/orchestrate.md): the exported root has no
		# lockstep in it.
		step prune "default prune of $key in the prune container on this machine's kernel $(uname -r)" \
			"$engine" run --rm --network none --memory 3g --pids-limit 1024 -e LOCKSTEP_DISPOSABLE=1 \
			--cap-add SYS_ADMIN --security-opt apparmor=unconfined \
			-v "$(command -v lockstep):/run/lockstep/bin/lockstep:ro" -v "$exercises:/exercises:ro" -v "$dir:/out" \
			lockstep-prune:local /run/lockstep/bin/lockstep prune --on-host --key "$key" --exercises /exercises --out /out
		step prune-root "export the prune container's root file system for the observers" export_root "$engine"
		;;
	'')
		step prune "default prune of $key in a guest (lockstep prune's default kernel)" \
			lockstep prune --key "$key" --exercises "$exercises" --out "$dir" "${root_args[@]}"
		;;
	*)
		step prune "default prune of $key in a guest on $prune_kernel" \
			lockstep prune --key "$key" --exercises "$exercises" --out "$dir" --kernel "$prune_kernel" "${root_args[@]}"
		;;
	esac
	compgen -G "$dir/${key}_*.cfg" >/dev/null || die "the default prune wrote no $key policy into $dir"
}

# container_engine prints docker or podman, whichever answers (docker first),
# or $LOCKSTEP_CONTAINER_ENGINE.
container_engine() {
	local e
	for e in ${LOCKSTEP_CONTAINER_ENGINE:-docker podman}; do
		if command -v "$e" >/dev/null && "$e" info >/dev/null 2>&1; then
			echo "$e"
			return 0
		fi
	done
	return 1
}

# build_image ENGINE: the prune image, lockstep-prune:local, FROM the base
# prune_base chooses.
build_image() {
	prune_base "$1"
	step prune-image "build the prune image from images/prune/Dockerfile ($1${LOCKSTEP_PRUNE_BASE:+, base $LOCKSTEP_PRUNE_BASE})" \
		"$1" build --quiet ${LOCKSTEP_PRUNE_BASE:+--build-arg "BASE=$LOCKSTEP_PRUNE_BASE"} \
		-f "$repo/images/prune/Dockerfile" -t lockstep-prune:local "$repo/images"
}

# pull_seconds bounds the check whether an image registry answers: a pull
# of the pinned base (about 30 MB) takes a few seconds where one does, and
# fails at once or hangs where none does.
pull_seconds=30

# prune_base ENGINE: sets LOCKSTEP_PRUNE_BASE, the prune image's base. Given,
# it is kept; "offline" is the stand-in scripts/prune-base.sh makes from a
# Debian archive (docs/ci.md). Unset: the Dockerfile's pinned base when the
# engine has it or pulls it within pull_seconds, else, with one warning
# line, the offline stand-in, as make prune-kvm-sim does with
# LOCKSTEP_PRUNE_BASE=offline.
prune_base() {
	local engine=$1 base rc=0 t0=$SECONDS
	case ${LOCKSTEP_PRUNE_BASE:-} in
	offline) ;;
	'')
		base=$(sed -n 's/^ARG BASE=//p' "$repo/images/prune/Dockerfile")
		[[ -n $base ]] || die "images/prune/Dockerfile has no ARG BASE default"
		"$engine" image inspect "$base" >/dev/null 2>&1 && return 0
		timeout "$pull_seconds" "$engine" pull --quiet "$base" >/dev/null 2>&1 || rc=$?
		((rc != 0)) || return 0
		echo "prune-kvm: warning: no image registry answers ($engine pull of $base: status $rc after $((SECONDS - t0)) s, limit $pull_seconds s); the prune image's base is made offline from a Debian archive (scripts/prune-base.sh), as LOCKSTEP_PRUNE_BASE=offline does" >&2
		;;
	*) return 0 ;;
	esac
	step prune-base "make the prune image's base offline (scripts/prune-base.sh, $engine)" offline_base "$engine"
	LOCKSTEP_PRUNE_BASE=$(<"$out/prune-base.ref")
}

# offline_base ENGINE: scripts/prune-base.sh, its image reference into
# <out>/prune-base.ref.
offline_base() {
	"$repo/scripts/prune-base.sh" --engine "$1" >"$out/prune-base.ref"
}

# local_root: the root every guest of `all` boots when none was given and
# the default prune runs in a guest: the prune image's own root (built and
# exported with docker or podman, as the workflow's prune job does), else,
# with neither, the lockstep image generic, made from the package list the
# prune image is made from (images/generic/packages.txt). Never this
# machine's /: one root for every stage, and the prune image's.
local_root() {
	local engine
	if engine=$(container_engine); then
		build_image "$engine"
		step prune-root "export the prune image's root file system for every guest" export_root "$engine"
		root_tar=$out/prune-root/root.tar root=$out/prune-root/root
		step unpack-root "unpack the prune image's root for the guests" unpack_root
		touch "$root/.lockstep-unpacked"
	else
		echo "prune-kvm: no docker or podman answers; every guest boots the lockstep image generic" >&2
		step image "build (or check) the lockstep image generic for every guest" lockstep image build generic
		root=$(lockstep image path generic)
	fi
	root_args=(--root "$root")
}

# export_root ENGINE: the prune image's root file system, as a container of
# it that never ran, into <out>/prune-root/root.tar; the observers boot it.
export_root() {
	local engine=$1 c=lockstep-prune-root-$$ dir=$out/prune-root
	rm -rf "$dir" && mkdir -p "$dir"
	"$engine" create --name "$c" lockstep-prune:local /bin/true >/dev/null
	local rc=0
	"$engine" export -o "$dir/root.tar" "$c" || rc=$?
	"$engine" rm "$c" >/dev/null || true
	return "$rc"
}

# unpack_root: <out>/prune-root/root from --root-tar, with modes as recorded
# (-p: setuid bits survive an unprivileged unpack) and without /dev, whose
# nodes an unprivileged user cannot make and the guest mounts afresh.
unpack_root() {
	rm -rf "$root" && mkdir -p "$root"
	tar -x -p -f "$root_tar" -C "$root" --exclude='./dev/*' --exclude='dev/*'
	echo "prune-kvm: guest root $root ($(lockstep image digest "$root"))" >&2
}

# do_observe NAME MEM CPUS: the observer in a guest of that size, on the
# default prune's results, into <out>/kvm-NAME.
do_observe() {
	local n=$1 m=$2 c=$3 dir=$out/kvm-$1
	[[ $n =~ ^[A-Za-z0-9._-]+$ ]] || die "observer name '$n' must be letters, digits, dots, dashes"
	[[ -d $out/default-prune ]] || die "no default prune in $out/default-prune: run the prune stage first"
	rm -rf "$dir" && mkdir -p "$dir"
	cp -R "$out/default-prune/." "$dir/"
	if [[ -n $root_tar && ! -e $root/.lockstep-unpacked ]]; then
		step "unpack-root-$n" "unpack the prune's root for the guest" unpack_root
		touch "$root/.lockstep-unpacked"
	fi
	step "observe-$n" "observer $n: guest of $c vCPU and $m MB on kernel $pin" \
		lockstep observe --key "$key" --exercises "$exercises" --path-sets "$dir" --kernel "$pin" \
		--mem "$m" --cpus "$c" "${root_args[@]}"
	compgen -G "$dir/${key}_*.abi10.json" >/dev/null || die "observer $n wrote no .abi10.json into $dir"
}

do_merge() {
	local kdirs=() k
	if ((${#kvms[@]} == 0)); then
		for k in "$out"/kvm-*/; do
			[[ -d $k ]] && kvms+=("$(basename "$k")")
		done
		kvms=("${kvms[@]#kvm-}")
	fi
	((${#kvms[@]} == 2)) || die "the merge compares exactly two observer runs, found ${#kvms[@]}: ${kvms[*]:-none}"
	for k in "${kvms[@]}"; do
		[[ -d $out/kvm-$k ]] || die "no observer results in $out/kvm-$k"
		kdirs+=(--kvm-dir "$out/kvm-$k")
	done
	mkdir -p "$out/merged-base"
	step merge "orchestrate $key: default prune + observers ${kvms[*]}, which must agree" \
		lockstep orchestrate --langs "$key" --path-dir "$out/default-prune" --core-dir "$out/merged-base" \
		"${kdirs[@]}" --json --summary "$out/orchestrate.md" >"$out/summary.json"
}

check_fixture() {
	local base=$out/merged-base k s rc=0 tmp
	grep -qx 'allow 5000 udp' "$base/Abi10-$key.cfg" || die "Abi10-$key.cfg does not hold 'allow 5000 udp'"
	if grep -q udp "$base/BaseLanguage-$key.cfg"; then
		die "BaseLanguage-$key.cfg holds a udp rule; ABI 10 rows never enter a base"
	fi
	for k in "$out"/kvm-*/; do
		for s in "$k"*.abi10.cfg; do
			[[ -e $s ]] || die "observer $(basename "$k") wrote no sidecar"
			[[ $(grep -v '^#' "$s" | grep -v '^$') == $'[bind]\nallow 5000 udp' ]] ||
				die "$s holds other rows than '[bind] allow 5000 udp'"
		done
	done
	# A tampered sidecar must make the merge fail red and write nothing: both
	# observer runs tampered alike, so that they agree and the sidecar's own
	# check refuses it (one directory given twice is a usage error).
	tmp=$out/tamper-test
	rm -rf "$tmp" && mkdir -p "$tmp"
	for k in a b; do
		cp -R "$out/kvm-${kvms[0]}" "$tmp/kvm-$k"
		for s in "$tmp/kvm-$k"/*.abi10.cfg; do
			printf '[bind]\nallow 6000 udp\n' >"$s"
		done
	done
	lockstep orchestrate --langs "$key" --path-dir "$out/default-prune" --core-dir "$tmp/core" \
		--kvm-dir "$tmp/kvm-a" --kvm-dir "$tmp/kvm-b" >"$tmp/out" 2>"$tmp/err" || rc=$?
	if ((rc != 1)); then
		die "the merge of a tampered sidecar exited $rc, want 1 (refused)"
	fi
	if [[ -n $(find "$tmp/core" -type f 2>/dev/null) ]]; then
		die "the refused merge of a tampered sidecar wrote files into its core dir"
	fi
	grep -q 'abi10.cfg' "$tmp/err" || die "the refused merge did not name the tampered sidecar: $(head -c 500 "$tmp/err")"
	echo "prune-kvm: a tampered sidecar is refused: $(head -n 1 "$tmp/err")" >&2
	rm -rf "$tmp"
}

# The merged base must let each reference exercise of the key pass under the
# enforcer on this machine, in a fresh copy at the working directory the
# exercise contract names.
check_reference() {
	local base=$out/merged-base pj ex dir cfg=() n=0 work=/var/tmp/testing-dir
	for pj in "$exercises"/*/*/prune.json; do
		[[ -e $pj ]] || continue
		grep -Eq "\"key\"[[:space:]]*:[[:space:]]*\"$key\"" "$pj" || continue
		dir=$(dirname "$pj") ex=$(basename "$dir") cfg=()
		if [[ -e $base/exercises/${key}_$ex.cfg ]]; then
			cfg=(--config "$base/exercises/${key}_$ex.cfg")
		fi
		rm -rf "$work" && cp -R "$dir" "$work"
		step "verify-$ex" "exercise $key/$ex under the merged base" \
			env -C "$work" lockstep run --base-dir "$base" "${cfg[@]}" -- /bin/bash ./build_script.sh
		n=$((n + 1))
	done
	((n > 0)) || die "no exercise of key $key in $exercises"
}

do_check() {
	if [[ $source == fixture ]]; then
		step check "fixture checks: rows, base without udp, tampered sidecar refused" check_fixture
	else
		check_reference
	fi
}

do_summary() {
	local f n md=$out/summary.md
	{
		echo "## prune-kvm: \`$key\` ($source)"
		echo
		echo "| stage | status |"
		echo "| --- | --- |"
		for f in "$out"/status/*; do
			[[ -e $f ]] || continue
			IFS=$'\t' read -r rc text <"$f"
			if [[ $rc == 0 ]]; then rc="passed"; else rc="**failed ($rc)**"; fi
			echo "| $text | $rc |"
		done
		if compgen -G "$out/merged-base/*.cfg" >/dev/null; then
			echo
			echo "### merged base"
			echo
			for f in "$out"/merged-base/*.cfg; do
				[[ -e $f ]] || continue
				n=$(grep -cv '^\(#\|$\)' "$f" || true)
				echo "- \`$(basename "$f")\`: $n line$( ((n == 1)) || echo s)"
			done
			if [[ -e $out/merged-base/Abi10-$key.cfg ]]; then
				echo
				echo "ABI 10 rows (\`Abi10-$key.cfg\`, never part of a base):"
				echo
				echo '```'
				grep -v '^#' "$out/merged-base/Abi10-$key.cfg"
				echo '```'
			fi
		fi
		if [[ -s $out/orchestrate.md ]]; then
			echo
			cat "$out/orchestrate.md"
		fi
	} >"$md"
	cat "$md"
	if [[ -n ${GITHUB_STEP_SUMMARY:-} ]]; then
		cat "$md" >>"$GITHUB_STEP_SUMMARY"
	fi
}

case $stage in
root)
	[[ -z $root ]] || die "the root stage makes the default root; --root, --image and --root-tar name one already"
	local_root >&2
	echo "$root"
	;;
prune) do_prune ;;
observe)
	do_observe "$name" "$mem" "$cpus"
	;;
merge) do_merge ;;
check)
	if ((${#kvms[@]} == 0)); then
		for k in "$out"/kvm-*/; do [[ -d $k ]] && kvms+=("$(basename "$k")"); done
		kvms=("${kvms[@]#kvm-}")
	fi
	do_check
	;;
summary) do_summary ;;
all)
	rm -rf "$out/status" "$out/summary.json" "$out/summary.md" "$out/orchestrate.md" && mkdir -p "$out/status"
	trap 'do_summary >/dev/null 2>&1 || true' EXIT
	if [[ -z $root && $prune_kernel != host && $prune_kernel != container ]]; then
		local_root
	fi
	do_prune
	if [[ $prune_kernel == container ]]; then
		# One root for every stage: the observers boot the prune's own.
		root_tar=$out/prune-root/root.tar root=$out/prune-root/root
		root_args=(--root "$root")
	fi
	do_observe small 1024 1
	do_observe large 2048 2
	kvms=(small large)
	do_merge
	do_check
	trap - EXIT
	do_summary
	;;
esac
