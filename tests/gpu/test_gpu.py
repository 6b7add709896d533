"""On the GPU: broken kernels fail with messages that say what is wrong; correct ones pass with margin.

These tests need a CUDA device and skip without one ("no CUDA device: ...").
"""

from __future__ import annotations

import re
import shutil

import pytest

from pytest_gemm.isolation.workers import WorkerPool
from pytest_gemm.records.shapes import Shape
from pytest_gemm.specs.cases import AlphaBeta, Case, to_request
from pytest_gemm.specs.cufile import parse_cu_file
from pytest_gemm.worker.serve import DEFAULT_BACKEND

from support import BROKEN, FAULTS, KERNELS, ROOT, failure_reports, requires_gpu, run_pytest_in

pytestmark = [requires_gpu, pytest.mark.gpu]


@pytest.fixture(scope="module")
def broken_run(tmp_path_factory):
    """Run every broken kernel once (in-process pytester is per test, so run pytest in a subprocess here)."""
    work = tmp_path_factory.mktemp("broken")
    shutil.copy(BROKEN / "faults.cu", work / "faults.cu")
    shapes = "256,100x100x64,100x100x50"
    return run_pytest_in(
        work, "--gemm-kernels", "faults.cu", "-m", "gpu", "--gemm-shapes", shapes, "-rf", "--benchmark-skip"
    )


def _section(output: str, test: str) -> str:
    match = re.search(r"_{3,} " + re.escape(test) + r" _{3,}\n(.*?)(?=\n_{3,} |\n=+ )", output, re.DOTALL)
    assert match, f"{test} did not fail:\n{output[-3000:]}"
    return match.group(1)


EXPECTED = [
    ("wrong_operand[fp32-256x256x256]", ["wrong values: 655", "of the per-element bound"]),
    (
        "unwritten_tile[fp32-256x256x256]",
        [
            "unwritten output: 1024 element(s) of C still hold the NaN poison",
            "errors in 1 of 64 32x32 tiles of C: rows 224-255 x cols 224-255",
        ],
    ),
    ("unwritten_tile[fp32-256x256x256-a0.7b1.3]", ["unwritten output: 1024 element(s) of C still hold their prior"]),
    (
        "oob_write[fp32-100x100x64]",
        [
            "out-of-bounds write: 2800 element(s) changed in the guard after C; as if the matrix went on, at rows 100"
            " to 127, columns 0 to 99"
        ],
    ),
    ("modified_input[fp32-256x256x256]", ["input modified: 1 element(s) changed in A"]),
    ("fp16_operands[fp32-256x256x256]", ["precision too low: normwise error"]),
    ("tf32_product[fp32-256x256x256]", ["precision too low: normwise error"]),
    ("ignored_beta[fp32-256x256x256-a0.7b1.3]", ["wrong values: "]),
    ("ignored_alpha[fp32-256x256x256-a0.7b1.3]", ["wrong values: "]),
    ("ignored_alpha[fp32-256x256x256-a-1.5b0]", ["wrong values: "]),
    (
        "reads_c_when_beta_is_zero[fp32-256x256x256]",
        ["reads C although beta = 0 (BLAS: C is output-only when beta = 0): 65536 element(s)"],
    ),
    (
        "k_rounded_up[fp32-100x100x50]",
        [
            "reads past the end of A: 100 element(s) of C are NaN from the guard after A, which holds NaN "
            "(rows 99-99, columns 0-99, 4 32x32 tiles)",
            "reads past the end of B: 9900 element(s) of C are NaN from the guard after B",
        ],
    ),
    (
        "differs_per_launch[fp32-256x256x256]",
        ["non-deterministic output: 1 element(s) changed in C between launch 1 and launch 2 on the same inputs"],
    ),
]


@pytest.mark.parametrize(("test", "phrases"), EXPECTED, ids=[t for t, _ in EXPECTED])
def test_each_fault_is_reported_for_what_it_is(broken_run, test, phrases):
    section = _section(broken_run, test)
    for phrase in phrases:
        assert phrase in section, section
    assert "seed " in section and "replay: pytest" in section
    assert "cuBLAS fp32 (peer): max" in section


