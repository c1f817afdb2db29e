"""One function per figure. Each takes results from ``experiments`` (plain arrays and dicts)
and optional axes, and returns the matplotlib Figure. This is the only module importing
matplotlib; ``figures`` imports it lazily, so ``import mlp_ref`` never does.

Conventions, the same in every figure:

* one colour per fix, :data:`PALETTE` (Okabe-Ito colours, safe for colour-blind readers),
  and one marker per fix, :data:`MARKERS`, so that no curve is told apart by colour alone;
* the style :data:`STYLE` (no font under 10 pt at slide size), applied by :func:`styled`
  through ``matplotlib.rc_context``, so nothing leaks into the caller's matplotlib settings;
* figures at least 1000 px wide (:func:`new_figure`), titles that state the takeaway,
  log scales where values span decades.

We build figures with the object-oriented ``matplotlib.figure.Figure`` rather than pyplot:
no global state, no display needed, and nothing left open between figures.
"""
from __future__ import annotations

import functools

import matplotlib
import numpy as np
from matplotlib.figure import Figure
from matplotlib.lines import Line2D
from matplotlib.patches import Rectangle

#: One colour per fix, the same in every figure (Okabe & Ito's colour-blind-safe set, plus a
#: brown and a grey). naive and masked are neighbours on purpose: in the question they coincide.
PALETTE = {
    "naive": "#D55E00",            # vermillion
    "masked": "#E69F00",           # orange
    "freeze": "#009E73",           # bluish green
    "heads": "#56B4E9",            # sky blue
    "towers": "#8C6D31",           # brown
    "project": "#0072B2",          # blue
    "project+restore": "#000000",  # black
    "penalty": "#CC79A7",          # reddish purple
    "span": "#999999",             # grey
}
#: One marker per fix, so curves stay distinct in grey-scale print and for every reader.
MARKERS = {"naive": "o", "masked": "x", "freeze": "s", "heads": "D", "towers": "P",
           "project": "^", "project+restore": "*", "penalty": "v", "span": "h"}
#: Hatches for the "which entries a fix zeroes" overlay of :func:`backprop_stages`.
HATCHES = {"masked": "\\\\\\", "freeze": "///", "heads": "xx", "towers": "++",
           "project": "..", "project+restore": "oo", "penalty": "--", "span": "||"}
OUT_COLOURS = {"out1": "#333333", "out2": "#0072B2"}
#: The diverging map of the stage heatmaps: white at zero, red positive, blue negative.
STAGE_CMAP = "RdBu_r"

STYLE = {
    "font.size": 12, "axes.titlesize": 13, "axes.labelsize": 12, "legend.fontsize": 11,
    "xtick.labelsize": 11, "ytick.labelsize": 11, "figure.titlesize": 15,
    "axes.spines.top": False, "axes.spines.right": False, "lines.linewidth": 2.0,
    "legend.frameon": False,
}


def styled(plot):
    """Run a plot function inside ``rc_context(STYLE)``: every figure gets the same look."""
    @functools.wraps(plot)
    def wrapper(*args, **kwargs):
        with matplotlib.rc_context(STYLE):
            return plot(*args, **kwargs)
    return wrapper


def new_figure(width=11.0, height=5.0, dpi=110):
    """A Figure at slide size: 11 in x 110 dpi = 1210 px wide (16:9 slides are >= 1280)."""
    return Figure(figsize=(width, height), dpi=dpi, layout="constrained")


def _axes(axes, count, make):
    """The caller's axes (checked to be ``count`` of them) and their figure, or new ones."""
    if axes is None:
        fig, axes = make()
        return fig, list(np.ravel(axes))
    axes = list(np.ravel(axes))
    if len(axes) != count:
        raise ValueError(f"axes: expected {count} matplotlib Axes, got {len(axes)}")
    fig = axes[0].figure
    while not isinstance(fig, Figure):           # an Axes of a SubFigure: climb to the Figure
        fig = fig.figure
    return fig, axes


# -- the seed problem -----------------------------------------------------------------------
@styled
def seed_problem(effect, axes=None):
    """out1 and out2 per sample before and after a naive step with G = [0, -1].

    ``effect`` is ``experiments.naive_step_effect(...)``: ``before``, ``after``, ``delta``
    (n, 2) and ``lr``. Three panels: out2 before -> after; out1 before -> after on its own,
    zoomed, scale; and |change| of both on one log scale, where out1's drift, though
    thousands of times smaller, is plainly not zero. ``axes``: three Axes, or None.
    """
    def make():
        fig = new_figure(12.0, 4.8)
        return fig, fig.subplots(1, 3, gridspec_kw={"width_ratios": [1, 1, 1.1]})
    fig, axes = _axes(axes, 3, make)
    before, after, delta = effect["before"], effect["after"], effect["delta"]
    idx = np.arange(1, before.shape[0] + 1)
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
    axes[1].text(0.5, 0.97, f"max |\u0394out1| = {_sci(abs(delta[worst, 0]))} (sample {worst + 1})",
                 transform=axes[1].transAxes, ha="center", va="top", fontsize=11)
    axes[1].ticklabel_format(axis="y", style="plain", useOffset=False)
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
    decades = int(round(np.log10(np.median(np.abs(delta[:, 1]) / np.abs(delta[:, 0])))))
    a.set_title(f"out1 moves ~$10^{{{decades}}}$\u00d7 less, but not 0")
    a.legend(loc="center right")
    fig.suptitle(f"One plain gradient step with G = [0, \u22121] (lr = {effect['lr']:g}): "
                 f"out2 rises as asked, and out1 moves too")
    return fig


