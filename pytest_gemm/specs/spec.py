"""Kernel files: find the ``pytest-gemm`` header, parse its TOML, and check every key (:mod:`.header_keys`).

The result is a :class:`KernelSpec`, a plain record that :mod:`.cases` expands into cases.
Python kernel files give the same record through :mod:`.pyfile`. Nothing here runs a kernel
file's code, imports CuPy or touches a GPU.
"""

from __future__ import annotations

import itertools
import math
import re
import sys
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..records.dtypes import FP8, OUTPUT_DTYPES, get_dtype
from .errors import KernelFileError
from .expr import Expression
from .header_keys import ARG_NAMES, DEVICE_NAMES, ENTRY, SHAPE_NAMES, HeaderChecker
from .scaling import Scales, read_scales
from .source import HEADER, decode_cu, has_header, read_kernel_bytes, unix_line_ends
from .storage import DEFAULT_SIZE_TYPE, ORDER_FLAGS, Storage
from .tensor_maps import TensorMapSpec

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

__all__ = [
    "ARG_NAMES",
    "ARRAYS",
    "DEFAULT_MAX_VARIANTS",
    "KernelFileError",
    "KernelSpec",
    "Variant",
    "has_header",
    "parse_cu_file",
    "parse_cu_source",
    "spec_from_mapping",
]

#: what a Python kernel may be given (the decorator's ``arrays``): CuPy arrays, or torch tensors on the same
#: memory, and what each needs installed in the worker
ARRAYS = {"cupy": "cupy", "torch": "torch"}

_TOML_WHERE = re.compile(r"\s*\(at line (\d+), column (\d+)\)")

#: variants one kernel may have by default (--gemm-max-variants): 128 times the bundled kernels' most (8, in
#: kernels/09_wmma.cu), a sweep of 4 values of 5 params. Its 2,048 compile items for two architectures take about
#: 15 minutes on one core at NVRTC's 0.44 s a variant (docs/architecture.md); 10,000 variants give 20,000.
DEFAULT_MAX_VARIANTS = 1024

