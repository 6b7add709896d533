"""Where the session lives: one key in ``config.stash``, and what items and hooks may reach of it (:class:`Host`)."""

from __future__ import annotations

from typing import Any, Protocol

import pytest

from ..isolation.dispatch import GpuWorkers
from ..settings import Settings
from .compile_ahead import CompileAhead
from .facts import RunFacts
from .selection import Selection

__all__ = ["SESSION", "CaseRuns", "Host"]


class CaseRuns(Protocol):
    """What items reach of the case runner (plugin/runner.py's CaseRunner)."""

    @property
    def workers(self) -> GpuWorkers: ...

    def run(self, item: Any, benchmark: Any) -> None: ...


class Host(Protocol):
    """What items reach of the run's session (plugin/session.py's GemmSession)."""

    settings: Settings
    facts: RunFacts
    selection: Selection
    compile_ahead: CompileAhead
    runner: CaseRuns


#: the run's session
SESSION = pytest.StashKey[Host]()
