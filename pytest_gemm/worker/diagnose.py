"""Exact diagnoses of a wrong output, and the determinism check, by launching the kernel again.

A NaN in C has four possible sources: the poison of an element never written, C read although
beta = 0 (C held NaN), a read past A or B (their guard regions hold NaN), or arithmetic. Bit
patterns tell the first; re-runs with one change each tell the others: C given finite data, and
each guard region of A and B the only one that holds NaN. :mod:`pytest_gemm.judge.causes` turns
the evidence into causes, sources and a map. Part of the worker package; runs in workers only.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..judge.accuracy import Truth
from ..judge.causes import Evidence, causes_of, error_map, error_sources, some
from ..judge.misread import may_be_misread, misreading
from ..records.outcome import ErrorMap, ErrorSource, ErrorStats, Fault, Misread
from ..records.verdicts import Check
from ..specs.footprint import storage_dims
from .buffers import GuardedMatrix, bits_to_float64, np_dtype, random_matrix, uint_type, upload_bits
from .prepared import PreparedCase

__all__ = ["LAUNCHES", "determinism_fault", "trace", "which_misreading"]

LAUNCHES = 3  # a verified case runs the kernel this many times on the same inputs


def determinism_fault(prepared: PreparedCase, gc: GuardedMatrix, start: Any, launch: Any) -> Fault | None:
    """Launch again on the same inputs, C reset to ``start`` each time; a fault if any bit of C differs (in the rows
    its layout compares: a grouped kernel's rows of no group, where it may write them, hold anything).

    ``launch()`` runs the kernel once on the case's buffers and waits for it; ``gc`` holds the
    first launch's result. Kernels that declare ``nondeterministic`` are not checked.
    """
    if prepared.case.spec.nondeterministic:
        return None
    cp, out = prepared.cp, prepared.out
    view = gc.matrix(uint_type(cp, out.itemsize))
    start = start.reshape(view.shape) if hasattr(start, "reshape") else start  # a batch's: batch x rows x cols
    first = view.copy()
    rows = prepared.layout.compared_rows(cp, prepared.data.logical(view, "C").shape[0])  # None: every row

    def compared(mask: Any) -> Any:  # C's mask in logical order, the rows compared
        logical = prepared.data.logical(mask, "C")
        return logical if rows is None else logical[rows]

    for n in range(2, LAUNCHES + 1):
        view[...] = start
        launch()
        differs = compared(view != first)
        changed = int(differs.sum())
        if changed:
            # Elements launch n left as they started, though launch 1 wrote them: the kernel remembers
            # earlier launches (a cache keyed by the buffer, a flag in device memory), a timing cheat.
            skipped = int((differs & compared(view == start)).sum())
            view[...] = first  # judge and report the first launch's output
            where = f"C between launch 1 and launch {n} on the same inputs"
            if skipped:
                where += (
                    f"; launch {n} left {skipped} of them unwritten, as if it remembered launch 1 "
                    "(does the kernel keep state between launches?)"
                )
            return Fault(Check.NONDETERMINISTIC, where, changed)
    return None


def trace(prepared: PreparedCase, ratio: Any, unwritten: Any) -> tuple[tuple[ErrorSource, ...], ErrorMap]:
    """Trace each wrong element of C to its source; re-runs only as needed.

    ``ratio`` is :func:`~pytest_gemm.judge.accuracy.element_ratios` of the output (logical M x N), and
    ``unwritten`` where C still holds, bit for bit, what it started as.
    """
    cp, data, prior = prepared.cp, prepared.data, prepared.prior
    nonfinite = ~cp.isfinite(ratio)
    evidence = Evidence()
    # a C apart from D (a fused epilogue's) that held the poison (beta = 0) is given data in every re-run below but
    # the one that asks whether the kernel read it
    apart = prepared.epilogue.d and data.c0 is None
    c_input = _finite_prior(prepared) if apart else None
    if prior is not None and some(unwritten):
        # C held finite prior data: an element may equal it bit for bit because it was never written, or because
        # the value written happens to be that data (a wrong fp16 value often can). Other data in C tells them
        # apart: a never-written element holds it in turn.
        _, untouched, _ = _rerun(prepared, _finite_prior(prepared), nan_regions=None)
        unwritten = unwritten & untouched
    if some(nonfinite & ~unwritten) or (prior is None and some(unwritten)):
        finite_c = prior if prior is not None else _finite_prior(prepared)
        if prior is None:
            # C held the NaN poison (beta = 0). Give C finite data (0 * finite = 0), every guard still NaN:
            # an element right now was computed from C; one still holding the data was never written.
            # (A NaN that kept the poison's payload through arithmetic looks unwritten by its bits alone.)
            rerun, untouched, _ = _rerun(prepared, finite_c, nan_regions=None)
            if not prepared.epilogue.d:  # only C's data changed: an element now finite, and written, read C
                evidence.read_c = nonfinite & cp.isfinite(rerun) & ~untouched
            unwritten = unwritten & untouched
        if apart and some(nonfinite & ~unwritten):
            # C, an input of its own, held the poison: an element finite once C holds data read it
            rerun, _, _ = _rerun(prepared, None, nan_regions=None, c_input=c_input)
            evidence.read_c = nonfinite & cp.isfinite(rerun) & ~unwritten
        unexplained = nonfinite & ~unwritten
        if evidence.read_c is not None:
            unexplained &= ~evidence.read_c
        if some(unexplained):
            clean, _, regions = _rerun(prepared, finite_c, nan_regions=(), c_input=c_input)
            for region in regions:
                rerun, _, _ = _rerun(prepared, finite_c, nan_regions=(region,), c_input=c_input)
                evidence.guard[region] = unexplained & cp.isfinite(clean) & ~cp.isfinite(rerun)
    codes = causes_of(cp, ratio, unwritten, evidence)
    sources = error_sources(cp, codes, evidence, data.batch_of("C"))
    return sources, error_map(cp, ratio, codes, prepared.kernel.tile())


def _finite_prior(prepared: PreparedCase) -> np.ndarray:
    """Finite data for C where the case has none (beta = 0), from a seed stream of its own."""
    case, out = prepared.case, prepared.out
    rng = np.random.default_rng([case.shape.M, case.shape.N, 0xC0])
    batch, rows, cols = storage_dims(case.spec, "C", case.shape)
    return random_matrix(rng, (batch * rows, cols), np_dtype(out))


def _rerun(
    prepared: PreparedCase,
    c0: np.ndarray | None,
    nan_regions: tuple[str, ...] | None,
    c_input: np.ndarray | None = None,
) -> tuple[Any, Any, list[str]]:
    """Launch on fresh operands with C = ``c0`` (None: its own start) and, where given, a C apart from D holding
    ``c_input``; the guard regions of the operands outside ``nan_regions`` hold zeros (all keep their NaN when it is
    None). Returns C (logical order, float64), where C still holds what it started as bit for bit, and the names of
    the guard regions."""
    cp, data, out = prepared.cp, prepared.data, prepared.out
    ops = prepared.operands(c0, c_input)
    regions = ops.regions()
    if nan_regions is not None:
        for region, view in regions.items():
            if region not in nan_regions:
                view[...] = 0
    prepared.launch(ops)
    bits = data.logical(ops.c.matrix(uint_type(cp, out.itemsize)), "C")
    start = c0 if c0 is not None else prepared.prior
    untouched = bits == (out.poison_bits if start is None else upload_bits(cp, start))
    return data.logical(ops.c.as_float64(cp, out), "C"), untouched, list(regions)


def which_misreading(
    prepared: PreparedCase, got: Any, stats: ErrorStats, bits: tuple[Any, Any, Any], truth: Truth
) -> Misread | None:
    """Which misreading a mostly wrong output (``got``, judged as ``stats`` against ``truth``) matches
    (:func:`~pytest_gemm.judge.misread.misreading`), from the data in hand (``bits``: A, B and the prior C as
    uploaded; no launch): the common readings, and the input family's own. A diagnosis only: where the GPU's memory
    cannot hold its candidates, the output is judged without it (None), never failed for it."""
    case, inputs = prepared.case, prepared.inputs
    cp, (dt, out) = prepared.cp, prepared.dtypes
    try:
        if prepared.layout.own_misreadings:  # a grouped case's: another group's B (or, FP8, its scales)
            return prepared.layout.misreading(prepared, got, stats, bits, truth)
        found = prepared.epilogue.misreading(prepared, got, stats, truth)  # a fused epilogue's slips
        if found is not None or prepared.epilogue.own_misreadings:  # the common readings lack its epilogue: no match
            return found
        if not may_be_misread(stats, case.shape.batch) and not inputs.unreadable(stats):
            return None
        extra, (a64, b64) = inputs.candidates(cp, prepared.data, bits[:2], truth)
        c064 = None if bits[2] is None else bits_to_float64(cp, bits[2], out)
        args = (case.ab.alpha, case.ab.beta, prepared.data.storage, dt, out, truth)
        return misreading(cp, got, a64, b64, c064, *args, extra=extra)
    except Exception as exc:
        if isinstance(exc, MemoryError) or type(exc).__name__ == "OutOfMemoryError":  # CuPy's is not a MemoryError
            return None
        raise
