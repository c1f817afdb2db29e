"""Every tutorial ships as a notebook, ``tutorials/notebooks/NN_topic.ipynb``, made from its percent
script by ``tutorials/notebooks/make.py`` and executed, with its outputs stored (GitHub shows it
with its figures; Colab opens it). Here:

* (fast) each committed notebook is its script: the same cells, code and markdown, exactly,
  after make.py's first cell, which installs mlp-ref on Colab and does nothing elsewhere; it
  stores an output for every figure and no error; the list of Colab links is make.py's;
* (slow) each runs in a fresh Jupyter kernel from an empty folder (nbclient), and its outputs are
  those committed, the round-off of the machine aside (make.py's ``same_number`` derives how
  printed numbers are compared; figures by their size in pixels, not their bytes); its narration
  is markdown, its figures PNG outputs, and no cell fails; tutorial 07 also runs with PyTorch,
  TensorFlow and JAX hidden (tests/_hide_frameworks.py) and then says what it did not run.

Needs the [notebooks] extra (jupytext, nbclient, ipykernel): skipped with a reason without it, a
failure in CI. The committed tutorial 07 ran with its three frameworks; its comparison needs them.
"""
import base64
import functools
import importlib.util
import re
import sys

import pytest
from _extras import require
from _runs import FRAMEWORKS_TUTORIAL, HIDE_FRAMEWORKS, NOTEBOOKS, ROOT

from mlp_ref.classroom import tutorial

PNG = b"\x89PNG\r\n\x1a\n"
MAKE_PY = ROOT / "tutorials" / "notebooks" / "make.py"


def load_make():
    spec = importlib.util.spec_from_file_location("notebooks_make", MAKE_PY)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


make = load_make()


@pytest.fixture(scope="module")
def nbformat():
    for module in ("jupytext", "nbformat"):
        require(module, "notebooks")
    import nbformat
    return nbformat


@functools.lru_cache(maxsize=None)
def _committed(path):
    import nbformat
    return nbformat.read(make.notebook_path(path), as_version=4)


def committed(nbformat, path):
    """The committed notebook of ``path``, read once (a test that changes it takes a copy)."""
    return _committed(path)


def code_outputs(nb):
    return [[o for o in c.outputs] for c in nb.cells if c.cell_type == "code"]


# -- fast: the committed notebooks are the scripts ----------------------------------------------
def test_there_is_a_notebook_for_every_tutorial_and_no_other():
    assert make.scripts() == NOTEBOOKS and len(NOTEBOOKS) >= 8
    made = sorted(p.stem for p in MAKE_PY.parent.glob("*.ipynb"))
    assert made == [p.stem for p in NOTEBOOKS]


@pytest.mark.slow
@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_a_committed_notebook_has_the_scripts_cells(path, nbformat):
    assert make.stale_cells(path) == []
    nb = committed(nbformat, path)
    assert nb.cells[0].source == make.colab_cell()
    assert [c.source for c in nb.cells[1:] if c.cell_type == "markdown"] == \
        [c.source for c in tutorial.cells(path.read_text()) if c.kind == "markdown"]


@pytest.mark.slow
def test_the_staleness_check_sees_a_changed_script(tmp_path, nbformat, monkeypatch):
    script = NOTEBOOKS[0]
    changed = tmp_path / script.name
    changed.write_text(script.read_text().replace("run_headless(globals())", "run_headless(globals())\nX = 1", 1))
    monkeypatch.setattr(make, "notebook_path", lambda s: MAKE_PY.parent / f"{script.stem}.ipynb")
    assert make.stale_cells(script) == []
    problems = make.stale_cells(changed)
    assert len(problems) == 1 and "cell 2" in problems[0] and "X = 1" in problems[0]


