#!/bin/bash
# Prints the Debian archive a debootstrap on this machine uses:
# $LOCKSTEP_DEBIAN_MIRROR, else the first URI of a deb822 stanza of this
# machine's apt sources (/etc/apt/sources.list.d/*.sources) that is signed by
# the Debian archive keyring and is not a security suite, as
# `lockstep kernel build` reads them (docs/kernels.md). No archive's host
# name is written anywhere: it comes from the machine.
#
# usage: scripts/debian-mirror.sh
# Exit 1, naming LOCKSTEP_DEBIAN_MIRROR, when there is none.
set -euo pipefail
mirror=${LOCKSTEP_DEBIAN_MIRROR:-}
if [[ -z $mirror ]]; then
	mirror=$(cat /etc/apt/sources.list.d/*.sources 2>/dev/null | awk '
		/^$/ { if (uri != "" && signed) { print uri; exit } uri = ""; signed = 0; next }
		/^URIs:/ { uri = $2 }
		/^Signed-By:.*debian-archive/ { signed = 1 }
		/^Suites:.*security/ { uri = "" }
		END { if (uri != "" && signed) print uri }' | head -n 1)
fi
if [[ -z $mirror ]]; then
	echo "debian-mirror: no Debian archive in /etc/apt/sources.list.d: set LOCKSTEP_DEBIAN_MIRROR to a Debian archive URI" >&2
	exit 1
fi
echo "$mirror"
