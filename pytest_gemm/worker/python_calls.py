"""A Python kernel's call: views of the operands as stored, as CuPy arrays, or as torch tensors for the kernels that
ask for them (``arrays="torch"``): zero-copy views of the harness's buffers through DLPack, and the harness's
stream as torch's current stream for the whole call, so that what torch and Triton launch lands where the harness
synchronises and times; torch's caching allocator emptied and its stream set back to its default between cases.
Part of the worker package; torch is imported here for such kernels (or ahead, by a standby)."""

from __future__ import annotations

import contextlib
import inspect
import sys
from collections.abc import Callable
from typing import Any

from ..records.dtypes import DType, get_dtype
from ..specs.cases import Case
from ..specs.footprint import per_group
from ..specs.spec import ARRAYS, KernelFileError, KernelSpec
from .buffers import np_dtype, uint_type
from .errors import guarded_call
from .integrity import HARNESS
from .operands import Operands

__all__ = ["autotune_choices", "default_torch_stream", "python_launcher", "release_torch"]


def python_launcher(
    cp: Any,
    case: Case,
    ops: Operands,
    extra: list[tuple[Any, DType]],
    fn: Callable[..., Any],
    path: str,
    device: tuple[int, int] | None,
) -> Callable[[], None]:
    """A function that calls the Python kernel ``fn`` (imported from ``path``) on views of ``ops``' A, B and C as
    stored (a batch's: batch x rows x cols), its alpha and beta where it takes them, then ``extra`` (the views of what
    else it reads, such as an FP8 kernel's grids of scales or a grouped kernel's group arrays, each with its dtype):
    CuPy arrays, or, given a ``device`` (the harness's stream's address and the device's index), torch tensors there."""
    spec = case.spec
    dt, out = get_dtype(case.dtype), get_dtype(spec.output_dtype(case.dtype))
    torch = device is not None  # torch takes bf16 as its bits (CuPy has no type for it)
    operands = tuple(zip("ABC", (ops.a, ops.b, ops.c_read), (dt, dt, out)))
    views = [_view(cp, g, t, torch, case.storage.transposed(op)) for op, g, t in operands]
    # a grouped case's operands of one matrix a group are 3-D, groups first, even for one group
    views = [
        v[None] if v.ndim == 2 and per_group(spec, op, case.shape) else v for (op, _, _), v in zip(operands, views)
    ]
    dtypes = [t for *_, t in operands]
    views += [view for view, _ in extra]
    dtypes += [t for _, t in extra]
    for name in () if spec.epilogue is None else spec.epilogue.args:  # a fused epilogue's operands, in order
        g = ops.c if name == "D" else ops.epilogue[name]
        view = _view(cp, g, out, torch, name != "bias" and case.storage.transposed("C"))
        views.append(view[0] if name == "bias" else view)  # the bias a vector
        dtypes.append(out)
    cuda_errors = (cp.cuda.driver.CUDADriverError, cp.cuda.runtime.CUDARuntimeError)
    params = case.variant.as_dict()
    scalars = (case.ab.alpha, case.ab.beta) if spec.alpha_beta else ()  # alpha_beta=False: C = A B only
    if device is not None:
        stream, index = device
        return torch_launcher(spec, fn, views, dtypes, stream, index, scalars, params, (path, spec.path, cuda_errors))

    def call() -> None:
        guarded_call(lambda: fn(*views[:3], *scalars, *views[3:], **params), path, spec.path, cuda_errors)

    return lambda: HARNESS.call(call)


def _view(cp: Any, g: Any, dt: DType, torch: bool, transposed: bool) -> Any:
    """A view of ``g``'s matrix (or batch) in logical order (``transposed``: it is stored transposed): its elements,
    or its bits where the array library has no type for them."""
    view = g.matrix(uint_type(cp, dt.itemsize) if _as_bits(dt, torch) else np_dtype(dt))
    return view.swapaxes(-1, -2) if transposed else view


def _torch(spec: KernelSpec) -> Any:
    """The torch module, or the kernel file's error saying what to install."""
    try:
        import torch
    except ImportError as exc:
        message = f"this kernel file needs torch (pip install {ARRAYS['torch']}): {spec.name} declares arrays = 'torch'"
        raise KernelFileError(spec.path, f"{message} ({exc})", line=spec.line, key="arrays") from None
    return torch


