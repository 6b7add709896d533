"""The plugin's side of the pictures: where the report goes, each failed case's heatmap drawn as the case ends
(from its full-resolution error map, in the process that ran it, by a thread of its own while the GPU works on),
pytest-html's extras, the report at the end.

Drawing lives in ``report/``; matplotlib is imported only when a picture is drawn, so a run that asks for
no report (and no pytest-html report) never pays for it.
"""

from __future__ import annotations

import base64
import os
from collections.abc import Callable, Collection
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest

from ..options import label
from ..records.diagnosis import Diagnosis
from ..report.names import OutsideFolderError, inside
from ..report.outputs import claim_report_folder, report_folder_problem
from ..runs.data import RunData

__all__ = ["BESIDE_HTML", "Pictures"]

#: where the pictures go when pytest-html's --html is given without --gemm-report
BESIDE_HTML = "gemm-report"


def _pytest_html_extras() -> Any:
    """pytest-html's ``extras`` module, or None when pytest-html is not installed."""
    try:
        from pytest_html import extras
    except ImportError:
        return None
    return extras


class Pictures:
    """The run's report folder (``--gemm-report``, or one beside pytest-html's report), and what is drawn in it."""

    def __init__(self, config: pytest.Config, asked: Path | None) -> None:
        self.config = config
        path = config.getoption("htmlpath", None)
        self.html = config.invocation_params.dir / Path(os.path.expandvars(path)).expanduser() if path else None
        self.asked = asked is not None
        if asked is not None:
            self.folder: Path | None = config.invocation_params.dir / asked
        else:
            self.folder = None if self.html is None else self.html.parent / BESIDE_HTML
        self._drawing: ThreadPoolExecutor | None = None  # one thread: only it draws until the report at the end
        self._drawn: dict[str, Future[Path]] = {}
        self.claimed = False  # the folder was created and marked: tests ran, the report is written at the end

    def check(self, overwrite: bool, switch: str, shown: Callable[[Path], str]) -> str | None:
        """Check the report folder as the run starts, creating nothing (report/outputs.py); what is wrong, naming the
        option that chose the folder (None: nothing, or no report). ``shown``: how a path is shown."""
        if self.folder is None:
            return None
        return self._whose(report_folder_problem(self.folder, overwrite=overwrite, switch=switch, shown=shown))

    def claim(self, overwrite: bool, switch: str, shown: Callable[[Path], str]) -> str | None:
        """As tests are about to run: check the folder again, then create and mark it as pytest-gemm's; what is
        wrong, as :meth:`check` says it."""
        if self.folder is None:
            return None
        problem = claim_report_folder(self.folder, overwrite=overwrite, switch=switch, shown=shown)
        self.claimed = problem is None
        return self._whose(problem)

    def _whose(self, problem: str | None) -> str | None:
        """``problem`` of the report folder, naming the option that chose it."""
        given = label("report") if self.asked else f"the report folder beside pytest-html's --html ({BESIDE_HTML}/)"
        return f"{given}: {problem}" if problem else None

    def heatmap(self, test: str, diagnosis: Diagnosis, gpu: str) -> str | None:
        """Start drawing a failed case's full-resolution error map into the folder; its name there (None: none)."""
        if self.folder is None or diagnosis.error_map is None:
            return None
        from datetime import datetime, timezone

        from ..report.folder import heatmap_name
        from ..report.heatmap import heatmap

        name = heatmap_name(test)
        if self._drawing is None:
            self._drawing = ThreadPoolExecutor(1, thread_name_prefix="gemm-heatmap")
        day = datetime.now(timezone.utc).date().isoformat()
        folder = self.folder
        self._drawn[name] = self._drawing.submit(lambda: heatmap(test, diagnosis, gpu, day, inside(folder, name)))
        return name

    def drawn(self, name: str) -> bool:
        """Wait for a heatmap drawn as its case ended; whether it was (a failure is said when the report is written)."""
        future = self._drawn.get(name)
        return future is not None and future.exception() is None

    def _not_drawn(self) -> dict[str, BaseException]:
        """The heatmaps that could not be drawn as their cases ended (their names), and why."""
        return {name: exc for name, future in self._drawn.items() if (exc := future.exception()) is not None}

    def close(self) -> None:
        """Wait for the heatmaps still being drawn."""
        if self._drawing is not None:
            self._drawing.shutdown(wait=True)

    def html_extras(self, test: str, heatmap: str | None, dtype: str | None) -> list[dict[str, Any]]:
        """pytest-html extras for one case's row: its heatmap (embedded), or its dtype's chart; and the report page."""
        extras = _pytest_html_extras()
        if self.html is None or self.folder is None or extras is None or (heatmap is None and dtype is None):
            return []
        from ..report.folder import chart_name

        out = []
        drawn = self._inside(heatmap) if heatmap is not None and self.drawn(heatmap) else None
        if drawn is not None and drawn.is_file():
            data = base64.b64encode(drawn.read_bytes()).decode("ascii")
            out.append(extras.png(data, name="error over C"))
        chart = self._inside(chart_name(dtype)) if dtype is not None else None
        if chart is not None and not self.config.getoption("self_contained_html", False):  # a link would warn there
            out.append(extras.image(os.path.relpath(chart, self.html.parent), name=f"{dtype} throughput"))
        out.append(extras.url(os.path.relpath(self.folder / "index.html", self.html.parent), name="pytest-gemm report"))
        return out

    def _inside(self, name: str) -> Path | None:
        """Where the report's file ``name`` is (report/names.py), or None where it would be outside the folder."""
        assert self.folder is not None
        try:
            return inside(self.folder, name)
        except OutsideFolderError:
            return None

    def write(self, data: RunData, drawn: Collection[str]) -> list[tuple[str, bool]]:
        """Write the report (nothing when none is asked for); the lines to print, each with whether it says a
        failure. The heatmaps the run drew as its cases ended (``drawn``: their test ids) are not drawn again;
        one that could not be is said, and drawn from the run's pooled map. A run that ran no test (--collect-only)
        claimed no folder and writes none."""
        if self.folder is None or not self.claimed:
            return []
        self.close()
        lines = []
        failed = self._not_drawn()
        if failed:
            from ..report.folder import heatmap_name

            drawn = [test for test in drawn if heatmap_name(test) not in failed]
            name, exc = next(iter(failed.items()))
            why = f"first: {name}: {type(exc).__name__}: {exc}"
            said = f"{len(failed)} heatmap(s) could not be drawn as their cases ended ({why})"
            lines.append((f"pytest-gemm report: {said}; drawn again from the saved maps", True))
        try:
            from ..report.folder import write_report

            report = write_report(data, self.folder, drawn=drawn)
        except ImportError as exc:
            return [
                *lines,
                (f"pytest-gemm report: cannot draw without matplotlib ({exc}); pip install matplotlib", True),
            ]
        except OSError as exc:
            return [*lines, (f"pytest-gemm report: cannot write {self.folder}: {exc}", True)]
        pictures = len(report.charts) + len(report.heatmaps)
        return [*lines, (f"pytest-gemm report: {self.folder / 'index.html'} ({pictures} picture(s))", False)]
