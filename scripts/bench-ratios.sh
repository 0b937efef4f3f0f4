#!/bin/bash
# The RATIO lines `make bench` ends with, read from its output (Go benchmark
# lines and bench-vng.sh's VNG lines): one per comparison,
#   RATIO <name> <value> (<what it compares>)
# with n/a for a value the output does not hold. Then the load and the time.
# Usage: scripts/bench-ratios.sh <bench output file>
set -euo pipefail
out=$1

# metric BENCHMARK UNIT: the value the benchmark's line reported in UNIT.
metric() {
	awk -v b="$1" -v u="$2" '$1 ~ "^" b "(-[0-9]+)?$" { for (i = 2; i <= NF; i++) if ($i == u) v = $(i - 1) } END { print v }' "$out"
}
vng() { awk -v k="$1" '$1 == "VNG" && $2 == k { v = $3 } END { print v }' "$out"; }
ratio() { echo "RATIO $1 ${2:-n/a} ($3)"; }

ratio boot-vs-virtme-ng-cpu "$(vng own-kernels-cpu)" "QEMU CPU of vng --exec true on Debian's kernel over lockstep boot -- true on its pin, medians, alternating"
ratio boot-vs-virtme-ng-wall "$(vng own-kernels-wall)" "wall time of the same two, medians, alternating"
ratio boot-vs-virtme-ng-pin-cpu "$(vng pin-cpu)" "QEMU CPU of vng on lockstep's pin over lockstep boot on it, medians, alternating"
ratio boot-vs-virtme-ng-pin-wall "$(vng pin-wall)" "wall time of the same two, medians, alternating"
ratio boot-vs-reference-cpu "$(metric BenchmarkBootTrue x-faster-cpu)" "QEMU CPU of Debian's kernel on q35 with SeaBIOS over lockstep boot -- true, medians of 5"
ratio run-overhead-ms "$(metric BenchmarkRunTrue overhead-ms)" "lockstep run -- true minus bare true, ms, medians of 101 alternating"
ratio run-vs-floor "$(metric BenchmarkRunTrue x-floor)" "lockstep run -- true over the C floor (cmd/lockstep/testdata/floor.c) running true, medians"
ratio run-exec-overhead-ms "$(metric BenchmarkRunTrue exec-overhead-ms)" "lockstep run --exec -- true (lockstep becomes the command) minus bare true, ms, same rounds"
ratio run-exec-vs-floor "$(metric BenchmarkRunTrue exec-x-floor)" "lockstep run --exec -- true over the C floor running true, same rounds"
ratio observe-fixture-runs-s "$(metric BenchmarkObserveGuest runs-host-s)" "seconds the fixture's observation spends in its runs, from its first reference run to its verdict, on the host's clock"
echo "load $(cut -d' ' -f1-3 /proc/loadavg) at $(date -u +%Y-%m-%dT%H:%MZ)"
