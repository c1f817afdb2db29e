"""The deck (``python -m mlp_ref slides``): at least 12 slides in large type with nothing past an
edge or over a figure, the guarantees as the rules state them, speaker notes for every slide, the
teacher's guide's 90-minute plan following it, and the same bytes twice.

"Large type" is read from the PDF itself (``_pdf``): the page is 16:9, 960 x 540 pt, and a slide
is projected whole, so a size in points is a fraction of the projected height. Every text run,
the figures' tick labels and legends included, is at least 18 pt (1/30 of the height); an image
has at least 144 pixels per inch of the page (a 1920 x 1080 projector's own: 1920 px over
960 pt = 13.33 in)."""
import re

import pytest
from _drawn import cut_off_texts
from _pdf import Pdf, page_marks
from _runs import ROOT

from mlp_ref.classroom import cli
from mlp_ref.classroom import deck as slides
from mlp_ref.measurements import rules


def test_the_deck_covers_the_class_minute_by_minute():
    deck = slides.deck()
    assert len(deck) >= 12
    minutes = [s["minutes"] for s in deck]
    assert minutes[0][0] == 0 and minutes[-1][1] == 90
    assert all(a[1] == b[0] for a, b in zip(minutes, minutes[1:]))     # no gap, no overlap
    titles = [s["title"] for s in deck]
    for wanted in ("The question", "What each fix guarantees", "Misconceptions", "Exercises"):
        assert wanted in titles


def test_the_table_of_guarantees_is_the_rules_own():
    table = next(s for s in slides.deck() if s["title"] == "What each fix guarantees")
    assert table["lines"] == [f"- {name}: {rule.guarantee}" for name, rule in rules.RULES.items()]


def test_the_notes_have_every_slide_with_its_minutes():
    deck = slides.deck()
    text = slides.notes(deck, "class.pdf")
    for number, s in enumerate(deck, 1):
        start, end = s["minutes"]
        assert f"## Slide {number}: {s['title']} (minutes {start}\u2013{end})" in text
        assert s["notes"] in text


def test_the_teachers_plan_follows_the_deck():
    """Each row of tutorials/README.md's 90-minute plan names slides s-t and minutes a-b: the
    deck's slides s..t cover exactly those minutes, and the rows cover every slide in order."""
    guide = (ROOT / "tutorials" / "README.md").read_text(encoding="utf-8")
    plan = guide.split("## A 90-minute class")[1].split("\n## ")[0]
    rows = re.findall(r"^\| (\d+)\u2013(\d+) \| (\d+)(?:\u2013(\d+))? \|", plan, flags=re.M)
    deck = slides.deck()
    covered = []
    for a, b, s, t in rows:
        s, t = int(s), int(t or s)
        assert (deck[s - 1]["minutes"][0], deck[t - 1]["minutes"][1]) == (int(a), int(b)), (a, b, s, t)
        covered += list(range(s, t + 1))
    assert covered == list(range(1, len(deck) + 1))
    assert f"({len(deck)} slides" in plan


#: The projected page: 16:9 at 960 x 540 pt; text at least 1/30 of its height; images at a
#: 1920 x 1080 projector's resolution.
PAGE_PT, SMALLEST_PT, PROJECTOR_PX = (960.0, 540.0), 18.0, 1920


def test_the_pdf_reader_reads_the_sizes_and_resolutions_that_matplotlib_writes():
    """The reader of the size tests, on a page whose every size is known: a 20 pt text, a 13 pt
    one turned by 90 degrees, a 7 x 3 pixel image saved at 144 dpi (its pixels, however placed,
    at 144 per inch: matplotlib places it at 72 * pixels / dpi points)."""
    import io

    import numpy as np
    from matplotlib.figure import Figure

    fig = Figure(figsize=(3, 2))
    fig.text(0.1, 0.8, "twenty", fontsize=20)
    fig.text(0.5, 0.1, "thirteen", fontsize=13, rotation=90)
    fig.add_axes((0.4, 0.3, 0.5, 0.5)).imshow(np.arange(21.0).reshape(3, 7), interpolation="nearest")
    fig.axes[0].set_axis_off()
    buffer = io.BytesIO()
    fig.savefig(buffer, format="pdf", dpi=144)
    pdf = Pdf(buffer.getvalue())
    (page,) = pdf.pages()
    assert pdf.media_box(page) == [0, 0, 216, 144]
    texts, images = page_marks(pdf, page)
    assert sorted(round(size, 9) for size, _ in texts) == [13, 20]
    (across, down), = images
    assert abs(across - 144) < 1e-6 and abs(down - 144) < 1e-6


@pytest.fixture(scope="module")
def written(tmp_path_factory):
    """The deck written twice by the command: the two PDFs' paths."""
    folder = tmp_path_factory.mktemp("deck")
    first, second = folder / "a.pdf", folder / "b.pdf"
    assert cli.main(["slides", "--out", str(first)]) == 0
    assert cli.main(["slides", "--out", str(second)]) == 0
    return first, second


@pytest.mark.slow
def test_every_text_is_18_pt_and_every_image_at_projection_resolution_in_the_pdf(written):
    pdf = Pdf(written[0].read_bytes())
    pages = pdf.pages()
    assert len(pages) == len(slides.deck())
    least = PROJECTOR_PX / (PAGE_PT[0] / 72)                      # 144 pixels per inch
    for number, page in enumerate(pages, 1):
        assert pdf.media_box(page) == [0, 0, *PAGE_PT], number
        texts, images = page_marks(pdf, page)
        smallest = min(size for size, _ in texts)
        assert smallest >= SMALLEST_PT - 1e-9, (number, smallest, [t for s, t in texts if s == smallest])
        for across, down in images:
            assert min(across, down) >= least - 1e-6, (number, across, down)


@pytest.mark.slow
def test_the_figures_are_drawn_on_the_page_their_words_as_text(written):
    """Each figure's axis labels are text runs of its page (a picture of a figure has none)."""
    pdf = Pdf(written[0].read_bytes())
    pages = dict(zip([s["title"] for s in slides.deck()], pdf.pages()))
    for title, words in [("The question", b"sample"), ("Restoring", b"step size lr \\(log\\)"),
                         ("A real task", b"memory size m")]:
        shown = b" ".join(text for _, text in page_marks(pdf, pages[title])[0])
        assert words in shown, title


@pytest.mark.slow
def test_every_slide_is_legible_and_nothing_is_past_an_edge():
    """No text cut off or past the page, none of the slide's texts over its figure, and no
    legend of more than 6 entries."""
    from mlp_ref.plots import slides as drawing  # matplotlib
    for number, fig in enumerate(slides.draw(), 1):
        assert cut_off_texts(fig) == [], number
        assert drawing.overlaps_figure(fig) == [], number
        assert drawing.past_the_page(fig) == [], number
        legends = list(fig.legends) + [ax.get_legend() for ax in fig.axes if ax.get_legend()]
        assert all(len(legend.get_texts()) <= 6 for legend in legends), number


@pytest.mark.slow
def test_the_command_writes_the_pdf_and_its_notes_the_same_bytes_twice(written):
    first, second = written
    data = first.read_bytes()
    assert data.startswith(b"%PDF") and data == second.read_bytes()
    assert len(re.findall(rb"/Type /Page\b", data)) == len(slides.deck())
    assert b"CreationDate" not in data and b"ModDate" not in data
    notes = first.with_suffix(".notes.md").read_text(encoding="utf-8")
    assert notes.replace("b.pdf", "a.pdf") == second.with_suffix(".notes.md").read_text(
        encoding="utf-8").replace("b.pdf", "a.pdf")
