"""The plugin's side of the pictures: where the report goes, pytest-html's extras, writing it at the end.

Drawing lives in ``report/``; matplotlib is imported only when a picture is drawn, so a run that
asks for no report (and no pytest-html report) never pays for it.
"""

from __future__ import annotations

import base64
import os
import shlex
from collections.abc import Sequence
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import pytest

from ..records.case_record import CaseRecord
from ..records.outcome import Verification
from ..report.run_data import FailedCase, RunData
from .sharding import LEDGER
from .stash import SESSION

__all__ = ["failed_case", "html_extras", "report_folder", "run_data", "write"]

#: where the pictures go when pytest-html's --html is given without --gemm-report
BESIDE_HTML = "gemm-report"


def _html_path(config: pytest.Config) -> Path | None:
    """pytest-html's report file (--html), if given."""
    path = config.getoption("htmlpath", None)
    return config.invocation_params.dir / Path(os.path.expandvars(path)).expanduser() if path else None


def report_folder(config: pytest.Config, asked: Path | None) -> Path | None:
    """The report folder: --gemm-report's, else one beside pytest-html's report (None: no report)."""
    if asked is not None:
        return config.invocation_params.dir / asked
    html = _html_path(config)
    return None if html is None else html.parent / BESIDE_HTML


def failed_case(test: str, dtype: str, verification: Verification, diagnosis: Sequence[str]) -> FailedCase | None:
    """A failed verification with an error map, as the report keeps it (None: no map to draw).

    ``diagnosis``: the verdict's sentences on what is wrong (:attr:`~pytest_gemm.judge.case.CaseVerdict.diagnosis`).
    """
    v = verification
    if v.error_map is None:
        return None
    m, n, k = v.shape
    return FailedCase(test, dtype, f"{m}x{n}x{k}", v.alpha, v.beta, tuple(diagnosis), v.error_map)


def run_data(
    config: pytest.Config, gpu: dict[str, Any], records: list[CaseRecord], failures: list[FailedCase]
) -> RunData:
    """What the report of this run shows, and what ``pytest-gemm merge`` reads from it."""
    command = shlex.join(["pytest", *config.invocation_params.args])
    date = datetime.now(timezone.utc).isoformat(timespec="seconds")
    ledger = config.stash.get(LEDGER, None)
    saved = ledger.saved() if ledger is not None else {}
    gpus = dict(getattr(config.stash.get(SESSION, None), "gpus", None) or {})  # GPU model -> facts
    saved["gpus"] = gpus if len(gpus) > 1 else {}
    return RunData(gpu=gpu, records=list(records), failures=list(failures), date=date, command=command, **saved)


def _pytest_html_extras() -> Any:
    """pytest-html's ``extras`` module, or None when pytest-html is not installed."""
    try:
        from pytest_html import extras
    except ImportError:
        return None
    return extras


def _draws_heatmaps(config: pytest.Config) -> bool:
    """Whether :func:`html_extras` draws each failed case's heatmap into the report folder as the case ends."""
    return _html_path(config) is not None and _pytest_html_extras() is not None


def write(config: pytest.Config, folder: Path, data: RunData) -> tuple[str, bool]:
    """Write the report; the line to print, and whether it failed.

    The heatmaps that pytest-html's rows drew as their cases ended (in this process or in an xdist
    worker) are not drawn again.
    """
    drawn = [case.test for case in data.failures] if _draws_heatmaps(config) else []
    try:
        from ..report.folder import write_report

        report = write_report(data, folder, drawn=drawn)
    except ImportError as exc:
        return f"pytest-gemm report: cannot draw without matplotlib ({exc}); pip install matplotlib", True
    except OSError as exc:
        return f"pytest-gemm report: cannot write {folder}: {exc}", True
    pictures = len(report.charts) + len(report.heatmaps)
    return f"pytest-gemm report: {folder / 'index.html'} ({pictures} picture(s))", False


def html_extras(
    config: pytest.Config, folder: Path | None, gpu: str, case: FailedCase | None, record: CaseRecord | None
) -> list[dict[str, Any]]:
    """pytest-html extras for one case's row: its heatmap (embedded), or its dtype's chart; and the report page."""
    html = _html_path(config)
    if html is None or folder is None or (case is None and record is None):
        return []
    extras = _pytest_html_extras()
    if extras is None:
        return []
    from ..report.folder import chart_name, heatmap_name
    from ..report.heatmap import heatmap

    out = []
    if case is not None:
        path = heatmap(case, gpu, datetime.now(timezone.utc).date().isoformat(), folder / heatmap_name(case))
        out.append(extras.png(base64.b64encode(path.read_bytes()).decode("ascii"), name="error over C"))
    if record is not None and not config.getoption("self_contained_html", False):  # a link would warn there
        chart = os.path.relpath(folder / chart_name(record.dtype), html.parent)
        out.append(extras.image(chart, name=f"{record.dtype} throughput"))
    out.append(extras.url(os.path.relpath(folder / "index.html", html.parent), name="pytest-gemm report"))
    return out
