"""The end-of-run timing tables, from the records of outcomes recorded on an H100."""

from __future__ import annotations

import dataclasses
import re

import pytest

from pytest_gemm.records.case_record import GateResult
from pytest_gemm.records.verdicts import GateVerdict, Sanity
from pytest_gemm.report.tables import format_time, row_flags, timer_names, timing_tables

from support import recorded_records, recording


@pytest.mark.parametrize(("seconds", "text"), [(2.5, "2.5 s"), (0.0236, "23.6 ms"), (4.9e-5, "49 us"), (1e-3, "1 ms")])
def test_format_time(seconds, text):
    assert format_time(seconds) == text


def test_tables_show_the_gpu_its_clocks_and_every_case():
    rows = recorded_records()
    lines = timing_tables(rows, recording()["facts"], width=120)
    assert lines[0].startswith("NVIDIA H100 80GB HBM3, 132 SMs, SM clock 1980 MHz while timing (max 1980)")
    assert "driver 580.159.04" in lines[0] and "cuBLAS 13.1.0" in lines[0]
    assert "fp32:" in lines
    header = next(line for line in lines if line.startswith("kernel"))
    assert header.split() == [
        "kernel",
        "shape",
        "median",
        "TFLOP/s",
        "%",
        "cuBLAS",
        "%",
        "peak",
        "noise",
        "n",
        "flags",
    ]
    text = "\n".join(lines)
    assert re.search(r"^sgemm_naive +4096x4096x4096 +23\.67 ms +5\.81 +11\.3% +8\.7% +0\.46% +10$", text, re.M)
    assert re.search(r"^sgemm_smem\[TILE32\] a0\.7b1\.3 +1024x1024x1024 +254\.7 us", text, re.M)
    assert lines[-1] == "3 case(s) timed in 1.2 s (warm-up, timing and re-verification)."


def test_the_timer_is_named_and_a_fallback_from_cupti_is_said():
    rows = recorded_records()  # recorded before CUPTI: the events
    assert timer_names(rows) == "CUDA events"
    cupti = [dataclasses.replace(row, timer="cupti") for row in rows]
    assert timer_names(cupti) == "CUPTI kernel records"
    why = "CUPTI cannot record activity: CUPTIError: CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED"
    mixed = [*cupti[:2], dataclasses.replace(rows[2], timer_note=why)]
    assert timer_names(mixed) == "CUPTI kernel records and CUDA events"
    lines = timing_tables(mixed, recording()["facts"], width=120)
    assert lines[-1] == f"1 case(s) timed with CUDA events, not CUPTI kernel records: {why}"


def test_graph_replays_are_named_and_a_launch_capture_refused_is_said():
    rows = recorded_records()
    why = "its launch could not be captured: NotImplementedError: calling cuBLAS API during stream capture is ..."
    graph = [dataclasses.replace(row, timer="graph", timer_asked="graph") for row in rows[:2]]
    mixed = [*graph, dataclasses.replace(rows[2], timer="events", timer_asked="graph", timer_note=why)]
    assert timer_names(mixed) == "CUDA events and CUDA graph replays"
    lines = timing_tables(mixed, recording()["facts"], width=120)
    assert lines[-1] == f"1 case(s) timed with CUDA events, not CUDA graph replays: {why}"


def test_one_table_per_dtype():
    rows = recorded_records()
    bf16 = dataclasses.replace(rows[0], dtype="bf16", kernel="hgemm_wmma")
    lines = timing_tables([*rows, bf16], {}, width=120)
    assert lines[0] == "GPU: unknown"
    assert lines.index("bf16:") < lines.index("fp32:")
    bf16_table = lines[lines.index("bf16:") : lines.index("fp32:")]
    assert any("hgemm_wmma" in line for line in bf16_table)
    assert not any("sgemm_smem" in line for line in bf16_table)


@pytest.mark.parametrize("width", [80, 100])
def test_tables_fit_the_terminal(width):
    name = "sgemm_with_a_very_long_descriptive_name[TILE32-WARPS8]"
    rows = [dataclasses.replace(row, kernel=name) for row in recorded_records()]
    lines = timing_tables(rows, recording()["facts"], width=width)
    table = [line for line in lines[1:-1] if line and not line.endswith(":")]
    assert all(len(line) <= width for line in table), max(table, key=len)
    assert any("~" in line for line in table)  # shortened, and marked as such
    assert all("TFLOP/s" in line and "noise" in line for line in table if line.startswith("kernel"))


