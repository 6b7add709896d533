"""FP8 and INT8 cases through pytester, on the CPU: the INT8 rule skips at collection, a case cuBLAS cannot time
passes untimed with the reason, and timed cases go through the baselines and the gate unchanged."""

from __future__ import annotations

from support import FP8_ARGS, SCALED_HEADER, TESTS


def test_an_int8_case_past_the_rule_is_skipped_by_the_plugin(pytester):
    """The INT8 rule is a skip with its reason at collection, on a machine without a GPU as on one with."""
    pytester.makefile(
        ".cu", int8=SCALED_HEADER.format(args='["A", "B", "C", "M", "N", "K"]', dtypes='["int8"]', extra="")
    )
    result = pytester.runpytest("--gemm-kernels", "int8.cu", "--gemm-shapes", "64x64x133145", "-rs", "-m", "gpu")
    result.assert_outcomes(skipped=1)
    result.stdout.fnmatch_lines(["*K * 127^2 = 2147495705 reaches 2^31*K <= 133144*"])


UNTIMED_BACKEND = '''
import os
from pytest_gemm.records.outcome import ErrorStats, Outcome, Verification
from pytest_gemm.records.shapes import Shape

class UntimedBackend:
    """Verifies every case and times none, saying why (as the GPU worker does where cuBLAS has no GEMM of a case)."""

    def __init__(self, cubin_cache=None):
        pass

    def facts(self):
        return {"name": "NVIDIA H100 80GB HBM3", "compute_capability": "9.0", "sm_count": 132,
                "visible_devices": [{"name": "NVIDIA H100 80GB HBM3", "capability": "9.0"}]}

    def run(self, request, notify):
        notify("verify")
        ok = ErrorStats(0.2, 0.01, 0, 4, 0, 0, 1e-7, 1e-6, ((0, 0, 1.0, 1.0, 0.2),), (), 0, 1)
        shape = Shape(request.shape.M, request.shape.N, request.shape.K)
        verification = Verification("case", request.seed, shape, 1.0, 0.0, ok, None)
        return Outcome(verification=verification, worker=os.getpid(), untimed="cuBLASLt has no e5m2 x e5m2 FP8 GEMM")
'''


def test_a_case_cublas_cannot_time_passes_and_the_run_says_why(pytester):
    """An e5m2 x e5m2 case is verified without a peer and not timed; the end of the run says so, with the count."""
    pytester.makepyfile(untimed_backend=UNTIMED_BACKEND)
    pytester.makeconftest(
        "import sys\nsys.path.insert(0, '.')\n\ndef pytest_gemm_worker_backend(config):\n"
        "    return 'untimed_backend:UntimedBackend'\n"
    )
    scales = 'scales = { A = "row", B = "col" }'
    pytester.makefile(".cu", e5m2=SCALED_HEADER.format(args=FP8_ARGS, dtypes='["fp8_e5m2"]', extra=scales))
    result = pytester.runpytest("--gemm-kernels", "e5m2.cu", "--gemm-shapes", "256,512", "-m", "gpu")
    result.assert_outcomes(passed=2)
    result.stdout.fnmatch_lines(["pytest-gemm: 2 case(s) verified but not timed: cuBLASLt has no e5m2 x e5m2 FP8 GEMM"])


def test_fp8_and_int8_cases_go_through_baselines_and_the_gate_unchanged(pytester):
    """A timed FP8 case and an INT8 one are recorded as baselines, gated against them, and tabled under
    their dtype, as any other (served by the synthetic backend's timed variant, V = 9)."""
    tests = str(TESTS)
    pytester.makeconftest(
        f"import sys\nsys.path.insert(0, {tests!r})\n\ndef pytest_gemm_worker_backend(config):\n"
        "    return 'synthetic_backend:SyntheticBackend'\n"
    )
    scales = 'scales = { A = "1x128", B = "128x128" }\nparams = { V = [9] }'
    pytester.makefile(".cu", fp8=SCALED_HEADER.format(args=FP8_ARGS, dtypes='["fp8_e4m3"]', extra=scales))
    int8_args = '["A", "B", "C", "M", "N", "K"]'
    pytester.makefile(".cu", int8=SCALED_HEADER.format(args=int8_args, dtypes='["int8"]', extra="params = { V = [9] }"))
    run = ("--gemm-kernels", "fp8.cu", "int8.cu", "--gemm-shapes", "512", "-m", "gpu", "--benchmark-quiet")
    first = pytester.runpytest(*run, "--gemm-update-baselines")
    first.assert_outcomes(passed=2)
    first.stdout.fnmatch_lines(["*: 2 added, 0 changed, 0 removed"])
    second = pytester.runpytest(*run)
    second.assert_outcomes(passed=2)
    second.stdout.fnmatch_lines(["fp8_e4m3:", "int8:", "*: 0 regressed, 0 improved, 2 same, 0 new, 0 unstable"])
