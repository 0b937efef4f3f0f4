#!/bin/bash
# make bench: every Go benchmark once with its ratios, plus the boot benchmark
# against the reference layout (Debian's distribution kernel on q35 with
# SeaBIOS, as Phobos boots), and against virtme-ng (scripts/bench-vng.sh).
# The reference kernel is Debian's linux-image package, downloaded once into
# the cache with apt-get (no install; scripts/ref-kernel.sh). It ends with
# one machine-readable line per comparison: RATIO <name> <value> (<what it
# compares>).
set -euo pipefail
cd "$(dirname "$0")/.."
{ read -r LOCKSTEP_REF_KERNEL && read -r LOCKSTEP_REF_MODULES; } < <(scripts/ref-kernel.sh)
# ref-kernel.sh's failure does not reach set -e through the substitution.
[[ -n $LOCKSTEP_REF_MODULES ]]
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
