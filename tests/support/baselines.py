"""A timed record of the H100 recording, slowed down or sped up, and its baseline entry: what the gate compares."""

from __future__ import annotations

import dataclasses

from pytest_gemm.baselines.store import entry_from_record
from pytest_gemm.records.case_record import CaseRecord

from support import recorded_record

H100 = "NVIDIA H100 80GB HBM3"
#: what a baseline entry says it was recorded with
RECORDED_INFO = {
    "pytest_gemm": "0.2.0",
    "cupy": "14.2.0",
    "cublas": "13.1.0",
    "driver": "580.159.04",
    "date": "2026-11-22",
}


def scaled(values: tuple[float, float], scale: float) -> tuple[float, float]:
    """An interval's two ends times ``scale``."""
    return (values[0] * scale, values[1] * scale)


def timed_record(scale: float = 1.0, **extra) -> CaseRecord:
    """The recorded naive 4096^3 case with its kernel times (so its ratio and interval) scaled."""
    row = recorded_record("01_naive.cu::sgemm_naive[fp32-4096x4096x4096]")
    row = dataclasses.replace(
        row,
        ratio=row.ratio * scale,
        median_s=row.median_s * scale,
        ratio_ci=scaled(row.ratio_ci, scale),
        ci_s=scaled(row.ci_s, scale),
        source_sha256="abc",
    )
    return dataclasses.replace(row, **extra)


def baseline_entry(**extra) -> dict:
    """The baseline entry of :func:`timed_record` (``scale`` and the fields in ``extra``)."""
    return entry_from_record(timed_record(**extra), RECORDED_INFO)
