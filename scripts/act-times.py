#!/usr/bin/env python3
"""Job and step times of an act run, as Markdown, from its --json log.

usage: scripts/act-times.py ACT_JSON_LOG

Each job's wall time runs from its first to its last log line; each
top-level step's time is act's executionTime (composite actions' inner
steps are left out: their action's line holds their sum).
"""
import json
import sys
from datetime import datetime


def main(path):
    jobs, steps = {}, []
    with open(path, encoding="utf-8") as f:
        for line in f:
            try:
                e = json.loads(line)
            except ValueError:
                continue
            job, when = e.get("job"), e.get("time")
            if not job or not when:
                continue
            t = datetime.fromisoformat(when.replace("Z", "+00:00"))
            first, last, result = jobs.get(job, (t, t, ""))
            jobs[job] = (min(first, t), max(last, t), e.get("jobResult", result))
            if "stepResult" in e and len(e.get("stepid") or e.get("stepID") or []) == 1 and e.get("stage") == "Main":
                steps.append((job, e.get("step", ""), e["stepResult"], e.get("executionTime", 0) / 1e9))
    print("\n### The simulation's jobs and steps (act, on this host)\n")
    print("| job | result | minutes |")
    print("| --- | --- | --- |")
    for job, (first, last, result) in jobs.items():
        print(f"| {job} | {result or 'unknown'} | {(last - first).total_seconds() / 60:.1f} |")
    print("\n| job | step | result | seconds |")
    print("| --- | --- | --- | --- |")
    for job, step, result, secs in steps:
        step = step.replace("|", "\\|")
        print(f"| {job} | {step} | {result} | {secs:.0f} |")


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    main(sys.argv[1])
