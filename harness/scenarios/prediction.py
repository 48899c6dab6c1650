"""A scenario's prediction: a decidable statement about a run's observed metrics, such as
`lost == 0 and not_enough_replicas > 0`. Parsed and checked before anything runs; decided on a finished run."""
from __future__ import annotations

import ast
import operator
from dataclasses import dataclass
from typing import Any, cast

from kchaos.checkers.verdict.observed import METRICS

__all__ = ["Prediction"]

_CMP = {ast.Lt: operator.lt, ast.LtE: operator.le, ast.Gt: operator.gt, ast.GtE: operator.ge,
        ast.Eq: operator.eq, ast.NotEq: operator.ne}
_BIN = {ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul, ast.Div: operator.truediv}


@dataclass(frozen=True)
class Prediction:
    """A decidable statement about a run's metrics, such as `lost == 0 and not_enough_replicas > 0`."""

    text: str

    @classmethod
    def parse(cls, text: Any) -> Prediction:
        """Check the expression: only metric names, numbers, comparisons, and/or/not, + - * /; else ValueError."""
        if not isinstance(text, str) or not text.strip():
            raise ValueError("must be an expression such as `lost > 0`")
        try:
            tree = ast.parse(text.strip(), mode="eval")
            nodes = list(ast.walk(tree))
        except SyntaxError as e:
            raise ValueError(f"{text!r} is not an expression ({e.msg})") from None
        except (RecursionError, MemoryError):
            raise ValueError("is nested too deeply to be a prediction") from None
        for node in nodes:
            if isinstance(node, ast.Name) and node.id not in METRICS:
                raise ValueError(f"unknown metric {node.id!r}; metrics: {', '.join(METRICS)}")
            if not isinstance(node, (ast.Expression, ast.BoolOp, ast.And, ast.Or, ast.UnaryOp, ast.Not, ast.USub,
                                     ast.Compare, ast.BinOp, ast.Name, ast.Load, ast.Constant, *_CMP, *_BIN)):
                raise ValueError(f"{text!r}: {type(node).__name__} is not allowed in a prediction")
            if isinstance(node, ast.Constant) and (not isinstance(node.value, (int, float))
                                                   or isinstance(node.value, bool)):
                raise ValueError(f"{text!r}: only numbers may appear, not {node.value!r}")
        if not _is_test(tree.body):
            raise ValueError(f"{text!r} must be comparisons joined by and/or/not, such as `lost > 0`")
        return cls(text.strip())

    @property
    def names(self) -> list[str]:
        """The metrics the prediction reads, in order of appearance."""
        seen: list[str] = []
        for n in ast.walk(ast.parse(self.text, mode="eval")):
            if isinstance(n, ast.Name) and n.id not in seen:
                seen.append(n.id)
        return seen

    def holds(self, metrics: dict[str, float]) -> bool:
        """Whether the prediction is true of `metrics` (a dict from checkers.observed.observe).

        A division by zero (say `lost / acked` with nothing acked) makes the prediction false.
        """
        try:
            return bool(_eval(ast.parse(self.text, mode="eval").body, metrics))
        except ZeroDivisionError:
            return False


def _is_test(node: ast.AST) -> bool:
    """A comparison, or and/or/not of tests: what a prediction is made of."""
    if isinstance(node, ast.BoolOp):
        return all(_is_test(v) for v in node.values)
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.Not):
        return _is_test(node.operand)
    return isinstance(node, ast.Compare)


def _eval(node: ast.AST, m: dict[str, float]) -> Any:
    if isinstance(node, ast.BoolOp):
        vals = (_eval(v, m) for v in node.values)
        return all(vals) if isinstance(node.op, ast.And) else any(vals)
    if isinstance(node, ast.UnaryOp):
        v = _eval(node.operand, m)
        return (not v) if isinstance(node.op, ast.Not) else -v
    if isinstance(node, ast.Compare):
        left = _eval(node.left, m)
        for op, right_node in zip(node.ops, node.comparators):
            right = _eval(right_node, m)
            if not _CMP[type(op)](left, right):
                return False
            left = right
        return True
    if isinstance(node, ast.BinOp):
        return _BIN[type(node.op)](_eval(node.left, m), _eval(node.right, m))
    if isinstance(node, ast.Name):
        return m[node.id]
    return cast(ast.Constant, node).value  # a number, checked by parse (cast: the only node left that it admits)
