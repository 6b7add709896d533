"""On the GPU: Triton and torch kernels given torch tensors on the harness's stream pass and are timed on the
device (CUPTI's records of every kernel they launch), and broken Triton kernels get their exact diagnoses: a mask
one past A, a launch on a stream of its own, tl.dot in TF32 on fp32 inputs, beta ignored. Needs a device, torch and
Triton."""

from __future__ import annotations

import re

import pytest

from support import ROOT, failure_section, outcomes_in, requires_gpu, run_kernel_files

pytestmark = [requires_gpu, pytest.mark.gpu]

KERNELS = ROOT / "tests" / "kernels_torch"
SHAPES = "256,100x120x72"


@pytest.fixture(scope="module")
def torch_run(tmp_path_factory):
    """Both files once, verified and timed, on a square shape and an odd one; torch.compile and load_inline build in
    the setup call, under the compile limit (--gemm-timeout stays at its default)."""
    pytest.importorskip("torch", reason="the torch kernels need torch")
    pytest.importorskip("triton", reason="the Triton kernels need Triton")
    work = tmp_path_factory.mktemp("torch")
    files = ("triton_matmul.py", "torch_kernels.py")
    return run_kernel_files(work, KERNELS, files, "--gemm-shapes", SHAPES, "-vv")  # -vv: every case's row


AB = ("", "-a0.7b1.3", "-a-1.5b0")


def _names(kernel: str, dtypes: tuple[str, ...], variants: tuple[str, ...] = ("",)) -> set[str]:
    shapes = ("256x256x256", "100x120x72")
    return {f"{kernel}[{v}{d}-{s}{ab}]" for v in variants for d in dtypes for s in shapes for ab in AB}


CORRECT = {
    "triton_matmul": _names("triton_matmul", ("fp16", "bf16"), ("BKxN-", "BNxK-")),
    "triton_matmul_pinned": _names("triton_matmul_pinned", ("fp16",)),
    "compiled_matmul": _names("compiled_matmul", ("fp32", "fp16")),
    "inline_sgemm": _names("inline_sgemm", ("fp32",)),
}


@pytest.mark.parametrize("kernel", list(CORRECT))
def test_triton_and_torch_kernels_pass_and_are_timed_on_the_device(torch_run, kernel):
    """Every case passes, verified and timed by CUPTI's records (not the events: no launch latency
    taken for a kernel's time)."""
    outcomes = outcomes_in(torch_run)
    assert {name for name in CORRECT[kernel] if outcomes.get(name) != "PASSED"} == set(), torch_run[-6000:]
    assert re.search(r"pytest-gemm timing \(device time, CUPTI kernel records\) ", torch_run), torch_run[-4000:]
    assert re.search(rf"^{kernel}\S* +256x256x256 ", torch_run, re.M), torch_run[-4000:]
    assert "timed with CUDA events" not in torch_run  # the stream of its own is not timed at all


@pytest.mark.parametrize(
    ("test", "said"),
    [
        (
            "triton_past_a[fp16-100x120x72]",
            "reads past the end of A: 120 element(s) of C are NaN from the guard after A",
        ),
        ("triton_own_stream[fp16-256x256x256]", "launched GPU work on CUDA stream(s) "),
        ("triton_tf32[fp32-256x256x256]", "precision too low: normwise error"),
        ("triton_no_beta[fp16-256x256x256-a0.7b1.3]", "matches beta ignored (C = alpha A B; beta is 1.3)"),
    ],
)
def test_broken_triton_kernels_get_their_exact_diagnosis(torch_run, test, said):
    """Each bug named as such."""
    assert outcomes_in(torch_run).get(test) == "FAILED", torch_run[-4000:]
    assert said in failure_section(torch_run, test), failure_section(torch_run, test)[:3000]


def test_a_kernel_right_where_its_bug_does_not_matter_passes(torch_run):
    """Beta ignored is right when beta = 0; the stream of its own is waited for in verification (its timing fails)."""
    outcomes = outcomes_in(torch_run)
    assert outcomes.get("triton_no_beta[fp16-256x256x256]") == "PASSED", torch_run[-4000:]
    own = failure_section(torch_run, "triton_own_stream[fp16-256x256x256]")
    assert "not on the harness's stream" in own and "the harness sets torch's only then" in own, own[:3000]


def test_the_setup_step_reports_the_autotuners_choice_and_the_host_time(torch_run):
    """The autotuned Triton matmul's choice for each shape is reported under the timing table, and
    the host's time to make each launch call sits beside the device time (its own column, never the median)."""
    assert re.search(r"^autotuned: triton_matmul chose _matmul: BM: \d+, BN: 128, BK: 32, num_warps: 4", torch_run,
                     re.M), torch_run[-4000:]  # fmt: skip
    header = next(line for line in torch_run.splitlines() if line.startswith("kernel") and " host " in line)
    assert header.split()[:4] == ["kernel", "shape", "median", "host"]


@pytest.fixture(scope="module")
def faults_run(tmp_path_factory):
    """The faulty kernels verified only (--benchmark-skip: no timing to find a stream of its own there)."""
    pytest.importorskip("torch", reason="the torch kernels need torch")
    pytest.importorskip("triton", reason="the Triton kernels need Triton")
    work = tmp_path_factory.mktemp("torch-faults")
    return run_kernel_files(work, KERNELS, ("faults.py",), "--gemm-shapes", "256", "--benchmark-skip")


def test_torch_and_triton_faults_cost_one_case_each(faults_run):
    """Triton's illegal address is a CUDA error in the setup step (the worker replaced), torch's out of
    memory a CUDA error too (the worker kept), a stream of its own is found in verification without any timing, and
    the correct matmul after them passes."""
    outcomes = outcomes_in(faults_run)
    names = ("triton_illegal_address", "torch_out_of_memory", "torch_own_stream", "torch_matmul_after")
    assert [outcomes.get(f"{name}[fp32-256x256x256]") for name in names] == ["FAILED"] * 3 + ["PASSED"], faults_run
    crash = failure_section(faults_run, "triton_illegal_address[fp32-256x256x256]")
    assert "CUDA error" in crash and "setting up" in crash and "illegal" in crash.lower(), crash[:3000]
    oom = failure_section(faults_run, "torch_out_of_memory[fp32-256x256x256]")
    assert "out of GPU memory: OutOfMemoryError: CUDA out of memory" in oom, oom[:3000]
    own = failure_section(faults_run, "torch_own_stream[fp32-256x256x256]")
    assert "launched GPU work on CUDA stream(s) " in own and "not on the harness's stream" in own, own[:3000]
