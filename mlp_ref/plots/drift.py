"""The drift figures: out1's drift against the step size (drift_vs_lr.png; and the same step
in a framework, beside the reference, in tutorial 07), over many steps (trajectories.png), the
trade-off of drift against out2's gain (pareto.png), and over a slice of input space
(heldout_drift.png). Each draws a result of ``mlp_ref.measurements.drift``.
"""
from __future__ import annotations

import matplotlib
import numpy as np
from matplotlib.patches import Rectangle

from ..measurements.fits import ROUNDOFF
from .axes import (ROUNDOFF_TEXT, ZERO_FLOOR, decade_ticks, exact, placed, drifting_range, guide,
                   join_broken, roundoff_band, strip)
from .style import (MARKERS, PALETTE, SETUP_LABELS, fix_label, new_figure, num, styled,
                    take_axes, text_colour)


#: The rules whose one-step drift equals naive's exactly in the question (drawn as markers only).
_SAME_AS_NAIVE = {"masked": "= naive, exactly", "penalty": "= naive on the first step"}


def _drift_curves(ax, lrs, drifts):
    """One log-log curve per rule."""
    for rule, drift in drifts.items():
        label = fix_label(rule) + (f" ({_SAME_AS_NAIVE[rule]})" if rule in _SAME_AS_NAIVE else "")
        kw = {"marker": MARKERS[rule], "color": PALETTE[rule], "label": label}
        if rule == "span":                            # small, so freeze's squares show around it
            kw.update(ms=5)
        if rule == "masked":                          # exactly on naive's points: a bold x on top
            kw.update(ls="none", ms=10, mew=2.2, zorder=5)
        elif rule == "penalty":                       # ... and a hollow triangle around them
            kw.update(ls="none", ms=13, mfc="none", mew=1.6, zorder=4)
        ax.loglog(lrs, placed(drift, exact(rule)), **kw)


def _slopes_box(ax, slopes, max_lr):
    lines = [f"{fix_label(r)}: {k:.2f}" for r, k in slopes.items()]
    ax.text(0.03, 0.97, f"fitted slopes (lr \u2264 {max_lr:g}):\n" + "\n".join(lines),
            transform=ax.transAxes, ha="left", va="top", fontsize=11,
            bbox={"boxstyle": "round,pad=0.3", "fc": "white", "ec": "0.8"})


@styled
def drift_vs_lr(results, axes=None, brief=False):
    """Max |delta out1| on the batch after ONE step of each rule, against the step size.

    ``results`` is a list of ``drift.one_step(setup, lrs=..., slope_max_lr=...)``, one panel
    each. Log-log, with dashed guide lines proportional to lr and lr^2, and the slopes fitted
    over lr <= slope_max_lr (``orders``) written in each panel. Exact zeros are drawn on the "exactly 0" row
    at the bottom; the band below 1e-12 is float64 round-off. ``axes``: one per result.
    ``brief`` (for a slide, in larger type): the slopes in each panel's title, not in a box over
    its curves.
    """
    def make():
        fig = new_figure(13.0, 6.6)
        return fig, fig.subplots(1, len(results), sharey=True)
    fig, axes = take_axes(axes, len(results), make)
    for ax, res in zip(axes, results):
        lrs = res["lrs"]
        slope_max_lr = res["slope_max_lr"]
        roundoff_band(ax)
        _drift_curves(ax, lrs, {r: res[r]["drift_batch"] for r in res["rules"]})
        slopes = {r: res["orders"][r]["batch"][1] for r in res["rules"]
                  if res["orders"][r]["batch"][1] is not None and r not in _SAME_AS_NAIVE}
        small = lrs <= slope_max_lr
        if "naive" in res:
            guide(ax, lrs[small], res["naive"]["drift_batch"][small], 1, "\u221d lr")
        if "project" in res:
            guide(ax, lrs[small], res["project"]["drift_batch"][small], 2, "\u221d lr\u00b2")
        ax.set_ylim(ZERO_FLOOR / 5, 30)
        decade_ticks(ax, -18, 0)
        ax.set_xlabel("step size lr (log)")
        if brief:
            ax.set_title(SETUP_LABELS.get(res["setup"], res["setup"]) + "\nslopes: " +
                         ", ".join(f"{fix_label(r)} {k:.2f}" for r, k in slopes.items()))
        else:
            _slopes_box(ax, slopes, slope_max_lr)
            ax.set_title(SETUP_LABELS.get(res["setup"], res["setup"]) + ", one step, on the batch")
    axes[0].set_ylabel("max |\u0394out1| on the batch (log)")
    handles, labels = axes[0].get_legend_handles_labels()
    fig.legend(handles, labels, loc="outside lower center", ncols=4, fontsize=11)
    fig.suptitle(_drift_title({r for res in results for r in res["rules"]}))
    return fig


