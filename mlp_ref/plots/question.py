"""The question's figures: the problem (seed_problem.png), every stage of backprop
(backprop_stages.png, backprop_zeroed.png), what one step of each fix moves
(network_fixes.png) and why out1 moves (tangent_kernel.png). Each draws a result of
``mlp_ref.measurements.question``.
"""
from __future__ import annotations

import re

import matplotlib
import numpy as np
from matplotlib.collections import LineCollection
from matplotlib.lines import Line2D
from matplotlib.patches import Rectangle

from .axes import drift_text, exact
from .style import (HATCHES, OUT_COLOURS, PALETTE, SETUP_LABELS, STAGE_CMAP, fix_label, new_figure, power,
                    num, sci, styled, take_axes, text_colour)


@styled
def step_effect(effect, axes=None, brief=False):
    """out1 and out2 per sample before and after a naive step with G = [0, -1], on any setup
    (tutorial 02 draws the visible one; :func:`seed_problem` is this figure on the seed setup).

    ``effect`` is ``question.naive_step_effect(...)``: ``before``, ``after``, ``delta``
    (n, 2), ``lr`` and ``ratio``. Three panels: out2 before -> after; out1 before -> after on its own,
    zoomed, scale; and |change| of both on one log scale, where out1's drift, though smaller
    (thousands of times on the seed setup, about five times on the visible one), is plainly not
    zero. ``axes``: three Axes, or None. ``brief`` (for a slide, in larger type): the notes at
    the top of the first two panels become a legend and a line of the title.
    """
    def make():
        fig = new_figure(12.0, 4.8)
        return fig, fig.subplots(1, 3, gridspec_kw={"width_ratios": [1, 1, 1.1]})
    fig, axes = take_axes(axes, 3, make)
    before, after, delta = effect["before"], effect["after"], effect["delta"]
    idx = np.arange(before.shape[0])                  # samples counted from 0, as in the code
    for a, k, title in [(axes[0], 1, "out2: asked to rise \u2014 rises"),
                        (axes[1], 0, "out1: asked to stay \u2014 moves")]:
        colour = OUT_COLOURS[f"out{k + 1}"]
        a.scatter(idx, before[:, k], s=45, facecolors="white", edgecolors=colour, zorder=3)
        a.scatter(idx, after[:, k], s=45, color=colour, zorder=3)
        for i in range(len(idx)):
            a.annotate("", xy=(idx[i], after[i, k]), xytext=(idx[i], before[i, k]),
                       arrowprops={"arrowstyle": "->", "color": colour, "lw": 1.2,
                                   "shrinkA": 4, "shrinkB": 4})
        a.set_xticks(idx)
        a.set_xlabel("sample")
        a.set_ylabel(f"out{k + 1}" + (" (zoomed axis)" if k == 0 else ""))
        a.set_title(title)
        lo, hi = min(before[:, k].min(), after[:, k].min()), max(before[:, k].max(), after[:, k].max())
        a.set_ylim(lo - 0.08 * (hi - lo), hi + 0.3 * (hi - lo))     # room for the notes on top
    worst = int(np.argmax(np.abs(delta[:, 0])))
    most = f"max |\u0394out1| = {sci(abs(delta[worst, 0]))} (sample {worst})"
    axes[1].ticklabel_format(axis="y", style="plain", useOffset=False)
    if brief:
        axes[1].set_title(f"out1: asked to stay \u2014 moves\n{most}")
        colour = OUT_COLOURS["out2"]
        axes[0].legend(handles=[Line2D([], [], ls="", marker="o", mfc="white", mec=colour, label="before"),
                                Line2D([], [], ls="", marker="o", color=colour, label="after the step")],
                       loc="upper center", ncols=2, handletextpad=0.1, columnspacing=0.8)
    else:
        axes[1].text(0.5, 0.97, most, transform=axes[1].transAxes, ha="center", va="top", fontsize=11)
        axes[0].text(0.5, 0.97, "open: before    filled: after the step", transform=axes[0].transAxes,
                     ha="center", va="top", fontsize=11)

    a = axes[2]
    for k, marker in [(0, "o"), (1, "s")]:
        name = f"out{k + 1}"
        a.plot(idx, np.abs(delta[:, k]), marker=marker, ls="none", ms=8, color=OUT_COLOURS[name],
               label=f"|\u0394{name}|")
    a.set_yscale("log")
    a.set_ylim(np.abs(delta).min() / 10, np.abs(delta).max() * 10)
    a.set_xticks(idx)
    a.set_xlabel("sample")
    a.set_ylabel("|change|, log scale")
    a.set_title(f"out1 moves ~{times(effect['ratio'])}\u00d7 less, but not 0")
    a.legend(loc="center right")
    fig.suptitle(f"One plain gradient step with G = [0, \u22121] (lr = {effect['lr']:g}): "
                 f"out2 rises as asked, and out1 moves too")
    return fig


