"""The names a report makes from a run's data (report/names.py): safe, distinct file names placed inside their
folder, and kernels told apart by file and name in every picture and table."""

from __future__ import annotations

import dataclasses
import os
import re
from pathlib import Path
from typing import Any

import pytest

from pytest_gemm.records.shapes import Shape
from pytest_gemm.report.names import LONGEST, OutsideFolderError, inside, kernel_labels, slug
from pytest_gemm.report.outputs import chart_name, heatmap_name
from pytest_gemm.runs.data import RunData
from pytest_gemm.runs.saved import read_run

from support.reports import RUN

SAFE = re.compile(r"[A-Za-z0-9_][A-Za-z0-9._-]*")
HOSTILE = [
    "x/../../docs/images/mine",
    "x/../../../../../../../../tmp/ESCAPED",
    "/etc/passwd",
    "..",
    ".",
    "",
    ".hidden",
    "-rf",
    "a" * 5000,
    "sp ace\ttab\nnewline",
    "ядро_ü😀",
    "a\ud800b",  # a lone surrogate, as JSON's "\ud800" reads
    "C:\\Windows\\x",
    "FP32",
    "fp32",
    "Fp32",
    "fp32 ",
    "x_y",
    "x/y",
    "x:y",
]


def test_a_slug_is_one_safe_bounded_component_and_distinct_values_stay_distinct():
    names = [slug(text) for text in HOSTILE]
    for text, name in zip(HOSTILE, names):
        assert SAFE.fullmatch(name) and len(name) <= LONGEST, (text, name)
    assert len({name.lower() for name in names}) == len(HOSTILE)  # even where case is ignored
    assert [slug(t) for t in ("fp32", "bf16", "fp8_e4m3", "x_y")] == ["fp32", "bf16", "fp8_e4m3", "x_y"]
    assert slug("x/../../docs/images/mine").startswith("x_docs_images_mine-") and slug("a..b").startswith("a_b-")
    changed = slug("x/y")  # a value spelled as another's slug is changed too, so the two never meet
    assert slug(changed) != changed and slug(changed).startswith(changed + "-")


def test_chart_and_heatmap_names_are_safe_and_distinct_per_dtype_and_test_id():
    assert chart_name("fp32") == "tflops-fp32.png"
    charts = {chart_name(text) for text in HOSTILE}
    assert len(charts) == len(HOSTILE) and all(SAFE.fullmatch(c) for c in charts)
    tests = ["kernels/a.cu::k[fp32-64x64x64]", "other/a.cu::k[fp32-64x64x64]", "a.cu::../../x", "/abs.cu::k[../y]"]
    maps = [heatmap_name(test) for test in tests]
    assert len(set(maps)) == len(tests)
    assert maps[0].startswith("errors/k_fp32-64x64x64-") and all(m.count("/") == 1 for m in maps)
    assert all(SAFE.fullmatch(part) for m in maps for part in m.split("/"))


@pytest.mark.parametrize("name", ["..", "../x.png", "/abs.png", "a/../b.png", "", "errors/", ".hidden", "a\\..\\b"])
def test_inside_refuses_a_name_that_is_not_a_safe_relative_path(tmp_path, name):
    with pytest.raises(OutsideFolderError, match="not a safe file name"):
        inside(tmp_path / "out", name)


def test_inside_refuses_a_link_in_the_folder_that_points_away(tmp_path):
    out, away = tmp_path / "out", tmp_path / "away"
    out.mkdir()
    away.mkdir()
    assert inside(out, "errors/k-0123.png") == out / "errors" / "k-0123.png"  # a folder not made yet is fine
    os.symlink(away, out / "errors")
    os.symlink(tmp_path / "mine.png", out / "pct-cublas.png")
    for name in ("errors/k-0123.png", "pct-cublas.png"):
        with pytest.raises(OutsideFolderError, match="outside"):
            inside(out, name)
    os.symlink(out / "index.html", out / "page.html")  # a link that stays inside is the folder's own
    assert inside(out, "page.html") == out / "page.html"


def _record(**fields: Any):
    return dataclasses.replace(read_run(RUN).records[0], **fields)


def test_labels_are_plain_names_unless_another_file_has_a_kernel_of_that_name():
    records = [
        _record(file="kernels/01_naive.cu", kernel="sgemm_naive"),
        _record(file="kernels/01_naive.cu", kernel="sgemm_naive[T2]"),
        _record(file="other/01_naive.cu", kernel="sgemm_naive"),
        _record(file="01_naive.cu", kernel="sgemm_naive"),
        _record(file="kernels/a.cu", kernel="sgemm_tiled"),
        _record(file="kernels/b.cu", kernel="sgemm_tiled[X]"),
        _record(file="kernels/c.cu", kernel="sgemm_alone[X]"),
    ]
    assert list(kernel_labels(records).values()) == [
        "kernels/01_naive.cu::sgemm_naive",
        "kernels/01_naive.cu::sgemm_naive[T2]",
        "other/01_naive.cu::sgemm_naive",
        "01_naive.cu::sgemm_naive",
        "a.cu::sgemm_tiled",
        "b.cu::sgemm_tiled[X]",
        "sgemm_alone[X]",
    ]