def test_faults_that_only_show_with_some_scalars_pass_the_others(broken_run):
    passed_ids = {
        "ignored_beta[fp32-256x256x256]",
        "ignored_alpha[fp32-256x256x256]",
        "reads_c_declared[fp32-256x256x256]",  # declared always_reads_c: finite C when beta = 0
        "differs_declared[fp32-256x256x256]",  # declared nondeterministic
        "k_rounded_up[fp32-256x256x256]",  # K a multiple of 32: the missing bounds check does no harm
    }
    failed = set(re.findall(r"^FAILED faults\.cu::(\S+)", broken_run, re.MULTILINE))
    assert not passed_ids & failed
    assert not any(name.startswith("correct_naive") for name in failed)
    assert re.search(r"\b\d+ passed\b", broken_run)


def test_precision_cheats_fail_at_4096_cubed(pytester):
    shutil.copy(BROKEN / "faults.cu", pytester.path / "faults.cu")
    result = pytester.runpytest(
        "--gemm-kernels",
        "faults.cu",
        "-k",
        "fp16_operands or tf32_product or correct_naive",
        "-m",
        "gpu",
        "--gemm-shapes",
        "4096",
        "--benchmark-skip",
    )
    result.assert_outcomes(failed=6, passed=3)
    assert failure_reports(result).count("precision too low") == 6


def _naive_case(k: int) -> Case:
    (spec,) = parse_cu_file(KERNELS / "01_naive.cu")
    return Case(spec, spec.variants()[0], "fp32", Shape(256, 256, k), AlphaBeta(1.0, 0.0))


@pytest.mark.parametrize("k", [4096, 16384])
def test_naive_kernel_and_cublas_pass_with_margin(k, record_property):
    pool = WorkerPool(DEFAULT_BACKEND, None, timeout=120)
    try:
        outcome = pool.run(to_request(_naive_case(k), str(KERNELS / "01_naive.cu"), k, None))
    finally:
        pool.close()
    result = outcome.verification
    assert outcome.failure is None and result is not None and result.passed
    record_property("naive_margin", result.kernel.margin)
    record_property("naive_max_ratio", result.kernel.max_ratio)
    record_property("naive_norm_ratio", result.kernel.norm_ratio)
    record_property("cublas_margin", result.peer.margin)
    record_property("cublas_max_ratio", result.peer.max_ratio)
    record_property("cublas_norm_ratio", result.peer.norm_ratio)
    print(f"K={k}: naive margin {result.kernel.margin:.1f}, cuBLAS margin {result.peer.margin:.1f}")
    assert result.kernel.margin > 4 and result.peer.margin > 4


PY_KERNELS = """
from pytest_gemm import gemm_kernel

@gemm_kernel(dtypes=["fp32", "fp64"])
def cupy_gemm(A, B, C, alpha, beta):
    C[...] = alpha * (A @ B) + (beta * C if beta else 0)

@gemm_kernel(dtypes=["fp32"])
def forgets_half(A, B, C, alpha, beta):
    C[: C.shape[0] // 2] = alpha * (A @ B)[: C.shape[0] // 2]
"""


def test_python_kernels_run_through_the_same_checks(pytester):
    (pytester.path / "py_kernels.py").write_text(PY_KERNELS)
    result = pytester.runpytest("--gemm-kernels", "py_kernels.py", "--gemm-shapes", "96x64x48", "--benchmark-skip")
    result.assert_outcomes(passed=6, failed=3)
    result.stdout.fnmatch_lines(["*forgets_half[[]fp32-96x64x48[]]*", "*unwritten output: 3072 element(s)*"])


