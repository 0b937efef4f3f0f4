#!/bin/sh
# capture-exercise.sh FAMILY/EXERCISE POLICY OUT: run a reference exercise
# of testdata/exercises the way lockstep's pruner runs one (a fresh copy in
# the working directory, `lockstep run --config POLICY -- /bin/bash -c …
# ./build_script.sh`, under the pruner's exact strace command) and write
# testdata/strace/OUT.strace. Run from the module root, e.g.
#   sh testdata/strace/capture/capture-exercise.sh generic/shell-reference \
#      testdata/strace/capture/policies/generic-pass.cfg generic-pass
# RUN_FLAGS adds flags to lockstep run (the pruner's own: --without mounts,pid,memfd).
set -eu
ex=testdata/exercises/$1
policy=$(realpath "$2")
out=$(pwd)/testdata/strace/$3.strace
C=/tmp/lockstep-capture
W=$C/testing-dir
rm -rf "$C"
mkdir -p "$C"
CGO_ENABLED=0 go build -o "$C/lockstep" ./cmd/lockstep
cp -a "$ex" "$W"
cd "$W"
status=0
# A clean PATH, as in a guest: no per-user shims.
PATH=/usr/bin:/bin strace -f -qq -y -s 4096 -e trace=%file,%network,%process,%desc,landlock_restrict_self,setsid,setpgid,ioctl \
  -o "$out" \
  "$C/lockstep" run ${RUN_FLAGS:-} --config "$policy" -- /bin/bash -c 'printf "%s\n" "$1" >&2; exec /bin/bash ./build_script.sh' \
  lockstep-prune "lockstep-prune: the command starts" </dev/null >"$C/log" 2>&1 || status=$?
cat "$C/log"
echo "status $status"