def _drift_title(rules):
    """The title of ``drift_vs_lr``: what each rule drawn does, and nothing of a rule not drawn."""
    def names(*pairs):
        return " and ".join(label for rule, label in pairs if rule in rules)
    first = []
    if names(("naive", "naive"), ("masked", "mask")):
        verb = "moves" if len({"naive", "masked"} & rules) == 1 else "move"
        first.append(f"{names(('naive', 'naive'), ('masked', 'mask'))} {verb} out1 O(lr)")
    if "project" in rules:
        first.append("projection O(lr\u00b2)")
    second = []
    if "freeze" in rules:
        second.append("freezing holds it exactly (0.0)")
    if names(("span", "span"), ("project+restore", "restore")):
        second.append(f"{names(('span', 'span'), ('project+restore', 'restore'))} to round-off")
    title = "One step with G = [0, \u22121]: " + ", ".join(first)
    return title + (";\n" + ", ".join(second) if second else "")


#: How another implementation's points are drawn over the reference's curves in
#: ``frameworks_drift_vs_lr``: large and hollow, so the reference's line shows through them.
_OTHER_MARKERS = [{"marker": "s", "ms": 13, "mfc": "none", "mew": 1.6},
                  {"marker": "P", "ms": 9, "mew": 0.6, "mec": "white"},
                  {"marker": "D", "ms": 17, "mfc": "none", "mew": 1.2}]


def _listed(names):
    """"A", "A and B", "A, B and C"."""
    return " and ".join(filter(None, [", ".join(names[:-1]), names[-1]]))


@styled
def frameworks_drift_vs_lr(results, missing=(), axes=None):
    """out1's drift after one step, against lr: the reference's curves, and on them the points
    of the same step taken by other code (tutorial 07: PyTorch, TensorFlow 2 and JAX; up to
    three others, one marker each).

    ``results`` is a list of ``drift.one_step_beside(...)``, one panel each: mlp_ref's drift per
    rule as a line, each other implementation's as large hollow markers over it, guide lines
    proportional to lr and lr^2, and every fitted slope written in the panel. ``missing``:
    names of implementations that were not run (not installed), said under the panels.
    ``axes``: one per result.
    """
    others = results[0]["who"][1:]
    if len(others) > len(_OTHER_MARKERS):
        raise ValueError(f"results: at most {len(_OTHER_MARKERS)} implementations beside mlp_ref "
                         f"can be told apart, got {len(others)}: {others}")

    def make():
        fig = new_figure(13.0, 6.4)
        return fig, fig.subplots(1, len(results), sharey=True)
    fig, axes = take_axes(axes, len(results), make)
    for ax, res in zip(axes, results):
        lrs, others = res["lrs"], res["who"][1:]
        small = lrs <= res["slope_max_lr"]
        for rule in res["rules"]:
            ax.loglog(lrs, res["drift"]["mlp_ref"][rule], color=PALETTE[rule],
                      marker=MARKERS[rule], ms=5, label=f"{fix_label(rule)}: mlp_ref (NumPy)")
            for who, style in zip(others, _OTHER_MARKERS):
                ax.loglog(lrs, res["drift"][who][rule], ls="none", color=PALETTE[rule],
                          label=f"{fix_label(rule)}: {who}", zorder=4, **style)
        if "naive" in res["rules"]:
            guide(ax, lrs[small], np.asarray(res["drift"]["mlp_ref"]["naive"])[small], 1, "\u221d lr")
        if "project" in res["rules"]:
            guide(ax, lrs[small], np.asarray(res["drift"]["mlp_ref"]["project"])[small], 2, "\u221d lr\u00b2")
        lines = [f"{fix_label(rule)}: " + ", ".join(f"{res['slopes'][who][rule]:.2f}"
                                                    for who in res["who"])
                 for rule in res["rules"]]
        ax.text(0.97, 0.03, f"fitted slopes (lr \u2264 {res['slope_max_lr']:g}),\n"
                f"{', '.join(res['who'])}:\n" + "\n".join(lines),
                transform=ax.transAxes, ha="right", va="bottom", ma="left", fontsize=11,
                bbox={"boxstyle": "round,pad=0.3", "fc": "white", "ec": "0.8"})
        ax.set_xlabel("step size lr (log)")
        ax.set_title(SETUP_LABELS.get(res["setup"], res["setup"]) + ", one step, on the batch")
    axes[0].set_ylabel("max |\u0394out1| on the batch (log)")
    handles, labels = axes[0].get_legend_handles_labels()
    fig.legend(handles, labels, loc="outside lower center", ncols=len(results[0]["rules"]),
               fontsize=11)
    ran = results[0]["who"][1:]
    title = (f"The same step in {_listed(ran)} lands on mlp_ref's curves: "
             if ran else "One step in mlp_ref: ")
    title += "naive moves out1 O(lr), projection O(lr\u00b2)"
    if missing:
        title += f"\n(not run here, not installed: {', '.join(missing)})"
    else:
        title += "\n(one step with G = [0, \u22121], from the same weights)"
    fig.suptitle(title)
    return fig


