"""The look shared by every figure: colours, markers, labels, the style sheet, and the way a
plot function takes the caller's axes or makes its own figure.

* one colour per fix, :data:`PALETTE` (Okabe-Ito colours, safe for colour-blind readers),
  and one marker per fix, :data:`MARKERS`, so that no curve is told apart by colour alone;
* the style :data:`STYLE` (no font under 10 pt at slide size), applied by :func:`styled`
  through ``matplotlib.rc_context``, so nothing leaks into the caller's matplotlib settings;
* figures at least 1000 px wide (:func:`new_figure`); every plot function takes ``axes=``
  (the caller's, checked by :func:`take_axes`) or makes its own.

We build figures with the object-oriented ``matplotlib.figure.Figure`` rather than pyplot:
no global state, no display needed, and nothing left open between figures.
"""
from __future__ import annotations

import functools
import re

import matplotlib
import matplotlib.axis
import numpy as np
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure
from matplotlib.text import Text

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


#: The contrast against white that text in a fix's colour keeps (WCAG 2's level AA for normal
#: text, 4.5:1): orange (2.0:1) and grey (2.8:1) lines read well, words in them fade on a projector.
TEXT_CONTRAST = 4.5


def contrast(colour, background="white"):
    """The WCAG 2 contrast ratio (L1 + 0.05) / (L2 + 0.05) of two colours, from 1 to 21."""
    def luminance(c):
        rgb = np.array(matplotlib.colors.to_rgb(c))
        linear = np.where(rgb <= 0.03928, rgb / 12.92, ((rgb + 0.055) / 1.055) ** 2.4)
        return float(linear @ [0.2126, 0.7152, 0.0722])
    hi, lo = sorted((luminance(colour), luminance(background)), reverse=True)
    return (hi + 0.05) / (lo + 0.05)


def text_colour(fix):
    """The colour of words about ``fix`` (a title, a label): its PALETTE colour, darkened in
    steps of 5% toward black until it keeps TEXT_CONTRAST against white."""
    rgb = np.array(matplotlib.colors.to_rgb(PALETTE.get(fix, "black")))
    while contrast(tuple(rgb)) < TEXT_CONTRAST:
        rgb = rgb * 0.95
    return tuple(float(c) for c in rgb)


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
    # Titles at a fixed height: left to matplotlib (None), each draw measures every axis's
    # tick labels to lift a title clear of top-side ticks, which these figures never have
    "axes.titley": 1.0,
}


def styled(plot):
    """Run a plot function inside ``rc_context(STYLE)``: every figure gets the same look, and
    its log axes label their ticks in plain text (``plain_powers``) and, when long, tick their
    decades only (``decades_only``)."""
    @functools.wraps(plot)
    def wrapper(*args, **kwargs):
        with matplotlib.rc_context(STYLE):
            fig = plot(*args, **kwargs)
        if isinstance(fig, Figure):
            plain_powers(fig)
            decades_only(fig)
        return fig
    return wrapper


#: A log axis that spans at least this many decades ticks its decades only (``decades_only``).
LONG_LOG_AXIS = 3


def decades_only(fig):
    """Take matplotlib's minor ticks off every log axis of ``fig`` that spans LONG_LOG_AXIS
    decades or more.

    There they mark 2, 3, ..., 9 times each power of ten: marks of 2 points that nobody reads
    off a slide, every one a tick of five artists that each layout pass and each draw measures
    again (without them these figures draw about a fifth faster). A shorter log axis keeps
    them: there they carry the labels (2×10⁻³). Axes ticked otherwise (``axes.decade_ticks``, a
    caller's locator) are left alone."""
    for ax in fig.axes:
        for axis in (ax.xaxis, ax.yaxis):
            if axis.get_scale() == "log" and type(axis.get_minor_locator()) is matplotlib.ticker.LogLocator:
                lo, hi = axis.get_view_interval()
                if 0 < lo < hi and np.log10(hi / lo) >= LONG_LOG_AXIS:
                    axis.set_minor_locator(matplotlib.ticker.NullLocator())


# -- powers of ten, in plain text ---------------------------------------------------------------
# The figures write 10^-12 as "10⁻¹²" in Unicode superscripts rather than as mathtext
# ("$10^{-12}$"): DejaVu Sans has the glyphs, and mathtext runs a TeX parser on every label it
# has not cached (a run of the figures command parsed 216, 90 of them afresh).
SUPERSCRIPTS = str.maketrans("0123456789-", "⁰¹²³⁴⁵⁶⁷⁸⁹⁻")