_DRIFT_LABELS = {"naive": "naive", "project": "projected", "project+restore": "projected + restored"}


def _signed(x):
    """+0.59 / \u22120.14 with a true minus sign."""
    return f"{x:+.2f}".replace("-", "\u2212")


def _num(x):
    """A magnitude for a label: 0.39 or 9.1 as they are, 1.8e-04 as 1.8 x 10^-4."""
    return f"{x:.2g}" if 1e-2 <= abs(x) < 1e3 else _sci(x)


def _sci(x):
    """1.8e-04 as mathtext 1.8 x 10^-4, readable on a slide."""
    mantissa, exponent = f"{x:.1e}".split("e")
    return f"${mantissa}\\times10^{{{int(exponent)}}}$"


# -- the stages of backprop -------------------------------------------------------------------
_ACT_SYMBOL = {"sigmoid": "\u03c3", "tanh": "tanh", "relu": "relu", "identity": "id"}


def _stage_formula(name, activations):
    """The formula a stage implements, e.g. "a1\u1d40 dz2", from its name (layers 1 .. L)."""
    if name in ("dout", "a0"):
        return {"dout": "G", "a0": "X"}[name]
    kind, l = name.rstrip("0123456789"), int(name.lstrip("adzWb"))
    if kind == "da":
        return f"dz{l + 1} W{l + 1}\u1d40"
    f = _ACT_SYMBOL[activations[l - 1]]
    da = "dout" if l == len(activations) else f"da{l}"
    return {"a": f"{f}(z{l})", "z": f"a{l - 1} W{l} + b{l}",
            "dz": da if f == "id" else f"{da} \u2299 {f}\u2032(z{l})",
            "dW": f"a{l - 1}\u1d40 dz{l}", "db": f"\u03a3\u1d62 dz{l}"}[kind]


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


