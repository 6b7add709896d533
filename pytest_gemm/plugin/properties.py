"""The user properties pytest-gemm puts on test reports: two records, each in its codec, which travel from xdist
workers to the reporting process as plain data.

* :data:`FACTS`: every case item the run selected, its :class:`~pytest_gemm.records.result.CaseFacts` (set after
  selection, where collection runs);
* :data:`RESULT`: every test pytest-gemm ran, its :class:`~pytest_gemm.records.result.ItemResult` (the judged
  result, and where and how it ran).

Each is encoded once, where it is made, and decoded once, in the reporting process when that is another (an xdist
controller); the process that ran a test keeps its result as made (:func:`taken`). JUnit XML writes a test's
properties as its teardown report holds them: once the call report is made, the item keeps the result's slim form
(:meth:`~pytest_gemm.records.result.ItemResult.slim`: no diagnosis, no GPU facts), so that the XML stays small
whatever the matrices' size.
"""

from __future__ import annotations

from typing import Any

import pytest

from ..records.result import CaseFacts, ItemResult

__all__ = ["FACTS", "RESULT", "add_result", "facts_of", "result_of", "taken"]

FACTS = "gemm_case"
RESULT = "gemm_result"
_MADE = pytest.StashKey[ItemResult]()  # a test's result as the process that ran it made it, until its report is made


def add_result(item: pytest.Item, result: ItemResult) -> None:
    """Give a test's result to its report (one user property, which crosses from xdist workers)."""
    item.stash[_MADE] = result
    item.user_properties.append((RESULT, result.to_dict()))


def taken(item: pytest.Item) -> ItemResult | None:
    """The result :func:`add_result` gave the test as its call ran, once (None: none): the call report's, unencoded."""
    made = item.stash.get(_MADE, None)
    if made is not None:
        del item.stash[_MADE]
    return made


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
