"""Make the notebooks: ``tutorials/notebooks/NN_topic.ipynb`` from each ``tutorials/NN_topic.py``,
executed, with their outputs (numbers, figures, code listings) stored in them.

    pip install -e '.[notebooks]'                 # jupytext, nbclient, ipykernel, Jupyter itself
    python tutorials/notebooks/make.py            # every tutorial: convert, execute, write
    python tutorials/notebooks/make.py 05 07      # only these
    python tutorials/notebooks/make.py --check    # are the committed ones current? (code, text)
    python tutorials/notebooks/make.py --html DIR # the committed ones as HTML pages, math offline

The percent script stays the one source: a notebook is the script's cells, converted by jupytext,
after one first cell of our own (:func:`colab_cell`, which installs mlp-ref when the notebook runs
on Colab and does nothing anywhere else), then executed by nbclient in a fresh kernel whose
working directory is an empty temporary folder, so that a notebook that runs here runs from any
folder with only the package installed (tutorial 07 reads its framework files from the package:
``mlp_ref.resources.frameworks_folder()``). What varies from run to run is left out of the file:
no execution times, no interpreter version, cell ids numbered in order; so the same outputs give
the same bytes. Tutorial 07 runs the frameworks that are installed where this runs (the committed
notebook: PyTorch, TensorFlow and JAX, as CI installs them) and says what it did not run.

:func:`differences` says how a committed notebook differs from a fresh run, the round-off of the
machine aside (its docstring derives what is compared how); ``tests/test_notebooks.py`` fails on
any difference, and ``.ci/run`` runs it. This file is not part of the package: mlp_ref never
imports jupytext or nbclient.
"""
from __future__ import annotations

import argparse
import base64
import os
import re
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
TUTORIALS = HERE.parent
#: The project's public repository: the one place its address is written. The Colab links of
#: README.md here and the install line of every notebook's first cell are made from it.
REPOSITORY = "https://github.com/mlp-ref/mlp-ref"
BRANCH = "main"
#: TensorFlow's start-up log lines, written by its C++ core straight to the process's standard
#: error (which the kernel forwards) before any setting of Python's is read: TF_CPP_MIN_LOG_LEVEL
#: does not silence them in TensorFlow 2.21. They say nothing about the tutorial and are left out;
#: any other line on standard error stays (and fails tests/test_notebooks.py).
CHATTER = re.compile(r"^(WARNING: All log messages before absl::InitializeLog\(\) is called.*"
                     r"|[IWE]\d{4} [\d:.]+ +\d+ (port|cpu_feature_guard)\.cc:\d+\].*"
                     r"|To enable the following instructions: .* rebuild TensorFlow .*)$")
#: Seconds one cell may take (tutorial 07 with both frameworks imports them in one cell).
CELL_TIMEOUT = 600


def scripts(names=()):
    """The tutorials ``tutorials/NN_*.py`` (all of them, or those whose name starts with one of
    ``names``: "05", "05_projection"), in order."""
    found = sorted(TUTORIALS.glob("[0-9][0-9]_*.py"))
    if names:
        found = [p for p in found if any(p.stem.startswith(n.removesuffix(".py")) for n in names)]
    return found


def notebook_path(script):
    return HERE / f"{Path(script).stem}.ipynb"


def colab_url(script):
    """The address that opens the committed notebook of ``script`` on Colab."""
    repo = REPOSITORY.removeprefix("https://github.com/")
    return (f"https://colab.research.google.com/github/{repo}/blob/{BRANCH}/tutorials/notebooks/"
            f"{notebook_path(script).name}")


def colab_cell():
    """The first code cell of every notebook: on Colab (``google.colab`` is loaded in its
    kernels), pip-install mlp-ref from the repository unless it is installed; elsewhere nothing."""
    return f'''# On Colab: install mlp-ref (once per session). Anywhere else this cell does nothing:
# install it there with  pip install -e '.[notebooks]'  from the project's folder.
import importlib.util
import subprocess
import sys

if "google.colab" in sys.modules and importlib.util.find_spec("mlp_ref") is None:
    subprocess.run([sys.executable, "-m", "pip", "install", "-q",
                    "mlp-ref @ git+{REPOSITORY}@{BRANCH}"], check=True)'''


