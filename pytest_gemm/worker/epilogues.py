"""The epilogue strategies: what a kernel writes, and from what. :func:`epilogue_strategy` chooses one per case, the
only place the worker tells a fused epilogue from a plain GEMM:

* :class:`NoEpilogue`: C = alpha A B + beta C, written in place; nothing else read or written;
* :class:`FusedEpilogue`: ``D = act(alpha A B + beta C + bias) + residual`` (records.epilogue): the bias and the
  residual drawn, each in a guarded buffer of its own (the matrices laid out as C, with its ldc), C an input of its
  own where the kernel writes D apart from it (then D starts as the poison), aux's buffer poisoned; D's truth and
  bound (judge.epilogue); its checks (the epilogue's inputs unchanged, their guards, aux against the pre-activation
  value) and its misreadings (the bias's axis, the activation's place, the residual).

Part of the worker package.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import replace
from typing import Any

import numpy as np

from ..judge.accuracy import Truth, count_changed, element_bound, element_ratios
from ..judge.epilogue import EpilogueTruth, epilogue_misreading, numpy_erf
from ..records.dtypes import DType, get_dtype
from ..records.epilogue import Epilogue
from ..records.outcome import ErrorStats, Fault, Misread
from ..records.verdicts import Check
from ..specs.cases import Case
from .buffers import GuardedMatrix, guarded, np_dtype, random_matrix, uint_type, upload_bits
from .operands import CaseInputs, Operands

__all__ = ["FusedEpilogue", "NoEpilogue", "epilogue_strategy"]

#: a function giving a fresh buffer laid out as C's in the set of operands being made, holding a logical matrix of C's
#: shape (None: the poison)
MakeLikeC = Callable[[np.ndarray | None], GuardedMatrix]


class NoEpilogue:
    """A plain GEMM: C written in place."""

    #: the kernel writes D apart from C (C an input only, D starting as the poison)
    d = False
    #: its misreadings (:meth:`misreading`) are a wrong output's only ones: the common readings of A, B and C lack the
    #: epilogue, so none could match
    own_misreadings = False
    #: negating rows of A and columns of B negates the same of the output (timed launches' fresh inputs, worker.fresh)
    signs_commute = True
    #: its rows of C can be compared at a smaller M (worker.batch_rows): a row of D is not C's alone
    rows_compared = True

    def __init__(self, case: Case) -> None:
        self.case = case

    def inputs(self, data: CaseInputs, seed: int) -> CaseInputs:
        """The case's inputs with what the epilogue reads drawn: nothing more."""
        return data

    def arrays(
        self, cp: Any, data: CaseInputs, like_c: MakeLikeC, guards: bool, c_input: np.ndarray | None = None
    ) -> dict[str, GuardedMatrix]:
        """The epilogue's operands in fresh buffers, by argument name (``c_input``: what a C apart from D holds
        instead of its prior data): none."""
        return {}

    def truth(self, cp: Any, base: Truth, data: CaseInputs, out: DType) -> Truth:
        """The output's truth from ``base``, ``alpha A B + beta C0``'s: itself."""
        return base

    def faults(self, prepared: Any, ops: Operands, truth: Truth) -> list[Fault]:
        """What the epilogue checks of a verified launch on ``ops``: nothing."""
        return []

    def misreading(self, prepared: Any, got: Any, stats: ErrorStats, truth: Truth) -> Misread | None:
        """The epilogue's misreading of a wrong output: none."""
        return None


