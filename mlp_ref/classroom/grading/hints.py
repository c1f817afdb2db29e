"""What an exception inside a student's function was computing, and a hint from the shapes.

numpy's ``matmul: Input operand 1 has a mismatch in its core dimension 0`` says which operand,
not which stage of backprop nor what to write instead. Here the line that raised is read as
code: its assignment target names the stage (``da_prev = ...``, ``stages["da1"] = ...``), and
each product or elementwise operation on it is re-evaluated from the frame's own arrays (only
names, ``.T``, constant subscripts and ``.sum``/``.mean`` with constant arguments: nothing that
could run the student's code again) to find the one whose shapes do not fit, and which
transpose would make them fit: ``dz @ W`` with dz (8, 2) and W (4, 2) gives "da_prev = dz @ W.T?".

The exception is recognised by its type and the shapes, never by reading numpy's message.
"""
from __future__ import annotations

import ast
import linecache

import numpy as np

_REDUCTIONS = {"sum", "mean"}


def _shape(x):
    return tuple(x.shape) if type(x) is np.ndarray else None


class _Eval(ast.NodeVisitor):
    """Evaluate the harmless part of an expression with a frame's names; None where unsure."""

    def __init__(self, names):
        self.names = names

    def value(self, node):
        try:
            return self._value(node)
        except Exception:                         # noqa: BLE001 - unsure is None
            return None

    def _value(self, node):
        if isinstance(node, ast.Name):
            x = self.names.get(node.id)
            return x if type(x) in (np.ndarray, dict, float, int) else None
        if isinstance(node, ast.Constant) and type(node.value) in (int, float, str):
            return node.value
        if isinstance(node, ast.Attribute) and node.attr == "T":
            x = self._value(node.value)
            return x.T if type(x) is np.ndarray else None
        if isinstance(node, ast.Subscript):
            x, key = self._value(node.value), self._key(node.slice)
            return x.get(key) if type(x) is dict and key is not None else None
        if isinstance(node, ast.JoinedStr):
            return self._key(node)
        if (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
                and node.func.attr in _REDUCTIONS and not node.args
                and all(isinstance(k.value, ast.Constant) for k in node.keywords)):
            x = self._value(node.func.value)
            if type(x) is not np.ndarray:
                return None
            return getattr(x, node.func.attr)(**{k.arg: k.value.value for k in node.keywords})
        if isinstance(node, ast.BinOp) and type(node.op) in _OPS:
            a, b = self._value(node.left), self._value(node.right)
            if a is None or b is None:
                return None
            with np.errstate(all="ignore"):
                return _OPS[type(node.op)](a, b)
        return None

    def _key(self, node):
        """A dict key: a constant, a name holding an int or a str (``S[l]``), or an f-string of
        those (``D[f"W{l}"]``); None otherwise."""
        if isinstance(node, ast.Constant) and type(node.value) in (int, str):
            return node.value
        if isinstance(node, ast.Name):
            x = self.names.get(node.id)
            return x if type(x) in (int, str) else None
        if isinstance(node, ast.JoinedStr):
            parts = []
            for part in node.values:
                if isinstance(part, ast.FormattedValue) and part.conversion == -1 and part.format_spec is None:
                    part = part.value
                key = self._key(part)
                if key is None:
                    return None
                parts.append(str(key))
            return "".join(parts)
        return None


_OPS = {ast.MatMult: lambda a, b: a @ b, ast.Mult: lambda a, b: a * b,
        ast.Add: lambda a, b: a + b, ast.Sub: lambda a, b: a - b, ast.Div: lambda a, b: a / b}
_SYMBOL = {ast.MatMult: "@", ast.Mult: "*", ast.Add: "+", ast.Sub: "-", ast.Div: "/"}


def _target(statement):
    """The stage a statement assigns: ``da_prev`` or ``stages["da1"]`` -> "da1"; else None."""
    targets = (statement.targets if isinstance(statement, ast.Assign)
               else [statement.target] if isinstance(statement, (ast.AugAssign, ast.AnnAssign))
               else [])
    for t in targets:
        if isinstance(t, ast.Name):
            return t.id
        if isinstance(t, ast.Subscript) and isinstance(t.slice, ast.Constant):
            return str(t.slice.value)
    if isinstance(statement, ast.Return):
        return None
    return None