def convert(script):
    """The notebook of ``script``, not executed: :func:`colab_cell`, then the script's cells as
    jupytext reads them, cell ids numbered, metadata only what Jupyter needs to open it."""
    import jupytext
    import nbformat

    nb = jupytext.read(script, fmt="py:percent")
    nb.nbformat, nb.nbformat_minor = 4, 5                  # cell ids
    nb.cells.insert(0, nbformat.v4.new_code_cell(colab_cell()))
    for number, cell in enumerate(nb.cells):
        cell.id = f"cell-{number:02d}"
        cell.metadata = {}
    nb.metadata = {"kernelspec": {"name": "python3", "display_name": "Python 3", "language": "python"},
                   "language_info": {"name": "python"},
                   "colab": {"name": notebook_path(script).name}}
    return nb


def execute(nb, first=None):
    """Run ``nb`` in place in a fresh Python 3 kernel whose working directory is an empty
    temporary folder; ``first`` (code), when given, runs first in a cell removed again after the
    run (the tests hide the frameworks with it). MPLBACKEND is Agg: a figure is shown only as the
    PNG its cell returns. Raises nbclient's CellExecutionError when a cell fails."""
    import nbclient
    import nbformat

    if first is not None:
        nb.cells.insert(0, nbformat.v4.new_code_cell(first, id="hidden-first"))
    old = os.environ.get("MPLBACKEND")
    os.environ["MPLBACKEND"] = "Agg"
    try:
        with tempfile.TemporaryDirectory(prefix="mlp-ref-notebook-") as empty:
            client = nbclient.NotebookClient(
                nb, timeout=CELL_TIMEOUT, kernel_name="python3", record_timing=False,
                resources={"metadata": {"path": empty}},
                extra_arguments=["--HistoryManager.enabled=False"])
            client.execute()
    finally:
        if old is None:
            os.environ.pop("MPLBACKEND")
        else:
            os.environ["MPLBACKEND"] = old
        if first is not None:
            assert nb.cells.pop(0).id == "hidden-first"
    nb.metadata.pop("widgets", None)
    nb.metadata["language_info"] = {"name": "python"}      # not the version that happened to run it
    for cell in nb.cells:
        cell.metadata.pop("execution", None)
        if cell.cell_type == "code":
            cell.outputs = [o for o in map(_without_chatter, cell.outputs) if o is not None]
    return nb


def _without_chatter(output):
    """``output`` without TensorFlow's start-up lines (:data:`CHATTER`); None when nothing is left."""
    if output["output_type"] != "stream" or output["name"] != "stderr":
        return output
    kept = [line for line in output["text"].splitlines(keepends=True) if not CHATTER.match(line.rstrip("\n"))]
    if not kept:
        return None
    output["text"] = "".join(kept)
    return output


def make(script):
    """Convert, execute and write the notebook of ``script``; returns its path."""
    import nbformat

    nb = execute(convert(script))
    path = notebook_path(script)
    nbformat.write(nb, path)
    return path


# -- is a committed notebook current? -------------------------------------------------------------
def stale_cells(script):
    """What differs between the committed notebook of ``script`` and the script itself, its
    cells and their kinds, compared exactly (cheap: nothing runs). [] when it is current."""
    import nbformat

    path = notebook_path(script)
    if not path.exists():
        return [f"{path.name}: missing (python tutorials/notebooks/make.py {Path(script).stem[:2]})"]
    committed = nbformat.read(path, as_version=4)
    expected = convert(script)
    problems = []
    if len(committed.cells) != len(expected.cells):
        problems.append(f"{path.name}: {len(committed.cells)} cells, the script has {len(expected.cells)}")
    for i, (have, want) in enumerate(zip(committed.cells, expected.cells)):
        if (have.cell_type, have.source) != (want.cell_type, want.source):
            problems.append(f"{path.name} cell {i}: the script's {want.cell_type} cell is now\n"
                            f"{want.source[:300]}")
    return problems


