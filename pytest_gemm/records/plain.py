"""Records to JSON-ready data and back: the only form in which records cross a process boundary.

``to_plain`` turns dataclasses, enums, tuples and dicts into dicts, lists, strings and numbers;
``from_plain`` rebuilds a dataclass from that, guided by its type hints (nested records, tuples,
enums, unions of them and optional fields). A record with a compact form of its own (a shape is
written ``MxNxK``) defines ``to_plain_value()`` and the class method ``from_plain_value(value)``.
A float that is not finite is written as the string ``"inf"``, ``"-inf"`` or ``"nan"``, so that the
data is strict JSON (which has no words for them) and reads back as the same float.
Nothing is evaluated: unknown keys are an error, not code.
"""

from __future__ import annotations

import dataclasses
import enum
import functools
import math
import types
import typing
from typing import Any, TypeVar

__all__ = ["PlainError", "fields_from_plain", "from_plain", "to_plain", "type_hints"]

T = TypeVar("T")
_NONFINITE = ("inf", "-inf", "nan")


class PlainError(ValueError):
    """Data that does not fit the record it should become."""


def to_plain(value: Any) -> Any:
    """``value`` as dicts, lists, strings, numbers, booleans and None."""
    if hasattr(value, "to_plain_value") and not isinstance(value, type):
        return value.to_plain_value()
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: to_plain(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if isinstance(value, enum.Enum):
        return value.value
    if isinstance(value, (list, tuple)):
        return [to_plain(v) for v in value]
    if isinstance(value, dict):
        return {str(k): to_plain(v) for k, v in value.items()}
    if isinstance(value, float) and not math.isfinite(value):
        return str(value)  # 'inf', '-inf' or 'nan'
    return value


def from_plain(cls: type[T], data: Any) -> T:
    """Rebuild a record of type ``cls`` from :func:`to_plain`'s output."""
    if hasattr(cls, "from_plain_value"):
        return _convert(cls, data)
    return fields_from_plain(cls, data)


@functools.cache
def type_hints(cls: type) -> dict[str, Any]:
    """A record class's fields' types, evaluated once (``typing.get_type_hints`` compiles each string annotation on
    every call: it was half of reading a saved run). Never modify the mapping."""
    return typing.get_type_hints(cls)


def fields_from_plain(cls: type[T], data: Any) -> T:
    """Rebuild a dataclass field by field (what a record with a plain form of its own builds on)."""
    if not isinstance(data, dict):
        raise PlainError(f"{cls.__name__}: expected an object, got {type(data).__name__}")
    hints = type_hints(cls)
    names = {f.name for f in dataclasses.fields(cls)}  # type: ignore[arg-type]
    unknown = set(data) - names
    if unknown:
        raise PlainError(f"{cls.__name__}: unknown field(s) {', '.join(sorted(unknown))}")
    try:
        return cls(**{name: _convert(hints[name], value) for name, value in data.items()})
    except PlainError:
        raise  # a field's own value: said as it is
    except (TypeError, ValueError) as exc:  # a missing field, or a value the record refuses
        raise PlainError(f"{cls.__name__}: {exc}") from None


def _is_record(tp: Any) -> bool:
    """A type whose values ``from_plain`` checks: a dataclass, an enum, or a type with a plain form of its own."""
    return isinstance(tp, type) and (
        dataclasses.is_dataclass(tp) or issubclass(tp, enum.Enum) or hasattr(tp, "from_plain_value")
    )


def _convert(tp: Any, value: Any) -> Any:
    if value is None:
        return None
    origin, args = typing.get_origin(tp), typing.get_args(tp)
    if origin in (typing.Union, types.UnionType):
        options = [a for a in args if a is not type(None)]
        if len(options) == 1:
            return _convert(options[0], value)
        records = [a for a in options if _is_record(a)]
        for option in records:  # the first record type the value fits
            try:
                return _convert(option, value)
            except (PlainError, ValueError):
                continue
        if records and len(records) == len(options):
            raise PlainError(f"{value!r} is none of {', '.join(a.__name__ for a in records)}")
        return value
    if hasattr(tp, "from_plain_value"):
        try:
            return tp.from_plain_value(value)
        except ValueError as exc:
            raise PlainError(str(exc)) from None
    if dataclasses.is_dataclass(tp):
        return fields_from_plain(tp, value)
    if isinstance(tp, type) and issubclass(tp, enum.Enum):
        try:
            return tp(value)
        except ValueError:
            raise PlainError(f"{value!r} is not one of {', '.join(m.value for m in tp)}") from None
    if origin is tuple:
        if not isinstance(value, (list, tuple)):
            raise PlainError(f"expected a list, got {type(value).__name__}")
        if len(args) == 2 and args[1] is Ellipsis:
            return tuple(_convert(args[0], v) for v in value)
        return tuple(_convert(a, v) for a, v in zip(args, value)) if args else tuple(value)
    if tp is float and isinstance(value, int) and not isinstance(value, bool):
        return float(value)
    if tp is float and value in _NONFINITE:
        return float(value)
    return value
