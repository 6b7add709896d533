"""A case's fp64 truth is computed once, at verification (after the kernel's first launch), and the timing judges
its outputs by that same truth: on the host, with the worker's prepared case and a Python kernel on NumPy."""

from __future__ import annotations

from pytest_gemm.records.shapes import Shape
from pytest_gemm.specs.cases import expand
from pytest_gemm.specs.pyfile import parse_py_source
from pytest_gemm.worker.verify import verify

from support.host_device import FunctionKernel, HostCupy, HostDevice, host_case

HEADER = """
from pytest_gemm import gemm_kernel

@gemm_kernel(dtypes=["fp32"])
def k(A, B, C, alpha, beta):
    pass
"""


def test_verification_computes_the_truth_once_and_the_timing_gets_that_truth(tmp_path):
    (spec,) = parse_py_source(tmp_path / "k.py", HEADER)
    case = next(c for c in expand(spec, [Shape(24, 40, 16)]) if c.skip_reason is None)

    def kernel(A, B, C, alpha, beta):
        C[...] = alpha * (A @ B) + (beta * C if beta else 0)

    prepared = host_case(FunctionKernel(HostDevice(HostCupy()), case, kernel))
    computed = []
    layout_truth = prepared.layout.truth
    prepared.layout.truth = lambda *args: computed.append(layout_truth(*args)) or computed[-1]
    assert verify(prepared).passed
    assert len(computed) == 1
    assert prepared.truth() is computed[0]  # as the timer asks for it
    assert len(computed) == 1
