"""The optimizer's figure (optimizer_order.png): Adam holding out1 by projection, in either
order, from ``mlp_ref.measurements.optimizers``.
"""
from __future__ import annotations

import numpy as np

from ..measurements.optimizers import OPTIMIZER_ORDERS
from .axes import guide
from .style import MARKERS, PALETTE, SETUP_LABELS, new_figure, styled, take_axes


_ORDER_STYLE = {"project gradient, then Adam": {"ls": "--", "mfc": "white"},
                "Adam, then project update": {"ls": "-"}}


@styled
def optimizer_order(result, axes=None):
    """Adam holding out1 by projection, in both orders.

    ``result`` is ``optimizers.optimizer_order(...)``. Three panels: the one-step drift of
    out1 on the batch against lr (log-log, with fitted slopes), the drift over many steps
    (log) and out2's gain over those steps. Both curves are projection (its colour): solid
    is the right order (project Adam's update), dashed the pitfall. ``axes``: three Axes.
    """
    def make():
        fig = new_figure(14.0, 5.4)
        return fig, fig.subplots(1, 3)
    fig, axes = take_axes(axes, 3, make)
    lrs, steps = result["lrs"], result["steps"]
    colour = PALETTE["project"]
    for name in OPTIMIZER_ORDERS:
        r, style = result[name], _ORDER_STYLE.get(name, {})
        slope = r["slope"]
        kw = {"color": colour, "marker": MARKERS["project"], **style}
        axes[0].loglog(lrs, r["one_step"], label=name if slope is None else f"{name}: slope {slope:.2f}", ms=8, **kw)
        every = max(len(steps) // 8, 1)
        axes[1].semilogy(steps[1:], r["drift"][1:], markevery=every, label=name, **kw)
        axes[2].plot(steps, r["gain"], markevery=every, label=name, **kw)
    small = lrs <= result["slope_max_lr"]
    wrong, right = list(OPTIMIZER_ORDERS)
    guide(axes[0], lrs[small], np.asarray(result[wrong]["one_step"])[small], 1, "\u221d lr")
    guide(axes[0], lrs[small], np.asarray(result[right]["one_step"])[small], 2, "\u221d lr\u00b2")
    axes[0].set_xlabel("Adam's lr (log)")
    axes[0].set_ylabel("max |\u0394out1| on the batch (log)")
    axes[0].set_title("one Adam step")
    axes[0].legend(loc="upper left", fontsize=10)
    axes[1].set_xlabel("step")
    axes[1].set_ylabel("max |out1 \u2212 out1 at start| (log)")
    axes[1].set_title(f"{len(steps) - 1} Adam steps, lr = {result['lr']:g}")
    axes[2].set_xlabel("step")
    axes[2].set_ylabel("mean (out2 \u2212 out2 at start)")
    axes[2].set_title("out2 gain: both learn")
    fig.suptitle("With Adam, project the update, not the gradient: Adam rescales each coordinate, "
                 "so a projected\ngradient leaves the null space (drift O(lr)); projecting "
                 "Adam's own update keeps O(lr\u00b2)")
    setup = SETUP_LABELS.get(result["setup"], result["setup"])
    fig.supxlabel(f"{setup}; projection onto the null space of out1's Jacobian on the batch; "
                  "G = [0, \u22121]", fontsize=11, style="italic")
    return fig
