"""A small, safe evaluator for the expressions in kernel-file headers.

Expressions are parsed with :mod:`ast` and walked node by node; only integer
arithmetic, comparisons, boolean logic, ``cdiv``, ``min`` and ``max`` and the
names supplied by the caller are allowed. Nothing from the text is ever run.
"""

from __future__ import annotations

import ast
import operator
from collections.abc import Callable, Mapping
from functools import lru_cache

__all__ = ["Expression", "ExpressionError", "evaluate"]


class ExpressionError(ValueError):
    """An expression that is malformed, uses something not allowed, or cannot be evaluated."""


def _cdiv(a: int, b: int) -> int:
    return -(-a // b)


_FUNCTIONS: dict[str, Callable[..., int]] = {"cdiv": _cdiv, "min": min, "max": max}
_ARITY = {"cdiv": (2, 2), "min": (2, None), "max": (2, None)}

_BINARY: dict[type, Callable[[int, int], int | float]] = {
    ast.Add: operator.add,
    ast.Sub: operator.sub,
    ast.Mult: operator.mul,
    ast.Div: operator.truediv,
    ast.FloorDiv: operator.floordiv,
    ast.Mod: operator.mod,
}
_COMPARE: dict[type, Callable[[int, int], bool]] = {
    ast.Eq: operator.eq,
    ast.NotEq: operator.ne,
    ast.Lt: operator.lt,
    ast.LtE: operator.le,
    ast.Gt: operator.gt,
    ast.GtE: operator.ge,
}
_ALLOWED = (
    "integers, + - * / // % and parentheses, comparisons, and/or/not, "
    "cdiv(a, b), min(...), max(...) and the names M, N, K, the kernel's params and, in grid, SM_COUNT"
)


class Expression:
    """A parsed expression: check it once, evaluate it for many shapes."""

    def __init__(self, text: str | int, names: frozenset[str] | None = None) -> None:
        if isinstance(text, bool) or not isinstance(text, (str, int)):
            raise ExpressionError(f"expected an integer or an expression string, got {text!r}")
        self.text = str(text)
        self._tree = _parse(self.text)
        self.names = _names_used(self._tree)
        if names is not None:
            unknown = sorted(self.names - names)
            if unknown:
                raise ExpressionError(
                    f"unknown name {unknown[0]!r} in {self.text!r}; known names: " + ", ".join(sorted(names))
                )

    def __call__(self, env: Mapping[str, int]) -> int | float | bool:
        return _eval(self._tree, env, self.text)

    def __repr__(self) -> str:
        return f"Expression({self.text!r})"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Expression) and other.text == self.text

    def __hash__(self) -> int:
        return hash(self.text)


def evaluate(text: str | int, env: Mapping[str, int]) -> int | float | bool:
    """Parse and evaluate ``text`` with the names in ``env``."""
    return Expression(text, frozenset(env))(env)


@lru_cache(maxsize=1024)
def _parse(text: str) -> ast.expr:
    if len(text) > 500:
        raise ExpressionError(f"expression too long ({len(text)} characters)")
    try:
        tree = ast.parse(text.strip(), mode="eval").body
    except SyntaxError as exc:
        raise ExpressionError(f"not a valid expression: {text!r} ({exc.msg})") from None
    _check(tree, text)
    return tree


def _check(node: ast.AST, text: str) -> None:
    """Reject every node type outside the small grammar, before anything is evaluated."""
    if isinstance(node, ast.Constant):
        if isinstance(node.value, bool) or not isinstance(node.value, int):
            raise ExpressionError(f"only integer literals are allowed, got {node.value!r} in {text!r}")
    elif isinstance(node, ast.Name):
        if node.id.startswith("_"):
            raise ExpressionError(f"name {node.id!r} is not allowed in {text!r}")
    elif isinstance(node, ast.BinOp) and type(node.op) in _BINARY:
        _check(node.left, text)
        _check(node.right, text)
    elif isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.USub, ast.UAdd, ast.Not)):
        _check(node.operand, text)
    elif isinstance(node, ast.BoolOp):
        for value in node.values:
            _check(value, text)
    elif isinstance(node, ast.Compare) and all(type(op) in _COMPARE for op in node.ops):
        _check(node.left, text)
        for comparator in node.comparators:
            _check(comparator, text)
    elif isinstance(node, ast.Call):
        if not isinstance(node.func, ast.Name) or node.func.id not in _FUNCTIONS:
            raise ExpressionError(f"call to {ast.unparse(node.func)!r} is not allowed in {text!r}; allowed: {_ALLOWED}")
        low, high = _ARITY[node.func.id]
        if node.keywords or len(node.args) < low or (high is not None and len(node.args) > high):
            raise ExpressionError(f"wrong arguments to {node.func.id}() in {text!r}")
        for arg in node.args:
            _check(arg, text)
    else:
        raise ExpressionError(
            f"{type(node).__name__} ({ast.unparse(node)!r}) is not allowed in {text!r}; allowed: {_ALLOWED}"
        )


def _names_used(tree: ast.AST) -> frozenset[str]:
    functions = {id(n.func) for n in ast.walk(tree) if isinstance(n, ast.Call)}
    return frozenset(n.id for n in ast.walk(tree) if isinstance(n, ast.Name) and id(n) not in functions)


def _eval(node: ast.AST, env: Mapping[str, int], text: str) -> int | float | bool:
    if isinstance(node, ast.Constant):
        return node.value
    if isinstance(node, ast.Name):
        try:
            return env[node.id]
        except KeyError:
            raise ExpressionError(f"unknown name {node.id!r} in {text!r}") from None
    if isinstance(node, ast.BinOp):
        left, right = _eval(node.left, env, text), _eval(node.right, env, text)
        try:
            return _BINARY[type(node.op)](left, right)
        except ZeroDivisionError:
            raise ExpressionError(f"division by zero in {text!r} with {dict(env)}") from None
    if isinstance(node, ast.UnaryOp):
        value = _eval(node.operand, env, text)
        if isinstance(node.op, ast.Not):
            return not value
        return -value if isinstance(node.op, ast.USub) else +value
    if isinstance(node, ast.BoolOp):
        values = (_eval(v, env, text) for v in node.values)
        return all(values) if isinstance(node.op, ast.And) else any(values)
    if isinstance(node, ast.Compare):
        left = _eval(node.left, env, text)
        for op, comparator in zip(node.ops, node.comparators):
            right = _eval(comparator, env, text)
            if not _COMPARE[type(op)](left, right):
                return False
            left = right
        return True
    if isinstance(node, ast.Call):
        args = [_eval(a, env, text) for a in node.args]
        if node.func.id == "cdiv" and args[1] == 0:
            raise ExpressionError(f"division by zero in {text!r} with {dict(env)}")
        return _FUNCTIONS[node.func.id](*args)
    raise ExpressionError(f"cannot evaluate {text!r}")  # unreachable after _check
