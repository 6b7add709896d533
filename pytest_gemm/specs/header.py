"""A kernel's header read with the schema (:mod:`.schema`): a ``.cu`` header's TOML or a ``@gemm_kernel``
decorator's keywords into a :class:`~.spec.KernelSpec`; the decorator's signature; the docs' key table.
"""

from __future__ import annotations

import dataclasses
import inspect
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from .header_keys import HeaderChecker
from .key_readers import MISSING, Reading
from .kinds import KernelKind
from .schema import BOTH, BY_NAME, CU, KEYS, PY, Key
from .spec import KernelSpec

__all__ = ["DEFAULTS", "key_table", "python_header", "python_keys", "python_signature", "spec_from_mapping"]

#: the value of a key the header does not give: its :class:`KernelSpec` field's default, the one place each is set
#: (a ``derived`` key's reader works out its own from the keys before it)
DEFAULTS: dict[str, Any] = {
    f.name: f.default if f.default is not dataclasses.MISSING else f.default_factory()
    for f in dataclasses.fields(KernelSpec)
    if f.default is not dataclasses.MISSING or f.default_factory is not dataclasses.MISSING
}


def _check_keys(data: Mapping[str, Any], kind: KernelKind, check: HeaderChecker) -> None:
    allowed = [key.name for key in KEYS if kind in key.kinds]
    for name in data:
        key = BY_NAME.get(name)
        if key is None:
            check.fail(name, f"unknown key; expected one of {', '.join(sorted(allowed))}")
        elif kind not in key.kinds:
            other = " and ".join(k.plural for k in key.kinds)
            check.fail(name, key.elsewhere or f"{kind.described} takes no {name}: it is a key of {other}")
    required = [key.name for key in KEYS if kind in key.required]
    for name in required:
        if name not in data:
            check.fail(name, f"missing; {kind.described} declares {', '.join(required)}")


def spec_from_mapping(
    data: Mapping[str, Any],
    *,
    path: str | Path,
    line: int = 1,
    kind: KernelKind = KernelKind.CU,
    source: str = "",
    attr: str = "",
    default_name: str | None = None,
) -> KernelSpec:
    """Check a header's keys (a ``.cu`` header's TOML, or a decorator's keywords) and build the spec; every problem
    names its key and what is expected. A key it does not give takes its :data:`DEFAULTS` value, or, derived, what its
    reader works out."""
    check, kernel_kind = HeaderChecker(path, line), KernelKind(kind)  # also from its word, "cu" or "py"
    _check_keys(data, kernel_kind, check)
    reading = Reading(check, kernel_kind, default_name)
    for key in KEYS:
        value = data.get(key.name, MISSING)
        given = value is not MISSING or key.derived
        reading.got[key.name] = key.read(reading, value) if given else DEFAULTS[key.name]
    return KernelSpec(path=str(path), line=line, kind=kernel_kind, attr=attr, source=source, **reading.got)


def python_keys() -> tuple[Key, ...]:
    """The keys a Python kernel's decorator takes, in the order of its signature."""
    return tuple(key for key in KEYS if KernelKind.PY in key.kinds)


def python_signature() -> inspect.Signature:
    """``gemm_kernel``'s signature: a keyword-only parameter per key a Python kernel declares (``dtypes`` first, the
    one it must give); the others default to None, not given (their defaults are :data:`DEFAULTS`)."""
    keys = sorted(python_keys(), key=lambda key: KernelKind.PY not in key.required)
    empty = inspect.Parameter.empty
    return inspect.Signature(
        [
            inspect.Parameter(
                key.name,
                inspect.Parameter.KEYWORD_ONLY,
                default=empty if KernelKind.PY in key.required else None,
                annotation=key.python,
            )
            for key in keys
        ]
    )


def _lists(value: Any) -> Any:
    """A decorator keyword's literal with its tuples as lists (what the header's TOML gives)."""
    if isinstance(value, (list, tuple)):
        return [_lists(v) for v in value]
    if isinstance(value, dict):
        return {k: _lists(v) for k, v in value.items()}
    return value


def python_header(keywords: Mapping[str, Any]) -> dict[str, Any]:
    """The header a ``gemm_kernel(...)`` call states: its keywords as a ``.cu`` header's keys (None: not given; a
    keyword that is no key of a Python kernel is kept whatever its value, for the schema to refuse)."""
    takes = {key.name for key in python_keys()}
    return {name: _lists(value) for name, value in keywords.items() if value is not None or name not in takes}


def key_table(keys: Iterable[Key] = KEYS) -> list[str]:
    """The docs' table of header keys (docs/kernel-files.md#header-keys): markdown lines."""
    where = {BOTH: "both", CU: "`.cu`", PY: "`.py`"}
    lines = ["| key | in | required | meaning |", "|---|---|---|---|"]
    for key in sorted(keys, key=lambda key: not (key.required or key.required_text)):  # the required first
        required = key.required_text or ("yes" if key.required else "no")
        lines.append(f"| `{key.name}` | {where[key.kinds]} | {required} | {key.meaning} |")
    return lines
