"""Safe evaluation of axis ``expr`` expressions and workload ``constraints``.

Only integer literals, axis names, the operators + - * / // % ** (unary + and -),
comparisons, ``and``/``or``/``not`` and parentheses are allowed; the expression is parsed
with :mod:`ast` and walked, never passed to ``eval``.
"""

from __future__ import annotations

import ast
import operator

_BIN = {
    ast.Add: operator.add,
    ast.Sub: operator.sub,
    ast.Mult: operator.mul,
    ast.Div: operator.truediv,
    ast.FloorDiv: operator.floordiv,
    ast.Mod: operator.mod,
    ast.Pow: operator.pow,
}
_CMP = {
    ast.Eq: operator.eq,
    ast.NotEq: operator.ne,
    ast.Lt: operator.lt,
    ast.LtE: operator.le,
    ast.Gt: operator.gt,
    ast.GtE: operator.ge,
}


class ExpressionError(ValueError):
    """The expression uses something other than the allowed grammar, or a name is unbound."""


def parse(expression: str) -> ast.Expression:
    """Parse and check ``expression``; raises ExpressionError if it leaves the grammar."""
    try:
        tree = ast.parse(expression, mode="eval")
    except SyntaxError as e:
        raise ExpressionError(f"not a valid expression: {expression!r} ({e.msg})") from None
    for node in ast.walk(tree):
        ok = isinstance(
            node,
            (ast.Expression, ast.BinOp, ast.UnaryOp, ast.Compare, ast.BoolOp, ast.Name,
             ast.Constant, ast.Load, ast.USub, ast.UAdd, ast.Not, ast.And, ast.Or,
             *tuple(_BIN), *tuple(_CMP)),
        )
        if not ok:
            raise ExpressionError(
                f"{type(node).__name__} is not allowed in {expression!r} "
                "(only integers, axis names, + - * / // % **, comparisons, and/or/not)"
            )
        if isinstance(node, ast.Constant) and (
            isinstance(node.value, bool) or not isinstance(node.value, (int, float))
        ):
            raise ExpressionError(f"constant {node.value!r} is not a number in {expression!r}")
    return tree


def names(expression: str) -> set[str]:
    """Axis names an expression refers to."""
    return {n.id for n in ast.walk(parse(expression)) if isinstance(n, ast.Name)}


def evaluate(expression: str, env: dict[str, int | float]) -> int | float | bool:
    """Evaluate ``expression`` over ``env``. Raises ExpressionError (unknown name, bad op,
    division by zero, exponent over 64)."""
    tree = parse(expression)

    def ev(node):
        if isinstance(node, ast.Expression):
            return ev(node.body)
        if isinstance(node, ast.Constant):
            return node.value
        if isinstance(node, ast.Name):
            if node.id not in env:
                raise ExpressionError(f"unknown axis {node.id!r} in {expression!r}")
            return env[node.id]
        if isinstance(node, ast.UnaryOp):
            v = ev(node.operand)
            if isinstance(node.op, ast.USub):
                return -v
            if isinstance(node.op, ast.UAdd):
                return +v
            return not v
        if isinstance(node, ast.BinOp):
            a, b = ev(node.left), ev(node.right)
            if isinstance(node.op, ast.Pow) and abs(b) > 64:
                raise ExpressionError(f"exponent {b} too large in {expression!r}")
            try:
                return _BIN[type(node.op)](a, b)
            except ZeroDivisionError:
                raise ExpressionError(f"division by zero in {expression!r}") from None
        if isinstance(node, ast.BoolOp):
            vals = [ev(v) for v in node.values]
            return all(vals) if isinstance(node.op, ast.And) else any(vals)
        if isinstance(node, ast.Compare):
            left = ev(node.left)
            for op, right_node in zip(node.ops, node.comparators):
                right = ev(right_node)
                if not _CMP[type(op)](left, right):
                    return False
                left = right
            return True
        raise ExpressionError(f"unsupported node {type(node).__name__}")  # pragma: no cover

    return ev(tree)
