"""The header schema: every key a kernel declares, written once, with what it applies to, how it is read, its
default and its documentation (docs/kernel-files.md#header-keys).

From :data:`KEYS` come the ``.cu`` header's checks and the ``@gemm_kernel`` decorator's keywords alike
(:func:`~.header.spec_from_mapping` reads either into a :class:`~.spec.KernelSpec`, one field per key), the decorator's
signature and the key table of the docs (:mod:`.header`). Keys are read in the table's order, so that each key's
reader (:mod:`.key_readers`) can use what the keys before it gave (``storage`` its ``layout`` and ``params``).

A new key is a row here, its reader, and its field of :class:`~.spec.KernelSpec`, whose default is the key's (tests
check that they agree).
"""

from __future__ import annotations

from typing import Any

from ..records.dtypes import FP8, get_dtype
from ..records.epilogue import ACTIVATIONS
from . import key_readers as readers
from .buffers import BUFFER_TYPES
from .families import FLOAT, INTEGER, SCALED
from .header_keys import ARG_NAMES, DEVICE_NAMES, FILE_FLAGS, STRIDE_ARGS
from .key_readers import MISSING
from .scaling import SCALE_ARGS
from .schema_key import BOTH, CU, PY, Key
from .size_types import DEFAULT_SIZE_TYPE, SIZE_TYPES
from .tensor_maps import SWIZZLES

__all__ = ["BOTH", "BY_NAME", "CU", "KEYS", "PY", "Key"]


def _either(words: list[str]) -> str:
    """Choices as the docs write them: ``a, b or c``."""
    return words[0] if len(words) == 1 else f"{', '.join(words[:-1])} or {words[-1]}"


def _ticked(words: Any, default: Any = None, said: str = " (default)") -> list[str]:
    """Each word in backticks, the default one followed by ``said``."""
    return [f"`{word}`" + (said if word == default else "") for word in words]


_ACTIVATION_WORDS = _ticked([f'"{name}"' for name in ACTIVATIONS])
_SIZE_TYPE_WORDS = _ticked([f'"{name}"' for name in SIZE_TYPES], f'"{DEFAULT_SIZE_TYPE}"')

