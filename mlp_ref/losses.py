"""Losses used by the seed, each returning its value and G = dL/dout.

Both are means over all n*K entries, like TensorFlow's ``reduce_mean``; a mean rather
than a sum only rescales G (and so the learning rate) by 1/(n*K).
"""
from __future__ import annotations

import numpy as np

from .boundary.checks import BadValue, check_array, check_matrix, check_rows


def _pair(out, y):
    # float32 stays float32 (a float32 network's output); everything else becomes float64
    dtype = np.float32 if getattr(out, "dtype", None) == np.float32 else np.float64
    out = check_matrix("out", out, dtype, symbol="K")
    y = check_array("y", y, out.dtype)
    if y.shape != out.shape:
        raise BadValue(f"y: expected the shape of out {out.shape}, got shape {y.shape}", argument="y")
    return out, y


def _check_finite_loss(out, y, r):
    """Refuse out, y whose residual or its square overflows (the loss would be inf or NaN).
    The error names whichever of the two holds the larger values (both, when they tie)."""
    with np.errstate(over="ignore", invalid="ignore"):
        bad = not np.isfinite(np.sum(r * r))
    if bad:
        big_out, big_y = float(np.abs(out).max()), float(np.abs(y).max())
        blamed = ["out", "y"] if big_y == big_out else ["y"] if big_y > big_out else ["out"]
        size = " and ".join(f"|{n}|" for n in blamed)
        top = np.sqrt(np.finfo(out.dtype).max / r.size) / 2
        raise BadValue(f"{' and '.join(blamed)}: expected values for which the squared error "
                       f"stays finite in {out.dtype} ({size} below about {top:.3g} here), got "
                       f"{size} up to {max(big_out, big_y):.3g}", argument=blamed[0])


def mse(out, y):
    """L = mean((out - y)^2), the seed's ``tf.reduce_mean(tf.square(out - y))``.

    Parameters
    ----------
    out, y : array_like, shape (n, K)

    Returns
    -------
    value : float
    G : ndarray, shape (n, K)        dL/dout = 2 (out - y) / (n K)
    """
    out, y = _pair(out, y)
    r = out - y
    _check_finite_loss(out, y, r)
    return float(np.mean(r * r)), (2.0 / r.size) * r


def masked_mse(out, y, mask):
    """L = mean((mask * out - y)^2), exactly the answer's ``loss2``.

    Note that the answer masks the output but not the target: a masked column still
    contributes y^2 to the value, a constant that moves nothing. Its gradient is

        G = dL/dout = 2 mask (mask * out - y) / (n K),

    so wherever mask is 0 the column of G is exactly zero.

    Parameters
    ----------
    out, y : array_like, shape (n, K)
    mask : array_like of 0/1, shape (n, K) or (K,)
    """
    out, y = _pair(out, y)
    mask = check_rows("mask", mask, out.dtype, *out.shape, mask=True)
    r = mask * out - y
    _check_finite_loss(out, y, r)
    return float(np.mean(r * r)), (2.0 / r.size) * mask * r
