"""A tiny, safe integer-arithmetic evaluator for manifest grid rules such as ``ceil(n/256)``.

Manifests come from other machines and tools, so rules are parsed with ``ast`` and only integer
constants, named integers, + - * / // %, unary minus and ceil/floor/min/max/cdiv are accepted;
``/`` is exact (Fraction), so ceil(n/256) is right even for n beyond 2**53.
"""

from __future__ import annotations

import ast
import math
from collections.abc import Callable, Mapping
from fractions import Fraction
from typing import Any

from composer.errors import ComposerError

_BINOPS = {
    ast.Add: lambda a, b: a + b,
    ast.Sub: lambda a, b: a - b,
    ast.Mult: lambda a, b: a * b,
    ast.Div: lambda a, b: Fraction(a) / Fraction(b),
    ast.FloorDiv: lambda a, b: a // b,
    ast.Mod: lambda a, b: a % b,
}
_FUNCS: dict[str, tuple[int | None, Callable[..., Any]]] = {
    "ceil": (1, lambda x: math.ceil(x)),
    "floor": (1, lambda x: math.floor(x)),
    "cdiv": (2, lambda a, b: -((-a) // b)),
    "min": (None, min),
    "max": (None, max),
}
MAX_RULE_LENGTH = 256


class GridRuleError(ComposerError, ValueError):
    """A grid rule uses something outside the allowed grammar, or an unknown name."""


def _eval(node: ast.AST, names: Mapping[str, int], rule: str):
    if isinstance(node, ast.Expression):
        return _eval(node.body, names, rule)
    if isinstance(node, ast.Constant):
        if isinstance(node.value, bool) or not isinstance(node.value, int):
            raise GridRuleError(f"grid rule {rule!r}: only integer constants are allowed, got {node.value!r}")
        return node.value
    if isinstance(node, ast.Name):
        if node.id not in names:
            raise GridRuleError(f"grid rule {rule!r}: unknown name {node.id!r} (known: {sorted(names)})")
        return names[node.id]
    if isinstance(node, ast.BinOp) and type(node.op) in _BINOPS:
        a, b = _eval(node.left, names, rule), _eval(node.right, names, rule)
        if isinstance(node.op, (ast.Div, ast.FloorDiv, ast.Mod)) and b == 0:
            raise GridRuleError(f"grid rule {rule!r}: division by zero")
        return _BINOPS[type(node.op)](a, b)
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.USub, ast.UAdd)):
        v = _eval(node.operand, names, rule)
        return -v if isinstance(node.op, ast.USub) else v
    if isinstance(node, ast.Call):
        if not isinstance(node.func, ast.Name) or node.func.id not in _FUNCS or node.keywords:
            raise GridRuleError(f"grid rule {rule!r}: only calls to {sorted(_FUNCS)} are allowed")
        arity, fn = _FUNCS[node.func.id]
        args = [_eval(a, names, rule) for a in node.args]
        if (arity is not None and len(args) != arity) or not args:
            raise GridRuleError(f"grid rule {rule!r}: {node.func.id}() takes {arity or '1+'} argument(s)")
        return fn(*args)
    raise GridRuleError(f"grid rule {rule!r}: {type(node).__name__} is not allowed")


def evaluate(rule: str | int, names: Mapping[str, int]) -> int:
    """Evaluate ``rule`` with integer ``names``; the result must be an integer."""
    if isinstance(rule, bool):
        raise GridRuleError(f"grid rule {rule!r}: booleans are not allowed")
    if isinstance(rule, int):
        return rule
    if not isinstance(rule, str):
        raise GridRuleError(f"grid rule must be a string or int, got {type(rule).__name__}")
    if len(rule) > MAX_RULE_LENGTH:
        raise GridRuleError(f"grid rule longer than {MAX_RULE_LENGTH} characters")
    for key, val in names.items():
        if isinstance(val, bool) or not isinstance(val, int):
            raise GridRuleError(f"grid rule {rule!r}: name {key!r} must be an int, got {val!r}")
    try:
        tree = ast.parse(rule.strip(), mode="eval")
    except SyntaxError as exc:
        raise GridRuleError(f"grid rule {rule!r}: syntax error ({exc.msg})") from None
    value = _eval(tree, names, rule)
    if isinstance(value, Fraction):
        if value.denominator != 1:
            raise GridRuleError(f"grid rule {rule!r}: result {value} is not an integer (wrap '/' in ceil())")
        value = int(value)
    return int(value)


def check_rule(rule: str | int) -> set[str]:
    """Validate the grammar of ``rule`` without values; returns the names it uses."""
    if isinstance(rule, int) and not isinstance(rule, bool):
        return set()
    if not isinstance(rule, str):
        raise GridRuleError(f"grid rule must be a string or int, got {type(rule).__name__}")
    try:
        tree = ast.parse(rule.strip(), mode="eval")
    except SyntaxError as exc:
        raise GridRuleError(f"grid rule {rule!r}: syntax error ({exc.msg})") from None
    used = {n.id for n in ast.walk(tree) if isinstance(n, ast.Name)}
    calls = {n.func.id for n in ast.walk(tree) if isinstance(n, ast.Call) and isinstance(n.func, ast.Name)}
    probe = {name: 1 for name in used - calls}
    try:
        _eval(tree, probe, rule)
    except GridRuleError as exc:
        if "division by zero" not in str(exc) and "not an integer" not in str(exc):
            raise
    return used - calls
