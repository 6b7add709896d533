"""Exact diagnoses of a wrong output, and the determinism check, by launching the kernel again.

A NaN in C has four possible sources: the poison of an element never written, C read although
beta = 0 (C held NaN), a read past A or B (their guard regions hold NaN), or arithmetic. Bit
patterns tell the first; re-runs with one change each tell the others: C given finite data, and
each guard region of A and B the only one that holds NaN. :mod:`pytest_gemm.judge.causes` turns
the evidence into causes, sources and a map. Part of the worker package; runs in workers only.
"""

from __future__ import annotations

from typing import Any, Protocol

import numpy as np

from ..judge.accuracy import Truth
from ..judge.causes import Evidence, causes_of, error_map, error_sources, some
from ..judge.misread import may_be_misread, misreading
from ..judge.scale_misread import int_candidates, scale_candidates
from ..records.dtypes import FP8, get_dtype
from ..records.outcome import ErrorMap, ErrorSource, ErrorStats, Fault, Misread
from ..records.shapes import Shape
from ..records.verdicts import Check
from ..specs.cases import Case, launch_geometry, precision
from ..specs.errors import KernelFileError
from ..specs.header_keys import DEVICE_NAMES
from .buffers import CaseInputs, GuardedMatrix, bits_to_float64, np_dtype, random_matrix, uint_type, upload_bits


class GpuRunner(Protocol):
    """What the re-runs need of :class:`~pytest_gemm.worker.device.GpuRunner`."""

    cp: Any
    sm_count: int
    scaled: Any  # an FP8 case's grids of scales (:class:`~.scaled.ScaledCase`), or None

    def guarded_input(self, case: Case, name: str, data: CaseInputs) -> GuardedMatrix: ...
    def guarded_output(self, case: Case, data: CaseInputs, fill: np.ndarray | None) -> GuardedMatrix: ...
    def launch(self, case: Case, ga: GuardedMatrix, gb: GuardedMatrix, gc: GuardedMatrix) -> None: ...


__all__ = ["LAUNCHES", "determinism_fault", "trace"]

LAUNCHES = 3  # a verified case runs the kernel this many times on the same inputs


def determinism_fault(runner: GpuRunner, case: Case, gc: GuardedMatrix, start: Any, launch: Any) -> Fault | None:
    """Launch again on the same inputs, C reset to ``start`` each time; a fault if any bit of C differs.

    ``launch()`` runs the kernel once on the case's buffers and waits for it; ``gc`` holds the
    first launch's result. Kernels that declare ``nondeterministic`` are not checked.
    """
    if case.spec.nondeterministic:
        return None
    cp = runner.cp
    out = get_dtype(case.spec.output_dtype(case.dtype))
    view = gc.matrix(uint_type(cp, out.itemsize))
    start = start.reshape(view.shape) if hasattr(start, "reshape") else start  # a batch's: batch x rows x cols
    first = view.copy()
    for n in range(2, LAUNCHES + 1):
        view[...] = start
        launch()
        differs = view != first
        changed = int(differs.sum())
        if changed:
            # Elements launch n left as they started, though launch 1 wrote them: the kernel remembers
            # earlier launches (a cache keyed by the buffer, a flag in device memory), a timing cheat.
            skipped = int((differs & (view == start)).sum())
            view[...] = first  # judge and report the first launch's output
            where = f"C between launch 1 and launch {n} on the same inputs"
            if skipped:
                where += (
                    f"; launch {n} left {skipped} of them unwritten, as if it remembered launch 1 "
                    "(does the kernel keep state between launches?)"
                )
            return Fault(Check.NONDETERMINISTIC, where, changed)
    return None


def trace(
    runner: GpuRunner, case: Case, data: CaseInputs, ratio: Any, unwritten: Any
) -> tuple[tuple[ErrorSource, ...], ErrorMap]:
    """Trace each wrong element of C to its source; re-runs only as needed.

    ``ratio`` is :func:`~pytest_gemm.judge.accuracy.element_ratios` of the output (logical M x N), and
    ``unwritten`` where C still holds, bit for bit, what it started as.
    """
    cp = runner.cp
    nonfinite = ~cp.isfinite(ratio)
    evidence = Evidence()
    if data.c0 is not None and some(unwritten):
        # C held finite prior data: an element may equal it bit for bit because it was never written, or because
        # the value written happens to be that data (a wrong fp16 value often can). Other data in C tells them
        # apart: a never-written element holds it in turn.
        _, untouched, _ = _rerun(runner, case, data, _finite_prior(case), nan_regions=None)
        unwritten = unwritten & untouched
    if some(nonfinite & ~unwritten) or (data.c0 is None and some(unwritten)):
        finite_c = data.c0 if data.c0 is not None else _finite_prior(case)
        if data.c0 is None:
            # C held the NaN poison (beta = 0). Give C finite data (0 * finite = 0), every guard still NaN:
            # an element right now was computed from C; one still holding the data was never written.
            # (A NaN that kept the poison's payload through arithmetic looks unwritten by its bits alone.)
            rerun, untouched, _ = _rerun(runner, case, data, finite_c, nan_regions=None)
            # Only C's data changed: an element now finite, and written, read C (right or not).
            evidence.read_c = nonfinite & cp.isfinite(rerun) & ~untouched
            unwritten = unwritten & untouched
        unexplained = nonfinite & ~unwritten
        if evidence.read_c is not None:
            unexplained &= ~evidence.read_c
        if some(unexplained):
            clean, _, regions = _rerun(runner, case, data, finite_c, nan_regions=())
            for region in regions:
                rerun, _, _ = _rerun(runner, case, data, finite_c, nan_regions=(region,))
                evidence.guard[region] = unexplained & cp.isfinite(clean) & ~cp.isfinite(rerun)
    codes = causes_of(cp, ratio, unwritten, evidence)
    sources = error_sources(cp, codes, evidence, case.shape.batch)
    return sources, error_map(cp, ratio, codes, _tile(case, runner.sm_count))


