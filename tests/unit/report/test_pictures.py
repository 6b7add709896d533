"""The pictures, drawn on the CPU from a run recorded on an H100 (tests/data/h100_run.json) and from
error maps built here (the drawing is what is tested; the worker that fills them is tested elsewhere)."""

from __future__ import annotations

import json

import pytest

pytest.importorskip("matplotlib", reason="the pictures need matplotlib (pip install matplotlib)")

from pytest_gemm.judge import causes
from pytest_gemm.records.outcome import ErrorMap
from pytest_gemm.records.result import CaseResult
from pytest_gemm.records.shapes import Shape
from pytest_gemm.records.verdicts import ErrorCause
from pytest_gemm.report.heatmap import CAUSE_STYLE, OUTSIDE_STYLE, heatmap
from pytest_gemm.report.pictures import largest_shape, pct_cublas_chart, tflops_chart
from pytest_gemm.runs.data import STORED_CELLS, RunData
from pytest_gemm.runs.saved import RunFileError, read_run, run_json

from support.reports import RUN, assert_sensible_png, error_map, failed, pixels_near, png_size

GPU = "NVIDIA H100 80GB HBM3"


@pytest.fixture(scope="module")
def run() -> RunData:
    return read_run(RUN)


def test_the_recorded_run_reads_back(run):
    assert len(run.records) == 135 and run.gpu_name == GPU and run.day == "2026-11-22"
    assert {r.dtype for r in run.records} == {"fp32", "fp16", "bf16"}
    assert largest_shape(run.records) == Shape(1024, 1024, 1024)
    assert RUN.stat().st_size < 500_000


@pytest.mark.parametrize("dtype", ["fp32", "fp16", "bf16"])
def test_a_throughput_chart_per_dtype(run, tmp_path, dtype):
    path = tflops_chart(run.records, dtype, run.gpu, run.gpu_name, run.day, tmp_path / f"{dtype}.png")
    assert_sensible_png(path)
    assert pixels_near(path, "#8C8C8C", 20) > 500  # the wide grey cuBLAS line is drawn
    assert tflops_chart(run.records, "fp64", run.gpu, run.gpu_name, run.day, tmp_path / "fp64.png") is None


def test_the_pct_of_cublas_chart_has_a_bar_per_kernel_in_each_dtypes_colour(run, tmp_path):
    path = pct_cublas_chart(run.records, None, run.gpu_name, run.day, tmp_path / "pct.png")
    assert_sensible_png(path)
    kernels = len({(r.dtype, r.kernel) for r in run.records})
    assert png_size(path)[1] > 20 * kernels  # every bar gets its own row
    for colour in ("#0072B2", "#E69F00", "#009E73"):  # fp32, bf16, fp16
        assert pixels_near(path, colour) > 2000, colour
    assert pct_cublas_chart(run.records, Shape(4096, 4096, 4096), run.gpu_name, run.day, tmp_path / "none.png") is None


def test_each_cause_has_its_own_colour_and_a_single_bad_cell_shows(tmp_path):
    marks = {
        (5, 5): (0.0, "unwritten"),
        (60, 7): (0.0, "C read although beta = 0"),
        (100, 100): (0.0, "read past A"),
        (3, 90): (1e4, "over the bound"),
    }
    path = heatmap(*failed(error_map(1000, 1000, marks=marks)), GPU, "2026-11-22", tmp_path / "map.png")
    assert_sensible_png(path)
    for cause in (ErrorCause.UNWRITTEN, ErrorCause.READ_C, ErrorCause.GUARD_A):
        assert pixels_near(path, CAUSE_STYLE[cause][0], top=0.9) > 4, cause  # one cell of 125 along a side
    assert pixels_near(path, CAUSE_STYLE[ErrorCause.GUARD_B][0]) == 0  # an absent cause is neither drawn nor listed


