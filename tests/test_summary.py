"""The end-of-run timing tables, from rows recorded on an H100."""

from __future__ import annotations

import re

import pytest

from pytest_gemm.summary import format_time, row_flags, timing_tables

from conftest import recorded_rows, recorded_timings


@pytest.mark.parametrize(("seconds", "text"), [(2.5, "2.5 s"), (0.0236, "23.6 ms"), (4.9e-5, "49 us"), (1e-3, "1 ms")])
def test_format_time(seconds, text):
    assert format_time(seconds) == text


def test_tables_show_the_gpu_its_clocks_and_every_case():
    rows = recorded_rows()
    lines = timing_tables(rows, recorded_timings()["gpu"], width=120)
    assert lines[0].startswith("NVIDIA H100 80GB HBM3, 132 SMs, SM clock 1980 MHz while timing (max 1980)")
    assert "driver 580.159.04" in lines[0] and "cuBLAS 13.1.0" in lines[0]
    assert "fp32:" in lines
    header = next(line for line in lines if line.startswith("kernel"))
    assert header.split() == ["kernel", "shape", "median", "TFLOP/s", "%", "cuBLAS", "%", "peak", "noise", "n", "flags"]
    text = "\n".join(lines)
    assert re.search(r"^sgemm_naive +4096x4096x4096 +23\.61 ms +5\.82 +11\.3% +8\.7% +0\.16% +10$", text, re.M)
    assert re.search(r"^sgemm_smem\[TILE32\] a0\.7b1\.3 +1024x1024x1024 +252\.9 us", text, re.M)
    assert lines[-1] == "3 case(s) timed in 1.0 s (warm-up, timing and re-verification)."


def test_one_table_per_dtype():
    rows = recorded_rows()
    bf16 = dict(rows[0], dtype="bf16", kernel="hgemm_wmma")
    lines = timing_tables([*rows, bf16], {}, width=120)
    assert lines[0] == "GPU: unknown"
    assert lines.index("bf16:") < lines.index("fp32:")
    bf16_table = lines[lines.index("bf16:") : lines.index("fp32:")]
    assert any("hgemm_wmma" in line for line in bf16_table)
    assert not any("sgemm_smem" in line for line in bf16_table)


@pytest.mark.parametrize("width", [80, 100])
def test_tables_fit_the_terminal(width):
    rows = [dict(row, kernel="sgemm_with_a_very_long_descriptive_name[TILE32-WARPS8]") for row in recorded_rows()]
    lines = timing_tables(rows, recorded_timings()["gpu"], width=width)
    table = [line for line in lines[1:-1] if line and not line.endswith(":")]
    assert all(len(line) <= width for line in table), max(table, key=len)
    assert any("~" in line for line in table)  # shortened, and marked as such
    assert all("TFLOP/s" in line and "noise" in line for line in table if line.startswith("kernel"))


def test_flags_say_what_deserves_a_second_look():
    row = recorded_rows()[0]
    assert row_flags(row) == ""
    flagged = dict(row, verdict="wrong", suspicious=["x"], throttle=["power cap"], stop="time cap", cache="hot")
    assert row_flags(flagged) == "WRONG OUTPUT, SUSPICIOUS, throttled, time cap, hot L2"
    gated = dict(row, gate={"verdict": "same", "change": 0.053, "notes": ["reference moved: the ratio changed +5.3%"]})
    assert row_flags(gated) == "cuBLAS moved"
