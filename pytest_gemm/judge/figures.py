"""The figures FP8 and INT8 peers report beside a bound, so that results compare with theirs: DeepGEMM's
``calc_diff`` and the cosine similarity. Pure: ``xp`` is NumPy or CuPy."""

from __future__ import annotations

from typing import Any

__all__ = ["calc_diff", "cosine"]


def calc_diff(xp: Any, got: Any, truth: Any) -> float:
    """DeepGEMM's ``calc_diff``: ``1 - 2 sum(x y) / sum(x^2 + y^2)`` (0 for equal outputs; its tests accept 1e-3 for
    FP8)."""
    denominator = float((got * got).sum() + (truth * truth).sum())
    return 0.0 if denominator == 0.0 else 1.0 - 2.0 * float((got * truth).sum()) / denominator


def cosine(xp: Any, got: Any, truth: Any) -> float:
    """The cosine similarity of the output and the truth, as vectors (1 for outputs that point the same way)."""
    norms = float(xp.linalg.norm(got)) * float(xp.linalg.norm(truth))
    return 1.0 if norms == 0.0 else float((got * truth).sum()) / norms
