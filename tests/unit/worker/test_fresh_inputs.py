"""Fresh inputs for timed launches (docs/verification.md#fresh-inputs-for-timed-launches), on the host: which rows and
columns a key negates, that negating rows of A and columns of B negates the same of the product bit for bit, how the
fresh kernel finds an element's row and column in an operand stored either way, and how a wrong timed round reads."""

from __future__ import annotations

import numpy as np
import pytest

from pytest_gemm.records.outcome import RETURNED, ErrorStats, TimedCheck
from pytest_gemm.report.failure import timed_round
from pytest_gemm.worker.fresh import FRESH_SOURCE, negated


def _signs(key: int, count: int) -> np.ndarray:
    return np.where(negated(key, count), -1.0, 1.0)


def test_a_key_negates_about_half_and_key_zero_none():
    assert not negated(0, 1000).any()
    first, second = negated(0x1234567, 4096), negated(0x7654321, 4096)
    assert 0.45 < first.mean() < 0.55 and 0.45 < second.mean() < 0.55
    assert (first != second).mean() > 0.4  # another key, another pattern
    assert (negated(0x1234567, 4096) == first).all()  # the same key, the same pattern (the check undoes it)


@pytest.mark.parametrize("dtype", [np.float32, np.float16, np.float64])
@pytest.mark.parametrize("beta", [0.0, 1.3])
def test_negating_rows_of_a_and_columns_of_b_negates_the_output_bit_for_bit(dtype, beta):
    """Every product and sum only changes sign, and rounding to nearest is symmetric: alpha (D A)(B E) + beta D C0 E
    is D (alpha A B + beta C0) E exactly, so a timed output with its signs undone is the verified one."""
    rng = np.random.default_rng(7)
    m, n, k = 67, 45, 300
    a, b, c0 = (rng.uniform(-1, 1, shape).astype(dtype) for shape in ((m, k), (k, n), (m, n)))
    d, e = _signs(0xBEEF01, m).astype(dtype), _signs(0xC0FFEE, n).astype(dtype)
    alpha = dtype(0.7)
    plain = alpha * (a @ b) + dtype(beta) * c0
    fresh = alpha * ((d[:, None] * a) @ (b * e[None, :])) + dtype(beta) * (d[:, None] * c0 * e[None, :])
    assert (d[:, None] * fresh * e[None, :]).tobytes() == plain.tobytes()


def _fresh_kernel(src: np.ndarray, rows: int, cols: int, transposed: bool, by_row: bool, by_col: bool, keys):
    """The fresh kernel's element loop, as its CUDA source writes it, on a float operand's stored elements."""
    t = np.arange(src.size)
    j, i = t % cols, (t // cols) % rows
    r, c = (j, i) if transposed else (i, j)
    neg = np.zeros(src.size, dtype=bool)
    if by_row:
        neg ^= negated(keys[0], int(r.max()) + 1)[r]
    if by_col:
        neg ^= negated(keys[1], int(c.max()) + 1)[c]
    return np.where(neg, -src.ravel(), src.ravel()).reshape(src.shape)


@pytest.mark.parametrize("transposed", [False, True])
def test_an_operand_stored_either_way_has_its_logical_rows_and_columns_negated(transposed):
    """A batch of two M x N outputs, stored as written or transposed: the element loop negates logical row i and
    column j of each matrix, by the row key and the column key."""
    rng = np.random.default_rng(3)
    batch, m, n, keys = 2, 5, 7, (0x51, 0x77)
    logical = rng.uniform(-1, 1, (batch, m, n))
    stored = np.concatenate([x.T if transposed else x for x in logical])  # stacked, each matrix in its order
    rows, cols = (n, m) if transposed else (m, n)
    out = _fresh_kernel(stored, rows, cols, transposed, True, True, keys)
    want = logical * _signs(keys[0], m)[None, :, None] * _signs(keys[1], n)[None, None, :]
    got = np.stack([x.T if transposed else x for x in np.split(out, batch)])
    np.testing.assert_array_equal(got, want)
    # the element loop undoes itself: the check's copy of an output holds it with its signs undone
    np.testing.assert_array_equal(_fresh_kernel(out, rows, cols, transposed, True, True, keys), stored)


def test_the_kernel_source_names_what_the_element_loop_reads():
    """The NumPy loop above mirrors the CUDA source: the same index arithmetic and flag bits."""
    for line in (
        "const u64 j = t % cols, i = (t / cols) % rows;",
        "const u64 r = transposed ? j : i, c = transposed ? i : j;",
        "const int by_row = (f >> 10) & 1, by_col = (f >> 11) & 1;",
    ):
        assert line in FRESH_SOURCE


@pytest.mark.parametrize(
    ("returned", "said"),
    [
        ("previous round", "round 3 of 12 returned the previous round's result"),
        ("same buffers", "round 3 of 12 returned an earlier result of the same buffers"),
        ("as verified", "round 3 of 12 returned the result for the inputs as verified"),
        ("", "round 3 of 12 was wrong"),
    ],
)
def test_a_wrong_timed_round_is_named_by_what_it_returned(returned, said):
    assert returned in (*RETURNED, "")
    stats = ErrorStats(40.0, 1.2, 300, 4096, 0, 0, 1.0, 1e-6, (), (), 4, 16)
    text = timed_round(TimedCheck(3, 12, stats, returned, checked=2))
    assert text.startswith(f"correct when verified, wrong when timed: {said} (")
    assert text.endswith("each timed launch had inputs of its own; 2 timed output(s) checked)")


def test_a_wrong_timed_round_of_a_graph_replay_says_so():
    """--gemm-timer graph (docs/timing.md): a wrong replay points at the graph, not only at a kept result."""
    stats = ErrorStats(40.0, 1.2, 300, 4096, 0, 0, 1.0, 1e-6, (), (), 4, 16)
    text = timed_round(TimedCheck(3, 12, stats, "as verified", checked=2, replayed=True))
    said = "each timed launch had inputs of its own, and was a CUDA graph replay; 2 timed output(s) checked)"
    assert text.endswith(said), text
