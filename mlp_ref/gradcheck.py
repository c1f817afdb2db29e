"""Finite-difference gradient check of every backward stage, as a tool students call.

The scalar being differentiated is L = sum(G * O): its derivative with respect to the
output is exactly G, so every stage of ``net.backward(record, G)`` is the derivative of
this L with respect to that stage's variable (a parameter, a z_l, or an a_l). For each
entry we perturb the variable by +-h, run the rest of the network forward, and take
the centred difference

    dL/dx  ~  (L(x + h) - L(x - h)) / (2 h),     error O(h^2),

and compare with CS231n's relative error  |ours - num| / max(1e-8, |ours| + |num|).
Centred differences with h = 1e-5 in float64 are accurate to about 1e-10; float32
would drown them in roundoff, so the checker insists on float64.

    >>> report = check(net, X, G)
    >>> print(report)            # one line per stage, the worst entry of each
    >>> report.ok                # every stage below tol
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from . import _checks
from .network import MLP


def rel_error_map(ours, theirs):
    """|a - b| / max(1e-8, |a| + |b|), elementwise (CS231n's relative error)."""
    ours, theirs = np.asarray(ours, dtype=float), np.asarray(theirs, dtype=float)
    return np.abs(ours - theirs) / np.maximum(1e-8, np.abs(ours) + np.abs(theirs))


def rel_error(ours, theirs):
    """The worst entry of :func:`rel_error_map`."""
    return float(np.max(rel_error_map(ours, theirs)))


def numerical_gradient(f, x, h=1e-5):
    """Centred-difference gradient of the scalar sum(f()) with respect to the array x.

    ``x`` is perturbed in place, one entry at a time, and restored exactly afterwards;
    ``f`` takes no argument, reads ``x`` and returns an array. We subtract f(x + h) and
    f(x - h) entry by entry *before* summing: entries that the perturbation does not
    reach cancel exactly, so the roundoff is that of the entries that moved, not that of
    the whole sum (which would cost ~1e-11 absolute and fail small gradients).
    """
    if isinstance(x, np.ma.MaskedArray) or not isinstance(x, np.ndarray):
        raise TypeError(f"x: expected a NumPy float array (perturbed in place), got "
                        f"{'a masked array' if isinstance(x, np.ma.MaskedArray) else _checks.describe(x)}")
    if x.dtype.kind != "f":
        # x + h would be truncated back into an integer array: refuse rather than guess
        raise TypeError(f"x: expected a float array (x[i] +- h must be stored), got dtype {x.dtype}; "
                        f"pass x.astype(float) and let f read that array")
    if not x.flags.writeable:
        raise ValueError("x: expected a writeable array (perturbed in place), got a read-only one")
    if not callable(f):
        raise TypeError(f"f: expected a function of no arguments that returns an array, got "
                        f"{_checks.describe(f)}")
    h = _checks.real("h", h, low=0.0, low_inclusive=False)
    grad = np.zeros_like(x, dtype=float)
    for idx in np.ndindex(*x.shape):
        old = x[idx]
        try:
            x[idx] = old + h
            f_plus = _numbers(f())
            x[idx] = old - h
            f_minus = _numbers(f())
        finally:
            x[idx] = old                  # restored exactly, even when f raises
        grad[idx] = np.sum(f_plus - f_minus) / (2.0 * h)
    if not np.isfinite(grad).all():
        if not np.isfinite(_numbers(f())).all():       # at x itself: f's own values
            raise ValueError("f: expected a function whose values are finite, got NaN/inf at x itself")
        raise ValueError(f"h: expected a step for which f(x +- h) stays finite, got h = {h:g} "
                         f"(x up to {float(np.abs(x).max()):.3g})")
    return grad


def _numbers(value):
    """What f returned, as an array of numbers in its own dtype (extended precision stays so);
    None, strings and objects are refused."""
    try:
        out = np.asarray(value)
    except (TypeError, ValueError):
        out = None
    if out is None or out.dtype.kind not in "biuf":
        raise TypeError(f"f: expected a function that returns an array of numbers, got "
                        f"{_checks.describe(value)}")
    return out


@dataclass
class StageCheck:
    """The comparison for one stage: its worst entry, ours against the numerical value."""
    stage: str
    shape: tuple
    rel_error: float
    index: tuple
    ours: float
    numerical: float

    def __str__(self):
        return (f"{self.stage:>6} {str(self.shape):>10}  rel_error {self.rel_error:9.2e}  "
                f"worst at {self.index}: ours {self.ours:+.10e}, numerical {self.numerical:+.10e}")


@dataclass
class Report:
    """The result of :func:`check`: one :class:`StageCheck` per backward stage."""
    stages: list
    tol: float

    @property
    def max_rel_error(self):
        return max(s.rel_error for s in self.stages)

    @property
    def ok(self):
        return self.max_rel_error < self.tol

    @property
    def worst(self):
        return max(self.stages, key=lambda s: s.rel_error)

    def __str__(self):
        lines = [str(s) for s in self.stages]
        verdict = "PASS" if self.ok else f"FAIL: worst stage {self.worst.stage}"
        lines.append(f"max rel_error {self.max_rel_error:.2e} (tol {self.tol:.0e}): {verdict}")
        return "\n".join(lines)


def check(net, X, G, h=1e-5, tol=1e-7):
    """Check every stage of ``net.backward(net.forward(X), G)`` against finite differences.

    Parameters
    ----------
    net : MLP with dtype float64
    X : array_like, shape (n, d)
    G : array_like, shape (n, K) or (K,)
    h : float          step of the centred difference
    tol : float        a stage passes when its rel_error is below tol

    Returns
    -------
    Report, listing for each stage (in backward order) the worst relative error, where
    it is, and both values there. The network itself is left untouched.
    """
    if not isinstance(net, MLP):
        raise TypeError(f"net: expected an MLP, got {_checks.describe(net)}")
    if net.dtype != np.float64:
        raise ValueError(f"net: gradient checking needs a float64 network, got dtype {net.dtype} "
                         f"(float32 roundoff swamps a centred difference)")
    h = _checks.real("h", h, low=0.0, low_inclusive=False)
    tol = _checks.real("tol", tol, low=0.0, low_inclusive=False)
    record = net.forward(X)
    n, K = record.output.shape
    G = np.array(_checks.rows_or_vector("G", G, net.dtype, n, K))
    back = net.backward(record, G)
    L = net.depth

    # The numerical side runs in extended precision (np.longdouble: 80-bit on x86, eps ~1e-19)
    # on a copy, so that its roundoff, ~eps * |O| / h, is far below the float64 answer we test.
    ext = np.longdouble
    net = net.copy()                      # we perturb its parameters in place
    net.params = {k: v.astype(ext) for k, v in net.params.items()}
    G = G.astype(ext)
    X_ext = record.X.astype(ext)

    def loss(out):
        return G * out                    # L = sum(G * O), summed by numerical_gradient

    results = []
    for name, ours in back.stages.items():
        if name == "dout":
            x = record.a[L].astype(ext)
            num = numerical_gradient(lambda: loss(x), x, h)
        elif name[:2] in ("dW", "db"):
            x = net.params[name[1:]]       # perturbed in place, restored by numerical_gradient
            num = numerical_gradient(lambda: loss(net.forward_from(1, X_ext)), x, h)
        elif name[:2] == "dz":
            l = int(name[2:])
            x = record.z[l].astype(ext)
            act = net.act(l)
            num = numerical_gradient(lambda: loss(net.forward_from(l + 1, act.f(x))), x, h)
        elif name[:2] == "da":
            l = int(name[2:])
            x = record.a[l].astype(ext)
            num = numerical_gradient(lambda: loss(net.forward_from(l + 1, x)), x, h)
        else:  # pragma: no cover - backward names no other stage
            raise AssertionError(f"unknown stage {name}")
        errs = rel_error_map(ours, num)
        worst = tuple(int(i) for i in np.unravel_index(int(np.argmax(errs)), errs.shape))
        results.append(StageCheck(stage=name, shape=tuple(ours.shape), rel_error=float(errs[worst]),
                                  index=worst, ours=float(ours[worst]), numerical=float(num[worst])))
    return Report(stages=results, tol=tol)
