"""What a case puts on the GPU, worked out without one: its buffers' layout (guards, row padding), the integer
arguments the harness passes, and the device memory it needs at least.

The worker builds its buffers from these (:mod:`pytest_gemm.worker.buffers`, ``worker/timer.py``), packs the kernel's
integer arguments as :data:`~.limits.INT_ARG_BITS`-bit ints, and, before it allocates anything for a case, compares
:func:`case_memory` with the device's free memory (:func:`memory_problem`). A shape past the integer arguments is
skipped at collection (:func:`int_args_problem`, in :func:`~.cases.expand`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from ..records.dtypes import get_dtype
from ..records.groups import group_plan
from ..records.shapes import Shape
from ..records.storage import Storage
from .header_keys import STRIDE_ARGS
from .limits import INT_ARG_MAX
from .spec import KernelSpec

__all__ = [
    "BATCH_GAP_ROWS",
    "GUARD_BYTES",
    "GUARD_ROWS",
    "LD_PAD",
    "MAX_COPIES",
    "GuardLayout",
    "MemoryNeed",
    "case_memory",
    "guard_layout",
    "harness_ints",
    "input_copies",
    "int_args_problem",
    "kernel_sizes",
    "memory_problem",
    "operand_layout",
    "operand_shape",
    "per_group",
    "storage_dims",
]

GUARD_BYTES = 64 * 1024  # guard before each buffer, and at least this much after it
GUARD_ROWS = 256  # the guard after a buffer also covers this many extra rows (tiles up to 256)
LD_PAD = 16  # extra elements per row when the kernel takes lda/ldb/ldc; the padding is guarded too
#: rows (of ld) left between two matrices of a batch when the kernel takes that operand's batch stride (stride_a,
#: stride_b, stride_c): guarded like the rest, so a kernel that ignores the stride it is given reads NaN or writes
#: where it is seen; a kernel that takes no stride gets its batch packed
BATCH_GAP_ROWS = 16
MAX_COPIES = 32  # input sets rotated through when one set fits in L2
F64 = 8  # bytes of a float64: the truth, the bound and the checks work in double precision
GB = 1e9


@dataclass(frozen=True)
class GuardLayout:
    """A guarded buffer, in elements: ``before`` guard elements, then ``batch`` matrices of ``rows`` rows of ``ld``,
    one every ``stride`` elements (the rows past a matrix's own, up to the next, guarded too), then ``after``."""

    before: int
    ld: int
    after: int
    stride: int = 0  # elements from one matrix of a batch to the next (the batch stride)
    batch: int = 1

    def elements(self, rows: int) -> int:
        return self.before + (self.batch - 1) * self.stride + rows * self.ld + self.after


def guard_layout(
    cols: int,
    itemsize: int,
    padded: bool,
    guards: bool = True,
    *,
    rows: int = 0,
    batch: int = 1,
    gap: bool = False,
    ld: int | None = None,
) -> GuardLayout:
    """The layout of a guarded buffer of ``cols``-wide rows: ``padded`` when the kernel takes its leading
    dimension (the rows are then :data:`LD_PAD` elements longer); without ``guards`` the matrix alone. A batch of
    ``batch`` matrices of ``rows`` rows follow each other, :data:`BATCH_GAP_ROWS` rows apart when ``gap`` (the kernel
    takes their stride), packed otherwise; ``ld``, when given, is the rows' length (a grid of scales')."""
    ld = ld or cols + (LD_PAD if padded else 0)
    before = GUARD_BYTES // itemsize if guards else 0
    after = max(before, GUARD_ROWS * ld) if guards else 0
    return GuardLayout(before, ld, after, (rows + (BATCH_GAP_ROWS if gap else 0)) * ld, batch)


def operand_shape(spec: KernelSpec, operand: str, shape: Shape) -> Shape:
    """The shape whose stored shape and batch are ``operand``'s matrices: the case's own, or for a grouped kernel's
    grouped shape, the groups' (:meth:`~pytest_gemm.records.groups.GroupPlan.operand_shape`)."""
    if spec.groups is None or not shape.groups:
        return shape
    return group_plan(spec.groups, shape).operand_shape(operand)


def kernel_sizes(spec: KernelSpec, shape: Shape) -> dict[str, int]:
    """M, N, K and num_groups as a kernel and its header's expressions get them: the shape's, num_groups 0; a grouped
    kernel's at a grouped shape, M the rows of one A (padding included; a masked slot's), K all of K, num_groups the
    groups (:attr:`~pytest_gemm.records.groups.GroupPlan.ints`)."""
    if spec.groups is None or not shape.groups:
        return {"M": shape.M, "N": shape.N, "K": shape.K, "num_groups": 0}
    return group_plan(spec.groups, shape).ints


def per_group(spec: KernelSpec, operand: str, shape: Shape) -> bool:
    """Whether ``operand`` of a grouped kernel's case is one matrix a group (a Python kernel gets it 3-D, even for one
    group)."""
    return spec.groups is not None and bool(shape.groups) and group_plan(spec.groups, shape).per_group(operand)


def operand_layout(
    spec: KernelSpec, operand: str, shape: Shape, storage: Storage, itemsize: int, guards: bool = True
) -> GuardLayout:
    """The guarded layout of ``operand`` ("A", "B" or "C") of a case: its stored shape, its ld padding when the
    kernel takes its ld, and its batch, gapped when the kernel takes its batch stride."""
    shape = operand_shape(spec, operand, shape)
    rows, cols = storage.stored_shape(operand, shape)
    low = operand.lower()
    return guard_layout(
        cols, itemsize, f"ld{low}" in spec.args, guards, rows=rows, batch=shape.batch, gap=f"stride_{low}" in spec.args
    )


def harness_ints(spec: KernelSpec, shape: Shape, storage: Storage | None = None) -> dict[str, tuple[int, str]]:
    """The integer arguments the worker passes this ``.cu`` kernel (those of M, N, K, lda, ldb, ldc, batch and the
    batch strides it takes): each one's value and, for a leading dimension or a stride, how it follows from the shape
    (``storage``: the variant's storage orders, the header's when None)."""
    storage = storage or spec.storage
    found: dict[str, tuple[int, str]] = {name: (value, "") for name, value in kernel_sizes(spec, shape).items()}
    found["batch"] = (shape.batch, "")
    for operand in "ABC":
        rows, cols = storage.stored_dims(operand)
        size = getattr(operand_shape(spec, operand, shape), cols)
        found[f"ld{operand.lower()}"] = (size + LD_PAD, f"{cols} + {LD_PAD} elements of row padding")
        layout = operand_layout(spec, operand, shape, storage, 1)
        row = f"ld{operand.lower()}" if layout.ld != size else cols
        found[f"stride_{operand.lower()}"] = (layout.stride, f"{rows} + {BATCH_GAP_ROWS} rows of {row}")
    return {name: value for name, value in found.items() if name in spec.args}


def int_args_problem(spec: KernelSpec, shape: Shape, storage: Storage | None = None) -> str | None:
    """Why the harness cannot run ``shape`` with its integer arguments (None when it can): a ``.cu`` kernel's
    M, N, K, lda, ldb and ldc are of its ``size_type`` (C ints by default); and cuBLAS, which gives every kernel's
    case its fp64 truth and its yardstick, takes M, N and K (and leading dimensions equal to them) as ints, which
    CuPy casts silently, so a Python kernel, which gets Python ints and arrays itself, is bound by them too.

    Only what the harness passes counts. A kernel that computes an index such as ``row * K + k`` in an int
    overflows at a smaller shape: that is the kernel's own bug, which verification is there to catch."""
    if spec.kind.compiled:
        for name, (value, how) in harness_ints(spec, shape, storage).items():
            size_type = spec.stride_ctype if name in STRIDE_ARGS else spec.size_ctype
            if value > size_type.max:
                said = f"{name} = {value}" + (f" ({how})" if how else "")
                return f"{said} is past the kernel's {size_type.name} arguments (at most {size_type.max})"
    for name in "MNK":
        value = getattr(shape, name)
        if value > INT_ARG_MAX:
            return (
                f"{name} = {value} is past cuBLAS's int arguments, which the fp64 truth and the cuBLAS comparison "
                f"use (at most {INT_ARG_MAX})"
            )
    return None


def input_copies(set_bytes: int, l2_bytes: int, cold_cache: bool) -> int:
    """How many sets of A, B and C the kernel (and cuBLAS) rotate through: with a cold cache, enough for twice L2
    (at most ``MAX_COPIES``) when one set of ``set_bytes`` fits in L2, else one."""
    if not cold_cache or set_bytes >= l2_bytes:
        return 1
    return min(MAX_COPIES, math.ceil(2 * l2_bytes / set_bytes))


@dataclass(frozen=True)
class MemoryNeed:
    """The device memory a case needs at least, in the phase that needs the most: each part's bytes."""

    phase: str  # "verifying" or "timing"
    parts: tuple[tuple[str, int], ...]

    @property
    def total(self) -> int:
        return sum(size for _, size in self.parts)


def case_memory(
    spec: KernelSpec,
    dtype: str,
    shape: Shape,
    c_prior: bool,
    *,
    guards: bool = True,
    timed: bool = False,
    cold_cache: bool = True,
    l2_bytes: int = 0,
    flush_bytes: int = 0,
    storage: Storage | None = None,
    replayed: bool = False,
) -> MemoryNeed:
    """What the worker allocates for a case at the peak of its verification, or of its timing when ``timed``
    and that needs more (``flush_bytes``: the L2 flush buffer, when not allocated yet). A lower bound: the
    arrays that are certainly alive together, not CuPy's or cuBLAS's scratch, a wrong output's diagnosis
    re-runs and the misreadings it is compared with, or what a Python kernel allocates itself. In elements of
    A, B and C (a, b, c):

    * verifying: A, B and C in their guarded buffers (:func:`guard_layout`); A and B (and a prior C) again, as
      the fp64 truth is computed from them; and the fp64 work arrays, at the largest of these moments (in
      bytes). A and B in fp64 (and C0: 8 (a + b) + 8 c) with the truth's product (c); the scale H of C's roundings
      (:func:`~pytest_gemm.judge.accuracy.rounding_scale`): A and B squared, their product and H, and with a prior
      C its square and absolute value, 16 (a + b) + 2 c (+ c); G = |alpha| |A| |B|: A and B, their absolute values,
      the truth, H, their product and it scaled, 16 (a + b) + 3 c (+ c). Judging C: the truth, G, H, C in fp64, the
      bound, the quotient and the ratios, and two masks, 58 c. With ``replayed`` (alpha = 1, beta = 0), a CUDA
      graph's replay is judged too, for its verdict alone (one mask, 57 c), with a guarded set of its own and C's
      start beside (worker.graphs).
    * timing: the sets of A, B and C rotated through (:func:`input_copies`), for the kernel and as many for
      cuBLAS; A, B and C's start uploaded once; the flush buffer; a checked timed output's copies (fresh inputs,
      docs/verification.md#fresh-inputs-for-timed-launches); and the last launches' check against the truth
      verification computed: a prior C's bits uploaded again, and judging C, as above.
    """
    dt, out = get_dtype(dtype), get_dtype(spec.output_dtype(dtype))
    a, b, c = (math.prod(storage_dims(spec, op, shape)) for op in "ABC")
    guarded, storage = 0, storage or spec.storage
    for operand, t in (("A", dt), ("B", dt), ("C", out)):
        rows = storage.stored_shape(operand, operand_shape(spec, operand, shape))[0]
        one = operand_layout(spec, operand, shape, storage, t.itemsize, guards).elements(rows) * t.itemsize
        guarded += one  # C's last: its guarded buffer alone is ``one``
    bits = (a + b) * dt.itemsize + (c * out.itemsize if c_prior else 0)
    prior = c if c_prior else 0
    scale = F64 * (2 * (a + b) + 3 * c + prior)
    judging = F64 * 7 * c + 2 * c
    work = max(scale, judging)
    truth = ("A and B" + (" and the prior C" if c_prior else "") + " again, for the fp64 truth", bits)
    said = "fp64 work arrays (the truth, its error bound, C and each element's error)"
    verified = (truth, (said, work))
    if replayed:  # a CUDA graph's replay judged (worker.graphs), beside a set of its own and its C's start
        epi = spec.epilogue
        own = 0 if epi is None else (int(epi.residual) + int(epi.aux) + int(epi.d)) * c * out.itemsize
        graph = F64 * 7 * c + c + guarded + one + own  # its verdict alone: one mask (judge.accuracy.Truth.passes)
        replay = said[:-1] + ", or those of a CUDA graph's replay beside its own A, B and C)"
        verified = (truth, (replay, max(work, graph)))

    epi = spec.epilogue
    epilogue: tuple[tuple[str, int], ...] = ()
    if epi is not None:  # its matrices laid out as C (residual, aux, an input C), the pre-activation truth's arrays
        matrices = int(epi.residual) + int(epi.aux) + int(epi.d)
        extra = matrices * c * out.itemsize + (F64 * 5 * c if epi.fused else 0)
        epilogue = (("a fused epilogue's matrices and its truth's arrays", extra),)
    verifying = MemoryNeed("verifying", (("A, B and C in their guarded buffers", guarded), *verified, *epilogue))
    if not timed:
        return verifying
    one_set = (a + b) * dt.itemsize + c * out.itemsize
    copies = input_copies(one_set, l2_bytes, cold_cache)
    sets = f"{copies} sets" if copies > 1 else "1 set"
    timing_parts = [
        (f"{sets} of A, B and C for the kernel and as many for cuBLAS", 2 * copies * one_set),
        ("A, B and C's starting values", one_set),
    ]
    if cold_cache and flush_bytes:
        timing_parts.append(("the L2 flush buffer", flush_bytes))
    if epi is None:  # fresh inputs for timed launches: a checked output's copy, and it undone twice when wrong
        timing_parts.append(("a checked timed output's copies", 3 * c * out.itemsize))
    if c_prior and not (epi is not None and epi.d):  # where the kernel writes C in place (worker.prepared.prior_bits)
        timing_parts.append(("the prior C again, the start of the outputs judged", c * out.itemsize))
    timing = MemoryNeed("timing", (*timing_parts, (said, judging), *epilogue))
    return timing if timing.total > verifying.total else verifying


def storage_dims(spec: KernelSpec, operand: str, shape: Shape) -> tuple[int, int, int]:
    """``operand``'s matrices: how many, and each one's logical rows and columns."""
    own = operand_shape(spec, operand, shape)
    rows, cols = {"A": (own.M, own.K), "B": (own.K, own.N), "C": (own.M, own.N)}[operand]
    return own.batch, rows, cols


def _gb(size: int | float) -> str:
    return f"{size / GB:.1f} GB" if size >= 0.1 * GB else f"{size / 1e6:.1f} MB"


def memory_problem(need: MemoryNeed, free: int, total: int, device: str) -> tuple[str, tuple[str, ...]] | None:
    """Why a case cannot run on a device with ``free`` of ``total`` bytes of memory (None when it can): a
    message with the numbers, and one line for each part of the need."""
    if need.total <= free:
        return None
    message = (
        f"needs at least {_gb(need.total)} of GPU memory while {need.phase}, but {device} has {_gb(free)} free "
        f"of {_gb(total)}; nothing was allocated"
    )
    return message, tuple(f"{what}: {_gb(size)}" for what, size in need.parts)
