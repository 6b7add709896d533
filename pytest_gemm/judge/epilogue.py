"""The truth and bounds of a fused epilogue, ``D = act(alpha A B + beta C + bias) + residual``, and the misreadings of a
wrong one (docs/verification.md#fused-epilogues).

The bound is derived, not tuned. Let ``p = alpha A B + beta C0 + bias`` (the pre-activation value). A correct
kernel's ``p`` errs by at most the GEMM's bound (with ``G + |bias|``: a kernel may start its sums at the bias) plus two
roundings of ``|p|`` (the bias added in fp32, then rounded to D's type); the activation, whose largest slope is ``L``
(:data:`~pytest_gemm.records.epilogue.ACTIVATIONS`), grows that by at most ``L``; evaluating it in fp32 errs by at
most ``e |p|`` (``e``: the activation's ``error``); its value, and the sum with the residual, are each rounded twice
(fp32 arithmetic, then D's type). So D's scales are ``G_D = L (G + |bias|)`` and
``H_D = L (H + |p| / 2) + (|act(p)| + |D|) / 2 + e |p| / (4 u_D)`` (the bound multiplies H by four roundings,
``accuracy.OUTPUT_ROUNDINGS``); the normwise test's floor is ``L max(||p||_F, S_p)``.

Pure: ``xp`` is NumPy or CuPy; the error function ``erf`` is the caller's (the worker's CuPy one, NumPy's loop of
``math.erf`` on the CPU).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..records.dtypes import DType
from ..records.epilogue import ACTIVATIONS, Epilogue
from ..records.outcome import ErrorStats, Misread
from ..records.verdicts import Misreading
from .accuracy import OUTPUT_ROUNDINGS, Truth, element_bound
from .misread import MATCH

__all__ = ["EpilogueTruth", "activate", "epilogue_misreading", "numpy_erf"]

_SQRT_2_OVER_PI = math.sqrt(2.0 / math.pi)

Erf = Callable[[Any], Any]
#: the roundings of each step of the epilogue: in fp32 arithmetic, then to D's type
_TWICE = 2.0


def numpy_erf(x: Any) -> Any:
    """The error function of a NumPy array, element by element (``math.erf``)."""
    return np.vectorize(math.erf, otypes=[np.float64])(x)


def activate(xp: Any, name: str | None, x: Any, erf: Erf) -> Any:
    """``name``'s activation of ``x`` (float64); ``x`` itself for None."""
    if name is None:
        return x
    if name == "relu":
        return xp.maximum(x, 0.0)
    if name == "gelu":
        return 0.5 * x * (1.0 + erf(x * (1.0 / math.sqrt(2.0))))
    if name == "gelu_tanh":
        return 0.5 * x * (1.0 + xp.tanh(_SQRT_2_OVER_PI * (x + 0.044715 * x * x * x)))
    if name == "silu":
        return x * (0.5 * (1.0 + xp.tanh(0.5 * x)))  # x sigmoid(x), without exp's overflow
    raise ValueError(f"unknown activation {name!r}; expected one of {', '.join(ACTIVATIONS)}")


