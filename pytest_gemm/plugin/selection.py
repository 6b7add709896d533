"""What ``--gemm-dtypes`` and ``--gemm-shapes`` left of each kernel's GPU cases.

A kernel whose declared dtypes are all filtered away has no GPU case, and one whose ``requires`` rules skip every
shape, or whose every shape is past its int arguments, has none to run: said after collection and at the end of the
run (under ``--co`` and pytest-xdist at the end only), so that a green run that checked nothing says so; under
``--gemm-require-gpu`` a run left with no GPU case at all is a usage error (exit 4).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import pytest

from ..options import label
from ..records.dtypes import DTYPES
from ..records.result import CaseFacts
from ..report.failure import kernel_declarations
from ..settings import Settings
from ..specs.cases import Case
from ..specs.footprint import int_args_problem
from ..specs.spec import KernelSpec
from .passed_on import heard, pass_on

__all__ = ["Selection", "case_facts"]

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
    rule: str | None  # the first ``requires`` rule that skipped one of its cases, with the values it saw
    past: str | None  # the first shape past its int arguments, why (with the limit)


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
            past = {  # expand's first check
                (c.variant, c.shape): int_args_problem(spec, c.shape, spec.storage_for(c.variant))
                for c in cases
                if c.skip_reason
            }
            rule = next(
                (c.skip_reason.rsplit(" (", 1)[0] for c in cases if c.skip_reason and not past[c.variant, c.shape]),
                None,
            )
            too_large = next((reason for reason in past.values() if reason), None)
            runnable = sum(c.skip_reason is None for c in cases)
            self.kernels[spec.path, spec.name] = _Kernel(
                spec.name, tuple(spec.dtypes), len(cases), runnable, rule, too_large
            )

    def what_is_left(self) -> str | None:
        """A line when a kernel is left with no GPU case to run (None when each has one, or none was collected)."""
        kernels = list(self.kernels.values())
        total = len(kernels)
        undeclared = [k for k in kernels if k.cases == 0]
        ruled = [k for k in kernels if k.cases and not k.runnable and k.rule]
        too_large = [k for k in kernels if k.cases and not k.runnable and not k.rule]
        lost = len(undeclared) + len(ruled) + len(too_large)
        if not lost:
            return None
        parts = []
        if undeclared:
            declared = {d for k in undeclared for d in k.dtypes}
            shown = ", ".join(d for d in DTYPES if d in declared)
            verb = "declares" if len(undeclared) == 1 else "declare"
            selected = ", ".join(self.settings.dtypes or ())
            parts.append(f"{label('dtypes')} selects {selected}, and {_names(undeclared, total)} {verb} {shown}")
        shapes = len(self.settings.shapes)
        said = f"the shape of {label('shapes')}" if shapes == 1 else f"each of the {shapes} shapes of {label('shapes')}"
        if ruled:
            first = f"{ruled[0].name}: {ruled[0].rule}"
            parts.append(f"{said} breaks a rule of {_names(ruled, total)} ({first})")
        if too_large:  # no rule of the kernel's: the harness's int arguments (with the limit)
            names, first = _names(too_large, total), too_large[0]
            alike = len({k.past for k in too_large}) == 1
            parts.append(
                f"{said} is too large for {names}" + (f": {first.past}" if alike else f" ({first.name}: {first.past})")
            )
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
        pass_on(config, WORKER_KEY, self.lines, error=self.error)
        return self.lines

    def heard(self, workeroutput: dict[str, Any]) -> list[tuple[str, bool]]:
        """What an xdist worker passed on that this process has not said yet (each worker collects alike), as
        (line, red) pairs; its usage error becomes this run's (:attr:`error`)."""
        new, said = heard(workeroutput, WORKER_KEY, self.lines)
        if said.get("error") and self.error is None:
            self.error = said["error"]
            return [(self.error, True)]  # it says what the line would
        return [(line, False) for line in new if self.error is None]


def case_facts(cases: list[Any]) -> Callable[[Any], CaseFacts]:
    """Each case item's facts as the run selected it (``cases``: the selected case items, before a shard takes its
    share; a file's other items, its compile and sanitize items, are not its cases): whether its kernel file's every
    case is among them, and its kernel's declarations in words."""
    selected: Counter[Any] = Counter(item.parent for item in cases)

    def facts(item: Any) -> CaseFacts:
        spec = item.case.spec
        return CaseFacts(
            file=spec.path,
            kernel=spec.name,
            sha256=item.source_sha256,
            whole=selected[item.parent] == getattr(item.parent, "n_cases", -1),
            declared=tuple(kernel_declarations(spec)),
        )

    return facts
