"""Log every kernel CuPy compiles with NVRTC, with the pytest-gemm line that asked for it (research only).

    GEMM_COMPILE_LOG=DIR PYTHONPATH=research/cupy_compile_log:$PYTHONPATH python3 -m pytest --gemm-kernels kernels/

Python imports this file at start-up (``sitecustomize``) in the pytest process and, as workers inherit
its import path, in each GPU worker. When ``GEMM_COMPILE_LOG`` is set, it wraps CuPy's
``cupy.cuda.compiler._compile_using_nvrtc_no_warning`` (CuPy 14: what runs NVRTC on a disk-cache miss)
as that module is imported, and appends one JSON line per compile to ``DIR/compiles-PID.jsonl``: the
start time, the seconds NVRTC took, the kernels' names and the innermost frames of pytest-gemm's own
code. ``research/compile_summary.py`` reads them.
"""

from __future__ import annotations

import importlib.abc
import importlib.util
import json
import os
import re
import sys
import time
import traceback
from typing import Any

_LOG = os.environ.get("GEMM_COMPILE_LOG")
_TARGET = "cupy.cuda.compiler"
_FUNCTION = "_compile_using_nvrtc_no_warning"


def _wrap(module: Any) -> None:
    compile_with_nvrtc = getattr(module, _FUNCTION)

    def logged(source: str, *args: Any, **kwargs: Any) -> Any:
        start = time.time()
        try:
            return compile_with_nvrtc(source, *args, **kwargs)
        finally:
            frames = [
                f"{os.path.basename(f.filename)}:{f.lineno}:{f.name}"
                for f in traceback.extract_stack()
                if "pytest_gemm" in f.filename
            ]
            record = {
                "pid": os.getpid(),
                "t": start,
                "dur": time.time() - start,
                "kernels": re.findall(r"__global__\s+void\s+(\w+)", source)[:3],
                "stack": frames[-6:],
            }
            with open(os.path.join(_LOG or ".", f"compiles-{os.getpid()}.jsonl"), "a", encoding="utf-8") as out:
                out.write(json.dumps(record) + "\n")

    setattr(module, _FUNCTION, logged)


class _Finder(importlib.abc.MetaPathFinder):
    def find_spec(self, name: str, path: Any, target: Any = None) -> Any:
        if name != _TARGET:
            return None
        sys.meta_path.remove(self)
        spec = importlib.util.find_spec(name)
        execute = spec.loader.exec_module

        def exec_module(module: Any) -> None:
            execute(module)
            _wrap(module)

        spec.loader.exec_module = exec_module
        return spec


if _LOG:
    os.makedirs(_LOG, exist_ok=True)
    sys.meta_path.insert(0, _Finder())
