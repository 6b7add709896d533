"""Kernel files as a worker reads them: specs read again for every changed file, Python kernels imported.

Only a worker imports a Python kernel file (it may import CuPy, or do anything at import time);
the pytest process reads the same specs from its syntax tree.
"""

from __future__ import annotations

import hashlib
import importlib.util
import sys
from collections.abc import Callable
from pathlib import Path
from types import ModuleType
from typing import Any

from ..records.request import Request
from ..specs.cases import Case
from ..specs.files import case_from_request, load_specs
from ..specs.pyfile import SPEC_ATTR
from ..specs.spec import KernelFileError, KernelSpec
from .integrity import HARNESS
from .namespaces import KERNEL_MODULES

__all__ = ["KernelFiles"]


class KernelFiles:
    """The kernel files this worker has read, by path and modification time."""

    def __init__(self) -> None:
        self._specs: dict[str, tuple[float, list[KernelSpec]]] = {}
        self._modules: dict[str, tuple[float, ModuleType]] = {}

    def case(self, request: Request) -> Case:
        path = Path(request.path)
        try:
            mtime = path.stat().st_mtime
        except OSError as exc:
            raise KernelFileError(request.shown, f"cannot read the file: {exc}") from None
        cached = self._specs.get(request.path)
        if cached is None or cached[0] != mtime:
            self._specs[request.path] = cached = (mtime, load_specs(path, request.shown))
        return case_from_request(request, cached[1])

    def function(self, spec: KernelSpec, path: str) -> Callable[..., Any]:
        """The Python kernel's function, from its file imported in this worker."""
        mtime = Path(path).stat().st_mtime
        cached = self._modules.get(path)
        if cached is None or cached[0] != mtime:
            self._modules[path] = cached = (mtime, _import(Path(path), spec.path))
        fn = getattr(cached[1], spec.attr, None)
        if not callable(fn) or not isinstance(getattr(fn, SPEC_ATTR, None), dict):
            raise KernelFileError(
                spec.path, f"{spec.attr} is not a @gemm_kernel function once the file is imported", line=spec.line
            )
        return fn

    def helper(self, path: Path, name: str, shown: str) -> Callable[..., Any]:
        """A plain function ``name`` of the Python file ``path`` (shown as ``shown``), imported in this worker: what a
        ``.cu`` kernel's header names to fill a buffer with (``fill = "schedule.py:hilbert"``)."""
        mtime = path.stat().st_mtime if path.is_file() else None
        if mtime is None:
            raise KernelFileError(shown, "does not exist (a buffer's fill names it)", key="buffers")
        cached = self._modules.get(str(path))
        if cached is None or cached[0] != mtime:
            self._modules[str(path)] = cached = (mtime, _import(path, shown))
        fn = getattr(cached[1], name, None)
        if not callable(fn):
            raise KernelFileError(shown, f"has no function {name!r} (a buffer's fill names it)", key="buffers")
        return fn


def _import(path: Path, shown: str) -> ModuleType:
    name = KERNEL_MODULES + hashlib.sha1(str(path).encode()).hexdigest()[:12]
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise KernelFileError(shown, "cannot be imported as a Python module")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    with HARNESS.watching():  # what its import changes in the worker, or leaves running
        try:
            spec.loader.exec_module(module)
        except BaseException as exc:  # a kernel file that raises SystemExit at import must not end the worker
            del sys.modules[name]
            missing = getattr(exc, "name", None) if isinstance(exc, ModuleNotFoundError) else None
            needs = f"this kernel file needs {missing} (pip install {missing}); " if missing in NEEDS_INSTALL else ""
            failed = f"{needs}importing the kernel file failed: {type(exc).__name__}: {exc}"
            raise KernelFileError(shown, failed) from None
    return module


#: the packages whose absence a kernel file's import error names as what to install (torch and Triton kernels)
NEEDS_INSTALL = ("torch", "triton")
