"""The real task's figures, from ``mlp_ref.measurements.continual``: what each fix keeps and what
it costs the new digits (continual_tradeoff.png), old and new accuracy step by step
(continual_steps.png), and what holding 5 m constraints costs (continual_cost.png)."""
from __future__ import annotations

import numpy as np
from matplotlib.lines import Line2D
from matplotlib.ticker import MaxNLocator

from ..measurements.continual import MEMORY_FIXES, OLD, find
from .style import FIX_LABELS, MARKERS, PALETTE, new_figure, styled, take_axes

#: How each fix is named here (freeze trains only the head of outputs 5-9).
LABELS = dict(FIX_LABELS, freeze="freeze (out 5-9's head only)", towers="two towers",
              **{"project+restore": "project + restore"})

#: Short names for a line of text.
_SHORT = {"towers": "two towers", "project+restore": "project + restore"}

#: The line style of each memory size in the step-by-step figure: more memory, more solid.
_DASHES = {8: (1, 2), 32: (4, 2), 128: ()}


def _label(run):
    name = LABELS[run["fix"]]
    return f"{name}, m = {run['m']}" if run["m"] else name


#: Where each fix's point labels go (points, points, alignment): clear of their neighbours.
_OFFSETS = {"span": (-8, -4, "right"), "towers": (-10, -16, "right")}


@styled
def continual_tradeoff(result, axes=None, brief=False):
    """Left: old-task against new-task test accuracy after the second task, one point per fix
    and memory size. Right: the mean |change of outputs 0-4| on the old test images against m.

    result : ``continual.run()``'s dict;  axes : two Axes, or None for a new figure.
    brief : for a slide, in larger type: on the left the fixes without a memory named by their
        points, no legend and no memory sizes (a marker's size is its m); on the right the
        legend beside the panel, naming the others.
    Returns the Figure.
    """
    def make():
        fig = new_figure(height=5.4)
        return fig, fig.subplots(1, 2)
    fig, (left, right) = take_axes(axes, 2, make)
    sizes = [60 if not r["m"] else 25 + 25 * np.log2(r["m"]) / 2 for r in result["runs"]]
    for r, size in zip(result["runs"], sizes):
        left.scatter(r["new_acc"][-1], r["old_acc"][-1], s=size, color=PALETTE[r["fix"]],
                     marker=MARKERS[r["fix"]], edgecolor="black", linewidth=0.5, zorder=3)
    for r, size in zip(result["runs"], _covered(result["runs"], sizes)):
        if size:       # under a later point: drawn again over it, hollow, so that both show
            left.scatter(r["new_acc"][-1], r["old_acc"][-1], s=size * 2.2, facecolor="none",
                         edgecolor=PALETTE[r["fix"]], marker=MARKERS[r["fix"]], linewidth=2.0,
                         zorder=4)
    for r in result["runs"]:
        if brief and r["fix"] == "freeze":               # named here, in no legend
            left.annotate("freeze", (r["new_acc"][-1], r["old_acc"][-1]), xytext=(-12, 0), ha="right",
                          va="center", textcoords="offset points", color="0.25")
        if r["fix"] in ("project+restore", "freeze"):   # on project's and span's points
            continue
        if brief and r["m"]:
            continue
        text = str(r["m"]) if r["m"] else LABELS[r["fix"]]
        if (r["fix"], r["m"]) in result["as_freeze"]:
            text = f"{r['m']} = freeze"
        dx, dy, ha = _OFFSETS.get(r["fix"], (7, -4, "left"))
        left.annotate(text, (r["new_acc"][-1], r["old_acc"][-1]), xytext=(dx, dy), ha=ha,
                      textcoords="offset points", fontsize=10, color="0.25")
    fixes_drawn = dict.fromkeys(r["fix"] for r in result["runs"])
    if not brief:
        left.legend(handles=[Line2D([], [], ls="", marker=MARKERS[f], color=PALETTE[f],
                                    markeredgecolor="black", markeredgewidth=0.5, markersize=8,
                                    label=LABELS[f]) for f in fixes_drawn],
                    loc="lower left", fontsize=10)
    left.axhline(result["first"], color="0.5", ls=":", lw=1)
    left.text(0.02, result["first"], " after digits 0-4", va="bottom", fontsize=10, color="0.35",
              transform=left.get_yaxis_transform())
    left.set_xlabel("new-task test accuracy (digits 5-9)")
    left.set_ylabel("old-task test accuracy (digits 0-4)")
    left.set_xlim(0, 1.05)
    left.set_ylim(0, 1.05)
    left.set_title("argmax over all ten outputs;" + ("\nmarker size: memory m" if brief else " numbers: memory size m"))
    left.grid(True, alpha=0.3)

    naive = find(result, "naive")
    right.axhline(naive["drift_mean"], color=PALETTE["naive"], ls="--", lw=1.5,
                  label=LABELS["naive"])
    for fix in MEMORY_FIXES:
        runs = [r for r in result["runs"] if r["fix"] == fix]
        ms = [r["m"] for r in runs]
        drift = [r["drift_mean"] for r in runs]
        right.plot(ms, drift, marker=MARKERS[fix], color=PALETTE[fix], label=LABELS[fix],
                   ls="-" if fix != "project+restore" else ":")
    if result["exactly_held"]:
        held = ", ".join(_SHORT.get(f, f) + (f" m = {m}" if m else "") for f, m in result["exactly_held"])
        if brief:
            right.text(0.02, 0.03, f"{held}:\nexactly 0.0\n(off the axis)", transform=right.transAxes,
                       color="0.3")
        else:
            right.text(0.02, 0.03, f"{held}: exactly 0.0 (off the axis)",
                       transform=right.transAxes, fontsize=10, color="0.3")
    right.set_xscale("log", base=2)
    right.set_yscale("log")
    right.set_xticks(result["memory_sizes"], [str(m) for m in result["memory_sizes"]])
    right.minorticks_off()
    right.set_xlabel("memory size m (old training images held)")
    right.set_ylabel(f"mean |change of outputs {OLD[0]}-{OLD[-1]}|\non old test images")
    small, large = (find(result, "project", m) for m in (min(result["memory_sizes"]),
                                                         max(result["memory_sizes"])))
    right.set_title(f"project, off the memory:{chr(10) if brief else ' '}{small['drift_mean']:.2g} at m = "
                    f"{small['m']},\n{large['drift_mean']:.2g} at m = {large['m']}")
    right.grid(True, alpha=0.3)
    if brief:
        right.legend(loc="upper left", bbox_to_anchor=(1.0, 1.0))
    else:
        right.legend(loc="center left", fontsize=10)
    fig.suptitle("Learning digits 5-9 after 0-4: what each fix keeps, and what it costs the new digits")
    return fig


