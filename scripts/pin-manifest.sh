#!/bin/bash
# Writes the manifest of a pinned read root (prune.json pinned_read_roots) on stdout: one
# "<sha256>  <path relative to the root>" line per regular file and per symbolic link that leads to
# one (hashed through the link), sorted bytewise; links to directories are not followed. This is
# pruner/readroot's format and what readroot.Make writes (TestScriptMatchesMake holds them together).
#
#   scripts/pin-manifest.sh /root/.m2/repository > pruner/prune/seeds/maven-repo.sha256
set -euo pipefail
root=${1:?usage: pin-manifest.sh <directory>}
[[ -d $root && ! -L $root ]] || { echo "pin-manifest: $root is not a directory" >&2; exit 1; }
cd "$root"
find . -xtype f -printf '%P\0' | LC_ALL=C sort -z | xargs -0 -r sha256sum --
