"""The deck's slides (``mlp_ref.classroom.deck``): one 16:9 Figure per slide, large type for the back of a
room: a title, a few lines of text, a figure of the package and a formula in mathtext (no LaTeX).

A figure is drawn by its own plot function and becomes the slide itself (``onto_slide``): its type
grows to slide size, its layout is redone inside the slide's free space, and the slide's texts are
written around it. In the PDF every text stays text, every line a vector; only heatmaps are
images, resampled at the projector's resolution (``PROJECTION_DPI``).
"""
from __future__ import annotations

import textwrap

import matplotlib
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.backends.backend_pdf import PdfPages
from matplotlib.figure import Figure
from matplotlib.layout_engine import ConstrainedLayoutEngine
from matplotlib.text import Text

#: The slide's size: 16:9 at 13.33 x 7.5 inches, a PDF page of 960 x 540 pt.
SIZE = (960 / 72, 540 / 72)
#: Type sizes in points on that page. A slide is projected whole, so a size is a fraction of the
#: projected height: 18 pt is 1/30 of it (on a screen 2 m high a line is about 7 cm tall,
#: legible from the back of a lecture hall; on a 1920 x 1080 projector, 36 pixels). Nothing
#: smaller is written, in the slide's texts or in its figure (``SMALLEST_PT``).
TITLE_PT, TEXT_PT, FORMULA_PT, SMALL_PT = 34, 22, 26, 18
SMALLEST_PT = 18
#: How much a figure's type grows on a slide, before it is raised to SMALLEST_PT: the figures'
#: texts of 10 to 13 pt (``style``) all become 18 pt, their titles of 15 pt 20 pt.
GROW_PT = 5
#: The resolution of a slide's images (heatmaps): a 1920 x 1080 projector shows the page at
#: 1920 px / 13.33 in = 144 pixels per inch.
PROJECTION_DPI = 144
#: Characters per line of text at TEXT_PT (the slide's width, with margins), and the line spacing
#: in figure heights.
WRAP = 78
LINE = 0.062
#: The ``gid`` of the slide's own texts (title, lines, formula, number), as opposed to its figure's.
SLIDE_TEXT = "slide"


def onto_slide(fig, box):
    """The package Figure ``fig`` (drawn by its plot function, with the constrained layout of
    ``style.new_figure``) made into a slide: SIZE, its type grown by GROW_PT and never under
    SMALLEST_PT, its suptitle left to the slide's title and lines, and its axes, legends (figure
    legends placed "outside" its panels) and figure texts laid out inside ``box`` (left, bottom,
    width, height in figure fractions). A text longer than its room is wrapped
    (``_wrap_long_texts``). Returns ``fig``, with its layout fixed."""
    engine = fig.get_layout_engine()
    if not isinstance(engine, ConstrainedLayoutEngine):
        raise ValueError(f"fig: a slide lays out a figure with the constrained layout, not {engine!r}")
    for text in fig.findobj(Text):
        text.set_fontsize(max(SMALLEST_PT, text.get_fontsize() + GROW_PT))
    for ax in fig.axes:              # ticks made at a later draw get the same size
        for name, axis in (("x", ax.xaxis), ("y", ax.yaxis)):
            for which, ticks in (("major", axis.get_major_ticks()), ("minor", axis.get_minor_ticks())):
                size = ticks[0].label1.get_fontsize() if ticks else SMALLEST_PT
                ax.tick_params(axis=name, which=which, labelsize=max(SMALLEST_PT, size))
    if fig.get_suptitle():
        fig.suptitle("", in_layout=False)
    fig.set_dpi(PROJECTION_DPI)                  # laid out as write_pdf draws it
    fig.set_size_inches(SIZE)
    engine.set(rect=box)
    fig.draw_without_rendering()
    if _wrap_long_texts(fig, box):
        fig.draw_without_rendering()
    fig.set_layout_engine("none")
    left, bottom, width, height = box
    # the layout kept room inside box for the figure's legends and texts; it placed them by the
    # whole page: move them into box
    for legend in fig.legends:
        legend.set_bbox_to_anchor(box, transform=fig.transFigure)
    for text in fig.texts:
        if text.get_transform() != fig.transSubfigure:
            raise ValueError(f"fig: a figure text placed otherwise than in figure fractions: {text!r}")
        x, y = text.get_position()
        text.set_position((left + x * width, bottom + y * height))
    return fig


def _wrap_long_texts(fig, box):
    """Wrap every text longer than its room, at the width that fits it: a panel's title, its
    x label and its texts (in the panel's coordinates) at the panel's width, its y label at
    its height, the figure's texts and legend titles at the width of ``box``. True if any was."""
    renderer = FigureCanvasAgg(fig).get_renderer()
    room = box[2] * fig.bbox.width
    texts = [(fig.texts + [leg.get_title() for leg in fig.legends], room, "width")]
    for ax in fig.axes:
        panel = ax.get_window_extent(renderer)
        texts += [([ax.title, ax.xaxis.label], panel.width, "width"), ([ax.yaxis.label], panel.height, "height")]
        texts += [([t for t in ax.texts if t.get_transform() == ax.transAxes], panel.width, "width")]
    changed = False
    for group, room, side in texts:
        for text in group:
            have = getattr(text.get_window_extent(renderer), side)
            if text.get_visible() and text.get_text() and have > room:
                _fit(text, room / have)
                changed = True
    return changed