#: Two points of continual_tradeoff closer than this in both accuracies overlap on the figure
#: (a marker is about 0.025 of the 0 to 1.05 axes wide).
OVERLAP = 0.025


def _covered(runs, sizes):
    """For each run of continual_tradeoff, its marker size if a point drawn after it covers it
    (within OVERLAP in both accuracies), else 0."""
    at = [(r["new_acc"][-1], r["old_acc"][-1]) for r in runs]
    return [size if any(abs(at[i][0] - at[j][0]) < OVERLAP and abs(at[i][1] - at[j][1]) < OVERLAP
                        for j in range(i + 1, len(runs))) else 0
            for i, size in enumerate(sizes)]


#: The runs drawn step by step: (fix, m).
STEP_RUNS = (("naive", 0), ("freeze", 0), ("towers", 0), ("project", 8), ("project", 32),
             ("project", 128), ("span", 32), ("penalty", 128))


@styled
def continual_steps(result, runs=STEP_RUNS, axes=None):
    """Old-task (left) and new-task (right) test accuracy at every step of the second task.

    result : ``continual.run()``'s dict;  runs : the (fix, m) drawn;  axes : two Axes, or None.
    Returns the Figure.
    """
    def make():
        fig = new_figure(height=5.8)                  # the legend below the panels
        return fig, fig.subplots(1, 2, sharex=True)
    fig, axes = take_axes(axes, 2, make)
    chosen = [r for fix, m in runs for r in result["runs"] if r["fix"] == fix and r["m"] == m]
    for r in chosen:
        steps = np.arange(len(r["old_acc"]))
        kw = dict(color=PALETTE[r["fix"]], marker=MARKERS[r["fix"]], markevery=5, label=_label(r),
                  dashes=_DASHES.get(r["m"], ()) if r["fix"] == "project" else ())
        axes[0].plot(steps, r["old_acc"], **kw)
        axes[1].plot(steps, r["new_acc"], **kw)
    for ax, what in zip(axes, ("old digits 0-4", "new digits 5-9")):
        ax.set_ylim(0, 1.02)
        ax.set_xlabel("step of the second task")
        ax.xaxis.set_major_locator(MaxNLocator(integer=True))
        ax.set_ylabel(f"test accuracy, {what}")
        ax.grid(True, alpha=0.3)
    handles, labels = axes[0].get_legend_handles_labels()
    fig.legend(handles, labels, loc="outside lower center", ncols=4, fontsize=10)   # over no data
    naive = find(result, "naive")
    fig.suptitle(f"A plain step: {naive['old_acc'][0]:.0%} of digits 0-4 right before the second "
                 f"task, {naive['old_acc'][-1]:.0%} after {len(naive['old_acc']) - 1} steps")
    return fig


