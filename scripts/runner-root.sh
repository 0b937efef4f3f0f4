#!/bin/bash
# The root file system of a foreign runner for `make prune-kvm-sim
# RUNNER=foreign` (scripts/prune-kvm-sim.sh, docs/ci.md): a Debian suite other
# than the prune image's, so its Python and libraries live at other paths
# (trixie: /usr/lib/python3.13, the prune image: /usr/lib/python3.11), with
# what a hosted runner image brings preinstalled: the packages of
# scripts/deps.sh (so the setup action installs nothing), sudo, git, and
# the docker client (docker-cli: the prune job's container engine, which
# the simulation points at this machine's podman). Its apt sources then name no Debian
# archive, only an Ubuntu-signed one (workflows/sim/runner/ubuntu.sources),
# as on GitHub's Ubuntu runners.
#
# usage: scripts/runner-root.sh [--suite S] [--cache DIR]
#   S: the Debian suite [trixie]; it must differ from the suite of
#   images/generic/packages.txt. The archive: scripts/debian-mirror.sh (this
#   machine's own apt sources, or $LOCKSTEP_DEBIAN_MIRROR). The root is kept
#   in DIR/<suite> (default ~/.cache/lockstep/runner-root) and reused.
# Prints the root's path on stdout. Needs root and debootstrap. Exit 2 on
# usage, 1 on failure.
set -euo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
suite=trixie cache=${XDG_CACHE_HOME:-$HOME/.cache}/lockstep/runner-root
while (($#)); do
	case $1 in
	--suite) suite=${2:?--suite needs a value} && shift 2 ;;
	--cache) cache=${2:?--cache needs a value} && shift 2 ;;
	*) sed -n '/^# usage:/,/^# Prints/p' "$0" >&2 && exit 2 ;;
	esac
done
die() {
	echo "runner-root: $*" >&2
	exit 1
}
[[ $suite =~ ^[a-z]+$ ]] || die "--suite must be a Debian suite name, got '$suite'"
prune_suite=$(sed -n 's/^suite //p' "$repo/images/generic/packages.txt")
[[ $suite != "$prune_suite" ]] || die "the runner's suite must differ from the prune image's ($prune_suite)"
root=$cache/$suite
if [[ ! -e $root/.complete ]]; then
	mirror=$("$repo/scripts/debian-mirror.sh") || die "no Debian archive to debootstrap $suite from"
	mapfile -t pkgs < <("$repo/scripts/deps.sh" --list)
	pkgs+=(sudo git docker-cli)
	rm -rf "$root" && mkdir -p "$root" "$cache/debs-$suite"
	echo "runner-root: debootstrap --variant=minbase $suite into $root" >&2
	debootstrap --variant=minbase --cache-dir="$cache/debs-$suite" "$suite" "$root" "$mirror" >&2
	# apt, not debootstrap, resolves the packages: debootstrap's resolver
	# leaves virtual dependencies (a D-Bus session bus) unmet.
	echo "runner-root: apt-get install ${pkgs[*]}" >&2
	cp /etc/resolv.conf "$root/etc/resolv.conf"
	chroot "$root" apt-get update -qq >&2
	DEBIAN_FRONTEND=noninteractive chroot "$root" apt-get install -y -qq --no-install-recommends "${pkgs[@]}" >&2
	chroot "$root" apt-get clean
	rm -f "$root/etc/apt/sources.list" "$root"/etc/apt/sources.list.d/*
	cp "$repo/workflows/sim/runner/ubuntu.sources" "$root/etc/apt/sources.list.d/"
	rm -rf "$root"/var/lib/apt/lists/*
	touch "$root/.complete"
fi
echo "$root"
