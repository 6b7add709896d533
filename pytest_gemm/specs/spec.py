"""Kernel files: find the ``pytest-gemm`` header, parse its TOML, and check every key.

The result is a :class:`KernelSpec`, a plain record that :mod:`.cases` expands into cases.
Python kernel files give the same record through :mod:`.pyfile`. Nothing here runs a kernel
file's code, imports CuPy or touches a GPU.
"""

from __future__ import annotations

import itertools
import re
import sys
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..records.dtypes import DTYPES
from .archs import parse_arch
from .expr import Expression, ExpressionError
from .tensor_maps import MAP_ARGS, SWIZZLES, TensorMapSpec

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

__all__ = [
    "ARG_NAMES",
    "KernelFileError",
    "KernelSpec",
    "Variant",
    "parse_cu_file",
    "parse_cu_source",
    "spec_from_mapping",
]

ARG_NAMES = ("M", "N", "K", "alpha", "beta", "A", "B", "C", "lda", "ldb", "ldc", *MAP_ARGS)
SHAPE_NAMES = frozenset({"M", "N", "K"})
_HEADER = re.compile(r"/\*\s*pytest-gemm[ \t]*\r?\n(.*?)\*/", re.DOTALL)
_ENTRY = re.compile(r"^\s*([A-Za-z_]\w*)\s*(<.*>)?\s*$", re.DOTALL)
_IDENT = re.compile(r"^[A-Za-z_]\w*$")
_ARCH_FLAGS = re.compile(r"^(-arch|--gpu-architecture|-gencode|--generate-code|-code)\b")

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
)


class KernelFileError(Exception):
    """A kernel file that cannot be used, with the file, line and key at fault."""

    def __init__(self, path: str | Path, message: str, *, line: int | None = None, key: str | None = None):
        self.path, self.line, self.key, self.message = str(path), line, key, message
        where = f"{self.path}:{line}" if line else self.path
        what = f"key {key!r}: " if key else ""
        super().__init__(f"{where}: {what}{message}")


@dataclass(frozen=True)
class Variant:
    """One combination of the kernel's ``params``."""

    params: tuple[tuple[str, int], ...] = ()

    @property
    def id(self) -> str:
        return "-".join(f"{k}{v}" for k, v in self.params)

    def as_dict(self) -> dict[str, int]:
        return dict(self.params)


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
    options: tuple[str, ...] = ()
    params: tuple[tuple[str, tuple[int, ...]], ...] = ()
    c_dtype: str | None = None
    description: str = ""
    expect_fast: str = ""  # why timing above peak or far beyond cuBLAS is expected (empty: it is suspicious)
    regression_threshold: float | None = None  # overrides --gemm-threshold for this kernel
    arch: str | None = None  # built only for this architecture (e.g. sm_90a), whatever --gemm-archs says
    tensor_maps: tuple[TensorMapSpec, ...] = ()
    attr: str = ""  # a Python kernel: the name of its function in the file
    source: str = field(default="", repr=False, compare=False)

    @property
    def has_alpha_beta(self) -> bool:
        return self.kind == "py" or ("alpha" in self.args and "beta" in self.args)

    def variants(self) -> list[Variant]:
        if not self.params:
            return [Variant()]
        names = [name for name, _ in self.params]
        return [Variant(tuple(zip(names, combo))) for combo in itertools.product(*(v for _, v in self.params))]

    def entry_for(self, variant: Variant) -> str:
        """The entry's name expression with the variant's values put into its template arguments."""
        match = _ENTRY.match(self.entry)
        assert match is not None
        base, template = match.group(1), match.group(2)
        if not template:
            return base
        values = variant.as_dict()
        return base + re.sub(r"\b[A-Za-z_]\w*\b", lambda m: str(values.get(m.group(0), m.group(0))), template)

    def output_dtype(self, dtype: str) -> str:
        return self.c_dtype or dtype

    def tensor_map(self, operand: str) -> TensorMapSpec:
        return next(t for t in self.tensor_maps if t.operand == operand)


def parse_cu_source(path: str | Path, text: str) -> list[KernelSpec]:
    """All kernels declared in one ``.cu`` file's text; an empty list when it has no header."""
    specs = []
    for match in _HEADER.finditer(text):
        line = text.count("\n", 0, match.start(1)) + 1
        try:
            data = tomllib.loads(match.group(1))
        except tomllib.TOMLDecodeError as exc:
            raise KernelFileError(path, f"the pytest-gemm header is not valid TOML: {exc}", line=line) from None
        specs.append(spec_from_mapping(data, path=path, line=line, kind="cu", source=text))
    names = [s.name for s in specs]
    for name in names:
        if names.count(name) > 1:
            raise KernelFileError(path, f"two kernels are named {name!r}; give each a distinct 'name'", key="name")
    return specs