@pytest.mark.slow
@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_a_committed_notebook_stores_its_outputs_and_figures(path, nbformat):
    nb = committed(nbformat, path)
    outputs = [o for cell in code_outputs(nb) for o in cell]
    assert not [o for o in outputs if o["output_type"] == "error" or o.get("name") == "stderr"]
    pngs = [o["data"]["image/png"] for o in outputs if "image/png" in o.get("data", {})]
    calls = len(re.findall(r"^figure\(", path.read_text(), re.M))
    assert calls >= 1 and len(pngs) == calls                     # every figure is shown on GitHub
    gifs = [o["data"]["image/gif"] for o in outputs if "image/gif" in o.get("data", {})]
    assert len(gifs) == len(re.findall(r"^animation\(", path.read_text(), re.M))   # and moves
    assert all(base64.b64decode(g).startswith(b"GIF89a") for g in gifs)
    for data in pngs:
        assert base64.b64decode(data).startswith(PNG)
        width, height = make.png_size(data)
        assert 400 <= width <= 1400 and 200 <= height <= 1400     # InlineFigure: 80 dpi, screen size
    text = "".join(o.get("text", "") for o in outputs if o["output_type"] == "stream")
    assert len(text.splitlines()) >= 20 and "[figure:" not in text
    assert all(c.execution_count == i + 1 for i, c in enumerate(c for c in nb.cells if c.cell_type == "code"))
    assert set(nb.metadata["language_info"]) == {"name"}          # nothing of the machine that ran it
    assert not [c for c in nb.cells if "execution" in c.metadata]


def test_the_notebooks_readme_links_each_to_colab():
    text = (MAKE_PY.parent / "README.md").read_text()
    assert text == make.readme()
    repo = make.REPOSITORY.removeprefix("https://github.com/")
    for path in NOTEBOOKS:
        assert (f"https://colab.research.google.com/github/{repo}/blob/main/tutorials/notebooks/"
                f"{path.stem}.ipynb") in text


@pytest.mark.parametrize("colab", [True, False])
@pytest.mark.parametrize("installed", [True, False])
def test_the_first_cell_installs_mlp_ref_on_colab_only(monkeypatch, colab, installed):
    ran = []
    monkeypatch.setattr("subprocess.run", lambda cmd, check: ran.append(cmd))
    if colab:
        monkeypatch.setitem(sys.modules, "google.colab", type(sys)("google.colab"))
    else:
        monkeypatch.delitem(sys.modules, "google.colab", raising=False)
    find_spec = importlib.util.find_spec
    monkeypatch.setattr("importlib.util.find_spec",
                        lambda name, *a: (find_spec(name) if installed else None) if name == "mlp_ref"
                        else find_spec(name, *a))
    exec(make.colab_cell(), {})
    if colab and not installed:
        assert ran == [[sys.executable, "-m", "pip", "install", "-q",
                        f"mlp-ref @ git+{make.REPOSITORY}@main"]]
    else:
        assert ran == []


# -- how a fresh run is compared with the committed one -------------------------------------------
def test_printed_numbers_are_compared_to_the_round_off_of_the_machine():
    same = make.same_number
    assert same("0.0", "0.0") and same("12", "12")
    assert same("6.9e-18", "1.4e-17") and same("0.0", "3e-19")       # both round-off level
    assert same("9.9e-08", "3.7e-08") and same("2.8e-11", "8.0e-11")  # measured on an emulated CPU
    assert not same("1e-9", "2e-11") and not same("3e-7", "5e-9")     # another order of magnitude
    assert same("5.802e-04", "5.806e-04")                              # measured on an emulated CPU
    assert same("0.0151", "0.0152")                    # one unit in the last digit: a rounding flip
    assert not same("0.0151", "0.0127")                # the two capacity numbers: not one measurement
    assert not same("200", "100") and not same("0.0", "1e-12") and not same("2.0e-04", "2.3e-04")
    assert not same("1.000", "1.030") and not same("0.0", "0.01")
    assert make.last_digit("0.0151") == pytest.approx(1e-4)
    assert make.last_digit("2.5e-07") == pytest.approx(1e-8)
    assert make.last_digit("12") == 1


def test_printed_texts_are_compared_word_by_word_and_number_by_number():
    assert make.same_text("drift   1.4e-17  PASS\n", "drift 6.9e-18 PASS")
    assert make.same_text("|  0.1235 |", "| 0.1234 |")
    assert not make.same_text("drift 1.4e-17 PASS", "drift 1.4e-17 FAIL")
    assert not make.same_text("after 200 steps", "after 100 steps")
    assert not make.same_text("a b", "a b c")


@pytest.mark.slow
def test_a_fresh_run_that_differs_is_named(nbformat):
    nb = committed(nbformat, NOTEBOOKS[0])
    fresh = nbformat.from_dict(nb)
    assert make.output_differences("x", nb, fresh) == []
    cell = next(c for c in fresh.cells if c.cell_type == "code" and
                any(o["output_type"] == "stream" for o in c.outputs))
    stream = next(o for o in cell.outputs if o["output_type"] == "stream")
    stream["text"] = stream["text"].replace("\n", "\nan extra line\n", 1)
    assert len(make.output_differences("x", nb, fresh)) == 1
    fresh = nbformat.from_dict(nb)
    figure = next(o for c in fresh.cells if c.cell_type == "code" for o in c.outputs
                  if "image/png" in o.get("data", {}))
    figure["data"].pop("image/png")
    assert len(make.output_differences("x", nb, fresh)) == 1


