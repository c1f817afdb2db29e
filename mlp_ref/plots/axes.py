"""Log axes for drifts that span twenty decades, shared by the drift figures.

A drift of exactly 0.0 has no place on a log axis: it is drawn on an "exactly 0" row at
:data:`ZERO_FLOOR`, below a shaded band of float64 round-off (up to the measurements'
``fits.ROUNDOFF``). A drift inside the band is round-off, and its value is the last bits of one
CPU's kernels (1e-17 here, 3e-17 under another BLAS): it is drawn on the band's own row,
:data:`ROUNDOFF_ROW`, the same on every machine, not at its value (``placed``). A broken axis puts
the row of zeros and the band in a narrow strip beside the decades where the drifting rules live.
"""
from __future__ import annotations

import matplotlib
import numpy as np

from ..measurements.fits import ROUNDOFF
from ..measurements.rules import RULES
from .style import power, sci

#: Where a drift of exactly 0.0 is drawn on a log axis, and the top of the round-off band
#: (``fits.ROUNDOFF``): a value in the band is float64 noise, not a drift.
ZERO_FLOOR = 1e-19
#: Where a drift in the round-off band (0 < |drift| <= ROUNDOFF) is drawn: one row in the band.
ROUNDOFF_ROW = 1e-15
#: ROUNDOFF as text, 10⁻¹²
ROUNDOFF_TEXT = power(int(np.log10(ROUNDOFF)))


def placed(values, exact):
    """|values| as a log axis draws them: exact zeros on the "exactly 0" row (ZERO_FLOOR), values
    in the round-off band on its row (ROUNDOFF_ROW), everything else where it is. ``exact``: the
    zeros are an identity of the rule (``rules.Rule.exact``); else a 0.0 is round-off that
    happened to cancel on this CPU, and is drawn on the round-off row."""
    values = np.abs(np.asarray(values, dtype=float))
    zero = ZERO_FLOOR if exact else ROUNDOFF_ROW
    return np.where(values == 0.0, zero, np.where(values <= ROUNDOFF, ROUNDOFF_ROW, values))


def drift_text(value, held):
    """|value| as a figure writes it: "0 exactly" (only when ``held``, the rule's zero an
    identity: see ``placed``), "round-off" in the band (its digits are one CPU's), else its value."""
    value = abs(float(value))
    if value == 0.0 and held:
        return "0 exactly"
    return f"round-off (\u2264 {ROUNDOFF_TEXT})" if value <= ROUNDOFF else sci(value)


def exact(rule):
    """Whether the rule named ``rule`` drifts by exactly 0.0 by an identity (``Rule.exact``)."""
    return rule in RULES and RULES[rule].exact


def roundoff_band(ax, floor=ZERO_FLOOR, horizontal=True, label=True):
    """Shade |drift| <= ROUNDOFF as float64 round-off, and mark the row of exact zeros (dotted)
    and the row round-off is drawn on (dashed)."""
    span, line = (ax.axhspan, ax.axhline) if horizontal else (ax.axvspan, ax.axvline)
    span(floor / 5, ROUNDOFF, color="0.93", zorder=0, lw=0)
    line(floor, color="0.6", lw=0.8, ls=":", zorder=0)
    line(ROUNDOFF_ROW, color="0.75", lw=0.8, ls="--", zorder=0)
    if not label:
        return
    kw = {"fontsize": 10, "color": "0.35", "zorder": 1}
    if horizontal:
        trans = ax.get_yaxis_transform()
        ax.text(0.99, ROUNDOFF / 30, f"round-off: \u2264 {ROUNDOFF_TEXT}",
                transform=trans, ha="right", va="top", **kw)
        ax.text(0.99, floor * 2.5, "exactly 0", transform=trans, ha="right", va="bottom", **kw)
    else:
        trans = ax.get_xaxis_transform()
        ax.text(ROUNDOFF / 30, 0.99, f"round-off: \u2264 {ROUNDOFF_TEXT}",
                transform=trans, ha="right", va="top", rotation=90, **kw)
        ax.text(floor * 2.5, 0.99, "exactly 0", transform=trans, ha="left", va="top", rotation=90,
                **kw)