#: A number as printed: 12, -0.5, 1.5e-04, 2e11, 3.14% (the percent sign is not part of it).
NUMBER = re.compile(r"[-+]?(?:\d+\.\d*|\.\d+|\d+)(?:[eE][-+]?\d+)?")
#: Below this magnitude a printed float64 number is round-off (see :func:`same_number`).
ROUND_OFF = 1e-12
#: Below this magnitude a printed number is compared by its order of magnitude only.
SMALL = 1e-6
#: The relative difference between two machines' runs allowed for a number above SMALL.
RELATIVE = 1e-2


def last_digit(token):
    """One unit in the last printed digit of ``token``: 0.0151 -> 1e-4, 2.5e-07 -> 1e-8, 12 -> 1."""
    mantissa, _, exponent = token.lower().partition("e")
    decimals = len(mantissa.partition(".")[2])
    return 10.0 ** (int(exponent or 0) - decimals)


def same_number(a, b, round_off=False):
    """Whether the printed numbers ``a`` and ``b`` (strings) are the same measurement, printed
    by two machines whose CPU kernels and BLAS sum in other orders. This is a check that a
    committed notebook is current, not that its numbers are right: every number a tutorial
    states is asserted, on its own run, by the test of its topic.

    * Exactly equal strings are the same (integers, counts, exact zeros: "0.0" stays "0.0").
    * A quantity that is zero in exact arithmetic but not in float64 (out1's drift under
      projection and restoring, J1 D) is printed at round-off level, 1e-18 to 1e-13 for the
      O(1) values these networks compute (a few eps = 2.2e-16 of sums of O(1) terms): two
      numbers both below ROUND_OFF = 1e-12 are the same, and an exact 0 is the same only as
      such a number (the last-digit slack of "0.0" would let anything below 0.1 pass).
    * Below SMALL = 1e-6 the tutorials print measurements of round-off itself or of a
      difference of nearly equal O(1) numbers: gradcheck's finite-difference errors (about
      eps/h), |D_square - D_gram| (about cond(J1 J1^T) eps), a framework's direction against
      mlp_ref's, out1's drift at lr 1e-5 (1e-8, whose first-order error comes from a
      difference of outputs that round-off alone moves by 1e-16). Their digits are the
      machine's summation order: run under OpenBLAS's Prescott kernel with numpy's SIMD cut to
      its baseline, they moved by factors up to 3 (9.9e-08 -> 3.7e-08, 2.8e-11 -> 8.0e-11).
      What they say is their order of magnitude: two such numbers are the same within a
      factor of 10.
    * Above SMALL a number is a measurement whose round-off is a small fraction of it, but a
      run of many steps carries a difference from step to step, and a restore stops at a
      tolerance after a number of iterations that round-off can change: tutorial 06's drift
      after 100 steps of project+restore on unseen inputs moved by 7e-4 relative (5.802e-04 ->
      5.806e-04) on that emulated CPU. Two numbers within RELATIVE = 1e-2 of each other, or one
      unit of either's last printed digit apart (a value at a rounding boundary), are the same.
      A stale notebook differs by more: another number of steps, lr, setup or rule changes what
      the tutorials print by far more than 1%.
    * ``round_off``: the number measures round-off whatever its size (:data:`ROUND_OFF_LINES`):
      any two numbers are the same.
    """
    if a == b or round_off:
        return True
    x, y = float(a), float(b)
    if abs(x) < ROUND_OFF and abs(y) < ROUND_OFF:
        return True
    if x == 0 or y == 0:
        return False
    if abs(x) < SMALL and abs(y) < SMALL:
        return max(abs(x), abs(y)) <= 10 * min(abs(x), abs(y))
    slack = max(last_digit(a), last_digit(b)) + RELATIVE * max(abs(x), abs(y))
    return abs(x - y) <= slack


