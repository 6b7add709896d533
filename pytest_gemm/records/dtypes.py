"""The element types a kernel can declare, with the facts the harness needs about each."""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["DTYPES", "DType", "get_dtype"]


@dataclass(frozen=True)
class DType:
    """One element type.

    ``storage`` is the NumPy name of the array element type (``bfloat16`` comes from
    ml_dtypes); ``u_in`` is the unit roundoff the operands may be rounded to inside the
    product (TF32 only: the inputs are stored exactly otherwise); ``u_acc`` the unit
    roundoff of accumulation; ``u_store`` the unit roundoff of storing a value in this type.
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


_U64, _U32, _U16, _UBF16, _UTF32 = 2.0**-53, 2.0**-24, 2.0**-11, 2.0**-8, 2.0**-11

DTYPES: dict[str, DType] = {
    d.name: d
    for d in (
        DType("fp32", "float32", "float", 4, 0.0, _U32, _U32, "float32", 0x7FA5_A5A5, 0x7FC0_DEAD),
        # TF32: fp32 storage; operands may be rounded to 10 explicit mantissa bits
        # (round-to-nearest gives 2^-11; truncating hardware paths give up to 2^-10).
        DType("tf32", "float32", "float", 4, 2 * _UTF32, _U32, _U32, "float32", 0x7FA5_A5A5, 0x7FC0_DEAD),
        DType("fp16", "float16", "__half", 2, 0.0, _U32, _U16, "float32", 0x7D5A, 0x7E5D),
        DType("bf16", "bfloat16", "__nv_bfloat16", 2, 0.0, _U32, _UBF16, "float32", 0x7FA5, 0x7FDE),
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
        ),
    )
}


def get_dtype(name: str) -> DType:
    """Look a dtype up by name, with an error that lists the known ones."""
    try:
        return DTYPES[name]
    except KeyError:
        raise KeyError(f"unknown dtype {name!r}; expected one of {', '.join(DTYPES)}") from None