def test_flags_say_what_deserves_a_second_look():
    row = recorded_records()[0]
    assert row_flags(row) == ""
    flagged = dataclasses.replace(
        row, verdict=Sanity.WRONG, suspicious=("x",), throttle=("power cap",), stop="time cap", cache="hot"
    )
    assert row_flags(flagged) == "WRONG OUTPUT, SUSPICIOUS, throttled, time cap, hot L2"
    # stopped where the clock's step was wider than --gemm-noise: said, not hidden as "converged"
    assert row_flags(dataclasses.replace(row, stop="clock resolution")) == "clock resolution"
    assert row_flags(dataclasses.replace(row, stop="converged")) == ""
    moved = GateResult(GateVerdict.SAME, "ratio", 0.05, 0.053, ("reference moved: the ratio changed +5.3%",))
    assert row_flags(row.with_gate(moved)) == "cuBLAS moved"
    regressed = GateResult(GateVerdict.REGRESSED, "ratio", 0.05, 0.101, ("kernel source changed since the baseline",))
    assert row_flags(row.with_gate(regressed)) == "REGRESSED +10.1%, source changed"
    # a grouped case's "% cuBLAS" is of torch's grouped GEMM, its peer: the row says so
    assert row_flags(dataclasses.replace(row, peer="torch _grouped_mm")) == "vs torch _grouped_mm"


def test_the_condensed_table_shows_each_kernels_fastest_variant_per_shape_and_counts_the_flags_of_the_rest():
    rows = recorded_records()
    base = rows[1]  # the naive kernel at 4096^3, alpha = 1, beta = 0
    slower = dataclasses.replace(base, test="k::slow", kernel="sgemm_naive[SLOW]", ratio=base.ratio * 2)
    regressed = GateResult(GateVerdict.REGRESSED, "ratio", 0.05, 0.2, fails=True)
    flagged = dataclasses.replace(base, test="k::ab", ab="a0.7b1.3", ratio=base.ratio / 2, gate=regressed)
    lines = timing_tables([*rows, slower, flagged], recording()["facts"], width=120, full=False)
    text = "\n".join(lines)
    naive = [line for line in lines if line.startswith("sgemm_naive")]
    # a row per kernel, a column per shape: the fastest variant's alpha = 1, beta = 0 case (an alpha/beta case ran
    # faster), its median and % of cuBLAS
    header = next(line for line in lines if line.startswith("kernel"))
    assert header.split() == ["kernel", "512x512x512", "4096x4096x4096", "1024x1024x1024", "flags"]
    assert len(naive) == 1 and naive[0].split()[1:7] == ["49.66", "us", "37.0%", "23.67", "ms", "11.3%"], naive
    assert "[SLOW]" not in text and "a0.7b1.3" not in naive[0]
    assert naive[0].endswith("4096x4096x4096: 1 more flagged")  # the regressed alpha/beta case it stands for, shown
    smem = next(line for line in lines if line.startswith("sgemm_smem"))
    assert smem.endswith("1024x1024x1024: at a0.7b1.3 only")  # a kernel and shape with no alpha = 1, beta = 0 case
    assert lines[-1].startswith("5 case(s) timed in ")  # all of them
    full = timing_tables([*rows, slower, flagged], recording()["facts"], width=120)
    assert "sgemm_naive[SLOW]" in "\n".join(full) and len(full) == len(lines) + 3
    narrow = timing_tables([*rows, slower, flagged], recording()["facts"], width=70, full=False)
    header = next(line for line in narrow if line.startswith("kernel"))  # too wide for a column per shape: a row each
    assert header.split() == ["kernel", "shape", "median", "TFLOP/s", "%", "cuBLAS", "flags"]  # the few that matter
    assert [line.split()[1] for line in narrow if line.startswith("sgemm_na")] == ["512x512x512", "4096x4096x4096"]
    other = dataclasses.replace(base, test="other.cu::k", file="other.cu")  # the same kernel name in another file
    both = timing_tables([base, other], recording()["facts"], width=120, full=False)
    rows_of = [line.split()[0] for line in both if "::sgemm_naive" in line]
    assert rows_of == ["01_naive.cu::sgemm_naive", "other.cu::sgemm_naive"]  # each named by its file


def test_a_row_of_the_condensed_table_says_which_shape_a_flag_is_at_and_a_kernel_is_one_row():
    rows = recorded_records()
    naive = [r for r in rows if r.kernel == "sgemm_naive" and not r.ab]  # 512^3 and 4096^3, alpha = 1, beta = 0
    regressed = GateResult(GateVerdict.REGRESSED, "ratio", 0.05, 0.2, fails=True)
    both = [dataclasses.replace(r, gate=regressed) for r in naive]
    lines = timing_tables(both, recording()["facts"], width=160, full=False)
    (row,) = [line for line in lines if line.startswith("sgemm_naive")]
    assert row.count("REGRESSED") == 1 and "512x512x512:" not in row  # at every shape of the row: said once
    one = [dataclasses.replace(naive[0], gate=regressed), naive[1]]
    lines = timing_tables(one, recording()["facts"], width=160, full=False)
    (row,) = [line for line in lines if line.startswith("sgemm_naive")]
    assert "512x512x512: REGRESSED" in row and "4096x4096x4096: REGRESSED" not in row
    only_ab = [naive[0], dataclasses.replace(naive[1], test=naive[1].test + "-a0.7b1.3", ab="a0.7b1.3")]
    lines = timing_tables(only_ab, recording()["facts"], width=160, full=False)
    kernel_rows = [line for line in lines if line.startswith("sgemm_naive")]
    assert len(kernel_rows) == 1 and kernel_rows[0].endswith("4096x4096x4096: at a0.7b1.3 only"), kernel_rows