#: every header key, in the order they are read
KEYS: tuple[Key, ...] = (
    Key(
        name="params",
        read=lambda r, v: r.check.params(v),
        meaning=(
            "a table `name = [values]`; each combination is a variant. Values go into the entry's template "
            "arguments, are `#define`d at the top of the source (so is a storage flag that `storage` sets to 1), and "
            "can be used in expressions. Avoid names that CUDA headers you include use as identifiers (a macro `T` "
            "breaks `cuda_fp16.h`)"
        ),
        python="dict[str, list[int]] | None",
    ),
    Key(
        name="entry",
        read=readers.entry,
        meaning=(
            'the `__global__` function: an `extern "C"` name, or a template name expression such as `sgemm<128, 8>` '
            "or `sgemm<BM, BN>` (param names are replaced by each variant's values), qualified by its namespaces "
            "where it has them (`ns::sgemm<BM, BN>`); ASCII, as NVRTC reads C++ names"
        ),
        kinds=CU,
        required=CU,
    ),
    Key(
        name="buffers",
        read=readers.buffers,
        meaning=(
            'buffers the kernel takes besides its operands, each named in `args`: `{ dspace = { type = "int32", '
            'size = "128 * 128", fill = "schedule.py:hilbert" } }`, `type` one of '
            f"{_either(_ticked(BUFFER_TYPES))}, `size` in elements (an expression; `SM_COUNT` too), `fill` "
            '`"zeros"` (default) or a function of a Python file beside the kernel file; '
            "see [Buffers](#buffers-and-constant-arguments)"
        ),
        kinds=CU,
        elsewhere="a Python kernel allocates what it needs itself; buffers are a .cu kernel's arguments",
    ),
    Key(
        name="args",
        read=lambda r, v: r.check.args(v, tuple(b.name for b in r["buffers"]), tuple(n for n, _ in r["params"])),
        meaning=(
            f"the kernel's parameters in order, each one of `{' '.join(ARG_NAMES)}` (`{SCALE_ARGS[0]}` to "
            f"`{SCALE_ARGS[-1]}`: an FP8 kernel's scales, see [FP8 and INT8](#fp8-and-int8)); each of `A`, `B`, `C` is "
            "required as a pointer, its tensor map (`A_map`...) or, grouped, its pointer array (`A_ptrs`...); `alpha` "
            "alone computes `C = alpha A B` (its "
            "cases have beta = 0), `beta` needs `alpha`; `batch` makes "
            "it a strided-batched kernel (see [Strided batches](#strided-batches)); a param's name passes its value as "
            "an `int` (a flag or an enum the kernel takes as an argument), a buffer's name its buffer"
        ),
        kinds=CU,
        required=CU,
    ),
    Key(
        name="dtypes",
        read=lambda r, v: r.check.dtypes(v),
        meaning=(
            f"any of {', '.join(_ticked(FLOAT.dtypes))}; or FP8 ({', '.join(_ticked(SCALED.dtypes))}, with "
            f"`scales`), or {_either(_ticked(INTEGER.dtypes))}: a kernel of their own (see [FP8 and "
            "INT8](#fp8-and-int8))"
        ),
        required=BOTH,
        python="Iterable[str] | str",
    ),
    Key(
        name="c_dtype",
        read=readers.c_dtype,
        meaning=(
            "C's dtype when it differs from the inputs' (e.g. fp16 inputs, fp32 output); FP8 kernels write "
            f"{_either(_ticked(SCALED.outputs, get_dtype(FP8[0]).default_output, ' (the default)'))}, INT8 kernels "
            f"{_either(_ticked(INTEGER.outputs))}"
        ),
        python="str | None",
    ),
    Key(
        name="name",
        read=readers.name,
        meaning=(
            "the test name, an ASCII identifier (default: the entry's function name without its namespaces, or the "
            "Python function's)"
        ),
        python="str | None",
        derived=True,
    ),
    Key(
        name="description",
        read=readers.string("description"),
        meaning="free text",
        python="str | None",
    ),
    Key(
        name="expect_fast",
        read=readers.text("expect_fast", " this kernel may beat cuBLAS or the peak"),
        meaning=(
            "why this kernel may legitimately beat cuBLAS by 1.5x or run above the GPU's peak (e.g. it exploits "
            "structure in the data); without it such timings fail as suspicious"
        ),
        python="str | None",
    ),
    Key(
        name="regression_threshold",
        read=readers.threshold,
        meaning=("this kernel's regression threshold (a fraction, e.g. `0.1`), instead of `--gemm-threshold`"),
        python="float | None",
    ),
    Key(
        name="layout",
        read=lambda r, v: r.check.choice("layout", v, ("row", "col")),
        meaning=(
            '`"row"` (default: A is MxK, B is KxN, C is MxN, row-major) or `"col"` (all three column-major); '
            "`storage` sets each operand on its own"
        ),
        python="str | None",
    ),
    Key(
        name="size_type",
        read=lambda r, v: r.check.size_type(v),
        meaning=(
            f"the C type of `M N K lda ldb ldc batch`: {_either(_SIZE_TYPE_WORDS)}; a shape past it is skipped with "
            "the reason"
        ),
        kinds=CU,
        elsewhere="a Python kernel takes Python ints; size_type is for .cu kernels",
    ),
    Key(
        name="stride_type",
        read=readers.stride_type,
        meaning=(
            f"the C type of `{' '.join(STRIDE_ARGS)}`, one of the same; default: the `size_type` (cuBLAS's own "
            "declares `int` sizes and `long long` strides)"
        ),
        kinds=CU,
        elsewhere="a Python kernel takes Python ints; stride_type is for .cu kernels",
    ),
    Key(
        name="batched",
        read=readers.batched,
        meaning=(
            "`true`: the function runs strided batches, its operands 3-D views with the batch first (a `.cu` kernel "
            "takes `batch` in `args` instead); see [Strided batches](#strided-batches)"
        ),
        kinds=PY,
        python="bool | None",
        derived=True,
        elsewhere=("a .cu kernel runs strided batches by taking batch (and its strides) in args"),
    ),
    Key(
        name="arrays",
        read=readers.arrays,
        meaning=(
            'what the function is given: `"cupy"` arrays (default) or `"torch"` tensors on the same memory, called '
            "with the harness's stream as torch's current stream; see [torch and Triton "
            "kernels](#torch-and-triton-kernels)"
        ),
        kinds=PY,
        python="str | None",
        elsewhere=("a .cu kernel takes pointers; arrays is for Python kernels (torch tensors or CuPy arrays)"),
    ),
    Key(
        name="alpha_beta",
        read=readers.alpha_beta,
        meaning=(
            "`false`: the function computes `C = A B` and is called without alpha and beta (its cases are alpha = 1, "
            "beta = 0); FP8 and INT8 kernels take none (a `.cu` kernel names `alpha` and `beta` in `args` instead)"
        ),
        kinds=PY,
        python="bool | None",
        derived=True,
        elsewhere="a .cu kernel takes alpha and beta by naming them in args",
    ),
    Key(
        name="scales",
        read=readers.scales,
        meaning=(
            'how an FP8 kernel\'s operands are scaled: `{ A = "1x128", B = "128x128" }`, with `type`, `stored` and '
            "`align`; see [FP8 and INT8](#fp8-and-int8)"
        ),
        python="dict[str, Any] | None",
        derived=True,
        required_text="FP8",
    ),
    Key(
        name="groups",
        read=readers.groups,
        meaning=(
            'a grouped GEMM: `{ layout = "contiguous" }` (or `"masked"`, `"k"`), with `sizes` (the distribution of '
            "group sizes), `align`, `writes_padding` and, for a Python kernel, the group arrays it takes (`args`); "
            "see [Grouped GEMM](#grouped-gemm)"
        ),
        python="dict[str, Any] | None",
        derived=True,
    ),
    Key(
        name="epilogue",
        read=readers.epilogue,
        meaning=(
            'a fused epilogue, `D = act(alpha A B + beta C + bias) + residual`: `{ bias = "N" }` (or `"M"`), '
            f"`activation` ({_either(_ACTIVATION_WORDS)}), `residual = true`, `aux = true` "
            "(a second output, the pre-activation value) and, for a Python kernel, the operands it takes (`args`); "
            "a `.cu` kernel that takes `D` writes D apart from C. See [Fused epilogues](#fused-epilogues)"
        ),
        python="dict[str, Any] | None",
        derived=True,
    ),
    Key(
        name="tensor_maps",
        read=lambda r, v: r.check.tensor_maps(
            {} if v is MISSING else v, frozenset(n for n, _ in r["params"]), r["args"]
        ),
        meaning=(
            'TMA tensor maps the harness builds for the kernel: `{ A = { box = [64, "BM"], swizzle = 128 } }` gives '
            "the argument `A_map` (see below). `box` is `[inner, outer]` in elements (integers or expressions over "
            f"params), `swizzle` is {_either([str(s) for s in SWIZZLES])} bytes; `split`, `rank` and `pointer` make a "
            "3-D to 5-D map, or one passed by its address (see [TMA tensor maps](#tma-tensor-maps))"
        ),
        kinds=CU,
        derived=True,
    ),
    Key(
        name="arch",
        read=lambda r, v: r.check.arch(v),
        meaning=(
            'the one architecture this kernel is built for, e.g. `"sm_90a"` (for `wgmma`, `setmaxnreg`...) or '
            '`"sm_90"` (for TMA). Its compile items build only this arch, whatever `--gemm-archs` says; on a GPU '
            "that cannot run it (an `a` target runs only on its exact compute capability, others on the same major "
            "version at the same or a later minor one) its cases skip with the reason"
        ),
        kinds=CU,
    ),
    Key(
        name="always_reads_c",
        read=readers.flag("always_reads_c"),
        meaning=(
            "`true`: the kernel reads C whatever beta is; its beta = 0 cases run with finite prior data in C instead "
            "of the NaN poison (unwritten elements are still caught: they keep that data bit for bit). Default "
            '`false`: BLAS says C is output-only when beta = 0, and reading it fails with "reads C although beta = '
            '0". See [verification.md](verification.md#declarations)'
        ),
        python="bool | None",
    ),
    Key(
        name="nondeterministic",
        read=readers.text("nondeterministic", ", e.g. 'split-K with atomicAdd'"),
        meaning=(
            "why the kernel's output may differ between launches on the same inputs (e.g. `\"split-K with "
            "atomicAdd\"`); without it, each verified case's three launches must agree bit for bit"
        ),
        python="str | None",
    ),
    Key(
        name="batch_invariant",
        read=readers.flag("batch_invariant"),
        meaning=(
            "`true`: each row of C is the same, bit for bit, whatever M is (the same rows of A in GEMMs of fewer "
            "rows); checked, and a row that differs fails. See [verification.md](verification.md#batch-invariance)"
        ),
        kinds=CU,
        elsewhere="a Python kernel's calls at another M could compile or tune it again before it is timed",
    ),
    Key(
        name="block",
        read=readers.dims("block"),
        meaning="1 to 3 integers or expressions: threads per block",
        kinds=CU,
        required=CU,
    ),
    Key(
        name="grid",
        read=readers.dims("grid", DEVICE_NAMES),
        meaning=(
            "1 to 3 integers or expressions: blocks per grid. Besides the other names, `grid` may use `SM_COUNT`, "
            "the GPU's number of SMs, for a persistent kernel: `min(cdiv(M, 128) * cdiv(N, 256), SM_COUNT)`"
        ),
        kinds=CU,
        required=CU,
    ),
    Key(
        name="shared_mem",
        read=lambda r, v: r.check.expression("shared_mem", v, r.names),
        meaning=(
            "dynamic shared memory in bytes (expression); where it and the static shared memory pass 48 KB together, "
            "the harness raises the kernel's limit"
        ),
        kinds=CU,
    ),
    Key(
        name="requires",
        read=lambda r, v: r.check.requires(v, r.names),
        meaning=(
            "a boolean expression or a list of them; a shape that breaks one is skipped with that rule (and the "
            "values) as the reason, never failed"
        ),
        python="Iterable[str] | str | None",
    ),
    Key(
        name="storage",
        read=lambda r, v: r.check.storage({} if v is MISSING else v, r["layout"], r["params"]),
        meaning=(
            'each operand\'s storage order, as the shape it has in memory (rows of contiguous elements): `A = "MxK"` '
            'or `"KxM"`, `B = "KxN"` or `"NxK"`, `C = "MxN"` or `"NxM"`, e.g. `storage = { B = "NxK" }` for weights '
            'stored N x K (`x @ W.T`), `{ C = "NxM" }` for a column-major C; operands not named follow `layout`. See '
            "[Storage orders](#storage-orders)"
        ),
        python="dict[str, str] | None",
        derived=True,
    ),
    Key(
        name="scalars",
        read=readers.scalars,
        meaning=(
            '`"fp16"`: the kernel takes alpha and beta as `__half` (cuBLAS\'s `COMPUTE_16F` convention), for an fp16 '
            "output; default: `float` (`double` for fp64 kernels)"
        ),
        kinds=CU,
        elsewhere="a Python kernel takes Python floats; scalars is for .cu kernels",
    ),
    Key(
        name="accumulate",
        read=lambda r, v: r.check.accumulate(v, r["dtypes"], r["c_dtype"]),
        meaning=(
            '`"fp16"`: the kernel accumulates in fp16 (fp16 inputs and output only); it is judged by fp16 '
            "accumulation's error bound and timed against cuBLAS with `CUBLAS_COMPUTE_16F`. Default: fp32 (fp64 for "
            'fp64 kernels, int32 for INT8), which may also be written (`"fp64"` for an fp64 kernel)'
        ),
        python="str | None",
    ),
    Key(
        name="options",
        read=lambda r, v: r.check.options(v),
        meaning=(
            'extra NVRTC flags, e.g. `["-use_fast_math"]`; the architecture is the harness\'s (`--gemm-archs`, or '
            "the device's) or the header's `arch`. Flags that make NVRTC write or read files of their own "
            f"({', '.join(_ticked(f'--{flag}' for flag in FILE_FLAGS))}, in either form) are refused"
        ),
        kinds=CU,
    ),
)
BY_NAME = {key.name: key for key in KEYS}
