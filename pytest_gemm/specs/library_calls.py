"""A library's GEMM called by a Python kernel, read from its file's syntax tree (docs/verification.md#library-gemms).

A Python kernel that multiplies with ``@``, ``torch.matmul`` or ``cupy.matmul`` times that library, not code of its
own: legitimate glue for a fused epilogue or a layout, or a library passed off as a kernel (the cheat catalogue's row
18). Which, the file cannot say, so it is a note beside the kernel's times, never a verdict. The kernel's function is
read, and the functions of its file that it calls, whatever their depth; Triton's ``tl.dot`` is the kernel's own code.
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
    """A call's function as written, at most :data:`SHOWN_MOST` characters (its end: the GEMM's name)."""
    text = ast.unparse(func)
    return text if len(text) <= SHOWN_MOST else "..." + text[-(SHOWN_MOST - 3) :]


def _calls(function: ast.AST, modules: frozenset[str], imported: frozenset[str]) -> Iterator[tuple[str, str]]:
    """Each library GEMM in ``function`` as (how it is written, ''), and each name it calls as ('', name)."""
    for node in ast.walk(function):
        if isinstance(node, ast.BinOp) and isinstance(node.op, ast.MatMult):
            yield "@", ""
        elif isinstance(node, ast.Call):
            func = node.func
            if isinstance(func, ast.Attribute):
                module_call = _root(func) in modules and func.attr in _FUNCTIONS
                if module_call or (func.attr in _METHODS and _root(func) not in ("tl", "triton")):
                    yield _shown(func), ""
            elif isinstance(func, ast.Name):
                yield (func.id, "") if func.id in imported else ("", func.id)


def library_gemm(tree: ast.Module, kernel: ast.FunctionDef) -> str:
    """The first library GEMM ``kernel`` calls, itself or through its file's functions, as written (``@``,
    ``torch.matmul``); '' for none."""
    modules, imported = _imported(tree)
    functions = {n.name: n for n in tree.body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))}
    todo, seen = [kernel], {kernel.name}
    while todo:
        for gemm, name in _calls(todo.pop(0), modules, imported):
            if gemm:
                return gemm
            if name in functions and name not in seen:
                seen.add(name)
                todo.append(functions[name])
    return ""
