"""A worker backend that makes wrong outputs up: the CPU's stand-in for a suite of broken kernels at any size.

Each case's output is wrong in one of the ways real kernels are (tiles never written, C read although beta = 0,
reads past A, every value wrong, rows written past C), over C as large as the case says; the worker's own rules
(:mod:`pytest_gemm.judge.causes`) trace its causes and pool its error map, exactly as on a GPU. Every tenth
variant passes and is timed instead, so that pytest-benchmark writes its JSON. Used through the documented
``pytest_gemm_worker_backend`` hook: by tests of how large artifacts grow, and by ``research/synthetic-sizes.sh``.
"""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np

from pytest_gemm.judge.causes import Evidence, causes_of, error_map, error_sources, outside_cells
from pytest_gemm.records.outcome import ErrorStats, Fault, Outcome, TimingRun, Verification
from pytest_gemm.records.verdicts import Stop
from pytest_gemm.specs.files import case_from_request, load_specs

FACTS = {
    "name": "NVIDIA H100 80GB HBM3",
    "compute_capability": "9.0",
    "sm_count": 132,
    "max_sm_clock_mhz": 1980,
    "driver_version": "580.159.04",
    "cublas_version": "13.1.0",
    "uuid": "GPU-00000000-synthetic",
}
PATTERNS = ("unwritten tiles", "reads C", "reads past A", "wrong everywhere", "rows past C")


class SyntheticBackend:
    def __init__(self, cubin_cache: str | None = None) -> None:
        self._facts = {**FACTS, "visible_devices": [{"name": FACTS["name"], "capability": "9.0"}]}

    def facts(self) -> dict:
        return self._facts

    def run(self, request, notify) -> Outcome:
        notify("load")
        case = case_from_request(request, load_specs(Path(request.path), request.shown))
        variant = int(dict(request.params).get("V", 0))
        notify("verify")
        if variant % 10 == 9:
            return _passed(request, case.name)
        return Outcome(verification=_wrong(request, case.name, PATTERNS[variant % len(PATTERNS)]), worker=os.getpid())


def _worst(flat: np.ndarray, k: int) -> np.ndarray:
    """The indices of the ``k`` largest values, the first of equals first (``np.argsort(-flat, kind="stable")[:k]``),
    without sorting the whole output: a 2048 x 2048 one's sort took half a second a case."""
    if flat.size <= k:
        return np.argsort(-flat, kind="stable")
    kth = np.partition(flat, flat.size - k)[flat.size - k]
    above = np.flatnonzero(flat > kth)
    above = above[np.argsort(-flat[above], kind="stable")]
    return np.concatenate([above, np.flatnonzero(flat == kth)[: k - above.size]])


def _stats(ratio: np.ndarray, unwritten: np.ndarray, nonfinite: int) -> ErrorStats:
    flat = np.where(np.isfinite(ratio), ratio, np.inf).ravel()
    bad = int((flat > 1).sum())
    order = _worst(flat, 5)
    n = ratio.shape[1]
    worst = tuple((int(i) // n, int(i) % n, float("nan"), 1.0, float(flat[i])) for i in order)
    tiles = np.argwhere(np.pad(ratio > 1, ((0, -ratio.shape[0] % 32), (0, -n % 32))).reshape(
        -(-ratio.shape[0] // 32), 32, -(-n // 32), 32).any(axis=(1, 3)))  # fmt: skip
    n_tiles = (-(-ratio.shape[0] // 32)) * (-(-n // 32))
    return ErrorStats(
        max_ratio=float(flat.max()),
        median_ratio=float(np.median(flat)),
        bad=bad,
        total=int(flat.size),
        nonfinite=nonfinite,
        unwritten=int(unwritten.sum()),
        norm_error=float("inf") if nonfinite else 0.5,
        norm_tol=1e-6,
        worst=worst,
        bad_tiles=tuple((int(r), int(c)) for r, c in tiles[:8]),
        n_bad_tiles=len(tiles),
        n_tiles=n_tiles,
    )


def _wrong(request, name: str, pattern: str) -> Verification:
    """A wrong output of ``request``'s size, wrong as ``pattern`` says, with its causes traced and its map pooled."""
    m, n = request.shape.M, request.shape.N
    rng = np.random.default_rng(request.seed)
    ratio = rng.lognormal(-4.0, 1.5, size=(m, n)).astype(np.float32)  # a correct kernel's error: well inside
    unwritten = np.zeros((m, n), dtype=bool)
    evidence = Evidence()
    faults, strays = [], None
    if pattern == "unwritten tiles":
        unwritten[:, n - n % 128 - 128 :] = True
    elif pattern == "reads C":
        evidence.read_c = np.zeros((m, n), dtype=bool)
        evidence.read_c[: m // 2] = True
    elif pattern == "reads past A":
        band = np.zeros((m, n), dtype=bool)
        band[m - 64 :] = True
        evidence.guard["the guard after A"] = band
    elif pattern == "wrong everywhere":
        ratio *= 1e4
    else:  # rows written past C: the last rows wrong, and the guard after C written
        ratio[m - 16 :] = rng.lognormal(6.0, 2.0, size=(16, n))
        rows, cols = np.meshgrid(np.arange(m, m + 16), np.arange(n), indexing="ij")
        strays = np.stack([rows.ravel(), cols.ravel()], 1)
        faults.append(Fault("out-of-bounds write", "the guard after C", int(strays.shape[0])))
    nan = unwritten.copy()
    if evidence.read_c is not None:
        nan |= evidence.read_c
    for mask in evidence.guard.values():
        nan |= mask
    ratio = np.where(nan, np.inf, ratio)
    codes = causes_of(np, ratio, unwritten, evidence)
    emap = error_map(np, ratio, codes, tile=(128, 128))
    if strays is not None:
        emap = emap.__class__(**{**emap.__dict__, "outside": outside_cells(strays, emap.cell)})
    stats = _stats(ratio, unwritten, int(nan.sum()))
    return Verification(
        name, request.seed, _shape(request), request.alpha, request.beta, stats, None, tuple(faults), emap,
        error_sources(np, codes, evidence),
    )  # fmt: skip


def _shape(request):
    return request.shape


def _passed(request, name: str) -> Outcome:
    """A right output, timed when asked: about 60% of cuBLAS's speed, 50 pairs."""
    rng = np.random.default_rng(request.seed)
    flops = 2 * request.shape.M * request.shape.N * request.shape.K
    cublas = rng.normal(flops / 40e12, flops / 40e12 * 0.003, 50)  # cuBLAS fp32 at 40 TFLOP/s
    ok = ErrorStats(
        0.2, 0.01, 0, request.shape.M * request.shape.N, 0, 0, 1e-7, 1e-6, ((0, 0, 1.0, 1.0, 0.2),), (), 0, 1
    )
    verification = Verification(name, request.seed, _shape(request), request.alpha, request.beta, ok, ok)
    timing = None
    if request.timing is not None:
        kernel = tuple(float(t) for t in cublas / 0.6)
        timing = TimingRun(kernel, tuple(float(t) for t in cublas), 0.2, Stop.CONVERGED.value, True, 1, 0, ok, ok)
    return Outcome(verification=verification, timing=timing, worker=os.getpid())