def tokens(text):
    """``text`` as words and numbers, white space collapsed (a column of numbers that grew by
    one character shifts the spaces of a table, not what it says)."""
    return [t for t in re.split(rf"({NUMBER.pattern})|\s+", text) if t]


#: Columns whose numbers are the run's own, not the mathematics' (tutorial 08's table of fixes:
#: the milliseconds each step took and tracemalloc's peak, which the narration says vary from run
#: to run): in the rows under a header that ends with them, those numbers are not compared.
VOLATILE_COLUMNS = ("ms/step", "peak MiB")


def without_volatile(text):
    """``text`` with the numbers of :data:`VOLATILE_COLUMNS` replaced by their column's name."""
    header = re.compile(r"\s+".join(map(re.escape, VOLATILE_COLUMNS)) + r"\s*$")
    row = re.compile(r"(\s+)" + r"(\s+)".join([NUMBER.pattern] * len(VOLATILE_COLUMNS)) + r"\s*$")
    out, under = [], False
    for line in text.split("\n"):
        if header.search(line):
            under = True
        elif under and row.search(line):
            line = row.sub(" " + " ".join(f"<{c}>" for c in VOLATILE_COLUMNS), line)
        else:
            under = False
        out.append(line)
    return "\n".join(out)


#: A line that says it prints a relative difference or error prints a measurement of round-off
#: (a framework's result against mlp_ref's in float64, a finite difference against backprop):
#: not even its decade is the mathematics'. Tutorial 07's relative difference of the projected
#: step's drift, a round-off difference of two O(lr^2) drifts, moved from 6.8e-05 to 1.4e-05 on
#: the emulated Prescott CPU, and from 1.8e-10 to 1.8e-08 under OpenBLAS's Haswell kernel with
#: two threads. On such a line a number stays a number, its value is not compared: the bound
#: each one meets is asserted on its own run (tests/test_frameworks_tutorial.py, test_tutorials.py).
ROUND_OFF_LINES = ("relative difference", "rel_error", "relative error")


def same_text(a, b):
    """Whether two printed texts say the same, line by line, numbers compared by
    :func:`same_number` (not by value on :data:`ROUND_OFF_LINES`), the run's own
    timings aside (:func:`without_volatile`)."""
    la, lb = without_volatile(a).splitlines(), without_volatile(b).splitlines()
    la, lb = [line for line in la if line.strip()], [line for line in lb if line.strip()]
    if len(la) != len(lb):
        return False
    for line_a, line_b in zip(la, lb):
        ta, tb = tokens(line_a), tokens(line_b)
        if len(ta) != len(tb):
            return False
        round_off = any(words in line_a for words in ROUND_OFF_LINES)
        for x, y in zip(ta, tb):
            if x == y:
                continue
            if not (NUMBER.fullmatch(x) and NUMBER.fullmatch(y) and same_number(x, y, round_off)):
                return False
    return True


def png_size(data):
    """(width, height) in pixels of a base64 PNG, read from its IHDR chunk."""
    raw = base64.b64decode(data)
    if not raw.startswith(b"\x89PNG\r\n\x1a\n"):
        raise ValueError("data: expected a PNG, got other bytes")
    return int.from_bytes(raw[16:20], "big"), int.from_bytes(raw[20:24], "big")


def gif_size(data):
    """(width, height) in pixels of a base64 GIF, read from its logical screen descriptor."""
    raw = base64.b64decode(data)
    if not raw.startswith((b"GIF87a", b"GIF89a")):
        raise ValueError("data: expected a GIF, got other bytes")
    return int.from_bytes(raw[6:8], "little"), int.from_bytes(raw[8:10], "little")


def shown(output):
    """What an output shows, comparable across machines: (kind, content). Text streams and
    text/plain by :func:`same_text`; markdown (the code listings) exactly; a PNG by its size in
    pixels (its bytes depend on the machine's round-off and the PNG library; its presence and
    size do not: a figure drawn from data of another shape would change the figure's layout)."""
    if output["output_type"] == "stream":
        return [("text", output["name"], output["text"])]
    if output["output_type"] == "error":
        return [("error", output["ename"], output["evalue"])]
    data = output.get("data", {})
    found = []
    for kind, value in sorted(data.items()):
        value = "".join(value) if isinstance(value, list) else value
        if kind == "image/png":
            found.append(("png", kind, png_size(value)))
        elif kind == "image/gif":
            found.append(("gif", kind, gif_size(value)))
        else:
            found.append(("text" if kind == "text/plain" else "exact", kind, value))
    return found


