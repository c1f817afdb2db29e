"""The order of a drift in lr, measured: one log-log slope fit, and its reading.

A drift that is O(lr^k) at small lr lies on a line of slope k on log-log axes; we fit that
line by least squares where the asymptote holds, and call the drift by what we measured.
"""
from __future__ import annotations

import numpy as np

#: Below this, a drift of out1 (whose values are ~0.05 to ~3 here) is float64 round-off; it is
#: also ``fixes.restore``'s default tolerance.
ROUNDOFF = 1e-12


def loglog_slope(lrs, values, max_lr=None):
    """The slope k of log(values) = k log(lr) + c, fitted by least squares over lr <= max_lr.

    A drift that is O(lr^k) at small lr has slope k there; fit where the asymptote holds.
    """
    lrs, values = np.asarray(lrs, dtype=float), np.asarray(values, dtype=float)
    use = lrs <= (np.inf if max_lr is None else max_lr)
    if use.sum() < 2 or np.any(values[use] <= 0.0):
        raise ValueError(f"values: expected at least two positive values with lr <= {max_lr}, "
                         f"got {values[use]}")
    return float(np.polyfit(np.log(lrs[use]), np.log(values[use]), 1)[0])


def drift_order(lrs, drift, max_lr=1e-3, roundoff=ROUNDOFF):
    """How a drift scales with lr, as measured: ("exactly 0", None), ("round-off", None) when
    every value is <= ``roundoff``, or ("O(lr^k)", slope) with k the rounded fitted slope."""
    drift = np.asarray(drift, dtype=float)
    if np.all(drift == 0.0):
        return "exactly 0", None
    if np.max(drift) <= roundoff:
        return "round-off", None
    slope = loglog_slope(lrs, drift, max_lr)
    k = int(round(slope))
    return ("O(lr)" if k == 1 else f"O(lr^{k})"), slope
