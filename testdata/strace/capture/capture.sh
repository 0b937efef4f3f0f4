#!/bin/sh
# capture.sh NAME [OUT]: re-create the tree /tmp/llcap, then run testdata/strace/capture
# restricted to it under the exact strace command lockstep's pruner uses, and
# write testdata/strace/OUT.strace (OUT defaults to NAME). Run from the module root:
#   sh testdata/strace/capture/capture.sh basic
set -eu
name=${1:-basic}
out=testdata/strace/${2:-$name}.strace
W=/tmp/llcap
rm -rf "$W"
mkdir -p "$W/ro/sub" "$W/rd" "$W/rw" "$W/rw2" "$W/norefer" "$W/secret"
echo a > "$W/ro/a.txt"; echo c > "$W/ro/c.txt"; echo b > "$W/rd/b.txt"; echo s > "$W/secret/s.txt"
echo y > "$W/norefer/y.txt"
printf '#!/bin/sh\necho tool\n' > "$W/rd/tool.sh"; chmod 755 "$W/rd/tool.sh"
printf 'echo no\n' > "$W/ro/noexec.txt"; chmod 644 "$W/ro/noexec.txt"
cp testdata/strace/capture/$name.sh "$W/ro/$name.sh"
CGO_ENABLED=0 go build -o "$W/capture" ./testdata/strace/capture
cd "$W"
strace -f -qq -y -s 4096 -e trace=%file,%network,%process,%desc,landlock_restrict_self,setsid,setpgid,ioctl \
  -o "$OLDPWD/$out" \
  "$W/capture" -pre "$W/ro/noexec.txt; cat $W/secret/s.txt" \
  -ro /usr,/etc,/lib,/lib64,/bin,"$W/ro" -rd "$W/rd" -rw "$W/rw,$W/rw2" -norefer "$W/norefer" \
  -rwfile /dev/null,/dev/zero,/dev/tty -bind 40101 -connect 40101 \
  -- /bin/bash "$W/ro/$name.sh" </dev/null >"$W/out.log" 2>&1 || true
cat "$W/out.log"
