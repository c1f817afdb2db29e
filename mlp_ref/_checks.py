"""Argument checks shared by every public entry point.

Every failure raises ``ValueError`` or ``TypeError`` whose message starts with the
argument's name, says what was expected and what came, so that a student who passes
a wrong shape learns which argument to fix instead of reading a NumPy broadcasting
error from deep inside the code.
"""
from __future__ import annotations

import numbers

import numpy as np


def describe(x):
    """A short description of what came: type, and shape/dtype for arrays."""
    if isinstance(x, np.ndarray):
        return f"array of shape {x.shape} and dtype {x.dtype}"
    return f"{type(x).__name__} {x!r}" if np.ndim(x) == 0 else f"{type(x).__name__}"


def as_array(name, x, dtype):
    """``x`` as a numeric ndarray of ``dtype``, finite everywhere."""
    if isinstance(x, (str, bytes)) or x is None:
        raise TypeError(f"{name}: expected a numeric array, got {describe(x)}")
    try:
        arr = np.asarray(x)
    except Exception as exc:  # ragged lists and the like
        raise TypeError(f"{name}: expected a numeric array, got {describe(x)} ({exc})") from None
    if arr.dtype == object or not (np.issubdtype(arr.dtype, np.number)
                                   or arr.dtype == np.bool_):
        raise TypeError(f"{name}: expected a numeric array, got {describe(x)}")
    if np.iscomplexobj(arr):
        raise TypeError(f"{name}: expected real numbers, got {describe(arr)}")
    arr = arr.astype(dtype, copy=False)
    if not np.all(np.isfinite(arr)):
        bad = np.argwhere(~np.isfinite(arr))[0]
        where = tuple(int(i) for i in bad)
        raise ValueError(f"{name}: expected finite values, got {arr[where]} at index {where}")
    return arr


def matrix(name, x, dtype, width=None, width_name="columns"):
    """A finite 2-D array of shape (n, width) with n >= 1."""
    arr = as_array(name, x, dtype)
    if arr.ndim != 2:
        raise ValueError(f"{name}: expected a 2-D array of shape (n, {width if width is not None else 'd'}), "
                         f"got {arr.ndim}-D array of shape {arr.shape}")
    if arr.shape[0] < 1:
        raise ValueError(f"{name}: expected at least one row, got shape {arr.shape}")
    if width is not None and arr.shape[1] != width:
        raise ValueError(f"{name}: expected {width} {width_name} (shape (n, {width})), "
                         f"got shape {arr.shape}")
    return arr


def rows_or_vector(name, x, dtype, n, K):
    """An (n, K) array, or a (K,) vector broadcast (read-only) to every one of the n rows."""
    arr = as_array(name, x, dtype)
    if arr.shape == (K,):
        return np.broadcast_to(arr, (n, K))
    if arr.shape != (n, K):
        raise ValueError(f"{name}: expected shape ({n}, {K}) or ({K},), got shape {arr.shape}")
    return arr


def positive_int(name, x, minimum=1):
    if isinstance(x, (bool, np.bool_)) or not isinstance(x, numbers.Integral):
        raise TypeError(f"{name}: expected a whole number >= {minimum}, got {describe(x)}")
    if x < minimum:
        raise ValueError(f"{name}: expected a whole number >= {minimum}, got {x}")
    return int(x)


def real(name, x, *, low=None, low_inclusive=True):
    """A finite real number, optionally bounded below."""
    if isinstance(x, (bool, np.bool_)) or not isinstance(x, numbers.Real):
        raise TypeError(f"{name}: expected a real number, got {describe(x)}")
    x = float(x)
    if not np.isfinite(x):
        raise ValueError(f"{name}: expected a finite number, got {x}")
    if low is not None:
        if (x < low) if low_inclusive else (x <= low):
            op = ">=" if low_inclusive else ">"
            raise ValueError(f"{name}: expected a number {op} {low}, got {x}")
    return x


def param_dict(name, D, shapes, dtype, require_all=True):
    """A dict with exactly the keys of ``shapes``, each a finite array of that shape.

    Returns a new dict of arrays converted to ``dtype``; nothing of ``D`` is modified.
    """
    if not isinstance(D, dict):
        raise TypeError(f"{name}: expected a dict like params with keys {list(shapes)}, "
                        f"got {describe(D)}")
    unknown = [k for k in D if k not in shapes]
    if unknown:
        raise ValueError(f"{name}: unknown keys {unknown}; expected keys {list(shapes)}")
    missing = [k for k in shapes if k not in D]
    if require_all and missing:
        raise ValueError(f"{name}: missing keys {missing}; expected keys {list(shapes)}")
    out = {}
    for key in D:
        arr = as_array(f"{name}[{key!r}]", D[key], dtype)
        if arr.shape != shapes[key]:
            raise ValueError(f"{name}[{key!r}]: expected shape {shapes[key]}, got shape {arr.shape}")
        out[key] = arr
    return out