# -- slow: each notebook runs now, from an empty folder, and gives what is committed --------------
class Executed(dict):
    """name -> (the tutorial converted and executed now in a fresh kernel from an empty folder,
    with frameworks hidden or not), each once, when a test first reads it."""

    def __missing__(self, key):
        name, hidden = key
        self[key] = make.execute(make.convert(ROOT / "tutorials" / name),
                                 first=HIDE_FRAMEWORKS if hidden else None)
        return self[key]


@pytest.fixture(scope="module")
def notebooks():
    for module in ("jupytext", "nbclient", "ipykernel", "nbformat"):
        require(module, "notebooks")
    return Executed()


@pytest.mark.slow
@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_the_committed_outputs_are_a_fresh_runs(path, notebooks, nbformat):
    if path.name == FRAMEWORKS_TUTORIAL:               # committed with the three frameworks run
        require("torch", "frameworks")
        require("tensorflow", "frameworks")
        require("jax", "frameworks")
        require("optax", "frameworks")
    fresh = notebooks[path.name, False]
    assert make.output_differences(path.stem, committed(nbformat, path), fresh) == []


@pytest.mark.slow
@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_the_narration_is_markdown(path, notebooks):
    nb = notebooks[path.name, path.name == FRAMEWORKS_TUTORIAL]
    markdown = [c.source for c in nb.cells if c.cell_type == "markdown"]
    ours = [c.source for c in tutorial.cells(path.read_text()) if c.kind == "markdown"]
    assert markdown == ours and len(markdown) >= 6
    assert markdown[0].startswith("# Tutorial ") and "stackoverflow.com/questions/42182233" in markdown[0]
    assert sum(m.startswith("## ") for m in markdown) >= 5
    assert any("$" in m for m in markdown)                            # math, in LaTeX
    code = "\n".join(c.source for c in nb.cells if c.cell_type == "code")
    assert "section(" not in code and 'print("""' not in code         # no narration in code cells


@pytest.mark.slow
@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_the_figures_are_drawn_inline_as_png(path, notebooks):
    nb = notebooks[path.name, path.name == FRAMEWORKS_TUTORIAL]
    drawn = [o for c in nb.cells if c.cell_type == "code" for o in c.outputs
             if "image/png" in o.get("data", {})]
    calls = len(re.findall(r"^figure\(", path.read_text(), re.M))
    assert calls >= 1 and len(drawn) == calls
    for output in drawn:
        assert base64.b64decode(output["data"]["image/png"]).startswith(PNG)


@pytest.mark.slow
@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_the_cells_print_their_numbers_and_no_error(path, notebooks):
    cells = [c for c in notebooks[path.name, path.name == FRAMEWORKS_TUTORIAL].cells
             if c.cell_type == "code"]
    assert not cells[0].outputs and not cells[1].outputs   # the Colab cell, then run_headless: nothing
    outputs = [o for c in cells for o in c.outputs]
    assert not [o for o in outputs if o["output_type"] == "error"]
    assert not [o for o in outputs if o.get("name") == "stderr"]
    text = "".join(o.get("text", "") for o in outputs if o["output_type"] == "stream")
    assert "[figure:" not in text                      # drawn, not named
    # 07 without the frameworks prints the reference's numbers only (and says what it did not run)
    assert len(text.splitlines()) >= (12 if path.name == FRAMEWORKS_TUTORIAL else 20)


@pytest.mark.slow
def test_a_number_in_the_notebook_is_the_scripts(notebooks):
    text = "".join(o.get("text", "") for c in notebooks["01_forward_backward.py", False].cells
                   if c.cell_type == "code" for o in c.outputs)
    assert "every row of da1 equals -W2[:, 1]: True" in text
    assert "max rel_error" in text and ": PASS" in text


