"""What a kernel file declares about one kernel: :class:`KernelSpec`, one field per header key (:mod:`.schema`), and
its variants (:class:`Variant`).

``.cu`` headers (:mod:`.cufile`) and ``@gemm_kernel`` decorators (:mod:`.pyfile`) are read into it by the schema
(:mod:`.header`); :mod:`.cases` expands it into cases. Nothing here runs a kernel file's code, imports CuPy or touches
a GPU.
"""

from __future__ import annotations

import itertools
import math
import re
from dataclasses import dataclass, field
from pathlib import Path

from ..records.declarations import Declarations
from ..records.dtypes import get_dtype
from ..records.epilogue import Epilogue
from ..records.groups import GROUP_ARGS, Groups
from ..records.scales import Scales
from ..records.storage import ORDER_FLAGS, Storage
from .buffers import Buffer
from .errors import KernelFileError
from .expr import Expression
from .header_keys import ENTRY
from .kinds import KernelKind
from .size_types import DEFAULT_SIZE_TYPE, SIZE_TYPES, SizeType
from .tensor_maps import TensorMapSpec

__all__ = ["ARRAYS", "KernelFileError", "KernelSpec", "Variant", "distinct_names"]

#: what a Python kernel may be given (the decorator's ``arrays``): CuPy arrays, or torch tensors on the same
#: memory, and what each needs installed in the worker
ARRAYS = {"cupy": "cupy", "torch": "torch"}


@dataclass(frozen=True)
class Variant:
    """One combination of the kernel's ``params``."""

    params: tuple[tuple[str, int], ...] = ()

    @property
    def id(self) -> str:
        """``TILE32-BNxK``: each param's name and value; a swept storage order as the operand and its order."""
        return "-".join(_param_id(k, v) for k, v in self.params)

    def as_dict(self) -> dict[str, int]:
        return dict(self.params)


def _param_id(name: str, value: int) -> str:
    operand = ORDER_FLAGS.get(name)
    if operand is None:
        return f"{name}{value}"
    return operand + Storage().with_flags({name: value}).order(operand)


