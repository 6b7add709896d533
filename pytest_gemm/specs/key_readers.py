"""How each header key is read in context: the value the header gives (or, for a derived key, :data:`MISSING`),
checked against the keys read before it, into the :class:`~.spec.KernelSpec` field of its name. The schema
(:mod:`.schema`) names the reader of each key; the checks of a value on its own are
:class:`~.header_keys.HeaderChecker`'s.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from typing import Any

from ..records.dtypes import FP8, OUTPUT_DTYPES
from ..records.epilogue import EPILOGUE_ARGS, Epilogue
from ..records.groups import GROUP_ARGS, PER_GROUP, POINTER_ARGS, Groups
from ..records.scales import Scales
from ..records.storage import ORDER_FLAGS
from .buffers import BUFFER_TYPES, FILL, Buffer
from .families import InputFamily, family_of
from .header_keys import (
    ARG_NAMES,
    DEVICE_NAMES,
    ENTRY,
    GROUPED_ARGS,
    IDENT,
    SHAPE_NAMES,
    STRIDE_ARGS,
    TEMPLATE_WORDS,
    HeaderChecker,
)  # fmt: skip
from .kinds import KernelKind
from .scaling import SCALE_ARGS
from .spec import ARRAYS

__all__ = [
    "MISSING",
    "Reading",
    "alpha_beta",
    "arrays",
    "batched",
    "buffers",
    "c_dtype",
    "dims",
    "entry",
    "epilogue",
    "flag",
    "groups",
    "name",
    "scalars",
    "scales",
    "stride_type",
    "string",
    "text",
    "threshold",
]


class _Missing:
    def __repr__(self) -> str:
        return "MISSING"


_SCALES_EXAMPLE = 'e.g. scales = { A = "1x128", B = "128x128", type = "fp32", stored = { A = "KxM" }, align = 16 }'

#: what a derived key's reader gets for a key the header does not give (its value follows from the keys before it)
MISSING: Any = _Missing()


class Reading:
    """One header as it is read: its checker, its kind, and the values of the keys read so far."""

    def __init__(self, check: HeaderChecker, kind: KernelKind, default_name: str | None) -> None:
        self.check, self.kind, self.default_name = check, kind, default_name
        self.got: dict[str, Any] = {}

    def __getitem__(self, key: str) -> Any:
        return self.got[key]

    @property
    def names(self) -> frozenset[str]:
        """The names expressions see (besides the GPU's): M, N, K, batch, the params and the storage flags."""
        return SHAPE_NAMES | {name for name, _ in self.got["params"]} | frozenset(ORDER_FLAGS)

    @property
    def family(self) -> InputFamily:
        return family_of(self.got["dtypes"][0])


def entry(r: Reading, value: Any) -> str:
    entry = r.check.entry(value)
    match = ENTRY.match(entry)
    assert match is not None  # the checker's rule
    for ident in re.findall(rf"\b{IDENT}\b", match.group(3) or ""):
        if ident not in r.names and not TEMPLATE_WORDS.fullmatch(ident):  # only params and literals
            r.check.fail("entry", f"template argument {ident!r} is neither a param nor a literal")
    return entry


def c_dtype(r: Reading, value: Any) -> str:
    if value not in OUTPUT_DTYPES:
        r.check.fail("c_dtype", f"unknown output dtype {value!r}; expected one of {', '.join(OUTPUT_DTYPES)}")
    for dtype in r["dtypes"]:
        problem = family_of(dtype).output_problem(dtype, value)
        if problem:
            r.check.fail("c_dtype", problem)
    return value


def _no_scalars(r: Reading, key: str) -> None:
    r.check.fail(
        key,
        f"a {r['dtypes'][0]} kernel computes C = A B with its scales (no alpha and beta), as cuBLASLt's "
        "FP8 and INT8 GEMMs do here; leave alpha and beta out",
    )


def name(r: Reading, value: Any) -> str:
    """The test name: the header's, or the entry's function name (``ns::sgemm<128>``'s ``sgemm``), or the Python
    function's; an ASCII identifier (dots allowed)."""
    given = value is not MISSING
    if not given:
        entry = r["entry"]
        value = r.default_name or (ENTRY.match(entry).group(2) if entry else "")
    if not isinstance(value, str) or not re.fullmatch(rf"{IDENT}(?:\.[A-Za-z0-9_]+)*", value):
        rule = "a kernel's name is an ASCII identifier such as 'sgemm_tiled', as C++ names are for NVRTC"
        if not given and r.default_name:
            r.check.fail(
                "name", f"the function's name {value!r} cannot name the kernel: {rule}; give it one: name='...'"
            )
        r.check.fail("name", f"{rule}; got {value!r}")
    return value


def text(key: str, what: str) -> Callable[[Reading, Any], str]:
    """A key whose value is a sentence saying why: a non-empty string, stripped."""

    def read(r: Reading, value: Any) -> str:
        if not isinstance(value, str) or not value.strip():
            r.check.fail(key, f"expected a non-empty string saying why{what}")
        return value.strip()

    return read


def string(key: str) -> Callable[[Reading, Any], str]:
    """A key whose value is free text."""

    def read(r: Reading, value: Any) -> str:
        if not isinstance(value, str):
            r.check.fail(key, "expected a string")
        return value

    return read


def threshold(r: Reading, value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 < value <= 10:
        r.check.fail(
            "regression_threshold", f"expected a fraction such as 0.1 (10%), above 0 and at most 10, got {value!r}"
        )
    return float(value)


def flag(key: str) -> Callable[[Reading, Any], bool]:
    def read(r: Reading, value: Any) -> bool:
        if not isinstance(value, bool):
            r.check.fail(key, f"expected true or false, got {value!r}")
        return value

    return read


def stride_type(r: Reading, value: Any) -> str:
    if not set(STRIDE_ARGS) & set(r["args"]):
        r.check.fail("stride_type", f"the kernel takes no batch stride ({', '.join(STRIDE_ARGS)} in args)")
    return r.check.size_type(value, "stride_type")


def batched(r: Reading, value: Any) -> bool:
    return "batch" in r["args"] if value is MISSING else flag("batched")(r, value)


def arrays(r: Reading, value: Any) -> str:
    if value not in ARRAYS:
        r.check.fail("arrays", f"expected one of {', '.join(map(repr, ARRAYS))}, got {value!r}")
    return value


def alpha_beta(r: Reading, value: Any) -> bool:
    if value is MISSING and r.kind.compiled:  # a .cu kernel takes them by naming them in args
        if "alpha" in r["args"] and not r.family.alpha_beta:
            _no_scalars(r, "args")
        return "alpha" in r["args"]
    if value is MISSING:
        return r.family.alpha_beta
    if flag("alpha_beta")(r, value) and not r.family.alpha_beta:
        _no_scalars(r, "alpha_beta")
    return value


def scalars(r: Reading, value: Any) -> str:
    """The C type a ``.cu`` kernel takes alpha and beta as: ``"fp16"`` (``__half``), for an fp16 output whose own
    rounding the bound already allows for the scalars; '' for the dtypes' own (float, or double for fp64)."""
    if value is MISSING:
        return ""
    if value != "fp16":
        r.check.fail("scalars", f'expected "fp16" (alpha and beta as __half), got {value!r}')
    outputs = {r["c_dtype"] or d for d in r["dtypes"]}
    if outputs != {"fp16"} or "alpha" not in r["args"]:
        r.check.fail(
            "scalars",
            "__half alpha and beta are for a kernel that takes them and writes fp16 (C's own rounding covers theirs)",
        )
    return value


def scales(r: Reading, value: Any) -> Scales | None:
    """The ``scales`` table, checked against the kernel's dtypes (FP8 kernels need one) and, for a ``.cu`` kernel, its
    ``args``; None for a kernel without scales. The table's entries are the :class:`Scales` record's to check."""
    check, fp8, args = r.check, r.family.scaled, r["args"]
    if value is MISSING:
        if fp8:
            check.fail("scales", f"an FP8 kernel declares how its operands are scaled, {_SCALES_EXAMPLE}")
        taken = [a for a in args if a in SCALE_ARGS]
        if taken:
            check.fail("args", f"{taken[0]} is an FP8 kernel's scale; this kernel's dtypes take none")
        return None
    if not fp8:
        check.fail("scales", f"only FP8 kernels (dtypes {', '.join(FP8)}) take scales")
    if not isinstance(value, Mapping):
        check.fail("scales", f"expected a table, {_SCALES_EXAMPLE}")
    unknown = set(value) - {"A", "B", "type", "stored", "align"}
    if unknown:
        check.fail(
            "scalars",
            "scales",
            f"unknown key {sorted(unknown)[0]!r}; expected A, B, type, stored and align, {_SCALES_EXAMPLE}",
        )
    stored = value.get("stored", {})
    if not isinstance(stored, Mapping) or set(stored) - {"A", "B"}:
        check.fail(
            "scalars",
            "scales",
            f'stored: expected a table of operand = stored shape of its grid, e.g. {{ A = "KxM" }}, got {stored!r}',
        )
    given = {name: value[name] for name in ("type", "align") if name in value}
    given.update({f"{op}_stored": order for op, order in stored.items()})
    scales = check.record("scales", Scales, A=value.get("A"), B=value.get("B"), **given)  # A and B have no default
    if r.kind.compiled:
        for arg in ("scale_a", "scale_b"):
            if arg not in args:
                check.fail("args", f"an FP8 kernel takes its scales: add {arg} to args")
    if r["batched"]:
        check.fail("scales", "an FP8 kernel runs one GEMM at a time: strided batches with scales are not supported")
    return scales


_GROUPS_EXAMPLE = 'e.g. groups = { layout = "contiguous", sizes = "edge", align = 128 }'
_GROUPS_KEYS = ("layout", "sizes", "align", "args", "writes_padding")


def _table_args(
    check: HeaderChecker, key: str, value: Any, keys: tuple[str, ...], example: str, names: Any
) -> list[str]:
    """A family's table (``groups``, ``epilogue``) checked to be a table of ``keys``; the names its ``args`` lists."""
    if not isinstance(value, Mapping):
        check.fail(key, f"expected a table, {example}")
    unknown = set(value) - set(keys)
    if unknown:
        check.fail(key, f"unknown key {sorted(unknown)[0]!r}; expected {', '.join(keys)}, {example}")
    listed = value.get("args", [])
    if not isinstance(listed, list | tuple) or not all(isinstance(a, str) for a in listed):
        check.fail(key, f"args: expected a list of names from {', '.join(names)}, got {listed!r}")
    return list(listed)


def groups(r: Reading, value: Any) -> Groups | None:
    """The ``groups`` table of a grouped kernel, checked against its ``args`` (a ``.cu`` kernel names the group arrays
    it takes there; a Python kernel in the table's ``args``), its dtypes and ``batched``; None for a kernel that runs
    one GEMM (or a batch). The table's entries are the :class:`Groups` record's to check."""
    check, args = r.check, r["args"]
    if value is MISSING:
        taken = [a for a in args if a in GROUPED_ARGS]
        if taken:
            check.fail("args", f"{taken[0]} is a grouped kernel's argument; declare its groups, {_GROUPS_EXAMPLE}")
        return None
    listed = _table_args(check, "groups", value, _GROUPS_KEYS, _GROUPS_EXAMPLE, GROUP_ARGS)
    given = {name: value[name] for name in ("sizes", "align", "writes_padding") if name in value}
    record = check.record("groups", Groups, layout=value.get("layout"), args=tuple(listed), **given)
    if not r.family.alpha_beta and not r.family.scaled:
        check.fail("groups", f"grouped {r.family.name} kernels are not supported yet (grouped: float or FP8 inputs)")
    if r.family.scaled and record.layout == "k":
        check.fail("groups", "a K-grouped FP8 kernel is not supported yet (its scales' blocks would cross groups)")
    if r["batched"]:
        check.fail("groups", "a kernel runs strided batches or groups, not both")
    if r.kind.compiled:
        if listed:
            check.fail("groups", "args: a .cu kernel names the group arrays it takes in the header's args")
        arrays = [a for a in args if a in GROUP_ARGS]
        if not arrays:
            check.fail("args", f"a grouped kernel takes at least one group array: one of {', '.join(GROUP_ARGS)}")
        check.record("args", Groups, layout=record.layout, args=tuple(arrays))  # group_index of a K-grouped A
        for op in PER_GROUP[record.layout]:
            if f"{op}_map" in args and f"stride_{op.lower()}" in args:
                check.fail(
                    "args",
                    f"{op}_map is one map over {op}'s matrices stacked, which a batch stride (stride_{op.lower()}) "
                    "would leave gaps between: take one or the other",
                )
    elif set(listed) & set(POINTER_ARGS):
        check.fail("groups", "args: pointer arrays are a .cu kernel's (a Python kernel gets each operand whole)")
    elif not listed:
        check.fail(
            "groups",
            f"args: name the group arrays the function takes after C, in order, from "
            f"{', '.join(a for a in GROUP_ARGS if a not in POINTER_ARGS)} "
            "(e.g. args = ['group_ends'])",
        )
    return record


_EPILOGUE_EXAMPLE = 'e.g. epilogue = { bias = "N", activation = "gelu", residual = true }'
_EPILOGUE_KEYS = ("bias", "activation", "residual", "aux", "args")


def epilogue(r: Reading, value: Any) -> Epilogue | None:
    """The ``epilogue`` table of a kernel with a fused epilogue, checked against its ``args`` (a ``.cu`` kernel names
    the epilogue's operands there, and takes ``D`` to write D apart from C; a Python kernel lists them in the table's
    ``args``), its dtypes, ``batched`` and ``groups``. A ``.cu`` kernel that takes ``D`` and declares no epilogue
    writes D apart from C: an epilogue of that alone. None for a kernel without one."""
    check, args = r.check, r["args"]
    taken = [a for a in args if a in EPILOGUE_ARGS]
    if value is MISSING:
        if [a for a in taken if a != "D"]:
            operand = next(a for a in taken if a != "D")
            check.fail("args", f"{operand} is an epilogue's operand; declare the epilogue, {_EPILOGUE_EXAMPLE}")
        value = {} if taken else None
        if value is None:
            return None
    listed = _table_args(check, "epilogue", value, _EPILOGUE_KEYS, _EPILOGUE_EXAMPLE, EPILOGUE_ARGS)
    if r.kind.compiled and listed:
        check.fail("epilogue", "args: a .cu kernel names the epilogue's operands in the header's args")
    named = tuple(taken) if r.kind.compiled else tuple(listed)
    given = {name: value[name] for name in ("bias", "activation", "residual", "aux") if name in value}
    record = check.record("epilogue", Epilogue, d="D" in named, args=named, **given)
    missing = [op for op in record.operands if op not in named]
    if missing:
        where = "the header's args" if r.kind.compiled else "the epilogue's args (after C, alpha and beta)"
        check.fail("epilogue", f"the kernel takes {missing[0]}: name it in {where}")
    extra = [op for op in named if op != "D" and op not in record.operands]
    if extra:
        check.fail("epilogue", f"args names {extra[0]}, which the epilogue does not declare")
    if not r.family.alpha_beta or r.family.scaled:
        check.fail("epilogue", f"{r.family.name} kernels with an epilogue are not supported yet; take float inputs")
    if r["batched"] or "batch" in args:
        check.fail("epilogue", "a kernel with an epilogue runs one GEMM; strided batches with one: not supported yet")
    if r["groups"] is not None:
        check.fail("epilogue", "a grouped kernel with an epilogue is not supported yet")
    if record.d and "C_map" in args:
        check.fail("args", "a kernel that writes D takes C by pointer (C_map would map D)")
    return record


_BUFFERS_EXAMPLE = 'e.g. buffers = { dspace = { type = "int32", size = "128 * 128", fill = "schedule.py:hilbert" } }'


def buffers(r: Reading, value: Any) -> tuple[Buffer, ...]:
    """The ``buffers`` table of a ``.cu`` kernel (read before ``args``, which may then name them): each buffer's
    element type, size (an expression over the shape, params and ``SM_COUNT``) and contents."""
    check = r.check
    if value is MISSING:
        return ()
    if not isinstance(value, Mapping):
        check.fail("buffers", f"expected a table of name = {{ type, size, fill }}, {_BUFFERS_EXAMPLE}")
    found = []
    params = {name for name, _ in r["params"]}
    for name, entry in value.items():
        taken = name in ARG_NAMES or name in SHAPE_NAMES or name in params or name.endswith("_map")
        if not re.fullmatch(IDENT, name) or taken:
            check.fail(
                "buffers",
                f"{name!r}: a buffer's name is an argument's: an identifier other than the harness's (and not ending "
                "in _map, a tensor map's)",
            )
        if not isinstance(entry, Mapping) or set(entry) - {"type", "size", "fill"} or "size" not in entry:
            check.fail("buffers", f"{name}: expected {{ type, size, fill }}, {_BUFFERS_EXAMPLE}")
        kind = entry.get("type", "int32")
        if not isinstance(kind, str) or kind not in BUFFER_TYPES:
            check.fail("buffers", f"{name}: type is one of {', '.join(BUFFER_TYPES)}, got {kind!r}")
        fill = entry.get("fill", "zeros")
        if not isinstance(fill, str) or (fill != "zeros" and FILL.match(fill) is None):
            check.fail("buffers", f'{name}: fill is "zeros" or "FILE.py:FUNCTION", got {fill!r}')
        size = check.expression("buffers", entry["size"], r.names | DEVICE_NAMES)
        found.append(Buffer(name, kind, size, fill))
    return tuple(found)


def dims(key: str, device: frozenset[str] = frozenset()) -> Callable[[Reading, Any], Any]:
    return lambda r, value: r.check.dims(key, value, r.names | device)
