"""The projection-cost figure: time and peak memory of the Gram projection against the dense
Jacobian, as the number of constraints grows. Imports matplotlib; ``import mlp_ref`` never
imports this module.

The figure is drawn from measurements saved as JSON by ``python -m mlp_ref bench --json PATH``
(committed as ``figures/data/projection_cost.json``), never by timing anything while drawing:
the same JSON gives the same PNG, byte for byte (save with ``metadata=PNG_METADATA``).
"""
from __future__ import annotations

import json

import numpy as np
from matplotlib.figure import Figure

from .bench import projection_cost_data

COLOURS = {"gram": "#1f77b4", "dense": "#7f7f7f"}      # the project colour; grey for the dense way
DATA_PATH = "figures/data/projection_cost.json"
PNG_METADATA = {"Software": None}


def load(path=DATA_PATH):
    """The results of ``bench.run`` saved by ``bench --json``."""
    with open(path) as fh:
        return json.load(fh)


def _takeaway(d):
    dense = ~np.isnan(d["dense_s"])
    if not dense.any():
        return "Gram projection: cost against the number of constraints (dense Jacobian too large to build)"
    i = np.flatnonzero(dense)[-1]
    speed = d["dense_s"][i] / d["gram_s"][i]
    memory = d["dense_peak_bytes"][i] / d["gram_peak_bytes"][i]
    return (f"Never build J: at n = {int(d['n'][i])} constraints the Gram projection is "
            f"{speed:.0f}x faster and needs {memory:.0f}x less memory than a dense Jacobian")


def projection_cost(results, ax=None, dtype="float64"):
    """Time and peak memory of ``fixes.project`` (Gram) and of the dense-Jacobian projection
    against the number of constrained rows n, log-log.

    results : the dict of ``bench.run`` (or ``load()``)
    ax      : None for a new two-panel figure; one Axes (time only) or two (time, memory)
    Returns the Figure.
    """
    d = projection_cost_data(results, dtype)
    if ax is None:
        fig = Figure(figsize=(10, 5), dpi=110, layout="constrained")
        axes = list(fig.subplots(1, 2))
    else:
        axes = list(ax) if np.iterable(ax) else [ax]
        fig = axes[0].figure
    n = d["n"]
    time_ax = axes[0]
    time_ax.plot(n, d["dense_s"] * 1e3, "s-", color=COLOURS["dense"], label="dense J, then solve")
    time_ax.plot(n, d["gram_s"] * 1e3, "o-", color=COLOURS["gram"], label="Gram (fixes.project)")
    time_ax.axhline(d["step_s"] * 1e3, color="black", linestyle=":", linewidth=1,
                    label="one training step")
    time_ax.set_ylabel("time per projection (ms)")
    if len(axes) > 1:
        mem_ax = axes[1]
        mib = 2.0**20
        mem_ax.plot(n, d["dense_peak_bytes"] / mib, "s-", color=COLOURS["dense"],
                    label="dense J, then solve")
        mem_ax.plot(n, d["dense_bytes_estimate"] / mib, ":", color=COLOURS["dense"],
                    label="J alone (n P numbers)")
        mem_ax.plot(n, d["gram_peak_bytes"] / mib, "o-", color=COLOURS["gram"],
                    label="Gram (fixes.project)")
        mem_ax.set_ylabel("peak memory (MiB, tracemalloc)")
    for a in axes:
        a.set_xscale("log")
        a.set_yscale("log")
        a.set_xlabel("constrained rows n (output 0 held on n samples)")
        a.set_xticks(n)
        a.set_xticklabels([str(int(v)) for v in n])
        a.minorticks_off()
        a.grid(True, which="major", alpha=0.3)
        a.legend(loc="upper left")
    sizes = "-".join(str(s) for s in d["sizes"])
    fig.suptitle(_takeaway(d) + f"\n({sizes} tanh network, P = {d['n_params']:,}, {d['dtype']})")
    return fig
