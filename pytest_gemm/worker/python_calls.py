"""A Python kernel's call: views of the operands as stored, as CuPy arrays, or as torch tensors for the kernels that
ask for them (``arrays="torch"``, #35): zero-copy views of the harness's buffers through DLPack, and the harness's
stream as torch's current stream for the whole call, so that what torch and Triton launch lands where the harness
synchronises and times. Part of the worker package; torch is imported here only, and only for such kernels."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ..records.dtypes import DType, get_dtype
from ..specs.cases import Case
from ..specs.spec import ARRAYS, KernelFileError, KernelSpec
from .buffers import GuardedMatrix, np_dtype, uint_type
from .errors import guarded_call

__all__ = ["python_launcher"]


def python_launcher(
    cp: Any,
    case: Case,
    matrices: tuple[GuardedMatrix, GuardedMatrix, GuardedMatrix],
    dt: DType,
    fn: Callable[..., Any],
    path: str,
    runner: Any,
) -> Callable[[], None]:
    """A function that calls the Python kernel ``fn`` (imported from ``path``) on views of A, B and C as stored (a
    batch's: batch x rows x cols): CuPy arrays, or torch tensors on the ``runner``'s stream and device (a
    :class:`~.device.GpuRunner`) where the kernel asks for them."""
    spec = case.spec
    out = get_dtype(spec.output_dtype(case.dtype))
    torch = spec.arrays == "torch"  # torch takes bf16 as its bits (CuPy has no type for it)
    operands = tuple(zip("ABC", matrices, (dt, dt, out)))
    views = [g.matrix(uint_type(cp, t.itemsize) if torch and t.name == "bf16" else np_dtype(t)) for _, g, t in operands]
    views = [v.swapaxes(-1, -2) if case.storage.transposed(op) else v for (op, _, _), v in zip(operands, views)]
    cuda_errors = (cp.cuda.driver.CUDADriverError, cp.cuda.runtime.CUDARuntimeError)
    params, scalars = case.variant.as_dict(), (case.ab.alpha, case.ab.beta)
    if torch:
        dtypes = [t for *_, t in operands]
        stream, device, where = runner.stream.ptr, runner.index, (path, spec.path, cuda_errors)
        return torch_launcher(spec, fn, views, dtypes, stream, device, scalars, params, where)
    return lambda: guarded_call(lambda: fn(*views, *scalars, **params), path, spec.path, cuda_errors)


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
    scalars: tuple[float, float],
    params: dict[str, int],
    where: tuple[str, str, tuple[type[BaseException], ...]],
) -> Callable[[], None]:
    """A function that calls ``fn`` on torch tensors of ``views`` (CuPy arrays of each operand's elements, bf16 as its
    bits) with ``stream`` (the harness's, on ``device``) torch's current stream; ``where`` is the file, as imported and
    as shown, and the errors that are CUDA's, for :func:`~.errors.guarded_call`."""
    torch = _torch(spec)
    path, shown, cuda_errors = where  # torch's out-of-memory error is the kernel's own: it costs its case
    made: list[Any] = []

    def make() -> None:  # what torch says about the views is about the kernel's case, not pytest-gemm's code
        made.append(torch.cuda.ExternalStream(stream, device=torch.device("cuda", device)))
        with torch.cuda.device(device), torch.cuda.stream(made[0]):
            made.extend(_tensor(torch, view, dt) for view, dt in zip(views, dtypes))

    guarded_call(make, path, shown, cuda_errors)
    external, tensors = made[0], made[1:]

    def call() -> None:
        with torch.cuda.device(device), torch.cuda.stream(external):
            fn(*tensors, *scalars, **params)

    return lambda: guarded_call(call, path, shown, cuda_errors)


def _tensor(torch: Any, view: Any, dt: DType) -> Any:
    """A torch tensor on ``view``'s memory, with its shape and strides: bf16, which CuPy has no type for, arrives as its
    bits (uint16) and is viewed as torch's bfloat16."""
    tensor = torch.from_dlpack(view)
    return tensor.view(torch.bfloat16) if dt.name == "bf16" else tensor