@dataclass
class EpilogueTruth(Truth):
    """The truth of D and its scales (:class:`Truth`'s fields), with what the epilogue's checks need: the
    pre-activation value's own truth (aux's), the bias as broadcast over D, the residual, and the epilogue."""

    pre: Truth | None = None
    bias: Any = None  # 1 x N or M x 1; None without a bias
    residual: Any = None  # M x N; None without one
    epilogue: Epilogue | None = None
    erf: Erf | None = None

    @classmethod
    def of_epilogue(
        cls, xp: Any, base: Truth, epilogue: Epilogue, bias: Any | None, residual: Any | None, out: DType, erf: Erf
    ) -> EpilogueTruth:
        """D's truth from ``base``, the truth of ``alpha A B + beta C0``, the bias vector and the residual (float64, or
        None) and D's type ``out`` (the module docstring's bound)."""
        b = None
        if bias is not None:
            b = bias.reshape(1, -1) if epilogue.bias == "N" else bias.reshape(-1, 1)
        p = base.value if b is None else base.value + b
        count = 0 if b is None else p.size // b.size
        pre = Truth(
            p,
            base.gscale if b is None else base.gscale + xp.abs(b),
            None if base.hscale is None else base.hscale + xp.abs(p) * (_TWICE / OUTPUT_ROUNDINGS),
            math.hypot(base.spread, 0.0 if b is None else float(xp.linalg.norm(b)) * math.sqrt(count)),
            (base.subnormal or out.tiny) + (out.tiny if b is not None else 0.0),
            base.batch,
        )
        slope, act = epilogue.slope, activate(xp, epilogue.activation, p, erf)
        value = act if residual is None else act + residual
        error = 0.0 if epilogue.activation is None else ACTIVATIONS[epilogue.activation].error
        hscale = (xp.abs(act) + xp.abs(value)) * (_TWICE / OUTPUT_ROUNDINGS)
        if pre.hscale is not None:
            hscale += slope * pre.hscale
        if error:
            hscale += xp.abs(p) * (error / (OUTPUT_ROUNDINGS * out.u_store))
        spread = slope * max(float(xp.linalg.norm(p)), pre.spread)
        subnormal = slope * (pre.subnormal or out.tiny) + 2 * out.tiny
        return cls(
            value, slope * pre.gscale, hscale, spread, subnormal, base.batch, base.figures,
            pre=pre, bias=b, residual=residual, epilogue=epilogue, erf=erf,
        )  # fmt: skip

    def candidates(self, xp: Any) -> Iterator[tuple[Misreading, Any]]:
        """Each misreading of the epilogue that changes D, and the D it gives: the bias on the other axis (NaN where
        that axis runs past the vector: a read past it), the activation applied before the bias, the bias, the
        activation or the residual left out, GELU's other form."""
        epi, pre = self.epilogue, self.pre
        assert epi is not None and pre is not None and self.erf is not None
        p, b, r, name = pre.value, self.bias, self.residual, epi.activation

        def act(x: Any, which: str | None = name) -> Any:
            return activate(xp, which, x, self.erf)

        def plus_r(x: Any) -> Any:
            return x if r is None else x + r

        if b is not None:
            p0 = p - b
            yield Misreading.BIAS_OTHER_AXIS, plus_r(act(p0 + _other_axis(xp, b, p.shape, epi.bias == "N")))
            if name is not None:
                yield Misreading.ACTIVATION_BEFORE_BIAS, plus_r(act(p0) + b)
            yield Misreading.BIAS_IGNORED, plus_r(act(p0))
        if name is not None:
            yield Misreading.ACTIVATION_IGNORED, plus_r(p)
        if name in ("gelu", "gelu_tanh"):
            other = "gelu_tanh" if name == "gelu" else "gelu"
            yield Misreading.OTHER_GELU, plus_r(act(p, other))
        if r is not None:
            yield Misreading.RESIDUAL_IGNORED, act(p)


def _other_axis(xp: Any, b: Any, shape: tuple[int, int], along_n: bool) -> Any:
    """A bias vector declared along N (``along_n``; else along M) read along D's other axis (its element i added to row
    i instead of column i, or the reverse), NaN where that axis runs past the vector."""
    rows, cols = shape
    values = b.reshape(-1)
    length, other = (cols, rows) if along_n else (rows, cols)
    read = xp.full(other, xp.nan)
    read[: min(length, other)] = values[: min(length, other)]
    return read.reshape(-1, 1) if along_n else read.reshape(1, -1)


def epilogue_misreading(
    xp: Any, truth: EpilogueTruth, got: Any, stats: ErrorStats, k: int, dtype: DType, out: DType
) -> Misread | None:
    """The epilogue's misreading a wrong D matches (None if none): one whose D lies within D's bound at
    :data:`~.misread.MATCH` of all elements and of the wrong ones (a NaN of the reading matches only a NaN of D)."""
    if not stats.bad or truth.epilogue is None or truth.pre is None:
        return None
    bound = element_bound(xp, truth.gscale, truth.value, k, dtype, out, truth.hscale, truth.subnormal)
    wrong = ~(xp.abs(got - truth.value) <= bound)
    n_wrong = int(wrong.sum())
    for kind, value in truth.candidates(xp):
        close = (xp.abs(got - value) <= bound) | (xp.isnan(value) & xp.isnan(got))
        matched = int(close.sum())
        if matched >= MATCH * got.size and int((close & wrong).sum()) >= MATCH * n_wrong:
            return Misread(kind, matched)
    return None