def _fit(text, ratio):
    """Wrap ``text``'s lines at ``ratio`` times the longest one's length (in characters)."""
    lines = text.get_text().split("\n")
    width = max(8, int(max(map(len, lines)) * ratio))
    text.set_text("\n".join(textwrap.fill(line, width) for line in lines))


def wrapped(lines, width):
    """Each line wrapped at ``width`` characters; a line starting "- " as a bullet."""
    out = []
    for line in lines:
        bullet = line.startswith("- ")
        body = line[2:] if bullet else line
        parts = textwrap.wrap(body, width - 2 if bullet else width) or [""]
        out += [("\u2022 " if bullet else "") + parts[0]] + [("  " if bullet else "") + p for p in parts[1:]]
    return out


def slide(spec, number, total, figure=None):
    """One slide as a Figure. ``spec``: {"title", "lines" (list of str; "- " starts a bullet),
    "formula" (mathtext or None), "kind" ("title" or "text")}; ``figure``: a package Figure or
    None. The lines run across the top, the figure fills the space between them and the
    formula (``onto_slide``)."""
    lines, formula = wrapped(spec["lines"], WRAP), spec.get("formula")
    if figure is None:
        fig = Figure(figsize=SIZE, dpi=PROJECTION_DPI)
    else:
        bottom, top = (0.15 if formula else 0.05), 0.84 - len(lines) * LINE - 0.01
        fig = onto_slide(figure, (0.02, bottom, 0.96, top - bottom))
    fig.patch.set_facecolor("white")
    own = {"gid": SLIDE_TEXT}
    if spec.get("kind") == "title":
        fig.text(0.5, 0.62, spec["title"], ha="center", va="center", fontsize=TITLE_PT + 6,
                 fontweight="bold", **own)
        for i, line in enumerate(lines):
            fig.text(0.5, 0.45 - i * 0.075, line, ha="center", va="center", fontsize=TEXT_PT, **own)
        return fig
    fig.text(0.04, 0.93, spec["title"], ha="left", va="center", fontsize=TITLE_PT, fontweight="bold",
             **own)
    fig.add_artist(matplotlib.lines.Line2D([0.04, 0.96], [0.875, 0.875], color="#0072B2", lw=3))
    for i, line in enumerate(lines):
        fig.text(0.04, 0.84 - i * LINE, line, ha="left", va="top", fontsize=TEXT_PT, **own)
    if formula:
        fig.text(0.5, 0.07, formula, ha="center", va="center", fontsize=FORMULA_PT,
                 bbox={"boxstyle": "round,pad=0.35", "fc": "#EEF4FA", "ec": "#0072B2"}, **own)
    fig.text(0.985, 0.015, f"{number}/{total}", ha="right", va="bottom", fontsize=SMALL_PT,
             color="0.45", **own)
    return fig


def slide_texts(fig):
    """The slide's own texts: its title, lines, formula and number (not its figure's)."""
    return [t for t in fig.texts if t.get_gid() == SLIDE_TEXT]


def figure_parts(fig):
    """What the slide's figure draws, each a box: its axes with their labels and ticks, its
    legends and its own texts."""
    return list(fig.axes) + list(fig.legends) + [t for t in fig.texts if t.get_gid() != SLIDE_TEXT]


def overlaps_figure(fig):
    """The slide's texts (with the formula's box) that run into a part of its figure, by their
    extents on the drawn page."""
    renderer = FigureCanvasAgg(fig).get_renderer()
    parts = [p.get_tightbbox(renderer) for p in figure_parts(fig) if p.get_visible()]
    out = []
    for text in slide_texts(fig):
        box = text.get_window_extent(renderer)
        if text.get_bbox_patch() is not None:
            box = matplotlib.transforms.Bbox.union([box, text.get_bbox_patch().get_window_extent(renderer)])
        if any(p is not None and p.width > 0 and box.overlaps(p) for p in parts):
            out.append(text.get_text())
    return out


def past_the_page(fig):
    """The parts of the slide's figure (``figure_parts``) that reach past an edge of the page."""
    renderer = FigureCanvasAgg(fig).get_renderer()
    page, out = fig.bbox, []
    for part in figure_parts(fig):
        box = part.get_tightbbox(renderer)
        if part.get_visible() and box is not None and (
                box.x0 < page.x0 or box.y0 < page.y0 or box.x1 > page.x1 or box.y1 > page.y1):
            out.append(part)
    return out


def write_pdf(f, slides, metadata):
    """The slides as the pages of one PDF on the binary file ``f``, images at PROJECTION_DPI:
    ``metadata`` with its dates set to None records no time, so the same slides give the same
    bytes."""
    with PdfPages(f, metadata=metadata) as pages:
        for fig in slides:
            pages.savefig(fig, dpi=PROJECTION_DPI)        # the images' resolution; text stays text
