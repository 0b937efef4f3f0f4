#!/usr/bin/env python3
"""Writes bases/README.md on stdout from what scripts/bases.sh made: the
records of every language's prune and observation (path_sets/<key>/), the
merged tree, and the times scripts/bases.sh measured (logs/times.tsv). The
section "Rows that changed" is written by hand (what changed in each base, and
why): --keep takes it over from the README being replaced."""
import argparse
import collections
import glob
import json
import os


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bases", required=True)
    ap.add_argument("--times", required=True)
    ap.add_argument("--pin", required=True)
    ap.add_argument("--lockstep", required=True)
    ap.add_argument("--keep", help="the README being replaced, whose \"%s\" section is kept" % CHANGES)
    a = ap.parse_args()
    times = {}
    with open(a.times) as f:
        for line in f:
            name, status, secs = line.rstrip("\n").split("\t")
            times[name] = int(secs)
    keys = sorted(os.listdir(os.path.join(a.bases, "path_sets")))
    rows, prov = [], {}
    for k in keys:
        rows += language_rows(a.bases, k, times, prov)
    phobos = "`BasePhobos.cfg`, `TailPhobos.cfg` and\n`debug/` are the rest of the orchestrator's tree (docs/orchestrate.md)."
    if not os.path.exists(os.path.join(a.bases, "BasePhobos.cfg")):
        phobos = ("`TailPhobos.cfg` and `debug/` are\nthe rest of the orchestrator's tree (docs/orchestrate.md); "
                  "it writes no `BasePhobos.cfg` for these bases: their union\nwould put an `[execute]` grant on a tree beside a write-class grant on it, which no language base\nhas (docs/orchestrate.md).")
    print(HEAD.format(pin=a.pin, lockstep=a.lockstep, keys=",".join(keys), phobos=phobos))
    print("| language | exercise | base | prune on the host: runs by stage | prune minutes | observe on "
          + a.pin + ": verdict, ABI-10 rows | observe minutes |")
    print("| --- | --- | --- | --- | --- | --- | --- |")
    for r in rows:
        print("| " + " | ".join(r) + " |")
    print()
    if a.keep:
        print(kept_changes(a.keep))
    print(PROVENANCE)
    print()
    for name, vals in sorted(prov.items()):
        print("- %s: %s" % (name, ", ".join(sorted(vals))))
    print(TAIL)


CHANGES = "## Rows that changed"
PROVENANCE = "Provenance (from the records):"


def kept_changes(readme):
    """The hand-written section CHANGES of readme, up to the generated provenance; empty if it
    has none."""
    try:
        with open(readme) as f:
            text = f.read()
    except FileNotFoundError:
        return ""
    start = text.find(CHANGES + "\n")
    if start < 0:
        return ""
    end = text.find(PROVENANCE, start)
    return text[start:end if end >= 0 else len(text)].rstrip() + "\n"


def language_rows(bases, key, times, prov):
    d = os.path.join(bases, "path_sets", key)
    if os.path.exists(os.path.join(d, "run.json")):
        with open(os.path.join(d, "run.json")) as f:
            run = json.load(f)
        prov.setdefault("observer kernel", set()).add("%s (bzImage SHA-256 %s), QEMU %s, %s, %d vCPUs, %d MiB" % (
            run["kernel_release"], run["bzimage_sha256"], run["qemu_version"], run["accel"], run["vcpus"], run["mem_mb"]))
    rows = []
    for rec in sorted(glob.glob(os.path.join(d, key + "_*.json"))):
        if rec.endswith(".abi10.json"):
            continue
        with open(rec) as f:
            r = json.load(f)
        p = r["provenance"]
        prov.setdefault("prune kernel", set()).add("%s (%s), Landlock ABI %d, %s" % (
            p["kernel"], p["architecture"], p["landlock_abi"], p["strace"]))
        prov.setdefault("root digest (the prune's and the observer's guest root: this machine's /)", set()).add(
            p.get("root_digest", "none"))
        prov.setdefault("dates of the prunes", set()).add(p["date"])
        stages = collections.Counter(e["stage"] for e in r["log"] if "status" in e)  # the runs
        runs = "%d: %s" % (sum(stages.values()), ", ".join("%s %d" % kv for kv in sorted(stages.items())))
        kvm_path = rec[:-len(".json")] + ".abi10.json"
        if os.path.exists(kvm_path):
            with open(kvm_path) as f:
                kvm = json.load(f)
            verdict = "verified" if kvm.get("verified") else "**not verified**: " + str(kvm.get("aborted", ""))
            if kvm.get("time_factor", 1) > 1:
                verdict += " (time limits ×%d under TCG)" % kvm["time_factor"]
            sidecar = "rows: " + (", ".join(kvm.get("rows") or []) or "none")
        else:
            verdict, sidecar = "**not observed**", "no ABI-10 record"
        rows.append([key, r["exercise"], "`BaseLanguage-%s.cfg`" % key, runs,
                     "%.1f" % (times.get("prune-" + key, 0) / 60), "%s; %s" % (verdict, sidecar),
                     "%.1f" % (times["observe-" + key] / 60) if times.get("observe-" + key) else "—"])
    return rows


HEAD = """# Shipped bases

`BaseLanguage-<key>.cfg` is the base of each language lockstep has a reference exercise for
(docs/exercises.md, "Languages"): the union of its exercises' pruned policies with the hierarchy
raised and no limits. `exercises/<key>_<exercise>.cfg` is what the base lacks for that exercise (its
limits); `Abi10-<key>.cfg` and `exercises/<key>_<exercise>.abi10.cfg`, where present, hold the rows
only Landlock ABI 10 enforces (a UDP bind), never part of a base. `path_sets/<key>/` keeps the
inputs the merge was made from: each exercise's pruned policy and its schema-2 record
(`<key>_<exercise>.cfg`, `.json`), the observer's ABI-10 record (`.abi10.json`, and the sidecar
`.abi10.cfg` when it found rows) and its run (`run.json`). {phobos}

Made with the commands of `make bases` (scripts/bases.sh; docs/prune.md, "Shipped bases"), lockstep `{lockstep}`,
for the keys {keys}:

```
# per key: the default prune on this machine's kernel, in a private mount namespace whose
# /var/tmp (the working directory /var/tmp/testing-dir) and canary directory are its own
LOCKSTEP_DISPOSABLE=1 lockstep prune --on-host --key <key> --exercises testdata/exercises --out out/bases/path_sets/<key>
# per key: the audit observer in a throwaway guest on the pinned kernel, the ABI-10 sidecar
lockstep observe --key <key> --exercises testdata/exercises --path-sets out/bases/path_sets/<key> --kernel {pin} --mem 2048 --timeout 2h
# all keys: the merge
lockstep orchestrate --langs {keys} --path-dir out/bases/merge-input --core-dir out/bases/core --json
```

Checked on every `make test` by `verify.TestShippedBases` (verify/bases_linux_test.go): each
language's reference exercise runs on the host kernel unsandboxed and again under
`lockstep run --config BaseLanguage-<key>.cfg --config exercises/<key>_<exercise>.cfg`, and both
must pass every test. A built language without a base here is listed in docs/exercises.md
("Languages") with the reason.
"""

TAIL = """
Minutes are wall time on this machine (2 cores shared with other work); the observer's guest runs
under TCG (KVM is unusable here), so its minutes are those of an emulated CPU, and its exercise
runs get the policy's timeout and cpu limits times the time factor the verdict names
(`lockstep observe --tcg-time-factor`, docs/observe.md, "Time limits under TCG"); its containment
checks take the policy's own limits.
"""

if __name__ == "__main__":
    main()