def output_differences(name, committed, fresh):
    """How the outputs of a committed notebook differ from those of a fresh run of the same
    cells: a list of messages, [] when they are the same (see :func:`shown`)."""
    problems = []
    for i, (have, want) in enumerate(zip(committed.cells, fresh.cells)):
        if have.cell_type != "code":
            continue
        a = [s for o in have.outputs for s in shown(o)]
        b = [s for o in want.outputs for s in shown(o)]
        # consecutive stream outputs of one name may be split differently by the kernel
        a, b = _joined(a), _joined(b)
        if [s[:2] for s in a] != [s[:2] for s in b]:
            problems.append(f"{name} cell {i}: outputs {[s[:2] for s in a]}, a fresh run gives "
                            f"{[s[:2] for s in b]}")
            continue
        for (kind, what, x), (_, _, y) in zip(a, b):
            if kind == "text" and not same_text(x, y) or kind != "text" and x != y:
                problems.append(f"{name} cell {i} {what}: committed\n{_excerpt(x, y)}")
    return problems


def _joined(items):
    out = []
    for item in items:
        if out and item[0] == "text" and out[-1][:2] == item[:2] and item[1] in ("stdout", "stderr"):
            out[-1] = (item[0], item[1], out[-1][2] + item[2])
        else:
            out.append(item)
    return out


def _excerpt(x, y):
    if not isinstance(x, str):
        return f"{x}\nfresh run:\n{y}"
    for lx, ly in zip(x.splitlines(), y.splitlines()):
        if not same_text(lx, ly):
            return f"{lx}\nfresh run:\n{ly}"
    return f"{x[-300:]}\nfresh run:\n{y[-300:]}"


def differences(script, fresh=None):
    """Everything that makes the committed notebook of ``script`` stale: its cells (exactly)
    and its outputs against ``fresh`` (a notebook executed now; executed here when None)."""
    import nbformat

    problems = stale_cells(script)
    if problems:
        return problems
    committed = nbformat.read(notebook_path(script), as_version=4)
    fresh = execute(convert(script)) if fresh is None else fresh
    return output_differences(notebook_path(script).name, committed, fresh)


# -- HTML that shows its math offline -------------------------------------------------------------
STYLE = """body { max-width: 60rem; margin: 2rem auto; padding: 0 1rem; font: 16px/1.5 sans-serif; }
pre { background: #f6f8fa; padding: .6rem; overflow-x: auto; font-size: 13px; }
pre.output { background: none; border-left: 3px solid #ddd; }
img { max-width: 100%; }  .math { font-family: serif; white-space: nowrap; }
div.math { margin: .6rem 2rem; }"""