def power(k, base=10):
    """base^k as text: power(-12) is 10⁻¹²."""
    return f"{base}{str(k).translate(SUPERSCRIPTS)}"


#: matplotlib's log tick label in mathtext: [sign][coefficient \times] base ^ {exponent}
_MATHTEXT_POWER = re.compile(r"\$\\mathdefault\{(-?)(?:([\d.]+)\\times)?(\d+)\^\{(-?\d+)\}\}\$")


class PowerFormatter(matplotlib.ticker.LogFormatterSciNotation):
    """matplotlib's log-axis tick labels, the same ones (10⁻³; 2×10⁻³ where it labels minor
    ticks), written with ``power`` instead of mathtext."""

    def __call__(self, x, pos=None):
        label = super().__call__(x, pos)
        match = _MATHTEXT_POWER.fullmatch(label)
        if match is None:                   # "" (no label), or a form we do not rewrite
            return label
        sign, coefficient, base, k = match.groups()
        return ("\u2212" if sign else "") + (f"{coefficient}\u00d7" if coefficient else "") + power(k, base)


def plain_powers(fig):
    """Give every log axis of ``fig`` that has matplotlib's default tick labels the
    ``PowerFormatter`` (by class: the formatter keeps its base and settings as the scale made
    them). Axes labelled otherwise (``decade_ticks``, a caller's formatter) are left alone."""
    for ax in fig.axes:
        for axis in (ax.xaxis, ax.yaxis):
            for formatter in (axis.get_major_formatter(), axis.get_minor_formatter()):
                if type(formatter) is matplotlib.ticker.LogFormatterSciNotation:
                    formatter.__class__ = PowerFormatter


def cut_off_texts(fig):
    """The texts of ``fig`` that a reader cannot read whole: titles, labels, legends and notes
    (not tick labels, which matplotlib keeps beyond an axis's limits without drawing them)
    that do not lie wholly inside the figure, such as a title longer than its panel. Reads the
    positions of the last draw: call it after ``savefig``."""
    renderer = FigureCanvasAgg(fig).get_renderer()
    box, out = fig.bbox, []
    for text in _texts_but_ticks(fig):
        if text.get_visible() and text.get_text():
            extent = text.get_window_extent(renderer)
            if min(extent.x0 - box.x0, extent.y0 - box.y0, box.x1 - extent.x1, box.y1 - extent.y1) < 0:
                out.append(text.get_text())
    return out


def _texts_but_ticks(artist):
    """Every Text in ``artist``'s tree but the ticks' labels: of an axis, only its label and its
    offset text (asking an axis for its ticks would locate and make them all again: most of
    the time this check takes)."""
    if isinstance(artist, matplotlib.axis.Axis):
        yield artist.label
        yield artist.offsetText
        return
    if isinstance(artist, Text):
        yield artist
    for child in artist.get_children():
        yield from _texts_but_ticks(child)


def new_figure(width=11.0, height=5.0, dpi=110):
    """A Figure at slide size: 11 in x 110 dpi = 1210 px wide (16:9 slides are >= 1280)."""
    return Figure(figsize=(width, height), dpi=dpi, layout="constrained")


def take_axes(axes, count, make):
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


#: How each fix is named in a legend or a panel title.
FIX_LABELS = {"naive": "naive", "masked": "mask [0, 1]", "freeze": "freeze (var_list)",
              "heads": "separate heads", "towers": "two towers", "project": "project",
              "project+restore": "project + restore", "penalty": "penalty", "span": "span (GPM)"}


def fix_label(name):
    return FIX_LABELS.get(name, name)


SETUP_LABELS = {"seed": "seed: 3-4-2 sigmoid", "visible": "visible: 3-16-16-2 tanh"}


def signed(x):
    """+0.59 / \u22120.14 with a true minus sign."""
    return f"{x:+.2f}".replace("-", "\u2212")


def num(x):
    """A magnitude for a label: 0.39 or 9.1 as they are, 1.8e-04 as 1.8 x 10^-4."""
    return f"{x:.2g}" if 1e-2 <= abs(x) < 1e3 else sci(x)


def sci(x):
    """1.8e-04 as 1.8×10⁻⁴, readable on a slide."""
    mantissa, exponent = f"{x:.1e}".split("e")
    return f"{mantissa.replace('-', chr(0x2212))}\u00d7{power(int(exponent))}"
