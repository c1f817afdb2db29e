"""The deck (``python -m mlp_ref slides``): at least 12 slides in large type with nothing past an
edge or over a figure, the guarantees as the rules state them, speaker notes for every slide, the
teacher's guide's 90-minute plan following it, and the same bytes twice."""
import re

import pytest
from _drawn import cut_off_texts
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


@pytest.mark.slow
def test_every_slide_is_legible_and_nothing_is_past_an_edge():
    from mlp_ref.plots import slides as drawing  # matplotlib
    for number, fig in enumerate(slides.draw(), 1):
        assert cut_off_texts(fig) == [], number
        assert drawing.overlaps_image(fig) == [], number
        sizes = [size for *_, size in drawing.text_extents(fig)]
        assert min(sizes) >= 18, (number, min(sizes))       # large type: nothing under 18 pt


@pytest.mark.slow
def test_the_command_writes_the_pdf_and_its_notes_the_same_bytes_twice(tmp_path):
    first, second = tmp_path / "a.pdf", tmp_path / "b.pdf"
    assert cli.main(["slides", "--out", str(first)]) == 0
    assert cli.main(["slides", "--out", str(second)]) == 0
    data = first.read_bytes()
    assert data.startswith(b"%PDF") and data == second.read_bytes()
    assert len(re.findall(rb"/Type /Page\b", data)) == len(slides.deck())
    assert b"CreationDate" not in data and b"ModDate" not in data
    notes = (tmp_path / "a.notes.md").read_text(encoding="utf-8")
    assert notes.replace("b.pdf", "a.pdf") == (tmp_path / "b.notes.md").read_text(
        encoding="utf-8").replace("b.pdf", "a.pdf")
