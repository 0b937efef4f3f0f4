#!/bin/bash
# Prints the path of act (github.com/nektos/act) at the version the
# simulations pin, building it from the Go module proxy into
# ~/.cache/lockstep/tools on first use (scripts/prune-kvm-sim.sh,
# scripts/consumer-sim.sh).
set -euo pipefail
ACT_VERSION=v0.2.89
tools=${XDG_CACHE_HOME:-$HOME/.cache}/lockstep/tools
act=$tools/act-$ACT_VERSION
if [[ ! -x $act ]]; then
	echo "act-bin: building act $ACT_VERSION into $tools" >&2
	mkdir -p "$tools"
	tmp=$(mktemp -d)
	GOBIN=$tmp CGO_ENABLED=0 go install "github.com/nektos/act@$ACT_VERSION" >&2
	mv "$tmp/act" "$act" && rmdir "$tmp"
fi
echo "$act"
