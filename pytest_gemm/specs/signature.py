"""The kernel's parameters as the header declares them, against the compiled kernel's own: each one's size in bytes.

CUDA passes a kernel's arguments as raw bytes, so a header that says ``int`` sizes for a kernel that takes
``size_t`` ones (or leaves out an argument) would launch it on garbage. The worker reads the compiled kernel's
parameter sizes from the driver (``cuFuncGetParamInfo``) and refuses such a launch with :func:`signature_problems`.
"""

from __future__ import annotations

from ..records.dtypes import get_dtype
from .header_keys import STRIDE_ARGS
from .size_types import SIZE_TYPES
from .spec import KernelSpec
from .tensor_maps import MAP_ARGS

__all__ = ["POINTER_BYTES", "TENSOR_MAP_BYTES", "declared_sizes", "signature_problems"]

POINTER_BYTES = 8
TENSOR_MAP_BYTES = 128  # a CUtensorMap, passed by value
_SIZES = ("M", "N", "K", "lda", "ldb", "ldc", "batch", "ld_scale_a", "ld_scale_b", "num_groups")


def declared_sizes(spec: KernelSpec, dtype: str) -> list[tuple[str, int, str]]:
    """Each argument the header lists: its name, the bytes the harness passes, and what decides them."""
    size_type, stride_type = spec.size_ctype, spec.stride_ctype
    scalar = get_dtype(dtype).scalar
    found = []
    params = {name for name, _ in spec.params}
    for arg in spec.args:
        if arg in params:
            found.append((arg, 4, "a param, passed as an int"))
        elif arg in _SIZES:
            found.append((arg, size_type.bytes, f"size_type {size_type.name!r}"))
        elif arg in STRIDE_ARGS:
            found.append((arg, stride_type.bytes, f"stride_type {stride_type.name!r}"))
        elif arg in ("alpha", "beta") and spec.scalars == "fp16":
            found.append((arg, 2, 'scalars = "fp16": __half'))
        elif arg in ("alpha", "beta"):
            found.append(
                (
                    arg,
                    8 if scalar == "float64" else 4,
                    f"a {dtype} kernel's {'double' if scalar == 'float64' else 'float'} scalars",
                )
            )
        elif arg in MAP_ARGS and spec.tensor_map(MAP_ARGS[arg]).pointer:
            found.append((arg, POINTER_BYTES, "a pointer to a CUtensorMap (pointer = true)"))
        elif arg in MAP_ARGS:
            found.append((arg, TENSOR_MAP_BYTES, "a CUtensorMap"))
        else:
            found.append((arg, POINTER_BYTES, "a pointer"))
    return found


def signature_problems(spec: KernelSpec, dtype: str, compiled: list[int]) -> list[str]:
    """How the header's ``args`` (with ``size_type`` and the dtype's scalars) differ from the compiled kernel's
    parameter sizes ``compiled`` (bytes, in order); empty when they agree."""
    declared = declared_sizes(spec, dtype)
    problems = []
    if len(compiled) != len(declared):
        problems.append(
            f"the compiled kernel takes {len(compiled)} parameter(s), but args lists {len(declared)} "
            f"({', '.join(name for name, _, _ in declared)})"
        )
    for i, ((name, size, why), actual) in enumerate(zip(declared, compiled), start=1):
        if size != actual:
            hint = ""
            if name in _SIZES or name in STRIDE_ARGS:
                key = "size_type" if name in _SIZES else "stride_type"
                fits = [t.name for t in SIZE_TYPES.values() if t.bytes == actual]
                hint = f"; declare {key} = {' or '.join(repr(f) for f in fits)}" if fits else ""
            problems.append(
                f"parameter {i} ({name}) takes {actual} bytes in the compiled kernel, but the harness passes "
                f"{size} ({why}){hint}"
            )
    return problems
