from __future__ import annotations

import pytest

from pytest_gemm.specs.expr import Expression, ExpressionError, evaluate

ENV = {"M": 100, "N": 64, "K": 7, "TILE": 32}


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("cdiv(M, 32)", 4),
        ("cdiv(N, TILE) * 2", 4),
        ("M // 3 + M % 3", 34),
        ("(M - 4) / 8", 12.0),
        ("min(M, N, 50)", 50),
        ("max(K, 8)", 8),
        ("-K + +3", -4),
        ("K % 4 == 0", False),
        ("N % TILE == 0 and M >= 1", True),
        ("not (K > 8) or M < 0", True),
        ("1 <= K < 8", True),
        ("32", 32),
        (128, 128),
    ],
)
def test_evaluates_the_small_grammar(text, expected):
    assert evaluate(text, ENV) == expected


@pytest.mark.parametrize(
    "text",
    [
        "__import__('os').system('echo hacked')",
        "M.__class__",
        "open('x')",
        "lambda: 1",
        "[M for M in range(3)]",
        "M if K else N",
        "'text'",
        "1.5 * M",
        "M ** 2",
        "M << 2",
        "_secret",
        "cdiv(M)",
        "min(M)",
        "cdiv(a=M, b=2)",
        "M; N",
        "import os",
        "",
    ],
)
def test_rejects_everything_else_before_running_it(text):
    with pytest.raises(ExpressionError):
        Expression(text)


def test_nothing_from_a_rejected_expression_runs(tmp_path):
    marker = tmp_path / "ran"
    with pytest.raises(ExpressionError):
        evaluate(f"__import__('pathlib').Path({str(marker)!r}).touch()", ENV)
    assert not marker.exists()


def test_unknown_names_are_reported_with_the_known_ones():
    with pytest.raises(ExpressionError, match=r"unknown name 'TILES'.*M, N"):
        Expression("cdiv(N, TILES)", frozenset({"M", "N", "K", "TILE"}))


def test_division_by_zero_is_an_expression_error():
    with pytest.raises(ExpressionError, match="division by zero"):
        evaluate("cdiv(N, TILE)", {**ENV, "TILE": 0})
    with pytest.raises(ExpressionError, match="division by zero"):
        evaluate("N // (K - 7)", ENV)


def test_bool_is_not_an_integer_literal():
    with pytest.raises(ExpressionError):
        Expression(True)  # type: ignore[arg-type]
