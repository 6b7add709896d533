"""The header's ``scales`` key, checked into a :class:`~pytest_gemm.records.scales.Scales` record, the kernel
arguments of the scales, and the INT8 inputs' range and its rule on K.

Pure: the header's words and what they allow.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ..records.dtypes import SCALE_DTYPES
from ..records.scales import GRANULARITIES, GRID_ORDERS, Scales
from .errors import KernelFileError

__all__ = ["INT8_MAX", "SCALE_ARGS", "int8_overflow", "read_scales"]

#: the kernel arguments of the scales: each grid's address, and its stored rows' length (elements, padding included)
SCALE_ARGS = ("scale_a", "scale_b", "ld_scale_a", "ld_scale_b")
#: INT8 inputs are drawn in [-INT8_MAX, INT8_MAX] (symmetric, as quantised INT8 is): |C| <= K INT8_MAX^2
INT8_MAX = 127
_EXAMPLE = 'e.g. scales = { A = "1x128", B = "128x128", type = "fp32", stored = { A = "KxM" }, align = 16 }'


def read_scales(path: str, line: int, value: Any, fp8: bool, compiled: bool, args: tuple[str, ...]) -> Scales | None:
    """The header's ``scales`` table, checked (``fp8``: the kernel's dtypes are FP8, which need one; a ``compiled``
    kernel takes ``scale_a`` and ``scale_b`` in its ``args``). None for a kernel without scales."""

    def fail(message: str) -> None:
        raise KernelFileError(path, message, line=line, key="scales")

    if value is None:
        if fp8:
            fail(f"an FP8 kernel declares how its operands are scaled, {_EXAMPLE}")
        taken = [a for a in args if a in SCALE_ARGS]
        if taken:
            raise KernelFileError(
                path, f"{taken[0]} is an FP8 kernel's scale; this kernel's dtypes take none", line=line, key="args"
            )
        return None
    if not fp8:
        fail("only FP8 kernels (dtypes fp8_e4m3, fp8_e5m2) take scales")
    if not isinstance(value, Mapping):
        fail(f"expected a table, {_EXAMPLE}")
    unknown = set(value) - {"A", "B", "type", "stored", "align"}
    if unknown:
        fail(f"unknown key {sorted(unknown)[0]!r}; expected A, B, type, stored and align, {_EXAMPLE}")
    found: dict[str, Any] = {}
    for op in "AB":
        choices = GRANULARITIES[op]
        if value.get(op) not in choices:
            named = ", ".join(map(repr, choices))
            fail(f"{op}: expected one of {named} (the granularity of its scales), got {value.get(op)!r}")
        found[op] = value[op]
    found["type"] = value.get("type", "fp32")
    if found["type"] not in SCALE_DTYPES:
        fail(f"type: expected one of {', '.join(map(repr, SCALE_DTYPES))}, got {found['type']!r}")
    stored = value.get("stored", {})
    if not isinstance(stored, Mapping) or set(stored) - {"A", "B"}:
        fail(f'stored: expected a table of operand = stored shape of its grid, e.g. {{ A = "KxM" }}, got {stored!r}')
    for op, order in stored.items():
        if order not in GRID_ORDERS[op]:
            fail(f"stored: {op}'s grid is stored {' or '.join(map(repr, GRID_ORDERS[op]))}, got {order!r}")
        found[f"{op}_stored"] = order
    align = value.get("align", 1)
    if isinstance(align, bool) or not isinstance(align, int) or align < 1 or align & (align - 1) or align > 256:
        fail(f"align: the bytes each stored row of a grid is padded to, a power of two up to 256, got {align!r}")
    if compiled:
        for arg in ("scale_a", "scale_b"):
            if arg not in args:
                raise KernelFileError(path, f"an FP8 kernel takes its scales: add {arg} to args", line=line, key="args")
    return Scales(**found, align=align)


def int8_overflow(k: int) -> str | None:
    """Why an INT8 case of inner size ``k`` is not run (its int32 accumulation could overflow: K 127^2 >= 2^31), or
    None."""
    if k * INT8_MAX * INT8_MAX < 2**31:
        return None
    most = (2**31 - 1) // (INT8_MAX * INT8_MAX)
    return f"int8 inputs: K * 127^2 = {k * INT8_MAX * INT8_MAX} reaches 2^31, past int32's accumulation (K <= {most})"
