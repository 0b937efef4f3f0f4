#!/bin/bash
# Boot-to-exit of `lockstep boot -- true`: the median of N runs (default 5),
# wall time and CPU time (user+sys of lockstep and QEMU, which a busy shared
# machine inflates far less than wall time), with the accelerator auto picked.
# Usage: scripts/bench-boot.sh [bin/lockstep] [runs] [extra boot flags…]
set -euo pipefail
bin=${1:-bin/lockstep}
runs=${2:-5}
shift $(( $# > 2 ? 2 : $# )) || true
"$bin" kernel path >/dev/null # build or verify the kernel outside the timing
"$bin" boot "$@" -- true 2>/dev/null # warm: accel verdict and initramfs base cached
TIMEFORMAT='%R %U %S'
walls=() cpus=()
for _ in $(seq "$runs"); do
	t=$( { time "$bin" boot "$@" -- true 2>/dev/null; } 2>&1 )
	read -r real user sys <<<"$t"
	walls+=("$(awk -v r="$real" 'BEGIN{printf "%d", r*1000}')")
	cpus+=("$(awk -v u="$user" -v s="$sys" 'BEGIN{printf "%d", (u+s)*1000}')")
done
median() { printf '%s\n' "$@" | sort -n | sed -n "$(( ($# + 1) / 2 ))p"; }
echo "lockstep boot $* -- true: wall ${walls[*]} ms, median $(median "${walls[@]}") ms;" \
	"cpu ${cpus[*]} ms, median $(median "${cpus[@]}") ms; load $(cut -d' ' -f1-3 /proc/loadavg)"
