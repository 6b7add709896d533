"""Checks of a saved run's values as it is read: every value has the type its record's field declares, and
the settings ``pytest-gemm merge`` compares have their options' types and allowed values.

A value that is wrong raises :class:`WrongValue`, naming its key path in the file (``gemm.tests["k.cu::k[...]"]
.duration_s: expected a number, got 'x'``), so that a damaged or hand-edited file is refused with the place
to look instead of failing later, far from the cause; so does a record that lacks a field it needs
(:func:`check_present`, before the record is built). Nothing is evaluated.
"""

from __future__ import annotations

import dataclasses
import enum
import json
import math
import types
import typing
from collections.abc import Mapping
from typing import Any

from ..judge.gate import THRESHOLD_RANGE
from ..records.case_record import METRICS, quoted
from ..records.plain import type_hints
from ..records.request import MAX_TIME_RANGE, NOISE_RANGE, TIMEOUT_RANGE

__all__ = ["WrongValue", "check", "check_present", "check_settings", "key", "shown"]


class WrongValue(ValueError):
    """A value of a saved run that is not what its key holds; the message starts with the key path."""


def shown(value: Any) -> str:
    """A value as the message shows it: JSON's words for null and booleans, Python's repr for the rest."""
    if value is None or isinstance(value, bool):
        return json.dumps(value)
    if isinstance(value, dict):
        return "an object"
    if isinstance(value, (list, tuple)):
        return f"a list of {len(value)}"
    return quoted(value, 60)


def key(where: str, name: str) -> str:
    """The path of ``name`` inside ``where``: ``where.name``, or ``where["name"]`` for a name that is data."""
    if not where:
        return name
    return f"{where}.{name}" if name.replace("_", "").replace("-", "").isalnum() else f"{where}[{json.dumps(name)}]"


def _wrong(where: str, expected: str, value: Any) -> WrongValue:
    return WrongValue(f"{where}: expected {expected}, got {shown(value)}")


def _expected(tp: Any) -> str:
    origin, args = typing.get_origin(tp), typing.get_args(tp)
    if origin in (typing.Union, types.UnionType):
        return " or ".join("null" if a is type(None) else _expected(a) for a in args)
    if origin is typing.Literal:
        return "one of " + ", ".join(json.dumps(a) for a in args)
    if origin in (tuple, list) or tp in (tuple, list):
        return "a list"
    if origin is dict or tp is dict or dataclasses.is_dataclass(tp):
        return "an object"
    if isinstance(tp, type) and issubclass(tp, enum.Enum):
        return "one of " + ", ".join(json.dumps(m.value) for m in tp)
    return {bool: "true or false", int: "an integer", float: "a number", str: "a string"}.get(tp, str(tp))


def _scalar(value: Any, tp: Any) -> bool:
    if tp is bool:
        return isinstance(value, bool)
    if tp is int:
        return isinstance(value, int) and not isinstance(value, bool)
    if tp is float:
        return isinstance(value, (int, float)) and not isinstance(value, bool)
    return isinstance(value, tp) if isinstance(tp, type) else True


#: the types that a list's items of a scalar type may have without asking :func:`_scalar` (no bool for a number)
_ITEM_TYPES = {float: (float, int), int: (int,), str: (str,), bool: (bool,)}