def _steps_curve(axs, steps, values, rule, log):
    kw = {"color": PALETTE[rule], "marker": MARKERS[rule], "markevery": max(len(steps) // 8, 1),
          "label": fix_label(rule)}
    if rule == "masked":                                # exactly naive's curve: dashed on top
        kw.update(ls=(0, (4, 3)), label="mask [0, 1] (= naive)", zorder=4)
    for ax in axs:
        if log:
            ax.semilogy(steps[1:], placed(values[1:], exact(rule)), **kw)
        else:
            ax.plot(steps, values, **kw)


@styled
def trajectories(result, axes=None):
    """out1's drift (on the batch, and on unseen inputs) and out2's gain over many steps.

    ``result`` is ``drift.trajectories(...)``. The two drift panels are broken log
    axes: above, the rules that drift; below, a strip with the exact zeros (the "exactly 0"
    row) and round-off (shaded, <= 1e-12). The third panel is the mean gain of out2 on the
    batch (linear). ``axes``: five Axes, (batch above, batch strip, unseen above, unseen
    strip, gain).
    """
    def make():
        fig = new_figure(14.0, 6.2)
        grid = fig.add_gridspec(2, 3, height_ratios=[3, 1], width_ratios=[1, 1, 0.9],
                                hspace=0.03)
        made = [fig.add_subplot(grid[r, c]) for c in range(2) for r in range(2)]
        return fig, made + [fig.add_subplot(grid[:, 2])]
    fig, axes = take_axes(axes, 5, make)
    steps = result["steps"]
    rules = result["rules"]
    lim = drifting_range([result[r][k][1:] for r in rules for k in ("drift_batch", "drift_unseen")])
    for big, narrow, key, where in [(axes[0], axes[1], "drift_batch", "on the batch"),
                                   (axes[2], axes[3], "drift_unseen", f"on {result['n_probe']} unseen inputs")]:
        for rule in rules:
            _steps_curve([big, narrow], steps, result[rule][key], rule, log=True)
        big.set_ylim(*lim)
        strip(narrow)
        join_broken(big, narrow)
        big.set_title(f"out1 drift {where}")
        big.set_ylabel("max |out1 \u2212 out1 at start| (log)")
        narrow.set_xlabel("step")
        narrow.sharex(big)
    _steps_curve([axes[4]], steps, result[rules[0]]["gain"], rules[0], log=False)
    for rule in rules[1:]:
        _steps_curve([axes[4]], steps, result[rule]["gain"], rule, log=False)
    axes[4].set_title("out2 gain (what G asks for)")
    axes[4].set_ylabel("mean (out2 \u2212 out2 at start)")
    axes[4].set_xlabel("step")
    handles, labels = axes[4].get_legend_handles_labels()
    fig.legend(handles, labels, loc="outside lower center", ncols=len(rules), fontsize=11)
    setup = SETUP_LABELS.get(result["setup"], result["setup"])
    fig.suptitle(f"{len(steps) - 1} steps ({setup}, lr = {result['lr']:g}): freezing holds out1 "
                 "exactly everywhere; projection + restore\nholds it on the batch only, and off the "
                 "batch it drifts even more than naive; the penalty only pulls back")
    return fig


@styled
def pareto(result, axes=None):
    """out2's gain against out1's drift, per rule, step by step: the trade-off.

    ``result`` is ``drift.trajectories(...)``. Two panels, drift on the batch and on
    unseen inputs, each a broken log x axis: on the left a strip with the exact zeros and
    round-off, on the right the rules that drift. Each rule is a path from step 1 to the last
    step, ending in its marker. Up and to the left is better. ``axes``: four Axes (batch
    strip, batch, unseen strip, unseen).
    """
    def make():
        fig = new_figure(13.5, 6.0)
        grid = fig.add_gridspec(1, 4, width_ratios=[1, 3, 1, 3], wspace=0.03)
        made = [fig.add_subplot(grid[0, 0])]
        made += [fig.add_subplot(grid[0, c], sharey=made[0]) for c in (1, 2, 3)]
        return fig, made
    fig, axes = take_axes(axes, 4, make)
    rules = result["rules"]
    n = len(result["steps"]) - 1
    lim = drifting_range([result[r][k][1:] for r in rules for k in ("drift_batch", "drift_unseen")])
    for narrow, big, key, where in [(axes[0], axes[1], "drift_batch", "on the batch"),
                                   (axes[2], axes[3], "drift_unseen", f"on {result['n_probe']} unseen inputs")]:
        for rule in rules:
            x, y = placed(result[rule][key][1:], exact(rule)), result[rule]["gain"][1:]
            masked = rule == "masked"
            for ax in (narrow, big):
                ax.plot(x, y, color=PALETTE[rule], lw=1.4, alpha=0.6,
                        ls=(0, (4, 3)) if masked else "-")
                ax.plot(x[-1:], y[-1:], marker=MARKERS[rule], color=PALETTE[rule],
                        ms=14 if masked else 12, mew=2.5 if masked else 1, ls="none", zorder=4,
                        label=fix_label(rule) + (" (= naive)" if masked else ""))
        big.set_xscale("log")
        big.set_xlim(*lim)
        strip(narrow, horizontal=False)
        join_broken(big, narrow, horizontal=False)
        big.set_xlabel(f"max |\u0394out1| {where} (log)")
        big.set_title(f"out1 drift {where}", loc="left")
        big.annotate("better", xy=(0.08, 0.93), xytext=(0.25, 0.8), xycoords="axes fraction",
                     fontsize=11, color="0.35", arrowprops={"arrowstyle": "->", "color": "0.35"})
    axes[2].tick_params(axis="y", labelleft=False)
    axes[0].set_ylabel("out2 gain (mean, on the batch)")
    handles, labels = axes[1].get_legend_handles_labels()
    fig.legend(handles, labels, loc="outside lower center", ncols=len(rules), fontsize=11)
    fig.suptitle(f"The trade-off over {n} steps (each path ends at its marker): freezing buys exact "
                 "invariance with less than half the gain;\nprojection + restore keeps the gain "
                 "and the batch, but not unseen inputs")
    return fig


#: The colour of round-off cells (0 < |drift| <= 1e-12) in ``heldout_drift``: off the scale,
#: said in the colour bar's extension.
ROUNDOFF_COLOUR = "#E8D5F0"


def _range_note(D, held):
    """The range of |delta out1| in a panel's title: exact zeros (``held``: by the rule's
    identity) and round-off said as such, never by their digits, which are one CPU's."""
    if held and np.all(D == 0.0):
        return "0.0 exactly"
    if D.max() <= ROUNDOFF:
        return f"round-off (\u2264 {ROUNDOFF_TEXT})"
    return f"{num(D.min())} to {num(D.max())}"


@styled
def heldout_drift(result, axes=None):
    """|delta out1| over a 2-D slice of input space (x3 fixed) after the rules' steps.

    ``result`` is ``drift.drift_over_slice(...)``. One panel per rule and one shared
    log colour scale, from the smallest to the largest drift above round-off. Two kinds of
    cell are drawn off the scale, and said to be: exactly 0.0 by the rule's identity (hatched
    grey: freezing) and round-off, |delta out1| <= 1e-12 (pale lilac, the colour bar's lower
    extension; a 0.0 of any other rule is round-off that cancelled on this CPU). The batch's
    inputs are drawn at their (x1, x2) as dots filled with their own |delta out1|
    (``at_batch``, measured at their own x3, which is not the slice's) on the same scale: grey
    for exactly 0.0. ``axes``: one per rule, then one for the colour bar.
    """
    rules = result["rules"]

    def make():
        fig = new_figure(14.0, 5.3)
        grid = fig.add_gridspec(1, len(rules) + 1, width_ratios=[1] * len(rules) + [0.06])
        return fig, [fig.add_subplot(grid[0, i]) for i in range(len(rules) + 1)]
    fig, axes = take_axes(axes, len(rules) + 1, make)
    lo, hi = drifting_range([result[r] for r in rules] + [result["at_batch"][r] for r in rules])
    norm = matplotlib.colors.LogNorm(vmin=lo, vmax=hi)
    cmap = matplotlib.colormaps["viridis"].with_extremes(under=ROUNDOFF_COLOUR)
    extent = [result["x1"][0], result["x1"][-1], result["x2"][0], result["x2"][-1]]
    for ax, rule in zip(axes, rules):
        held = exact(rule)
        D, at_batch = placed(result[rule], held), placed(result["at_batch"][rule], held)
        ax.add_patch(Rectangle((0, 0), 1, 1, transform=ax.transAxes, facecolor="0.93",
                               hatch="//", edgecolor="0.72", lw=0, zorder=0))
        ax.imshow(np.ma.masked_equal(D, ZERO_FLOOR), origin="lower", extent=extent, cmap=cmap,
                  norm=norm, interpolation="nearest", zorder=1)
        ax.scatter(*result["batch"].T, s=120, edgecolor="black", lw=1.6, zorder=3, clip_on=False,
                   facecolor=[cmap(norm(d)) if d > ZERO_FLOOR else "0.93" for d in at_batch])
        note = (f"on the slice: {_range_note(result[rule], held)}\n"
                f"at the batch: {_range_note(result['at_batch'][rule], held)}")
        ax.set_title(f"{fix_label(rule)}\n{note}", color=text_colour(rule), fontweight="bold",
                     fontsize=11)
        ax.set_xlabel("x1")
        ax.set_xticks([0, 0.5, 1])
        ax.set_yticks([0, 0.5, 1])
        ax.set_aspect("equal")
    axes[0].set_ylabel(f"x2        (x3 = {result['fixed']:g})")
    bar = fig.colorbar(matplotlib.cm.ScalarMappable(norm=norm, cmap=cmap), cax=axes[-1],
                       extend="min", extendfrac=0.12)
    bar.set_label(f"|\u0394out1| (log).  Below the bar: round-off (\u2264 {ROUNDOFF_TEXT});\n"
                  "hatched grey: 0.0 exactly", fontsize=11)
    steps = result["steps"]
    what = "one step" if steps == 1 else f"{steps} steps"
    setup = SETUP_LABELS.get(result["setup"], result["setup"])
    fig.suptitle(f"Off the batch ({what}, lr = {result['lr']:g}, {setup}): projection still "
                 "moves out1 everywhere, O(lr); freezing holds it\nexactly; span with keep_X = the "
                 "batch freezes the hidden layers, so it IS freezing, up to round-off")
    where = ("no batch input lies on this slice (x3 = {:g})" if result["batch_off_slice"] > 0
             else "some lie on this slice (x3 = {:g})").format(result["fixed"])
    fig.text(0.5, 0.005, f"dots: the {len(result['batch'])} batch inputs at their (x1, x2), each "
             f"filled with |\u0394out1| at the input itself, at its own x3; {where}",
             ha="center", va="bottom", fontsize=11, style="italic")
    return fig