@pytest.mark.slow
def test_07_shows_the_framework_code_as_python_listings_and_says_what_it_did_not_run(notebooks):
    from mlp_ref.resources import frameworks_folder

    cells = [c for c in notebooks[FRAMEWORKS_TUTORIAL, True].cells if c.cell_type == "code"]
    calls = [c for c in cells if c.source.startswith("source(")]
    assert len(calls) >= 15
    files = {"PyTorch": "torch_fixes.py", "TensorFlow 2": "tf_fixes.py", "JAX": "jax_fixes.py"}
    listed = set()
    for cell in calls:
        markdown = [o["data"]["text/markdown"] for o in cell.outputs if "text/markdown" in o.get("data", {})]
        assert len(markdown) == 1, cell.source                   # rendered as markdown, not printed
        for heading, code in re.findall(r"`([^`]+)`\n\n```python\n(.*?)\n```", markdown[0], re.S):
            framework, rest = heading.split(": ", 1)
            file, name = rest.split(", ")
            assert file == files[framework]
            text = (frameworks_folder() / file).read_text()
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
    assert "JAX: NOT RUN here, jax is not installed" in text
    assert "Ran here: nothing (no framework installed)." in text


def test_the_runs_own_timings_are_not_compared():
    header = "fix      m  old acc   ms/step  peak MiB\n"
    a = header + "naive      0.033     109.3      3.21\nproject  8 0.480   45.4   2.05\nafter 0.5\n"
    b = header + "naive      0.033     98.1      3.30\nproject  8 0.480   51.0   2.04\nafter 0.5\n"
    assert make.same_text(a, b)
    assert not make.same_text(a, b.replace("0.480", "0.470"))    # the other columns still count
    assert not make.same_text(a, b.replace("after 0.5", "after 0.7"))    # and lines below the table


@pytest.mark.slow
@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_every_line_a_notebook_prints_fits_in_100_columns(path, nbformat):
    # the committed run: with tutorial 07's frameworks (the script's run without them is
    # test_tutorials.py's); a figure's or a listing's text/plain is not shown beside its image
    # or markdown
    def shown_text(output):
        if output["output_type"] == "stream":
            return output["text"]
        data = output.get("data", {})
        return "" if {"image/png", "image/gif", "text/markdown"} & set(data) else data.get("text/plain", "")
    texts = [shown_text(o) for cell in code_outputs(committed(nbformat, path)) for o in cell]
    assert [line for text in texts for line in text.splitlines() if len(line) > 100] == []


@pytest.mark.slow
@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_the_html_page_shows_its_math_and_figures_offline(path, nbformat):
    nb = committed(nbformat, path)
    page = make.html(nb, path.stem)
    prose = re.sub(r"<pre.*?</pre>", "", page, flags=re.S)
    assert "$" not in prose                                  # no LaTeX source left to read
    assert prose.count('class="math"') >= sum(c.source.count("$") for c in nb.cells
                                              if c.cell_type == "markdown") // 4
    assert "<script" not in page and 'src="http' not in page and "<link" not in page    # nothing fetched
    pngs = sum("image/png" in o.get("data", {}) for cell in code_outputs(nb) for o in cell)
    assert page.count('<img alt="figure" src="data:image/png;base64,') == pngs >= 1


def test_the_framework_files_tutorial_07_imports_ship_in_the_package():
    # package data, so that a notebook of 07 finds them from any folder, in an installed wheel
    # too (setuptools globs each pattern from the package's folder)
    import configparser

    from mlp_ref.resources import frameworks_folder

    cfg = configparser.ConfigParser()
    cfg.read(ROOT / "setup.cfg")
    patterns = [p.strip() for p in cfg["options.package_data"]["mlp_ref.resources"].split(",")]
    package = ROOT / "mlp_ref" / "resources"
    shipped = {f for pattern in patterns for f in package.glob(pattern) if f.is_file()}
    for name in ("torch_fixes.py", "tf_fixes.py", "jax_fixes.py", "README.md"):
        assert frameworks_folder() / name in shipped
    assert frameworks_folder() == package / "frameworks"


def test_a_relative_difference_is_round_off_and_not_compared_by_value():
    line = "  PyTorch      visible  project: drift, relative difference from mlp_ref {}\n"
    assert make.same_text(line.format("1.8e-08"), line.format("1.8e-10"))   # emulated CPUs
    assert not make.same_text(line.format("1.8e-08"), line.format("n/a"))
    assert not make.same_text(line.format("1.8e-08"), line.replace("project", "naive").format("1.8e-08"))
    other = "  PyTorch      seed     project: drift on the batch {}\n"
    assert not make.same_text(other.format("6.8e-05"), other.format("1.4e-05"))
