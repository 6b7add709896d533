"""On the GPU: the fresh kernel (docs/verification.md#fresh-inputs-for-timed-launches) writes each element as its host
mirror says, for every element size and kind, stored either way, and undoes itself; and a timed case's launches get
inputs of their own, checked, with the run's verdicts unchanged for right kernels. Needs a CUDA device."""

from __future__ import annotations

import re

import numpy as np
import pytest

from pytest_gemm.worker.cupti_clock import FRESH_KERNEL
from pytest_gemm.worker.fresh import FRESH_SOURCE, negated

from support import ROOT, outcomes_in, requires_gpu, run_kernel_files

pytestmark = [requires_gpu, pytest.mark.gpu]

#: element type -> (bytes, integer, the sign bit of a float)
KINDS = {"uint8-float": (1, 0, 0x80), "int8": (1, 1, 0), "uint16": (2, 0, 0x8000), "uint32-float": (4, 0, 1 << 31),
         "int32": (4, 1, 0), "uint64": (8, 0, 1 << 63)}  # fmt: skip


def _mirror(bits: np.ndarray, rows: int, cols: int, transposed: bool, keys, size: int, integer: int, sign: int):
    t = np.arange(bits.size)
    j, i = t % cols, (t // cols) % rows
    r, c = (j, i) if transposed else (i, j)
    neg = negated(keys[0], rows * cols + 1)[r] ^ negated(keys[1], rows * cols + 1)[c]
    flat = bits.ravel()
    if integer:  # two's complement, wrapping
        wrapped = np.where(neg, (np.uint64(0) - flat.astype(np.uint64)) & np.uint64((1 << (8 * size)) - 1), flat)
        return wrapped.astype(flat.dtype).reshape(bits.shape)
    return np.where(neg, flat ^ flat.dtype.type(sign), flat).reshape(bits.shape)


@pytest.mark.parametrize("kind", sorted(KINDS))
@pytest.mark.parametrize("transposed", [False, True])
def test_the_fresh_kernel_writes_what_its_host_mirror_says(kind, transposed):
    import cupy as cp

    size, integer, sign = KINDS[kind]
    storage = {1: np.uint8, 2: np.uint16, 4: np.uint32, 8: np.uint64}[size]
    rng = np.random.default_rng(11)
    batch, rows, cols, keys = 3, 37, 53, (0x2468ACE1, 0x13579BDF)
    bits = rng.integers(0, np.iinfo(storage).max, (batch * rows, cols), dtype=storage, endpoint=True)
    if integer:  # the lowest value (int32 C's poison) among them: negated, it wraps to itself, as on the host
        bits.ravel()[:3] = storage(1 << (8 * size - 1))
    src, dst = cp.asarray(bits), cp.empty_like(cp.asarray(bits))
    flags = size | integer << 8 | int(transposed) << 9 | 1 << 10 | 1 << 11
    ops = cp.asarray(np.array([src.data.ptr, dst.data.ptr, bits.size, rows, cols, flags], dtype=np.uint64))
    kernel = cp.RawKernel(FRESH_SOURCE, FRESH_KERNEL)
    kernel((64,), (256,), (ops, np.int32(1), np.uint32(keys[0]), np.uint32(keys[1])))
    np.testing.assert_array_equal(dst.get(), _mirror(bits, rows, cols, transposed, keys, size, integer, sign))
    back = cp.asarray(np.array([dst.data.ptr, src.data.ptr, bits.size, rows, cols, flags], dtype=np.uint64))
    kernel((64,), (256,), (back, np.int32(1), np.uint32(keys[0]), np.uint32(keys[1])))
    np.testing.assert_array_equal(src.get(), bits)  # its own inverse


def test_right_kernels_pass_with_fresh_inputs_and_say_how_many_outputs_were_checked(tmp_path):
    """Steps 1 and 2 of the bundled kernels, timed at two shapes with alpha and beta: every case passes."""
    out = run_kernel_files(
        tmp_path, ROOT / "kernels", ("01_naive.cu", "02_smem_tiling.cu"), "--gemm-shapes", "256,1000x520x300"
    )
    outcomes = outcomes_in(out)
    assert outcomes and set(outcomes.values()) == {"PASSED"}, out[-4000:]
    footer = r"(\d+) of them with inputs of their own for each timed launch; (\d+) timed output\(s\) checked"
    said = re.search(footer, out)
    assert said is not None and int(said.group(1)) == len(outcomes) and int(said.group(2)) > 0, out[-4000:]