#: figures/seed_problem.png: :func:`step_effect` on the seed setup (``python -m mlp_ref figures``)
seed_problem = step_effect


def times(ratio):
    """A ratio as a title says it: 4.9 and 49 as they are, 1.3e4 as the power of ten it rounds
    to, 10⁴."""
    if ratio < 100:
        return f"{ratio:.1f}" if ratio < 10 else f"{ratio:.0f}"
    return power(int(round(np.log10(ratio))))


#: NumPy code -> the notation of the board, in this order: a1.T @ dz2 -> a1ᵀ dz2, ...
_BOARD = [(".T @ ", "\u1d40 "), (".T", "\u1d40"), (" @ ", " "), (" * ", " \u2299 "), ("'(", "\u2032("),
          ("sigmoid", "\u03c3"), ("identity", "id")]


def board(formula):
    """A stage's formula (``question.stage_formula``, NumPy code) as written on the board:
    "a1.T @ dz2" as "a1ᵀ dz2", "dz2.sum(axis=0)" as "Σᵢ dz2", "da1 * sigmoid'(z1)" as
    "da1 ⊙ σ′(z1)"."""
    formula = re.sub(r"(\w+)\.sum\(axis=0\)", "\u03a3\u1d62 \\1", formula)
    for code, math in _BOARD:
        formula = formula.replace(code, math)
    return formula


def _zeroed_patch(xy, fix):
    """A cell greyed out (white veil) and hatched in the fix's colour: "this fix zeroes it"."""
    patch = Rectangle(xy, 1, 1, facecolor=(1, 1, 1, 0.6), linewidth=1.2,
                      edgecolor=PALETTE.get(fix, "black"), hatch=HATCHES.get(fix, "//"))
    if hasattr(patch, "set_hatch_linewidth"):    # matplotlib >= 3.10
        patch.set_hatch_linewidth(1.6)
    return patch


#: At most this many stage panels side by side: more and the titles collide at slide size.
_MAX_PANELS = 9


def _pack_layers(names):
    """Backward stage names in rows of at most ``_MAX_PANELS``, breaking only after a da_l:
    one group per layer (dz_l, dW_l, db_l, da_{l-1}; the first also holds dout)."""
    groups, group = [], []
    for name in names:
        group.append(name)
        if name.startswith("da"):
            groups.append(group)
            group = []
    groups += [group] if group else []
    rows = [[]]
    for group in groups:
        if rows[-1] and len(rows[-1]) + len(group) > _MAX_PANELS:
            rows.append([])
        rows[-1] += group
    return rows


#: The narrowest panel, in cells: room for a title over a two-column stage.
_MIN_CELLS = 3.4


def _heatmap(ax, name, value, formula, n_rows, zeroed=None, brief=False):
    """One stage as a heatmap on its own symmetric colour scale; exact zeros written as 0.
    Titled with its name, formula and shape, its largest |entry| below; ``brief``: its name only.

    Every panel spans ``n_rows`` cells of height and at least ``_MIN_CELLS`` of width, so with
    equal aspect every cell of every panel has the same size and the shapes compare at a glance.
    """
    grid = np.atleast_2d(value)                  # a (k,) vector is drawn as one row
    rows, cols = grid.shape
    top = float(np.max(np.abs(grid))) or 1.0
    ax.imshow(grid, cmap=STAGE_CMAP, vmin=-top, vmax=top, interpolation="nearest")
    for i, j in zip(*np.nonzero(grid == 0.0)):
        ax.text(j, i, "0", ha="center", va="center", fontsize=11, fontweight="bold")
    for fix, stages in (zeroed or {}).items():
        mask = stages.get(name)
        if mask is None:
            continue
        for i, j in zip(*np.nonzero(np.atleast_2d(mask))):
            ax.add_patch(_zeroed_patch((j - 0.5, i - 0.5), fix))
    ax.add_patch(Rectangle((-0.5, -0.5), cols, rows, fill=False, linewidth=0.8, edgecolor="0.3"))
    half = max(cols, _MIN_CELLS) / 2
    ax.set_xlim(cols / 2 - 0.5 - half, cols / 2 - 0.5 + half)
    ax.set_ylim(n_rows + 0.3, -0.5)              # top-aligned, rows downwards as printed
    ax.set_aspect("equal")
    ax.set_axis_off()
    if brief:
        ax.set_title(name, fontsize=11)
        return
    ax.text(cols / 2 - 0.5, rows - 0.5 + 0.15, f"|max| {top:.2g}", ha="center", va="top",
            fontsize=10, color="0.3")
    ax.set_title(f"{name} = {formula}\n{tuple(value.shape)}", fontsize=11)


