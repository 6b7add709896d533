"""How long a one-GPU run's GPU cases would keep N GPUs busy, dispatched as the plugin does, from the run's own case
times: the cases of the next K items a GPU queued ahead (``AHEAD_PER_GPU``), each GPU taking the oldest (the item
pytest waits for first). A simulation, not a measurement: it leaves out what does not shrink with more GPUs (pytest's
start, the first worker's start, the end of the run) and what each GPU pays once (its worker's start, the first FP8
case's torch import), which the one-GPU run paid once.

    python research/dispatch_sim.py RUN.xml [GPUS ...]

RUN.xml is a one-GPU run's JUnit XML (``-o junit_family=legacy``); each GPU case's seconds are its worker's
``wall_s`` in the ``gemm_result`` property (docs/lab.md).
"""

from __future__ import annotations

import ast
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

from pytest_gemm.plugin.ahead import AHEAD_PER_GPU


def case_seconds(path: Path) -> list[float | None]:
    """Each item's GPU case's seconds, in the run's order (None: an item with no GPU case)."""
    seconds: list[float | None] = []
    for case in ET.parse(path).getroot().iter("testcase"):
        wall = None
        for prop in case.iter("property"):
            if prop.get("name") == "gemm_result":
                wall = (ast.literal_eval(prop.get("value") or "{}").get("worker") or {}).get("wall_s")
        seconds.append(wall)
    return seconds


def simulate(seconds: list[float | None], gpus: int, ahead: int) -> float:
    """When the last case ends: as each item starts, the cases of the next ``ahead x gpus`` items are queued, and a
    GPU takes the oldest queued case as soon as it is free (pytest's own time a test is taken as nothing)."""
    free = [0.0] * gpus  # when each GPU is next free
    ends: dict[int, float] = {}
    now, queued = 0.0, 0  # pytest's clock; items queued so far
    for i, own in enumerate(seconds):
        while queued < min(len(seconds), i + ahead * gpus):
            took = seconds[queued]
            if took is not None:
                gpu = min(range(gpus), key=free.__getitem__)
                free[gpu] = max(free[gpu], now) + took
                ends[queued] = free[gpu]
            queued += 1
        if own is not None:
            now = max(now, ends[i])
    return max([now, *ends.values()])


def main(path: str, counts: list[int]) -> None:
    seconds = case_seconds(Path(path))
    cases = [s for s in seconds if s is not None]
    print(f"{path}: {len(seconds)} items, {len(cases)} GPU cases, {sum(cases):.1f} s of worker time")
    print("\t".join(["GPUs", *(f"ahead {k} a GPU" for k in (2, 4, AHEAD_PER_GPU, 16))]))
    for gpus in counts:
        times = [simulate(seconds, gpus, k) for k in (2, 4, AHEAD_PER_GPU, 16)]
        print("\t".join([str(gpus), *(f"{t:.1f} s" for t in times)]))


if __name__ == "__main__":
    main(sys.argv[1], [int(n) for n in sys.argv[2:]] or [1, 2, 4])
