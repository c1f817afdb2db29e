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


def show_stages(stages, net):
    """Print forward (a0, z1, ...) or backward (dout, dz2, ...) stages with their formulas,
    the same lines as ``python -m mlp_ref stages``."""
    from .cli import _backward_formula, _forward_formula
    for name, value in stages.items():
        formula = _backward_formula if name.startswith("d") else _forward_formula
        show(name, value, formula(name, net))