def decade_ticks(ax, lo, hi, every=3, axis="y"):
    """Log ticks every ``every`` decades from 10^lo to 10^hi, as 10^k; when the axis reaches
    down to the "exactly 0" row (10^lo within a decade of ZERO_FLOOR), that row is ticked "0",
    so that it does not read as the decade it is drawn at."""
    ticks = [10.0 ** k for k in range(lo, hi + 1, every)]
    labels = [power(k) for k in range(lo, hi + 1, every)]
    if 10.0 ** lo <= ZERO_FLOOR * 10:
        ticks, labels = [ZERO_FLOOR, *ticks], ["0", *labels]
    (ax.set_yticks if axis == "y" else ax.set_xticks)(ticks, labels)
    (ax.yaxis if axis == "y" else ax.xaxis).set_minor_locator(matplotlib.ticker.NullLocator())


def strip(ax, horizontal=True):
    """The narrow part of a broken log axis that holds what does not drift: exact zeros (on
    the "exactly 0" row) and round-off (the shaded band up to 1e-12)."""
    roundoff_band(ax, horizontal=horizontal, label=False)
    lim = (ZERO_FLOOR / 5, ROUNDOFF * 20)
    kw = {"fontsize": 10, "color": "0.3"}
    if horizontal:
        ax.set_yscale("log")
        ax.set_ylim(*lim)
        decade_ticks(ax, -18, -12, every=6)
        ax.text(0.99, 0.93, f"round-off (\u2264 {ROUNDOFF_TEXT})", transform=ax.transAxes, ha="right",
                va="top", **kw)
        ax.text(0.99, ZERO_FLOOR * 2.5, "exactly 0", transform=ax.get_yaxis_transform(),
                ha="right", va="bottom", **kw)
    else:
        ax.set_xscale("log")
        ax.set_xlim(*lim)
        decade_ticks(ax, -18, -12, every=6, axis="x")
        ax.text(0.93, 0.02, f"round-off (\u2264 {ROUNDOFF_TEXT})", transform=ax.transAxes, ha="right",
                va="bottom", rotation=90, **kw)
        ax.text(ZERO_FLOOR * 2.5, 0.02, "exactly 0", transform=ax.get_xaxis_transform(),
                ha="left", va="bottom", rotation=90, **kw)


def join_broken(big, narrow, horizontal=True):
    """Join the two parts of a broken axis: hide the spines where they meet, draw // marks."""
    kw = {"marker": [(-1, -0.5), (1, 0.5)], "markersize": 11, "linestyle": "none",
          "color": "0.2", "mec": "0.2", "mew": 1, "clip_on": False}
    if horizontal:                          # big above the narrow strip
        big.spines["bottom"].set_visible(False)
        big.tick_params(axis="x", which="both", bottom=False, labelbottom=False)
        big.plot([0], [0], transform=big.transAxes, **kw)
        narrow.plot([0], [1], transform=narrow.transAxes, **kw)
    else:                                   # the narrow strip left of big
        big.spines["left"].set_visible(False)
        big.tick_params(axis="y", which="both", left=False, labelleft=False)
        narrow.plot([1], [0], transform=narrow.transAxes, **kw)
        big.plot([0], [0], transform=big.transAxes, **kw)


def drifting_range(values):
    """Log limits (10^a, 10^b) around every value above round-off."""
    v = np.concatenate([np.ravel(x) for x in values])
    v = v[v > ROUNDOFF]
    return 10.0 ** np.floor(np.log10(v.min())), 10.0 ** np.ceil(np.log10(v.max()))


def guide(ax, lrs, drifts, slope, text, below=4.0):
    """A grey dashed line of the given log-log slope over ``lrs``, ``below`` times under the
    drifts it guides. It is anchored at the first of ``drifts`` above round-off, carried to
    lrs[0] along the slope: a drift in the band is one CPU's last bits, and would move the line."""
    drifts = np.asarray(drifts, dtype=float)
    first = int(np.argmax(drifts > ROUNDOFF))
    anchor = drifts[first] * (lrs[0] / lrs[first]) ** slope
    x = np.array([lrs[0], lrs[-1]])
    y = anchor / below * (x / lrs[0]) ** slope
    ax.loglog(x, y, ls="--", color="0.55", lw=1.2, zorder=2)
    ax.text(x[-1] * 1.3, y[-1], text, ha="left", va="center", fontsize=10, color="0.4")


def theta_plane(ax, t1, t2, title):
    """The (theta_1, theta_2) plane of out1's contours, on the grid t1 x t2, to scale."""
    ax.set_xlim(t1[0], t1[-1])
    ax.set_ylim(t2[0], t2[-1])
    ax.set_aspect("equal")
    ax.set_xlabel("\u03b8\u2081")
    ax.set_ylabel("\u03b8\u2082")
    ax.set_title(title)
