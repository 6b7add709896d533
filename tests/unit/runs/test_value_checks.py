"""A saved run's values checked as it is read, on the CPU: a list of numbers (a case's samples) is checked item by
item in one pass, with the same verdicts and key paths as any other value: a bool or a string among numbers is named
by its index, a NumPy double is a number, a float where an integer is needed is not one."""

from __future__ import annotations

import re

import numpy as np
import pytest

from pytest_gemm.runs.check import WrongValue, check


@pytest.mark.parametrize(
    ("value", "tp", "message"),
    [
        ([1.0, 2, True], list[float], "raw.kernel_s[2]: expected a number, got true"),
        ((1.0, "x"), tuple[float, ...], "raw.kernel_s[1]: expected a number, got 'x'"),
        ([1, 2.5], list[int], "raw.kernel_s[1]: expected an integer, got 2.5"),
        ([1.0, None], list[float], "raw.kernel_s[1]: expected a number, got null"),
        (["a", 3], list[str], "raw.kernel_s[1]: expected a string, got 3"),
    ],
)
def test_a_wrong_item_among_numbers_is_named_by_its_index(value, tp, message):
    with pytest.raises(WrongValue, match=f"^{re.escape(message)}$"):
        check(value, tp, "raw.kernel_s")


def test_numbers_of_every_kind_a_run_holds_pass():
    check([1.0, 2, float("inf"), np.float64(3.5)], list[float], "raw.kernel_s")
    check((1, 2, 3), tuple[int, ...], "samples")
    check([[1.0, 2.0], [3.0]], list[list[float]], "nested")
    check([1.0, None], list[float | None], "optional")
    with pytest.raises(WrongValue, match=r"^nested\[1\]\[0\]: expected a number, got false$"):
        check([[1.0], [False]], list[list[float]], "nested")
