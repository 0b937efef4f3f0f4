#!/bin/bash
# Boot-to-exit of `lockstep boot -- true`: the median of N runs (default 5),
# each timed from process start to exit, with the accelerator auto picked.
# Usage: scripts/bench-boot.sh [bin/lockstep] [runs] [extra boot flags…]
set -euo pipefail
bin=${1:-bin/lockstep}
runs=${2:-5}
shift $(( $# > 2 ? 2 : $# )) || true
"$bin" kernel path >/dev/null # build or verify the kernel outside the timing
"$bin" boot "$@" -- true      # warm: accel verdict cached, initramfs base cached
times=()
for _ in $(seq "$runs"); do
	start=$(date +%s%N)
	"$bin" boot "$@" -- true
	end=$(date +%s%N)
	times+=($(( (end - start) / 1000000 )))
done
sorted=($(printf '%s\n' "${times[@]}" | sort -n))
echo "lockstep boot -- true: runs ${times[*]} ms; median ${sorted[$(( runs / 2 ))]} ms"
