"""Calibration errors through the plugin: where the peer (cuBLAS) fails the accuracy bound, the case is skipped,
said, counted at the end and saved, unless the kernel's own findings fail it. The GPU workers serve the H100
recording (tests/replay_backend.py) with cuBLAS's error raised; no GPU needed. The rule itself is tested in
tests/unit/judge/test_accuracy_rule.py."""

from __future__ import annotations

import re

from pytest_gemm.records.verdicts import Verdict
from pytest_gemm.runs.saved import read_run

CALIBRATION_BACKEND = '''
import dataclasses

from replay_backend import ReplayBackend
from pytest_gemm.records.outcome import Fault


class CalibrationBackend(ReplayBackend):
    """The recording, with cuBLAS over the per-element bound where alpha is not 1 or K is 512."""

    def run(self, request, notify):
        outcome = super().run(request, notify)
        v = outcome.verification
        if v is None or (request.alpha == 1.0 and request.shape.K != 512):
            return outcome
        v = dataclasses.replace(v, peer=dataclasses.replace(v.peer, bad=7, max_ratio=3.2))
        if request.alpha == 0.7:  # the kernel over the bound as well: still not failed for it
            v = dataclasses.replace(v, kernel=dataclasses.replace(v.kernel, bad=3, max_ratio=1.5))
        if request.alpha == -1.5:  # a fault of its own: fails it
            v = dataclasses.replace(v, faults=(Fault("non-deterministic output", "C between launch 1 and 3", 12),))
        return dataclasses.replace(outcome, verification=v)
'''


def test_the_plugin_skips_a_calibration_error_says_why_counts_them_and_saves_them(replay):
    """Through the plugin: not silent (skip reasons, a count at the end, the saved run), and no correct
    kernel fails for it; a kernel's own fault still fails its case."""
    replay.makepyfile(calibration_backend=CALIBRATION_BACKEND)
    replay.makeconftest(
        (replay.path / "conftest.py")
        .read_text()
        .replace("replay_backend:ReplayBackend", "calibration_backend:CalibrationBackend")
        + f"\nsys.path.insert(0, {str(replay.path)!r})\n"
    )
    naive = "kernels/01_naive.cu::sgemm_naive"
    cases = [f"{naive}[fp32-{s}]" for s in ("512x512x512", "512x512x512-a0.7b1.3", "512x512x512-a-1.5b0")]
    cases.append(f"{naive}[fp32-4096x4096x4096]")
    result = replay.runpytest("--gemm-kernels", *cases, "-rA", "--gemm-report", "report")
    result.assert_outcomes(passed=1, skipped=2, failed=1)
    out = result.stdout.str()
    skips = re.findall(r"^SKIPPED \[1\] kernels/01_naive.cu:\d+: (.*)$", out, re.M)
    assert len(skips) == 2, out[-3000:]
    for line in skips:
        assert re.search(r"pytest-gemm calibration error: cuBLAS \(the peer\) fails the per-element bound by 3.2x "
                         r"\(7 of 262144 elements\) on this case", line)  # fmt: skip
    assert "the kernel: 1.5x per element" in "".join(skips)
    assert "pytest-gemm: 3 calibration error(s): cuBLAS (the peer) failed the accuracy bound on 3 case(s)" in out
    assert "non-deterministic output: 12 element(s) changed in C between launch 1 and 3" in out
    saved = read_run(replay.path / "report" / "run.json").tests
    kinds = {test.split("[")[1]: (r.outcome, r.diagnosis.kind if r.diagnosis else None) for test, r in saved.items()}
    assert kinds == {
        "fp32-512x512x512]": ("skipped", Verdict.CALIBRATION),
        "fp32-512x512x512-a0.7b1.3]": ("skipped", Verdict.CALIBRATION),
        "fp32-512x512x512-a-1.5b0]": ("failed", Verdict.CALIBRATION),
        "fp32-4096x4096x4096]": ("passed", None),
    }
    assert "pytest-gemm calibration error" in (replay.path / "report" / "index.html").read_text()


TIMED_CALIBRATION_BACKEND = '''
import dataclasses

from replay_backend import ReplayBackend


class TimedCalibrationBackend(ReplayBackend):
    """The recording, with cuBLAS's output of its timed launches over the bound on the 4096 cases."""

    def run(self, request, notify):
        outcome = super().run(request, notify)
        t = outcome.timing
        if t is None or request.shape.K != 4096 or outcome.verification is None:
            return outcome
        wrong = dataclasses.replace(outcome.verification.peer, bad=5, max_ratio=2.5)
        return dataclasses.replace(outcome, timing=dataclasses.replace(t, reference_output=wrong))
'''


def test_a_calibration_error_on_the_timed_launches_skips_the_case_untimed(replay):
    """cuBLAS over the bound on its timed launches: the case is skipped, and a skip is not timed, so no timing
    table, saved run or pytest-benchmark entry counts it (the one that passes is timed)."""
    replay.makepyfile(timed_calibration_backend=TIMED_CALIBRATION_BACKEND)
    replay.makeconftest(
        (replay.path / "conftest.py")
        .read_text()
        .replace("replay_backend:ReplayBackend", "timed_calibration_backend:TimedCalibrationBackend")
        + f"\nsys.path.insert(0, {str(replay.path)!r})\n"
    )
    naive = "kernels/01_naive.cu::sgemm_naive"
    cases = [f"{naive}[fp32-4096x4096x4096]", f"{naive}[fp32-512x512x512]"]
    result = replay.runpytest("--gemm-kernels", *cases, "-rA", "--gemm-report", "report")
    result.assert_outcomes(passed=1, skipped=1)
    assert "pytest-gemm calibration error" in result.stdout.str()
    saved = read_run(replay.path / "report" / "run.json").tests
    timed = {test.split("[")[1]: r.timing is not None for test, r in saved.items()}
    assert timed == {"fp32-4096x4096x4096]": False, "fp32-512x512x512]": True}
    assert saved[f"{naive}[fp32-4096x4096x4096]"].margin is None
