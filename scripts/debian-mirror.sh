#!/bin/bash
# Prints the Debian archive a debootstrap on this machine uses: the first
# line of `lockstep kernel mirror` ($LOCKSTEP_DEBIAN_MIRROR, else the first
# Debian archive URI of this machine's apt sources, as `lockstep kernel
# build` reads them; docs/kernels.md). No archive's host name is written
# anywhere: it comes from the machine. bin/lockstep is built when missing.
#
# usage: scripts/debian-mirror.sh
# Exit 1, naming LOCKSTEP_DEBIAN_MIRROR, when there is none.
set -euo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
bin=$repo/bin/lockstep
if [[ ! -x $bin ]]; then
	make -C "$repo" --no-print-directory build >&2
fi
"$bin" kernel mirror | head -n 1
