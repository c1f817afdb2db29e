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
