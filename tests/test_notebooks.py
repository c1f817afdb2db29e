"""Every tutorial opens as a notebook (jupytext) and runs in a real Jupyter kernel (nbclient):
its narration is markdown, its figures are PNG outputs, and no cell fails.

Needs the [notebooks] extra (jupytext, nbclient, ipykernel): skipped with a reason without it,
a failure in CI. The notebooks run two at a time, each in its own kernel, started in the
background as soon as the tests are collected (tests/_background.py).
"""
import base64
import re

import pytest

from mlp_ref import tutorial

import _background
from _background import NOTEBOOKS
from _extras import require

PNG = b"\x89PNG\r\n\x1a\n"


@pytest.fixture(scope="module")
def notebooks():
    """name -> the executed notebook (``_background._Notebooks``: started when the tests were
    collected, so that the kernels run while this process works through other tests)."""
    outcome = _background.result("notebooks")
    if "missing" in outcome:
        require(outcome["missing"], "notebooks")
    assert "error" not in outcome, outcome.get("error")
    return outcome["notebooks"]


def test_the_notebooks_are_the_tutorials_but_07():
    assert [p.name[:2] for p in NOTEBOOKS] == ["01", "02", "03", "04", "05", "06", "08"]


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_the_narration_is_markdown(path, notebooks):
    nb = notebooks[path.name]
    markdown = [c.source for c in nb.cells if c.cell_type == "markdown"]
    ours = [c.source for c in tutorial.cells(path.read_text()) if c.kind == "markdown"]
    assert markdown == ours and len(markdown) >= 6
    assert markdown[0].startswith("# Tutorial ") and "stackoverflow.com/questions/42182233" in markdown[0]
    assert sum(m.startswith("## ") for m in markdown) >= 5
    assert any("$" in m for m in markdown)                            # math, in LaTeX
    code = "\n".join(c.source for c in nb.cells if c.cell_type == "code")
    assert "section(" not in code and 'print("""' not in code         # no narration in code cells


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_the_figures_are_drawn_inline_as_png(path, notebooks):
    nb = notebooks[path.name]
    drawn = [o for c in nb.cells if c.cell_type == "code" for o in c.outputs
             if "image/png" in o.get("data", {})]
    calls = len(re.findall(r"^figure\(", path.read_text(), re.M))
    assert calls >= 1 and len(drawn) == calls
    for output in drawn:
        assert base64.b64decode(output["data"]["image/png"]).startswith(PNG)


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_the_cells_print_their_numbers_and_no_error(path, notebooks):
    cells = [c for c in notebooks[path.name].cells if c.cell_type == "code"]
    assert not cells[0].outputs                        # run_headless does nothing in a kernel
    outputs = [o for c in cells for o in c.outputs]
    assert not [o for o in outputs if o["output_type"] == "error"]
    assert not [o for o in outputs if o.get("name") == "stderr"]
    text = "".join(o.get("text", "") for o in outputs if o["output_type"] == "stream")
    assert "[figure:" not in text                      # drawn, not named
    assert len(text.splitlines()) >= 20


def test_a_number_in_the_notebook_is_the_scripts(notebooks):
    text = "".join(o.get("text", "") for c in notebooks["01_forward_backward.py"].cells
                   if c.cell_type == "code" for o in c.outputs)
    assert "every row of da1 equals -W2[:, 1]: True" in text
    assert "max rel_error" in text and ": PASS" in text
