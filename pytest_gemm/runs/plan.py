"""How long a merged suite's tests took, and how many shards keep each shard under a target wall time."""

from __future__ import annotations

import math
from collections.abc import Sequence

from .data import RunData
from .merge import Run, describe_run

__all__ = ["plan_lines"]


def plan_lines(runs: Sequence[Run], data: RunData, target_s: float) -> list[str]:
    """How long the merged tests took, and how many shards keep each under ``target_s`` seconds, from the
    seconds pytest measured for each test and each run's wall time ([] when the runs carry no test times)."""
    times = {t: r.duration_s for t, r in data.tests.items() if r.kind != "collect"}
    if not any(times.values()):
        return []
    total, longest = sum(times.values()), max(times.values())
    gpu = [r for r in data.tests.values() if r.kind in ("case", "sanitize")]
    spent = sum(r.duration_s for r in gpu)
    each = f", {spent / len(gpu):.2f} s each on average" if gpu else ""
    worker = sum(r.worker_s for r in gpu)
    inside = f", GPU workers busy {worker:.1f} s on them" if worker else ""
    lines = [
        f"plan: {len(times)} tests took {total:.1f} s in tests ({spent:.1f} s in {len(gpu)} GPU tests{each}{inside}; "
        f"the longest test {longest:.1f} s)"
    ]
    outside = []
    for name, run in runs:
        tests = [r for r in run.tests.values() if r.kind != "collect"]
        in_tests = sum(r.duration_s for r in tests)
        wall = f", {run.wall_s:.1f} s from start to saved" if run.wall_s is not None else ""
        lines.append(f"  {name} ({describe_run(run)}): {in_tests:.1f} s in {len(tests)} tests{wall}")
        if run.wall_s is not None and tests:
            outside.append(max(0.0, run.wall_s - in_tests))
    fixed = max(outside, default=0.0)
    said = f"{fixed:.1f} s per shard outside tests (the most a run here spent)" if outside else "no time outside tests"
    if fixed + longest > target_s:
        lines.append(f"plan: no shard count keeps a shard under {target_s:g} s: {said} plus the longest test exceed it")
    else:
        count = max(1, math.ceil(total / (target_s - fixed)))
        lines.append(
            f"plan: for at most {target_s:g} s per shard: {count} shard(s) ({total:.1f} s of tests spread over "
            f"{target_s - fixed:.1f} s each, after {said}); shards by test id are only roughly equal: keep a margin"
        )
    return lines
