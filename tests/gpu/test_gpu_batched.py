"""On the GPU: strided-batched kernels pass in every storage order, size type and stride type, packed or
gapped, at a batch and at a batch of 1; a kernel that declares no batch skips batched shapes; a batch that reads
another batch's A or B, writes another batch's C, or writes into the gap between two batches is failed and named.
Needs a device."""

from __future__ import annotations

import pytest

from support import ROOT, failure_section, outcomes_in, requires_gpu, run_kernel_files

pytestmark = [requires_gpu, pytest.mark.gpu]

BATCHED = ROOT / "tests" / "kernels_batched"
BATCHED_SHAPES = ("96x96x96b4", "67x45x37b3")
ONE = "128x128x64"  # a batch of 1
SHAPES = ",".join((*BATCHED_SHAPES, ONE))
AB = ("", "-a0.7b1.3", "-a-1.5b0")  # the three alpha/beta cases' ids
BC_ORDERS = ("BKxN-CMxN-", "BKxN-CNxM-", "BNxK-CMxN-", "BNxK-CNxM-")
WRONG = ("a_stride_ignored", "b_next_batch", "c_reversed", "c_gap_write")


@pytest.fixture(scope="module")
def batched_run(tmp_path_factory):
    """The kernels of tests/kernels_batched, once, on two batches (one of square matrices, one odd) and a batch
    of 1."""
    work = tmp_path_factory.mktemp("batched")
    return run_kernel_files(work, BATCHED, ("batched.cu", "batched_py.py"), "--gemm-shapes", SHAPES, "--benchmark-skip")


def _names(
    kernel: str,
    shapes: tuple[str, ...] = (*BATCHED_SHAPES, ONE),
    variants: tuple[str, ...] = ("",),
    dtypes: tuple[str, ...] = ("fp32",),
    abs_: tuple[str, ...] = AB,
) -> set[str]:
    """The test names of ``kernel``'s cases: each variant (its id and a dash), dtype, shape and alpha/beta case."""
    return {f"{kernel}[{v}{d}-{s}{ab}]" for v in variants for d in dtypes for s in shapes for ab in abs_}


CORRECT = {
    "sgemm_batched": _names("sgemm_batched", variants=BC_ORDERS),
    "sgemm_batched_fp16": _names("sgemm_batched_fp16", variants=BC_ORDERS, dtypes=("fp16",)),
    "batched_size_t": _names("batched_size_t"),
    "batched_long_strides": _names("batched_long_strides"),
    "batched_packed": _names("batched_packed"),
    "batched_py": _names("batched_py", variants=("BKxN-", "BNxK-"), dtypes=("fp32", "fp16")),
}


@pytest.mark.parametrize("kernel", list(CORRECT))
def test_correct_batched_kernels_pass(batched_run, kernel):
    """Every case of a right batched kernel passes, batched or not, in every order of B and C, with int,
    size_t or long long strides, packed (no strides taken), and as a Python kernel given 3-D views; the peer
    (cuBLAS's strided-batched GEMM) with it: no case is set aside as a calibration error."""
    outcomes = outcomes_in(batched_run)
    expected = CORRECT[kernel]
    assert {name for name in expected if outcomes.get(name) != "PASSED"} == set(), batched_run[-6000:]
    assert "calibration error" not in batched_run


def test_a_kernel_without_a_batch_skips_batched_shapes(batched_run):
    """A kernel that declares no batch runs the batch of 1 and is skipped on a batch, saying why."""
    outcomes = outcomes_in(batched_run)
    assert {name: outcomes.get(name) for name in _names("unbatched", shapes=(ONE,))} == dict.fromkeys(
        _names("unbatched", shapes=(ONE,)), "PASSED"
    ), batched_run[-6000:]
    assert not _names("unbatched", shapes=BATCHED_SHAPES) & set(outcomes)
    skips = [line for line in batched_run.splitlines() if line.startswith("SKIPPED")]
    assert any("96x96x96b4" in line and "batch" in line for line in skips), skips


@pytest.mark.parametrize("kernel", WRONG)
def test_wrong_batches_fail_on_every_batched_case(batched_run, kernel):
    """A kernel that mixes up its batches fails every batched case, whatever alpha and beta."""
    outcomes = outcomes_in(batched_run)
    abs_ = AB[:1] if kernel == "c_reversed" else AB  # takes no alpha and beta
    expected = _names(kernel, shapes=BATCHED_SHAPES, abs_=abs_)
    assert {name: outcomes.get(name) for name in expected} == dict.fromkeys(expected, "FAILED"), batched_run[-6000:]


@pytest.mark.parametrize(
    ("test", "said"),
    [
        ("a_stride_ignored[fp32-96x96x96b4]", "batch 1 read batch 0's A"),
        ("a_stride_ignored[fp32-67x45x37b3]", "batch 1 read batch 0's A"),
        ("b_next_batch[fp32-96x96x96b4]", "batch 0 read batch 1's B"),
        ("b_next_batch[fp32-67x45x37b3]", "batch 0 read batch 1's B"),
        ("c_reversed[fp32-96x96x96b4]", "batch 0's C holds batch 3's result"),
        ("c_reversed[fp32-67x45x37b3]", "batch 0's C holds batch 2's result"),
        ("c_gap_write[fp32-96x96x96b4]", "the gap after batch 0 of C"),
        ("c_gap_write[fp32-67x45x37b3]", "the gap after batch 0 of C"),
    ],
)
def test_batch_mixups_are_named(batched_run, test, said):
    """A read of another batch's A or B, a result in another batch's C and a write between two batches'
    C are each named in the failure."""
    assert f"_ {test} _" in batched_run, batched_run[-6000:]
    section = failure_section(batched_run, test)
    assert said in section, section[:6000]


def test_batch_mixups_are_invisible_at_a_batch_of_one_but_the_gap_write_is_not(batched_run):
    """With one batch there is no other batch to mix up, so those kernels pass at a batch of 1; the
    write one row past C still lands in the guard after C and fails."""
    outcomes = outcomes_in(batched_run)
    right = _names("a_stride_ignored", shapes=(ONE,)) | _names("b_next_batch", shapes=(ONE,))
    right |= _names("c_reversed", shapes=(ONE,), abs_=AB[:1])
    assert {name: outcomes.get(name) for name in right} == dict.fromkeys(right, "PASSED"), batched_run[-6000:]
    gap = _names("c_gap_write", shapes=(ONE,))
    assert {name: outcomes.get(name) for name in gap} == dict.fromkeys(gap, "FAILED"), batched_run[-6000:]