class FusedEpilogue(NoEpilogue):
    """A fused epilogue, or D written apart from C: the case's :class:`~pytest_gemm.records.epilogue.Epilogue`."""

    signs_commute = False  # an activation, a bias or a residual does not change sign with the product
    rows_compared = False

    def __init__(self, case: Case) -> None:
        super().__init__(case)
        epilogue = case.spec.epilogue
        assert epilogue is not None
        self.epilogue: Epilogue = epilogue
        self.d = epilogue.d
        self.own_misreadings = epilogue.fused

    @property
    def out(self) -> DType:
        return get_dtype(self.case.spec.output_dtype(self.case.dtype))

    def inputs(self, data: CaseInputs, seed: int) -> CaseInputs:
        """The bias and the residual, zero-mean, of the size ``alpha A B``'s elements have (|alpha| sqrt(K / 9) for
        inputs in [-1, 1)), so that neither is lost beside the product, stored exactly in D's type; a stream of
        their own, so A, B and C are those of the same case without an epilogue."""
        case, epi = self.case, self.epilogue
        rng = np.random.default_rng([seed, 0xE9])
        scale = max(1.0, abs(case.ab.alpha) * math.sqrt(case.shape.K / 9.0))
        store = np_dtype(self.out)

        def draw(shape: tuple[int, int]) -> np.ndarray:
            work = np.float64 if store == np.float64 else np.float32
            x = (random_matrix(rng, shape, np.dtype(work)) * work(scale)).astype(store)
            x.flags.writeable = False
            return x

        m, n = case.shape.M, case.shape.N
        drawn = {}
        if epi.bias:
            drawn["bias"] = draw((1, n if epi.bias == "N" else m))
        if epi.residual:
            drawn["residual"] = draw((m, n))
        return replace(data, epilogue=drawn)

    def arrays(
        self, cp: Any, data: CaseInputs, like_c: MakeLikeC, guards: bool, c_input: np.ndarray | None = None
    ) -> dict[str, GuardedMatrix]:
        """The bias (a 1-row buffer of its own), the residual, aux (the poison) and, where the kernel writes D, C (its
        prior data, or the poison when beta = 0: C is not read then; ``c_input`` in their place where given), each as
        C lies."""
        found = {}
        if "bias" in data.epilogue:
            bias = data.epilogue["bias"]
            found["bias"] = guarded(cp, self.out, False, bias.shape, bias, guards=guards)
        if "residual" in data.epilogue:
            found["residual"] = like_c(data.epilogue["residual"])
        if self.epilogue.aux:
            found["aux"] = like_c(None)
        if self.d:
            found["C"] = like_c(data.c0 if c_input is None else c_input)
        return found

    def truth(self, cp: Any, base: Truth, data: CaseInputs, out: DType) -> Truth:
        """D's truth and bound (:class:`~pytest_gemm.judge.epilogue.EpilogueTruth`)."""
        if not self.epilogue.fused:
            return base
        bias, residual = (data.epilogue.get(name) for name in ("bias", "residual"))
        bias64, residual64 = (
            None if x is None else cp.asarray(np.asarray(x, dtype=np.float64)) for x in (bias, residual)
        )
        erf = numpy_erf if getattr(cp, "ndarray", None) is np.ndarray else _cupy_erf()
        return EpilogueTruth.of_epilogue(cp, base, self.epilogue, bias64, residual64, out, erf)

    def faults(self, prepared: Any, ops: Operands, truth: Truth) -> list[Fault]:
        """Writes into the guards of the epilogue's buffers; the bias, the residual or C (read only) changed; aux not
        the pre-activation value within its bound."""
        cp, data = prepared.cp, prepared.data
        found: list[Fault] = []
        for name, g in ops.epilogue.items():
            found += g.guard_faults(cp, "input C" if name == "C" else name)
        inputs = {**data.epilogue, **({"C": data.c0} if self.d else {})}
        bits = uint_type(cp, self.out.itemsize)
        for name, host in inputs.items():
            g = ops.epilogue[name]
            now = g.matrix(bits)
            if host is None:  # C, an input only, poisoned (beta = 0): it must keep the poison
                start = cp.full(now.shape, self.out.poison_bits, dtype=bits)
            else:
                start = upload_bits(cp, host) if name == "bias" else data.stored_bits(cp, host, "C")
            changed = count_changed(cp, start, now)
            if changed:
                found.append(Fault(Check.INPUT_MODIFIED, f"{name} (inputs must be read-only)", changed))
        if self.epilogue.aux and isinstance(truth, EpilogueTruth):
            aux = _aux_fault(prepared, ops.epilogue["aux"], truth)
            found += [aux] if aux else []
        return found

    def misreading(self, prepared: Any, got: Any, stats: ErrorStats, truth: Truth) -> Misread | None:
        """Which slip of the epilogue a wrong D matches (:func:`~pytest_gemm.judge.epilogue.epilogue_misreading`)."""
        if not isinstance(truth, EpilogueTruth):
            return None
        dt, out = prepared.dtypes
        return epilogue_misreading(prepared.cp, truth, got, stats, self.case.shape.K, dt, out)


def _aux_fault(prepared: Any, g: GuardedMatrix, truth: EpilogueTruth) -> Fault | None:
    """aux judged against the pre-activation value's truth, with what its wrong elements hold where that is telling."""
    cp, (dt, out), pre = prepared.cp, prepared.dtypes, truth.pre
    assert pre is not None
    got = prepared.data.logical(g.as_float64(cp, out), "C")
    ratio = element_ratios(cp, got, pre.value, pre.gscale, prepared.case.shape.K, dt, out, pre.hscale, pre.subnormal)
    bad = ratio > 1.0
    count = int(bad.sum())
    if not count:
        return None
    bits = prepared.data.logical(g.matrix(uint_type(cp, out.itemsize)), "C")
    unwritten = int((bad & (bits == out.poison_bits)).sum())
    activated = truth.value if truth.residual is None else truth.value - truth.residual  # act(p), D less the residual
    bound = element_bound(cp, truth.gscale, activated, prepared.case.shape.K, dt, out, truth.hscale, truth.subnormal)
    as_act = int((bad & (cp.abs(got - activated) <= bound)).sum())
    what = f"worst {float(ratio.max()):.3g} times its bound"
    if unwritten == count:
        what = "never written: it still holds the poison"
    elif as_act == count:
        what = "it holds the activation's output, not its argument"
    return Fault(Check.AUX_WRONG, what, count)


def _cupy_erf() -> Callable[[Any], Any]:
    from cupyx.scipy.special import erf

    return erf


def epilogue_strategy(case: Case) -> NoEpilogue:
    """The epilogue of ``case``: the one place the worker chooses it."""
    return NoEpilogue(case) if case.spec.epilogue is None else FusedEpilogue(case)
