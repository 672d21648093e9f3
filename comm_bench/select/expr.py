"""A safe expression language for rule conditions: literals, fact names, and / or / not,
comparisons, + - * /, max / min / abs, parentheses. Parsed with ast and walked by hand (never eval):
anything else (calls, attributes, subscripts, lambdas) is rejected when the rules load."""
from __future__ import annotations

import ast
import operator

from ..results.doclimits import MAX_INT_DIGITS
from ..errors import UsageError

_CMP = {ast.Eq: operator.eq, ast.NotEq: operator.ne, ast.Lt: operator.lt, ast.LtE: operator.le,
        ast.Gt: operator.gt, ast.GtE: operator.ge, ast.In: lambda a, b: a in b,
        ast.NotIn: lambda a, b: a not in b}
_BIN = {ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul, ast.Div: operator.truediv}
FUNCS = {"max": max, "min": min, "abs": abs}
LITERALS = {"true": True, "false": False, "True": True, "False": False, "none": None, "None": None}


class Expr:
    def __init__(self, text, known, where):
        self.text = text
        src = "True" if text is True else "False" if text is False else text
        if not isinstance(src, str) or not src.strip():
            raise UsageError(f"{where}: 'if' must be an expression string")
        try:
            self.tree = ast.parse(src.strip(), mode="eval").body
            self._check(self.tree, known, where)
        except SyntaxError as exc:
            raise UsageError(f"{where}: bad expression {src!r} ({exc.msg})") from None
        except (RecursionError, MemoryError):
            raise UsageError(f"{where}: expression nested too deeply ({len(src)} characters)") from None

    def _check(self, node, known, where):
        if isinstance(node, ast.BoolOp) or isinstance(node, ast.Compare):
            kids = node.values if isinstance(node, ast.BoolOp) else [node.left] + node.comparators
            if isinstance(node, ast.Compare) and any(type(o) not in _CMP for o in node.ops):
                raise UsageError(f"{where}: unsupported comparison in {self.text!r}")
        elif isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.Not, ast.USub)):
            kids = [node.operand]
        elif isinstance(node, ast.BinOp) and type(node.op) in _BIN:
            kids = [node.left, node.right]
        elif isinstance(node, (ast.Tuple, ast.List)):
            kids = node.elts
        elif isinstance(node, ast.Constant) and (node.value is None or isinstance(node.value, (int, float, str))):
            if isinstance(node.value, int) and abs(node.value) >= 10 ** MAX_INT_DIGITS:
                raise UsageError(f"{where}: the number {str(node.value)[:12]}... in {self.text[:40]!r} is too "
                                 f"large (at most {MAX_INT_DIGITS} digits)")
            kids = []
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in FUNCS \
                and not node.keywords and node.args:
            kids = node.args
        elif isinstance(node, ast.Name):
            if node.id not in known and node.id not in LITERALS:
                raise UsageError(f"{where}: unknown fact {node.id!r} in {self.text!r} "
                                 f"(facts: see docs/selection.md or --explain)")
            kids = []
        else:
            raise UsageError(f"{where}: {type(node).__name__} is not allowed in {self.text!r} "
                             "(only facts, numbers, strings, and/or/not, comparisons, + - * /, max/min/abs)")
        for k in kids:
            self._check(k, known, where)

    def __call__(self, facts):
        return _eval(self.tree, facts)


def _eval(node, f):
    if isinstance(node, ast.BoolOp):
        if isinstance(node.op, ast.And):
            return all(_eval(v, f) for v in node.values)
        return any(_eval(v, f) for v in node.values)
    if isinstance(node, ast.Compare):
        left = _eval(node.left, f)
        for op, right in zip(node.ops, node.comparators):
            r = _eval(right, f)
            if left is None or r is None:
                return False                       # a missing figure never satisfies a test
            if not _CMP[type(op)](left, r):
                return False
            left = r
        return True
    if isinstance(node, ast.UnaryOp):
        v = _eval(node.operand, f)
        return (not v) if isinstance(node.op, ast.Not) else (-v if v is not None else None)
    if isinstance(node, ast.BinOp):
        a, b = _eval(node.left, f), _eval(node.right, f)
        if a is None or b is None or (isinstance(node.op, ast.Div) and b == 0):
            return None
        return _BIN[type(node.op)](a, b)
    if isinstance(node, (ast.Tuple, ast.List)):
        return [_eval(e, f) for e in node.elts]
    if isinstance(node, ast.Call):
        args = [_eval(a, f) for a in node.args]
        if any(a is None for a in args):
            return None
        return FUNCS[node.func.id](*args)
    if isinstance(node, ast.Constant):
        return node.value
    if node.id in f:
        return f[node.id]
    return LITERALS[node.id]