def test_one_wrong_element_of_an_8192_square_c_still_shows(tmp_path):
    """The worker's own map (judge.causes: MAX_CELLS a side, 64x64 elements a cell) shows one bad element of 8192²."""
    import numpy as np

    ratio = np.full((8192, 8192), 0.2, dtype=np.float16)  # half the memory of fp32; the ratios fit
    unwritten = np.zeros(ratio.shape, dtype=bool)
    ratio[5000, 3001], unwritten[5000, 3001] = np.inf, True
    emap = causes.error_map(np, ratio, causes.causes_of(np, ratio, unwritten, causes.Evidence()), tile=(128, 256))
    del ratio, unwritten
    assert len(emap.ratio) == len(emap.ratio[0]) == causes.MAX_CELLS and emap.cell == (64, 64)
    path = heatmap(*failed(emap, "sgemm_big[fp32-8192x8192x512]"), GPU, "2026-11-22", tmp_path / "big.png")
    assert_sensible_png(path)
    assert pixels_near(path, CAUSE_STYLE[ErrorCause.UNWRITTEN][0], top=0.9) > 4  # not only in the legend


def test_writes_outside_c_are_drawn_past_its_frame(tmp_path):
    """A missing row check writes rows past M: the picture grows to show them, in their own colour."""
    import numpy as np

    rows, cols = np.meshgrid(np.arange(100, 128), np.arange(100), indexing="ij")
    strays = np.stack([rows.ravel(), cols.ravel()], 1)
    emap = error_map(100, 100, cells=100, tile=(32, 32))
    emap = ErrorMap(**{**emap.__dict__, "outside": causes.outside_cells(strays, emap.cell)})
    path = heatmap(*failed(emap, "oob_write[fp32-100x100x64]"), GPU, "2026-11-22", tmp_path / "oob.png")
    assert_sensible_png(path)
    assert pixels_near(path, OUTSIDE_STYLE[0], top=0.9) > 2000  # a band 28 rows deep, not only the legend
    plain = heatmap(*failed(error_map(100, 100, cells=100)), GPU, "2026-11-22", tmp_path / "plain.png")
    assert pixels_near(plain, OUTSIDE_STYLE[0]) == 0


def test_skinny_and_unknown_tile_maps_draw(tmp_path):
    row = error_map(1, 4096, tile=None, marks={(0, 3): (50.0, "over the bound")})
    assert_sensible_png(heatmap(*failed(row, "sgemm_row[fp32-1x4096x512]"), GPU, "", tmp_path / "row.png"))


def test_error_maps_travel_in_a_saved_run_pooled_and_small(tmp_path, run):
    test, diagnosis = failed(error_map(256, 256, cells=128, marks={(120, 121): (0.0, "unwritten")}, base=0.123456789))
    data = RunData.of_timed(run.gpu, run.records[:3], date=run.date, command="pytest --gemm-kernels kernels/")
    data.tests[test] = CaseResult("failed", "verification failed", kind="case", diagnosis=diagnosis)
    path = tmp_path / "run.json"
    path.write_text(json.dumps(run_json(data), indent=4))  # as pytest-benchmark writes it
    back = read_run(path)
    assert back.command == "pytest --gemm-kernels kernels/" and back.records == run.records[:3]
    (got,) = back.failures.values()
    emap = got.diagnosis.error_map
    assert len(emap.ratio) == len(emap.ratio[0]) == STORED_CELLS and emap.cell == (4, 4)  # 128 cells pooled to 64
    assert emap.cause[60][60] == "unwritten" and {w for line in emap.cause for w in line} == {"", "unwritten"}
    assert emap.ratio[0][0] == pytest.approx(0.123456789, rel=0.012)  # two characters a cell: within 1.2%
    saved = json.loads(path.read_text())["gemm"]["tests"][test]
    assert len(json.dumps(saved, indent=4)) < 32_000  # bounded whatever C's size


def test_a_file_that_is_not_a_run_is_refused(tmp_path):
    bad = tmp_path / "bad.json"
    bad.write_text('{"benchmarks": []}')
    with pytest.raises(RunFileError, match="holds no pytest-gemm cases"):
        read_run(bad)
    bad.write_text("[1, 2]")
    with pytest.raises(RunFileError, match="not a pytest-benchmark JSON file"):
        read_run(bad)
