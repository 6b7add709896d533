"""The report folder in real sessions on the H100 recording (tests/replay_backend.py): --gemm-report, pytest-gemm
plot of its saved run, and pytest-html's rows. No GPU needed. The page itself is tested in
tests/unit/report/test_html_page.py."""

from __future__ import annotations

import dataclasses
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("matplotlib", reason="the report needs matplotlib (pip install matplotlib)")

from pytest_gemm.records.outcome import Outcome
from pytest_gemm.records.plain import from_plain, to_plain

from support import BROKEN, RECORDED
from support.reports import assert_self_contained, assert_sensible_png, error_map

FAULTS = BROKEN / "faults.cu"
UNWRITTEN = "faults.cu::unwritten_tile[fp32-256x256x256]"


# -- real sessions ---------------------------------------------------------------------------------
def _recording_with_an_error_map(path: Path) -> Path:
    """The H100 recording, its unwritten-tile outcome given the error map a worker would send."""
    data = json.loads(RECORDED.read_text())
    outcome = from_plain(Outcome, data["outcomes"][UNWRITTEN])
    marks = {(i, j): (0.0, "unwritten") for i in range(112, 128) for j in range(112, 128)}
    emap = error_map(256, 256, cells=128, tile=(32, 32), marks=marks, base=0.01)
    verification = dataclasses.replace(outcome.verification, error_map=emap)
    data["outcomes"][UNWRITTEN] = to_plain(dataclasses.replace(outcome, verification=verification))
    path.write_text(json.dumps(data))
    return path


@pytest.fixture
def project(replay, monkeypatch):
    (replay.path / "kernels" / "faults.cu").write_text(FAULTS.read_text())
    monkeypatch.setenv("PYTEST_GEMM_REPLAY", str(_recording_with_an_error_map(replay.path / "recording.json")))
    replay.makeconftest(
        (replay.path / "conftest.py").read_text()
        + "\n\ndef pytest_unconfigure(config):\n"
        + "    open('imported.txt', 'w').write(str('matplotlib' in sys.modules))\n"
    )
    return replay


ARGS = (
    "--gemm-kernels", "kernels/01_naive.cu", f"kernels/faults.cu::{UNWRITTEN.split('::')[1]}",
    "--gemm-shapes", "512,4096,256", "-m", "gpu", "-p", "no:randomly",
)  # fmt: skip


def _run(project, *args: str):
    return project.runpytest(*ARGS, *args)


def test_gemm_report_in_a_session_and_plot_from_its_saved_run(project, tmp_path):
    assert _run(project, "--gemm-update-baselines").ret == pytest.ExitCode.TESTS_FAILED  # the unwritten tile
    os.environ["REPLAY_SCALE"] = "1.1"
    try:
        result = _run(project, "--gemm-report", "report", "--benchmark-json", "run.json")
    finally:
        del os.environ["REPLAY_SCALE"]
    result.assert_outcomes(failed=7, skipped=3)  # six regressed, one wrong output; 256 is not in the recording
    folder = project.path / "report"
    result.stdout.fnmatch_lines([f"pytest-gemm report: {folder / 'index.html'} (4 picture(s))"])
    assert_self_contained(folder)
    names = sorted(str(p.relative_to(folder)) for p in folder.rglob("*.png"))
    assert names[1:] == ["gate.png", "pct-cublas.png", "tflops-fp32.png"] and names[0].startswith("errors/unwritten")
    page = (folder / "index.html").read_text()
    assert "6 timed case(s), 1 failed case(s) with a diagnosis; gate: 6 regressed" in page
    assert "kernels/faults.cu::unwritten_tile[fp32-256x256x256]" in page
    assert "unwritten output: 1024 element(s) of C" in page  # the failure text's diagnosis
    assert "--gemm-report report --benchmark-json run.json" in page
    assert (project.path / "imported.txt").read_text() == "True"

    # the benchmark JSON carries the failed case's error map: plot draws the same report from it
    out = tmp_path / "again"
    plot = subprocess.run(
        [sys.executable, "-m", "pytest_gemm.cli", "plot", str(project.path / "run.json"), "--out", str(out)],
        capture_output=True,
        text=True,
    )
    assert plot.returncode == 0, plot.stderr
    assert sorted(str(p.relative_to(out)) for p in out.rglob("*.png")) == names
    assert_self_contained(out)


