"""A library's GEMM called by a Python kernel, read from its file's syntax tree (docs/verification.md#library-gemms).

A Python kernel that multiplies with ``@``, ``torch.matmul`` or ``cupy.matmul`` may time that library rather than
code of its own: legitimate glue for a fused epilogue or a layout, a fallback branch, a check, or a library passed
off as a kernel (the cheat catalogue's row 18). Which, the file cannot say, so it is a note beside the kernel's
times, never a verdict. The kernel's function is read, and what of its file it uses (functions, classes, names
assigned), whatever their depth; Triton's ``tl.dot`` is the kernel's own code.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator

__all__ = ["LIBRARIES", "library_gemm"]

#: the modules whose GEMMs are a library's, by the name a file imports them as (``import torch``, ``import cupy as cp``)
LIBRARIES = ("torch", "cupy", "cupyx", "numpy", "torch.nn.functional")
#: a library module's GEMM functions
_FUNCTIONS = frozenset(
    {"matmul", "mm", "bmm", "addmm", "addbmm", "baddbmm", "einsum", "tensordot", "dot", "inner", "mv", "linear"}
    | {"chain_matmul", "multi_dot", "gemm", "_grouped_mm", "_scaled_mm", "_scaled_grouped_mm", "_int_mm"}
)
#: the most characters of a call shown
SHOWN_MOST = 60
#: a tensor's GEMM methods, whatever the array (``A.matmul(B)``)
_METHODS = frozenset(["matmul", "mm", "bmm", "addmm", "baddbmm"])


def _imported(tree: ast.Module) -> tuple[frozenset[str], frozenset[str]]:
    """The names the file binds to a library module (``torch``, ``F`` for ``torch.nn.functional``, ``cp``), and to a
    library's GEMM function (``from torch import matmul``)."""
    modules, functions = set(), set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            modules |= {a.asname or a.name.split(".")[0] for a in node.names if a.name.split(".")[0] in LIBRARIES}
        elif isinstance(node, ast.ImportFrom) and node.module and node.module.split(".")[0] in LIBRARIES:
            modules |= {a.asname or a.name for a in node.names if f"{node.module}.{a.name}" in LIBRARIES}
            functions |= {a.asname or a.name for a in node.names if a.name in _FUNCTIONS}
    return frozenset(modules), frozenset(functions)


def _root(node: ast.expr) -> str:
    while isinstance(node, ast.Attribute):
        node = node.value
    return node.id if isinstance(node, ast.Name) else ""


def _shown(func: ast.Attribute) -> str:
    """A library GEMM as written, at most :data:`SHOWN_MOST` characters (its end: the GEMM's name)."""
    text = ast.unparse(func)
    return text if len(text) <= SHOWN_MOST else "..." + text[-(SHOWN_MOST - 3) :]


def _chain(node: ast.Attribute) -> list[str]:
    """An attribute chain's names, outermost last (``torch.ops.aten.mm.default``: ops, aten, mm, default)."""
    names = []
    while isinstance(node, ast.Attribute):
        names.append(node.attr)
        node = node.value  # type: ignore[assignment]
    return names[::-1]


def _uses(body: ast.AST, modules: frozenset[str], imported: frozenset[str]) -> Iterator[tuple[str, str]]:
    """Each library GEMM in ``body`` as (how it is written, ''), and each name it uses as ('', name): what it calls,
    passes on or wraps (``torch.compile(impl)``), to be read in turn where the file defines it."""
    for node in ast.walk(body):
        if isinstance(node, (ast.BinOp, ast.AugAssign)) and isinstance(node.op, ast.MatMult):
            yield "@", ""
        elif isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Load):
            library = _root(node) in modules and any(name in _FUNCTIONS for name in _chain(node))
            if library or (node.attr in _METHODS and _root(node) not in ("tl", "triton")):
                yield _shown(node), ""
        elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Load):
            yield (node.id, "") if node.id in imported else ("", node.id)


def _definitions(tree: ast.Module) -> dict[str, ast.AST]:
    """What the file defines at its top level, by name: its functions and classes, and what it assigns (``mm =
    torch.matmul``, ``_fast = torch.compile(_impl)``)."""
    found: dict[str, ast.AST] = {}
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            found[node.name] = node
        elif isinstance(node, (ast.Assign, ast.AnnAssign)) and node.value is not None:
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            found |= {t.id: node.value for t in targets if isinstance(t, ast.Name)}
    return found


def library_gemm(tree: ast.Module, kernel: ast.FunctionDef) -> str:
    """The first library GEMM ``kernel`` uses, itself or through what its file defines (functions, classes, names
    assigned), at any depth, as written (``@``, ``torch.matmul``); '' for none."""
    modules, imported = _imported(tree)
    defined = _definitions(tree)
    todo, seen = [kernel], {kernel.name}
    while todo:
        for gemm, name in _uses(todo.pop(0), modules, imported):
            if gemm:
                return gemm
            if name in defined and name not in seen:
                seen.add(name)
                todo.append(defined[name])
    return ""
