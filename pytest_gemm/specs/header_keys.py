"""The checks of each header key (``.cu`` headers and ``@gemm_kernel`` arguments alike).

Every check raises :class:`~.errors.KernelFileError` naming the file, the header's line, the key
and what was expected.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, TypeVar

from ..records.dtypes import INPUT_DTYPES
from ..records.epilogue import EPILOGUE_ARGS
from ..records.groups import GROUP_ARGS
from ..records.storage import ORDER_FLAGS, ORDERS, Storage
from .archs import known_arch
from .errors import KernelFileError
from .expr import Expression, ExpressionError
from .families import family_of
from .scaling import SCALE_ARGS
from .size_types import SIZE_TYPES
from .tensor_maps import MAP_ARGS, MAX_BOX, MAX_RANK, SWIZZLES, TensorMapSpec

__all__ = [
    "ARG_NAMES",
    "BATCH_ARGS",
    "DEVICE_NAMES",
    "ENTRY",
    "FILE_FLAGS",
    "GROUPED_ARGS",
    "IDENT",
    "SHAPE_NAMES",
    "STRIDE_ARGS",
    "TEMPLATE_WORDS",
    "HeaderChecker",
]

T = TypeVar("T")
#: each operand's batch stride, in elements (their C type is the header's stride_type)
STRIDE_ARGS = ("stride_a", "stride_b", "stride_c")
#: a strided batch's arguments: the batch count and each operand's batch stride
BATCH_ARGS = ("batch", *STRIDE_ARGS)
ARG_NAMES = (
    "M", "N", "K", "alpha", "beta", "A", "B", "C", "lda", "ldb", "ldc", *MAP_ARGS, *BATCH_ARGS, *SCALE_ARGS,
    "num_groups", *GROUP_ARGS, *EPILOGUE_ARGS,
)  # fmt: skip
#: a grouped kernel's arguments: the group count and the group arrays
GROUPED_ARGS = ("num_groups", *GROUP_ARGS)
SHAPE_NAMES = frozenset({"M", "N", "K", "batch", "num_groups"})
DEVICE_NAMES = frozenset({"SM_COUNT"})  # the GPU's, known only in the worker: allowed in ``grid`` (persistent grids)
#: a C++ identifier as NVRTC reads it: ASCII letters, digits and _ (a letter such as 'ï' is an unrecognized token)
IDENT = r"[A-Za-z_][A-Za-z0-9_]*"
#: the entry: a kernel's name, qualified by its namespaces (``ns::inner::sgemm``), then its template arguments; group 1
#: is the qualified name, group 2 its last part (the function's own name), group 3 the template arguments
ENTRY = re.compile(rf"^\s*((?:::\s*)?(?:{IDENT}\s*::\s*)*({IDENT}))\s*(<.*>)?\s*$", re.DOTALL)
#: why a name must be ASCII, for messages
_ASCII_WHY = "C++ names are ASCII for NVRTC"
#: the words a template argument of the entry may use besides params: literals and C++'s type names
TEMPLATE_WORDS = re.compile(
    r"(true|false|bool|float|double|int|unsigned|signed|long|short|char|size_t|u?int(8|16|32|64)_t"
    r"|half|__half|__nv_bfloat16|nv_bfloat16)"
)
#: why Hopper's fast FP8 accumulation cannot be declared (docs/verification.md#fp8-and-int8)
FAST_ACCUMULATION = (
    "Hopper's fast FP8 accumulation cannot be judged: measured on an H100 it keeps 13 bits below a sum's leading bit, "
    "truncating, and never promotes (an all-positive sum lost 18% at K = 32768), so no bound tells it from a wrong "
    "kernel; promote the tensor cores' partial sums to fp32 every 128 of K, as DeepGEMM does, and declare nothing"
)
_ARCH_FLAGS = re.compile(r"^(-arch|--gpu-architecture|-gencode|--generate-code|-code)\b")
#: NVRTC's options that write files from the pytest process (or read one the compile cache cannot see), and what
#: each does; NVRTC takes each in a long (--) and a short (-) form, its value after '='
FILE_FLAGS = {
    "time": "NVRTC would append a CSV of each compile phase's time to the file it names",
    "fdevice-time-trace": "NVRTC would write a JSON trace of the compile's time to the file it names",
    "create-pch": "NVRTC would write a precompiled header to the file it names",
    "pch": "NVRTC would write precompiled headers to a folder (in /tmp, or --pch-dir's)",
    "pch-dir": "NVRTC would write precompiled headers to the folder it names",
    "use-pch": "NVRTC would read a precompiled header that the compile cache cannot see change",
}


class HeaderChecker:
    """Validators for each header key; each raises :class:`KernelFileError` naming the key."""

    def __init__(self, path: str | Path, line: int) -> None:
        self.path, self.line = path, line

    def fail(self, key: str, message: str) -> None:
        raise KernelFileError(self.path, message, line=self.line, key=key)

    def record(self, key: str, build: Callable[..., T], **fields: Any) -> T:
        """The record ``build(**fields)`` makes; the rule it refuses a value by (a ValueError) fails ``key``."""
        try:
            return build(**fields)
        except ValueError as exc:
            self.fail(key, str(exc))
            raise  # unreachable

    def entry(self, value: Any) -> str:
        """The ``__global__`` function as NVRTC names it: ``sgemm``, ``sgemm<128, 8>`` or ``ns::inner::sgemm<BM>``."""
        example = '"sgemm", "sgemm<128, 8>" or "ns::sgemm<BM, BN>"'
        if not isinstance(value, str):
            self.fail("entry", f"expected a kernel name such as {example}, got {value!r}")
        other = next((ch for ch in value if not ch.isascii()), None)
        if other is not None:
            self.fail(
                "entry",
                f"{value!r} is not an ASCII name ({other!r}): NVRTC reads a kernel's C++ name as ASCII letters, "
                "digits, _ and :: only, so name the kernel in ASCII in the source and here",
            )
        if ENTRY.match(value) is None:
            if re.search(r">\s*::", value):
                self.fail(
                    "entry",
                    f"{value!r}: only namespaces qualify a kernel (a __global__ function is no class member), so "
                    "template arguments come last, as in ns::sgemm<128, 8>",
                )
            self.fail("entry", f"expected a kernel name such as {example}, got {value!r}")
        return value.strip()

    def args(self, value: Any, buffers: tuple[str, ...] = (), params: tuple[str, ...] = ()) -> tuple[str, ...]:
        if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
            self.fail("args", f"expected a list of parameter names from {', '.join(ARG_NAMES)}")
        for arg in value:
            if arg not in ARG_NAMES and arg not in buffers and arg not in params:
                self.fail(
                    "args",
                    f"unknown argument {arg!r}; expected names from {', '.join(ARG_NAMES)}, a param (its value passed "
                    "as an int) or a buffer the header's buffers declares",
                )
            if value.count(arg) > 1:
                self.fail("args", f"argument {arg!r} is listed twice")
        for name in buffers:
            if name not in value:
                self.fail("buffers", f"{name} is declared but the kernel does not take it; add it to args")
        for needed in ("A", "B", "C"):
            if not {needed, f"{needed}_map", f"{needed}_ptrs"} & set(value):
                self.fail(
                    "args", f"the kernel must take {needed} (or its tensor map {needed}_map, or grouped {needed}_ptrs)"
                )
        if "beta" in value and "alpha" not in value:
            self.fail("args", "a kernel that takes beta takes alpha (alpha alone: C = alpha A B)")
        strides = [arg for arg in value if arg in STRIDE_ARGS]
        if strides and "batch" not in value and not any(arg in GROUPED_ARGS for arg in value):
            self.fail(
                "args",
                f"{strides[0]} is a batch stride: a kernel that takes one takes the batch count, batch (or, grouped, "
                "its groups)",
            )
        if "batch" in value and any(arg in GROUPED_ARGS for arg in value):
            self.fail(
                "args", "a kernel runs strided batches (batch) or groups (num_groups and the group arrays), not both"
            )
        maps = [arg for arg in value if arg in MAP_ARGS]
        if maps and "batch" in value:
            self.fail(
                "args",
                f"a batched kernel with tensor maps ({', '.join(maps)}): pytest-gemm makes 2-D maps of one matrix, "
                "not yet the 3-D maps of a batch",
            )
        return tuple(value)

    def dtypes(self, value: Any) -> tuple[str, ...]:
        if isinstance(value, str):
            value = [value]
        if not isinstance(value, list) or not value:
            self.fail("dtypes", f"expected a non-empty list from {', '.join(INPUT_DTYPES)}")
        for d in value:
            if d == "int32":
                self.fail("dtypes", "int32 is INT8's output (C); declare dtypes = ['int8']")
            if d not in INPUT_DTYPES:
                self.fail("dtypes", f"unknown dtype {d!r}; expected one of {', '.join(INPUT_DTYPES)}")
        kinds = {family_of(d).name for d in value}
        if len(kinds) > 1:
            self.fail(
                "dtypes",
                f"{list(value)} mixes {' and '.join(sorted(kinds))} inputs: FP8 kernels take scales and INT8 kernels "
                "write int32, so declare them as kernels of their own",
            )
        return tuple(dict.fromkeys(value))

    def expression(self, key: str, value: Any, names: frozenset[str]) -> Expression:
        try:
            return Expression(value, names)
        except ExpressionError as exc:
            hint = ""
            if not names >= DEVICE_NAMES and any(name in str(value) for name in DEVICE_NAMES):
                hint = " (SM_COUNT, the GPU's SM count, is known only in grid)"
            self.fail(key, f"{exc}{hint}")
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
            name = flag.split("=", 1)[0].lstrip("-")
            if flag.startswith("-") and name in FILE_FLAGS:
                self.fail(
                    "options",
                    f"{flag!r}: {FILE_FLAGS[name]}, from the pytest process; pytest-gemm refuses compiler options "
                    "that write or read files of their own",
                )
            if _ARCH_FLAGS.match(flag):
                self.fail(
                    "options",
                    f"{flag!r}: the harness chooses the architecture (see --gemm-archs, or the header's arch key)",
                )
        return tuple(value)

    def arch(self, value: Any) -> str:
        try:
            known_arch(value if isinstance(value, str) else repr(value))
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
            keys = {"box", "swizzle", "split", "rank", "pointer"}
            if not isinstance(entry, Mapping) or set(entry) - keys or "box" not in entry:
                self.fail(
                    "tensor_maps",
                    f"{operand}: expected {{ box = [inner, outer], swizzle = bytes }} (with split, rank, pointer), "
                    f"{example}",
                )
            split = entry.get("split", 0)
            if type(split) is not int or not 0 <= split <= MAX_BOX:
                self.fail(
                    "tensor_maps",
                    f"{operand}: split is a number of elements from 1 to {MAX_BOX} (0: none), got {split!r}",
                )
            box = entry["box"]
            size = 3 if split else 2
            if not isinstance(box, list) or len(box) != size:
                said = "[inner, outer, pieces] with a split" if split else "[inner, outer]"
                self.fail("tensor_maps", f"{operand}: box is {said} in elements, got {box!r}")
            exprs = tuple(self.expression("tensor_maps", b, params) for b in box)
            swizzle = entry.get("swizzle", 0)
            if swizzle not in SWIZZLES or isinstance(swizzle, bool):
                self.fail(
                    "tensor_maps",
                    f"{operand}: swizzle is one of {', '.join(map(str, SWIZZLES))} bytes, got {swizzle!r}",
                )
            rank = entry.get("rank", 0)
            if type(rank) is not int or not (rank == 0 or size <= rank <= MAX_RANK):
                self.fail("tensor_maps", f"{operand}: rank is {size} to {MAX_RANK} dimensions, got {rank!r}")
            pointer = entry.get("pointer", False)
            if not isinstance(pointer, bool):
                self.fail("tensor_maps", f"{operand}: pointer is true or false, got {pointer!r}")
            if f"{operand}_map" not in args:
                self.fail("tensor_maps", f"{operand}: the kernel does not take {operand}_map; add it to args")
            out.append(TensorMapSpec(operand, exprs, swizzle, split, rank, pointer))
        for arg in args:
            if arg in MAP_ARGS and MAP_ARGS[arg] not in value:
                self.fail("tensor_maps", f"{arg} is in args but tensor_maps has no entry for {MAP_ARGS[arg]}")
        return tuple(out)

    def params(self, value: Any) -> tuple[tuple[str, tuple[int, ...]], ...]:
        if not isinstance(value, Mapping):
            self.fail("params", "expected a table of name = [values], e.g. params = { TILE = [16, 32] }")
        out = []
        for name, values in value.items():
            reserved = name in SHAPE_NAMES or name in DEVICE_NAMES or name in ARG_NAMES
            if not isinstance(name, str) or not re.fullmatch(IDENT, name) or reserved or name.startswith("_"):
                reserved_names = ", ".join((*ARG_NAMES, *sorted(DEVICE_NAMES)))
                self.fail(
                    "params",
                    f"{name!r} cannot be a param name: a param is #defined in a .cu kernel's source and named in "
                    f"expressions, so it is an ASCII identifier ({_ASCII_WHY}) not starting with _, other than "
                    f"{reserved_names}",
                )
            if isinstance(values, int) and not isinstance(values, bool):
                values = [values]
            if (
                not isinstance(values, list)
                or not values
                or not all(isinstance(v, int) and not isinstance(v, bool) for v in values)
            ):
                self.fail("params", f"{name}: expected a non-empty list of integers, got {values!r}")
            if name in ORDER_FLAGS and not set(values) <= {0, 1}:
                op = ORDER_FLAGS[name]
                self.fail(
                    "params",
                    f"{name} sweeps the storage order of {op}: 0 for {ORDERS[op][0]}, 1 for {ORDERS[op][1]}; "
                    f"got {values!r}",
                )
            repeated = next((v for i, v in enumerate(values) if v in values[:i]), None)
            if repeated is not None:
                self.fail(
                    "params",
                    f"{name}: the value {repeated} is listed twice; each value gives variants of their own, "
                    "whose tests would have the same ids",
                )
            out.append((name, tuple(values)))
        return tuple(out)

    def storage(self, value: Any, layout: str, params: tuple[tuple[str, tuple[int, ...]], ...]) -> Storage:
        """The ``storage`` table: each operand's stored shape (``{ B = "NxK" }``); the others follow ``layout``."""
        example = 'e.g. storage = { B = "NxK" } for B stored N x K (K-major), or { C = "NxM" } for a column-major C'
        if not isinstance(value, Mapping):
            self.fail("storage", f"expected a table of operand = stored shape, {example}")
        orders = {op: Storage.of_layout(layout).order(op) for op in "ABC"}
        swept = {ORDER_FLAGS[name] for name, _ in params if name in ORDER_FLAGS}
        for operand, order in value.items():
            if operand not in ORDERS:
                self.fail("storage", f"{operand!r} is not an operand; expected A, B or C, {example}")
            if isinstance(order, list):
                flag = next(f for f, op in ORDER_FLAGS.items() if op == operand)
                self.fail(
                    "storage",
                    f"{operand}: one stored shape, not a list; to run both orders, sweep the param {flag} "
                    f"(params = {{ {flag} = [0, 1] }}: 0 for {ORDERS[operand][0]}, 1 for {ORDERS[operand][1]})",
                )
            if operand in swept:
                self.fail("storage", f"{operand}: its order is swept by a param, so the header cannot also fix it")
            orders[operand] = order
        return self.record("storage", Storage, **orders)

    def size_type(self, value: Any, key: str = "size_type") -> str:
        """``size_type`` (the C type of M, N, K, lda, ldb, ldc and batch) or ``stride_type`` (the batch strides')."""
        if value not in SIZE_TYPES:
            strides = f"{', '.join(STRIDE_ARGS[:-1])} and {STRIDE_ARGS[-1]}"
            what = "M, N, K, lda, ldb, ldc and batch" if key == "size_type" else strides
            self.fail(key, f"expected the C type of {what}: one of {', '.join(map(repr, SIZE_TYPES))}; got {value!r}")
        return value

    def accumulate(self, value: Any, dtypes: tuple[str, ...], c_dtype: Any) -> str:
        """A declared accumulation: ``"fp16"`` (fp16 in and out only, as cuBLAS's CUBLAS_COMPUTE_16F), or each dtype's
        own (fp32; fp64 for fp64, int32 for INT8) written out, which is as declaring none (``""``)."""
        own = {dtype: family_of(dtype).accumulation(dtype) for dtype in dtypes}
        if set(own.values()) == {value}:
            return ""
        if value == "fast" and family_of(dtypes[0]).scaled:
            self.fail("accumulate", FAST_ACCUMULATION)
        if value in own.values():  # one dtype's own, not another's
            others = ", ".join(f"{dtype} in {acc}" for dtype, acc in own.items() if acc != value)
            self.fail(
                "accumulate",
                f"{value!r} is not what each of dtypes {list(dtypes)} accumulates in ({others}); leave accumulate "
                "out, and each dtype accumulates in its own",
            )
        if value != "fp16":
            by_acc: dict[str, list[str]] = {}
            for dtype, acc in own.items():
                by_acc.setdefault(acc, []).append(dtype)
            accepted = "; ".join(f"{acc!r} for {', '.join(them)}" for acc, them in by_acc.items())
            also = ", or 'fp16' (fp16 inputs and output only)" if "fp16" in dtypes else ""
            self.fail(
                "accumulate",
                f"expected what the kernel's dtypes accumulate in, the default ({accepted}){also}; got {value!r}",
            )
        if set(dtypes) != {"fp16"} or c_dtype not in (None, "fp16"):
            self.fail(
                "accumulate",
                "fp16 accumulation is declared for fp16 inputs and an fp16 output only (cuBLAS's CUBLAS_COMPUTE_16F "
                f"takes no other); this kernel declares dtypes {list(dtypes)}"
                + (f" and c_dtype {c_dtype!r}" if c_dtype else ""),
            )
        return value
