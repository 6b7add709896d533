"""Expand a kernel spec into cases: variant x dtype x shape x alpha/beta, each with its own seed."""

from __future__ import annotations

import hashlib
import math
from dataclasses import dataclass

from ..records.declarations import Declarations
from ..records.dtypes import DType, accumulating, get_dtype
from ..records.groups import GroupPlan, group_plan
from ..records.request import COMPILE_TIMEOUT, IMPORTS, Request, TimingSettings
from ..records.shapes import Shape
from ..records.storage import ORDER_FLAGS, Storage
from .expr import Expression, ExpressionError
from .families import family_of
from .footprint import int_args_problem, kernel_sizes
from .header_keys import DEVICE_NAMES, SHAPE_NAMES
from .limits import MAX_BLOCK, MAX_GRID, MAX_SHARED_PER_BLOCK, MAX_THREADS_PER_BLOCK
from .spec import ARRAYS, KernelFileError, KernelSpec, Variant
from .tensor_maps import TensorMapSpec

__all__ = [
    "AB_CASES",
    "AlphaBeta",
    "Case",
    "LaunchGeometry",
    "case_plan",
    "case_seed",
    "check_launch",
    "expand",
    "launch_geometry",
    "precision",
    "refused",
    "scalar_pairs",
    "tensor_map_box",
    "to_request",
    "variant_shared_mem",
    "variant_threads",
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
    def plain(self) -> bool:
        """alpha = 1, beta = 0: the scalars a kernel's launch is also checked at in a CUDA graph and at a smaller M
        (docs/verification.md#cuda-graphs, #batch-invariance)."""
        return (self.alpha, self.beta) == (1.0, 0.0)

    @property
    def id(self) -> str:
        return "" if self.plain else f"a{self.alpha:g}b{self.beta:g}"


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

    @property
    def storage(self) -> Storage:
        """Each operand's storage order in this case's variant."""
        return self.spec.storage_for(self.variant)

    @property
    def declarations(self) -> Declarations:
        """What the kernel's header declares that changes this case's checks."""
        return self.spec.declarations(self.variant)

    @property
    def plan(self) -> GroupPlan | None:
        """A grouped kernel's groups at this case's shape (None: one GEMM, or a batch)."""
        return case_plan(self.spec, self.shape)

    @property
    def imports(self) -> tuple[str, ...]:
        """Those of IMPORTS a worker may import for this case: what a Python kernel's arrays need (ARRAYS), and what
        its peer is reached through (its family's, its groups', its epilogue's; worker/peers.py), so that the pool can
        have a worker ready with them (isolation.standby)."""
        found = {ARRAYS[self.spec.arrays], *family_of(self.dtype).imports}
        for part in (self.plan, self.spec.epilogue):
            found.update(part.imports if part else ())
        return tuple(sorted(found & set(IMPORTS)))

    @property
    def c_prior(self) -> bool:
        """C starts with finite prior data: beta != 0, or the kernel declares ``always_reads_c``."""
        return self.ab.prior or self.spec.always_reads_c


def case_plan(spec: KernelSpec, shape: Shape) -> GroupPlan | None:
    """The groups of ``spec``'s kernel at ``shape``: None unless both are grouped."""
    return group_plan(spec.groups, shape) if spec.groups is not None and shape.groups else None


def precision(case: Case) -> tuple[DType, DType]:
    """The inputs' dtype with the accumulation the kernel declares, and C's dtype: what its output is judged by."""
    return accumulating(get_dtype(case.dtype), case.spec.accumulate), get_dtype(case.spec.output_dtype(case.dtype))


def to_request(
    case: Case, path: str, seed: int, timing: TimingSettings | None, compile_timeout: float = COMPILE_TIMEOUT
) -> Request:
    """The plain request a worker runs for this case (``path``: the kernel file, absolute)."""
    return Request(
        path=path,
        shown=case.spec.path,
        kernel=case.spec.name,
        params=case.variant.params,
        dtype=case.dtype,
        shape=case.shape,
        alpha=case.ab.alpha,
        beta=case.ab.beta,
        seed=seed,
        timing=timing,
        compile_timeout=compile_timeout,
        imports=case.imports,
    )


def case_seed(base_seed: int, nodeid: str) -> int:
    """A stable 32-bit seed for one case: the same base seed and id always give the same data."""
    digest = hashlib.sha256(f"{base_seed}:{nodeid}".encode()).digest()
    return int.from_bytes(digest[:4], "little")


def scalar_pairs(spec: KernelSpec) -> tuple[AlphaBeta, ...]:
    """The alpha/beta pairs each shape of the kernel runs at: all of :data:`AB_CASES`; those with beta = 0 for a kernel
    that takes alpha alone (``C = alpha A B``); alpha = 1, beta = 0 alone for a kernel that takes no alpha and beta."""
    if spec.alpha_beta and "alpha" in spec.args and "beta" not in spec.args:
        return tuple(ab for ab in AB_CASES if ab.beta == 0.0)
    return AB_CASES if spec.alpha_beta else AB_CASES[:1]


def expand(spec: KernelSpec, shapes: list[Shape], dtypes: list[str] | None = None) -> list[Case]:
    """All cases of one kernel, in a deterministic order; shapes past the harness's integer arguments, or that
    break a ``requires`` rule, get a skip reason."""
    selected = [d for d in spec.dtypes if dtypes is None or d in dtypes]
    abs_ = scalar_pairs(spec)
    cases = []
    for variant in spec.variants():
        storage = spec.storage_for(variant)
        past_ints = {shape: int_args_problem(spec, shape, storage) for shape in shapes}
        for dtype in selected:
            for shape in shapes:
                reason = _unbatched(spec, shape) or _ungrouped(spec, shape)
                reason = reason or past_ints[shape] or _broken_rule(spec, variant, shape)
                reason = reason or family_of(dtype).skip(shape)
                cases += [Case(spec, variant, dtype, shape, ab, reason) for ab in abs_]
    return cases


def _unbatched(spec: KernelSpec, shape: Shape) -> str | None:
    """Why a kernel that runs one GEMM at a time skips a batched shape."""
    if shape.batch == 1 or spec.batched:
        return None
    return (
        f"{shape.id} is a batch of {shape.batch}; the kernel takes one GEMM at a time (a batched one declares "
        f"{spec.kind.batched_how})"
    )


def _ungrouped(spec: KernelSpec, shape: Shape) -> str | None:
    """Why a grouped kernel skips a shape that is not grouped, and another kernel a grouped shape."""
    if spec.groups is not None and not shape.groups:
        return f"{shape.id} is one GEMM; the kernel is grouped and runs grouped shapes, MxNxKgG (the set 'grouped')"
    if spec.groups is None and shape.groups:
        return (
            f"{shape.id} is a grouped GEMM of {shape.groups} groups; the kernel is not grouped (it declares no groups)"
        )
    return None


def _names(spec: KernelSpec, shape: Shape, variant: Variant) -> dict[str, int]:
    """The values expressions see: M, N, K, batch, num_groups (0 for a kernel that is not grouped), the storage
    flags and the variant's params. A grouped kernel's M is the rows of one A (with padding; a masked slot's), its
    K all of K (records.groups.GroupPlan.ints)."""
    return {**kernel_sizes(spec, shape), "batch": shape.batch, **spec.names_for(variant)}


def refused(spec: KernelSpec, variant: Variant, shape: Shape) -> str | None:
    """Why ``variant`` cannot run ``shape`` by the kernel's own rules: past its integer arguments, or a ``requires``
    rule broken (None: it can)."""
    return int_args_problem(spec, shape, spec.storage_for(variant)) or _broken_rule(spec, variant, shape)


def _broken_rule(spec: KernelSpec, variant: Variant, shape: Shape) -> str | None:
    env = _names(spec, shape, variant)
    for rule in spec.requires:
        try:
            ok = rule(env)
        except ExpressionError as exc:
            raise KernelFileError(spec.path, str(exc), line=spec.line, key="requires") from None
        if not ok:
            values = _values(env)
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


_AXES = "xyz"


def _values(env: dict[str, int]) -> str:
    """The values as messages say them, without the storage flags (a swept order shows in the case's id), or a batch
    of 1."""
    shown = (
        name
        for name in env
        if name not in ORDER_FLAGS
        and not (name == "batch" and env[name] == 1)
        and not (name == "num_groups" and not env[name])
    )
    return ", ".join(f"{name}={env[name]}" for name in shown)


def _launch_value(spec: KernelSpec, key: str, axis: int, expr: Expression, env: dict[str, int], high: int) -> int:
    """One ``block``, ``grid`` or ``shared_mem`` value, checked against what CUDA accepts (at least 1, or 0 bytes)."""
    try:
        v = expr(env)
    except ExpressionError as exc:
        raise KernelFileError(spec.path, str(exc), line=spec.line, key=key) from None
    if isinstance(v, float) and v.is_integer():
        v = int(v)
    low = 0 if key == "shared_mem" else 1
    if not isinstance(v, bool) and isinstance(v, int) and low <= v <= high:
        return v  # the message below is made only for a value CUDA refuses (this runs for every case and variant)
    if key == "shared_mem":
        what, unit = "shared_mem", " bytes per block"
    else:
        what, unit = f"{key} dimension {_AXES[axis]}", ""
    said = what if expr.text.strip() == str(v) else f"{what} {expr.text!r}"
    said += f" is {v!r}" + (f" for {_values(env)}" if _values(env) else "")
    if isinstance(v, bool) or not isinstance(v, int):
        problem = f"{said}; expected an integer"
    elif v < low:
        problem = f"{said}; it must be at least {low}"
    else:
        problem = f"{said}; CUDA allows at most {high}{unit}"
    raise KernelFileError(spec.path, problem, line=spec.line, key=key)


def _threads_check(spec: KernelSpec, block: tuple[int, ...], env: dict[str, int]) -> None:
    threads = math.prod(block)
    if threads > MAX_THREADS_PER_BLOCK:
        where = f" for {_values(env)}" if _values(env) else ""
        raise KernelFileError(
            spec.path,
            f"{' x '.join(map(str, block))} = {threads} threads per block{where}; CUDA allows {MAX_THREADS_PER_BLOCK}",
            line=spec.line,
            key="block",
        )


def launch_geometry(spec: KernelSpec, variant: Variant, shape: Shape, *, sm_count: int | None) -> LaunchGeometry:
    """Evaluate ``grid``, ``block`` and ``shared_mem`` for one shape, checking CUDA's limits. ``sm_count`` is the
    GPU's (``SM_COUNT`` in ``grid``); without it, as on the CPU, a grid dimension that names it is taken as 1,
    unchecked: the worker checks it with the device's count."""
    env = _names(spec, shape, variant)
    block = tuple(_launch_value(spec, "block", i, e, env, lim) for i, (e, lim) in enumerate(zip(spec.block, MAX_BLOCK)))
    device = {} if sm_count is None else {"SM_COUNT": sm_count}
    grid = tuple(
        1 if e.names & DEVICE_NAMES and sm_count is None else _launch_value(spec, "grid", i, e, env | device, lim)
        for i, (e, lim) in enumerate(zip(spec.grid, MAX_GRID))
    )
    _threads_check(spec, block, env)
    smem = 0
    if spec.shared_mem is not None:
        smem = _launch_value(spec, "shared_mem", 0, spec.shared_mem, env, MAX_SHARED_PER_BLOCK)
    return LaunchGeometry(grid, block, smem)


def variant_threads(spec: KernelSpec, variant: Variant) -> int | None:
    """Threads per block of a variant, or None when the block depends on the shape. Every block dimension that
    does not depend on it is checked against CUDA's limits (a :class:`KernelFileError` when one is broken)."""
    env = spec.names_for(variant)
    block = []
    for i, (expr, limit) in enumerate(zip(spec.block, MAX_BLOCK)):
        if not expr.names & SHAPE_NAMES:
            block.append(_launch_value(spec, "block", i, expr, env, limit))
    if len(block) != len(spec.block):
        return None
    _threads_check(spec, tuple(block), env)
    return math.prod(block)


def check_launch(spec: KernelSpec) -> None:
    """Check, for every variant, what does not depend on the shape: a block, grid or shared memory that CUDA
    would refuse is the header's mistake, reported once, at collection, instead of failing every case."""
    for variant in spec.variants():
        env = spec.names_for(variant)
        variant_threads(spec, variant)
        for i, (expr, limit) in enumerate(zip(spec.grid, MAX_GRID)):
            if not expr.names & (SHAPE_NAMES | DEVICE_NAMES):
                _launch_value(spec, "grid", i, expr, env, limit)
        if spec.shared_mem is not None and not spec.shared_mem.names & SHAPE_NAMES:
            _launch_value(spec, "shared_mem", 0, spec.shared_mem, env, MAX_SHARED_PER_BLOCK)


def tensor_map_box(spec: KernelSpec, tensor_map: TensorMapSpec, variant: Variant) -> tuple[int, ...]:
    """The box of one of the kernel's tensor maps (``[inner, outer]``, or ``[inner, outer, pieces]``), in elements,
    for one variant."""
    env = spec.names_for(variant)
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
    return tuple(sizes)


def variant_shared_mem(spec: KernelSpec, variant: Variant) -> int | str:
    """Dynamic shared memory of a variant in bytes, or ``"by shape"`` when it depends on M, N or K."""
    if spec.shared_mem is None:
        return 0
    if spec.shared_mem.names & SHAPE_NAMES:
        return "by shape"
    try:
        v = spec.shared_mem(spec.names_for(variant))
    except ExpressionError as exc:
        raise KernelFileError(spec.path, str(exc), line=spec.line, key="shared_mem") from None
    return int(v)
