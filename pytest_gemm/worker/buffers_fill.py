"""The contents of a ``.cu`` kernel's buffers (specs.buffers), on the host, once a case: zeros, or what the header's
function of a Python file beside the kernel file returns for the case. Part of the worker package: the file is
imported here, as a Python kernel file is."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from ..specs.buffers import Buffer
from ..specs.cases import Case
from ..specs.errors import KernelFileError
from ..specs.expr import ExpressionError
from ..specs.footprint import kernel_sizes
from .integrity import HARNESS, HarnessChanged, ThreadLeft

__all__ = ["buffer_contents"]


def buffer_contents(runner: Any, case: Case, buffer: Buffer, path: str) -> np.ndarray:
    """``buffer``'s contents for ``case`` (its kernel file at ``path``): its declared size of its element type."""
    spec = case.spec
    names = {**spec.names_for(case.variant), **kernel_sizes(spec, case.shape), "SM_COUNT": runner.sm_count}
    try:
        size = buffer.size(names)
    except ExpressionError as exc:
        raise KernelFileError(spec.path, f"{buffer.name}: {exc}", line=spec.line, key="buffers") from None
    if isinstance(size, float) and size.is_integer():
        size = int(size)
    if isinstance(size, bool) or not isinstance(size, int) or size < 1:
        raise KernelFileError(
            spec.path, f"{buffer.name}: size {buffer.size.text!r} gives {size!r}; expected a positive integer",
            line=spec.line, key="buffers",
        )  # fmt: skip
    dtype = np.dtype(buffer.type)
    made = buffer.function
    if made is None:
        return np.zeros(size, dtype)
    file, name = made
    where = Path(path).parent / file
    shown = str(Path(spec.path).parent / file)
    fn = runner.files.helper(where, name, shown)
    try:
        sizes = {key: names[key] for key in ("M", "N", "K", "SM_COUNT")}
        values = HARNESS.call(lambda: fn(**sizes, **case.variant.as_dict()))
        host = np.asarray(values, dtype=dtype).reshape(-1)
    except (HarnessChanged, ThreadLeft):
        raise
    except Exception as exc:  # the user's function: what it raised, said as its file's problem
        raise KernelFileError(
            shown, f"{name}() for {case.shape.id} (buffer {buffer.name}) raised {type(exc).__name__}: {exc}",
            key="buffers",
        ) from None  # fmt: skip
    if host.size != size:
        raise KernelFileError(
            shown, f"{name}() gave {host.size} values for {case.shape.id}; buffer {buffer.name} is {size} elements",
            key="buffers",
        )  # fmt: skip
    return host
