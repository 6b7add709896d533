"""Python kernel files, read without running them: each top-level ``@gemm_kernel(...)`` function.

The pytest process never imports a kernel file (it may import CuPy, or do anything at import
time); only a GPU worker does, to call the function. So the decorator's arguments are read from
the syntax tree and must be literals (``ast.literal_eval``, which evaluates no code).
"""

from __future__ import annotations

import ast
import inspect
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from .spec import KernelFileError, KernelSpec, spec_from_mapping

__all__ = ["DECORATOR", "SPEC_ATTR", "header_from_arguments", "parse_py_source"]

DECORATOR = "gemm_kernel"
SPEC_ATTR = "__pytest_gemm__"  # where the decorator leaves the header on the function


def header_from_arguments(
    *,
    dtypes: Iterable[str],
    requires: Iterable[str] | str = (),
    layout: str = "row",
    params: dict[str, list[int]] | None = None,
    c_dtype: str | None = None,
    name: str | None = None,
    description: str = "",
    always_reads_c: bool = False,
    nondeterministic: str | None = None,
) -> dict[str, Any]:
    """The header a ``gemm_kernel(...)`` call states, in the keys of a ``.cu`` header."""
    data: dict[str, Any] = {"dtypes": list(dtypes), "layout": layout, "description": description}
    data["always_reads_c"] = always_reads_c
    if nondeterministic is not None:
        data["nondeterministic"] = nondeterministic
    data["requires"] = [requires] if isinstance(requires, str) else list(requires)
    if params:
        data["params"] = {k: list(v) if isinstance(v, (list, tuple)) else v for k, v in params.items()}
    if c_dtype is not None:
        data["c_dtype"] = c_dtype
    if name is not None:
        data["name"] = name
    return data


_ARGUMENTS = tuple(inspect.signature(header_from_arguments).parameters)  # what gemm_kernel(...) takes


def _decorator_name(node: ast.expr) -> str:
    if isinstance(node, ast.Call):
        node = node.func
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        return node.attr
    return ""


def _arguments(path: str | Path, call: ast.Call) -> dict[str, Any]:
    if call.args:
        raise KernelFileError(path, f"{DECORATOR}(...) takes keyword arguments only", line=call.lineno)
    out = {}
    for keyword in call.keywords:
        if keyword.arg not in _ARGUMENTS:
            what = "**" if keyword.arg is None else repr(keyword.arg)
            raise KernelFileError(
                path, f"{DECORATOR}(...): unknown argument {what}; expected {', '.join(_ARGUMENTS)}", line=call.lineno
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
    if "dtypes" not in out:
        raise KernelFileError(path, f"{DECORATOR}(...) needs dtypes=[...]", line=call.lineno, key="dtypes")
    return out


def parse_py_source(path: str | Path, text: str) -> list[KernelSpec]:
    """The kernels a Python kernel file declares, read from its syntax tree."""
    try:
        tree = ast.parse(text, filename=str(path))
    except SyntaxError as exc:
        raise KernelFileError(path, f"not valid Python: {exc.msg}", line=exc.lineno) from None
    specs = []
    for node in tree.body:
        if not isinstance(node, ast.FunctionDef):
            continue
        for deco in node.decorator_list:
            if _decorator_name(deco) != DECORATOR:
                continue
            if not isinstance(deco, ast.Call):
                raise KernelFileError(path, f"use @{DECORATOR}(dtypes=[...]), with its arguments", line=deco.lineno)
            try:
                header = header_from_arguments(**_arguments(path, deco))
            except (TypeError, AttributeError) as exc:
                raise KernelFileError(path, f"{DECORATOR}(...): {exc}", line=deco.lineno) from None
            specs.append(
                spec_from_mapping(
                    header, path=path, line=deco.lineno, kind="py", attr=node.name, default_name=node.name, source=text
                )
            )
    names = [s.name for s in specs]
    for spec in specs:
        if names.count(spec.name) > 1:
            raise KernelFileError(path, f"two kernels are named {spec.name!r}; give each a distinct name", key="name")
    return specs
