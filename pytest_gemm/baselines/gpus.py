"""The records of several GPUs of one model in a baseline entry: GPUs of one model differ.

GPUs of one model run the same code a few percent apart (measured: docs/baselines.md, "GPUs of one
model"). So an entry keeps, besides its latest numbers, one record per GPU that
recorded it (``gpus``, keyed by :func:`~pytest_gemm.records.case_record.gpu_identity`), as long as
they were recorded alike; the gate compares a case with its own GPU's record, or with the range of
the others (:func:`pytest_gemm.judge.gate.references`).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ..records.case_record import GPU_RECORD_KEYS, figures_problem

__all__ = [
    "ENTRY_FIGURES",
    "GPU_FIGURES",
    "MAX_GPUS",
    "gpu_record",
    "gpus_problem",
    "same_recording",
    "with_other_gpus",
]

MAX_GPUS = 8  # GPU records kept per entry: the most recent ones
#: the timing figures of one GPU's record in an entry (checked by
#: :func:`~pytest_gemm.records.case_record.figures_problem`), and of an entry
GPU_FIGURES = tuple(key for key in GPU_RECORD_KEYS if key != "date")
ENTRY_FIGURES = (*GPU_FIGURES, "tflops", "samples")


def gpu_record(entry: Mapping[str, Any]) -> dict[str, Any]:
    """One GPU's record: the gated numbers of a fresh entry, and its date."""
    return {**{k: entry[k] for k in GPU_FIGURES}, "date": (entry.get("recorded") or {}).get("date")}


def gpus_problem(entry: Mapping[str, Any]) -> str | None:
    """What is wrong with an entry's ``gpus`` map (None: nothing, or no map)."""
    if "gpus" not in entry:
        return None
    gpus = entry["gpus"]
    if not isinstance(gpus, dict) or not all(isinstance(r, dict) for r in gpus.values()):
        return "'gpus' must be an object of per-GPU objects"
    for gpu, record in gpus.items():
        problem = figures_problem(record, GPU_FIGURES)
        if problem:
            return f"gpus[{gpu!r}]: {problem}"
    return None


def same_recording(a: Mapping[str, Any], b: Mapping[str, Any]) -> bool:
    """Whether two entries' numbers compare: the same kernel source, timer, pytest-gemm and cuBLAS."""
    ra, rb = a.get("recorded") or {}, b.get("recorded") or {}
    return a.get("source_sha256") == b.get("source_sha256") and all(
        ra.get(k) == rb.get(k) for k in ("timer", "pytest_gemm", "cublas")
    )


def with_other_gpus(entry: dict[str, Any], old: Mapping[str, Any]) -> dict[str, Any]:
    """``entry`` with the records of the other GPUs ``old`` holds, when they compare (the newest MAX_GPUS)."""
    mine = entry.get("gpus") or {}
    if not mine or not old.get("gpus") or not same_recording(entry, old):
        return entry
    others = sorted(
        ((gpu, rec) for gpu, rec in old["gpus"].items() if gpu not in mine),
        key=lambda item: str(item[1].get("date") or ""),
        reverse=True,
    )
    return {**entry, "gpus": {**dict(others[: MAX_GPUS - len(mine)]), **mine}}
