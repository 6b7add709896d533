"""Which GPU each worker gets: pure rules over the device list a worker reported.

A worker is pinned to one GPU by giving it ``CUDA_VISIBLE_DEVICES`` set to one entry of the list
the pytest process itself was given (its indices, UUIDs or MIG names, passed on verbatim), never to
a physical index: a run inside ``CUDA_VISIBLE_DEVICES=2,3`` uses GPUs 2 and 3 and nothing else.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Sequence
from dataclasses import dataclass

__all__ = ["DRIVER_DEVICE", "Gpu", "plan_gpus", "timing_model", "visible_entries", "xdist_index"]

DRIVER_DEVICE = "/dev/nvidiactl"  # the NVIDIA driver's control device: a host without it has no NVIDIA GPU to use


@dataclass(frozen=True)
class Gpu:
    """One GPU a worker is pinned to."""

    index: int  # its place among the GPUs this run uses (0, 1, ...)
    entry: str  # the CUDA_VISIBLE_DEVICES value that pins a worker to it
    model: str  # its name, as CUDA reports it ("NVIDIA H100 80GB HBM3")

    @property
    def label(self) -> str:
        return f"GPU {self.index} (CUDA_VISIBLE_DEVICES={self.entry})"


def visible_entries(outer: str | None, count: int) -> list[str]:
    """The entries that pin a worker to each of the ``count`` devices CUDA sees under ``outer``.

    ``outer`` is this process's ``CUDA_VISIBLE_DEVICES`` (None: unset, so every device, by index). CUDA
    stops at the first entry it cannot use, so the ``count`` devices it reports are the first entries.
    """
    if outer is None:
        return [str(i) for i in range(count)]
    entries = [e.strip() for e in outer.split(",") if e.strip()]
    return entries[:count]


def xdist_index(worker_id: str | None) -> int | None:
    """The number of a pytest-xdist worker ('gw3' -> 3); None outside xdist."""
    match = re.fullmatch(r"gw(\d+)", worker_id or "")
    return int(match[1]) if match else None


def plan_gpus(
    outer: str | None, models: Sequence[str], wanted: int | None, worker_id: str | None = None
) -> tuple[list[Gpu], str | None]:
    """The GPUs this process's workers are pinned to, and a note when fewer than asked are used.

    ``models`` are the names of the devices CUDA sees (in its order), ``wanted`` the ``--gemm-gpus`` count
    (None: all). Under pytest-xdist, each xdist worker takes one of them by its number, round robin, so that
    ``-n`` equal to the number of GPUs gives every GPU one xdist worker and one GPU worker.
    """
    entries = visible_entries(outer, len(models))
    gpus = [Gpu(i, entry, model) for i, (entry, model) in enumerate(zip(entries, models, strict=False))]
    note = None
    if wanted is not None and wanted < len(gpus):
        gpus = gpus[:wanted]
    elif wanted is not None and wanted > len(gpus):
        note = f"{wanted} GPUs asked for, {len(gpus)} visible: using {len(gpus)}"
    number = xdist_index(worker_id)
    if number is not None and gpus:
        gpus = [gpus[number % len(gpus)]]
    return gpus, note


def timing_model(test: str, models: Sequence[str]) -> str | None:
    """The GPU model a timed case runs on when the GPUs differ: the same for a test in every run on the same
    set of models, so that its baseline (one file per model) stays the one it is compared with. None when
    every GPU is the same model (any may time it)."""
    distinct = sorted(set(models))
    if len(distinct) < 2:
        return None
    digest = int.from_bytes(hashlib.sha256(test.encode()).digest()[:8], "big")
    return distinct[digest % len(distinct)]
