"""Where a run writes, checked as it starts, so that a path that cannot be written is a usage error (exit 4)
before any GPU work, not a failure after it: the baseline folder (never a file; writable when the run records
baselines), the summary file and ``$GITHUB_STEP_SUMMARY``, and the report folder, which is claimed now (created
and marked as pytest-gemm's: its heatmaps are drawn while the run goes on). The controlling process checks;
xdist workers write none of these.
"""

from __future__ import annotations

import pytest

from ..options import Settings, label
from ..report.outputs import folder_problem, summary_problems
from ..specs.files import shown_path
from .pictures import Pictures

__all__ = ["check_outputs"]


def check_outputs(config: pytest.Config, settings: Settings, pictures: Pictures) -> None:
    """Raise a usage error naming each output path that cannot be written, and the option that gave it."""
    gate, problems = settings.gate, []
    # gating reads the folder (a read-only one is fine); recording writes there
    root = config.rootpath  # paths shown relative to it (not to '/', which an absolute option value can make it)
    shown = str if len(root.parts) < 2 else lambda path: shown_path(path, root)
    problem = folder_problem(gate.folder, write=gate.update, shown=shown)
    if problem:
        recording = f" ({label('update-baselines')} records there)" if "cannot create" in problem else ""
        problems.append(f"{label('baselines')}: {problem}{recording}")
    if gate.summary is not None:
        problems += summary_problems(gate.summary, label("summary"))
    problem = pictures.claim(settings.overwrite_report, label("overwrite-report"))
    if problem:
        problems.append(problem)
    if problems:
        raise pytest.UsageError("\n".join(problems))
