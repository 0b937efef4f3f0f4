#!/bin/bash
# make demo: what lockstep does, on this machine, in one go. Builds what is
# missing (the pinned kernel is cached under ~/.cache/lockstep), boots a guest
# on it, proves the kernel, and shows the enforcer on this host.
set -euo pipefail
cd "$(dirname "$0")/.."
LOCKSTEP=${LOCKSTEP:-bin/lockstep}
PIN=${PIN:-7.2.13}
step() { printf '\n\033[1m== %s\033[0m\n' "$*"; }

step "1/5 this machine: lockstep probe"
"$LOCKSTEP" probe

step "2/5 the enforcer on this host's kernel: an allowed and a refused access"
LOCKSTEP="$LOCKSTEP" scripts/demo-run.sh

step "3/5 the pinned kernel $PIN (built once, then restored from the cache and verified)"
"$LOCKSTEP" kernel build --pin "$PIN"

step "4/5 a throwaway guest on it: lockstep boot -- uname -a"
"$LOCKSTEP" boot --kernel "$PIN" -- uname -a

step "5/5 the guest proves its kernel: lockstep selftest"
"$LOCKSTEP" selftest --kernel "$PIN"
