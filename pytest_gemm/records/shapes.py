"""GEMM problem shapes: named sets and lists given on the command line or in ini files."""

from __future__ import annotations

import re
from dataclasses import dataclass

__all__ = ["SHAPE_SETS", "Shape", "ShapeError", "parse_shapes"]


class ShapeError(ValueError):
    """A shape list or set name that cannot be understood."""


@dataclass(frozen=True, order=True)
class Shape:
    """A GEMM problem's sizes: C (M x N) = A (M x K) times B (K x N). Written ``MxNxK`` in ids, files and text;
    a strided batch of ``batch`` such GEMMs is written with a ``b`` suffix, ``MxNxKb8``; a grouped GEMM's G groups
    with a ``g`` suffix, ``MxNxKg8``: M (K for a K-grouped kernel) split over the groups (records.groups)."""

    M: int
    N: int
    K: int
    batch: int = 1
    groups: int = 0  # 0: not grouped

    def __post_init__(self) -> None:
        if self.batch != 1 and self.groups:
            raise ShapeError(f"{self.M}x{self.N}x{self.K}: a shape is a batch (b) or groups (g), not both")

    @property
    def id(self) -> str:
        suffix = (f"b{self.batch}" if self.batch != 1 else "") + (f"g{self.groups}" if self.groups else "")
        return f"{self.M}x{self.N}x{self.K}" + suffix

    def __str__(self) -> str:
        return self.id

    def __format__(self, spec: str) -> str:
        return format(self.id, spec)

    @property
    def flops(self) -> int:
        return 2 * self.M * self.N * self.K * self.batch

    @classmethod
    def of(cls, text: str) -> Shape:
        """A shape from its id (``MxNxK``, ``MxNxKbB``); :class:`ShapeError` for anything else."""
        match = _ID.fullmatch(text.strip()) if isinstance(text, str) else None
        if match is None:
            raise ShapeError(
                f"expected a shape MxNxK such as 4096x4096x1024, got {text!r} "
                "(a batch of 8: MxNxKb8; 8 groups: MxNxKg8)"
            )
        m, n, k, b, g = match.groups()
        if min(int(m), int(n), int(k), int(b or 1), int(1 if g is None else g)) < 1:
            raise ShapeError(f"shape {text!r}: every dimension, the batch and the groups must be at least 1")
        return cls(int(m), int(n), int(k), int(b or 1), int(g or 0))

    def to_plain_value(self) -> str:
        """How records write a shape: its id."""
        return self.id

    @classmethod
    def from_plain_value(cls, value: object) -> Shape:
        """A shape as records write it (its id), or as a list [M, N, K] (outcomes recorded before shapes were ids)."""
        if isinstance(value, (list, tuple)) and len(value) == 3 and all(type(v) is int for v in value):
            return cls(*value)
        if not isinstance(value, str):
            raise ShapeError(f"expected a shape MxNxK, got {value!r}")
        return cls.of(value)


def _edge_shapes() -> list[Shape]:
    shapes: list[Shape] = []
    # Tile boundaries: every dimension sees T-1, T and T+1 for each tile size T.
    for t in (16, 32, 64, 128, 256):
        shapes += [Shape(t - 1, t, t + 1), Shape(t, t + 1, t - 1), Shape(t + 1, t - 1, t)]
    shapes += [Shape(64, 64, k) for k in range(1, 10)]  # K from 1 to 9
    shapes += [Shape(96, 160, 33), Shape(130, 70, 127), Shape(255, 257, 1023)]  # odd K
    shapes += [Shape(1, 512, 256), Shape(512, 1, 256), Shape(1, 1, 1000)]  # M or N equal to 1
    shapes += [Shape(16, 8192, 8192), Shape(8192, 16, 8192), Shape(8192, 8192, 16)]  # skinny
    shapes += [Shape(64, 64, 65536)]  # huge K
    return shapes


