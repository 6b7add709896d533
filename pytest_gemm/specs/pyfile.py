"""Python kernel files, read without running them: each top-level ``@gemm_kernel(...)`` function.

The pytest process never imports a kernel file (it may import CuPy, or do anything at import
time); only a GPU worker does, to call the function. So the decorator's arguments are read from
the syntax tree and must be literals (``ast.literal_eval``, which evaluates no code). A file is a
kernel file when its syntax tree holds a ``gemm_kernel`` decorator anywhere; one that declares
nothing (on a method, an ``async def``, a function under ``if`` or inside another) is an error
naming its line, never silence.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .errors import KernelFileError
from .header import python_header, spec_from_mapping
from .kinds import KernelKind
from .spec import KernelSpec, distinct_names

__all__ = ["DECLARING", "DECORATOR", "SPEC_ATTR", "PyFacts", "parse_py_source", "py_facts"]

DECORATOR = "gemm_kernel"
#: Text that may be a gemm_kernel decorator (``@gemm_kernel``, ``@pytest_gemm.gemm_kernel``, ``gemm_kernel(``): only
#: a file that holds it is parsed to find out (one that names gemm_kernel only in an import is not)
DECLARING = re.compile(rf"@\s*(?:\w+\s*\.\s*)*{DECORATOR}\b|{DECORATOR}\s*\(")
SPEC_ATTR = "__pytest_gemm__"  # where the decorator leaves the header on the function


def _decorator_name(node: ast.expr) -> str:
    if isinstance(node, ast.Call):
        node = node.func
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        return node.attr
    return ""


_STATEMENTS = {
    ast.If: "an if statement",
    ast.Try: "a try statement",
    ast.With: "a with statement",
    ast.AsyncWith: "an async with statement",
    ast.For: "a for loop",
    ast.AsyncFor: "an async for loop",
    ast.While: "a while loop",
}
if hasattr(ast, "TryStar"):
    _STATEMENTS[ast.TryStar] = "a try statement"
if hasattr(ast, "Match"):
    _STATEMENTS[ast.Match] = "a match statement"
_DEFINITIONS = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)


def _bodies(node: ast.AST) -> Iterator[list[ast.stmt]]:
    """The statement lists a statement holds (``if``'s body and ``else``, a ``try``'s handlers, ...)."""
    for _, value in ast.iter_fields(node):
        if isinstance(value, list) and value and isinstance(value[0], ast.stmt):
            yield value
        elif isinstance(value, list):
            for part in value:  # except handlers, match cases
                if isinstance(part, (ast.excepthandler, getattr(ast, "match_case", ast.excepthandler))):
                    yield part.body


def _placements(body: list[ast.stmt], where: str | None) -> Iterator[tuple[ast.expr, ast.stmt, str | None]]:
    """Each ``gemm_kernel`` decorator in ``body`` with its definition and, when misplaced, where it is."""
    for node in body:
        if isinstance(node, _DEFINITIONS):
            for deco in node.decorator_list:
                if _decorator_name(deco) == DECORATOR:
                    yield deco, node, where
            inner = f"class {node.name!r}" if isinstance(node, ast.ClassDef) else f"function {node.name!r}"
            yield from _placements(node.body, where or inner)
        else:
            kind = _STATEMENTS.get(type(node), "a compound statement")
            for inner_body in _bodies(node):
                yield from _placements(inner_body, where or f"{kind} (line {node.lineno})")


def _misplaced(path: str | Path, deco: ast.expr, node: ast.stmt, where: str | None) -> KernelFileError:
    """The error of a ``gemm_kernel`` decorator that declares nothing where it stands."""
    rule = "a kernel is a plain def at the top level of the file, which is read without running it"
    if where is not None and where.startswith("class "):
        what = f"on a method of {where}"
    elif where is not None and where.startswith("function "):
        what = f"on a function inside {where}"
    elif where is not None:
        what = f"on a function under {where}"
    elif isinstance(node, ast.AsyncFunctionDef):
        what = "on an async def"
        rule = "a kernel is a plain def (the GPU worker calls it and does not await it)"
    else:
        what = "on a class"
    return KernelFileError(path, f"@{DECORATOR} {what} declares no kernel: {rule}", line=deco.lineno)


@dataclass(frozen=True)
class PyFacts:
    """What a ``.py`` file's text says about it as a kernel file, read without running it. Its syntax tree is read
    when the text may hold a decorator (:data:`DECLARING`), or, when asked, whenever it names gemm_kernel; a file
    whose tree is not read declares nothing and is not broken."""

    mentions: bool  # names gemm_kernel anywhere (a comment, a string, an import)
    declares: bool  # holds a gemm_kernel decorator anywhere (misplaced ones too: they are errors to show)
    broken: bool  # its syntax tree was read, and it is not valid Python
    test_module: bool  # defines tests at its top level (functions or classes named test*), kernels aside


_NOTHING = PyFacts(mentions=False, declares=False, broken=False, test_module=False)


def _is_kernel_def(node: ast.stmt) -> bool:
    return isinstance(node, _DEFINITIONS) and any(_decorator_name(d) == DECORATOR for d in node.decorator_list)


def py_facts(text: str, *, every_mention: bool = False) -> PyFacts:
    """The facts of one ``.py`` file's text (see :class:`PyFacts`); ``every_mention``: read the syntax tree of any
    text that names gemm_kernel (a kernel path's file, to show its syntax error), not only where a decorator may be
    (each module pytest imports, many of which import gemm_kernel)."""
    if DECORATOR not in text:
        return _NOTHING
    if not every_mention and DECLARING.search(text) is None:
        return PyFacts(mentions=True, declares=False, broken=False, test_module=False)
    try:
        tree = ast.parse(text)
    except (SyntaxError, ValueError):
        return PyFacts(mentions=True, declares=False, broken=True, test_module=False)
    declares = next(_placements(tree.body, None), None) is not None
    tests = any(
        isinstance(node, _DEFINITIONS) and node.name.lower().startswith("test") and not _is_kernel_def(node)
        for node in tree.body
    )
    return PyFacts(mentions=True, declares=declares, broken=False, test_module=tests)


def _arguments(path: str | Path, call: ast.Call) -> dict[str, Any]:
    """The decorator's keywords and their literal values; which keys it may give is the schema's to check."""
    if call.args:
        raise KernelFileError(path, f"{DECORATOR}(...) takes keyword arguments only", line=call.lineno)
    out = {}
    for keyword in call.keywords:
        if keyword.arg is None:
            raise KernelFileError(
                path,
                f"{DECORATOR}(...) takes each argument as a keyword, not **mapping (the file is read without running "
                "it)",
                line=call.lineno,
            )
        try:
            out[keyword.arg] = ast.literal_eval(keyword.value)
        except ValueError:
            raise KernelFileError(
                path,
                f"{DECORATOR}(...): {keyword.arg} must be a literal (the file is read without running it)",
                line=keyword.value.lineno,
                key=keyword.arg,
            ) from None
    return out


def parse_py_source(path: str | Path, text: str) -> list[KernelSpec]:
    """The kernels a Python kernel file declares, read from its syntax tree."""
    try:
        tree = ast.parse(text, filename=str(path))
    except SyntaxError as exc:
        raise KernelFileError(path, f"not valid Python: {exc.msg}", line=exc.lineno) from None
    specs = []
    for deco, node, where in _placements(tree.body, None):
        if where is not None or not isinstance(node, ast.FunctionDef):
            raise _misplaced(path, deco, node, where)
        if not isinstance(deco, ast.Call):
            raise KernelFileError(path, f"use @{DECORATOR}(dtypes=[...]), with its arguments", line=deco.lineno)
        header = python_header(_arguments(path, deco))
        specs.append(
            spec_from_mapping(
                header,
                path=path,
                line=deco.lineno,
                kind=KernelKind.PY,
                attr=node.name,
                default_name=node.name,
                source=text,
            )
        )
    return distinct_names(path, specs)