def _finite_prior(case: Case) -> np.ndarray:
    """Finite data for C where the case has none (beta = 0), from a seed stream of its own."""
    out = get_dtype(case.spec.output_dtype(case.dtype))
    rng = np.random.default_rng([case.shape.M, case.shape.N, 0xC0])
    return random_matrix(rng, (case.shape.batch * case.shape.M, case.shape.N), np_dtype(out))


def _rerun(
    runner: GpuRunner, case: Case, data: CaseInputs, c0: np.ndarray, nan_regions: tuple[str, ...] | None
) -> tuple[Any, Any, list[str]]:
    """Launch on fresh buffers with C = ``c0``; the guard regions of A, B and C outside ``nan_regions`` hold
    zeros (all keep their NaN when it is None). Returns C (logical order, float64), where C still holds
    ``c0`` bit for bit, and the names of the guard regions."""
    cp = runner.cp
    out = get_dtype(case.spec.output_dtype(case.dtype))
    ga = runner.guarded_input(case, "A", data)
    gb = runner.guarded_input(case, "B", data)
    gc = runner.guarded_output(case, data, data.stored(c0, "C"))
    regions = {**ga.regions("A"), **gb.regions("B"), **gc.regions("C")}
    if runner.scaled is not None:  # an FP8 kernel's grids of scales, made with its A
        regions |= {**runner.scaled.grids["A"].regions("scale_a"), **runner.scaled.grids["B"].regions("scale_b")}
    if nan_regions is not None:
        for region, view in regions.items():
            if region not in nan_regions:
                view[...] = 0
    runner.launch(case, ga, gb, gc)
    bits = uint_type(cp, out.itemsize)
    untouched = data.logical(gc.matrix(bits), "C") == upload_bits(cp, c0)
    return data.logical(gc.as_float64(cp, out), "C"), untouched, list(regions)


def _tile(case: Case, sm_count: int) -> tuple[int, int] | None:
    """The output tile of one thread block: the grid at a large power-of-two shape, assuming grid.x spans
    C's contiguous dimension (columns, or rows for a column-major C); None when that does not divide, or
    when the grid names the GPU's SM count (a persistent block walks many tiles)."""
    if case.spec.kind != "cu" or any(e.names & DEVICE_NAMES for e in case.spec.grid):
        return None
    probe = 1 << 16
    try:
        grid = launch_geometry(case.spec, case.variant, Shape(probe, probe, case.shape.K), sm_count=sm_count).grid
    except KernelFileError:  # an expression that cannot take the probe shape: no outlines
        return None
    if len(grid) < 2 or grid[0] < 1 or grid[1] < 1 or probe % grid[0] or probe % grid[1] or grid[0] * grid[1] == 1:
        return None
    across, down = probe // grid[0], probe // grid[1]
    return (across, down) if case.storage.transposed("C") else (down, across)


def which_misreading(
    runner: Any, case: Case, data: CaseInputs, got: Any, stats: ErrorStats, bits: tuple[Any, Any, Any], truth: Truth
) -> Misread | None:
    """Which misreading a mostly wrong output (``got``, judged as ``stats`` against ``truth``) matches
    (:func:`~pytest_gemm.judge.misread.misreading`), from the data in hand (``bits``: A, B and the prior C as
    uploaded; no launch). A diagnosis only: where the GPU's memory cannot hold its candidates, the output is judged
    without it (None), never failed for it."""
    scaled = runner.scaled if case.spec.scales is not None else None
    written_nan = stats.nonfinite - stats.unwritten  # FP8 read as the other format writes NaN, not its poison
    unreadable = scaled is not None and 2 * written_nan > stats.total
    if not may_be_misread(stats, case.shape.batch) and not unreadable:
        return None
    cp, (dt, out), inputs = runner.cp, precision(case), get_dtype(case.dtype)
    a_bits, b_bits, c0_bits = bits
    try:
        a64, b64 = bits_to_float64(cp, a_bits, inputs), bits_to_float64(cp, b_bits, inputs)
        c064 = None if c0_bits is None else bits_to_float64(cp, c0_bits, out)
        extra: Any = ()
        if scaled is not None:  # the scales' and the format's slips, then the readings of exact values
            other = get_dtype(next(f for f in FP8 if f != inputs.name))
            others = bits_to_float64(cp, a_bits, other), bits_to_float64(cp, b_bits, other)
            grids = scaled.values(cp, "A"), scaled.values(cp, "B")
            exact = scaled.dequantised(cp, "A", a64), scaled.dequantised(cp, "B", b64)
            extra = scale_candidates(cp, (a64, b64), grids, exact, scaled.scales, case.shape, others)
            a64, b64 = exact
        elif inputs.exact:
            extra = int_candidates(cp, truth.value, truth.gscale)
        args = (case.ab.alpha, case.ab.beta, data.storage, dt, out, truth)
        return misreading(cp, got, a64, b64, c064, *args, extra=extra)
    except Exception as exc:
        if isinstance(exc, MemoryError) or type(exc).__name__ == "OutOfMemoryError":  # CuPy's is not a MemoryError
            return None
        raise
