"""Every tutorial opens as a notebook (jupytext) and runs in a real Jupyter kernel (nbclient):
its narration is markdown, its figures are PNG outputs, and no cell fails.

Needs the [notebooks] extra (jupytext, nbclient, ipykernel): skipped with a reason without it,
a failure in CI. Slow: each notebook runs in a fresh kernel of its own (tests/_runs.py).

Tutorial 07 runs here with PyTorch and TensorFlow hidden (tests/_hide_frameworks.py, installed
by a first cell that is removed again after the run), as on a teacher's machine with only
numpy and matplotlib: importing both frameworks would cost a kernel some 10 s more. Its run
with both, and every number it prints then, are tests/test_frameworks_tutorial.py's, in the
test process, where tests/test_frameworks.py has imported them already.
"""
import base64
import re

import pytest

from mlp_ref import tutorial

from _extras import require
from _runs import FRAMEWORKS_TUTORIAL, NOTEBOOKS, ROOT, execute_notebook

PNG = b"\x89PNG\r\n\x1a\n"

pytestmark = pytest.mark.slow


class Executed(dict):
    """name -> the tutorial executed as a notebook, each once, when a test first reads it."""

    def __missing__(self, name):
        self[name] = execute_notebook(ROOT / "tutorials" / name)
        return self[name]


@pytest.fixture(scope="module")
def notebooks():
    for module in ("jupytext", "nbclient", "ipykernel", "nbformat"):
        require(module, "notebooks")
    return Executed()


def test_every_tutorial_is_a_notebook():
    assert [p.name[:2] for p in NOTEBOOKS] == ["01", "02", "03", "04", "05", "06", "07", "08"]


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
    # 07 without the frameworks prints the reference's numbers only (and says what it did not run)
    assert len(text.splitlines()) >= (12 if path.name == FRAMEWORKS_TUTORIAL else 20)


def test_a_number_in_the_notebook_is_the_scripts(notebooks):
    text = "".join(o.get("text", "") for c in notebooks["01_forward_backward.py"].cells
                   if c.cell_type == "code" for o in c.outputs)
    assert "every row of da1 equals -W2[:, 1]: True" in text
    assert "max rel_error" in text and ": PASS" in text


def test_07_shows_the_framework_code_as_python_listings_and_says_what_it_did_not_run(notebooks):
    path = ROOT / "tutorials" / FRAMEWORKS_TUTORIAL
    cells = [c for c in notebooks[FRAMEWORKS_TUTORIAL].cells if c.cell_type == "code"]
    calls = [c for c in cells if c.source.startswith("source(")]
    assert len(calls) >= 15
    files = {"PyTorch": "torch_fixes.py", "TensorFlow 2": "tf_fixes.py"}
    listed = set()
    for cell in calls:
        markdown = [o["data"]["text/markdown"] for o in cell.outputs if "text/markdown" in o.get("data", {})]
        assert len(markdown) == 1, cell.source                   # rendered as markdown, not printed
        for heading, code in re.findall(r"`([^`]+)`\n\n```python\n(.*?)\n```", markdown[0], re.S):
            framework, rest = heading.split(": ", 1)
            file, name = rest.split(", ")
            assert file == files[framework]
            text = (path.parent / "frameworks" / file).read_text()
            # the whole function or class, as it stands in the file: from its first line at the
            # left margin to the line before the next thing at the left margin
            start = text.index(f"\n{code.splitlines()[0]}\n") + 1
            rest_of_file = text[start + len(code):]
            assert text[start:start + len(code)] == code
            assert re.match(r"\n(\n|$)", rest_of_file), (framework, name)
            assert re.match(rf"(def|class) {name}\b", code)
            listed.add((framework, name))
    for framework in files:
        assert {"model_from", "naive", "freeze", "masked", "project", "restore", "penalty",
                "adam_projected"} <= {name for fw, name in listed if fw == framework}
    text = "".join(o.get("text", "") for c in cells for o in c.outputs)
    assert "PyTorch: NOT RUN here, torch is not installed" in text
    assert "TensorFlow 2: NOT RUN here, tensorflow is not installed" in text
    assert "Ran here: nothing (no framework installed)." in text