@styled
def backprop_stages(result, zeroed=None, forward=False, axes=None, title=None, brief=False):
    """Every backward stage (and, with ``forward=True``, every forward stage) as a heatmap.

    Parameters
    ----------
    result : dict from ``question.backprop_stages``: ``backward`` (and ``forward``) map
        stage names to arrays, in order; ``formulas`` gives each stage's formula.
    zeroed : dict fix -> {stage name -> bool array of the stage's shape}, or None
        Hatches, in the fix's colour, the entries that the fix zeroes (the seam for the
        overlay of every fix; ``result["zeroed"]`` holds those of "masked" and "freeze").
    forward : bool
        Also draw the forward stages a0, z1, a1, ... in a first row.
    axes : one Axes per stage drawn (forward first), or None for a new figure.
    title : str or None
        The takeaway; ``figures`` passes the one for the seed network and G = [0, -1].
    brief : bool
        Title each panel with its stage's name only, with no largest |entry| below (for a
        slide, whose type is larger).

    Panels read left to right in the order the stages are computed (a deep network's backward
    stages wrap onto more rows, a layer never split across two). Each has its own colour
    scale, symmetric about 0 (white), with its largest |entry| written below; entries that are
    exactly 0 are written "0". Every cell has the same size, so the shapes compare.
    """
    rows = ([list(result["forward"])] if forward else []) + _pack_layers(list(result["backward"]))
    stages = {**(result["forward"] if forward else {}), **result["backward"]}
    n_rows = max(np.atleast_2d(v).shape[0] for v in stages.values())
    caption = "left to right: backward, from dout = G at the output to da0 at the input"
    if forward:
        caption = "top row: forward, from a0 = X to the output;  below: backward, dout = G to da0"
    caption += ".   Red > 0 > blue, each panel on its own scale."

    def make():
        fig = new_figure(12.5, 3.6 * len(rows) + 1.15 + (0.4 if zeroed else 0.0))
        grid = fig.add_gridspec(len(rows), 1)
        made = []
        for r, row in enumerate(rows):
            widths = [max(np.atleast_2d(stages[n]).shape[1], _MIN_CELLS) for n in row]
            cells = grid[r].subgridspec(1, len(row), width_ratios=widths)
            made += [fig.add_subplot(cells[0, i]) for i in range(len(row))]
        if not zeroed:                           # with an overlay, the legend carries the caption
            fig.supxlabel(caption, fontsize=12, style="italic")
        return fig, made
    fig, axes = take_axes(axes, sum(len(r) for r in rows), make)
    for ax, name in zip(axes, [n for row in rows for n in row]):
        _heatmap(ax, name, stages[name], board(result["formulas"][name]), n_rows, zeroed, brief)
    if zeroed:
        handles = []
        for fix in zeroed:
            handle = _zeroed_patch((0, 0), fix)
            handle.set_label(_ZEROED_LABELS.get(fix, fix))
            handles.append(handle)
        fig.legend(handles=handles, loc="outside lower center", ncols=len(handles),
                   title=caption, title_fontproperties={"size": 12, "style": "italic"})
    if title is None:
        title = "Every stage of backprop, in the order it is computed"
    fig.suptitle(title)
    return fig


_ZEROED_LABELS = {"masked": "zeroed by the loss mask [0, 1]",
                  "freeze": "zeroed by freezing: var_list = [W2, b2]"}


#: The sequential map of |delta W| in ``network_fixes``: light (small) to dark (large), so
#: that even the smallest change stays visible on white.
CHANGE_CMAP = "magma_r"


_NETWORK_TAKEAWAYS = {
    "naive": "moves the shared layer",
    "masked": "= naive, bit for bit",
    "freeze": "only out2's weights move",
    "project": "out1's weights cancel\nthe shared layer's effect",
}


def _layer_positions(sizes):
    """(x, y) of every node: layer l at x = l, its nodes centred on y = 0, one unit apart."""
    return [[(l, (n - 1) / 2 - i) for i in range(n)] for l, n in enumerate(sizes)]


