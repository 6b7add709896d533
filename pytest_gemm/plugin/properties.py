"""The user properties pytest-gemm puts on test reports (they travel from xdist workers as plain data).

JUnit XML writes a test's properties as its teardown report holds them: what only carries data from the
process that ran a case to the one that reports (``TRANSIENT``) leaves the item once its call report is made,
so that the XML stays small whatever the matrices' size.
"""

from __future__ import annotations

from typing import Any

import pytest

__all__ = [
    "CASE",
    "COMPILE",
    "DECLARED",
    "DIAGNOSIS",
    "GPU",
    "HEATMAP",
    "MARGIN",
    "NO_DEVICE",
    "RECORD",
    "SOURCE",
    "TRANSIENT",
    "WHOLE_FILE",
    "WORKER",
    "props",
]

CASE = "gemm_case"  # every case item: which file, kernel and case it is
WHOLE_FILE = "gemm_file_whole"  # every case item: whether its whole kernel file is selected (by -k, -m, ids)
SOURCE = "gemm_source"  # every case item run: its kernel file and that file's SHA-256 as collected (for saved runs)
DECLARED = "gemm_declared"  # a case item whose kernel's header declares what changes its checks: those lines
NO_DEVICE = "gemm_no_device"  # a case skipped because there is no CUDA device: the reason
RECORD = "gemm_timing"  # a timed case: its CaseRecord, as a dict
GPU = "gemm_gpu"  # a case run on a GPU: the worker's device facts
#: a case run in a worker: its process id, why it was replaced after the case, what it compiled, the seconds
#: of each phase in the worker, and the wall time the pytest process waited for it (the difference is the
#: cost of isolation: starting workers, passing requests and outcomes)
WORKER = "gemm_worker"
MARGIN = "gemm_margin"  # a verified case: how far inside the verification bounds its output was
UNTIMED = "gemm_untimed"  # a verified case that timing was asked for and cuBLAS cannot time: why
COMPILE = "gemm_compile"  # a compile item: its CompileRecord, as a dict
DIAGNOSIS = "gemm_diagnosis"  # a failed case: its Diagnosis (error map pooled), as a dict
HEATMAP = "gemm_heatmap"  # a failed case whose heatmap was drawn as it ended: the picture, in the report folder
#: what reaches the controlling process with the call report and is then taken off the item (not in JUnit XML)
TRANSIENT = (DIAGNOSIS, GPU)


def props(report: pytest.TestReport, key: str) -> list[Any]:
    """The values of one user property on a report."""
    return [value for name, value in report.user_properties if name == key]