REQUIRED_CU = ("entry", "args", "dtypes", "block", "grid")
OPTIONAL = (
    "shared_mem",
    "requires",
    "layout",
    "options",
    "params",
    "c_dtype",
    "name",
    "description",
    "expect_fast",
    "regression_threshold",
    "arch",
    "tensor_maps",
    "always_reads_c",
    "nondeterministic",
    "storage",
    "size_type",
    "stride_type",
    "accumulate",
    "batched",
    "arrays",
    "alpha_beta",
    "scales",
)


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
    kind: str = "cu"  # "cu" or "py"
    entry: str = ""
    args: tuple[str, ...] = ()
    block: tuple[Expression, ...] = ()
    grid: tuple[Expression, ...] = ()
    shared_mem: Expression | None = None
    requires: tuple[Expression, ...] = ()
    layout: str = "row"
    storage: Storage = field(default_factory=Storage)  # the orders the header fixes (swept ones: storage_for)
    size_type: str = DEFAULT_SIZE_TYPE  # the C type of M, N, K, lda, ldb, ldc and batch (a key of storage.SIZE_TYPES)
    stride_type: str | None = None  # the C type of the batch strides; None: the size_type
    batched: bool = False  # runs strided batches: a .cu kernel takes batch, a .py one says batched
    arrays: str = "cupy"  # what a Python kernel is given: a key of ARRAYS ("cupy" arrays or "torch" tensors)
    alpha_beta: bool = True  # a Python kernel takes alpha and beta (False: it computes C = A B, called without them)
    accumulate: str | None = None  # a declared accumulation ("fp16"); None: fp32, or fp64 for fp64
    scales: Scales | None = None  # an FP8 kernel's scales
    options: tuple[str, ...] = ()
    params: tuple[tuple[str, tuple[int, ...]], ...] = ()
    c_dtype: str | None = None
    description: str = ""
    expect_fast: str = ""  # why timing above peak or far beyond cuBLAS is expected (empty: it is suspicious)
    regression_threshold: float | None = None  # overrides --gemm-threshold for this kernel
    arch: str | None = None  # built only for this architecture (e.g. sm_90a), whatever --gemm-archs says
    tensor_maps: tuple[TensorMapSpec, ...] = ()
    always_reads_c: bool = False  # reads C whatever beta is: its beta = 0 cases get finite prior data in C
    nondeterministic: str = ""  # why its output may differ from launch to launch (empty: it must not)
    attr: str = ""  # a Python kernel: the name of its function in the file
    source: str = field(default="", repr=False, compare=False)

    @property
    def has_alpha_beta(self) -> bool:
        return self.alpha_beta if self.kind == "py" else ("alpha" in self.args and "beta" in self.args)

    def label(self, variant: Variant) -> str:
        """The kernel's name with the variant's id: ``name[id]``, or ``name`` alone for no params."""
        return self.name + (f"[{variant.id}]" if variant.id else "")

    @property
    def variant_count(self) -> int:
        """How many variants the params give (without listing them)."""
        return math.prod(len(values) for _, values in self.params)

    def variants(self) -> list[Variant]:
        if not self.params:
            return [Variant()]
        names = [name for name, _ in self.params]
        return [Variant(tuple(zip(names, combo))) for combo in itertools.product(*(v for _, v in self.params))]

    def entry_for(self, variant: Variant) -> str:
        """The entry's name expression with the variant's values put into its template arguments."""
        match = ENTRY.match(self.entry)
        assert match is not None
        base, template = match.group(1), match.group(2)
        if not template:
            return base
        values = self.names_for(variant)
        return base + re.sub(r"\b[A-Za-z_]\w*\b", lambda m: str(values.get(m.group(0), m.group(0))), template)

    def storage_for(self, variant: Variant) -> Storage:
        """Each operand's storage order in ``variant`` (a swept order is a param: ``B_NxK``)."""
        return self.storage.with_flags(variant.as_dict())

    def names_for(self, variant: Variant) -> dict[str, int]:
        """The values of the names expressions and template arguments see, besides M, N and K: the params and the
        three storage flags."""
        return {**self.storage_for(variant).flags(), **variant.as_dict()}

    def output_dtype(self, dtype: str) -> str:
        """C's dtype for inputs of ``dtype``: the header's c_dtype, or the inputs' default output."""
        return self.c_dtype or get_dtype(dtype).default_output

    def tensor_map(self, operand: str) -> TensorMapSpec:
        return next(t for t in self.tensor_maps if t.operand == operand)


def _toml_error(path: str | Path, exc: Exception, first_line: int) -> KernelFileError:
    """TOML's error at the line of the file it is on (tomllib counts from the header's first line)."""
    message = str(exc)
    where = _TOML_WHERE.search(message)
    if where is None:  # "at end of document" and the like: the header's last line is as near as it gets
        return KernelFileError(path, f"the pytest-gemm header is not valid TOML: {message}", line=first_line)
    line = first_line + int(where.group(1)) - 1
    text = f"{message[: where.start()]} (column {where.group(2)})"
    return KernelFileError(path, f"the pytest-gemm header is not valid TOML: {text}", line=line)


def parse_cu_source(path: str | Path, text: str) -> list[KernelSpec]:
    """All kernels declared in one ``.cu`` file's text; an empty list when it has no header."""
    text = unix_line_ends(text)  # as decode_cu gives it, whatever the caller read
    specs = []
    for match in HEADER.finditer(text):
        line = text.count("\n", 0, match.start(1)) + 1
        try:
            data = tomllib.loads(match.group(1))
        except tomllib.TOMLDecodeError as exc:
            raise _toml_error(path, exc, line) from None
        specs.append(spec_from_mapping(data, path=path, line=line, kind="cu", source=text))
    names = [s.name for s in specs]
    for name in names:
        if names.count(name) > 1:
            raise KernelFileError(path, f"two kernels are named {name!r}; give each a distinct 'name'", key="name")
    return specs


