"""The element types a kernel can declare, with the facts the harness needs about each."""

from __future__ import annotations

from dataclasses import dataclass, replace

__all__ = ["DTYPES", "DType", "accumulating", "get_dtype"]


@dataclass(frozen=True)
class DType:
    """One element type.

    ``storage`` is the NumPy name of the array element type (``bfloat16`` comes from
    ml_dtypes); ``u_in`` is the unit roundoff the operands may be rounded to inside the
    product (TF32 only: the inputs are stored exactly otherwise); ``u_acc`` the unit
    roundoff of accumulation; ``u_store`` the unit roundoff of storing a value in this type; ``tiny`` the
    smallest positive subnormal of the storage type (the spacing of its subnormal range) and ``acc_tiny`` that of
    the accumulation type (#34 item 6: the per-element bound's absolute term for outputs that underflow).
    """

    name: str
    storage: str
    ctype: str
    itemsize: int
    u_in: float
    u_acc: float
    u_store: float
    scalar: str  # NumPy type of alpha and beta
    guard_bits: int  # a NaN bit pattern for guard regions
    poison_bits: int  # a different NaN bit pattern for unwritten outputs
    tiny: float  # smallest positive subnormal of the storage type
    acc_tiny: float  # smallest positive subnormal of the accumulation type


_U64, _U32, _U16, _UBF16, _UTF32 = 2.0**-53, 2.0**-24, 2.0**-11, 2.0**-8, 2.0**-11
#: the smallest positive subnormal of each storage type: 2^(emin - p + 1)
_T64, _T32, _T16, _TBF16 = 2.0**-1074, 2.0**-149, 2.0**-24, 2.0**-133

DTYPES: dict[str, DType] = {
    d.name: d
    for d in (
        DType("fp32", "float32", "float", 4, 0.0, _U32, _U32, "float32", 0x7FA5_A5A5, 0x7FC0_DEAD, _T32, _T32),
        # TF32: fp32 storage; operands may be rounded to 10 explicit mantissa bits
        # (round-to-nearest gives 2^-11; truncating hardware paths give up to 2^-10).
        DType("tf32", "float32", "float", 4, 2 * _UTF32, _U32, _U32, "float32", 0x7FA5_A5A5, 0x7FC0_DEAD, _T32, _T32),
        DType("fp16", "float16", "__half", 2, 0.0, _U32, _U16, "float32", 0x7D5A, 0x7E5D, _T16, _T32),
        DType("bf16", "bfloat16", "__nv_bfloat16", 2, 0.0, _U32, _UBF16, "float32", 0x7FA5, 0x7FDE, _TBF16, _T32),
        DType(
            "fp64",
            "float64",
            "double",
            8,
            0.0,
            _U64,
            _U64,
            "float64",
            0x7FF4_A5A5_A5A5_A5A5,
            0x7FF8_DEAD_BEEF_0001,
            _T64,
            _T64,
        ),
    )
}


def get_dtype(name: str) -> DType:
    """Look a dtype up by name, with an error that lists the known ones."""
    try:
        return DTYPES[name]
    except KeyError:
        raise KeyError(f"unknown dtype {name!r}; expected one of {', '.join(DTYPES)}") from None


#: what a declared accumulation (a kernel's ``accumulate`` key) changes: its unit roundoff and smallest subnormal
_ACCUMULATIONS: dict[str, tuple[float, float]] = {"fp16": (_U16, _T16)}


def accumulating(dt: DType, accumulate: str | None) -> DType:
    """``dt`` as a kernel that declares ``accumulate`` computes it (#34 item 4): ``"fp16"`` accumulates with
    fp16's unit roundoff and subnormal spacing; None is the dtype's own (fp32, or fp64 for fp64)."""
    if accumulate is None:
        return dt
    try:
        u_acc, acc_tiny = _ACCUMULATIONS[accumulate]
    except KeyError:
        raise KeyError(f"unknown accumulation {accumulate!r}; expected one of {', '.join(_ACCUMULATIONS)}") from None
    return replace(dt, u_acc=u_acc, acc_tiny=acc_tiny)
