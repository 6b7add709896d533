"""The one case compute-sanitizer runs for a kernel (``--gemm-sanitize``): small, with tails, at the first shape the
kernel's rules allow. Pure: no arrays, no GPU."""

from __future__ import annotations

from ..records.shapes import Shape
from .cases import AB_CASES, Case, expand
from .spec import KernelSpec

__all__ = ["SANITIZE_BATCH", "SANITIZE_GROUPS", "SANITIZE_SHAPES", "sanitize_case"]

#: the shapes compute-sanitizer runs on, first that a kernel's rules allow: small, and no multiple of common
#: tile sizes, so that edge handling is exercised; then gentler ones for kernels that require multiples (100x104x80:
#: tails in M, N and K for a kernel that needs K % 16, as one-byte FP8 rows under TMA do)
SANITIZE_SHAPES = (
    Shape(67, 45, 37),
    Shape(100, 100, 50),
    Shape(96, 80, 72),
    Shape(100, 104, 80),
    Shape(128, 128, 128),
    Shape(256, 256, 256),
)


#: the batch a batched kernel runs under compute-sanitizer, and the groups a grouped kernel does (the edge sizes: an
#: empty group and a group of 5 rows among them)
SANITIZE_BATCH = 3
SANITIZE_GROUPS = 4


def sanitize_case(spec: KernelSpec, dtypes: list[str] | None = None) -> Case | None:
    """The one case compute-sanitizer runs for a kernel: its first variant and dtype, alpha = 1, beta = 0, at the
    first of SANITIZE_SHAPES its rules allow (None when none is allowed, or no dtype is selected); a batched kernel's
    at a batch of :data:`SANITIZE_BATCH` first, so that its batch strides are exercised too; a grouped kernel's at
    :data:`SANITIZE_GROUPS` groups (it runs no other shape)."""
    batched = [Shape(s.M, s.N, s.K, SANITIZE_BATCH) for s in SANITIZE_SHAPES] if spec.batched else []
    if spec.groups is not None:
        batched = [Shape(s.M, s.N, s.K, groups=SANITIZE_GROUPS) for s in SANITIZE_SHAPES]
    for shape in (*batched, *SANITIZE_SHAPES):
        for case in expand(spec, [shape], dtypes):
            if case.skip_reason is None and case.ab == AB_CASES[0]:
                return case
    return None
