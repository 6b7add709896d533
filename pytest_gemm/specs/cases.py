"""Expand a kernel spec into cases: variant x dtype x shape x alpha/beta, each with its own seed."""

from __future__ import annotations

import hashlib
import math
from dataclasses import dataclass

from ..records.request import Request, TimingSettings
from ..records.shapes import Shape
from .expr import ExpressionError
from .limits import MAX_BLOCK, MAX_GRID, MAX_SHARED_PER_BLOCK, MAX_THREADS_PER_BLOCK
from .spec import KernelFileError, KernelSpec, Variant
from .tensor_maps import TensorMapSpec

__all__ = [
    "AB_CASES",
    "AlphaBeta",
    "Case",
    "LaunchGeometry",
    "case_seed",
    "expand",
    "launch_geometry",
    "tensor_map_box",
    "to_request",
]


@dataclass(frozen=True)
class AlphaBeta:
    """The scalars of one case. ``prior`` is False when C starts as NaN (beta = 0: C must not be read)."""

    alpha: float
    beta: float

    @property
    def prior(self) -> bool:
        return self.beta != 0

    @property
    def id(self) -> str:
        return "" if (self.alpha, self.beta) == (1.0, 0.0) else f"a{self.alpha:g}b{self.beta:g}"


#: alpha = 1, beta = 0 on a NaN-filled C; alpha != 1 with beta != 0 on prior data; alpha != 1 with beta = 0.
AB_CASES = (AlphaBeta(1.0, 0.0), AlphaBeta(0.7, 1.3), AlphaBeta(-1.5, 0.0))


@dataclass(frozen=True)
class Case:
    """One test: a kernel, a variant, a dtype, a shape and a pair of scalars."""

    spec: KernelSpec
    variant: Variant
    dtype: str
    shape: Shape
    ab: AlphaBeta
    skip_reason: str | None = None

    @property
    def id(self) -> str:
        parts = [self.variant.id, self.dtype, self.shape.id, self.ab.id]
        return "-".join(p for p in parts if p)

    @property
    def name(self) -> str:
        """``kernel[id]``: the test's name, and how messages name the case."""
        return f"{self.spec.name}[{self.id}]"


def to_request(case: Case, path: str, seed: int, timing: TimingSettings | None) -> Request:
    """The plain request a worker runs for this case (``path``: the kernel file, absolute)."""
    return Request(
        path=path,
        shown=case.spec.path,
        kernel=case.spec.name,
        params=case.variant.params,
        dtype=case.dtype,
        m=case.shape.M,
        n=case.shape.N,
        k=case.shape.K,
        alpha=case.ab.alpha,
        beta=case.ab.beta,
        seed=seed,
        timing=timing,
    )


def case_seed(base_seed: int, nodeid: str) -> int:
    """A stable 32-bit seed for one case: the same base seed and id always give the same data."""
    digest = hashlib.sha256(f"{base_seed}:{nodeid}".encode()).digest()
    return int.from_bytes(digest[:4], "little")


def expand(spec: KernelSpec, shapes: list[Shape], dtypes: list[str] | None = None) -> list[Case]:
    """All cases of one kernel, in a deterministic order; shapes that break a ``requires`` rule get a skip reason."""
    selected = [d for d in spec.dtypes if dtypes is None or d in dtypes]
    abs_ = AB_CASES if spec.has_alpha_beta else AB_CASES[:1]
    cases = []
    for variant in spec.variants():
        for dtype in selected:
            for shape in shapes:
                reason = _broken_rule(spec, variant, shape)
                cases += [Case(spec, variant, dtype, shape, ab, reason) for ab in abs_]
    return cases


def _names(shape: Shape, variant: Variant) -> dict[str, int]:
    """The values expressions see: M, N, K and the variant's params."""
    return {"M": shape.M, "N": shape.N, "K": shape.K, **variant.as_dict()}


def _broken_rule(spec: KernelSpec, variant: Variant, shape: Shape) -> str | None:
    env = _names(shape, variant)
    for rule in spec.requires:
        try:
            ok = rule(env)
        except ExpressionError as exc:
            raise KernelFileError(spec.path, str(exc), line=spec.line, key="requires") from None
        if not ok:
            values = ", ".join(f"{name}={value}" for name, value in env.items())
            return f"requires {rule.text} ({values})"
    return None


@dataclass(frozen=True)
class LaunchGeometry:
    grid: tuple[int, ...]
    block: tuple[int, ...]
    shared_mem: int

    @property
    def threads(self) -> int:
        return math.prod(self.block)


def launch_geometry(spec: KernelSpec, variant: Variant, shape: Shape) -> LaunchGeometry:
    """Evaluate ``grid``, ``block`` and ``shared_mem`` for one shape, checking CUDA's limits."""
    env = _names(shape, variant)

    def value(key: str, expr, low: int, high: int) -> int:
        try:
            v = expr(env)
        except ExpressionError as exc:
            raise KernelFileError(spec.path, str(exc), line=spec.line, key=key) from None
        if isinstance(v, float) and v.is_integer():
            v = int(v)
        if isinstance(v, bool) or not isinstance(v, int) or not low <= v <= high:
            raise KernelFileError(
                spec.path,
                f"{expr.text!r} gives {v!r} for {env}; expected an integer from {low} to {high}",
                line=spec.line,
                key=key,
            )
        return v

    block = tuple(value("block", e, 1, lim) for e, lim in zip(spec.block, MAX_BLOCK))
    grid = tuple(value("grid", e, 1, lim) for e, lim in zip(spec.grid, MAX_GRID))
    geometry = LaunchGeometry(grid, block, 0)
    if geometry.threads > MAX_THREADS_PER_BLOCK:
        raise KernelFileError(
            spec.path,
            f"{' x '.join(map(str, block))} = {geometry.threads} threads per block for {env}; "
            f"CUDA allows {MAX_THREADS_PER_BLOCK}",
            line=spec.line,
            key="block",
        )
    smem = value("shared_mem", spec.shared_mem, 0, MAX_SHARED_PER_BLOCK) if spec.shared_mem is not None else 0
    return LaunchGeometry(grid, block, smem)


def tensor_map_box(spec: KernelSpec, tensor_map: TensorMapSpec, variant: Variant) -> tuple[int, int]:
    """The ``[inner, outer]`` box of one of the kernel's tensor maps, in elements, for one variant."""
    env = variant.as_dict()
    sizes = []
    for expr in tensor_map.box:
        try:
            v = expr(env)
        except ExpressionError as exc:
            raise KernelFileError(spec.path, str(exc), line=spec.line, key="tensor_maps") from None
        if isinstance(v, float) and v.is_integer():
            v = int(v)
        if isinstance(v, bool) or not isinstance(v, int):
            raise KernelFileError(
                spec.path,
                f"{tensor_map.operand}: box {expr.text!r} gives {v!r} for {env}; expected an integer",
                line=spec.line,
                key="tensor_maps",
            )
        sizes.append(v)
    return sizes[0], sizes[1]


def variant_shared_mem(spec: KernelSpec, variant: Variant) -> int | str:
    """Dynamic shared memory of a variant in bytes, or ``"by shape"`` when it depends on M, N or K."""
    if spec.shared_mem is None:
        return 0
    if spec.shared_mem.names & {"M", "N", "K"}:
        return "by shape"
    try:
        v = spec.shared_mem(variant.as_dict())
    except ExpressionError as exc:
        raise KernelFileError(spec.path, str(exc), line=spec.line, key="shared_mem") from None
    return int(v)
