#!/bin/bash
# make bench: every Go benchmark once with its ratios, plus the boot benchmark
# against the reference layout (Debian's distribution kernel on q35 with
# SeaBIOS, as Phobos boots), and against virtme-ng (scripts/bench-vng.sh).
# The reference kernel is Debian's linux-image package, downloaded once into
# the cache with apt-get (no install). It ends with one machine-readable line
# per comparison: RATIO <name> <value> (<what it compares>).
set -euo pipefail
cd "$(dirname "$0")/.."
cache=${XDG_CACHE_HOME:-$HOME/.cache}/lockstep/ref-kernel
if ! ls "$cache"/boot/vmlinuz-* >/dev/null 2>&1; then
	pkg=$(apt-cache depends linux-image-amd64 | awk '/Depends: linux-image-[0-9]/ {print $2; exit}')
	if [[ -z $pkg ]]; then
		echo "bench: no linux-image package in the apt lists (run apt-get update)" >&2
		exit 1
	fi
	echo "bench: fetching the reference kernel $pkg" >&2
	tmp=$(mktemp -d)
	trap 'rm -rf "$tmp"' EXIT
	(cd "$tmp" && apt-get download -qq "$pkg")
	mkdir -p "$cache.tmp" && dpkg-deb -x "$tmp"/*.deb "$cache.tmp"
	rm -rf "$cache" && mv "$cache.tmp" "$cache"
	rm -rf "$tmp" && trap - EXIT
fi
kernels=("$cache"/boot/vmlinuz-*) modules=("$cache"/lib/modules/*)
LOCKSTEP_REF_KERNEL=${kernels[0]}
LOCKSTEP_REF_MODULES=${modules[0]}
export LOCKSTEP_REF_KERNEL LOCKSTEP_REF_MODULES
echo "bench: reference layout: $(basename "$LOCKSTEP_REF_KERNEL") on q35 (SeaBIOS)" >&2
out=$(mktemp)
trap 'rm -f "$out"' EXIT
# -p 1: one package's benchmarks at a time, so no two measurements share
# the machine's cores with each other.
go test -p 1 -run '^$' -bench . -benchmem -benchtime=1x -timeout 60m ./... | grep -Ev '^(PASS|ok|\?)' | tee "$out"
scripts/bench-boot.sh bin/lockstep 5
scripts/bench-vng.sh bin/lockstep "$LOCKSTEP_REF_KERNEL" "$LOCKSTEP_REF_MODULES" "${VNG_RUNS:-5}" | tee -a "$out"

scripts/bench-ratios.sh "$out"
