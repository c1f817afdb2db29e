"""The field's figures, from ``measurements.permuted`` and ``measurements.scale``: the accuracy
matrix R of every method as a heat map (field_accuracy.png), ACC against BWT (field_acc_bwt.png),
and the scale ladder of the exact and the basis routes (scale_cost.png)."""
from __future__ import annotations

import numpy as np

from .style import PALETTE, new_figure, styled, take_axes

#: The field's methods: colour, marker, label (OGD-style projection in project's colours).
FIELD = {"naive": (PALETTE["naive"], "o", "naive"),
         "ewc": (PALETTE["penalty"], "v", "EWC"),
         "agem": (PALETTE["masked"], "D", "A-GEM"),
         "gpm": (PALETTE["span"], "h", "GPM"),
         "project": (PALETTE["project"], "^", "project (OGD)"),
         "joint": (PALETTE["freeze"], "s", "joint (upper bound)")}


def _style(name):
    return FIELD.get(name, ("0.3", "o", name))


@styled
def field_accuracy(result, axes=None):
    """R[i, j], the accuracy on task j after training task i, one heat map per method.

    result : ``permuted.run()``'s dict;  axes : one Axes per method, or None.  Returns the Figure.
    """
    methods = list(result["methods"])

    def make():
        fig = new_figure(height=4.2)
        return fig, fig.subplots(1, len(methods), sharey=True)
    fig, axs = take_axes(axes, len(methods), make)
    image = None
    for ax, name in zip(axs, methods):
        r = result["methods"][name]
        R = np.asarray(r["R"])
        image = ax.imshow(R, vmin=0, vmax=1, cmap="viridis")
        for (i, j), v in np.ndenumerate(R):
            ax.text(j, i, f"{100 * v:.0f}", ha="center", va="center", fontsize=8,
                    color="black" if v > 0.55 else "white")
        ax.set_title(f"{_style(name)[2]}\nACC {r['ACC']:.2f}{_spread(r, 'ACC')}\n"
                     f"BWT {r['BWT']:+.2f}{_spread(r, 'BWT')}".replace("-", "\u2212"), fontsize=10)
        ticks = range(R.shape[0])
        ax.set_xticks(ticks, [str(t + 1) for t in ticks])
        ax.set_yticks(ticks, [str(t + 1) for t in ticks])
        ax.set_xlabel("tested on task j")
    axs[0].set_ylabel("after training task i")
    fig.colorbar(image, ax=axs, shrink=0.8, label="test accuracy")
    s = result["setup"]
    seeds = s.get("seeds", 1)
    over = f", the mean over {seeds} seeds (± their std)" if seeds > 1 else ""
    fig.suptitle(f"Permuted digits, {s['tasks']} tasks, one shared head: R[i, j] in percent{over}")
    return fig


def _spread(r, key):
    """' ± std' of a summary's ``key``, or nothing (one seed)."""
    std = r.get(f"{key}_std")
    return "" if std is None else f" ± {std:.2f}"


@styled
def field_acc_bwt(result, axes=None):
    """ACC (mean of R's last row) against BWT (mean change of each earlier task since it was
    learnt), one point per method; over several seeds the means, with bars of one std each way."""
    def make():
        fig = new_figure(width=10.0, height=5.6)
        return fig, fig.subplots(1, 1)
    fig, (ax,) = take_axes(axes, 1, make)
    for name, r in result["methods"].items():
        colour, marker, label = _style(name)
        if r.get("ACC_std") is not None:
            ax.errorbar(r["BWT"], r["ACC"], xerr=r["BWT_std"], yerr=r["ACC_std"], color=colour, lw=1.2,
                        capsize=3, zorder=2)
        ax.scatter(r["BWT"], r["ACC"], s=90, color=colour, marker=marker, edgecolor="black",
                   linewidth=0.5, zorder=3, label=label)
    ax.axvline(0.0, color="0.5", ls=":", lw=1)
    ax.set_xlabel("BWT: mean change of earlier tasks' accuracy (0: no forgetting)")
    ax.set_ylabel("ACC: mean accuracy after the last task")
    ax.set_ylim(0, 1)
    ax.grid(True, alpha=0.3)
    ax.legend(loc="lower right", fontsize=10)
    seeds = result["setup"].get("seeds", 1)
    ax.set_title("Permuted digits: up and to the right is better"
                 + (f" ({seeds} seeds: mean ± std)" if seeds > 1 else ""))
    return fig


#: The routes of the ladder: colour and marker.
_ROUTES = {"exact": (PALETTE["project"], "^"), "gpm 0.9": ("#E69F00", "o"),
           "gpm 0.99": ("#999999", "h"), "gpm 0.999": ("#8C6D31", "D"), "gpm 1.0": ("#000000", "s")}


@styled
def scale_cost(ladder, axes=None):
    """The scale ladder: time a step, peak memory of a step, and old and new accuracy, against
    the constraints n = 5 m, for the exact route and GPM at each threshold.

    ladder : ``scale.ladder()``'s dict or ``scale.load()``;  axes : three Axes, or None."""
    def make():
        fig = new_figure(width=13.0, height=5.0)
        return fig, fig.subplots(1, 3)
    fig, (time_ax, mem_ax, acc_ax) = take_axes(axes, 3, make)
    routes = list(dict.fromkeys(r["route"] for r in ladder["rows"]))
    for route in routes:
        rows = [r for r in ladder["rows"] if r["route"] == route]
        n = [r["constraints"] for r in rows]
        colour, marker = _ROUTES.get(route, ("0.3", "o"))
        time_ax.plot(n, [r["ms_per_step"] for r in rows], marker=marker, color=colour, label=route)
        mem_ax.plot(n, [r["peak_mib"] for r in rows], marker=marker, color=colour, label=route)
        if "bases_peak_mib" in rows[0]:
            mem_ax.plot(n, [r["bases_peak_mib"] for r in rows], color=colour, ls="--", lw=1)
        acc_ax.plot(n, [r["old_acc"] for r in rows], marker=marker, color=colour, label=f"{route}: old")
        acc_ax.plot(n, [r["new_acc"] for r in rows], marker=marker, color=colour, ls=":", mfc="white")
    time_ax.set_ylabel("ms per step")
    time_ax.set_yscale("log")
    mem_ax.set_ylabel("peak MiB of a step (tracemalloc)")
    mem_ax.text(0.02, 0.97, "dashed: building GPM's bases, once", transform=mem_ax.transAxes,
                va="top", fontsize=10, color="0.35")
    mem_ax.set_yscale("log")
    acc_ax.set_ylabel("test accuracy: old (solid), new (dotted)")
    acc_ax.set_ylim(0, 1.02)
    for ax in (time_ax, mem_ax, acc_ax):
        ax.set_xscale("log")
        ax.set_xlabel("constraints n = 5 m")
        ax.grid(True, alpha=0.3)
    time_ax.legend(loc="upper left", fontsize=9)
    time_ax.set_title("time")
    mem_ax.set_title("memory")
    acc_ax.set_title("what it holds, what it learns")
    fig.suptitle("Holding outputs 0-4 on m old images (and their shifts): the exact route and GPM's bases")
    return fig
