"""Where a run writes, checked as it starts, so that a path that cannot be written is a usage error (exit 4)
before any GPU work, not a failure after it: the baseline folder (never a file; writable when the run records
baselines), the summary file and ``$GITHUB_STEP_SUMMARY``, and the report folder, which is claimed (created and
marked as pytest-gemm's: its heatmaps are drawn while the run goes on) only as tests are about to run, so that
``--collect-only``, ``--help`` or ``--fixtures`` create nothing. The controlling process checks and claims;
xdist workers write none of these. Paths are shown relative to the rootdir (``specs.files.message_path``).
"""

from __future__ import annotations

from functools import partial

import pytest

from ..options import label
from ..report.outputs import folder_problem, summary_problems
from ..settings import Settings
from ..specs.files import message_path
from .pictures import Pictures

__all__ = ["check_outputs", "claim_report"]


def check_outputs(config: pytest.Config, settings: Settings, pictures: Pictures) -> None:
    """Raise a usage error naming each output path that cannot be written, and the option that gave it."""
    gate, problems, shown = settings.gate, [], partial(message_path, root=config.rootpath)
    # gating reads the folder (a read-only one is fine); recording writes there
    problem = folder_problem(gate.folder, write=gate.update, shown=shown)
    if problem:
        recording = f" ({label('update-baselines')} records there)" if "cannot create" in problem else ""
        problems.append(f"{label('baselines')}: {problem}{recording}")
    if gate.summary is not None:
        problems += summary_problems(gate.summary, label("summary"))
    problem = pictures.check(settings.overwrite_report, label("overwrite-report"), shown)
    if problem:
        problems.append(problem)
    if problems:
        raise pytest.UsageError("\n".join(problems))


def claim_report(config: pytest.Config, settings: Settings, pictures: Pictures) -> None:
    """As tests are about to run: create the report folder and mark it as pytest-gemm's (checked again first); one
    that cannot be claimed now (changed since the start) ends the run as a usage error, before any test."""
    shown = partial(message_path, root=config.rootpath)
    problem = pictures.claim(settings.overwrite_report, label("overwrite-report"), shown)
    if problem:
        pytest.exit(problem, returncode=pytest.ExitCode.USAGE_ERROR)
