#!/bin/bash
# Runs a command on a foreign runner's root (scripts/runner-root.sh): in a
# private mount namespace, chrooted into ROOT, with /dev, /proc and /sys of
# this machine and the given directories bind-mounted at their own paths.
# Those are what a hosted runner shares with its docker daemon (the
# workspace, the runner's temporary directory) or gets from setup-go (the Go
# toolchain and module cache); everything else, /usr and /etc included, is
# ROOT's own, so a program on this runner sees ROOT's Python, libraries and
# apt sources, and a guest booting "the runner's /" boots ROOT.
#
# usage: scripts/runner-chroot.sh --root ROOT [--bind DIR]... -- CMD [ARG]...
# Exit: CMD's status; 2 on usage; 1 when the namespace cannot be made.
set -euo pipefail
root='' binds=()
while (($#)); do
	case $1 in
	--root) root=${2:?--root needs a value} && shift 2 ;;
	--bind) binds+=("${2:?--bind needs a value}") && shift 2 ;;
	--) shift && break ;;
	*) sed -n '/^# usage:/,/^# Exit:/p' "$0" >&2 && exit 2 ;;
	esac
done
if (($# == 0)) || [[ ! -d $root/usr ]]; then
	sed -n '/^# usage:/,/^# Exit:/p' "$0" >&2
	exit 2
fi
if [[ ${LOCKSTEP_RUNNER_NS:-} != 1 ]]; then
	args=(--root "$root")
	for d in "${binds[@]}"; do args+=(--bind "$d"); done
	exec env LOCKSTEP_RUNNER_NS=1 unshare --mount --propagation private -- "$0" "${args[@]}" -- "$@"
fi
unset LOCKSTEP_RUNNER_NS
mount --rbind /dev "$root/dev"
mount -t proc proc "$root/proc"
mount --rbind /sys "$root/sys"
# Name resolution as this machine has it (a kernel fetch reaches the archive).
touch "$root/etc/resolv.conf"
mount --bind /etc/resolv.conf "$root/etc/resolv.conf"
for d in "${binds[@]}"; do
	[[ -d $d ]] || { echo "runner-chroot: --bind $d is not a directory" >&2 && exit 1; }
	d=$(cd "$d" && pwd -P)
	mkdir -p "$root$d"
	mount --bind "$d" "$root$d"
done
exec chroot "$root" "$@"
