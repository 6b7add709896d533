"""The namespaces the worker watches for what a kernel file's code changes (:mod:`.integrity`): pytest-gemm's modules
and classes, and the libraries its timer and judge call, each taken as it is and compared with what it was."""

from __future__ import annotations

import operator
import types
from dataclasses import dataclass, field
from typing import Any

__all__ = [
    "CODE_OF",
    "DEFAULTS_OF",
    "KERNEL_MODULES",
    "LIBRARIES",
    "Namespace",
    "contents",
    "of_kernel_file",
    "watched_namespaces",
]

#: the harness's package: its modules are watched whole
PACKAGE = "pytest_gemm"
#: how the worker names the modules it imports kernel files as (``pytest_gemm_kernels_`` and a hash of the path)
KERNEL_MODULES = "pytest_gemm_kernels_"
#: the libraries the timer and the judge call, watched for a name rebound (where imported)
LIBRARIES = (
    "numpy",
    "cupy",
    "cupy.cuda",
    "cupy.cuda.runtime",
    "cupy.cuda.driver",
    "cupti",
    "cupti.cupti",
    "time",
    "math",
)
#: the most elements of a public table whose contents are compared (a larger one is a cache)
TABLE_MOST = 256
CODE_OF, DEFAULTS_OF = operator.attrgetter("__code__"), operator.attrgetter("__defaults__")
_MISSING = object()


def _is_code(value: Any) -> bool:
    return callable(value) or isinstance(value, (staticmethod, classmethod, property, types.ModuleType))


def _constant(name: str) -> bool:
    """A public constant's name (``FP8_MAX``): never rebound, its table never changed, by the harness."""
    return name.isupper() and not name.startswith("_")


def of_kernel_file(value: Any) -> bool:
    """Whether ``value`` is code of a kernel file (a function, a class or a thread's target defined there)."""
    return str(getattr(value, "__module__", "") or "").startswith(KERNEL_MODULES)


def contents(value: Any) -> Any:
    """A table's contents: its keys and elements (an element equal to itself is never asked)."""
    if isinstance(value, dict):
        return tuple(value), tuple(value.values())
    return tuple(value) if isinstance(value, (list, set)) else None


@dataclass
class Namespace:
    """One watched namespace (a module's or a class's attributes) as it was."""

    shown: str  # "pytest_gemm.judge.accuracy" or "pytest_gemm.judge.accuracy.Truth"
    space: Any  # the live mapping
    ours: bool  # pytest-gemm's own: code, internals and constants count; a library's: any name rebound
    values: dict[str, Any] = field(init=False)
    tables: dict[str, Any] = field(init=False)

    def __post_init__(self) -> None:
        self.values = dict(self.space)
        self._keys, self._objects = tuple(self.values), tuple(self.values.values())
        self._functions = tuple(v for v in self._objects if isinstance(v, types.FunctionType)) if self.ours else ()
        self._codes, self._defaults = tuple(map(CODE_OF, self._functions)), tuple(map(DEFAULTS_OF, self._functions))
        tables = ((k, v) for k, v in self.values.items() if self.ours and _constant(k))
        self.tables = {k: contents(v) for k, v in tables if isinstance(v, (dict, list, set)) and len(v) <= TABLE_MOST}

    def same(self) -> bool:
        """Whether nothing changed since, compared at C's speed (an unchanged object is equal to itself without its
        ``__eq__`` being called; an exception from one that changed is a change)."""
        space = self.space
        try:
            return (
                tuple(space) == self._keys
                and tuple(space.values()) == self._objects
                and tuple(map(CODE_OF, self._functions)) == self._codes
                and tuple(map(DEFAULTS_OF, self._functions)) == self._defaults
                and all(contents(space.get(k)) == was for k, was in self.tables.items())
            )
        except Exception:
            return False

    def changes(self) -> tuple[list[str], list[str]]:
        """What changed since: what the harness never does (always counted), and its private data (counted only when
        it changed in a kernel file's call)."""
        code, data, space, at = [], [], self.space, self.shown
        for name, value in self.values.items():
            now = space.get(name, _MISSING)
            if now is not value:
                said = f"{at}.{name} {'deleted' if now is _MISSING else 'replaced' if _is_code(value) else 'rebound'}"
                dunder = name.startswith("__") and name.endswith("__")
                if not self.ours or _is_code(value) or _is_code(now) or _constant(name):
                    code.append(said)
                elif not dunder:
                    data.append(said)
        for name in [n for n in list(space) if n not in self.values]:
            if not self.ours or _submodule(at, name, space[name]):  # a library's, or a submodule's import
                continue
            if _is_code(space[name]):
                code.append(f"{at}.{name} added")
            elif not (name.startswith("__") and name.endswith("__")):
                data.append(f"{at}.{name} added")
        for function, was, defaults in zip(self._functions, self._codes, self._defaults, strict=True):
            if function.__code__ is not was or function.__defaults__ is not defaults:
                code.append(f"{at}.{function.__name__}'s code or defaults replaced")
        code += [f"{at}.{n}'s contents changed" for n, was in self.tables.items() if contents(space.get(n)) != was]
        return code, data


def _submodule(shown: str, name: str, value: Any) -> bool:
    """Whether ``value`` is the package ``shown``'s submodule ``name``, bound by its import."""
    return isinstance(value, types.ModuleType) and value.__name__ == f"{shown}.{name}"


def watched_namespaces(name: str, module: Any) -> list[Namespace]:
    """Module ``name``'s namespaces to watch: its own and (pytest-gemm's) its classes'; none where it is not watched."""
    ours = name == PACKAGE or name.startswith(PACKAGE + ".")
    if not (ours or name in LIBRARIES) or not isinstance(module, types.ModuleType):
        return []
    found = [Namespace(name, module.__dict__, ours)]
    if ours:
        classes = [v for v in list(module.__dict__.values()) if isinstance(v, type) and v.__module__ == name]
        found += [Namespace(f"{name}.{c.__qualname__}", c.__dict__, True) for c in classes]
    return found
