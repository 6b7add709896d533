"""CUDA graphs (docs/verification.md#cuda-graphs): one launch of the kernel captured into a CUDA graph on the
harness's stream and replayed there, C reset to its start before each replay: first on the verified inputs, then
with new values in the same buffers (rows of A negated, by a key as fresh inputs draw theirs, where that
negates the same rows of C), as a graph is replayed in use. Each replay's output is judged against the truth by the
case's own bound (the second's rows negated back). A replay over the bound, where the same launcher called twice
without a graph is right, fails the case: a graph of the kernel computes something else than the kernel. A launch
that capture refuses (a host synchronisation, a copy to the host) is the kernel's measured answer, not a failure.
Part of the worker package.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ..judge.accuracy import Truth
from ..records.dtypes import get_dtype
from ..records.outcome import ErrorStats, Fault, GraphReplay
from ..records.verdicts import Check
from .buffers import GuardedMatrix, uint_type
from .errors import said_briefly
from .fresh import key, negated
from .integrity import HarnessChanged, ThreadLeft
from .prepared import PreparedCase

__all__ = ["graph_fault", "graph_replay", "graphed", "negate_rows"]

#: what each replay's inputs are, as its finding says
_REPLAYS = ("", ", A's rows negated (new values in the same buffers)")
#: why a case with no room for the graph's own operands is not checked
NO_ROOM = "no room on the device for a CUDA graph's operands besides the case's"


def negate_rows(prepared: PreparedCase, g: GuardedMatrix, operand: str, rows: Any) -> None:
    """Negate in place the logical rows of ``operand`` (A, or the output C) held in ``g`` where ``rows`` is set (one
    flag a row, a batch's stacked): a float's sign bit, an integer's two's complement."""
    cp, case = prepared.cp, prepared.case
    dt = prepared.out if operand == "C" else get_dtype(case.dtype)
    view = g.matrix(uint_type(cp, dt.itemsize))
    if case.storage.transposed(operand):
        view = view.swapaxes(-1, -2)  # logical rows, still a view of the buffer
    mask = rows.reshape(view.shape[:-1])[..., None]
    if dt.exact:
        view[...] = cp.where(mask, ~view + 1, view)
    else:
        sign = view.dtype.type(1 << (8 * dt.itemsize - 1))
        view ^= cp.where(mask, sign, view.dtype.type(0))


def _rows(prepared: PreparedCase) -> Any | None:
    """The rows of A (and so of C) the second replay negates, at least one; None where negating them does not negate
    the output's (a fused epilogue, a grouped case, an A shared by a batch)."""
    data = prepared.data
    if not (prepared.epilogue.signs_commute and prepared.layout.rows_follow_a):
        return None
    if data.batch_of("A") != data.batch_of("C"):
        return None
    rows = negated(key(), data.batch_of("A") * prepared.case.shape.M)
    rows[0] = True  # new values, whatever the key gave a short A
    return prepared.cp.asarray(rows)


def _judged(prepared: PreparedCase, ops: Any, run: Callable[[], None], steps: list[Any], judge: Any) -> tuple[int, Any]:
    """Each step's output of ``run`` (C reset to its start, A's rows negated for a step that has them, and C's back),
    judged: the first step that failed and its figures (0 and None where none did)."""
    start, prior, truth = judge
    for n, rows in enumerate(steps, 1):
        ops.c.flat[...] = start
        if rows is not None:
            negate_rows(prepared, ops.a, "A", rows)
        run()
        prepared.kernel.wait()
        if rows is not None:
            negate_rows(prepared, ops.c, "C", rows)
            negate_rows(prepared, ops.a, "A", rows)  # A as verified again
        if not prepared.output_passes(ops.c, truth):  # its figures only when it fails
            stats: ErrorStats = prepared.judge_output(ops.c, prior, truth)
            return n, stats
    return 0, None


def graph_replay(prepared: PreparedCase, truth: Truth, prior: Any) -> GraphReplay:
    """Capture one launch on a fresh set of operands, replay it on the verified inputs and on new values, and judge
    each replay."""
    if not prepared.graph_room:
        return GraphReplay(skipped=NO_ROOM)
    ops = prepared.operands()
    start = ops.c.flat.copy()  # C as it starts: the poison, or its prior data, with its guards (before any capture)
    steps = [None, _rows(prepared)]  # allocated before capturing
    steps = steps if steps[1] is not None else steps[:1]
    call = prepared.kernel.launcher(ops)
    replay = _captured(prepared, call)
    if isinstance(replay, str):
        return GraphReplay(refused=replay)
    failed, stats = _judged(prepared, ops, replay, steps, (start, prior, truth))
    if failed and _judged(prepared, ops, call, steps, (start, prior, truth))[0] == failed:
        return GraphReplay(replays=len(steps))  # its launcher called again is as wrong: timing's to name, not graphs'
    return GraphReplay(replays=failed or len(steps), wrong=stats)


def graph_fault(found: GraphReplay) -> Fault | None:
    """The finding of a replay whose output failed its bound (None otherwise)."""
    if found.wrong is None:
        return None
    where = f"C after replay {found.replays} of a CUDA graph of one launch{_REPLAYS[found.replays - 1]}"
    return Fault(Check.GRAPH_REPLAY, where, found.wrong.bad)


def _captured(prepared: PreparedCase, call: Callable[[], None]) -> Callable[[], None] | str:
    """``call`` captured into a CUDA graph by the kernel's strategy: the replay, or what the capture's refusal said.
    Either way what the call ran outside the capture (on other streams, or before it was refused) is finished."""
    try:
        replay = prepared.kernel.captured(call)
    except (HarnessChanged, ThreadLeft):  # what the kernel's code did to the worker: its finding, not a refusal
        raise
    except Exception as exc:  # CUDA's, CuPy's or torch's refusal, or the kernel's own error while captured
        prepared.kernel.wait()  # an unusable device raises again here: the worker's to handle
        return said_briefly(exc)
    prepared.kernel.wait()  # work the call put on other streams, which a relaxed capture runs at once
    return replay


def graphed(prepared: PreparedCase, timed_sets: list[Any]) -> str:
    """``--gemm-timer graph`` (docs/timing.md): each timed set's launch (its ``call``) replaced by the replay of a CUDA
    graph of it, captured now; where capture refuses, every set keeps its launch and why is returned ('' when all were
    captured)."""
    replays = []
    for timed in timed_sets:
        replay = _captured(prepared, timed.call)
        if isinstance(replay, str):
            return f"its launch could not be captured: {replay}"
        replays.append(replay)
    for timed, replay in zip(timed_sets, replays, strict=True):
        timed.call = replay
    return ""