def parse_cu_file(path: str | Path) -> list[KernelSpec]:
    try:
        text = Path(path).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise KernelFileError(path, f"cannot read the file: {exc}") from None
    return parse_cu_source(path, text)


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
    check = _Checker(path, line)
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
    names = SHAPE_NAMES | {name for name, _ in params}
    entry = check.entry(data["entry"]) if kind == "cu" else ""
    if entry and "<" in entry:
        # Template arguments may only mention params and literals.
        for ident in re.findall(r"\b[A-Za-z_]\w*\b", entry[entry.index("<") :]):
            if ident not in names and not re.fullmatch(
                r"(true|false|float|double|int|half|__half|__nv_bfloat16)", ident
            ):
                check.fail("entry", f"template argument {ident!r} is neither a param nor a literal")
    name = data.get("name", default_name or (_ENTRY.match(entry).group(1) if entry else ""))
    if not isinstance(name, str) or not re.fullmatch(r"[A-Za-z_][\w.]*", name):
        check.fail("name", f"expected an identifier such as 'sgemm_tiled', got {name!r}")
    c_dtype = data.get("c_dtype")
    if c_dtype is not None and c_dtype not in DTYPES:
        check.fail("c_dtype", f"unknown dtype {c_dtype!r}; expected one of {', '.join(DTYPES)}")
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
    param_names = frozenset(name for name, _ in params)
    tensor_maps = check.tensor_maps(data.get("tensor_maps", {}), param_names, args)
    arch = check.arch(data["arch"]) if "arch" in data else None
    return KernelSpec(
        path=str(path),
        name=name,
        line=line,
        kind=kind,
        entry=entry,
        args=args,
        dtypes=check.dtypes(data["dtypes"]),
        block=check.dims("block", data["block"], names) if kind == "cu" else (),
        grid=check.dims("grid", data["grid"], names) if kind == "cu" else (),
        shared_mem=check.expression("shared_mem", data["shared_mem"], names) if "shared_mem" in data else None,
        requires=check.requires(data.get("requires", []), names),
        layout=check.choice("layout", data.get("layout", "row"), ("row", "col")),
        options=check.options(data.get("options", [])),
        params=params,
        c_dtype=c_dtype,
        description=description,
        expect_fast=expect_fast.strip(),
        regression_threshold=float(threshold) if threshold is not None else None,
        arch=arch,
        tensor_maps=tensor_maps,
        attr=attr,
        source=source,
    )


