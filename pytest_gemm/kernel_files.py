"""Read a kernel file (``.cu`` with headers, or ``.py`` with ``@gemm_kernel``) into its specs, and list its cases."""

from __future__ import annotations

import hashlib
import importlib.util
import sys
from pathlib import Path
from typing import Any

from .cases import expand
from .shapes import Shape
from .spec import KernelFileError, KernelSpec, parse_cu_source, spec_from_mapping

__all__ = ["SPEC_ATTR", "case_ids", "load_specs", "shown_path", "source_hash"]

SPEC_ATTR = "__pytest_gemm__"


def shown_path(path: Path, root: Path) -> str:
    """``path`` as ids and messages show it: relative to the rootdir when it lies inside it."""
    try:
        return str(path.relative_to(root))
    except ValueError:
        return str(path)


def load_specs(path: Path, shown: str) -> list[KernelSpec]:
    """The kernels a file declares; ``shown`` is the path used in ids and messages (relative to the rootdir)."""
    if path.suffix == ".py":
        return _py_specs(path, shown)
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise KernelFileError(shown, f"cannot read the file: {exc}") from None
    return parse_cu_source(shown, text)


def source_hash(path: Path) -> str:
    """SHA-256 of the kernel file's bytes (what a baseline notes to tell a changed kernel)."""
    return hashlib.sha256(path.read_bytes()).hexdigest()


def case_ids(path: Path, shown: str, shape: Shape) -> set[str]:
    """The test ids of the cases the file has today at ``shape`` (all dtypes; cases a rule skips excluded)."""
    ids = set()
    for spec in load_specs(path, shown):
        for case in expand(spec, [shape]):
            if case.skip_reason is None:
                ids.add(f"{shown}::{spec.name}[{case.id}]")
    return ids


def _py_specs(path: Path, shown: str) -> list[KernelSpec]:
    module = _import(path, shown)
    specs = []
    for attr in vars(module).values():
        data = getattr(attr, SPEC_ATTR, None)
        if callable(attr) and isinstance(data, dict):
            code = getattr(attr, "__code__", None)
            specs.append(
                spec_from_mapping(
                    data,
                    path=shown,
                    line=code.co_firstlineno if code else 1,
                    kind="py",
                    function=attr,
                    default_name=attr.__name__,
                )
            )
    return specs


def _import(path: Path, shown: str) -> Any:
    name = "pytest_gemm_kernels_" + hashlib.sha1(str(path).encode()).hexdigest()[:12]
    if name in sys.modules:
        return sys.modules[name]
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise KernelFileError(shown, "cannot be imported as a Python module")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    try:
        spec.loader.exec_module(module)
    except Exception as exc:
        del sys.modules[name]
        raise KernelFileError(shown, f"importing the kernel file failed: {type(exc).__name__}: {exc}") from None
    return module