@dataclass(frozen=True)
class KernelSpec:
    """Everything a kernel file's header states about one kernel."""

    path: str
    name: str
    dtypes: tuple[str, ...]
    line: int = 1
    kind: KernelKind = KernelKind.CU  # a .cu file's header, or a .py file's decorator
    entry: str = ""
    args: tuple[str, ...] = ()
    block: tuple[Expression, ...] = ()
    grid: tuple[Expression, ...] = ()
    shared_mem: Expression | None = None
    requires: tuple[Expression, ...] = ()
    layout: str = "row"
    storage: Storage = field(default_factory=Storage)  # the orders the header fixes (swept ones: storage_for)
    size_type: str = DEFAULT_SIZE_TYPE  # the C type of M, N, K, lda, ldb, ldc and batch (a key of SIZE_TYPES)
    stride_type: str | None = None  # the C type of the batch strides; None: the size_type
    batched: bool = False  # runs strided batches: a .cu kernel takes batch, a .py one says batched
    arrays: str = "cupy"  # what a Python kernel is given: a key of ARRAYS ("cupy" arrays or "torch" tensors)
    alpha_beta: bool = True  # it takes alpha and beta (False: it computes C = A B, and its cases are alpha 1, beta 0)
    accumulate: str = ""  # a declared accumulation ("fp16"); empty: fp32, or fp64 for fp64
    scalars: str = ""  # "fp16": a .cu kernel takes alpha and beta as __half; empty: the dtype's (float or double)
    scales: Scales | None = None  # an FP8 kernel's scales
    groups: Groups | None = None  # a grouped kernel's layout and group sizes
    epilogue: Epilogue | None = None  # a fused epilogue, or D written apart from C
    options: tuple[str, ...] = ()
    params: tuple[tuple[str, tuple[int, ...]], ...] = ()
    c_dtype: str | None = None
    description: str = ""
    expect_fast: str = ""  # why timing above peak or far beyond cuBLAS is expected (empty: it is suspicious)
    regression_threshold: float | None = None  # overrides --gemm-threshold for this kernel
    arch: str | None = None  # built only for this architecture (e.g. sm_90a), whatever --gemm-archs says
    tensor_maps: tuple[TensorMapSpec, ...] = ()
    buffers: tuple[Buffer, ...] = ()  # what a .cu kernel takes besides its operands (specs.buffers)
    always_reads_c: bool = False  # reads C whatever beta is: its beta = 0 cases get finite prior data in C
    nondeterministic: str = ""  # why its output may differ from launch to launch (empty: it must not)
    batch_invariant: bool = False  # each row of C the same whatever M is (docs/verification.md#batch-invariance)
    attr: str = ""  # a Python kernel: the name of its function in the file
    library_gemm: str = ""  # a Python kernel's library GEMM, as written ("@", "torch.matmul"): specs.library_calls
    source: str = field(default="", repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "kind", KernelKind(self.kind))  # also as its word, "cu" or "py"

    def label(self, variant: Variant) -> str:
        """The kernel's name with the variant's id: ``name[id]``, or ``name`` alone for no params."""
        return self.name + (f"[{variant.id}]" if variant.id else "")

    @property
    def size_ctype(self) -> SizeType:
        """The C type of M, N, K, lda, ldb, ldc and batch: the header's ``size_type``."""
        return SIZE_TYPES[self.size_type]

    @property
    def stride_ctype(self) -> SizeType:
        """The C type of the batch strides (:data:`~.header_keys.STRIDE_ARGS`): ``stride_type``, or the size type."""
        return SIZE_TYPES[self.stride_type or self.size_type]

    @property
    def fills(self) -> bool:
        """Whether a function of a Python file fills one of its buffers (code that runs in the worker)."""
        return any(buffer.function for buffer in self.buffers)

    @property
    def variant_count(self) -> int:
        """How many variants the params give (without listing them)."""
        return math.prod(len(values) for _, values in self.params)

    def variants(self) -> list[Variant]:
        if not self.params:
            return [Variant()]
        names = [name for name, _ in self.params]
        return [Variant(tuple(zip(names, combo))) for combo in itertools.product(*(v for _, v in self.params))]

    @property
    def function_name(self) -> str:
        """The entry's function name, without its namespaces and template arguments (``ns::sgemm<128>``: ``sgemm``)."""
        match = ENTRY.match(self.entry)
        return match.group(2) if match else ""

    def entry_for(self, variant: Variant) -> str:
        """The entry's name expression, as NVRTC takes it (``ns::sgemm<128, 8>``), with the variant's values put into
        its template arguments."""
        match = ENTRY.match(self.entry)
        assert match is not None
        base, template = match.group(1), match.group(3)
        if not template:
            return base
        values = self.names_for(variant)
        return base + re.sub(r"\b[A-Za-z_]\w*\b", lambda m: str(values.get(m.group(0), m.group(0))), template)

    def storage_for(self, variant: Variant) -> Storage:
        """Each operand's storage order in ``variant`` (a swept order is a param: ``B_NxK``)."""
        return self.storage.with_flags(variant.as_dict())

    def declarations(self, variant: Variant) -> Declarations:
        """What the header declares that changes the checks of ``variant``'s cases."""
        return Declarations(
            self.storage_for(variant),
            self.accumulate,
            self.always_reads_c,
            self.nondeterministic,
            self.scales,
            self.groups,
            self.epilogue,
        )

    def names_for(self, variant: Variant) -> dict[str, int]:
        """The values of the names expressions and template arguments see, besides M, N and K: the params and the
        three storage flags."""
        return {**self.storage_for(variant).flags(), **variant.as_dict()}

    @property
    def group_args(self) -> tuple[str, ...]:
        """The group arrays a grouped kernel takes, in order: a ``.cu`` kernel's in its ``args``, a Python kernel's as
        its ``groups`` table lists them (after C, and alpha and beta)."""
        if self.groups is None:
            return ()
        return tuple(a for a in self.args if a in GROUP_ARGS) if self.kind.compiled else self.groups.args

    def output_dtype(self, dtype: str) -> str:
        """C's dtype for inputs of ``dtype``: the header's c_dtype, or the inputs' default output."""
        return self.c_dtype or get_dtype(dtype).default_output

    def tensor_map(self, operand: str) -> TensorMapSpec:
        return next(t for t in self.tensor_maps if t.operand == operand)


def distinct_names(path: str | Path, specs: list[KernelSpec]) -> list[KernelSpec]:
    """``specs``, the kernels one file declares, each named as no other (their tests' ids); KernelFileError else."""
    seen: set[str] = set()
    for spec in specs:
        if spec.name in seen:
            raise KernelFileError(
                path, f"two kernels are named {spec.name!r}; give each a distinct name", line=spec.line, key="name"
            )
        seen.add(spec.name)
    return specs
