"""Projection's figures: the two-parameter picture (projection_geometry.png), from
``mlp_ref.measurements.projection``, and what a projection costs against a dense Jacobian
(projection_cost.png), from the bench's saved run (``measurements.projection_cost``).
"""
from __future__ import annotations

import numpy as np
from matplotlib.lines import Line2D
from matplotlib.ticker import FuncFormatter, LogLocator

from .axes import theta_plane
from .style import MARKERS, PALETTE, new_figure, signed, styled, take_axes, text_colour


_DRIFT_LABELS = {"naive": "naive", "project": "projected", "project+restore": "projected + restored"}


@styled
def projection_geometry(result, axes=None, brief=False):
    """The naive step, its projection on the tangent of out1's level set, and the restore.

    ``result`` is ``projection.projection_geometry(...)``. Left: the theta-plane of the
    two-parameter toy with contours of out1, the level set through theta0 in bold, the three
    steps; equal aspect, so angles are true. Right: |out1 drift| against the step size on
    log-log axes, with the fitted slopes (1 for naive, 2 for projected). ``axes``: two Axes.
    ``brief`` (for a slide, in larger type): the left panel alone, its contours unlabelled, its
    legend left of it and the steps' changes right of it; ``axes``: one Axes.
    """
    def make():
        fig = new_figure(12.0, 6.0)
        return fig, fig.subplots(1, 1 if brief else 2, width_ratios=[1.15] if brief else [1.15, 1])
    fig, axes = take_axes(axes, 1 if brief else 2, make)
    t0, ref = result["theta0"], result["ref"]
    naive, proj, path = result["naive"], result["projected"], result["restore_path"]

    ax = axes[0]
    pts = np.vstack([t0, naive, proj, path])
    lo, hi = pts.min(axis=0), pts.max(axis=0)
    t1, t2, out1 = result["theta1"], result["theta2"], result["out1"]
    T1, T2 = np.meshgrid(t1, t2)
    cs = ax.contour(T1, T2, out1, levels=12, colors="0.75", linewidths=0.9,
                    negative_linestyles="solid")
    if not brief:
        ax.clabel(cs, fontsize=10, fmt="%.2f")
    ax.contour(T1, T2, out1, levels=[ref], colors="black", linewidths=2.5)
    span = 2 * (hi - lo).max()
    tangent = np.array([t0 - span * result["tangent"], t0 + span * result["tangent"]])
    ax.plot(tangent[:, 0], tangent[:, 1], "--", color="0.45", lw=1.3)

    def arrow(start, end, colour):
        ax.annotate("", xy=end, xytext=start,
                    arrowprops={"arrowstyle": "-|>", "color": colour, "lw": 2.2,
                                "mutation_scale": 18, "shrinkA": 0, "shrinkB": 0})

    beside = []                     # brief: the labels in a column right of the panel, 72 pt apart

    def label(end, name, text, offset, ha, va):
        d = result["changes"][name]
        d1 = "0" if d[0] == 0.0 else "0 to round-off" if abs(d[0]) < 1e-12 else signed(d[0])
        words = f"{text}\n\u0394out1 = {d1}\n\u0394out2 = {signed(d[1])}"
        if brief:
            ax.annotate(words, (1.04, 1), xycoords="axes fraction", xytext=(0, -72 * len(beside)),
                        textcoords="offset points", ha="left", va="top", color=text_colour(name))
            beside.append(name)
            return
        ax.annotate(words, end, xytext=offset,
                    textcoords="offset points", ha=ha, va=va, color=text_colour(name), fontsize=11,
                    bbox={"boxstyle": "round,pad=0.2", "fc": "white", "ec": "none", "alpha": 0.85})

    arrow(t0, naive, PALETTE["naive"])
    arrow(t0, proj, PALETTE["project"])
    for a, b in zip(path[:-1], path[1:]):
        if np.linalg.norm(b - a) > 1e-3 * span:
            arrow(a, b, PALETTE["project+restore"])
    label(naive, "naive", "naive step", (0, -10), "right", "top")
    label(proj, "project", "projected step", (-8, -6), "right", "top")
    label(path[-1], "project+restore", "+ restoring steps", (10, 0), "left", "center")
    ax.plot(*t0, "o", color="black", ms=8, zorder=4)
    ax.annotate("\u03b8\u2080", t0, xytext=(8, 6), textcoords="offset points", fontsize=13)
    handles = [
        Line2D([], [], color="black", lw=2.5,
                                label=f"level set out1 = {ref:.3f}"),
        Line2D([], [], color="0.45", lw=1.3, ls="--", label="its tangent at \u03b8\u2080"),
    ]
    if brief:
        ax.legend(handles=handles, loc="upper right", bbox_to_anchor=(-0.2, 1))
    else:
        ax.legend(handles=handles, loc="upper right", fontsize=11, frameon=True, framealpha=0.9)
    theta_plane(ax, t1, t2, f"Contours of out1 over \u03b8; steps of size lr = {result['lr']:g}")

    if not brief:
        _drift_panel(axes[1], result)
    fig.suptitle("Projection moves along the tangent and leaves the curved level set by O(lr\u00b2);"
                 "\na restoring step puts \u03b8 back on it")
    if brief:
        return fig
    fig.supxlabel("\u03b8 = (\u03b8\u2081, \u03b8\u2082): the two first-layer weights of a 1-2-2 "
                  "tanh MLP, out(\u03b8) = tanh(\u03b8x + c) V; naive direction D = \u2212\u2207out2 "
                  "(G = [0, \u22121])", fontsize=11, style="italic")
    return fig