SHAPE_SETS: dict[str, list[Shape]] = {
    "quick": [Shape(256, 256, 256), Shape(384, 640, 512), Shape(1024, 1024, 1024)],
    "standard": [Shape(s, s, s) for s in (512, 1024, 2048, 4096)],
    "edge": _edge_shapes(),
    # Transformer projections (Llama-style hidden 4096, MLP 11008/14336) at prefill and decode sizes.
    "llm": [
        Shape(16, 4096, 4096),
        Shape(2048, 4096, 4096),
        Shape(2048, 12288, 4096),
        Shape(2048, 11008, 4096),
        Shape(2048, 4096, 11008),
        Shape(4096, 14336, 4096),
    ],
    # Strided batches: attention-sized heads, a batch of odd sizes, a long batch of small GEMMs, and
    # a few large ones; run by kernels that take a batch, skipped by the others.
    "batched": [
        Shape(256, 256, 256, 4),
        Shape(67, 45, 37, 3),
        Shape(128, 128, 64, 64),
        Shape(512, 512, 128, 16),
        Shape(1, 1, 1000, 5),
        Shape(2048, 2048, 2048, 4),
    ],
    # Grouped GEMMs (MxNxKgG: M split over G groups, K for a K-grouped kernel): small ones with odd sizes, a single
    # group, more groups than rows; run by grouped kernels, skipped by the others.
    "grouped": [
        Shape(300, 256, 128, groups=4),
        Shape(1000, 192, 320, groups=8),
        Shape(513, 129, 65, groups=5),
        Shape(64, 64, 64, groups=1),
        Shape(7, 128, 128, groups=16),
    ],
    # MoE expert GEMMs (gate and up fused, then down) at prefill and decode token counts, M the routed rows
    # (tokens x top-k) of one GPU's experts. DeepSeek-V3: hidden 7168, expert width 2048, 8 local experts of 256.
    "moe-deepseek-v3": [
        Shape(8192, 4096, 7168, groups=8),
        Shape(8192, 7168, 2048, groups=8),
        Shape(256, 4096, 7168, groups=8),
        Shape(256, 7168, 2048, groups=8),
    ],
    # Mixtral 8x7B: hidden 4096, expert width 14336, 8 experts, top-2.
    "moe-mixtral": [
        Shape(4096, 28672, 4096, groups=8),
        Shape(4096, 4096, 14336, groups=8),
        Shape(64, 28672, 4096, groups=8),
    ],
    # MoE weight gradients (a K-grouped kernel: K, the routed rows, split over the experts; C one matrix an expert):
    # DeepSeek-V3's gate and up projections, and Qwen3-30B-A3B's.
    "moe-wgrad": [
        Shape(7168, 4096, 8192, groups=8),
        Shape(2048, 1536, 16384, groups=128),
    ],
    # Qwen3-30B-A3B: hidden 2048, expert width 768, 128 experts, top-8 (many small and empty groups).
    "moe-qwen3": [
        Shape(16384, 1536, 2048, groups=128),
        Shape(16384, 2048, 768, groups=128),
        Shape(128, 1536, 2048, groups=128),
    ],
}

_ONE = re.compile(r"^(\d+)(?:x(\d+)x(\d+))?(?:b(\d+))?(?:g(\d+))?$")
_ID = re.compile(r"(\d+)x(\d+)x(\d+)(?:b(\d+))?(?:g(\d+))?")


def parse_shapes(text: str) -> list[Shape]:
    """``"quick"``, ``"edge,llm"``, ``"1024,4096x4096x1024"``: set names and shapes, in order, without repeats."""
    shapes: list[Shape] = []
    for item in re.split(r"[,\s]+", text.strip()):
        if not item:
            continue
        if item in SHAPE_SETS:
            shapes += SHAPE_SETS[item]
            continue
        match = _ONE.match(item)
        if not match:
            raise ShapeError(
                f"cannot read shape {item!r}: expected a set name ({', '.join(SHAPE_SETS)}), "
                "a size like 1024 (for 1024x1024x1024) or MxNxK like 4096x4096x1024, with bB after it for a batch "
                "of B (4096x4096x1024b8), or gG after it for G groups of a grouped GEMM (4096x4096x1024g8)"
            )
        m, n, k = (int(g) for g in (match.group(1), match.group(2) or match.group(1), match.group(3) or match.group(1)))
        batch, groups = int(match.group(4) or 1), int(match.group(5) or 0)
        if min(m, n, k, batch, 1 if match.group(5) is None else groups) < 1:
            raise ShapeError(f"shape {item!r}: every dimension, the batch and the groups must be at least 1")
        shapes.append(Shape(m, n, k, batch, groups))
    if not shapes:
        raise ShapeError("no shapes given")
    return list(dict.fromkeys(shapes))
