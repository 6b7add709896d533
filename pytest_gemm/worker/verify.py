"""A prepared case's verification: the kernel on fresh guarded operands (three times: it must be deterministic),
judged against the fp64 truth, each wrong element traced to its source, the misreading a wrong output matches, its
rows of C at smaller M (worker.batch_rows) and a CUDA graph of it replayed (worker.graphs), and the peer's own output
judged by the same bound. Part of the worker package.
"""

from __future__ import annotations

from dataclasses import replace

from ..judge.accuracy import count_changed
from ..judge.causes import outside_cells
from ..records.outcome import Fault, Verification
from ..records.verdicts import Check
from .batch_rows import batch_rows, batch_rows_fault
from .buffers import upload_bits, where_landed
from .diagnose import determinism_fault, trace, which_misreading
from .graphs import graph_fault, graph_replay
from .prepared import PreparedCase

__all__ = ["verify"]


def verify(prepared: PreparedCase) -> Verification:
    """Run the kernel on fresh guarded operands, judge it, and say everything that is wrong with it."""
    cp, case, data = prepared.cp, prepared.case, prepared.data
    k = case.shape.K
    dt, out = prepared.dtypes
    c_transposed = data.storage.transposed("C")

    with prepared.device.stream:
        ops = prepared.operands()
        streams = prepared.launch(ops, watch=True)

        # The reference starts only now, on buffers of its own.
        bits = prepared.uploaded()
        c_faults = ops.c.guard_faults(cp, "C")
        strays = ops.c.stray_writes(cp) if c_faults else None  # where the writes outside C landed (storage order)
        if strays is not None:
            c_faults = where_landed(c_faults, strays, ops.c.rows, ops.c.cols, c_transposed)
        faults = ops.a.guard_faults(cp, "A") + ops.b.guard_faults(cp, "B") + c_faults
        faults += prepared.inputs.grid_faults(cp, data, ops.grids)
        for name, g, x in (("A", ops.a, bits[0]), ("B", ops.b, bits[1])):
            changed = count_changed(cp, x, data.logical(g.matrix(x.dtype), name))
            if changed:
                faults.append(Fault(Check.INPUT_MODIFIED, f"{name} (inputs must be read-only)", changed))

        truth = prepared.truth(bits)
        got, unwritten = prepared.output(ops.c, prepared.prior_bits(bits))
        ratio = truth.ratios(cp, got, k, dt, out)
        kernel_stats = truth.judge(cp, got, k, dt, out, unwritten, ratio=ratio)
        faults += prepared.layout.faults(prepared, ops, truth, got, unwritten, kernel_stats)
        faults += prepared.epilogue.faults(prepared, ops, truth)
        if not any(f.kind == Check.INPUT_MODIFIED for f in faults):  # the same inputs again
            start = out.poison_bits if prepared.stored["C"] is None else upload_bits(cp, prepared.stored["C"])
            fault = determinism_fault(prepared, ops.c, start, lambda: prepared.launch(ops))
            faults += [fault] if fault else []
        sources, error_map = (), None
        if not kernel_stats.passed or faults:
            sources, error_map = trace(prepared, ratio, unwritten)
            if strays is not None:
                outside = outside_cells(ops.c.outside(strays, c_transposed), error_map.cell)
                error_map = replace(error_map, outside=outside)
        del ratio, unwritten
        misread = which_misreading(prepared, got, kernel_stats, bits, truth)
        del got  # M x N arrays, not needed while the peer runs (specs.footprint counts on it)
        rows, graph = None, None
        if kernel_stats.passed and not faults and not (isinstance(streams, tuple) and streams) and case.ab.plain:
            rows = batch_rows(prepared, ops.c)  # its rows of C at smaller M (docs/verification.md#batch-invariance)
            graph = graph_replay(prepared, truth, prepared.prior_bits(bits))  # (docs/verification.md#cuda-graphs)
            faults += [f for f in (batch_rows_fault(prepared, rows), graph_fault(graph)) if f is not None]
        peer = prepared.peer_stats(truth, bits)
        prepared.device.stream.synchronize()
    return Verification(
        case_id=case.name,
        seed=prepared.seed,
        shape=case.shape,
        alpha=case.ab.alpha,
        beta=case.ab.beta,
        kernel=kernel_stats,
        peer=peer,
        faults=tuple(faults),
        error_map=error_map,
        sources=sources,
        misread=misread,
        other_streams=streams if isinstance(streams, tuple) else (),
        unchecked_streams=streams if isinstance(streams, str) else "",
        batch_rows=rows,
        graph=graph,
    )