def torch_launcher(
    spec: KernelSpec,
    fn: Callable[..., Any],
    views: list[Any],
    dtypes: list[DType],
    stream: int,
    device: int,
    scalars: tuple[float, ...],
    params: dict[str, int],
    where: tuple[str, str, tuple[type[BaseException], ...]],
) -> Callable[[], None]:
    """A function that calls ``fn`` on torch tensors of ``views`` (CuPy arrays of each operand's elements, bf16 as its
    bits) with ``stream`` (the harness's, on ``device``, the worker's one device and CUDA's current one) torch's current
    stream; ``where`` is the file, as imported and as shown, and the errors that are CUDA's, for
    :func:`~.errors.guarded_call`. torch's current stream stays the harness's after a call, until the case ends
    (:mod:`.backend` sets it back)."""
    torch = _torch(spec)
    path, shown, cuda_errors = where  # torch's out-of-memory error is the kernel's own: it costs its case
    made: list[Any] = []

    def make() -> None:  # what torch says about the views is about the kernel's case, not pytest-gemm's code
        made.append(torch.cuda.ExternalStream(stream, device=torch.device("cuda", device)))
        with torch.cuda.device(device), torch.cuda.stream(made[0]):
            made.extend(_tensor(torch, view, dt) for view, dt in zip(views, dtypes))

    guarded_call(make, path, shown, cuda_errors)
    external, tensors = made[0], made[1:]

    def call() -> None:  # torch's current stream set before each call and left so: no context to enter and leave,
        torch.cuda.set_stream(external)  # 18 us of the host's time a call on an H100 (research/launch_overhead.py)
        fn(*tensors[:3], *scalars, *tensors[3:], **params)

    return lambda: HARNESS.call(lambda: guarded_call(call, path, shown, cuda_errors))


def _as_bits(dt: DType, torch: bool) -> bool:
    """Whether a view of ``dt`` holds its bits: FP8 always (CuPy's arrays of it are uint8), bf16 for torch."""
    return dt.as_bits and (torch or dt.name != "bf16")


def _tensor(torch: Any, view: Any, dt: DType) -> Any:
    """A torch tensor on ``view``'s memory, with its shape and strides: bf16, FP8 and UE8M0, which CuPy has no type for,
    arrive as their bits and are viewed as torch's type."""
    tensor = torch.from_dlpack(view)
    return tensor.view(getattr(torch, dt.storage)) if dt.as_bits else tensor


def autotune_choices(fn: Callable[..., Any], call: Callable[[], object]) -> tuple[str, ...]:
    """``call`` (the kernel ``fn``'s first call for a case), and what each Triton autotuner of ``fn``'s module that it
    ran chose for it: ``name: config``, as Triton writes a config. An autotuner tunes once for each value
    of its key and sets its ``best_config`` on every run, so the choices are read from the autotuners it left set."""
    space = getattr(inspect.unwrap(fn), "__globals__", {})
    tuners = _autotuners(space)
    for tuner in tuners:
        tuner.best_config = None
    call()
    tuners += [t for t in _autotuners(space) if t not in tuners]  # a module may import Triton only when called
    chosen = [(getattr(getattr(t, "base_fn", None), "__name__", "kernel"), t) for t in tuners]
    return tuple(f"{name}: {t.best_config}" for name, t in chosen if getattr(t, "best_config", None) is not None)


def _autotuners(space: dict[str, Any]) -> list[Any]:
    """Triton's autotuners among a module's globals, also where another decorator wraps one (``@triton.heuristics``
    over ``@triton.autotune``: each holds the next as ``fn``). None unless Triton is imported."""
    kind = getattr(sys.modules.get("triton.runtime.autotuner"), "Autotuner", None)
    if kind is None:
        return []
    found = []
    for value in list(space.values()):
        for _ in range(4):  # a chain of Triton's decorators, each holding the next as fn
            if isinstance(value, kind):
                found.append(value)
                break
            value = getattr(value, "fn", None) if type(value).__module__.startswith("triton.") else None
    return list({id(t): t for t in found}.values())


def _torch_on_gpu() -> Any:
    """torch, where it is imported (by a kernel file, a peer, or ahead) and has used the GPU here; else None."""
    torch = sys.modules.get("torch")
    return torch if torch is not None and torch.cuda.is_initialized() else None


def release_torch() -> None:
    """Empty torch's caching allocator where torch has used the GPU."""
    torch = _torch_on_gpu()
    if torch is not None:
        torch.cuda.empty_cache()


def default_torch_stream() -> None:
    """torch's current stream back to its default after a case: a torch kernel's case leaves the harness's stream
    there (:func:`python_launcher`), and no later case may depend on whether one ran before it."""
    torch = _torch_on_gpu()
    if torch is not None:
        with contextlib.suppress(Exception):  # a lost context: the worker is being replaced anyway
            torch.cuda.set_stream(torch.cuda.default_stream())
