"""Python kernel files, read without running them: each top-level ``@gemm_kernel(...)`` function.

The pytest process never imports a kernel file (it may import CuPy, or do anything at import
time); only a GPU worker does, to call the function. So the decorator's arguments are read from
the syntax tree and must be literals (``ast.literal_eval``, which evaluates no code). A file is a
kernel file when its syntax tree holds a ``gemm_kernel`` decorator or call anywhere; one that declares
nothing (on a method, an ``async def``, a function under ``if`` or inside another; a call that decorates no
def, such as ``gemm_kernel(...)(lambda ...)``) is an error naming its line, never silence. The decorator is
found by its name, ``gemm_kernel`` or ``module.gemm_kernel``, and by the aliases the file's own syntax tree
binds to it (``from pytest_gemm import gemm_kernel as gk``; ``gk = gemm_kernel``, ``gk: Any = gemm_kernel``).
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from .errors import KernelFileError
from .header import python_header, spec_from_mapping
from .kinds import KernelKind
from .library_calls import library_gemm
from .spec import KernelSpec, distinct_names

__all__ = ["DECLARING", "DECORATOR", "SPEC_ATTR", "PyFacts", "parse_py_source", "py_facts"]

DECORATOR = "gemm_kernel"
#: Text that may be a gemm_kernel decorator (``@gemm_kernel``, ``@pytest_gemm.gemm_kernel``, ``gemm_kernel(``) or bind
#: an alias of it (``gemm_kernel as gk``; ``gk = gemm_kernel`` or ``gk: Any = pg.gemm_kernel``, whatever follows on the
#: line): only a file that holds it is parsed to find out (one that names gemm_kernel only in a plain import is not).
#: An ``=`` and gemm_kernel are matched on one line, with no ``#`` or other ``=`` between them (so each character is
#: looked at from one ``=`` only: a file too large to read is searched in linear time).
DECLARING = re.compile(
    rf"@\s*(?:\w+\s*\.\s*)*{DECORATOR}\b|{DECORATOR}\s*\(|\b{DECORATOR}\s+as\s|=[^\n#=]*\b{DECORATOR}\b"
)
SPEC_ATTR = "__pytest_gemm__"  # where the decorator leaves the header on the function


def _bindings(node: ast.stmt) -> Iterator[tuple[str, ast.expr]]:
    """Each plain name a statement binds with ``=`` and what it binds it to: ``a = b = x``, ``a: T = x``, ``a, b = x,
    y`` (pair by pair) and ``(a := x)``."""
    if isinstance(node, ast.Assign):
        pairs = [(target, node.value) for target in node.targets]
    elif isinstance(node, ast.AnnAssign) and node.value is not None:
        pairs = [(node.target, node.value)]
    elif isinstance(node, ast.Expr) and isinstance(node.value, ast.NamedExpr):
        pairs = [(node.value.target, node.value.value)]
    else:
        return
    while pairs:
        target, value = pairs.pop(0)
        if isinstance(target, ast.Name):
            yield target.id, value
        elif (
            isinstance(target, (ast.Tuple, ast.List))
            and isinstance(value, (ast.Tuple, ast.List))
            and len(target.elts) == len(value.elts)
            and not any(isinstance(part, ast.Starred) for part in (*target.elts, *value.elts))
        ):
            pairs[:0] = zip(target.elts, value.elts)


def _aliases(tree: ast.Module) -> frozenset[str]:
    """The names the file binds to gemm_kernel: its own, each ``import ... gemm_kernel as NAME``, and each name a
    top-level statement binds to it (:func:`_bindings`: ``NAME = gemm_kernel``, ``NAME: Any = module.gemm_kernel``,
    ``NAME = ALIAS``), read from the syntax tree."""
    names = {DECORATOR}
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            names.update(alias.asname for alias in node.names if alias.name == DECORATOR and alias.asname)
    for node in tree.body:
        names.update(name for name, value in _bindings(node) if _refers(value, frozenset(names)))
    return frozenset(names)


def _refers(node: ast.expr, names: frozenset[str]) -> bool:
    """Whether ``node`` names gemm_kernel: one of ``names``, or ``module.gemm_kernel``."""
    return (isinstance(node, ast.Name) and node.id in names) or (
        isinstance(node, ast.Attribute) and node.attr == DECORATOR
    )


def _is_decorator(node: ast.expr, names: frozenset[str]) -> bool:
    """Whether a decorator is gemm_kernel's, called (``@gemm_kernel(...)``) or not."""
    return _refers(node.func if isinstance(node, ast.Call) else node, names)


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


def _placements(
    body: list[ast.stmt], where: str | None, names: frozenset[str]
) -> Iterator[tuple[ast.expr, ast.stmt, str | None]]:
    """Each ``gemm_kernel`` decorator in ``body`` with its definition and, when misplaced, where it is."""
    for node in body:
        if isinstance(node, _DEFINITIONS):
            for deco in node.decorator_list:
                if _is_decorator(deco, names):
                    yield deco, node, where
            inner = f"class {node.name!r}" if isinstance(node, ast.ClassDef) else f"function {node.name!r}"
            yield from _placements(node.body, where or inner, names)
        else:
            kind = _STATEMENTS.get(type(node), "a compound statement")
            for inner_body in _bodies(node):
                yield from _placements(inner_body, where or f"{kind} (line {node.lineno})", names)


