"""README.md is for the class: short, and in the order a teacher reads it."""
from _runs import ROOT

README = (ROOT / "README.md").read_text()


def test_the_readme_is_at_most_2500_words():
    assert len(README.split()) <= 2500


def test_it_leads_with_the_question_then_the_two_commands_then_the_lessons():
    order = ["**The question**", "## Quick start", "## Tutorials", "**Notebooks.**", "**The explorer.**",
             "**Exercises.**", "## Figures", "## What the answers guarantee"]
    places = [README.index(mark) for mark in order]
    assert places == sorted(places)
    assert "pip install -e '.[test]'" in README.split("## Quick start", 1)[1].split("##", 1)[0]
