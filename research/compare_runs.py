"""Compare two runs of the same kernels: verdicts (JUnit XML) and kernel/cuBLAS ratios (benchmark JSON).

    python research/compare_runs.py REF.xml REF.json OTHER.xml [OTHER.json] [--only PREFIX]

Prints how many common cases have the same verdict (and lists any that differ), and for timed
cases present in both JSON files the distribution of |ratio change|. Used for the isolation
acceptance: the bundled kernels with and without broken fixtures in the same run.
"""

from __future__ import annotations

import argparse
import ast
import json
import sys
import xml.etree.ElementTree as ET

import numpy as np


def verdicts(path: str) -> dict[str, str]:
    """Each test case's outcome, keyed by JUnit's classname::name."""
    out = {}
    for case in ET.parse(path).getroot().iter("testcase"):
        kinds = {child.tag for child in case}
        verdict = "failed" if kinds & {"failure", "error"} else "skipped" if "skipped" in kinds else "passed"
        out[f"{case.get('classname')}::{case.get('name')}"] = verdict
    return out


#: the JUnit property that says where a case ran: in a test's result (gemm_result), or of its own (older runs)
_WORKER = ("gemm_result", "gemm_worker")


def worker_costs(path: str) -> str:
    """Where a run's GPU cases spent their time: in worker phases, and waiting beyond them (isolation)."""
    phases: dict[str, float] = {}
    wall = inside = 0.0
    pids, cases, longest = set(), 0, ("", 0.0, "")
    for prop in ET.parse(path).getroot().iter("property"):
        value = ast.literal_eval(prop.get("value", "{}")) if prop.get("name") in _WORKER else None  # a dict's repr
        note = value.get("worker") if prop.get("name") == "gemm_result" else value  # the worker, in the test's result
        if not note:
            continue
        cases += 1
        pids.add(note["pid"])
        wall += note.get("wall_s", 0.0)
        for phase, seconds in note["phase_s"].items():
            phases[phase] = phases.get(phase, 0.0) + seconds
            inside += seconds
            if seconds > longest[1]:
                longest = (phase, seconds, str(note["pid"]))
    shares = ", ".join(f"{p} {s:.1f} s" for p, s in sorted(phases.items()))
    return (
        f"{cases} GPU cases in {len(pids)} worker(s): waited {wall:.1f} s, of which {inside:.1f} s in worker phases "
        f"({shares}); outside them (starting workers, requests, outcomes): {wall - inside:.1f} s; "
        f"longest phase: {longest[0]} {longest[1]:.2f} s"
    )


def ratios(path: str) -> dict[str, float]:
    with open(path) as handle:
        data = json.load(handle)
    return {b["extra_info"]["gemm"]["test"]: b["extra_info"]["gemm"]["ratio"] for b in data["benchmarks"]}


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("ref_xml")
    parser.add_argument("ref_json")
    parser.add_argument("other_xml")
    parser.add_argument("other_json", nargs="?")
    parser.add_argument("--only", default="", help="compare only test names containing this")
    args = parser.parse_args()
    for path in (args.ref_xml, args.other_xml):
        print(f"{path}: {worker_costs(path)}")
    ref, other = verdicts(args.ref_xml), verdicts(args.other_xml)
    common = sorted(k for k in ref.keys() & other.keys() if args.only in k)
    differ = [k for k in common if ref[k] != other[k]]
    print(f"verdicts: {len(common)} common cases, {len(common) - len(differ)} identical, {len(differ)} differ")
    for key in differ:
        print(f"  {key}: {ref[key]} -> {other[key]}")
    if args.other_json:
        a, b = ratios(args.ref_json), ratios(args.other_json)
        keys = sorted(k for k in a.keys() & b.keys() if args.only in k)
        change = np.array([abs(b[k] / a[k] - 1) for k in keys])
        if keys:
            print(
                f"ratios: {len(keys)} timed in both; |change| median {100 * np.median(change):.2f}%, "
                f"p95 {100 * np.percentile(change, 95):.2f}%, max {100 * change.max():.2f}%; "
                f"within 1%: {int((change <= 0.01).sum())}, within 2%: {int((change <= 0.02).sum())}"
            )
            for k in sorted(keys, key=lambda k: -abs(b[k] / a[k] - 1))[:8]:
                print(f"  {100 * (b[k] / a[k] - 1):+.2f}%  {k}")
    return 1 if differ else 0


if __name__ == "__main__":
    sys.exit(main())
