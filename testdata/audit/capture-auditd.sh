#!/bin/bash
# capture-auditd.sh <lockstep binary> <out dir>
#
# Captures the auditd form: runs Debian's auditd 3.0.9 (fetched with
# `apt-get download`, unpacked into a temporary directory, never installed)
# as the audit daemon with its default ENRICHED log format, runs every proof
# refusal and capture scenario under it (`lockstep selftest --in-guest
# --scenarios`), and keeps its log as <out>/auditd.log beside cases.txt.
# Needs root and no other registered audit daemon; audit is left as found
# (disabled when it was). With AUDITD_ROOT set to an unpacked auditd (the
# packages' files), nothing is downloaded: how it runs in a guest, e.g.
#   lockstep boot --share /tmp/auditd-root:/run/auditd --share testdata/audit:/run/cap \
#     -- env AUDITD_ROOT=/run/auditd bash /run/cap/capture-auditd.sh \
#        /run/lockstep/lockstep /run/lockstep/results/auditd
set -euo pipefail
bin=$(realpath "$1")
out=$2
mkdir -p "$out"
work=$(mktemp -d)
pid=
cleanup() {
	[[ -n $pid ]] && kill -TERM "$pid" 2>/dev/null && wait "$pid" || true
	rm -rf "$work"
}
trap cleanup EXIT
if [[ -n ${AUDITD_ROOT:-} ]]; then
	# Already unpacked (a guest has no network): AUDITD_ROOT holds sbin/ and lib/.
	ln -s "$AUDITD_ROOT" "$work/root"
else
	(cd "$work" && apt-get download -qq auditd libauparse0 libwrap0 2>/dev/null)
	for d in "$work"/*.deb; do dpkg-deb -x "$d" "$work/root"; done
fi
mkdir -p "$work/log" "$work/conf" "$work/plugins"
cat >"$work/conf/auditd.conf" <<EOF
local_events = yes
write_logs = yes
log_file = $work/log/audit.log
log_format = ENRICHED
flush = INCREMENTAL_ASYNC
freq = 1
max_log_file = 64
num_logs = 1
max_log_file_action = IGNORE
space_left = 2
space_left_action = IGNORE
admin_space_left = 1
admin_space_left_action = IGNORE
disk_full_action = IGNORE
disk_error_action = IGNORE
name_format = NONE
plugin_dir = $work/plugins
q_depth = 2000
EOF
export LD_LIBRARY_PATH=$work/root/lib/x86_64-linux-gnu:$work/root/usr/lib/x86_64-linux-gnu
auditctl=$work/root/sbin/auditctl
was_enabled=$("$auditctl" -s | awk '$1 == "enabled" {print $2}')
was_backlog=$("$auditctl" -s | awk '$1 == "backlog_limit" {print $2}')
"$auditctl" -b 8192 -r 0 >/dev/null
"$work/root/sbin/auditd" -n -c "$work/conf" -s enable &
pid=$!
for _ in $(seq 50); do
	[[ -s $work/log/audit.log ]] && break
	sleep 0.1
done
"$bin" selftest --in-guest --scenarios "$out"
kill -TERM "$pid"
wait "$pid" || true
pid=
"$auditctl" -e "$was_enabled" -b "$was_backlog" >/dev/null
cp "$work/log/audit.log" "$out/auditd.log"
