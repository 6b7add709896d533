"""What ``--gemm-dtypes`` and ``--gemm-shapes`` left of each kernel's GPU cases.

A kernel whose declared dtypes are all filtered away has no GPU case, and one whose ``requires`` rules skip every
shape has none to run: said after collection and at the end of the run (under pytest-xdist, from the workers, at
the end), so that a green run that checked nothing says so; under ``--gemm-require-gpu`` a run left with no GPU
case at all is a usage error (exit 4).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import pytest

from ..options import Settings, label
from ..records.dtypes import DTYPES
from ..specs.cases import Case
from ..specs.spec import KernelSpec

__all__ = ["Selection"]

#: kernels named in a line; more are counted ("and 3 more")
NAMED = 4
#: the key under which an xdist worker passes its lines to the controlling process
WORKER_KEY = "gemm_selection"


@dataclass(frozen=True)
class _Kernel:
    name: str
    dtypes: tuple[str, ...]  # as declared
    cases: int  # after the dtype selection
    runnable: int  # of those, not skipped by a rule
    rule: str | None  # the first rule that skipped one of its cases


def _names(kernels: list[_Kernel], total: int) -> str:
    if len(kernels) == total > 1:
        return f"the {total} kernels"
    shown = ", ".join(k.name for k in kernels[:NAMED])
    return shown + (f" and {len(kernels) - NAMED} more" if len(kernels) > NAMED else "")


@dataclass
class Selection:
    """The kernels collected, with what the selection left of each; ``lines`` says what it took away."""

    settings: Settings
    kernels: dict[tuple[str, str], _Kernel] = field(default_factory=dict)
    lines: list[str] = field(default_factory=list)
    error: str | None = None  # the usage error under --gemm-require-gpu, when no GPU case is left

    def add(self, expanded: list[tuple[KernelSpec, list[Case]]]) -> None:
        """One kernel file's kernels and the cases expanded from each."""
        for spec, cases in expanded:
            rule = next((c.skip_reason.rsplit(" (", 1)[0] for c in cases if c.skip_reason), None)
            runnable = sum(c.skip_reason is None for c in cases)
            self.kernels[spec.path, spec.name] = _Kernel(spec.name, tuple(spec.dtypes), len(cases), runnable, rule)

    def what_is_left(self) -> str | None:
        """A line when a kernel is left with no GPU case to run (None when each has one, or none was collected)."""
        kernels = list(self.kernels.values())
        total = len(kernels)
        undeclared = [k for k in kernels if k.cases == 0]
        ruled = [k for k in kernels if k.cases and not k.runnable]
        lost = len(undeclared) + len(ruled)
        if not lost:
            return None
        parts = []
        if undeclared:
            declared = {d for k in undeclared for d in k.dtypes}
            shown = ", ".join(d for d in DTYPES if d in declared)
            verb = "declares" if len(undeclared) == 1 else "declare"
            selected = ", ".join(self.settings.dtypes or ())
            parts.append(f"{label('dtypes')} selects {selected}, and {_names(undeclared, total)} {verb} {shown}")
        if ruled:
            shapes = len(self.settings.shapes)
            said = "the shape" if shapes == 1 else f"each of the {shapes} shapes"
            first = f"{ruled[0].name}: {ruled[0].rule}"
            parts.append(f"{said} of {label('shapes')} breaks a rule of {_names(ruled, total)} ({first})")
        head = "no GPU case to run" if lost == total else f"{lost} of {total} kernels have no GPU case"
        return f"pytest-gemm: {head}: {'; '.join(parts)}"

    def finish(self, config: pytest.Config, items: list[pytest.Item]) -> list[str]:
        """After collection: the lines to say. Under --gemm-require-gpu, no kernel with a GPU case to run is a usage
        error; an xdist worker, which cannot raise one, runs nothing and passes it on with its lines."""
        line = self.what_is_left()
        self.lines = [line] if line else []
        runnable = sum(k.runnable for k in self.kernels.values())
        if line and not runnable and self.settings.require_gpu:
            self.error = f"{label('require-gpu')}: {line.removeprefix('pytest-gemm: ')}"
            if not hasattr(config, "workeroutput"):
                raise pytest.UsageError(self.error)
            config.hook.pytest_deselected(items=list(items))
            items.clear()
        if hasattr(config, "workeroutput"):
            config.workeroutput[WORKER_KEY] = {"lines": self.lines, "error": self.error}
        return self.lines

    def heard(self, workeroutput: dict[str, Any]) -> list[tuple[str, bool]]:
        """What an xdist worker passed on that this process has not said yet (each worker collects alike), as
        (line, red) pairs; its usage error becomes this run's (:attr:`error`)."""
        said = workeroutput.get(WORKER_KEY) or {}
        new = [line for line in said.get("lines", ()) if line not in self.lines]
        self.lines += new
        if said.get("error") and self.error is None:
            self.error = said["error"]
            return [(self.error, True)]  # it says what the line would
        return [(line, False) for line in new if self.error is None]