@dataclass(frozen=True)
class _StrayCall:
    """A ``gemm_kernel(...)`` call that decorates no def: what it is applied to, or the name it is kept in."""

    call: ast.Call
    applied: bool  # its result is called: ``gemm_kernel(...)(f)``
    applied_to: ast.expr | None  # f there (a lambda, a name), when given
    kept_in: str | None  # ``name = gemm_kernel(...)...``: the name


def _stray_calls(tree: ast.Module, names: frozenset[str]) -> list[_StrayCall]:
    """Each ``gemm_kernel(...)`` call that is not a def's decorator (``k = gemm_kernel(...)(lambda ...)``), in the
    file's order."""
    decorators = {id(d) for node in ast.walk(tree) if isinstance(node, _DEFINITIONS) for d in node.decorator_list}
    applied: dict[int, ast.expr | None] = {}
    kept: dict[int, str] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Call):
            applied[id(node.func)] = node.args[0] if node.args else None
        if isinstance(node, ast.stmt):
            for name, value in _bindings(node):  # the first name a call is kept in: ``a = b = gemm_kernel(...)``'s a
                kept.update({id(inner): name for inner in ast.walk(value) if id(inner) not in kept})
    calls = [n for n in ast.walk(tree) if isinstance(n, ast.Call) and _refers(n.func, names)]
    calls = sorted((c for c in calls if id(c) not in decorators), key=lambda call: (call.lineno, call.col_offset))
    return [_StrayCall(call, id(call) in applied, applied.get(id(call)), kept.get(id(call))) for call in calls]


def _stray_call_error(path: str | Path, stray: _StrayCall) -> KernelFileError:
    """The error of a ``gemm_kernel(...)`` call that decorates no def, saying what to write instead."""
    call, written = stray.call, ast.unparse(stray.call.func)
    decorator = f"@{ast.unparse(call)}" if len(ast.unparse(call)) <= 60 else f"@{written}(...)"
    if not stray.applied and stray.kept_in is not None:
        what = f"kept in {stray.kept_in!r} (a decorator in a variable is not followed)"
        instead = f"write {decorator} itself on the line above each kernel's def"
    else:
        target = stray.applied_to
        kernel = target.id if isinstance(target, ast.Name) else stray.kept_in or "my_kernel"
        what = "applied to a lambda" if isinstance(target, ast.Lambda) else "called outside a decorator"
        instead = f"write {decorator} on the line above def {kernel}(...): instead"
    return KernelFileError(
        path,
        f"{written}(...) {what} declares no kernel: the file is read without running it, so a kernel is a plain def "
        f"at the top level under the decorator; {instead}",
        line=call.lineno,
    )


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
    declares: bool  # holds a gemm_kernel decorator or call anywhere (misplaced ones too: they are errors to show)
    broken: bool  # its syntax tree was read, and it is not valid Python
    test_module: bool  # defines tests at its top level (functions or classes named test*), kernels aside


_NOTHING = PyFacts(mentions=False, declares=False, broken=False, test_module=False)


def _is_kernel_def(node: ast.stmt, names: frozenset[str]) -> bool:
    return isinstance(node, _DEFINITIONS) and any(_is_decorator(d, names) for d in node.decorator_list)


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
    names = _aliases(tree)
    declares = next(_placements(tree.body, None, names), None) is not None or bool(_stray_calls(tree, names))
    tests = any(
        isinstance(node, _DEFINITIONS) and node.name.lower().startswith("test") and not _is_kernel_def(node, names)
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
    names = _aliases(tree)
    placed = list(_placements(tree.body, None, names))
    errors = [_stray_call_error(path, stray) for stray in _stray_calls(tree, names)]
    errors += [
        _misplaced(path, deco, node, where)
        for deco, node, where in placed
        if where is not None or not isinstance(node, ast.FunctionDef)
    ]
    if errors:
        raise min(errors, key=lambda error: error.line or 0)  # the first in the file
    seen: set[int] = set()
    for deco, node, _ in placed:
        if id(node) in seen:  # one def is one kernel, however many decorators say so
            raise KernelFileError(
                path, f"{node.name} has @{DECORATOR} more than once; a def is one kernel: keep one", line=deco.lineno
            )
        seen.add(id(node))
    specs = []
    for deco, node, _ in placed:
        if not isinstance(deco, ast.Call):
            raise KernelFileError(path, f"use @{DECORATOR}(dtypes=[...]), with its arguments", line=deco.lineno)
        header = python_header(_arguments(path, deco))
        spec = spec_from_mapping(
            header, path=path, line=deco.lineno, kind=KernelKind.PY, attr=node.name, default_name=node.name, source=text
        )
        specs.append(replace(spec, library_gemm=library_gemm(tree, node)))
    return distinct_names(path, specs)