def _drift_panel(ax, result):
    """|out1 drift| against the step size, log-log, each rule with its fitted slope."""
    lrs, floor = result["lrs"], 1e-16
    slopes = result.get("slopes", {})
    for name, drift in result["drift"].items():
        shown = _DRIFT_LABELS.get(name, name)
        label = shown if name not in slopes else f"{shown}: slope {slopes[name]:.2f}"
        if np.all(drift == 0.0):
            label = f"{shown}: exactly 0 (drawn at {floor:.0e})"
        ax.loglog(lrs, np.maximum(drift, floor), marker=MARKERS[name], color=PALETTE[name],
                  label=label)
    ax.axvline(result["lr"], color="0.6", lw=1, ls=":")
    ax.text(result["lr"], 1e-12, "lr of the\nleft panel ", ha="right", va="center", fontsize=10,
            color="0.4")
    ax.set_xlabel("step size lr")
    ax.set_ylabel("|out1(\u03b8) \u2212 out1(\u03b8\u2080)|")
    ax.set_title("out1 drift: O(lr), O(lr\u00b2), 0")
    ax.legend(loc="center right", fontsize=10)


#: The dense-Jacobian way, for comparison only: not a fix, so not in PALETTE.
DENSE_GREY = "#7f7f7f"


def _projection_cost_takeaway(d):
    if d["speedup"] is None:
        return "Gram projection: cost against the number of constraints (dense Jacobian too large to build)"
    return (f"Never build J: at n = {d['largest_dense_n']} constraints the Gram projection is "
            f"{d['speedup']:.0f}x faster\nand needs {d['memory_ratio']:.0f}x less memory than a dense Jacobian")


@styled
def projection_cost(d, axes=None):
    """Time and peak memory of ``fast.project`` (Gram) and of the dense-Jacobian projection
    against the number of constrained rows n, log-log.

    d    : ``projection_cost.projection_cost_data(...)`` of a saved bench run
    axes : None for a new two-panel figure; one Axes (time only) or two (time, memory)
    Returns the Figure.
    """
    def make():
        fig = new_figure()
        return fig, fig.subplots(1, 2)
    count = 2 if axes is None else len(np.ravel(axes))
    fig, axes = take_axes(axes, 2 if count == 2 else 1, make)
    n = d["n"]
    time_ax = axes[0]
    time_ax.plot(n, d["dense_s"] * 1e3, "s-", color=DENSE_GREY, label="dense J, then solve")
    time_ax.plot(n, d["gram_s"] * 1e3, "o-", color=PALETTE["project"], label="Gram (fast.project)")
    time_ax.axhline(d["step_s"] * 1e3, color="black", linestyle=":", linewidth=1,
                    label="one training step")
    time_ax.set_ylabel("time per projection (ms)")
    if len(axes) > 1:
        mem_ax = axes[1]
        mib = 2.0**20
        mem_ax.plot(n, d["dense_peak_bytes"] / mib, "s-", color=DENSE_GREY,
                    label="dense J, then solve")
        mem_ax.plot(n, d["dense_bytes_estimate"] / mib, ":", color=DENSE_GREY,
                    label="J alone (n P numbers)")
        mem_ax.plot(n, d["gram_peak_bytes"] / mib, "o-", color=PALETTE["project"],
                    label="Gram (fast.project)")
        mem_ax.set_ylabel("peak memory (MiB, tracemalloc)")
    for a in axes:
        a.set_xscale("log")
        a.set_yscale("log")
        a.set_xlabel("constrained rows n (output 0 held on n samples)")
        a.set_xticks(n)
        a.set_xticklabels([str(int(v)) for v in n])
        a.minorticks_off()
        # values are read off the y axis: ticks at 1, 2 and 5 of every decade, as plain numbers
        a.yaxis.set_major_locator(LogLocator(base=10, subs=(1, 2, 5)))
        a.yaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}"))
        a.grid(True, which="major", alpha=0.3)
        a.legend(loc="upper left")
    sizes = "-".join(str(s) for s in d["sizes"])
    fig.suptitle(_projection_cost_takeaway(d) + f" ({sizes} tanh, P = {d['n_params']:,}, {d['dtype']})")
    return fig
