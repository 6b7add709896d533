"""On the GPU: fused epilogues. Right kernels pass with each activation, each bias axis, C in place or D apart, with and
without aux and a residual, as .cu kernels and as torch's own (the peer's two ways); each way an epilogue goes wrong
fails its cases and is named: the bias along the other axis, the activation before the bias, the residual ignored,
aux written after the activation. Needs a device."""

from __future__ import annotations

import pytest

from pytest_gemm.records.shapes import SHAPE_SETS

from support import TESTS, failure_section, outcomes_in, requires_gpu, run_kernel_files

pytestmark = [requires_gpu, pytest.mark.gpu]

EPILOGUE = TESTS / "kernels_epilogue"
#: the quick shapes, and edge shapes of each kind: odd sizes, K = 1, vectors, M past N and N past M
EDGE = ("15x16x17", "17x15x16", "33x31x32", "127x128x129", "255x256x257", "64x64x1", "1x512x256", "512x1x256")
SHAPES = [*SHAPE_SETS["quick"], *(s for s in SHAPE_SETS["edge"] if s.id in EDGE), *SHAPE_SETS["edge"][-10:-8]]
AB = ("", "-a0.7b1.3", "-a-1.5b0")


@pytest.fixture(scope="module")
def epilogue_run(tmp_path_factory):
    """The kernels of tests/kernels_epilogue, once, verified on :data:`SHAPES`."""
    work = tmp_path_factory.mktemp("epilogue")
    shapes = ",".join(s.id for s in SHAPES)
    return run_kernel_files(
        work, EPILOGUE, ("epilogue.cu", "epilogue_py.py"), "--gemm-shapes", shapes, "--benchmark-skip"
    )


def _names(kernel: str, dtypes: tuple[str, ...], abs_: tuple[str, ...] = AB) -> set:
    return {f"{kernel}[{d}-{s.id}{ab}]" for d in dtypes for s in SHAPES for ab in abs_}


CORRECT = {
    "epi_gelu_aux": _names("epi_gelu_aux", ("fp32",)),
    "epi_silu_bias_m_fp16": _names("epi_silu_bias_m_fp16", ("fp16",)),
    "epi_gelu_tanh_bf16": _names("epi_gelu_tanh_bf16", ("bf16",)),
    "epi_relu_in_place_bf16": _names("epi_relu_in_place_bf16", ("bf16",)),
    "epi_d_only": _names("epi_d_only", ("fp32",)),
    "torch_gelu_residual": _names("torch_gelu_residual", ("bf16", "fp16", "fp32")),
    "torch_lt_gelu_tanh": _names("torch_lt_gelu_tanh", ("bf16", "fp16", "fp32"), ("",)),
    "torch_silu_bias_m": _names("torch_silu_bias_m", ("bf16", "fp16", "fp32"), ("",)),
}


@pytest.mark.parametrize("kernel", list(CORRECT))
def test_correct_epilogue_kernels_pass(epilogue_run, kernel):
    """Every case of a right epilogue kernel passes by D's derived bound, with no calibration error."""
    outcomes = outcomes_in(epilogue_run)
    assert {name for name in CORRECT[kernel] if outcomes.get(name) != "PASSED"} == set(), epilogue_run[-6000:]
    assert "calibration error" not in epilogue_run


#: each wrong kernel, the words its failures must hold, and the shapes where its slip shows
FAULTS = {
    "epi_bias_other_axis": ("matches the bias applied along M", "fp32"),
    "epi_act_before_bias": ("matches the activation applied before the bias", "fp32"),
    "epi_residual_ignored": ("matches the residual ignored", "fp16"),
    "epi_aux_after_act": ("aux output wrong", "fp32"),
}


@pytest.mark.parametrize("kernel", list(FAULTS))
def test_each_epilogue_slip_fails_and_is_named(epilogue_run, kernel):
    """A wrong epilogue fails every case where its slip changes D (or aux), and each failure names the slip."""
    words, dtype = FAULTS[kernel]
    outcomes = outcomes_in(epilogue_run)
    names = _names(kernel, (dtype,))
    failed = {name for name in names if outcomes.get(name) == "FAILED"}
    assert len(failed) >= 0.9 * len(names), (kernel, len(failed), len(names), epilogue_run[-4000:])
    for name in sorted(failed)[:6]:
        assert words in failure_section(epilogue_run, name), failure_section(epilogue_run, name)


def test_the_epilogue_is_timed_against_torch(tmp_path):
    """A timed epilogue case is timed beside torch's epilogue, and its row says so."""
    output = run_kernel_files(
        tmp_path, EPILOGUE, ("epilogue.cu",), "--gemm-shapes", "1024x1024x1024", "-k", "epi_gelu_tanh_bf16"
    )
    names = {f"epi_gelu_tanh_bf16[bf16-1024x1024x1024{ab}]" for ab in AB}
    assert outcomes_in(output) == dict.fromkeys(names, "PASSED"), output[-4000:]
    assert "vs torch epilogue" in output, output[-4000:]


def test_epilogue_kernels_run_clean_under_compute_sanitizer_and_a_read_past_the_bias_is_found(tmp_path):
    """Under memcheck and initcheck the right epilogue kernels run clean (their bias, residual, aux and C in buffers of
    their own, written where read); the kernel that reads the bias along M reads past its N values, which memcheck
    finds (no guards there: the allocation ends with the vector)."""
    import re

    from pytest_gemm.isolation.sanitizer import find_sanitizer

    if find_sanitizer() is None:
        pytest.skip("compute-sanitizer not found")
    output = run_kernel_files(
        tmp_path, EPILOGUE, ("epilogue.cu",), "--gemm-sanitize", "memcheck,initcheck", "-m", "gemm_sanitize",
        "-k", "epi_gelu_aux or epi_relu_in_place_bf16 or epi_bias_other_axis",
    )  # fmt: skip
    for kernel in ("epi_gelu_aux", "epi_relu_in_place_bf16"):
        for tool in ("memcheck", "initcheck"):
            assert re.search(rf"PASSED \S+::sanitize\[{kernel}-{tool}\]", output), output[-4000:]
    assert re.search(r"FAILED \S+::sanitize\[epi_bias_other_axis-memcheck\]", output), output[-4000:]
    assert "Invalid __global__ read" in output, output[-4000:]
