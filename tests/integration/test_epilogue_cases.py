"""Fused epilogues through the whole plugin on the CPU (tests/host_backend.py runs Python kernels on NumPy through the
worker's own verification): a right epilogue passes, and each slip reaches the test's failure text, named, with the
epilogue the header declares (docs/verification.md#fused-epilogues)."""

from __future__ import annotations

from support import TESTS

KERNELS = """
import math
import numpy as np
from pytest_gemm import gemm_kernel

erf = np.vectorize(math.erf)


def gelu(x):
    return 0.5 * x * (1 + erf(x / math.sqrt(2)))


def epilogue(A, B, C, alpha, beta, bias, residual, aux, D, slip=""):
    p = alpha * (A @ B) + (beta * C if beta else 0)
    b = bias[None, :]
    if slip == "axis":  # bias[i] added to row i; rows past its N values read NaN
        b = np.full((A.shape[0], 1), np.nan, np.float32)
        b[: min(len(bias), len(b)), 0] = bias[: len(b)]
    y = gelu(p) + b if slip == "before" else gelu(p + b)
    aux[...] = y if slip == "aux" else p + b
    D[...] = y if slip == "residual" else y + residual


@gemm_kernel(dtypes=["fp32"], epilogue=EPILOGUE_TABLE)
def right(A, B, C, alpha, beta, bias, residual, aux, D):
    epilogue(A, B, C, alpha, beta, bias, residual, aux, D)


@gemm_kernel(dtypes=["fp32"], epilogue=EPILOGUE_TABLE)
def bias_axis(A, B, C, alpha, beta, bias, residual, aux, D):
    epilogue(A, B, C, alpha, beta, bias, residual, aux, D, "axis")


@gemm_kernel(dtypes=["fp32"], epilogue=EPILOGUE_TABLE)
def act_first(A, B, C, alpha, beta, bias, residual, aux, D):
    epilogue(A, B, C, alpha, beta, bias, residual, aux, D, "before")


@gemm_kernel(dtypes=["fp32"], epilogue=EPILOGUE_TABLE)
def no_residual(A, B, C, alpha, beta, bias, residual, aux, D):
    epilogue(A, B, C, alpha, beta, bias, residual, aux, D, "residual")


@gemm_kernel(dtypes=["fp32"], epilogue=EPILOGUE_TABLE)
def aux_late(A, B, C, alpha, beta, bias, residual, aux, D):
    epilogue(A, B, C, alpha, beta, bias, residual, aux, D, "aux")


@gemm_kernel(
    dtypes=["fp32"],
    storage={"C": "NxM"},
    epilogue={"bias": "N", "activation": "relu", "residual": True, "args": ["bias", "residual", "D"]},
)
def transposed(A, B, C, alpha, beta, bias, residual, D):
    p = alpha * (A @ B) + (beta * C if beta else 0)  # logical views of C, D and the residual stored N x M
    D[...] = np.maximum(p + bias[None, :], 0) + residual


@gemm_kernel(dtypes=["fp32"], epilogue={"activation": "relu", "args": ["D"]})
def reads_c_anyway(A, B, C, alpha, beta, D):
    D[...] = np.maximum(alpha * (A @ B) + beta * C, 0)  # beta = 0 reads C's poison too


@gemm_kernel(dtypes=["fp32"], epilogue=EPILOGUE_TABLE)
def writes_c(A, B, C, alpha, beta, bias, residual, aux, D):
    epilogue(A, B, C, alpha, beta, bias, residual, aux, D)
    C[...] = 0
"""

#: the epilogue each kernel above declares, written out in its decorator (a literal: the file is read, not run)
EPILOGUE_TABLE = (
    '{"bias": "N", "activation": "gelu", "residual": True, "aux": True, "args": ["bias", "residual", "aux", "D"]}'
)
KERNELS = KERNELS.replace("EPILOGUE_TABLE", EPILOGUE_TABLE)

WORDS = {
    "bias_axis": "matches the bias applied along M (one value a row) (bias[i] added to row i); the header says N",
    "act_first": "matches the activation applied before the bias (gelu(alpha A B + beta C) + bias)",
    "no_residual": "matches the residual ignored (gelu(alpha A B + beta C + bias) alone)",
    "aux_late": "aux output wrong: ",
    "writes_c": "input modified: ",
}


def _run(pytester, *args):
    pytester.makepyfile(epilogue_kernels=KERNELS)
    pytester.makeconftest(
        f"import sys\nsys.path.insert(0, {str(TESTS)!r})\n\n\ndef pytest_gemm_worker_backend(config):\n"
        "    return 'host_backend:HostBackend'\n"
    )
    return pytester.runpytest("--gemm-kernels", "epilogue_kernels.py", "-m", "gpu", "-rA", *args)


def test_epilogues_are_judged_and_their_slips_named_through_the_plugin(pytester):
    result = _run(pytester, "--gemm-shapes", "70x50x33")
    outcomes = {
        line.split("::")[1].split(" ")[0]: line.split(" ")[0]
        for line in result.stdout.lines
        if line.startswith(("PASSED", "FAILED"))
    }
    text = result.stdout.str()
    for ab in ("", "-a0.7b1.3", "-a-1.5b0"):
        assert outcomes[f"right[fp32-70x50x33{ab}]"] == "PASSED", text[-3000:]
        assert outcomes[f"transposed[fp32-70x50x33{ab}]"] == "PASSED", text[-3000:]
        for kernel in WORDS:
            assert outcomes[f"{kernel}[fp32-70x50x33{ab}]"] == "FAILED", (kernel, text[-3000:])
    for kernel, words in WORDS.items():
        assert words in text, (kernel, words, text[-6000:])
    assert "epilogue: D = gelu(alpha A B + beta C + bias[N]) + residual; aux holds alpha A B + beta C + bias" in text
    assert "it holds the activation's output, not its argument" in text
    assert "C (inputs must be read-only)" in text
    assert outcomes["reads_c_anyway[fp32-70x50x33-a0.7b1.3]"] == "PASSED"
    for ab in ("", "-a-1.5b0"):
        assert outcomes[f"reads_c_anyway[fp32-70x50x33{ab}]"] == "FAILED"
    assert "reads C although beta = 0" in text, text[-6000:]