def check(value: Any, tp: Any, where: str) -> None:
    """Raise :class:`WrongValue` unless ``value`` fits the type hint ``tp`` (a record's field type)."""
    origin, args = typing.get_origin(tp), typing.get_args(tp)
    if tp is Any or (hasattr(tp, "from_plain_value") and isinstance(value, tp)):
        return  # a record with a plain form of its own checked its values as it was read
    if origin in (typing.Union, types.UnionType):
        if value is None and type(None) in args:
            return
        for option in (a for a in args if a is not type(None)):
            try:
                check(value, option, where)
                return
            except WrongValue:
                continue
        raise _wrong(where, _expected(tp), value)
    if origin is typing.Literal:
        if value not in args or isinstance(value, bool):
            raise _wrong(where, _expected(tp), value)
    elif dataclasses.is_dataclass(tp):
        if not isinstance(value, tp):  # type: ignore[arg-type]
            raise _wrong(where, "an object", value)
        hints = type_hints(tp)
        for f in dataclasses.fields(tp):
            check(getattr(value, f.name), hints[f.name], key(where, f.name))
    elif origin in (tuple, list) or tp in (tuple, list):
        if not isinstance(value, (tuple, list)):
            raise _wrong(where, "a list", value)
        fixed = origin is tuple and not (len(args) == 2 and args[1] is Ellipsis) and args
        if fixed and len(value) != len(args):
            raise _wrong(where, f"a list of {len(args)}", value)
        item_types = _ITEM_TYPES.get(args[0]) if args and not fixed else None
        if item_types is not None:  # a list of numbers (a case's samples): one pass, the types JSON gives taken at once
            for i, item in enumerate(value):
                if type(item) not in item_types and not _scalar(item, args[0]):
                    raise _wrong(f"{where}[{i}]", _expected(args[0]), item)
            return
        for i, item in enumerate(value):
            check(item, args[i] if fixed else (args[0] if args else Any), f"{where}[{i}]")
    elif origin is dict or tp is dict:
        if not isinstance(value, dict):
            raise _wrong(where, "an object", value)
        for name, item in value.items():
            check(item, args[1] if args else Any, key(where, str(name)))
    elif not _scalar(value, tp):
        raise _wrong(where, _expected(tp), value)


def _required(cls: Any) -> list[str]:
    """The fields of a record that have no default: a saved record must hold them."""
    none = dataclasses.MISSING
    return [f.name for f in dataclasses.fields(cls) if f.default is none and f.default_factory is none]


def check_present(value: Any, tp: Any, where: str, whose: str = "") -> None:
    """Raise :class:`WrongValue` naming the key path of a record in ``value`` (plain data to become a ``tp``) that
    lacks fields it needs, and those fields; ``whose`` says whose record it is (a test). Values of the wrong
    type are left to :func:`check`, after the record is built."""
    origin, args = typing.get_origin(tp), typing.get_args(tp)
    if origin in (typing.Union, types.UnionType):
        records = [a for a in args if dataclasses.is_dataclass(a)]
        if len(records) == 1 and len(args) - (type(None) in args) == 1:  # an optional record: no doubt which
            check_present(value, records[0], where, whose)
    elif dataclasses.is_dataclass(tp) and isinstance(value, dict):
        missing = [name for name in _required(tp) if name not in value]
        if missing:
            raise WrongValue(f"{where}: {whose + ' ' if whose else ''}lacks {', '.join(map(repr, missing))}")
        hints = type_hints(tp)
        for f in dataclasses.fields(tp):
            if f.name in value:
                check_present(value[f.name], hints[f.name], key(where, f.name), whose)
    elif origin in (tuple, list) and isinstance(value, list) and len(args) == 2 and args[1] is Ellipsis:
        for i, item in enumerate(value):
            check_present(item, args[0], f"{where}[{i}]", whose)


def _number(low: float, high: float) -> Any:
    return ("number", low, high)


#: the settings a saved run carries (plugin/ledger.py), their types and allowed values
SETTINGS: Mapping[str, Any] = {
    "seed": int,
    "timeout": _number(*TIMEOUT_RANGE),
    "noise": _number(*NOISE_RANGE),
    "min-samples": int,
    "max-time": _number(*MAX_TIME_RANGE),
    "hot-cache": bool,
    "gate-metric": typing.Literal[tuple(METRICS)],  # type: ignore[misc]
    "threshold": _number(*THRESHOLD_RANGE),
    "fail-new": bool,
    "fail-unstable": bool,
    "timed": bool,
    "baselines": str,
}


def check_settings(settings: Any, where: str) -> None:
    """The saved settings: an object whose known keys have their options' types and ranges (others pass)."""
    if not isinstance(settings, dict):
        raise _wrong(where, "an object", settings)
    for name, value in settings.items():
        rule, at = SETTINGS.get(name, Any), key(where, str(name))
        if isinstance(rule, tuple):
            _, low, high = rule
            if not _scalar(value, float) or not math.isfinite(value) or not low <= value <= high:
                raise _wrong(at, f"a number from {low:g} to {high:g}", value)
        else:
            check(value, rule, at)