def _heatmap(ax, name, value, formula, n_rows, zeroed=None):
    """One stage as a heatmap on its own symmetric colour scale; exact zeros written as 0.

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
    ax.text(cols / 2 - 0.5, rows - 0.5 + 0.15, f"|max| {top:.2g}", ha="center", va="top",
            fontsize=10, color="0.3")
    ax.set_title(f"{name} = {formula}\n{tuple(value.shape)}", fontsize=11)


@styled
def backprop_stages(result, zeroed=None, forward=False, axes=None, title=None):
    """Every backward stage (and, with ``forward=True``, every forward stage) as a heatmap.

    Parameters
    ----------
    result : dict from ``experiments.backprop_stages``: ``backward`` (and ``forward``) map
        stage names to arrays, in order; ``activations`` names each layer's activation.
    zeroed : dict fix -> {stage name -> bool array of the stage's shape}, or None
        Hatches, in the fix's colour, the entries that the fix zeroes (the seam for the
        overlay of every fix; ``result["zeroed"]`` holds those of "masked" and "freeze").
    forward : bool
        Also draw the forward stages a0, z1, a1, ... in a first row.
    axes : one Axes per stage drawn (forward first), or None for a new figure.
    title : str or None
        The takeaway; ``figures`` passes the one for the seed network and G = [0, -1].

    Panels read left to right in the order the stages are computed (a deep network's backward
    stages wrap onto more rows, a layer never split across two). Each has its own colour
    scale, symmetric about 0 (white), with its largest |entry| written below; entries that are
    exactly 0 are written "0". Every cell has the same size, so the shapes compare.
    """
    rows = ([list(result["forward"])] if forward else []) + _pack_layers(list(result["backward"]))
    stages = {**(result["forward"] if forward else {}), **result["backward"]}
    acts = result["activations"]
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
    fig, axes = _axes(axes, sum(len(r) for r in rows), make)
    for ax, name in zip(axes, [n for row in rows for n in row]):
        _heatmap(ax, name, stages[name], _stage_formula(name, acts), n_rows, zeroed)
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


# -- projection in a two-parameter picture ------------------------------------------------------
@styled
def projection_geometry(result, axes=None, grid=241):
    """The naive step, its projection on the tangent of out1's level set, and the restore.

    ``result`` is ``experiments.projection_geometry(...)``. Left: the theta-plane of the
    two-parameter toy with contours of out1, the level set through theta0 in bold, the three
    steps; equal aspect, so angles are true. Right: |out1 drift| against the step size on
    log-log axes, with the fitted slopes (1 for naive, 2 for projected). ``axes``: two Axes.
    """
    def make():
        fig = new_figure(12.0, 6.0)
        return fig, fig.subplots(1, 2, width_ratios=[1.15, 1])
    fig, axes = _axes(axes, 2, make)
    toy, t0, ref = result["toy"], result["theta0"], result["ref"]
    naive, proj, path = result["naive"], result["projected"], result["restore_path"]

    ax = axes[0]
    pts = np.vstack([t0, naive, proj, path])
    lo, hi = pts.min(axis=0), pts.max(axis=0)
    pad = 0.25 * (hi - lo).max()
    t1 = np.linspace(lo[0] - pad, hi[0] + pad, grid)
    t2 = np.linspace(lo[1] - pad, hi[1] + pad, grid)
    T1, T2 = np.meshgrid(t1, t2)
    out1 = toy.outputs(np.stack([T1, T2], axis=-1))[..., 0]
    cs = ax.contour(T1, T2, out1, levels=12, colors="0.75", linewidths=0.9,
                    negative_linestyles="solid")
    ax.clabel(cs, fontsize=10, fmt="%.2f")
    ax.contour(T1, T2, out1, levels=[ref], colors="black", linewidths=2.5)
    span = 2 * (hi - lo).max()
    tangent = np.array([t0 - span * result["tangent"], t0 + span * result["tangent"]])
    ax.plot(tangent[:, 0], tangent[:, 1], "--", color="0.45", lw=1.3)

    def arrow(start, end, colour):
        ax.annotate("", xy=end, xytext=start,
                    arrowprops={"arrowstyle": "-|>", "color": colour, "lw": 2.2,
                                "mutation_scale": 18, "shrinkA": 0, "shrinkB": 0})

    def label(end, name, colour, offset, ha, va):
        d = toy.outputs(end) - toy.outputs(t0)
        d1 = "0" if d[0] == 0.0 else "0 to round-off" if abs(d[0]) < 1e-12 else _signed(d[0])
        ax.annotate(f"{name}\n\u0394out1 = {d1}\n\u0394out2 = {_signed(d[1])}", end, xytext=offset,
                    textcoords="offset points", ha=ha, va=va, color=colour, fontsize=11,
                    bbox={"boxstyle": "round,pad=0.2", "fc": "white", "ec": "none", "alpha": 0.85})

    arrow(t0, naive, PALETTE["naive"])
    arrow(t0, proj, PALETTE["project"])
    for a, b in zip(path[:-1], path[1:]):
        if np.linalg.norm(b - a) > 1e-3 * span:
            arrow(a, b, PALETTE["project+restore"])
    label(naive, "naive step", PALETTE["naive"], (0, -10), "right", "top")
    label(proj, "projected step", PALETTE["project"], (-8, -6), "right", "top")
    label(path[-1], "+ restoring steps", PALETTE["project+restore"], (10, 0), "left", "center")
    ax.plot(*t0, "o", color="black", ms=8, zorder=4)
    ax.annotate("\u03b8\u2080", t0, xytext=(8, 6), textcoords="offset points", fontsize=13)
    handles = [
        Line2D([], [], color="black", lw=2.5,
                                label=f"level set out1 = {ref:.3f}"),
        Line2D([], [], color="0.45", lw=1.3, ls="--", label="its tangent at \u03b8\u2080"),
    ]
    ax.legend(handles=handles, loc="upper right", fontsize=11, frameon=True, framealpha=0.9)
    ax.set_xlim(t1[0], t1[-1])
    ax.set_ylim(t2[0], t2[-1])
    ax.set_aspect("equal")
    ax.set_xlabel("\u03b8\u2081")
    ax.set_ylabel("\u03b8\u2082")
    ax.set_title(f"Contours of out1 over \u03b8; steps of size lr = {result['lr']:g}")

    ax = axes[1]
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
    fig.suptitle("Projection moves along the tangent and leaves the curved level set by O(lr\u00b2);"
                 "\na restoring step puts \u03b8 back on it")
    fig.supxlabel("\u03b8 = (\u03b8\u2081, \u03b8\u2082): the two first-layer weights of a 1-2-2 "
                  "tanh MLP, out(\u03b8) = tanh(\u03b8x + c) V; naive direction D = \u2212\u2207out2 "
                  "(G = [0, \u22121])", fontsize=11, style="italic")
    return fig


# == every fix, measured =========================================================================
#: How each fix is named in a legend or a panel title.
FIX_LABELS = {"naive": "naive", "masked": "mask [0, 1]", "freeze": "freeze (var_list)",
              "heads": "separate heads", "towers": "two towers", "project": "project",
              "project+restore": "project + restore", "penalty": "penalty", "span": "span (GPM)"}

#: Where a drift of exactly 0.0 is drawn on a log axis, and the top of the round-off band
#: (``experiments.ROUNDOFF``): a value in the band is float64 noise, not a drift.
ZERO_FLOOR = 1e-19
ROUNDOFF_TOP = 1e-12


def _fix_label(name):
    return FIX_LABELS.get(name, name)


def _at_floor(values, floor=ZERO_FLOOR):
    """Values for a log axis: exact zeros moved to ``floor``, everything else as it is."""
    values = np.asarray(values, dtype=float)
    return np.where(values == 0.0, floor, values)


def _roundoff_band(ax, floor=ZERO_FLOOR, horizontal=True, label=True):
    """Shade |drift| <= ROUNDOFF_TOP as float64 round-off, and mark the row of exact zeros."""
    span, line = (ax.axhspan, ax.axhline) if horizontal else (ax.axvspan, ax.axvline)
    span(floor / 5, ROUNDOFF_TOP, color="0.93", zorder=0, lw=0)
    line(floor, color="0.6", lw=0.8, ls=":", zorder=0)
    if not label:
        return
    kw = {"fontsize": 10, "color": "0.35", "zorder": 1}
    if horizontal:
        trans = ax.get_yaxis_transform()
        ax.text(0.99, ROUNDOFF_TOP / 30, f"round-off: \u2264 $10^{{{int(np.log10(ROUNDOFF_TOP))}}}$",
                transform=trans, ha="right", va="top", **kw)
        ax.text(0.99, floor * 2.5, "exactly 0", transform=trans, ha="right", va="bottom", **kw)
    else:
        trans = ax.get_xaxis_transform()
        ax.text(ROUNDOFF_TOP / 30, 0.99, f"round-off: \u2264 $10^{{{int(np.log10(ROUNDOFF_TOP))}}}$",
                transform=trans, ha="right", va="top", rotation=90, **kw)
        ax.text(floor * 2.5, 0.99, "exactly 0", transform=trans, ha="left", va="top", rotation=90,
                **kw)


def _decade_ticks(ax, lo, hi, every=3, axis="y"):
    """Log ticks every ``every`` decades from 10^lo to 10^hi, as 10^k."""
    ticks = [10.0 ** k for k in range(lo, hi + 1, every)]
    labels = [f"$10^{{{k}}}$" for k in range(lo, hi + 1, every)]
    (ax.set_yticks if axis == "y" else ax.set_xticks)(ticks, labels)
    (ax.yaxis if axis == "y" else ax.xaxis).set_minor_locator(matplotlib.ticker.NullLocator())


# -- the network, and what each fix moves -------------------------------------------------------
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

    ``result`` is ``experiments.weight_changes(...)``. One panel per rule, all on one log
    colour scale (a shared colour bar): the darker and thicker an edge, the more that weight
    moved. A weight the step leaves exactly unchanged is a thin dotted grey edge; a node's
    fill is the change of its bias (white with a dotted rim: unchanged). ``axes``: one per rule.
    """
    rules = [k for k in result if isinstance(result[k], dict) and "delta" in result[k]]
    sizes = result["sizes"]

    def make():
        fig = new_figure(12.5, 5.0)
        return fig, fig.subplots(1, len(rules))
    fig, axes = _axes(axes, len(rules), make)
    moved = np.concatenate([np.ravel(v) for r in rules for v in result[r]["delta"].values()])
    moved = moved[moved > 0]
    norm = matplotlib.colors.LogNorm(vmin=10 ** np.floor(np.log10(moved.min())),
                                     vmax=10 ** np.ceil(np.log10(moved.max())))
    cmap = matplotlib.colormaps[CHANGE_CMAP]

    def shade(value):
        t = float(np.clip(norm(value), 0.0, 1.0))
        return cmap(0.12 + 0.88 * t), 0.8 + 4.2 * t

    pos = _layer_positions(sizes)
    names = [[f"x{i + 1}" for i in range(sizes[0])]]
    names += [[f"h{i + 1}" for i in range(n)] if l < len(sizes) - 1 else
              [f"out{i + 1}" for i in range(n)] for l, n in enumerate(sizes[1:], start=1)]
    for ax, rule in zip(axes, rules):
        delta = result[rule]["delta"]
        for l in range(1, len(sizes)):
            W = delta[f"W{l}"]
            order = np.argsort(W, axis=None)                 # the largest drawn last, on top
            for flat in order:
                i, j = np.unravel_index(flat, W.shape)
                (x0, y0), (x1, y1) = pos[l - 1][i], pos[l][j]
                if W[i, j] == 0.0:
                    ax.plot([x0, x1], [y0, y1], color="0.7", lw=0.9, ls=":", zorder=1)
                else:
                    colour, width = shade(W[i, j])
                    ax.plot([x0, x1], [y0, y1], color=colour, lw=width, zorder=2,
                            solid_capstyle="round")
        for l, layer in enumerate(pos):
            for i, (x, y) in enumerate(layer):
                if l == 0:
                    face, edge, ls = "0.85", "0.4", "-"
                else:
                    db = delta[f"b{l}"][i]
                    face, edge, ls = ("white", "0.5", ":") if db == 0.0 else (shade(db)[0], "0.2", "-")
                ax.scatter([x], [y], s=560, facecolor=face, edgecolor=edge, linewidth=1.4,
                           linestyle=ls, zorder=3)
                if l == len(pos) - 1:              # "out1" does not fit in a node: beside it
                    ax.text(x + 0.24, y, names[l][i], ha="left", va="center", fontsize=11,
                            zorder=4)
                    continue
                text_colour = "black" if l == 0 or face == "white" or norm(db) < 0.55 else "white"
                ax.text(x, y, names[l][i], ha="center", va="center", fontsize=10, zorder=4,
                        color=text_colour)
        ax.set_xlim(-0.3, len(sizes) - 0.3)
        ax.set_ylim(-(max(sizes) - 1) / 2 - 0.55, (max(sizes) - 1) / 2 + 0.55)
        ax.set_axis_off()
        drift = result[rule]["drift_batch"]
        d_text = "0 exactly" if drift == 0.0 else _sci(drift)
        ax.set_title(f"{_fix_label(rule)}\n{_NETWORK_TAKEAWAYS.get(rule, '')}",
                     color=PALETTE[rule], fontweight="bold", fontsize=12, va="bottom")
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


