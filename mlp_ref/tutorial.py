"""Small helpers that every script in ``tutorials/`` uses.

``python tutorials/01_forward_backward.py --step`` pauses before each section until you press
Enter; without ``--step``, or when standard input is not a terminal (tests, CI, a pipe), the
script runs straight through and never waits.
"""
from __future__ import annotations

import sys
import textwrap

import numpy as np


def stepping(argv=None, stdin=None):
    """True when the script was started with ``--step`` and a person can press Enter."""
    argv = sys.argv if argv is None else argv
    stdin = sys.stdin if stdin is None else stdin
    return "--step" in argv[1:] and stdin is not None and stdin.isatty()


def section(title, text="", step=None):
    """Print a heading and a short narration; with ``--step``, first wait for Enter."""
    if stepping() if step is None else step:
        try:
            input(f"\n[press Enter for: {title}] ")
        except EOFError:                  # stdin closed under us: carry on, do not hang
            pass
    print(f"\n{title}\n{'=' * len(title)}")
    if text:
        print(textwrap.fill(" ".join(text.split()), width=92))


def show(name, value, formula=None, precision=4, sci=False):
    """Print one stage: ``name = formula   shape (n, k)`` and its values (``sci``: as 1.2e-04)."""
    value = np.asarray(value)
    head = f"{name} = {formula}" if formula else name
    print(f"\n{head}   shape {value.shape}")
    fmt = {"float_kind": f"{{:.{precision - 1}e}}".format} if sci else None
    with np.printoptions(precision=precision, suppress=not sci, linewidth=100, formatter=fmt):
        print("  " + np.array2string(value, prefix="  "))


def show_stages(stages, net, precision=4):
    """Print forward (a0, z1, ...) or backward (dout, dz2, ...) stages with their formulas,
    as ``python -m mlp_ref stages`` does."""
    for name, value in stages.items():
        formula = backward_formula if name.startswith("d") else forward_formula
        show(name, value, formula(name, net), precision=precision)


def forward_formula(name, net):
    """The formula that computes forward stage ``name`` (a0, z1, a1, ...) of ``net``."""
    l = int(name[1:])
    if name == "a0":
        return "X"
    if name[0] == "z":
        return f"a{l - 1} @ W{l} + b{l}"
    return f"{net.activations[l - 1]}(z{l})"


def backward_formula(name, net):
    """The formula that computes backward stage ``name`` (dout, dz2, dW2, ...) of ``net``."""
    if name == "dout":
        return "G"
    kind, l = name[:2], int(name[2:])
    if kind == "dz":
        act = net.activations[l - 1]
        da = "dout" if l == net.depth else f"da{l}"
        return da if act == "identity" else f"{da} * {act}'(z{l})"
    return {"dW": f"a{l - 1}.T @ dz{l}", "db": f"dz{l}.sum(axis=0)",
            "da": f"dz{l + 1} @ W{l + 1}.T"}[kind]