def html(nb, title):
    """The executed notebook ``nb`` as one self-contained HTML page: its markdown rendered
    (markdown-it, which jupytext installs), its math as Unicode text (``mlp_ref.classroom.tutorial``'s
    ``latex_text``: K₁₂ = J₁ J₂ᵀ), code and printed output as preformatted text, figures as
    embedded PNGs. No script and nothing fetched: Jupyter's own export renders math with
    MathJax from the web, and shows the ``$...$`` source offline; this page shows the math."""
    import html as escape

    from markdown_it import MarkdownIt

    from mlp_ref.classroom.tutorial import latex_text

    md = MarkdownIt("commonmark").enable("table")

    def markdown(text):
        maths = []

        def keep(match, display):
            maths.append((display, latex_text(match.group(1))))
            return f"MATH{len(maths) - 1}X"
        text = re.sub(r"\$\$(.+?)\$\$", lambda m: keep(m, True), text, flags=re.S)
        text = re.sub(r"\$(.+?)\$", lambda m: keep(m, False), text)
        out = md.render(text)
        for i, (display, math) in enumerate(maths):
            tag = "div" if display else "span"
            out = out.replace(f"MATH{i}X", f'<{tag} class="math">{escape.escape(" ".join(math.split()))}</{tag}>')
        return out

    def pre(text, kind):
        return f'<pre class="{kind}">{escape.escape(text)}</pre>'

    parts = []
    for cell in nb.cells:
        if cell.cell_type == "markdown":
            parts.append(markdown(cell.source))
            continue
        parts.append(pre(cell.source, "code"))
        for output in cell.outputs:
            if output["output_type"] == "stream":
                parts.append(pre(output["text"], "output"))
                continue
            data = output.get("data", {})
            if "image/png" in data:
                parts.append(f'<img alt="figure" src="data:image/png;base64,{data["image/png"].strip()}">')
            elif "image/gif" in data:
                parts.append(f'<img alt="animation" src="data:image/gif;base64,{data["image/gif"].strip()}">')
            elif "text/markdown" in data:
                parts.append(markdown(data["text/markdown"]))
            elif "text/plain" in data:
                parts.append(pre(data["text/plain"], "output"))
    return (f'<!DOCTYPE html>\n<html lang="en">\n<head>\n<meta charset="utf-8">\n'
            f"<title>{escape.escape(title)}</title>\n<style>\n{STYLE}\n</style>\n</head>\n<body>\n"
            + "\n".join(parts) + "\n</body>\n</html>\n")


# -- the notebooks' README ------------------------------------------------------------------------
def readme():
    """tutorials/notebooks/README.md: each notebook, its link on GitHub and on Colab."""
    rows = "\n".join(f"| [`{notebook_path(s).name}`]({notebook_path(s).name}) "
                     f"| [open on Colab]({colab_url(s)}) |" for s in scripts())
    return f"""# The tutorials as notebooks

Made from the scripts `tutorials/NN_topic.py` (the one source) by `python tutorials/notebooks/make.py`,
executed, with their outputs: GitHub shows each with its numbers and figures. Do not edit a
notebook by hand: edit the script and run `make.py` again (a test fails when one is stale).
How to open them on a laptop, on a JupyterHub or on Colab: `tutorials/README.md`.

| notebook | Colab |
|---|---|
{rows}

The first cell of each installs mlp-ref from {REPOSITORY} when it runs on Colab and does
nothing anywhere else.
"""


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("names", nargs="*", help="tutorials by number or name (default: all)")
    parser.add_argument("--check", action="store_true",
                        help="only say whether the committed notebooks' cells are the scripts' (fast)")
    parser.add_argument("--check-outputs", action="store_true",
                        help="also execute each and compare its outputs with the committed ones (slow)")
    parser.add_argument("--html", metavar="DIR",
                        help="write the committed notebooks as HTML pages into DIR (math shown offline)")
    args = parser.parse_args(argv)
    chosen = scripts(args.names)
    if not chosen:
        parser.error(f"no tutorial matches {args.names}")
    if args.html:
        import nbformat

        out = Path(args.html)
        out.mkdir(parents=True, exist_ok=True)
        for script in chosen:
            nb = nbformat.read(notebook_path(script), as_version=4)
            page = out / f"{Path(script).stem}.html"
            page.write_text(html(nb, nb.cells[1].source.splitlines()[0].lstrip("# ")), encoding="utf-8")
            print(page)
        return 0
    if args.check or args.check_outputs:
        problems = [p for s in chosen
                    for p in (differences(s) if args.check_outputs else stale_cells(s))]
        if (HERE / "README.md").read_text() != readme():
            problems.append("README.md: not the list make.py writes")
        print("\n".join(problems) or f"{len(chosen)} notebooks current")
        return 1 if problems else 0
    for script in chosen:
        print(f"{make(script).relative_to(TUTORIALS.parent)}", flush=True)
    (HERE / "README.md").write_text(readme())
    return 0


if __name__ == "__main__":
    sys.exit(main())
