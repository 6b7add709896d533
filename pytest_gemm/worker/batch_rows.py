"""Batch invariance (docs/verification.md#batch-invariance): whether each row of C comes out the same, bit for bit,
whatever M is. The case's first rows of A are launched again as GEMMs of fewer rows (the smallest M and about half of
M that the kernel's rules allow), and their rows of C compared with the same rows of the case's verified output. A
kernel that declares ``batch_invariant = true`` fails on a row that differs; for the others it is the measured
answer the report gives. Checked for one plain GEMM (no batch, groups, scales or epilogue) at alpha = 1, beta = 0.
Part of the worker package.
"""

from __future__ import annotations

from dataclasses import replace

from ..records.outcome import BatchRows, Fault
from ..records.verdicts import Check
from ..specs.cases import refused
from .buffers import GuardedMatrix, uint_type
from .errors import said_briefly
from .inputs import input_strategy
from .integrity import HarnessChanged, ThreadLeft
from .prepared import PreparedCase

__all__ = ["batch_rows", "batch_rows_fault", "smaller_ms"]

#: the Ms tried below the case's, smallest first; the kernel's ``requires`` rules choose among them
_CANDIDATES = (1, 2, 4, 8, 16, 32, 64, 128, 256)


def smaller_ms(prepared: PreparedCase) -> tuple[int, ...]:
    """The Ms the rows are compared at: the smallest the kernel's rules allow, and the largest up to half of the
    case's M (at most two; none when the rules allow none)."""
    case = prepared.case
    m = case.shape.M
    tried = sorted({x for x in (*_CANDIDATES, m // 2, m // 4) if 0 < x <= m // 2})
    allowed = [x for x in tried if refused(case.spec, case.variant, replace(case.shape, M=x)) is None]
    return tuple(sorted({allowed[0], allowed[-1]})) if allowed else ()


def _not_checked(prepared: PreparedCase) -> str:
    """Why the case's rows are not compared ('' when they are)."""
    case, data = prepared.case, prepared.data
    if not prepared.kernel.other_shapes:
        return "a Python kernel: a call at another M could compile or tune it again before it is timed"
    plain = prepared.layout.rows_follow_a and prepared.epilogue.rows_compared
    if case.shape.batch > 1 or not plain or data.scale_a is not None:  # a grid of scales is a block of rows's
        return "checked for one plain GEMM (no batch, groups, scales or epilogue)"
    if case.spec.nondeterministic:
        return "its launches may differ (nondeterministic)"
    return ""


def batch_rows(prepared: PreparedCase, verified: GuardedMatrix) -> BatchRows:
    """The case's rows of C (``verified``: its verified output) against the same rows at each smaller M."""
    reason = _not_checked(prepared)
    ms = () if reason else smaller_ms(prepared)
    if not reason and not ms:
        reason = "no smaller M is allowed by the kernel's rules"
    if reason:
        return BatchRows(reason=reason)
    cp, case, data, out = prepared.cp, prepared.case, prepared.data, prepared.out
    full = data.logical(verified.matrix(uint_type(cp, out.itemsize)), "C")
    for m in ms:
        fewer = replace(case, shape=replace(case.shape, M=m))
        inputs = input_strategy(fewer)
        rows = replace(data, a=data.a[:m], c0=None if data.c0 is None else data.c0[:m])
        try:  # a launch its rules allow, but its grid, buffers or tensor maps refuse at this M: not checked, and why
            kernel = prepared.kernel.for_case(fewer, inputs)
            again = PreparedCase(prepared.device, fewer, prepared.seed, kernel, inputs, prepared.peer, data=rows)
            ops = again.operands()
            again.launch(ops)
        except (HarnessChanged, ThreadLeft):  # what a buffer's fill function did to the worker: its finding
            raise
        except Exception as exc:
            prepared.kernel.wait()  # a CUDA error that leaves the device unusable raises again: the worker's to handle
            said = said_briefly(exc)
            return BatchRows(at=ms, reason=f"the launch at M = {m} failed ({said})")
        got = again.data.logical(ops.c.matrix(uint_type(cp, out.itemsize)), "C")
        differing = int(cp.count_nonzero((got != full[:m]).any(axis=1)))
        if differing:
            return BatchRows(at=ms, differing=differing, where=m)
    return BatchRows(at=ms)


def batch_rows_fault(prepared: PreparedCase, found: BatchRows) -> Fault | None:
    """The finding of a kernel that declares ``batch_invariant = true`` and whose rows differed (None otherwise)."""
    if not prepared.case.spec.batch_invariant or not found.differing:
        return None
    where = f"C's first {found.where} rows at M = {found.where} against the same rows at M = {prepared.case.shape.M}"
    return Fault(Check.BATCH_VARIANT, where, found.differing)