@styled
def continual_cost(d, axes=None):
    """Time (left) and peak memory (right) of one projected direction against the number of
    constraints n = 5 m, log-log; with the Gram's 8 n^2 bytes and an n^3 line through the
    reference's solve, each marked from where it takes over.

    d : ``continual.constraint_cost_data(...)`` of a cost sweep;  axes : two Axes, or None.
    Returns the Figure.
    """
    def make():
        fig = new_figure(height=5.2)
        return fig, fig.subplots(1, 2)
    fig, (left, right) = take_axes(axes, 2, make)
    n = d["constraints"]
    left.plot(n, d["reference"], "o-", color=PALETTE["project"], label="fixes.project (reference)")
    left.plot(n, d["fast"], "^-", color="black", label="fast.project")
    left.plot(n, d["eigh"], "s--", color="0.45", label="its solve: eigh + solve")
    left.plot(n, d["cholesky"], "D--", color="0.7", label="fast's solve: Cholesky")
    left.plot(n, d["gram"], "v:", color=PALETTE["span"], label="the Gram J J\u1d40")
    large = d["large"]
    left.plot(n[large], d["n_cubed"], color=PALETTE["naive"], lw=4, alpha=0.35, label="n\u00b3")
    if d["solve_over_half_n"] is not None:
        left.axvline(d["solve_over_half_n"], color=PALETTE["naive"], ls=":", lw=1)
        left.text(d["solve_over_half_n"], 0.97, " n\u00b3 solve > half",
                  transform=left.get_xaxis_transform(), va="top", fontsize=10, color=PALETTE["naive"])
    left.set_ylabel("seconds per projected direction")
    left.set_title(f"time: slope {d['time_slope']:.1f} over the last {int(large.sum())} sizes")

    mib = 2.0 ** 20
    right.plot(n, d["peak_reference"] / mib, "o-", color=PALETTE["project"],
               label="fixes.project, peak")
    right.plot(n, d["peak_fast"] / mib, "^-", color="black", label="fast.project, peak")
    right.plot(n, d["gram_bytes"] / mib, color=PALETTE["naive"], lw=4, alpha=0.35,
               label="the Gram alone: 8 n\u00b2 bytes")
    if d["n_squared_over_rest_n"] is not None:   # the Gram and its factors outweigh the rest
        right.axvline(d["n_squared_over_rest_n"], color=PALETTE["naive"], ls=":", lw=1)
        right.text(d["n_squared_over_rest_n"], 0.97, " n\u00b2 arrays > the rest",
                   transform=right.get_xaxis_transform(), va="top", fontsize=10,
                   color=PALETTE["naive"])
    right.set_ylabel("peak memory (MiB, tracemalloc)")
    right.set_title(f"memory: at n = {int(n[-1])}, the peak is {d['peak_in_grams']:.1f} Grams")
    for ax in (left, right):
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xticks(n, [str(int(v)) for v in n])
        ax.minorticks_off()
        ax.set_xlabel("constraints n = 5 m (outputs 0-4 on m memory images)")
        ax.grid(True, alpha=0.3)
        ax.legend(loc="upper left", fontsize=10)
    sizes = "-".join(str(s) for s in d["sizes"])
    fig.suptitle(f"Holding 5 outputs on m old images, training on {d['n_new']} new ones "
                 f"({sizes} tanh, P = {d['n_params']:,})")
    return fig
