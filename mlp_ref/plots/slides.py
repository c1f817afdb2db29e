"""The deck's slides (``mlp_ref.classroom.deck``): one 16:9 Figure per slide, large type for the back of a
room: a title, a few lines of text, a figure of the package (drawn by its own plot function,
placed as an image) and a formula in mathtext (no LaTeX)."""
from __future__ import annotations

import io
import textwrap

import matplotlib
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.backends.backend_pdf import PdfPages
from matplotlib.figure import Figure

#: The slide's size: 16:9 at 13.33 x 7.5 inches (a projector's 1920 x 1080 at 144 dpi).
SIZE = (13.333, 7.5)
#: Type sizes in points. 18 pt is 1/30 of the slide's height: on a screen 2 m high a line is
#: about 7 cm tall, legible from the back of a lecture hall. Nothing smaller is written.
TITLE_PT, TEXT_PT, FORMULA_PT, SMALL_PT = 34, 22, 26, 18
#: Characters per line of text at TEXT_PT (the slide's width, with margins), and the line spacing
#: in figure heights.
WRAP = 70
LINE = 0.062


def figure_image(fig, dpi=110):
    """A drawn Figure as an RGB array (the figure's PNG, read back): a slide places it as an
    image, so every figure looks as it does in figures/."""
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", dpi=dpi)
    buffer.seek(0)
    return matplotlib.image.imread(buffer, format="png")


def wrapped(lines, width):
    """Each line wrapped at ``width`` characters; a line starting "- " as a bullet."""
    out = []
    for line in lines:
        bullet = line.startswith("- ")
        body = line[2:] if bullet else line
        parts = textwrap.wrap(body, width - 2 if bullet else width) or [""]
        out += [("\u2022 " if bullet else "") + parts[0]] + [("  " if bullet else "") + p for p in parts[1:]]
    return out


def slide(spec, number, total, image=None):
    """One slide as a Figure. ``spec``: {"title", "lines" (list of str; "- " starts a bullet),
    "formula" (mathtext or None), "kind" ("title" or "text")}; ``image``: an RGB array (a
    package figure) or None. The lines run across the top, the figure fills the space between
    them and the formula, as large as it fits with its own proportions."""
    fig = Figure(figsize=SIZE, dpi=100)
    fig.patch.set_facecolor("white")
    if spec.get("kind") == "title":
        fig.text(0.5, 0.62, spec["title"], ha="center", va="center", fontsize=TITLE_PT + 6,
                 fontweight="bold")
        for i, line in enumerate(wrapped(spec["lines"], WRAP)):
            fig.text(0.5, 0.45 - i * 0.075, line, ha="center", va="center", fontsize=TEXT_PT)
        return fig
    fig.text(0.04, 0.93, spec["title"], ha="left", va="center", fontsize=TITLE_PT, fontweight="bold")
    fig.add_artist(matplotlib.lines.Line2D([0.04, 0.96], [0.875, 0.875], color="#0072B2", lw=3))
    lines = wrapped(spec["lines"], WRAP)
    for i, line in enumerate(lines):
        fig.text(0.04, 0.84 - i * LINE, line, ha="left", va="top", fontsize=TEXT_PT)
    formula = spec.get("formula")
    if image is not None:
        bottom, top = (0.16 if formula else 0.05), 0.84 - len(lines) * LINE - 0.015
        height, width = image.shape[:2]
        scale = min(0.92 * SIZE[0] / width, (top - bottom) * SIZE[1] / height)   # inches per pixel
        w, h = width * scale / SIZE[0], height * scale / SIZE[1]
        ax = fig.add_axes((0.5 - w / 2, bottom + (top - bottom - h) / 2, w, h))
        ax.imshow(image, interpolation="antialiased")
        ax.set_axis_off()
    if formula:
        fig.text(0.5, 0.075, formula, ha="center", va="center", fontsize=FORMULA_PT,
                 bbox={"boxstyle": "round,pad=0.35", "fc": "#EEF4FA", "ec": "#0072B2"})
    fig.text(0.985, 0.015, f"{number}/{total}", ha="right", va="bottom", fontsize=SMALL_PT,
             color="0.45")
    return fig


def text_extents(fig):
    """(text, x0, x1, y0, y1, size) of every text on the slide, in figure coordinates."""
    renderer = FigureCanvasAgg(fig).get_renderer()
    out = []
    for text in fig.texts:
        box = text.get_window_extent(renderer).transformed(fig.transFigure.inverted())
        out.append((text.get_text(), box.x0, box.x1, box.y0, box.y1, text.get_fontsize()))
    return out


def overlaps_image(fig):
    """The texts that run into the slide's image (its axes), by their extents."""
    renderer = FigureCanvasAgg(fig).get_renderer()
    out = []
    for ax in fig.axes:
        box = ax.get_position()
        for text in fig.texts:
            t = text.get_window_extent(renderer).transformed(fig.transFigure.inverted())
            if t.x1 > box.x0 and t.x0 < box.x1 and t.y1 > box.y0 and t.y0 < box.y1:
                out.append(text.get_text())
    return out


def write_pdf(f, slides, metadata):
    """The slides as the pages of one PDF on the binary file ``f``: ``metadata`` with its dates
    set to None records no time, so the same slides give the same bytes."""
    with PdfPages(f, metadata=metadata) as pages:
        for fig in slides:
            pages.savefig(fig)
