"""The element types a kernel can declare, with the facts the harness needs about each."""

from __future__ import annotations

from dataclasses import dataclass, replace

__all__ = ["DTYPES", "FP8", "INPUT_DTYPES", "OUTPUT_DTYPES", "SCALE_DTYPES", "DType", "accumulating", "get_dtype"]


@dataclass(frozen=True)
class DType:
    """One element type.

    ``storage`` is the NumPy name of the array element type (``bfloat16`` comes from
    ml_dtypes); ``u_in`` is the relative error a product may carry whatever K is: the unit roundoff
    the operands may be rounded to inside it (TF32), or the FP8 tensor cores' precision between
    promotions to fp32; 0 for the others (their inputs are exact); ``u_acc`` the unit
    roundoff of accumulation; ``u_store`` the unit roundoff of storing a value in this type; ``tiny`` the
    smallest positive subnormal of the storage type (the spacing of its subnormal range) and ``acc_tiny`` that of
    the accumulation type (the per-element bound's absolute term for outputs that underflow).
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
    output: str = ""  # C's dtype when the header names none (empty: the inputs' own)
    exact: bool = False  # integer arithmetic: the output must equal the truth bit for bit

    @property
    def by_table(self) -> bool:
        """Whether its values are read from a table of its 256 byte patterns (the FP8 formats: no arithmetic type for
        them on the device)."""
        return self.name in FP8

    @property
    def as_bits(self) -> bool:
        """Whether CuPy has no element type for it (bf16, the FP8 formats, UE8M0): the device holds its bits."""
        return self.storage == "bfloat16" or self.storage.startswith("float8")

    @property
    def default_output(self) -> str:
        """C's dtype when a kernel's header names none: bf16 for FP8 inputs, int32 for INT8, else the inputs'."""
        return self.output or self.name


_U64, _U32, _U16, _UBF16, _UTF32 = 2.0**-53, 2.0**-24, 2.0**-11, 2.0**-8, 2.0**-11
_UE4M3, _UE5M2 = 2.0**-4, 2.0**-3  # 3 and 2 explicit mantissa bits
_UFP8_MMA = 2.0**-13  # Hopper's FP8 tensor cores: 13 bits kept below a sum's leading bit, truncated
#: the smallest positive subnormal of each storage type: 2^(emin - p + 1)
_T64, _T32, _T16, _TBF16, _TE4M3, _TE5M2 = 2.0**-1074, 2.0**-149, 2.0**-24, 2.0**-133, 2.0**-9, 2.0**-16

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
        # FP8: the operands are exact (quantised by the harness, judged against the product of exactly the
        # dequantised values) and sums are promoted to fp32; u_in is the tensor cores' own precision between
        # promotions: Hopper's FP8 MMA keeps 13 bits below a sum's leading bit (measured on an H100; cuBLASLt's FP8
        # GEMM into fp32 erred by 2^-13.2 of the norm at every K). Guard and poison are the format's two NaN patterns
        # (e4m3fn: S.1111.111; e5m2: S.11111.1x).
        DType(
            "fp8_e4m3",
            "float8_e4m3fn",
            "__nv_fp8_e4m3",
            1,
            _UFP8_MMA,
            _U32,
            _UE4M3,
            "float32",
            0x7F,
            0xFF,
            _TE4M3,
            _T32,
            "bf16",
        ),
        DType(
            "fp8_e5m2",
            "float8_e5m2",
            "__nv_fp8_e5m2",
            1,
            _UFP8_MMA,
            _U32,
            _UE5M2,
            "float32",
            0x7E,
            0xFF,
            _TE5M2,
            _T32,
            "bf16",
        ),
        # INT8 in, int32 accumulated and out: exact, so the bound is int32's "subnormal spacing" alone, half a unit (an
        # error of 1 is twice the bound). The harness draws [-127, 127], so -128 (the guard) is never an input, and
        # -2^31 (the poison) never a result (|C| <= K 127^2 < 2^31, a rule of its own).
        DType("int8", "int8", "int8_t", 1, 0.0, 0.0, 0.0, "int32", 0x80, 0x80, 0.0, 0.0, "int32", True),
        DType("int32", "int32", "int32_t", 4, 0.0, 0.0, 0.0, "int32", 0x8000_0001, 0x8000_0000, 0.5, 0.0, "", True),
    )
}
#: the FP8 formats: inputs with scales
FP8 = ("fp8_e4m3", "fp8_e5m2")
#: the dtypes a kernel may declare as its inputs (int32 is INT8's output only)
INPUT_DTYPES = tuple(name for name in DTYPES if name != "int32")
#: the dtypes C may be (FP8 and INT8 are inputs only)
OUTPUT_DTYPES = tuple(name for name in DTYPES if name not in (*FP8, "int8"))
#: the element type of an FP8 kernel's scales, by the header's ``type``: fp32, or UE8M0 (one byte, the
#: power of two 2^(e - 127); 0xFF, its NaN, in the guard and never a scale)
SCALE_DTYPES: dict[str, DType] = {
    "fp32": DTYPES["fp32"],
    "ue8m0": DType("ue8m0", "float8_e8m0fnu", "__nv_fp8_e8m0", 1, 0.0, 0.0, 0.0, "float32", 0xFF, 0xFF, 0.0, 0.0),
}


def get_dtype(name: str) -> DType:
    """Look a dtype up by name, with an error that lists the known ones."""
    try:
        return DTYPES[name]
    except KeyError:
        raise KeyError(f"unknown dtype {name!r}; expected one of {', '.join(DTYPES)}") from None


#: what a declared accumulation (a kernel's ``accumulate`` key) changes: its unit roundoff and smallest subnormal
_ACCUMULATIONS: dict[str, tuple[float, float]] = {"fp16": (_U16, _T16)}


def accumulating(dt: DType, accumulate: str) -> DType:
    """``dt`` as a kernel that declares ``accumulate`` computes it: ``"fp16"`` accumulates with
    fp16's unit roundoff and subnormal spacing; ``""`` (none declared) is the dtype's own (fp32, or fp64 for fp64)."""
    if not accumulate:
        return dt
    try:
        u_acc, acc_tiny = _ACCUMULATIONS[accumulate]
    except KeyError:
        raise KeyError(f"unknown accumulation {accumulate!r}; expected one of {', '.join(_ACCUMULATIONS)}") from None
    return replace(dt, u_acc=u_acc, acc_tiny=acc_tiny)
