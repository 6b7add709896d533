"""The layout strategies: how a case's GEMMs lie in its operands. :func:`layout_strategy` chooses one per case, the
only place the worker tells a grouped case from another:

* :class:`Layout`: one GEMM, or a strided batch of equal ones: the inputs as drawn, nothing read besides A, B, C
  and the family's own, one truth of the (stacked) product, no checks or misreadings of its own;
* :class:`GroupedLayout`: a grouped GEMM's groups (records.groups): A's rows of no group poisoned, the group
  arrays (or pointer arrays), each group's own truth and bounds, C's rows of no group checked bit for bit, A's
  padding read as data, and another group's B (FP8: or its scales, from the input family's ``group_readings``).

A strategy's checks take the case's :class:`~.prepared.PreparedCase` as ``prepared`` (it holds the strategy, so the
type is not imported here). Part of the worker package.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import numpy as np

from ..judge.accuracy import Truth, element_ratios
from ..judge.grouped import GroupedTruth, group_misreading, group_rows, outside_faults
from ..judge.misread import BATCHES_LISTED as MAX_PAIRS
from ..judge.misread import misreading
from ..records.dtypes import DType, get_dtype
from ..records.groups import POINTER_ARGS
from ..records.outcome import ErrorStats, Fault, Misread
from ..records.verdicts import Misreading
from ..specs.cases import Case
from ..specs.footprint import storage_dims
from .buffers import GuardedMatrix, bits_to_float64, guarded
from .grouped import group_array_faults, group_host, padding_read
from .operands import CaseInputs, Operands

__all__ = ["GroupedLayout", "Layout", "layout_strategy"]


class Layout:
    """One GEMM, or a strided batch of equal ones."""

    #: it names its own misreadings (:meth:`misreading`), in place of the common ones
    own_misreadings = False
    #: each row of C comes from the same row of A alone, across a batch too (worker.batch_rows, worker.graphs): not a
    #: grouped GEMM's, whose rows of C are groups'
    rows_follow_a = True

    def __init__(self, case: Case) -> None:
        self.case = case

    def inputs(self, data: CaseInputs) -> CaseInputs:
        """The case's inputs as its family drew them, laid out for this layout: as they are."""
        return data

    #: whether what :meth:`arrays` makes depends on the operands' addresses (made again for each set of operands)
    per_set = False

    def arrays(self, cp: Any, guards: bool, operands: dict[str, GuardedMatrix]) -> dict[str, GuardedMatrix]:
        """What the kernel reads besides its operands and its family's (a grouped kernel's group arrays), in fresh
        guarded buffers, by argument name (``operands``: A, B and C, which a pointer array points into): nothing."""
        return {}

    def truth(self, cp: Any, a64: Any, b64: Any, c064: Any | None, out: DType) -> Truth:
        """The fp64 truth of ``alpha A B + beta C0`` from the exact operands (logical, stacked), and its scales."""
        ab = self.case.ab
        return Truth.of(cp, a64, b64, c064, ab.alpha, ab.beta, out, self.case.shape.batch)

    def faults(
        self, prepared: Any, ops: Operands, truth: Truth, got: Any, unwritten: Any, stats: ErrorStats
    ) -> list[Fault]:
        """What the layout checks of a verified launch on ``ops`` besides the output's values: nothing."""
        return []

    def compared_rows(self, cp: Any, rows: int) -> Any | None:
        """Which of the ``rows`` rows of the stacked, logical C the determinism check compares bit for bit between
        launches: every row (None)."""
        return None

    def misreading(
        self, prepared: Any, got: Any, stats: ErrorStats, bits: tuple[Any, Any, Any], truth: Truth
    ) -> Misread | None:
        """The layout's own misreading of a wrong output (where :attr:`own_misreadings`)."""
        return None


_INT32 = get_dtype("int32")


