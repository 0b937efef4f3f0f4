#!/bin/bash
# The offline path to the base image of images/prune/Dockerfile. Where no
# image registry is reachable, the pinned base (a Debian point-release image)
# cannot be pulled; this makes its stand-in from a Debian archive instead:
# `debootstrap --variant=minbase` of the suite images/generic/packages.txt
# names, imported into the container engine as the pinned reference's
# name and tag (without its digest: a locally made image never has the
# published one). Build the prune image with
#   --build-arg BASE=<the printed reference>
# The Dockerfile then brings every package to its pinned version and fails
# on any difference, so the prune root holds the same packages either way;
# its root digest (provenance.root_digest) says which root it is.
#
# usage: scripts/prune-base.sh [--engine podman|docker] [--cache DIR]
#   The archive: $LOCKSTEP_DEBIAN_MIRROR, else the first Debian archive URI
#   of this machine's apt sources. Needs root and debootstrap. The root is
#   kept in DIR (default ~/.cache/lockstep/prune-base) and reused.
# Prints the image reference on stdout. Exit 2 on usage, 1 on failure.
set -euo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
engine=${LOCKSTEP_CONTAINER_ENGINE:-} cache=${XDG_CACHE_HOME:-$HOME/.cache}/lockstep/prune-base
while (($#)); do
	case $1 in
	--engine) engine=${2:?--engine needs a value} && shift 2 ;;
	--cache) cache=${2:?--cache needs a value} && shift 2 ;;
	*) sed -n '/^# usage:/,/^# Prints/p' "$0" >&2 && exit 2 ;;
	esac
done
die() {
	echo "prune-base: $*" >&2
	exit 1
}
if [[ -z $engine ]]; then
	for e in docker podman; do
		if command -v "$e" >/dev/null && "$e" info >/dev/null 2>&1; then engine=$e && break; fi
	done
fi
[[ -n $engine ]] || die "no working container engine (docker or podman)"
from=$(sed -n 's/^FROM //p' "$repo/images/prune/Dockerfile" | head -n 1)
base=$(sed -n 's/^ARG BASE=//p' "$repo/images/prune/Dockerfile")
[[ $from == "\${BASE}" && -n $base ]] || die "images/prune/Dockerfile does not start FROM \${BASE} with an ARG BASE default"
ref=${base%@*}
suite=$(sed -n 's/^suite //p' "$repo/images/generic/packages.txt")
[[ -n $suite ]] || die "images/generic/packages.txt names no suite"
mirror=$("$repo/scripts/debian-mirror.sh") || die "no Debian archive to debootstrap $suite from"
root=$cache/$suite-minbase
if [[ ! -e $root/.complete ]]; then
	rm -rf "$root" && mkdir -p "$root"
	echo "prune-base: debootstrap --variant=minbase $suite into $root" >&2
	debootstrap --variant=minbase "$suite" "$root" "$mirror" >&2
	touch "$root/.complete"
fi
# The published image's apt sources name the suite, its -updates and its
# security suite (deb822); debootstrap wrote the suite alone. The stand-in
# gets this machine's Debian-signed deb822 sources instead, so the
# Dockerfile finds the same point-release versions.
rm -f "$root/etc/apt/sources.list" "$root"/etc/apt/sources.list.d/*.sources
n=0
for f in /etc/apt/sources.list.d/*.sources; do
	if [[ -f $f ]] && grep -q '^Signed-By:.*debian-archive' "$f"; then
		cp "$f" "$root/etc/apt/sources.list.d/" && n=$((n + 1))
	fi
done
if ((n == 0)); then
	printf 'Types: deb\nURIs: %s\nSuites: %s %s-updates\nComponents: main\nSigned-By: /usr/share/keyrings/debian-archive-keyring.gpg\n' \
		"$mirror" "$suite" "$suite" >"$root/etc/apt/sources.list.d/debian.sources"
fi
echo "prune-base: importing $root as $ref ($engine)" >&2
tar -C "$root" --exclude=./.complete -c . | "$engine" import - "$ref" >&2
echo "$ref"