def parse_cu_file(path: str | Path) -> list[KernelSpec]:
    return parse_cu_source(path, decode_cu(path, read_kernel_bytes(Path(path), str(path))))


def spec_from_mapping(
    data: Mapping[str, Any],
    *,
    path: str | Path,
    line: int = 1,
    kind: str = "cu",
    source: str = "",
    attr: str = "",
    default_name: str | None = None,
) -> KernelSpec:
    """Check a header's keys and build the spec; every problem names its key and what is expected."""
    check = HeaderChecker(path, line)
    required = REQUIRED_CU if kind == "cu" else ("dtypes",)
    allowed = set(required) | set(OPTIONAL)
    for key in data:
        if key not in allowed:
            hint = "" if kind == "cu" else " (a Python kernel takes no entry, args, block or grid)"
            check.fail(key, f"unknown key; expected one of {', '.join(sorted(allowed))}{hint}")
    for key in required:
        if key not in data:
            check.fail(key, "missing; a kernel header needs " + ", ".join(required))

    params = check.params(data.get("params", {}))
    names = SHAPE_NAMES | {name for name, _ in params} | set(ORDER_FLAGS)
    entry = check.entry(data["entry"]) if kind == "cu" else ""
    if entry and "<" in entry:
        # Template arguments may only mention params and literals.
        for ident in re.findall(r"\b[A-Za-z_]\w*\b", entry[entry.index("<") :]):
            if ident not in names and not re.fullmatch(
                r"(true|false|bool|float|double|int|unsigned|signed|long|short|char|size_t|u?int(8|16|32|64)_t"
                r"|half|__half|__nv_bfloat16|nv_bfloat16)",
                ident,
            ):
                check.fail("entry", f"template argument {ident!r} is neither a param nor a literal")
    name = data.get("name", default_name or (ENTRY.match(entry).group(1) if entry else ""))
    if not isinstance(name, str) or not re.fullmatch(r"[A-Za-z_][\w.]*", name):
        check.fail("name", f"expected an identifier such as 'sgemm_tiled', got {name!r}")
    c_dtype = data.get("c_dtype")
    if c_dtype is not None and c_dtype not in OUTPUT_DTYPES:
        check.fail("c_dtype", f"unknown output dtype {c_dtype!r}; expected one of {', '.join(OUTPUT_DTYPES)}")
    dtypes = check.dtypes(data["dtypes"])
    if c_dtype is not None:
        check.c_dtype(c_dtype, dtypes)
    description = data.get("description", "")
    if not isinstance(description, str):
        check.fail("description", "expected a string")
    expect_fast = data.get("expect_fast", "")
    if not isinstance(expect_fast, str) or ("expect_fast" in data and not expect_fast.strip()):
        check.fail("expect_fast", "expected a non-empty string saying why this kernel may beat cuBLAS or the peak")
    threshold = data.get("regression_threshold")
    if threshold is not None and (
        isinstance(threshold, bool) or not isinstance(threshold, (int, float)) or not 0 < threshold <= 10
    ):
        check.fail(
            "regression_threshold", f"expected a fraction such as 0.1 (10%), above 0 and at most 10, got {threshold!r}"
        )
    args = check.args(data["args"]) if kind == "cu" else ()
    layout = check.choice("layout", data.get("layout", "row"), ("row", "col"))
    for key in ("size_type", "stride_type"):
        if kind == "py" and key in data:
            check.fail(key, f"a Python kernel takes Python ints; {key} is for .cu kernels")
    batched = "batch" in args
    if "batched" in data:
        if kind == "cu":
            check.fail("batched", "a .cu kernel runs strided batches by taking batch (and its strides) in args")
        batched = data["batched"]
        if not isinstance(batched, bool):
            check.fail("batched", f"expected true or false, got {batched!r}")
    arrays = data.get("arrays", "cupy")
    if arrays != "cupy" and kind == "cu":
        check.fail("arrays", "a .cu kernel takes pointers; arrays is for Python kernels (torch tensors or CuPy arrays)")
    if arrays not in ARRAYS:
        check.fail("arrays", f"expected one of {', '.join(map(repr, ARRAYS))}, got {arrays!r}")
    scaled = set(dtypes) <= set(FP8) or dtypes == ("int8",)  # C = (A s_a)(B s_b), or A B in integers: no scalars
    alpha_beta = data.get("alpha_beta", not scaled)
    if "alpha_beta" in data and kind == "cu":
        check.fail("alpha_beta", "a .cu kernel takes alpha and beta by naming them in args")
    if not isinstance(alpha_beta, bool):
        check.fail("alpha_beta", f"expected true or false, got {alpha_beta!r}")
    if scaled and (alpha_beta if kind == "py" else "alpha" in args):
        check.fail(
            "alpha_beta" if kind == "py" else "args",
            f"a {dtypes[0]} kernel computes C = A B with its scales (no alpha and beta), as cuBLASLt's "
            "FP8 and INT8 GEMMs do here; leave alpha and beta out",
        )
    scales = read_scales(str(path), line, data.get("scales"), set(dtypes) <= set(FP8), kind, args)
    if scales is not None and batched:
        check.fail("scales", "an FP8 kernel runs one GEMM at a time: strided batches with scales are not supported")
    if "stride_type" in data and not {"stride_a", "stride_b", "stride_c"} & set(args):
        check.fail("stride_type", "the kernel takes no batch stride (stride_a, stride_b, stride_c in args)")
    param_names = frozenset(name for name, _ in params)
    tensor_maps = check.tensor_maps(data.get("tensor_maps", {}), param_names, args)
    arch = check.arch(data["arch"]) if "arch" in data else None
    always_reads_c = data.get("always_reads_c", False)
    if not isinstance(always_reads_c, bool):
        check.fail("always_reads_c", f"expected true or false, got {always_reads_c!r}")
    nondeterministic = data.get("nondeterministic", "")
    if not isinstance(nondeterministic, str) or ("nondeterministic" in data and not nondeterministic.strip()):
        check.fail("nondeterministic", "expected a non-empty string saying why, e.g. 'split-K with atomicAdd'")
    return KernelSpec(
        path=str(path),
        name=name,
        line=line,
        kind=kind,
        entry=entry,
        args=args,
        dtypes=dtypes,
        block=check.dims("block", data["block"], names) if kind == "cu" else (),
        grid=check.dims("grid", data["grid"], names | DEVICE_NAMES) if kind == "cu" else (),
        shared_mem=check.expression("shared_mem", data["shared_mem"], names) if "shared_mem" in data else None,
        requires=check.requires(data.get("requires", []), names),
        layout=layout,
        storage=check.storage(data.get("storage", {}), layout, params),
        size_type=check.size_type(data["size_type"]) if "size_type" in data else DEFAULT_SIZE_TYPE,
        stride_type=check.size_type(data["stride_type"], "stride_type") if "stride_type" in data else None,
        batched=batched,
        arrays=arrays,
        alpha_beta=alpha_beta,
        scales=scales,
        accumulate=check.accumulate(data["accumulate"], dtypes, c_dtype) if "accumulate" in data else None,
        options=check.options(data.get("options", [])),
        params=params,
        c_dtype=c_dtype,
        description=description,
        expect_fast=expect_fast.strip(),
        regression_threshold=float(threshold) if threshold is not None else None,
        arch=arch,
        tensor_maps=tensor_maps,
        always_reads_c=always_reads_c,
        nondeterministic=nondeterministic.strip(),
        attr=attr,
        source=source,
    )