def test_every_fault_fixture_fails_alone_and_correct_kernels_pass_between_them(pytester):
    """Crashes, a refused launch, hangs, exceptions and worker deaths, interleaved with a correct kernel."""
    kernels = pytester.mkdir("kernels")
    for path in FAULTS.iterdir():
        shutil.copy(path, kernels / path.name)
    shutil.copy(KERNELS / "01_naive.cu", kernels / "a_naive.cu")
    shutil.copy(KERNELS / "01_naive.cu", kernels / "m_naive.cu")
    shutil.copy(KERNELS / "01_naive.cu", kernels / "z_naive.cu")
    result = pytester.runpytest_subprocess(
        "--gemm-kernels", "kernels", "-m", "gpu", "--gemm-shapes", "256", "--gemm-timeout", "5", "--benchmark-skip"
    )
    result.assert_outcomes(passed=9, failed=3 + 1 + 1 + 3 + 3 + 3, skipped=0)  # sticky, registers, hang, py x 3
    result.stdout.fnmatch_lines_random(
        [
            "CUDA error while verifying wild_write[[]fp32-256x256x256[]] *: cudaErrorIllegalAddress: *",
            "CUDA error while verifying misaligned_load[[]fp32-256x256x256[]] *: cudaErrorMisalignedAddress*",
            "CUDA error while verifying trap[[]fp32-256x256x256[]] *: cudaErrorLaunchFailure: unspecified launch*",
            "cannot launch register_hog[[]fp32-256x256x256[]] *: it needs more than this GPU has*",
            "  * registers per thread x 1024 threads per block = * registers*, but a block on this NVIDIA * has 65536*",
            "spin_forever[[]fp32-256x256x256[]] * timed out after 5 s while verifying",
            "raises[[]fp32-256x256x256[]] *: the Python kernel raised ValueError: this kernel is not written yet",
            "the GPU worker died while setting up exits[[]fp32-256x256x256[]] *: exit code 1",
            "sleeps[[]fp32-256x256x256[]] * timed out after 5 s while setting up",
        ]
    )
    assert "Traceback" not in result.stdout.str()


def test_a_python_kernel_file_that_cannot_be_imported_fails_its_cases_by_name(pytester):
    (pytester.path / "needs_missing.py").write_text(
        "import gemm_kernel_missing_module\nfrom pytest_gemm import gemm_kernel\n\n\n"
        "@gemm_kernel(dtypes=['fp32'])\ndef k(A, B, C, alpha, beta):\n    pass\n"
    )
    result = pytester.runpytest("--gemm-kernels", "needs_missing.py", "--gemm-shapes", "64", "--benchmark-skip")
    result.assert_outcomes(failed=3)
    result.stdout.fnmatch_lines(
        ["*needs_missing.py: importing the kernel file failed: ModuleNotFoundError: No module named*"]
    )


def test_every_dtype_passes_with_correct_kernels(pytester):
    """fp64, fp16, bf16 with fp32 output and tf32 (judged with TF32 tolerance) all verify."""
    shutil.copy(ROOT / "tests" / "kernels_dtypes" / "naive_dtypes.cu", pytester.path / "naive_dtypes.cu")
    result = pytester.runpytest(
        "--gemm-kernels",
        "naive_dtypes.cu",
        "-m",
        "gpu",
        "--gemm-shapes",
        "64,100x70x33,256x128x2048",
        "--benchmark-skip",
    )
    result.assert_outcomes(passed=4 * 3 * 3)


def _capability() -> tuple[int, int]:
    """The device's compute capability, as a worker reports it (this process never opens the device)."""
    pool = WorkerPool(DEFAULT_BACKEND, None, timeout=60)
    try:
        assert pool.probe() is None and pool.facts is not None
        major, minor = pool.facts["compute_capability"].split(".")
    finally:
        pool.close()
    return int(major), int(minor)


def test_a_kernel_built_for_another_arch_skips_with_the_reason(pytester, naive_source):
    other = "sm_80" if _capability()[0] != 8 else "sm_90"
    (pytester.path / "pinned.cu").write_text(naive_source.replace("*/", f'arch = "{other}"\n*/', 1))
    result = pytester.runpytest("--gemm-kernels", "pinned.cu", "-m", "gpu", "--gemm-shapes", "64", "-rs")
    result.assert_outcomes(skipped=3)
    result.stdout.fnmatch_lines([f"*sgemm_naive is built for {other} (its header's arch), which this * cannot run*"])


