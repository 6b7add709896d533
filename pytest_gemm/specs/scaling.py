"""The kernel arguments of an FP8 kernel's scales (its header's ``scales`` key is read by :mod:`.key_readers` into a
:class:`~pytest_gemm.records.scales.Scales` record), and the INT8 inputs' range and its rule on K.

Pure: the header's words and what they allow.
"""

from __future__ import annotations

__all__ = ["INT8_MAX", "SCALE_ARGS", "int8_overflow"]

#: the kernel arguments of the scales: each grid's address, and its stored rows' length (elements, padding included)
SCALE_ARGS = ("scale_a", "scale_b", "ld_scale_a", "ld_scale_b")
#: INT8 inputs are drawn in [-INT8_MAX, INT8_MAX] (symmetric, as quantised INT8 is): |C| <= K INT8_MAX^2
INT8_MAX = 127


def int8_overflow(k: int) -> str | None:
    """Why an INT8 case of inner size ``k`` is not run (its int32 accumulation could overflow: K 127^2 >= 2^31), or
    None."""
    if k * INT8_MAX * INT8_MAX < 2**31:
        return None
    most = (2**31 - 1) // (INT8_MAX * INT8_MAX)
    return f"int8 inputs: K * 127^2 = {k * INT8_MAX * INT8_MAX} reaches 2^31, past int32's accumulation (K <= {most})"
