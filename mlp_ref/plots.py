"""One function per figure. Each takes results from ``experiments`` (and an optional
``ax``) and returns the matplotlib Figure. This is the only module importing matplotlib.

We build figures with the object-oriented ``matplotlib.figure.Figure`` rather than
pyplot: no global state, no display needed, and nothing left open between figures.
"""
from __future__ import annotations

import numpy as np
from matplotlib.figure import Figure

#: One colour per fix, the same in every figure.
PALETTE = {
    "naive": "#d62728",
    "masked": "#ff7f0e",
    "freeze": "#2ca02c",
    "heads": "#17becf",
    "towers": "#8c564b",
    "project": "#1f77b4",
    "project+restore": "#9467bd",
    "penalty": "#e377c2",
    "span": "#7f7f7f",
}
OUT_COLOURS = {"out1": "#444444", "out2": "#1f77b4"}

STYLE = {"font.size": 12, "axes.titlesize": 13, "axes.labelsize": 12, "legend.fontsize": 10}


def new_figure(width=10.0, height=5.0, dpi=110):
    """A Figure at slide size: 10 in x 110 dpi = 1100 px wide."""
    return Figure(figsize=(width, height), dpi=dpi, layout="constrained")


def seed_problem(effect, ax=None):
    """out1 and out2 per sample before and after a naive step with G = [0, -1].

    ``effect`` is ``experiments.naive_step_effect(...)``.
    """
    fig, axes = (new_figure(), None) if ax is None else (ax.figure, [ax])
    if axes is None:
        axes = fig.subplots(1, 2)
    delta = effect["delta"]
    n = delta.shape[0]
    idx = np.arange(n)
    for k, (name, colour) in enumerate(OUT_COLOURS.items()):
        if k >= len(axes):
            break
        a = axes[k]
        a.bar(idx, delta[:, k], color=colour)
        a.axhline(0.0, color="black", linewidth=0.8)
        a.set_xlabel("sample")
        a.set_ylabel(f"change of {name}")
        a.set_xticks(idx)
    axes[0].set_title("out1 was not asked to move - and moves")
    if len(axes) > 1:
        axes[1].set_title(f"out2 rises, as G = [0, -1] asks (lr = {effect['lr']})")
    return fig
