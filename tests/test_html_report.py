"""The report folder: index.html's contents, how it renders in headless Chromium, and --gemm-report and
pytest-html in real sessions on the H100 recording (tests/replay_backend.py). No GPU needed."""

from __future__ import annotations

import dataclasses
import json
import os
import shutil
import subprocess
import sys
from html.parser import HTMLParser
from pathlib import Path

import pytest

pytest.importorskip("matplotlib", reason="the report needs matplotlib (pip install matplotlib)")

from test_pictures import RUN, assert_sensible_png, error_map, failed, pixels_near

from pytest_gemm.records.outcome import Outcome
from pytest_gemm.records.plain import from_plain, to_plain
from pytest_gemm.records.result import CaseResult
from pytest_gemm.report.folder import heatmap_name, write_report
from pytest_gemm.report.tables import COLUMNS, NUMERIC, cells
from pytest_gemm.runs.saved import read_run

from conftest import RECORDED

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
FAULTS = Path(__file__).resolve().parent / "kernels_broken" / "faults.cu"
UNWRITTEN = "faults.cu::unwritten_tile[fp32-256x256x256]"


class _Links(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.images: list[str] = []
        self.links: list[str] = []
        self.tags: set[str] = set()

    def handle_starttag(self, tag, attrs):
        self.tags.add(tag)
        values = dict(attrs)
        if tag == "img":
            self.images.append(values["src"])
        for key in ("href", "src"):
            if values.get(key):
                self.links.append(values[key])


def links(page: Path) -> _Links:
    parser = _Links()
    parser.feed(page.read_text(encoding="utf-8"))
    return parser


def assert_self_contained(folder: Path) -> None:
    """The page shows every picture in the folder, and names nothing outside it."""
    found = links(folder / "index.html")
    pictures = sorted(str(p.relative_to(folder)) for p in folder.rglob("*.png"))
    assert pictures and sorted(found.images) == pictures
    for link in found.links:
        assert "://" not in link and not link.startswith(("//", "/")), link
        assert link.startswith("#") or (folder / link).is_file(), link
    assert "script" not in found.tags and "http" not in (folder / "index.html").read_text()


def _fail(data, emap, name: str) -> str:
    """Add a failed case with this error map to a run; its test id."""
    test, diagnosis = failed(emap, name)
    data.tests[test] = CaseResult("failed", "verification failed", kind="case", diagnosis=diagnosis)
    return test


@pytest.fixture(scope="module")
def folder(tmp_path_factory) -> Path:
    """A report of the recorded H100 run with two failed cases added."""
    data = read_run(RUN)
    data.command = "pytest --gemm-kernels kernels/ --benchmark-json run.json"
    marks = {(10, 10): (0.0, "unwritten"), (50, 60): (300.0, "over the bound")}
    _fail(data, error_map(512, 512, marks=marks), "sgemm_bad[fp32-512x512x512]")
    _fail(data, error_map(300, 700, tile=(32, 128)), "<script>alert(1)</script>[fp32-300x700x512]")
    out = tmp_path_factory.mktemp("report")
    write_report(data, out)
    return out


def test_the_page_shows_every_picture_the_facts_and_the_tables(folder):
    assert_self_contained(folder)
    page = (folder / "index.html").read_text()
    assert "<title>pytest-gemm report: NVIDIA H100 80GB HBM3, 2026-11-22</title>" in page
    assert "<code>pytest --gemm-kernels kernels/ --benchmark-json run.json</code>" in page
    assert "135 timed case(s), 2 failed case(s) with a diagnosis" in page
    assert '<a href="run.json">run.json</a>' in page  # the run itself, beside the page
    assert "<h3>fp32: 45 case(s)</h3>" in page and "<td>sgemm_warp_tile[BN256-BK16]</td>" in page
    assert "<td>driver_version</td><td>580.159.04</td>" in page
    record = read_run(RUN).records[0]  # its row: the terminal table's cells, the gate's before the flags
    row = [*list(cells(record).values())[:-1], "", cells(record)["flags"]]
    assert "<th>" + "</th><th>".join(row_head()) + "</th>" in page
    assert (
        "".join(f'<td class="num">{c}</td>' if h in NUMERIC else f"<td>{c}</td>" for h, c in zip(row_head(), row))
        in page
    )
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in page and "<script>" not in page
    for png in folder.rglob("*.png"):
        assert_sensible_png(png)


def row_head() -> list[str]:
    return [*COLUMNS[:-1], "gate", COLUMNS[-1]]


def test_a_heatmap_drawn_already_this_run_is_not_drawn_again(tmp_path):
    data = read_run(RUN)
    data.tests = {}
    tests = [_fail(data, error_map(256, 256), f"k{i}[fp32-256x256x512]") for i in range(2)]
    (tmp_path / "errors").mkdir()
    kept = tmp_path / heatmap_name(tests[0])
    kept.write_bytes(b"drawn as the case ended")
    report = write_report(data, tmp_path, drawn=tests)  # the second is missing
    assert kept.read_bytes() == b"drawn as the case ended"
    assert_sensible_png(tmp_path / heatmap_name(tests[1]))
    assert sorted(report.heatmaps.values()) == sorted(heatmap_name(test) for test in tests)


def test_run_json_beside_the_page_draws_the_same_report(folder, tmp_path):
    again = read_run(folder / "run.json")
    assert len(again.records) == 135 and len(again.failures) == 2
    write_report(again, tmp_path)
    assert sorted(p.name for p in tmp_path.rglob("*")) == sorted(p.name for p in folder.rglob("*"))
    report = write_report(again, tmp_path / "plot", source=folder / "run.json")  # drawn from a saved run: not copied
    assert report.run_file is None and not (tmp_path / "plot" / "run.json").exists()
    assert (
        f"<strong>Drawn from:</strong> <code>{folder / 'run.json'}</code>" in (tmp_path / "plot/index.html").read_text()
    )


@pytest.mark.skipif(CHROMIUM is None, reason="no headless browser: apt-get install chromium")
def test_the_page_renders_in_headless_chromium(folder, tmp_path):
    shot = tmp_path / "shot.png"
    command = [
        CHROMIUM,
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-quic",
        "--no-first-run",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        "--hide-scrollbars",
        f"--user-data-dir={tmp_path / 'profile'}",
        f"--screenshot={shot}",
        "--window-size=1280,9000",
        (folder / "index.html").as_uri(),
    ]
    subprocess.run(command, capture_output=True, timeout=120, check=False)
    assert shot.exists(), "chromium wrote no screenshot"
    import numpy as np
    from matplotlib.image import imread

    grey = imread(shot)[..., :3].mean(axis=-1)
    assert grey.std() > 0.15  # not a blank page
    assert pixels_near(shot, "#0072B2", 6) > 20_000  # the pictures: fp32 lines and bars, Okabe-Ito blue
    assert pixels_near(shot, "#E69F00", 6) > 20_000  # bf16's bars and the mma kernels' lines
    assert pixels_near(shot, "#e8eef4", 2) > 5_000  # the tables' header rows
    assert pixels_near(shot, "#D55E00", 6) > 500  # the unwritten cells of a heatmap
    rows_with_ink = (grey < 0.9).any(axis=1)
    assert np.count_nonzero(rows_with_ink) > 0.5 * len(rows_with_ink)  # content all the way down


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


def _run(project, *args: str):
    return project.runpytest_subprocess(
        "--gemm-kernels", "kernels/01_naive.cu", f"kernels/faults.cu::{UNWRITTEN.split('::')[1]}",
        "--gemm-shapes", "512,4096,256", "-m", "gpu", "-p", "no:randomly", *args,
    )  # fmt: skip


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
    _run(project).assert_outcomes(passed=6, failed=1, skipped=3)
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