class GroupedLayout(Layout):
    """A grouped GEMM's groups: the case's :class:`~pytest_gemm.records.groups.GroupPlan`."""

    own_misreadings = True
    rows_follow_a = False

    def __init__(self, case: Case) -> None:
        super().__init__(case)
        plan, groups = case.plan, case.spec.groups
        assert plan is not None and groups is not None
        self.plan, self.groups = plan, groups
        self.per_set = bool(set(case.spec.group_args) & set(POINTER_ARGS))

    def inputs(self, data: CaseInputs) -> CaseInputs:
        """A's rows of no group NaN (a kernel that reads them as data writes NaN), each operand's batch its own."""
        a = data.a
        if self.plan.outside():
            a = a.copy()
            for start, stop, _ in self.plan.outside():
                a[start:stop] = np.nan
            a.flags.writeable = False
        batches = tuple(storage_dims(self.case.spec, op, self.case.shape)[0] for op in "ABC")
        return replace(data, a=a, batches=batches)

    def arrays(self, cp: Any, guards: bool, operands: dict[str, GuardedMatrix]) -> dict[str, GuardedMatrix]:
        """Each group array the kernel takes, int32 (a pointer array's addresses as int32 pairs), in a fresh guarded
        buffer of its own."""
        found = {}
        for name in self.case.spec.group_args:
            host = group_host(self.plan, name, operands, self.case.storage)
            found[name] = guarded(cp, _INT32, False, host.shape, host, guards=guards)
        return found

    def truth(self, cp: Any, a64: Any, b64: Any, c064: Any | None, out: DType) -> Truth:
        ab = self.case.ab
        return GroupedTruth.of_groups(cp, self.plan, a64, b64, c064, ab.alpha, ab.beta, out)

    def faults(
        self, prepared: Any, ops: Operands, truth: Truth, got: Any, unwritten: Any, stats: ErrorStats
    ) -> list[Fault]:
        """The group arrays changed or their guards written; C's rows of no group written (unless the kernel may);
        a group's rows computed from A's padding rows."""
        cp = prepared.cp
        found = group_array_faults(cp, self.plan, ops.groups, ops.by_operand, self.case.storage)
        found += outside_faults(cp, self.plan, unwritten, self.groups.writes_padding)
        read = None if stats.passed else padding_read(prepared, self.plan, got)
        return found + ([read] if read else [])

    def compared_rows(self, cp: Any, rows: int) -> Any | None:
        """The groups' rows where the kernel may write rows of no group (``writes_padding``): it may leave anything
        there, launch after launch (torch's grouped GEMM does); every row otherwise."""
        return group_rows(cp, self.plan, rows) if self.groups.writes_padding else None

    def misreading(
        self, prepared: Any, got: Any, stats: ErrorStats, bits: tuple[Any, Any, Any], truth: Truth
    ) -> Misread | None:
        """Which other group's data a wrong group's rows match (:func:`~pytest_gemm.judge.grouped.group_misreading`):
        its B, or what the input family reads of a group besides (an FP8 group's scales); else a slip of one GEMM
        that every wrong group shows (:meth:`_own_slips`)."""
        if not stats.bad or not isinstance(truth, GroupedTruth):
            return None
        c064 = None if bits[2] is None else bits_to_float64(prepared.cp, bits[2], prepared.out)
        return self._other_groups(prepared, got, bits, truth, c064) or self._own_slips(prepared, got, bits, truth, c064)

    def _other_groups(
        self, prepared: Any, got: Any, bits: tuple[Any, Any, Any], truth: GroupedTruth, c064: Any
    ) -> Misread | None:
        """Another group's B or scales (every group's operands in fp64, let go on return)."""
        cp, case, (dt, out), data = prepared.cp, self.case, prepared.dtypes, prepared.data
        raw = tuple(bits_to_float64(cp, x, get_dtype(case.dtype)) for x in bits[:2])
        a64, b64 = prepared.inputs.exact(cp, data, *raw)
        k = self.plan.K
        readings = {Misreading.OTHER_GROUP_B: lambda g, h: b64[h * k : (h + 1) * k]}
        readings |= prepared.inputs.group_readings(cp, data, raw, (a64, b64), self.plan.c_rows)
        return group_misreading(cp, truth, got, a64, readings, c064, case.ab.alpha, case.ab.beta, dt, out)

    def _own_slips(self, prepared: Any, got: Any, bits: tuple[Any, Any, Any], truth: GroupedTruth, c064: Any) -> Any:
        """The misreading of one GEMM (:func:`~pytest_gemm.judge.misread.misreading`, with the input family's own:
        an FP8 group's scales read in the other order, at another granularity...) that every wrong group matches as
        a GEMM of its own: the kind most of them match, their matched elements summed, and which groups. None where a
        wrong group matches none or is mostly right (a slip of its whole GEMM makes most of it wrong), and for
        K-grouped cases. The readings are of the group's own matrices: a slip that reads the one A of every group
        (its grid of scales, or its other order) is not among them."""
        if self.plan.layout == "k":
            return None
        cp, case, (dt, out), data = prepared.cp, self.case, prepared.dtypes, prepared.data
        found: dict[tuple[Misreading, str], list[tuple[int, int]]] = {}
        wrong_groups = []
        for g, own in truth.each():
            r0, r1 = self.plan.c_rows(g)
            args = (own.value, own.gscale, self.plan.K, dt, out, own.hscale, own.subnormal)
            wrong = int((element_ratios(cp, got[r0:r1], *args) > 1.0).sum())
            if not wrong:
                continue  # a right group
            if 2 * wrong < (r1 - r0) * self.plan.N:
                return None
            wrong_groups.append((g, (r0, r1)))
        for g, (r0, r1) in wrong_groups:
            extra, (a, b) = prepared.inputs.group_candidates(cp, data, bits[:2], g, (r0, r1))
            c0 = None if c064 is None else c064[r0:r1]
            ab = case.ab
            match = misreading(cp, got[r0:r1], a, b, c0, ab.alpha, ab.beta, data.storage, dt, out, extra=extra)
            if match is None:
                return None
            found.setdefault((match.kind, match.as_read), []).append((g, match.matched))
        if not found:
            return None
        (kind, as_read), groups = max(found.items(), key=lambda item: len(item[1]))
        pairs = tuple((g, g) for g, _ in groups)
        return Misread(kind, sum(n for _, n in groups), pairs[:MAX_PAIRS], len(pairs), as_read=as_read)


def layout_strategy(case: Case) -> Layout:
    """The layout of ``case``: the one place the worker chooses it."""
    return Layout(case) if case.plan is None else GroupedLayout(case)