@styled
def network_fixes(result, axes=None):
    """The network as a graph, once per fix; edge colour and width = |delta W| of one step.

    ``result`` is ``question.weight_changes(...)``. One panel per rule, all on one log
    colour scale (a shared colour bar): the darker and thicker an edge, the more that weight
    moved. A weight the step leaves exactly unchanged is a thin dotted grey edge; a node's
    fill is the change of its bias (white with a dotted rim: unchanged). ``axes``: one per rule.
    """
    rules = result["rules"]
    sizes = result["sizes"]

    def make():
        fig = new_figure(12.5, 5.0)
        return fig, fig.subplots(1, len(rules))
    fig, axes = take_axes(axes, len(rules), make)
    moved = np.concatenate([np.ravel(v) for r in rules for v in result[r]["delta"].values()])
    moved = moved[moved > 0]
    norm = matplotlib.colors.LogNorm(vmin=10 ** np.floor(np.log10(moved.min())),
                                     vmax=10 ** np.ceil(np.log10(moved.max())))
    cmap = matplotlib.colormaps[CHANGE_CMAP]

    def shade(values):
        """The colours and widths of changes ``values`` (an array: one norm and one colour map call)."""
        t = np.clip(norm(np.asarray(values, dtype=float)), 0.0, 1.0)
        return cmap(0.12 + 0.88 * t), 0.8 + 4.2 * t

    pos = _layer_positions(sizes)
    names = [[f"x{i + 1}" for i in range(sizes[0])]]
    names += [[f"h{i + 1}" for i in range(n)] if l < len(sizes) - 1 else
              [f"out{i + 1}" for i in range(n)] for l, n in enumerate(sizes[1:], start=1)]
    for ax, rule in zip(axes, rules):
        delta = result[rule]["delta"]
        still, moving, changes = [], [], []             # one collection each: a draw, not 300
        for l in range(1, len(sizes)):
            W = delta[f"W{l}"]
            order = np.argsort(W, axis=None)                 # the largest drawn last, on top
            for flat in order:
                i, j = np.unravel_index(flat, W.shape)
                edge = [pos[l - 1][i], pos[l][j]]
                if W[i, j] == 0.0:
                    still.append(edge)
                else:
                    moving.append(edge)
                    changes.append(W[i, j])
        colours, widths = shade(changes)
        ax.add_collection(LineCollection(still, colors="0.7", linewidths=0.9, linestyles=":", zorder=1))
        ax.add_collection(LineCollection(moving, colors=colours, linewidths=widths, zorder=2,
                                         capstyle="round"))
        for l, layer in enumerate(pos):
            if l == 0:
                faces, edges, styles = ["0.85"] * len(layer), ["0.4"] * len(layer), ["-"] * len(layer)
            else:
                db = delta[f"b{l}"]
                faces = ["white" if v == 0.0 else tuple(c) for v, c in zip(db, shade(db)[0])]
                edges = ["0.5" if v == 0.0 else "0.2" for v in db]
                styles = [":" if v == 0.0 else "-" for v in db]
            ax.scatter(*np.transpose(layer), s=560, facecolors=faces, edgecolors=edges, linewidths=1.4,
                       linestyles=styles, zorder=3)
            for i, (x, y) in enumerate(layer):
                # the labels stand inside the axes' limits: the layout need not measure them
                if l == len(pos) - 1:              # "out1" does not fit in a node: beside it
                    ax.text(x + 0.24, y, names[l][i], ha="left", va="center", fontsize=11,
                            zorder=4, in_layout=False)
                    continue
                dark = l > 0 and db[i] != 0.0 and norm(db[i]) >= 0.55
                ax.text(x, y, names[l][i], ha="center", va="center", fontsize=10, zorder=4,
                        color="white" if dark else "black", in_layout=False)
        ax.set_xlim(-0.3, len(sizes) - 0.3)
        ax.set_ylim(-(max(sizes) - 1) / 2 - 0.55, (max(sizes) - 1) / 2 + 0.55)
        ax.set_axis_off()
        d_text = drift_text(result[rule]["drift_batch"], exact(rule))
        ax.set_title(f"{fix_label(rule)}\n{_NETWORK_TAKEAWAYS.get(rule, '')}",
                     color=text_colour(rule), fontweight="bold", fontsize=12, va="bottom")
        ax.text(0.5, -0.02, f"max |\u0394out1| = {d_text}", transform=ax.transAxes, ha="center",
                va="top", fontsize=11)
    bar = fig.colorbar(matplotlib.cm.ScalarMappable(
        norm=norm, cmap=matplotlib.colors.ListedColormap(cmap(np.linspace(0.12, 1.0, 256)))),
        ax=axes, shrink=0.8, pad=0.01)
    bar.set_label("|\u0394 weight| (edges) and |\u0394 bias| (nodes), one step")
    fig.supxlabel("dotted: not changed at all (0.0 exactly).   Same colour scale in every panel.",
                  fontsize=11, style="italic")
    fig.suptitle(f"What one step moves ({'-'.join(map(str, sizes))} network, G = [0, \u22121], "
                 f"lr = {result['lr']:g}): out1 drifts whenever the shared layer moves,\n"
                 "unless the shared layer is frozen, or out1's own weights move to cancel it "
                 "(projection: to first order)")
    return fig


