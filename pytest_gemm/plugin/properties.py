"""The user properties pytest-gemm puts on test reports: two records, each in its codec, which travel from xdist
workers to the reporting process as plain data.

* :data:`FACTS`: every case item the run selected, its :class:`~pytest_gemm.records.result.CaseFacts` (set after
  selection, where collection runs);
* :data:`RESULT`: every test pytest-gemm ran, its :class:`~pytest_gemm.records.result.ItemResult` (the judged
  result, and where and how it ran).

JUnit XML writes a test's properties as its teardown report holds them: once the call report is made, the item
keeps the result's slim form (:meth:`~pytest_gemm.records.result.ItemResult.slim`: no diagnosis, no GPU facts), so
that the XML stays small whatever the matrices' size.
"""

from __future__ import annotations

from typing import Any

import pytest

from ..records.result import CaseFacts, ItemResult

__all__ = ["FACTS", "RESULT", "facts_of", "result_of"]

FACTS = "gemm_case"
RESULT = "gemm_result"


def _values(report: pytest.TestReport, key: str) -> list[Any]:
    return [value for name, value in report.user_properties if name == key]


def result_of(report: pytest.TestReport) -> ItemResult | None:
    """The test's result, as the process that ran it made it (None: pytest-gemm ran nothing, or not in this phase)."""
    found = _values(report, RESULT)
    return ItemResult.from_dict(found[-1]) if found else None


def facts_of(report: pytest.TestReport) -> CaseFacts | None:
    """A case's facts as the run selected it (None: not a case)."""
    found = _values(report, FACTS)
    return CaseFacts.from_dict(found[-1]) if found else None
