"""On the GPU: every storage order, every size type, a declared fp16 accumulation and a
mixed output pass when right; misreadings are named; a header that mistypes the sizes is refused. Needs a device."""

from __future__ import annotations

import pytest

from support import ROOT, failure_section, outcomes_in, requires_gpu, run_kernel_files

pytestmark = [requires_gpu, pytest.mark.gpu]

ORDERS = ROOT / "tests" / "kernels_orders"
SHAPES = "96x96x96,67x45x37,1x1x1000,64x64x1,128x128x4096"


@pytest.fixture(scope="module")
def orders_run(tmp_path_factory):
    """The kernels of tests/kernels_orders, once, on shapes that are square (for the misreadings), odd, and of a K
    large enough that fp16 accumulation shows."""
    work = tmp_path_factory.mktemp("orders")
    return run_kernel_files(work, ORDERS, ("orders.cu", "orders_py.py"), "--gemm-shapes", SHAPES, "--benchmark-skip")


def _runnable(kernel: str) -> set[str]:
    """The cases of ``kernel`` the shapes allow (its ``requires``), as test names."""
    from pytest_gemm.records.shapes import parse_shapes
    from pytest_gemm.specs.cases import expand
    from pytest_gemm.specs.files import load_specs

    path = ORDERS / ("orders_py.py" if kernel == "orders_py" else "orders.cu")
    (spec,) = [s for s in load_specs(path, path.name) if s.name == kernel]
    return {c.name for c in expand(spec, parse_shapes(SHAPES)) if c.skip_reason is None}


@pytest.mark.parametrize("kernel", ["orders_fp32", "orders_fp16_fp32out", "hacc_declared", "orders_py"])
def test_correct_kernels_pass_in_every_order_size_type_and_accumulation(orders_run, kernel):
    """Every case of a right kernel passes (each one listed as PASSED: none skipped as a
    calibration error, which a wrong cuBLAS call for some order would give), the peer with it."""
    outcomes = outcomes_in(orders_run)
    expected = _runnable(kernel)
    assert expected and {name for name in expected if outcomes.get(name) != "PASSED"} == set(), orders_run[-6000:]
    assert "calibration error" not in orders_run


def test_undeclared_fp16_accumulation_fails_at_large_k(orders_run):
    """The same fp16-accumulating kernel without the declaration fails where K is large."""
    outcomes = outcomes_in(orders_run)
    assert outcomes.get("hacc_undeclared[fp16-128x128x4096]") == "FAILED", orders_run[-6000:]
    assert "hacc_undeclared[fp16-128x128x4096] " in orders_run


@pytest.mark.parametrize(
    ("test", "said"),
    [
        ("misread_b[fp32-96x96x96]", "matches B read as K x N; the header says N x K"),
        ("a_as_b[fp32-96x96x96]", "matches C = A x A (B never read)"),
        ("c_transposed[fp32-96x96x96]", "matches C written N x M (transposed); the header says M x N"),
    ],
)
def test_misreadings_are_named(orders_run, test, said):
    """A wrong output that matches a misreading says which."""
    section = failure_section(orders_run, test)
    assert said in section, section[:3000]


def test_a_header_that_mistypes_the_sizes_is_refused(orders_run):
    """Int sizes declared for a size_t kernel fail naming the parameter and the fix, nothing launched."""
    assert (
        "parameter 1 (M) takes 8 bytes in the compiled kernel, but the harness passes 4 (size_type 'int'); declare "
        "size_type = 'long long' or 'size_t'"
    ) in orders_run


def test_an_operand_stored_transposed_keeps_its_bits_when_transposed_on_the_device():
    """A host operand stored in its other order is transposed on the device (docs/measurements.md#drawing-the-inputs),
    bit for bit as NumPy transposes it: FP8 and bf16 elements, NaN payloads, a batch of matrices each its own."""
    import ml_dtypes
    import numpy as np

    from pytest_gemm.records.storage import Storage
    from pytest_gemm.worker.operands import CaseInputs
    from pytest_gemm.worker.runner import open_device

    cp, rng = open_device(0).cp, np.random.default_rng(0)
    for dtype, batch in ((ml_dtypes.float8_e4m3fn, 3), (ml_dtypes.bfloat16, 1), (np.float32, 2)):
        width = np.dtype(dtype).itemsize
        x = rng.integers(0, 2 ** (8 * width), (batch * 129, 70), dtype=f"u{width}").view(dtype)
        data = CaseInputs(x, x, None, Storage(B="NxK"), batch)
        on_device = data.stored(x, "B", cp)
        assert isinstance(on_device, np.ndarray) and on_device.dtype == x.dtype and on_device.shape == (batch * 70, 129)
        assert np.array_equal(on_device.view(f"u{width}"), data.stored(x, "B").view(f"u{width}"))
        assert np.array_equal(cp.asnumpy(data.stored_bits(cp, x, "B")), on_device.view(f"u{width}"))