# -- two kernels of one name in two files: two lines, two bars, two rows -----------------------------------------
NAIVE = "kernels/01_naive.cu"
OTHER = "other/01_naive.cu"
LARGEST = Shape(1024, 1024, 1024)


@pytest.fixture(scope="module")
def run() -> RunData:
    """The recorded H100 run, with a copy of its naive kernel in another file, twice as fast."""
    data = read_run(RUN)
    naive = [r for r in data.records if r.file == NAIVE and r.kernel == "sgemm_naive"]
    assert len(naive) == 3
    data.with_timing(
        [
            dataclasses.replace(
                r,
                test=r.test.replace(NAIVE, OTHER),
                file=OTHER,
                tflops=2 * r.tflops,
                pct_cublas=2 * r.pct_cublas,
                pct_cublas_ci=(2 * r.pct_cublas_ci[0], 2 * r.pct_cublas_ci[1]),
            )
            for r in naive
        ]
    )
    return data


def test_the_pct_of_cublas_bars_are_one_per_kernel_with_its_file(run):
    from pytest_gemm.report.pictures import pct_bars

    bars = {bar.label: bar for bar in pct_bars(run.records, LARGEST) if bar.dtype == "fp32"}
    assert "sgemm_naive" not in bars
    first, second = bars[f"{NAIVE}::sgemm_naive"], bars[f"{OTHER}::sgemm_naive"]
    assert round(first.value, 1) == 18.0 and second.value == pytest.approx(2 * first.value)
    assert "sgemm_smem[TILE32]" in bars  # a name no other file has stays plain
    at = [r for r in run.records if r.shape == LARGEST]
    assert len(pct_bars(run.records, LARGEST)) == len({(r.dtype, r.file, r.kernel) for r in at})


def test_the_throughput_lines_are_one_per_kernel_with_its_file(run):
    from pytest_gemm.report.pictures import throughput_lines

    lines = throughput_lines(run.records, "fp32")
    first, second = lines[f"{NAIVE}::sgemm_naive"], lines[f"{OTHER}::sgemm_naive"]
    assert [s for s, _ in first] == [s for s, _ in second] and len(first) == 3 and "sgemm_naive" not in lines
    assert [round(v, 2) for _, v in first][-1] == 6.13
    assert [v for _, v in second] == pytest.approx([2 * v for _, v in first])


def test_the_drawn_charts_carry_the_two_labels(run, tmp_path, monkeypatch):
    pytest.importorskip("matplotlib", reason="the pictures need matplotlib (pip install matplotlib)")
    from pytest_gemm.report import pictures

    drawn: dict[str, Any] = {}
    monkeypatch.setattr(pictures, "save", lambda fig, path, **_: drawn.setdefault(path.name, fig) and path)
    gpu = run.gpu_name
    assert pictures.tflops_chart(run.records, "fp32", run.gpu, gpu, run.day, tmp_path / "t.png")
    assert pictures.pct_cublas_chart(run.records, None, gpu, run.day, tmp_path / "p.png")
    legend = [text.get_text() for text in drawn["t.png"].axes[0].get_legend().get_texts()]
    ticks = [label.get_text() for label in drawn["p.png"].axes[0].get_yticklabels()]
    for shown in (legend, ticks):
        assert f"{NAIVE}::sgemm_naive" in shown and f"{OTHER}::sgemm_naive" in shown and "sgemm_naive" not in shown
    assert len(set(ticks)) == len(ticks)


def test_the_page_names_each_kernel_with_its_file(run, tmp_path):
    pytest.importorskip("matplotlib", reason="the report needs matplotlib (pip install matplotlib)")
    from pytest_gemm.report.folder import write_report

    write_report(run, tmp_path)
    page = (tmp_path / "index.html").read_text()
    assert f"<td>{NAIVE}::sgemm_naive</td>" in page and f"<td>{OTHER}::sgemm_naive</td>" in page
    assert "<td>sgemm_naive</td>" not in page and "<td>sgemm_smem[TILE32]</td>" in page


def test_picture_text_from_the_run_is_drawn_literally(tmp_path):
    pytest.importorskip("matplotlib", reason="the pictures need matplotlib (pip install matplotlib)")
    from pytest_gemm.report.pictures import pct_cublas_chart, tflops_chart

    odd = [_record(kernel="k$\\nope$"), _record(kernel="k\ud800", test="k.cu::k\ud800[x]")]
    assert tflops_chart(odd, odd[0].dtype, {}, "$\\frac{$", "", tmp_path / "t.png") == tmp_path / "t.png"
    assert pct_cublas_chart(odd, None, "gpu\ud800", "", tmp_path / "p.png") == tmp_path / "p.png"
    assert Path(tmp_path / "t.png").stat().st_size > 1000
