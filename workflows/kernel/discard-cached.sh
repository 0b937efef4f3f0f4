#!/bin/bash
# Removes a restored kernel cache directory that failed `lockstep kernel
# verify`, so that `lockstep kernel build` (which refuses a cached kernel that
# fails verification, and never rebuilds over it) builds it afresh.
# usage: discard-cached.sh DIR, where DIR is <cache>/lockstep/kernels/<key>.
# Exit 2 on usage, 1 when DIR is not a kernel cache entry.
set -euo pipefail
if (($# != 1)); then
	echo "usage: discard-cached.sh <cache>/lockstep/kernels/<key>" >&2
	exit 2
fi
dir=$1
if [[ $(basename "$(dirname "$dir")") != kernels || ! $(basename "$dir") =~ ^[0-9a-f]{64}$ ]]; then
	echo "discard-cached.sh: $dir is not a kernel cache entry (<cache>/lockstep/kernels/<64 hex>)" >&2
	exit 1
fi
rm -rf -- "$dir"
echo "discard-cached.sh: removed $dir"