# -- the cross-output tangent kernel by layer ------------------------------------------------------
_SETUP_LABELS = {"seed": "seed: 3-4-2 sigmoid", "visible": "visible: 3-16-16-2 tanh"}


@styled
def tangent_kernel(results, axes=None):
    """K_12 = J_1 J_2^T on the batch, split into one share per layer, for each setup.

    ``results`` is a list of ``experiments.tangent_kernel(setup)``. One row per setup; the
    columns are the hidden layers (aligned from the first), the output layer and the total.
    Each row has its own symmetric colour scale (the setups differ by decades). The output
    layer's share is exactly 0.0 in every entry, and its panel says so. ``axes``: one per
    panel, row by row (rows x (max hidden layers + 2)).
    """
    hidden = max(len(r["shares"]) - 2 for r in results)
    cols = hidden + 2

    def make():
        fig = new_figure(12.5, 3.3 * len(results) + 0.9)
        return fig, fig.subplots(len(results), cols)
    fig, axes = _axes(axes, len(results) * cols, make)
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
                share = K.sum() / shares["total"].sum()
                sub = (f"max |K\u2081\u2082| = {_num(np.max(np.abs(K)))}" if l == "total" else
                       f"entries sum to {100 * share:.0f}% of total")
            ax.set_title(f"{title}\n{sub}", fontsize=11)
            if c == 0:
                ax.set_ylabel(_SETUP_LABELS.get(res["setup"], res["setup"]) + "\nsample a",
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


# -- one step: drift against the step size ---------------------------------------------------------
#: The rules whose one-step drift equals naive's exactly in the question (drawn as markers only).
_SAME_AS_NAIVE = {"masked": "= naive, exactly", "penalty": "= naive on the first step"}


def _drift_curves(ax, lrs, drifts, slope_max_lr):
    """One log-log curve per rule. Returns {rule: fitted slope} for the rules with one."""
    from .experiments import drift_order
    slopes = {}
    for rule, drift in drifts.items():
        _, slope = drift_order(lrs, drift, max_lr=slope_max_lr, roundoff=ROUNDOFF_TOP)
        if slope is not None and rule not in _SAME_AS_NAIVE:
            slopes[rule] = slope
        label = _fix_label(rule) + (f" ({_SAME_AS_NAIVE[rule]})" if rule in _SAME_AS_NAIVE else "")
        kw = {"marker": MARKERS[rule], "color": PALETTE[rule], "label": label}
        if rule == "span":                            # small, so freeze's squares show around it
            kw.update(ms=5)
        if rule == "masked":                          # exactly on naive's points: a bold x on top
            kw.update(ls="none", ms=10, mew=2.2, zorder=5)
        elif rule == "penalty":                       # ... and a hollow triangle around them
            kw.update(ls="none", ms=13, mfc="none", mew=1.6, zorder=4)
        ax.loglog(lrs, _at_floor(drift), **kw)
    return slopes


def _guide(ax, lrs, anchor, slope, text, below=4.0):
    """A grey dashed line of the given log-log slope, ``below`` times under ``anchor`` at lrs[0]."""
    x = np.array([lrs[0], lrs[-1]])
    y = anchor / below * (x / lrs[0]) ** slope
    ax.loglog(x, y, ls="--", color="0.55", lw=1.2, zorder=2)
    ax.text(x[-1] * 1.3, y[-1], text, ha="left", va="center", fontsize=10, color="0.4")


def _slopes_box(ax, slopes, max_lr):
    lines = [f"{_fix_label(r)}: {k:.2f}" for r, k in slopes.items()]
    ax.text(0.03, 0.97, f"fitted slopes (lr \u2264 {max_lr:g}):\n" + "\n".join(lines),
            transform=ax.transAxes, ha="left", va="top", fontsize=11,
            bbox={"boxstyle": "round,pad=0.3", "fc": "white", "ec": "0.8"})


@styled
def drift_vs_lr(results, axes=None, slope_max_lr=1e-3):
    """Max |delta out1| on the batch after ONE step of each rule, against the step size.

    ``results`` is a list of ``experiments.one_step(setup, lrs=...)``, one panel each. Log-log,
    with dashed guide lines proportional to lr and lr^2, and the slopes fitted over
    lr <= ``slope_max_lr`` written in each panel. Exact zeros are drawn on the "exactly 0" row
    at the bottom; the band below 1e-12 is float64 round-off. ``axes``: one per result.
    """
    def make():
        fig = new_figure(13.0, 6.6)
        return fig, fig.subplots(1, len(results), sharey=True)
    fig, axes = _axes(axes, len(results), make)
    for ax, res in zip(axes, results):
        lrs = res["lrs"]
        rules = [k for k in res if isinstance(res[k], dict)]
        _roundoff_band(ax)
        slopes = _drift_curves(ax, lrs, {r: res[r]["drift_batch"] for r in rules}, slope_max_lr)
        small = lrs <= slope_max_lr
        if "naive" in res:
            _guide(ax, lrs[small], res["naive"]["drift_batch"][0], 1, "\u221d lr")
        if "project" in res:
            _guide(ax, lrs[small], res["project"]["drift_batch"][0], 2, "\u221d lr\u00b2")
        _slopes_box(ax, slopes, slope_max_lr)
        ax.set_ylim(ZERO_FLOOR / 5, 30)
        _decade_ticks(ax, -18, 0)
        ax.set_xlabel("step size lr (log)")
        ax.set_title(_SETUP_LABELS.get(res["setup"], res["setup"]) + ", one step, on the batch")
    axes[0].set_ylabel("max |\u0394out1| on the batch (log)")
    handles, labels = axes[0].get_legend_handles_labels()
    fig.legend(handles, labels, loc="outside lower center", ncols=4, fontsize=11)
    fig.suptitle("One step with G = [0, \u22121]: naive and mask move out1 O(lr), projection "
                 "O(lr\u00b2);\nfreezing holds it exactly (0.0), span and restore to round-off")
    return fig


# -- many steps ---------------------------------------------------------------------------------------
def _strip(ax, horizontal=True):
    """The narrow part of a broken log axis that holds what does not drift: exact zeros (on
    the "exactly 0" row) and round-off (the shaded band up to 1e-12)."""
    _roundoff_band(ax, horizontal=horizontal, label=False)
    lim = (ZERO_FLOOR / 5, ROUNDOFF_TOP * 20)
    kw = {"fontsize": 10, "color": "0.3"}
    if horizontal:
        ax.set_yscale("log")
        ax.set_ylim(*lim)
        _decade_ticks(ax, -18, -12, every=6)
        ax.text(0.99, 0.93, "round-off (\u2264 $10^{-12}$)", transform=ax.transAxes, ha="right",
                va="top", **kw)
        ax.text(0.99, ZERO_FLOOR * 2.5, "exactly 0", transform=ax.get_yaxis_transform(),
                ha="right", va="bottom", **kw)
    else:
        ax.set_xscale("log")
        ax.set_xlim(*lim)
        _decade_ticks(ax, -18, -12, every=6, axis="x")
        ax.text(0.93, 0.02, "round-off (\u2264 $10^{-12}$)", transform=ax.transAxes, ha="right",
                va="bottom", rotation=90, **kw)
        ax.text(ZERO_FLOOR * 2.5, 0.02, "exactly 0", transform=ax.get_xaxis_transform(),
                ha="left", va="bottom", rotation=90, **kw)


def _break(big, strip, horizontal=True):
    """Join the two parts of a broken axis: hide the spines where they meet, draw // marks."""
    kw = {"marker": [(-1, -0.5), (1, 0.5)], "markersize": 11, "linestyle": "none",
          "color": "0.2", "mec": "0.2", "mew": 1, "clip_on": False}
    if horizontal:                          # big above strip
        big.spines["bottom"].set_visible(False)
        big.tick_params(axis="x", which="both", bottom=False, labelbottom=False)
        big.plot([0], [0], transform=big.transAxes, **kw)
        strip.plot([0], [1], transform=strip.transAxes, **kw)
    else:                                   # strip left of big
        big.spines["left"].set_visible(False)
        big.tick_params(axis="y", which="both", left=False, labelleft=False)
        strip.plot([1], [0], transform=strip.transAxes, **kw)
        big.plot([0], [0], transform=big.transAxes, **kw)


def _drifting_range(values):
    """Log limits (10^a, 10^b) around every value above round-off."""
    v = np.concatenate([np.ravel(x) for x in values])
    v = v[v > ROUNDOFF_TOP]
    return 10.0 ** np.floor(np.log10(v.min())), 10.0 ** np.ceil(np.log10(v.max()))


def _steps_curve(axs, steps, values, rule, log):
    kw = {"color": PALETTE[rule], "marker": MARKERS[rule], "markevery": max(len(steps) // 8, 1),
          "label": _fix_label(rule)}
    if rule == "masked":                                # exactly naive's curve: dashed on top
        kw.update(ls=(0, (4, 3)), label="mask [0, 1] (= naive)", zorder=4)
    for ax in axs:
        if log:
            ax.semilogy(steps[1:], _at_floor(values[1:]), **kw)
        else:
            ax.plot(steps, values, **kw)


@styled
def trajectories(result, axes=None):
    """out1's drift (on the batch, and on unseen inputs) and out2's gain over many steps.

    ``result`` is ``experiments.trajectories(...)``. The two drift panels are broken log
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
    fig, axes = _axes(axes, 5, make)
    steps = result["steps"]
    rules = [k for k in result if isinstance(result[k], dict)]
    lim = _drifting_range([result[r][k][1:] for r in rules for k in ("drift_batch", "drift_unseen")])
    for big, strip, key, where in [(axes[0], axes[1], "drift_batch", "on the batch"),
                                   (axes[2], axes[3], "drift_unseen", "on 256 unseen inputs")]:
        for rule in rules:
            _steps_curve([big, strip], steps, result[rule][key], rule, log=True)
        big.set_ylim(*lim)
        _strip(strip)
        _break(big, strip)
        big.set_title(f"out1 drift {where}")
        big.set_ylabel("max |out1 \u2212 out1 at start| (log)")
        strip.set_xlabel("step")
        strip.sharex(big)
    _steps_curve([axes[4]], steps, result[rules[0]]["gain"], rules[0], log=False)
    for rule in rules[1:]:
        _steps_curve([axes[4]], steps, result[rule]["gain"], rule, log=False)
    axes[4].set_title("out2 gain (what G asks for)")
    axes[4].set_ylabel("mean (out2 \u2212 out2 at start)")
    axes[4].set_xlabel("step")
    handles, labels = axes[4].get_legend_handles_labels()
    fig.legend(handles, labels, loc="outside lower center", ncols=len(rules), fontsize=11)
    fig.suptitle(f"{len(steps) - 1} steps (visible setup, lr = {result['lr']:g}): freezing holds out1 "
                 "exactly everywhere; projection + restore\nholds it on the batch only, and off the "
                 "batch it drifts even more than naive; the penalty only pulls back")
    return fig


@styled
def pareto(result, axes=None):
    """out2's gain against out1's drift, per rule, step by step: the trade-off.

    ``result`` is ``experiments.trajectories(...)``. Two panels, drift on the batch and on
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
    fig, axes = _axes(axes, 4, make)
    rules = [k for k in result if isinstance(result[k], dict)]
    n = len(result["steps"]) - 1
    lim = _drifting_range([result[r][k][1:] for r in rules for k in ("drift_batch", "drift_unseen")])
    for strip, big, key, where in [(axes[0], axes[1], "drift_batch", "on the batch"),
                                   (axes[2], axes[3], "drift_unseen", "on 256 unseen inputs")]:
        for rule in rules:
            x, y = _at_floor(result[rule][key][1:]), result[rule]["gain"][1:]
            masked = rule == "masked"
            for ax in (strip, big):
                ax.plot(x, y, color=PALETTE[rule], lw=1.4, alpha=0.6,
                        ls=(0, (4, 3)) if masked else "-")
                ax.plot(x[-1:], y[-1:], marker=MARKERS[rule], color=PALETTE[rule],
                        ms=14 if masked else 12, mew=2.5 if masked else 1, ls="none", zorder=4,
                        label=_fix_label(rule) + (" (= naive)" if masked else ""))
        big.set_xscale("log")
        big.set_xlim(*lim)
        _strip(strip, horizontal=False)
        _break(big, strip, horizontal=False)
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


# -- off the batch: a slice of input space -----------------------------------------------------------
#: The colour of round-off cells (0 < |drift| <= 1e-12) in ``heldout_drift``: off the scale,
#: said in the colour bar's extension.
ROUNDOFF_COLOUR = "#E8D5F0"


@styled
def heldout_drift(result, axes=None):
    """|delta out1| over a 2-D slice of input space (x3 fixed) after the rules' steps.

    ``result`` is ``experiments.drift_over_slice(...)``. One panel per rule and one shared
    log colour scale, from the smallest to the largest drift above round-off. Two kinds of
    cell are drawn off the scale, and said to be: exactly 0.0 (hatched grey) and round-off,
    0 < |delta out1| <= 1e-12 (pale lilac, the colour bar's lower extension). The batch's
    (x1, x2) are marked; their x3 is not the slice's. ``axes``: one per rule, then one for
    the colour bar.
    """
    rules = [k for k in ("naive", "masked", "project", "project+restore", "penalty", "freeze",
                         "span") if k in result]

    def make():
        fig = new_figure(14.0, 4.8)
        grid = fig.add_gridspec(1, len(rules) + 1, width_ratios=[1] * len(rules) + [0.06])
        return fig, [fig.add_subplot(grid[0, i]) for i in range(len(rules) + 1)]
    fig, axes = _axes(axes, len(rules) + 1, make)
    lo, hi = _drifting_range([result[r] for r in rules])
    norm = matplotlib.colors.LogNorm(vmin=lo, vmax=hi)
    cmap = matplotlib.colormaps["viridis"].with_extremes(under=ROUNDOFF_COLOUR)
    extent = [result["x1"][0], result["x1"][-1], result["x2"][0], result["x2"][-1]]
    for ax, rule in zip(axes, rules):
        D = result[rule]
        ax.add_patch(Rectangle((0, 0), 1, 1, transform=ax.transAxes, facecolor="0.93",
                               hatch="//", edgecolor="0.72", lw=0, zorder=0))
        ax.imshow(np.ma.masked_equal(D, 0.0), origin="lower", extent=extent, cmap=cmap,
                  norm=norm, interpolation="nearest", zorder=1)
        ax.scatter(*result["batch"].T, s=55, facecolor="white", edgecolor="black", lw=1.3,
                   zorder=3)
        if np.all(D == 0.0):
            note = "0.0 exactly, everywhere"
        elif D.max() <= ROUNDOFF_TOP:
            note = f"0 or round-off (\u2264 {_sci(D.max())})"
        else:
            note = f"{_num(D.min())} to {_num(D.max())}"
        ax.set_title(f"{_fix_label(rule)}\n{note}", color=PALETTE[rule], fontweight="bold",
                     fontsize=12)
        ax.set_xlabel("x1")
        ax.set_xticks([0, 0.5, 1])
        ax.set_yticks([0, 0.5, 1])
        ax.set_aspect("equal")
    axes[0].set_ylabel("x2        (x3 = 0.5)")
    bar = fig.colorbar(matplotlib.cm.ScalarMappable(norm=norm, cmap=cmap), cax=axes[-1],
                       extend="min", extendfrac=0.12)
    bar.set_label("|\u0394out1| (log).  Below the bar: round-off (\u2264 $10^{-12}$);\n"
                  "hatched grey: 0.0 exactly", fontsize=11)
    steps = result["steps"]
    what = "one step" if steps == 1 else f"{steps} steps"
    fig.suptitle(f"Off the batch ({what}, lr = {result['lr']:g}, visible setup): projection still "
                 "moves out1 everywhere, O(lr); freezing holds it\nexactly; span with keep_X = the "
                 "batch freezes the hidden layers, so it IS freezing, up to round-off")
    fig.text(0.5, 0.005, "white dots: the batch's (x1, x2); their x3 is not 0.5, so no batch point "
             "lies on this slice", ha="center", va="bottom", fontsize=11, style="italic")
    return fig


# -- the optimizer's order --------------------------------------------------------------------------
_ORDER_STYLE = {"project gradient, then Adam": {"ls": "--", "mfc": "white"},
                "Adam, then project update": {"ls": "-"}}


@styled
def optimizer_order(result, axes=None, slope_max_lr=1e-3):
    """Adam holding out1 by projection, in both orders.

    ``result`` is ``experiments.optimizer_order(...)``. Three panels: the one-step drift of
    out1 on the batch against lr (log-log, with fitted slopes), the drift over many steps
    (log) and out2's gain over those steps. Both curves are projection (its colour): solid
    is the right order (project Adam's update), dashed the pitfall. ``axes``: three Axes.
    """
    from .experiments import OPTIMIZER_ORDERS, loglog_slope

    def make():
        fig = new_figure(14.0, 5.4)
        return fig, fig.subplots(1, 3)
    fig, axes = _axes(axes, 3, make)
    lrs, steps = result["lrs"], result["steps"]
    colour = PALETTE["project"]
    for name in OPTIMIZER_ORDERS:
        r, style = result[name], _ORDER_STYLE.get(name, {})
        slope = loglog_slope(lrs, r["one_step"], slope_max_lr)
        kw = {"color": colour, "marker": MARKERS["project"], **style}
        axes[0].loglog(lrs, r["one_step"], label=f"{name}: slope {slope:.2f}", ms=8, **kw)
        every = max(len(steps) // 8, 1)
        axes[1].semilogy(steps[1:], r["drift"][1:], markevery=every, label=name, **kw)
        axes[2].plot(steps, r["gain"], markevery=every, label=name, **kw)
    small = lrs <= slope_max_lr
    first = {name: result[name]["one_step"][0] for name in OPTIMIZER_ORDERS}
    wrong, right = list(OPTIMIZER_ORDERS)
    _guide(axes[0], lrs[small], first[wrong], 1, "\u221d lr")
    _guide(axes[0], lrs[small], first[right], 2, "\u221d lr\u00b2")
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
    setup = _SETUP_LABELS.get(result["setup"], result["setup"])
    fig.supxlabel(f"{setup}; projection onto the null space of out1's Jacobian on the batch; "
                  "G = [0, \u22121]", fontsize=11, style="italic")
    return fig


# -- the cost of a projection (from the bench's saved measurements) ------------------------------

#: The dense-Jacobian way, for comparison only: not a fix, so not in PALETTE.
DENSE_GREY = "#7f7f7f"


def _projection_cost_takeaway(d):
    dense = ~np.isnan(d["dense_s"])
    if not dense.any():
        return "Gram projection: cost against the number of constraints (dense Jacobian too large to build)"
    i = np.flatnonzero(dense)[-1]
    speed = d["dense_s"][i] / d["gram_s"][i]
    memory = d["dense_peak_bytes"][i] / d["gram_peak_bytes"][i]
    return (f"Never build J: at n = {int(d['n'][i])} constraints the Gram projection is "
            f"{speed:.0f}x faster\nand needs {memory:.0f}x less memory than a dense Jacobian")


@styled
def projection_cost(results, ax=None, dtype="float64"):
    """Time and peak memory of ``fixes.project`` (Gram) and of the dense-Jacobian projection
    against the number of constrained rows n, log-log.

    results : the dict of ``bench.run`` (or ``load()``)
    ax      : None for a new two-panel figure; one Axes (time only) or two (time, memory)
    Returns the Figure.
    """
    from .bench import projection_cost_data
    d = projection_cost_data(results, dtype)
    if ax is None:
        fig = new_figure()
        axes = list(fig.subplots(1, 2))
    else:
        axes = list(ax) if np.iterable(ax) else [ax]
        fig = axes[0].figure
    n = d["n"]
    time_ax = axes[0]
    time_ax.plot(n, d["dense_s"] * 1e3, "s-", color=DENSE_GREY, label="dense J, then solve")
    time_ax.plot(n, d["gram_s"] * 1e3, "o-", color=PALETTE["project"], label="Gram (fixes.project)")
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
    fig.suptitle(_projection_cost_takeaway(d) + f" ({sizes} tanh, P = {d['n_params']:,}, {d['dtype']})")
    return fig