class _Checker:
    """Validators for each header key; each raises :class:`KernelFileError` naming the key."""

    def __init__(self, path: str | Path, line: int) -> None:
        self.path, self.line = path, line

    def fail(self, key: str, message: str) -> None:
        raise KernelFileError(self.path, message, line=self.line, key=key)

    def entry(self, value: Any) -> str:
        if not isinstance(value, str) or not _ENTRY.match(value):
            self.fail("entry", f'expected a kernel name such as "sgemm" or "sgemm<128, 8>", got {value!r}')
        return value.strip()

    def args(self, value: Any) -> tuple[str, ...]:
        if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
            self.fail("args", f"expected a list of parameter names from {', '.join(ARG_NAMES)}")
        for arg in value:
            if arg not in ARG_NAMES:
                self.fail("args", f"unknown argument {arg!r}; expected names from {', '.join(ARG_NAMES)}")
            if value.count(arg) > 1:
                self.fail("args", f"argument {arg!r} is listed twice")
        for needed in ("A", "B", "C"):
            if needed not in value and f"{needed}_map" not in value:
                self.fail("args", f"the kernel must take {needed} (or its tensor map {needed}_map)")
        if ("alpha" in value) != ("beta" in value):
            self.fail("args", "a kernel takes both alpha and beta, or neither")
        return tuple(value)

    def dtypes(self, value: Any) -> tuple[str, ...]:
        if isinstance(value, str):
            value = [value]
        if not isinstance(value, list) or not value:
            self.fail("dtypes", f"expected a non-empty list from {', '.join(DTYPES)}")
        for d in value:
            if d not in DTYPES:
                self.fail("dtypes", f"unknown dtype {d!r}; expected one of {', '.join(DTYPES)}")
        return tuple(dict.fromkeys(value))

    def expression(self, key: str, value: Any, names: frozenset[str]) -> Expression:
        try:
            return Expression(value, names)
        except ExpressionError as exc:
            self.fail(key, str(exc))
            raise  # unreachable

    def dims(self, key: str, value: Any, names: frozenset[str]) -> tuple[Expression, ...]:
        if isinstance(value, (int, str)) and not isinstance(value, bool):
            value = [value]
        if not isinstance(value, list) or not 1 <= len(value) <= 3:
            self.fail(key, f"expected 1 to 3 integers or expressions, got {value!r}")
        return tuple(self.expression(key, v, names) for v in value)

    def requires(self, value: Any, names: frozenset[str]) -> tuple[Expression, ...]:
        if isinstance(value, str):
            value = [value]
        if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
            self.fail("requires", 'expected a boolean expression or a list of them, e.g. ["K % 4 == 0"]')
        return tuple(self.expression("requires", v, names) for v in value)

    def choice(self, key: str, value: Any, choices: tuple[str, ...]) -> str:
        if value not in choices:
            self.fail(key, f"expected one of {', '.join(map(repr, choices))}, got {value!r}")
        return value

    def options(self, value: Any) -> tuple[str, ...]:
        if isinstance(value, str):
            value = value.split()
        if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
            self.fail("options", 'expected a list of compiler flags, e.g. ["-use_fast_math"]')
        for flag in value:
            if _ARCH_FLAGS.match(flag):
                self.fail(
                    "options",
                    f"{flag!r}: the harness chooses the architecture (see --gemm-archs, or the header's arch key)",
                )
        return tuple(value)

    def arch(self, value: Any) -> str:
        try:
            parse_arch(value if isinstance(value, str) else repr(value))
        except ValueError as exc:
            self.fail("arch", f"{exc}; it names the one architecture this kernel is built for")
        return value

    def tensor_maps(self, value: Any, params: frozenset[str], args: tuple[str, ...]) -> tuple[TensorMapSpec, ...]:
        example = 'e.g. tensor_maps = { A = { box = [64, "BM"], swizzle = 128 } }'
        if not isinstance(value, Mapping):
            self.fail(
                "tensor_maps", f"expected a table of operand = {{ box = [inner, outer], swizzle = bytes }}, {example}"
            )
        out = []
        for operand, entry in value.items():
            if f"{operand}_map" not in MAP_ARGS:
                self.fail("tensor_maps", f"{operand!r} is not an operand; expected A, B or C")
            if not isinstance(entry, Mapping) or set(entry) - {"box", "swizzle"} or "box" not in entry:
                self.fail("tensor_maps", f"{operand}: expected {{ box = [inner, outer], swizzle = bytes }}, {example}")
            box = entry["box"]
            if not isinstance(box, list) or len(box) != 2:
                self.fail("tensor_maps", f"{operand}: box is [inner, outer] in elements, got {box!r}")
            exprs = tuple(self.expression("tensor_maps", b, params) for b in box)
            swizzle = entry.get("swizzle", 0)
            if swizzle not in SWIZZLES or isinstance(swizzle, bool):
                self.fail(
                    "tensor_maps",
                    f"{operand}: swizzle is one of {', '.join(map(str, SWIZZLES))} bytes, got {swizzle!r}",
                )
            if f"{operand}_map" not in args:
                self.fail("tensor_maps", f"{operand}: the kernel does not take {operand}_map; add it to args")
            out.append(TensorMapSpec(operand, (exprs[0], exprs[1]), swizzle))
        for arg in args:
            if arg in MAP_ARGS and MAP_ARGS[arg] not in value:
                self.fail("tensor_maps", f"{arg} is in args but tensor_maps has no entry for {MAP_ARGS[arg]}")
        return tuple(out)

    def params(self, value: Any) -> tuple[tuple[str, tuple[int, ...]], ...]:
        if not isinstance(value, Mapping):
            self.fail("params", "expected a table of name = [values], e.g. params = { TILE = [16, 32] }")
        out = []
        for name, values in value.items():
            if not _IDENT.match(name) or name in SHAPE_NAMES or name in ARG_NAMES or name.startswith("_"):
                self.fail("params", f"{name!r} cannot be a param name (identifiers other than {', '.join(ARG_NAMES)})")
            if isinstance(values, int) and not isinstance(values, bool):
                values = [values]
            if (
                not isinstance(values, list)
                or not values
                or not all(isinstance(v, int) and not isinstance(v, bool) for v in values)
            ):
                self.fail("params", f"{name}: expected a non-empty list of integers, got {values!r}")
            out.append((name, tuple(values)))
        return tuple(out)
