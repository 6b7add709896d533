"""The input families a kernel's dtypes put it in, chosen in one place (:func:`family_of`): what each family's header
may declare and which of its cases run. The worker gives each family its strategy for drawing inputs, computing the
truth and naming misreadings (``worker/inputs.py``), keyed by the family's name.

* ``float``: fp32, tf32, fp16, bf16 and fp64 inputs, ``C = alpha A B + beta C``;
* ``FP8``: e4m3 and e5m2 inputs with grids of scales, ``C = (A s_a)(B s_b)`` (docs/verification.md#fp8-and-int8);
* ``INT8``: int8 inputs summed in int32, ``C = A B``, judged bit for bit.

Pure: no arrays, no GPU.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from ..records.dtypes import FP8
from ..records.shapes import Shape
from .scaling import int8_overflow

__all__ = ["FAMILIES", "FLOAT", "INTEGER", "MIXED_OUTPUT", "SCALED", "InputFamily", "family_of"]

MIXED_OUTPUT = ("fp16", "bf16", "tf32")  # float inputs whose C may be fp32 (c_dtype)


def _no_skip(shape: Shape) -> str | None:
    return None


@dataclass(frozen=True)
class InputFamily:
    """One family of inputs: its name in messages, and what its kernels declare and compute."""

    name: str
    dtypes: tuple[str, ...]  # the input dtypes of the family
    scaled: bool = False  # its kernels take grids of scales (the header's scales key)
    alpha_beta: bool = True  # its kernels compute alpha A B + beta C (False: C = A B, with no scalars)
    outputs: tuple[str, ...] = ()  # the dtypes its C may be (empty: the inputs' own, or fp32 for MIXED_OUTPUT)
    figures: bool = False  # its peers' own figures (calc_diff, cosine) are reported beside the bound (the one rule)
    skip: Callable[[Shape], str | None] = _no_skip  # why a shape is not run (its sums would overflow)
    accumulates: tuple[tuple[str, str], ...] = ()  # (dtype, what it accumulates in) where that is not fp32
    imports: tuple[str, ...] = ()  # the libraries its peer is reached through (worker/peers.py), beyond CuPy

    def accumulation(self, dtype: str) -> str:
        """What inputs of ``dtype`` accumulate in unless the kernel declares otherwise: fp64 for fp64, int32 for INT8,
        fp32 for the others (FP8's promoted partial sums too)."""
        return dict(self.accumulates).get(dtype, "fp32")

    def other(self, dtype: str) -> str:
        """The family's other format than ``dtype`` where it has two (fp8_e4m3's fp8_e5m2): what inputs of ``dtype``
        misread are read as. ValueError for a family of one format, or more than two."""
        if dtype not in self.dtypes or len(self.dtypes) != 2:
            raise ValueError(f"{dtype} inputs have no other format: {self.name} inputs are {', '.join(self.dtypes)}")
        return next(other for other in self.dtypes if other != dtype)

    def output_problem(self, dtype: str, c_dtype: str) -> str | None:
        """Why inputs of ``dtype`` cannot write C as ``c_dtype`` (None when they can): cuBLAS, the peer, writes the
        inputs' dtype or fp32 for fp16, bf16 and tf32 inputs; bf16, fp16 or fp32 for FP8; int32 for INT8."""
        if self.outputs:
            ok = c_dtype in self.outputs
            return None if ok else f"{dtype} inputs write C as one of {', '.join(self.outputs)}; got {c_dtype!r}"
        if c_dtype == dtype or (c_dtype == "fp32" and dtype in MIXED_OUTPUT):
            return None
        return (
            f"{dtype} inputs with a {c_dtype} C: cuBLAS, the peer, writes C in the inputs' dtype, or in fp32 "
            f"for {', '.join(MIXED_OUTPUT)} inputs"
        )


FLOAT = InputFamily("float", ("fp32", "tf32", "fp16", "bf16", "fp64"), accumulates=(("fp64", "fp64"),))
SCALED = InputFamily(
    "FP8", FP8, scaled=True, alpha_beta=False, outputs=("bf16", "fp16", "fp32"), figures=True, imports=("torch",)
)
INTEGER = InputFamily(
    "INT8",
    ("int8",),
    alpha_beta=False,
    outputs=("int32",),
    figures=True,
    skip=lambda shape: int8_overflow(shape.K),
    accumulates=(("int8", "int32"),),
)
#: every family, by name
FAMILIES = {family.name: family for family in (FLOAT, SCALED, INTEGER)}


def family_of(dtype: str) -> InputFamily:
    """The family of inputs of ``dtype`` (an input dtype): the one place a dtype's family is decided."""
    return next(family for family in FAMILIES.values() if dtype in family.dtypes)