@styled
def tangent_kernel(results, axes=None):
    """K_12 = J_1 J_2^T on the batch, split into one share per layer, for each setup.

    ``results`` is a list of ``question.tangent_kernel(setup)``. One row per setup; the
    columns are the hidden layers (aligned from the first), the output layer and the total.
    Each row has its own symmetric colour scale (the setups differ by decades). The output
    layer's share is exactly 0.0 in every entry, and its panel says so. ``axes``: one per
    panel, row by row (rows x (max hidden layers + 2)).
    """
    hidden = max(len(r["shares"]) - 2 for r in results)
    cols = hidden + 2

    def make():
        fig = new_figure(12.5, 3.3 * len(results) + 0.9)
        # square panels shrink into their cells after the layout is computed: a wider pad
        # keeps the bottom row's "sample b" inside the figure (at the default it loses 2 px)
        fig.get_layout_engine().set(h_pad=0.1)
        return fig, fig.subplots(len(results), cols)
    fig, axes = take_axes(axes, len(results) * cols, make)
    for row, res in enumerate(results):
        shares = res["shares"]
        layers = [l for l in shares if l != "total"]
        L = max(layers)
        panels = {c: l for c, l in enumerate(layers[:-1])}
        panels[cols - 2], panels[cols - 1] = L, "total"
        top = float(np.max(np.abs(shares["total"]))) or 1.0
        norm = matplotlib.colors.Normalize(-top, top)
        row_axes = axes[row * cols:(row + 1) * cols]
        for c, ax in enumerate(row_axes):
            if c not in panels:
                ax.set_axis_off()
                ax.text(0.5, 0.5, "(no hidden\nlayer 2)", ha="center", va="center",
                        transform=ax.transAxes, color="0.5")
                continue
            l = panels[c]
            K = shares[l]
            ax.imshow(K, cmap=STAGE_CMAP, norm=norm, interpolation="nearest")
            ax.set_xticks([])
            ax.set_yticks([])
            if l == "total":
                title = "total K\u2081\u2082 = J\u2081J\u2082\u1d40"
            elif l == L:
                title = f"output layer {L}"
            else:
                title = f"hidden layer {l}"
            if np.all(K == 0.0):
                ax.text(0.5, 0.5, "0.0 exactly,\nevery entry", ha="center", va="center",
                        transform=ax.transAxes, fontsize=12, fontweight="bold")
                sub = "out1, out2 share no\noutput weight"
            else:
                sub = (f"max |K\u2081\u2082| = {num(np.max(np.abs(K)))}" if l == "total" else
                       f"entries sum to {100 * res['fractions'][l]:.0f}% of total")
            ax.set_title(f"{title}\n{sub}", fontsize=11)
            if c == 0:
                ax.set_ylabel(SETUP_LABELS.get(res["setup"], res["setup"]) + "\nsample a",
                              fontsize=11)
            if row == len(results) - 1:
                ax.set_xlabel("sample b", fontsize=11)
        bar = fig.colorbar(matplotlib.cm.ScalarMappable(norm=norm, cmap=STAGE_CMAP),
                           ax=row_axes[-1], shrink=0.9, pad=0.04)
        bar.formatter.set_powerlimits((-2, 2))
    fig.suptitle("Why out1 moves: the cross-output kernel K\u2081\u2082[a, b] = \u2202out1\u2090/\u2202\u03b8 "
                 "\u00b7 \u2202out2_b/\u2202\u03b8, split by layer.\nThe output layer's share is 0.0 "
                 "exactly: all the cross-talk flows through the shared hidden layers")
    return fig
