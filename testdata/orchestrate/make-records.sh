#!/bin/sh
# Writes the records of the orchestrator fixture so that every SHA-256 they
# name is the one of the raw bytes beside them. The .cfg files and the sidecar
# are written by hand in the shape phobos-kvm-run.md §6.9/§7.1 gives (the
# pruner and observer of lockstep had not produced a real set when this was
# written); the audit line in the ABI-10 record is the one captured in
# testdata/audit/phobos-linux-7.2.9.dmesg. Run from testdata/orchestrate:
#   sh make-records.sh
set -eu
cd fixture
h() { sha256sum "$1" | cut -d' ' -f1; }
prov() {
	printf '{"architecture": "x86_64", "date": "%s", "kernel": "%s", "landlock_abi": %s, "pruner": "lockstep layer pruner", "strace": "strace -- version 6.1", "uid": 0}' "$1" "$2" "$3"
}
for ex in java_one java_two python_basic; do
	key=${ex%%_*} name=${ex#*_}
	cat > "$ex.json" <<JSON
{
  "cfg_sha256": "$(h "$ex.cfg")",
  "exercise": "$name",
  "key": "$key",
  "log": [{"stage": "seed", "name": "$key", "rows": 1}],
  "policy": {},
  "provenance": $(prov 2026-11-20T10:00:00Z 6.12.0-28-amd64 7),
  "schema_version": 2,
  "stage": "all"
}
JSON
done
for ex in java_one java_two; do
	key=${ex%%_*} name=${ex#*_}
	side=null rows='[]'
	if [ -f "$ex.abi10.cfg" ]; then
		side="\"$(h "$ex.abi10.cfg")\""
		rows='[{"audit": ["audit: type=1423 audit(1791375760.016:59): domain=119fe767d blockers=net.bind_udp saddr=127.0.0.1 src=5000"], "rule": "allow 5000 udp"}]'
	fi
	cat > "$ex.abi10.json" <<JSON
{
  "abi10_cfg_sha256": $side,
  "audit_only": [],
  "cross_check": {"audit_only": [], "audit_records": 3, "mismatches": [], "strace_denials": 3, "unparsed": 0},
  "exercise": "$name",
  "kernel": "7.2.13",
  "key": "$key",
  "landlock_abi": 10,
  "mismatches": [],
  "provenance": $(prov 2026-11-21T08:00:00Z 7.2.13 10),
  "rows": $rows,
  "schema_version": 1,
  "verified": true,
  "verified_cfg_sha256": "$(h "$ex.cfg")"
}
JSON
done