def _failing_op(tree, ev):
    """The innermost binary operation whose operands evaluate and whose result does not."""
    found = None
    for node in ast.walk(tree):
        if isinstance(node, ast.BinOp) and type(node.op) in _OPS:
            a, b = ev.value(node.left), ev.value(node.right)
            if type(a) is np.ndarray and type(b) is np.ndarray and ev.value(node) is None:
                found = node                      # ast.walk is breadth-first: keep the deepest
    return found


def _fits(op, a, b):
    try:
        with np.errstate(all="ignore"):
            _OPS[op](np.empty(a), np.empty(b))
        return True
    except ValueError:
        return False


def _transposed(node):
    """``x.T`` for ``x``, and ``x`` for ``x.T`` (a transpose too many is taken away)."""
    if isinstance(node, ast.Attribute) and node.attr == "T":
        return node.value
    return ast.Attribute(value=node, attr="T", ctx=ast.Load())


def hint_for(exc, frame_names, source_line):
    """(stage, hint) for an exception raised on ``source_line`` with the frame's names; either
    may be "" when the line says nothing more than the exception."""
    try:
        statement = ast.parse(source_line.strip()).body[0]
    except (SyntaxError, IndexError, ValueError):
        return "", ""
    stage = _target(statement) or ""
    if not isinstance(exc, ValueError):
        return stage, ""
    ev = _Eval(frame_names)
    node = _failing_op(statement, ev)
    if node is None:
        return stage, ""
    a, b = _shape(ev.value(node.left)), _shape(ev.value(node.right))
    left, right = ast.unparse(node.left), ast.unparse(node.right)
    what = f"{left} {a} {_SYMBOL[type(node.op)]} {right} {b}"
    if isinstance(node.op, ast.MatMult):
        for fixed in (ast.BinOp(node.left, node.op, _transposed(node.right)),
                      ast.BinOp(_transposed(node.left), node.op, node.right),
                      ast.BinOp(node.right, node.op, node.left)):
            fa, fb = (_shape(ev.value(fixed.left)), _shape(ev.value(fixed.right)))
            if fa and fb and _fits(ast.MatMult, fa, fb):
                suggestion = ast.unparse(fixed)
                target = f"{stage} = " if stage else ""
                return stage, (f"{what}: the inner sizes differ ({a[-1]} and {b[0] if len(b) > 1 else b[-1]}); "
                               f"{target}{suggestion}?")
        return stage, f"{what}: the inner sizes differ; check each factor's shape"
    for one, two, name, operand in ((a, b, left, node.left), (b, a, right, node.right)):
        reduced = (isinstance(operand, ast.Call) and isinstance(operand.func, ast.Attribute)
                   and operand.func.attr in _REDUCTIONS)          # a sum's lost axis: below
        if (one and two and len(one) == 1 and len(two) == 2 and one[0] == two[0] != two[1]
                and not reduced):                 # a weight per row, lined up with the columns
            return stage, (f"{what} do not broadcast: {name} has one entry per row, and a vector "
                           f"lines up with the last axis (the columns): {name}[:, None] makes it a "
                           f"column, one weight per row")
    if a and b and len(a) != len(b):
        return stage, (f"{what} do not broadcast: one of them lost an axis (a sum over the wrong "
                       f"axis? keepdims=True keeps it)")
    if a and b and a == b[::-1]:
        return stage, f"{what} do not broadcast: one of them is transposed?"
    return stage, f"{what} do not broadcast: compare each with the shape the docstring gives"


def describe(exc, tb, filename):
    """(line, stage, hint) of the innermost frame of ``tb`` in ``filename`` (line 0: none)."""
    frame, line = None, 0
    while tb is not None:
        if tb.tb_frame.f_code.co_filename == filename:
            frame, line = tb.tb_frame, tb.tb_lineno
        tb = tb.tb_next
    if frame is None:
        return 0, "", ""
    source = linecache.getline(filename, line)
    try:
        stage, hint = hint_for(exc, {**frame.f_globals, **frame.f_locals}, source)
    except Exception:                             # noqa: BLE001 - a hint is a bonus
        stage, hint = "", ""
    return line, stage, hint