def test_no_report_asked_no_matplotlib_imported(project):
    project.runpytest_subprocess(*ARGS).assert_outcomes(passed=6, failed=1, skipped=3)  # this process has it
    assert (project.path / "imported.txt").read_text() == "False"
    assert not (project.path / "report").exists()


def test_pytest_html_rows_carry_their_pictures(project):
    pytest.importorskip("pytest_html", reason="pytest-html is not installed (pip install pytest-html)")
    result = _run(project, "--html", "html/page.html")
    result.assert_outcomes(passed=6, failed=1, skipped=3)
    beside = project.path / "html" / "gemm-report"
    assert (beside / "index.html").is_file() and (beside / "tflops-fp32.png").is_file()
    rows = _pytest_html_rows(project.path / "html" / "page.html")
    timed = [f"kernels/01_naive.cu::sgemm_naive[fp32-{s}{ab}]" for s in ("512x512x512", "4096x4096x4096")
             for ab in ("", "-a0.7b1.3", "-a-1.5b0")]  # fmt: skip
    for test in timed:  # each timed case's row shows its dtype's chart and links the report page
        assert rows[test] == [("image", "gemm-report/tflops-fp32.png"), ("url", "gemm-report/index.html")]
    (heat, link) = rows[f"kernels/{UNWRITTEN}"]  # the failed case's row shows its heatmap, saved by pytest-html
    assert heat[0] == "image" and heat[1].startswith("assets/") and link == ("url", "gemm-report/index.html")
    assert_sensible_png(project.path / "html" / heat[1])
    (drawn,) = (beside / "errors").glob("unwritten*.png")  # drawn once, as the case ended: before the charts
    assert drawn.stat().st_mtime_ns < (beside / "tflops-fp32.png").stat().st_mtime_ns
    assert drawn.read_bytes() == (project.path / "html" / heat[1]).read_bytes()
    assert [rows[t] for t in rows if "256x256x256" in t and "naive" in t] == [[], [], []]  # skipped: no pictures


def _pytest_html_rows(page: Path) -> dict[str, list[tuple[str, str]]]:
    """Each test's extras in a pytest-html 4 report: (format, content), from the page's JSON data."""
    import html
    import re

    blob = re.search(r'data-jsonblob="([^"]*)"', page.read_text(encoding="utf-8"))
    assert blob, "not a pytest-html 4 report"
    tests = json.loads(html.unescape(blob.group(1)))["tests"]
    return {test: [(e["format_type"], e["content"]) for r in runs for e in r["extras"]] for test, runs in tests.items()}


def test_a_heatmap_that_cannot_be_drawn_as_its_case_ends_is_said_and_drawn_from_the_saved_map(project):
    project.makeconftest(
        (project.path / "conftest.py").read_text()
        + "\n\nimport pytest_gemm.report.heatmap as _maps\n_real, _calls = _maps.heatmap, []\n\n\n"
        + "def _once(*args, **kwargs):\n    _calls.append(1)\n"
        + "    if len(_calls) == 1:\n        raise OSError('disk full')\n    return _real(*args, **kwargs)\n\n\n"
        + "_maps.heatmap = _once\n"
    )
    result = _run(project, "--gemm-report", "report", "--benchmark-skip")
    result.assert_outcomes(passed=6, failed=1, skipped=3)
    assert result.ret == pytest.ExitCode.TESTS_FAILED  # the report itself was written
    result.stdout.fnmatch_lines(
        [
            "pytest-gemm report: 1 heatmap(s) could not be drawn as their cases ended (first: errors/unwritten_tile*: "
            "OSError: disk full); drawn again from the saved maps"
        ]
    )
    (drawn,) = (project.path / "report" / "errors").glob("unwritten*.png")
    assert_sensible_png(drawn)
