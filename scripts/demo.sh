#!/bin/bash
# make demo: what lockstep does, on this machine, in one go. Builds what is
# missing (the pinned kernel is cached under ~/.cache/lockstep), boots a guest
# on it, proves the kernel, shows the enforcer on this host, and runs the KVM
# observation of the UDP fixture with its HTML report.
set -euo pipefail
cd "$(dirname "$0")/.."
LOCKSTEP=${LOCKSTEP:-bin/lockstep}
PIN=${PIN:-7.2.13}
step() { printf '\n\033[1m== %s\033[0m\n' "$*"; }

step "1/6 this machine: lockstep probe"
"$LOCKSTEP" probe

step "2/6 the enforcer on this host's kernel: an allowed and a refused access"
LOCKSTEP="$LOCKSTEP" scripts/demo-run.sh

step "3/6 the pinned kernel $PIN (built once, then restored from the cache and verified)"
"$LOCKSTEP" kernel build --pin "$PIN"

step "4/6 a throwaway guest on it: lockstep boot -- uname -a"
"$LOCKSTEP" boot --kernel "$PIN" -- uname -a

step "5/6 the guest proves its kernel: lockstep selftest"
"$LOCKSTEP" selftest --kernel "$PIN"

step "6/6 the KVM run on the UDP fixture: lockstep observe (strace against the kernel's audit records)"
out=out/demo
rm -rf "$out" && mkdir -p "$out/path_sets"
cp testdata/path_sets/fixture/fixture_udp-fixture.cfg testdata/path_sets/fixture/fixture_udp-fixture.json "$out/path_sets/"
"$LOCKSTEP" observe --kernel "$PIN" --key fixture --exercises testdata/exercises \
	--path-sets "$out/path_sets" --html "$out/observe.html"
echo
echo "-- the ABI-10 sidecar the observer wrote ($out/path_sets/fixture_udp-fixture.abi10.cfg):"
cat "$out/path_sets/fixture_udp-fixture.abi10.cfg"
echo
echo "-- its record, cross-check counts:"
grep -E '"(verified|strace_denials|audit_records|mismatches)"' "$out/path_sets/fixture_udp-fixture.abi10.json" | sed 's/^ */  /'
echo
echo "report: $out/observe.html (one self-contained page; open it in a browser)"
