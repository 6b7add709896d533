"""The peer of a case with a fused epilogue: torch, on the bytes the kernel reads. Where cuBLASLt has the epilogue
(a bias along N, then ReLU or GELU's tanh form, no C: ``torch._addmm_activation``, cuBLASLt's ``RELU_BIAS`` and
``GELU_BIAS`` epilogues) it is that one call; otherwise ``torch.addmm`` for ``alpha A B + beta C`` followed by torch's
own bias add, activation and residual add, each a kernel of its own (research/epilogue_peer_probe.py measures both).
The peer's bias, residual and C (where the kernel writes D apart from C) are its own copies, made once a case; it
writes D where the kernel would. torch is imported here (or ahead, by a standby). Part of the worker package.
"""

from __future__ import annotations

import importlib.util
from collections.abc import Callable
from typing import Any

import numpy as np

from ..records.dtypes import DType
from ..records.epilogue import Epilogue
from ..specs.cases import Case
from .buffers import upload_bits
from .cublas import Bind
from .fp8_peer import device_matrix
from .operands import CaseInputs
from .runner import GpuRunner

__all__ = ["EPILOGUE_DTYPES", "epilogue_runner", "lt_epilogue", "no_epilogue_peer"]

#: the input dtypes the epilogue's peer takes (torch's addmm with D in the inputs' dtype)
EPILOGUE_DTYPES = ("fp32", "fp16", "bf16")


def lt_epilogue(epilogue: Epilogue, beta: float, has_c: bool) -> bool:
    """Whether cuBLASLt's own epilogue, through ``torch._addmm_activation``, computes the case: a bias along N (or
    none), ReLU or GELU's tanh form (or none), and no C (beta = 0)."""
    return epilogue.bias in (None, "N") and epilogue.activation in (None, "relu", "gelu_tanh") and not (has_c and beta)


def epilogue_runner(device: GpuRunner, case: Case, data: CaseInputs, dt: DType, out: DType) -> Bind:
    """A function that, given each operand's (device address, leading dimension, batch stride) by name, as stored (C's
    is where D goes), returns a function queueing the peer's epilogue GEMM on the harness's stream."""
    import torch
    import torch.nn.functional as F

    cp, shape, epi = device.cp, case.shape, case.spec.epilogue
    assert epi is not None
    external = torch.cuda.ExternalStream(device.stream.ptr, device=torch.device("cuda", device.index))
    in_type, out_type = getattr(torch, dt.storage), getattr(torch, out.storage)
    alpha, beta = case.ab.alpha, case.ab.beta
    has_c = data.c0 is not None and beta != 0.0

    def tensor(x: np.ndarray) -> Any:  # the peer's own copy on the device, logical
        bits = upload_bits(cp, x)
        return torch.from_dlpack(bits).view(out_type).clone()

    with torch.cuda.stream(external):
        bias = tensor(data.epilogue["bias"]).reshape(-1) if "bias" in data.epilogue else None
        residual = tensor(data.epilogue["residual"]) if "residual" in data.epilogue else None
        c_in = tensor(data.c0) if has_c and epi.d else None
        zero_bias = torch.zeros(shape.N, dtype=out_type, device="cuda") if bias is None else bias
    broadcast = None if bias is None else (bias.reshape(1, -1) if epi.bias == "N" else bias.reshape(-1, 1))
    in_place = {  # each activation applied to D where it lies
        None: lambda x: None,
        "relu": lambda x: x.relu_(),
        "gelu": lambda x: torch._C._nn.gelu_(x, approximate="none"),
        "gelu_tanh": lambda x: torch._C._nn.gelu_(x, approximate="tanh"),
        "silu": lambda x: F.silu(x, inplace=True),
    }[epi.activation]
    fused = lt_epilogue(epi, beta, has_c)

    def view(op: str, ptr: int, ld: int, itemsize: int, dtype: Any) -> Any:
        rows, cols = {"A": (shape.M, shape.K), "B": (shape.K, shape.N), "C": (shape.M, shape.N)}[op]
        rows, cols = (cols, rows) if case.storage.transposed(op) else (rows, cols)
        span = (rows - 1) * ld + cols
        x = torch.from_dlpack(device_matrix(cp, ptr, 1, span, span, itemsize)[0]).view(dtype)
        x = x.as_strided((rows, cols), (ld, 1))
        return x.t() if case.storage.transposed(op) else x  # logical

    def bind(operands: dict[str, tuple[int, int, int]]) -> Callable[[], None]:
        torch.cuda.set_stream(external)
        a = view("A", operands["A"][0], operands["A"][1], dt.itemsize, in_type)
        b = view("B", operands["B"][0], operands["B"][1], dt.itemsize, in_type)
        d = view("C", operands["C"][0], operands["C"][1], out.itemsize, out_type)

        def gemm() -> None:
            torch.cuda.set_stream(external)
            if fused and epi.activation is not None:  # one call: cuBLASLt's epilogue
                torch._addmm_activation(zero_bias, a, b, alpha=alpha, use_gelu=epi.activation == "gelu_tanh", out=d)
            elif fused:
                torch.addmm(zero_bias, a, b, alpha=alpha, out=d)
            else:  # addmm, then each step in place
                if has_c and epi.d:
                    torch.addmm(c_in, a, b, beta=beta, alpha=alpha, out=d)
                else:  # C read in place, or ignored (beta = 0 ignores its NaN poison)
                    d.addmm_(a, b, beta=beta if has_c else 0.0, alpha=alpha)
                if broadcast is not None:
                    d.add_(broadcast)
                in_place(d)
            if residual is not None:
                d.add_(residual)

        return gemm

    return bind


def no_epilogue_peer(case: Case, capability: tuple[int, int]) -> str | None:
    """Why a case with an epilogue has no peer (None: torch's is its peer)."""
    if case.dtype not in EPILOGUE_DTYPES:
        return f"the fused epilogue's peer (torch's addmm and activations) takes {', '.join(EPILOGUE_DTYPES)} inputs"
    if case.spec.output_dtype(case.dtype) != case.dtype:
        return "the fused epilogue's peer (torch's addmm) writes D in the inputs' dtype"
    if case.spec.epilogue is not None and case.spec.epilogue.aux:
        return "torch's cuBLASLt epilogues do not write the pre-activation value (aux), so nothing times it alike"
    if importlib.util.find_spec("torch") is None:
        return "the fused epilogue's peer is torch's, which is not installed (pip install torch)"
    return None
