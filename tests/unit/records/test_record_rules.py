"""The rules by which saved runs and baseline files are read and cases recorded (records/case_record.py): figures,
intervals against their estimates, dtypes, paths and text, each defined once."""

from __future__ import annotations

import dataclasses
import math

import pytest

from pytest_gemm.records.case_record import (
    dtype_problem,
    figure_problem,
    figures_problem,
    path_problem,
    printable,
    record_problem,
    text_problem,
)

from support import TIMED, recorded_record

GOOD = {"ratio": 5.458, "ratio_ci": [5.4, 5.5], "median_s": 3.489e-4, "ci_s": [3.48e-4, 3.5e-4], "samples": 30}
NAMES = tuple(GOOD)


@pytest.mark.parametrize(
    ("fields", "problem"),
    [
        ({"ratio_ci": [100, 200]}, "ratio_ci [100, 200] does not contain ratio 5.458"),
        ({"ci_s": [1.0, 2.0]}, "ci_s [1.0, 2.0] does not contain median_s 0.0003489"),
        ({"ci_s": [3.5e-4, 3.48e-4]}, "ci_s must be [low, high] with low <= high, got [0.00035, 0.000348]"),
        ({"samples": -5}, "samples must be a whole number of at least 1, got -5"),
        ({"samples": 2.5}, "samples must be a whole number of at least 1, got 2.5"),
        ({"samples": True}, "samples must be a whole number of at least 1, got True"),
        ({"median_s": 1e308}, "median_s must be at most 86400 s (a day), got 1e+308"),
        ({"ratio": 1e10}, "ratio must be at most 1e9, got 10000000000.0"),
        ({"ci_s": [3e-4, 1e6]}, "ci_s must be at most 86400 s (a day), got [0.0003, 1000000.0]"),
        ({"ratio_ci": [math.nan, 6.0]}, "ratio_ci must be a list of two positive numbers, got [nan, 6.0]"),
        ({"ratio": math.inf}, "ratio must be a positive number, got inf"),
    ],
)
def test_a_figure_or_interval_no_timing_makes_is_named(fields, problem):
    assert figures_problem({**GOOD, **fields}, NAMES) == problem


def test_good_figures_pass_and_an_interval_may_touch_its_estimate():
    assert figures_problem(GOOD, NAMES) is None
    assert figures_problem({**GOOD, "ratio_ci": [5.458, 5.458]}, NAMES) is None
    assert figure_problem("tflops", 1e7) == "tflops must be at most 1e6 TFLOP/s, got 10000000.0"
    assert figure_problem("tflops", 0.0) is None


@pytest.mark.parametrize(
    "value",
    [
        "/tmp/w13/PWNED_abs.cu::sgemm_naive[fp32-64x64x64]",
        "../../../../tmp/w13/PWNED_file.cu::sgemm_naive[fp32-64x64x64]",
        "kernels/../../x.cu",
        "kernels\\..\\..\\x.cu",
        "C:/k.cu",
        "\\\\server\\share\\k.cu",
        "",
        3,
    ],
)
def test_a_path_that_leaves_the_project_is_refused(value):
    assert path_problem("test", value)


def test_a_relative_path_inside_the_project_passes_whatever_its_case_id_holds():
    assert path_problem("test", "kernels/01_naive.cu::sgemm_naive[fp32-64x64x64-a0.7b1.3]") is None
    assert path_problem("file", "k..x.cu") is None  # '..' only as a whole part leaves a folder


def test_only_known_dtypes_pass():
    assert dtype_problem("fp8_e4m3") is None
    assert dtype_problem("x/../../docs/images/mine").startswith("dtype must be one of fp32, tf32, fp16")
    assert dtype_problem(["fp32"]) and dtype_problem("int32")  # an output dtype is no case's dtype


TEST = "kernels/01_naive.cu::sgemm_naive[fp32-64x64x64]"
SURROGATE = "test must be text UTF-8 can encode, got 'kernels/01_naive.cu::sgemm_naive[\\ud800fp32-64x64x64]' (a lone "
NEWLINE = "test must hold no control characters, got 'kernels/01_naive.cu::sgemm_naive[\\nfp32-64x64x64]' ('\\n' at "


@pytest.mark.parametrize(
    ("value", "problem"),
    [
        (TEST.replace("[", "[\ud800"), SURROGATE + "surrogate at character 33)"),
        (TEST.replace("[", "[\n"), NEWLINE + "character 33)"),
        (TEST + "\x9b", f"test must hold no control characters, got '{TEST}\\x9b' ('\\x9b' at character 47)"),
        (TEST + "\0", f"test must hold no control characters, got '{TEST}\\x00' ('\\x00' at character 47)"),
        ("k" * 4097, f"test must be at most 4096 characters, got 4097: '{'k' * 56}... (4097 characters)"),
    ],
    ids=["lone-surrogate", "newline", "c1-control", "nul", "too-long"],
)
def test_text_no_terminal_or_file_name_can_hold_is_refused(value, problem):
    assert text_problem("test", value) == problem
    assert path_problem("test", value) == problem  # a test id or a path is text first


def test_a_records_kernel_and_gpu_are_text_and_its_gpu_name_fits_a_file_name():
    record = recorded_record(TIMED[0])
    assert record_problem(record) is None
    assert record_problem(dataclasses.replace(record, gpu="G" * 200)) is None
    long = dataclasses.replace(record, gpu="G" * 201)
    assert record_problem(long) == f"gpu must be at most 200 characters, got 201: '{'G' * 56}... (201 characters)"
    escape = dataclasses.replace(record, kernel="sgemm_naive\x1b[2J")
    assert record_problem(escape) == (
        "kernel must hold no control characters, got 'sgemm_naive\\x1b[2J' ('\\x1b' at character 11)"
    )
    assert text_problem("kernel", 3) == "kernel must be a string, got 3"
    assert text_problem("kernel", "sgemm_naive[TILE32] µ") is None  # any text UTF-8 encodes


def test_a_message_prints_text_as_it_is_unless_it_breaks_the_rule():
    assert printable(TEST) == TEST
    assert printable(TEST + "\x1b[2J") == repr(TEST + "\x1b[2J")
