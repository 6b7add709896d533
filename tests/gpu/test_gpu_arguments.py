"""On the GPU: arguments as public kernels take them. A kernel whose header is included from beside its file, whose
tile schedule a Python function computes on the host (the header's buffers), and which takes a debug buffer of zeros,
passes; a schedule function that gives the wrong number of values fails its cases naming the file, the function and
the sizes. (Tensor maps by pointer and 3-D split maps run through pranjalssh/fast.cu's kernels: docs/data.) Needs a
device."""

from __future__ import annotations

import pytest

from support import TESTS, failure_section, outcomes_in, requires_gpu, run_kernel_files

pytestmark = [requires_gpu, pytest.mark.gpu]

SHAPES = ("64x64x64", "100x37x20", "256x512x128")


def test_a_scheduled_kernel_with_its_buffers_passes_and_a_wrong_schedule_is_named(tmp_path):
    import shutil

    folder = TESTS / "kernels_arguments"
    for name in ("tile.cuh", "schedule.py"):
        shutil.copy(folder / name, tmp_path / name)
    output = run_kernel_files(tmp_path, folder, ("scheduled.cu",), "--gemm-shapes", ",".join(SHAPES))
    outcomes = outcomes_in(output)
    for shape in SHAPES:  # the kernel takes no alpha or beta: one case a shape
        assert outcomes.get(f"scheduled[fp32-{shape}]") == "PASSED", output[-4000:]
        assert outcomes.get(f"scheduled_short[fp32-{shape}]") == "FAILED", output[-4000:]
    text = failure_section(output, "scheduled_short[fp32-64x64x64]")
    assert "schedule.py" in text and "one_short() gave 15 values for 64x64x64; buffer tiles is 16 elements" in text


def test_a_param_taken_as_an_argument_reaches_the_kernel(tmp_path):
    """B's order, the swept storage flag B_NxK, named in args: the kernel that reads B by it passes in both orders;
    the one that ignores it passes K x N and fails N x K, named as B read in the other order. A kernel that takes
    alpha without beta passes at the pairs with beta = 0, and one that takes them as __half passes at each pair."""
    output = run_kernel_files(tmp_path, TESTS / "kernels_arguments", ("flagged.cu",), "--gemm-shapes", "64x48x40")
    outcomes = outcomes_in(output)
    for order in ("BKxN", "BNxK"):
        assert outcomes.get(f"flagged[{order}-fp32-64x48x40]") == "PASSED", output[-4000:]
    assert outcomes.get("flagged_ignored[BKxN-fp32-64x48x40]") == "PASSED", output[-4000:]
    assert outcomes.get("flagged_ignored[BNxK-fp32-64x48x40]") == "FAILED", output[-4000:]
    text = failure_section(output, "flagged_ignored[BNxK-fp32-64x48x40]")
    assert "B read as K x N; the header says N x K" in text, text
    # an alpha without a beta: C = alpha A B, at the pairs with beta = 0 only
    assert outcomes.get("alpha_only[fp32-64x48x40]") == "PASSED", output[-4000:]
    assert outcomes.get("alpha_only[fp32-64x48x40-a-1.5b0]") == "PASSED", output[-4000:]
    assert "alpha_only[fp32-64x48x40-a0.7b1.3]" not in outcomes
    # alpha and beta as __half
    for ab in ("", "-a0.7b1.3", "-a-1.5b0"):
        assert outcomes.get(f"half_scalars[fp16-64x48x40{ab}]") == "PASSED", output[-4000:]
