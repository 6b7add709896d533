"""pytest-gemm plot: a saved run recorded on an H100 (tests/data/h100_run.json) drawn, gated against baselines
recorded with the same clock, and the --size option."""

from __future__ import annotations

import pytest

pytest.importorskip("matplotlib", reason="the pictures need matplotlib (pip install matplotlib)")

from pytest_gemm.cli import main

from support import ROOT
from support.reports import RUN, assert_sensible_png


def test_plot_draws_a_saved_run_and_gates_it_against_the_baselines(tmp_path, capsys):
    baselines = tmp_path / "baselines"  # recorded from the run itself: the same clock (CUDA events)
    assert main(["update", "--from", str(RUN), "--baselines", str(baselines)]) == 0
    out = tmp_path / "report"
    assert main(["plot", str(RUN), "--out", str(out), "--baselines", str(baselines)]) == 0
    printed = capsys.readouterr().out
    assert f"{out / 'index.html'}: 5 chart(s), 0 error map(s)" in printed
    for name in ("tflops-fp32.png", "tflops-fp16.png", "tflops-bf16.png", "pct-cublas.png", "gate.png"):
        assert_sensible_png(out / name)
    page = (out / "index.html").read_text()
    assert "gate verdicts computed by pytest-gemm plot against" in page
    assert "135 timed case(s), 0 failed case(s) with a diagnosis; gate: 0 regressed, 0 improved, 135 same" in page


def test_a_run_timed_with_the_events_is_not_gated_against_baselines_recorded_with_cupti(tmp_path, capsys):
    """The committed H100 baselines were recorded with CUPTI; this saved run was timed with CUDA events."""
    out = tmp_path / "report"
    assert main(["plot", str(RUN), "--out", str(out), "--baselines", str(ROOT / "baselines")]) == 0
    assert f"{out / 'index.html'}: 4 chart(s), 0 error map(s)" in capsys.readouterr().out  # no gate chart
    assert "gate: 0 regressed, 0 improved, 0 same, 135 new" in (out / "index.html").read_text()


def test_plot_without_baselines_draws_no_gate_chart(tmp_path):
    assert main(["plot", str(RUN), "--out", str(tmp_path), "--baselines", str(tmp_path / "none")]) == 0
    assert not (tmp_path / "gate.png").exists() and (tmp_path / "pct-cublas.png").exists()


def test_plot_size_option(tmp_path, capsys):
    assert main(["plot", str(RUN), "--out", str(tmp_path), "--size", "256"]) == 0
    assert main(["plot", str(RUN), "--out", str(tmp_path), "--size", "4096"]) == 2
    assert "the run has no timed case of shape 4096x4096x4096 (it has 1024x1024x1024, 256x256x256, 384x640x512)" in (
        capsys.readouterr().err
    )
    assert main(["plot", str(tmp_path / "missing.json"), "--out", str(tmp_path)]) == 2