def test_tensor_map_kernel_verifies_and_a_missing_pitch_rule_is_reported(pytester):
    """Step 11 (wgmma + TMA) verifies on edge tiles; without its requires rule, K = 13 is refused by name."""
    if _capability() != (9, 0):
        pytest.skip("step 11 is built for sm_90a and needs a compute capability 9.0 GPU")
    text = (KERNELS / "11_wgmma_tma.cu").read_text()
    (pytester.path / "wgmma.cu").write_text(re.sub(r"^requires = .*$", "", text, flags=re.M))
    result = pytester.runpytest(
        "--gemm-kernels",
        "wgmma.cu",
        "-m",
        "gpu",
        "-k",
        "STAGES4",
        "--gemm-shapes",
        "128x256x64,200x264x72,64x64x13",
        "--benchmark-skip",
    )
    result.assert_outcomes(passed=2 * 3, failed=3)
    result.stdout.fnmatch_lines(
        [
            "*wgmma.cu:*key 'tensor_maps': hgemm_wgmma_bf16[[]STAGES4-bf16-64x64x13[]]: cannot build "
            "A_map: the rows of A are 13 elements (26 bytes) apart; a TMA tensor map needs a multiple of 16 bytes*"
        ]
    )


def test_compute_sanitizer_finds_a_race_and_a_read_past_the_end_and_passes_clean_kernels(pytester):
    from pytest_gemm.isolation.sanitizer import find_sanitizer

    if find_sanitizer() is None:
        pytest.skip("compute-sanitizer not found")
    shutil.copy(ROOT / "tests" / "kernels_sanitize" / "sanitize.cu", pytester.path / "sanitize.cu")
    shutil.copy(KERNELS / "01_naive.cu", pytester.path / "01_naive.cu")
    tools = "memcheck,racecheck,initcheck,synccheck"
    result = pytester.runpytest(
        "--gemm-kernels", "sanitize.cu", "01_naive.cu", "--gemm-sanitize", tools, "-m", "gemm_sanitize", "-rA"
    )
    text = result.stdout.str()
    for tool in tools.split(","):
        assert re.search(rf"PASSED 01_naive\.cu::sanitize\[{tool}\]", text), text[-4000:]
        assert re.search(rf"PASSED sanitize\.cu::sanitize\[with_barrier-{tool}\]", text), text[-4000:]
    assert re.search(r"FAILED sanitize\.cu::sanitize\[missing_barrier-racecheck\]", text)
    assert re.search(r"FAILED sanitize\.cu::sanitize\[unchecked_k_tail-memcheck\]", text)
    assert "compute-sanitizer racecheck found" in text and "hazard" in text.lower()
    assert "compute-sanitizer memcheck found" in text and "Invalid __global__ read" in text
    assert "unchecked_k_tail[fp32-67x45x37]" in text  # the edge shape, not a multiple of the tile


def test_each_visible_device_names_the_uuid_nvml_gives_its_worker():
    """The pytest process knows which GPU recorded a case's baseline from the devices the first worker lists (CUDA's
    UUIDs); each GPU's records are named from NVML's UUID. The two must be one GPU's, or a timed case is never sent
    to the GPU that recorded it."""
    pool = WorkerPool(DEFAULT_BACKEND, None, timeout=60)
    try:
        assert pool.probe() is None and pool.facts is not None
        if not pool.facts.get("uuid"):
            pytest.skip(f"NVML gives this GPU no UUID ({pool.facts.get('nvml_reason', '')})")
        listed = pool.facts["visible_devices"]
        assert listed[0]["uuid"] == pool.facts["uuid"], listed
        assert len({device["uuid"] for device in listed}) == len(listed)
    finally:
        pool.close()
