"""What every script in ``tutorials/`` uses to run both as a notebook and as a plain script.

A tutorial is a percent script: ``# %% [markdown]`` cells hold the narration (Markdown, with
LaTeX math), ``# %%`` cells the code. Jupyter opens it as a notebook through jupytext, and the
narration renders. Run as a script, ``python tutorials/01_forward_backward.py``, its first code
cell calls :func:`run_headless`, which prints each markdown cell as plain text and runs each
code cell, in order, so the narration appears between the numbers it talks about. The markdown
cells are the one source of the text: nothing is written twice.

``--step`` pauses before each section (a ``##`` heading) and after each screenful of output,
until you press Enter; Ctrl-C or Ctrl-D at a pause (or Ctrl-C while a cell runs) stops the
script with one line, not a traceback. Without ``--step``, or when standard input is not a
terminal (tests, CI, a pipe), nothing ever waits.

Importing this module never imports matplotlib: :func:`figure` draws only in a notebook.
"""
from __future__ import annotations

import ast
import base64
import importlib
import io
import os
import re
import shutil
import sys
import textwrap
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from ..fast import threads
from ..measurements.question import stage_formula

#: True while :func:`run_headless` runs a tutorial as a script: then figures are named, not drawn.
HEADLESS = False


def stepping(argv=None, stdin=None):
    """True when the script was started with ``--step`` and a person can press Enter."""
    argv = sys.argv if argv is None else argv
    stdin = sys.stdin if stdin is None else stdin
    return "--step" in argv[1:] and stdin is not None and stdin.isatty()


class Stop(SystemExit):
    """Raised at a ``--step`` pause on Ctrl-C (status 130) or end of input (status 0)."""


def pause(prompt, where, out=None):
    """Wait for Enter. Ctrl-C or Ctrl-D stops the script with a one-line message, written to
    ``out`` (default ``sys.stdout``): the terminal itself, not a :class:`Pager` that would count
    the line and pause again."""
    out = sys.stdout if out is None else out
    try:
        input(prompt)
    except KeyboardInterrupt:
        said, status = "Ctrl-C", 130
    except EOFError:
        said, status = "end of input", 0
    else:
        return
    print(f"\nstopped {where} ({said})", file=out, flush=True)
    raise Stop(status) from None


# -- the cells of a percent script ----------------------------------------------------------
@dataclass
class Cell:
    """One cell of a percent script: ``kind`` "markdown" or "code", the line number of its
    first line after the ``# %%`` marker (1-based), and its lines without line ends."""
    kind: str
    first_line: int
    lines: list = field(default_factory=list)

    @property
    def source(self):
        """A markdown cell's text (the ``# `` of each line removed), or a code cell's code."""
        if self.kind == "code":
            return "\n".join(self.lines).rstrip()
        return "\n".join(line[2:] if line.startswith("# ") else line.lstrip("#")
                         for line in self.lines).rstrip()


def cells(text):
    """The cells of a percent script, in order. A line starting ``# %%`` opens a cell, a
    markdown cell when ``[markdown]`` follows; lines before the first marker are a code cell."""
    found = [Cell("code", 1)]
    for number, line in enumerate(text.splitlines(), 1):
        if line.startswith("# %%"):
            kind = "markdown" if line[4:].strip().startswith("[markdown]") else "code"
            found.append(Cell(kind, number + 1))
        else:
            found[-1].lines.append(line)
    return [c for c in found if any(line.strip() for line in c.lines)]


# -- markdown and LaTeX as plain text -------------------------------------------------------
_SUB = str.maketrans("0123456789+-", "\u2080\u2081\u2082\u2083\u2084\u2085\u2086\u2087\u2088\u2089\u208a\u208b")
_SUP = str.maketrans("0123456789+-", "\u2070\u00b9\u00b2\u00b3\u2074\u2075\u2076\u2077\u2078\u2079\u207a\u207b")
#: LaTeX commands the tutorials use, as plain text. A test checks that none is left over.
SYMBOLS = {
    "eta": "\u03b7", "theta": "\u03b8", "lambda": "\u03bb", "alpha": "\u03b1", "sigma": "\u03c3",
    "Delta": "\u0394", "delta": "\u03b4", "partial": "\u2202", "sum": "\u03a3", "epsilon": "\u03b5",
    "cdot": "\u00b7", "odot": "\u2299", "times": "\u00d7", "leftarrow": "\u2190", "to": "\u2192",
    "mapsto": "\u21a6", "approx": "\u2248", "le": "\u2264", "leq": "\u2264", "ge": "\u2265", "geq": "\u2265",
    "ne": "\u2260", "neq": "\u2260", "in": "\u2208", "lVert": "\u2016", "rVert": "\u2016",
    "|": "\u2016", "ldots": "\u2026", "dots": "\u2026", "infty": "\u221e", "pm": "\u00b1",
    "max": "max", "min": "min", "quad": "\u2003", "qquad": "\u2003\u2003", ",": "", ";": "", "!": "",
    "textstyle": "", "displaystyle": "", "big": "", "Big": "", "otimes": "\u2297",
    "top": "\u1d40", "left": "", "right": "", "{": "{", "}": "}", "%": "%",
}


def _group(text):
    """A numerator or denominator: in brackets unless it is one symbol or one number."""
    return text if re.fullmatch(r"\\?[A-Za-z]|[0-9.]+|\\[A-Za-z]+(?: [A-Za-z])?", text) else f"({text})"


def latex_text(math):
    """The LaTeX ``math`` (no dollars) as plain text: Greek letters and operators as Unicode,
    digit sub- and superscripts as Unicode, ``\\frac{a}{b}`` as a/b, ``\\mathrm{x}`` as x."""
    s = re.sub(r"\\(?:mathrm|text|operatorname|mathbf|mathcal|mathbb)\{([^{}]*)\}", r"\1", math)
    s = re.sub(r"\\t?frac\{([^{}]*)\}\{([^{}]*)\}", lambda m: f"{_group(m.group(1))}/{_group(m.group(2))}", s)
    s = re.sub(r"\^\{?\\top\}?", "\u1d40", s)
    s = re.sub(r"\\([A-Za-z]+|[|,;!{}%])", lambda m: SYMBOLS.get(m.group(1), m.group(0)), s)
    s = re.sub(r"_\{?([0-9+-]+)\}?(?![A-Za-z0-9{])", lambda m: m.group(1).translate(_SUB), s)
    s = re.sub(r"\^\{?([0-9+-]+)\}?(?![A-Za-z0-9{])", lambda m: m.group(1).translate(_SUP), s)
    s = re.sub(r"_\{([A-Za-z]+)\}", r"_\1", s)
    s = re.sub(r"([_^])\{([^{}]*)\}", r"\1(\2)", s)
    return re.sub(r"(?<=\S) {2,}", " ", s.replace("{", "").replace("}", ""))


def _display_math(math):
    """Display math, indented: on one line when it fits in 100 columns, else line by line as
    written in the cell (a long formula is broken where its author broke it)."""
    one = "    " + " ".join(latex_text(math).split())
    if len(one) <= 100:
        return one
    return "\n".join("    " + " ".join(latex_text(line).split()) for line in math.splitlines() if line.strip())


def markdown_text(markdown):
    """A markdown cell as plain text for a terminal: headings underlined, math through
    :func:`latex_text`, links as "text (url)", emphasis and backticks dropped."""
    markdown = re.sub(r"\$\$(.+?)\$\$", lambda m: _display_math(m.group(1)), markdown, flags=re.S)
    out = []
    for line in markdown.splitlines():
        line = re.sub(r"\$(.+?)\$", lambda m: latex_text(m.group(1)), line)
        line = re.sub(r"\[([^\]]+)\]\(([^)]+)\)", r"\1 (\2)", line)
        line = line.replace("**", "").replace("`", "")
        heading = re.match(r"(#+)\s+(.*)", line)
        if heading:
            title = heading.group(2)
            out += ["", title, "=" * len(title)]
        else:
            out.append(line)
    while out and not out[0].strip():
        out.pop(0)
    return "\n".join(out)


# -- running a tutorial as a script -----------------------------------------------------------
class Pager(io.TextIOBase):
    """stdout that pauses after every ``rows`` lines (``--step`` on a long section)."""

    def __init__(self, stream, rows):
        self.stream, self.rows, self.count = stream, rows, 0

    def write(self, text):
        for piece in text.splitlines(keepends=True):
            self.stream.write(piece)
            if piece.endswith("\n"):
                self.count += 1
                if self.count >= self.rows:
                    self.stream.flush()
                    self.count = 0           # a new page starts whether Enter comes or not
                    pause("[more: press Enter] ", "in the middle of a section", out=self.stream)
        return len(text)

    def flush(self):
        self.stream.flush()


def run_headless(namespace, argv=None, stdin=None):
    """Run the calling tutorial as a script: print its markdown cells, run its code cells.

    Called as ``run_headless(globals())`` from a tutorial's first code cell. In Jupyter (no
    ``__file__``, or IPython's ``get_ipython`` in the namespace) or on import it does nothing.
    Otherwise it prints the markdown cells up to the calling cell, then goes through the cells
    after it in order, printing each markdown cell as plain text (:func:`markdown_text`) and
    running each code cell in ``namespace`` (compiled with the file's own name and line
    numbers, so a traceback points into the tutorial), and ends the script (SystemExit 0):
    the rest of the file has run by then.

    With ``--step`` (see :func:`stepping`) it waits before each ``##`` section and after each
    screenful of a long section; Ctrl-C or end of input stops it with one line.
    """
    global HEADLESS
    path = namespace.get("__file__")
    if namespace.get("__name__") == "__main__" and "get_ipython" in namespace:
        threads.one_blas_thread()                    # a notebook: threadpoolctl, if it is there
    if namespace.get("__name__") != "__main__" or not path or "get_ipython" in namespace:
        return
    # a script: one BLAS thread for the small networks (started again with the variables set
    # when threadpoolctl is missing, but only if this file is the program Python was asked to run)
    this_program = os.path.abspath(path) == os.path.abspath(sys.argv[0])
    threads.one_blas_thread(sys.orig_argv if this_program else None)
    step = stepping(argv, stdin)
    caller_line = sys._getframe(1).f_lineno
    with open(path, encoding="utf-8") as fh:
        script = cells(fh.read())
    rows = max(shutil.get_terminal_size().lines - 3, 5)
    HEADLESS = True
    stdout = sys.stdout
    if step:
        sys.stdout = Pager(stdout, rows)
    where = "at the start"
    try:
        for cell in script:
            if cell.kind == "markdown":
                text = markdown_text(cell.source)
                heading = re.search(r"^##\s+(.*)$", cell.source, re.M)
                if heading:
                    where = f"in {heading.group(1)!r}"
                    if step:
                        sys.stdout.count = 0
                        pause(f"\n[press Enter for: {heading.group(1)}] ",
                              f"before {heading.group(1)!r}", out=stdout)
                print("\n" + text)
            elif cell.first_line + len(cell.lines) > caller_line + 1:    # not yet run: run it
                skip = max(caller_line + 1 - cell.first_line, 0)      # the calling cell: its rest
                code = "\n" * (cell.first_line - 1 + skip) + "\n".join(cell.lines[skip:])
                exec(compile(code, path, "exec"), namespace)
    except KeyboardInterrupt:
        print(f"\nstopped {where} (Ctrl-C)", file=stdout)
        raise Stop(130) from None
    finally:
        sys.stdout = stdout
        HEADLESS = False
    sys.stdout.flush()
    raise SystemExit(0)


# -- figures ---------------------------------------------------------------------------------
class InlineFigure:
    """A figure that Jupyter shows inline as a PNG (through ``_repr_png_``).

    Drawn at ``DPI`` = 80, screen size: the figures are made 11 to 14 inches wide for slides at
    110 dpi, and a notebook column shows about 900 pixels anyway; a PNG of half the pixels
    also takes half the time to make (about a second per figure at 110 dpi).
    """
    DPI = 80

    def __init__(self, fig):
        self.fig = fig

    def _repr_png_(self):
        buffer = io.BytesIO()
        self.fig.savefig(buffer, format="png", dpi=self.DPI)
        return buffer.getvalue()

    def __repr__(self):
        return f"<figure {self.fig.get_suptitle()!r}: shown in Jupyter; .fig.savefig(path) to save>"


def figure(name, *args, **kwargs):
    """Draw ``mlp_ref.plots.<name>(*args, **kwargs)``, to be shown inline in Jupyter.

    As the last line of a cell, the figure appears below it in a notebook. Run as a script
    (:func:`run_headless`) it is not drawn (that would cost a second per figure for nothing
    to see): one line names it instead. When the figure needs results the cell has not
    computed, pass a function of no arguments that returns them, ``figure(name, lambda: ...)``:
    it is called only when the figure is drawn. ``python -m mlp_ref figures`` writes every figure.
    """
    if HEADLESS:
        print(f"[figure: mlp_ref.plots.{name}, drawn inline when this runs as a notebook]")
        return None
    if len(args) == 1 and callable(args[0]):
        args = (args[0](),)
    plots = importlib.import_module("mlp_ref.plots")       # matplotlib only now, only here
    return InlineFigure(getattr(plots, name)(*args, **kwargs))


class InlineAnimation:
    """A GIF of ``python -m mlp_ref animate``, made in this process and shown inline in Jupyter
    (as ``image/gif``, which JupyterLab, Colab and GitHub's notebook view show moving)."""

    def __init__(self, name, data, frames):
        self.name, self.data, self.frames = name, data, frames

    def _repr_mimebundle_(self, include=None, exclude=None):
        return {"image/gif": base64.b64encode(self.data).decode("ascii"), "text/plain": repr(self)}

    def __repr__(self):
        return f"<animation {self.name}: {self.frames} frames, shown in Jupyter>"


def animation(name):
    """Make the animation ``name`` (``backprop``, ``projection_step``, ``continual_steps``: see
    ``mlp_ref.classroom.animations``) to be shown inline in Jupyter, as the last line of a cell. Run as a
    script it is not made (it takes seconds): one line says where the committed GIF is, and
    ``python -m mlp_ref animate`` writes them all."""
    if HEADLESS:
        print(f"[animation: figures/{name}.gif, shown inline when this runs as a notebook]")
        return None
    animate = importlib.import_module("mlp_ref.classroom.animations")   # matplotlib only now, only here
    data, frames = animate.gif(f"{name}.gif")
    return InlineAnimation(name, data, frames)


# -- source code to read ----------------------------------------------------------------------
class Listing:
    """Source code to read, as it stands in its file: a highlighted Python block in Jupyter
    (``_repr_markdown_``), plain indented text anywhere else (``str``)."""

    def __init__(self, blocks):
        self.blocks = blocks                          # [(heading, source)]

    def __str__(self):
        return "".join(f"\n--- {heading} ---\n{textwrap.indent(source, '    ')}\n"
                       for heading, source in self.blocks)

    def _repr_markdown_(self):
        return "\n\n".join(f"`{heading}`\n\n```python\n{source}\n```"
                             for heading, source in self.blocks)

    def __repr__(self):
        return str(self)


def listing(path, *names, label=None):
    """The source of the top-level functions or classes ``names`` of the Python file ``path``,
    line for line as they stand in it (decorators and a comment on the last line included).

    The file is parsed (``ast``), not imported: its own imports (PyTorch, say) need not be
    installed to read it, and what is shown is what a run of that file executes. Each block is
    headed ``label: file name, name``. As the last line of a cell, the listing appears in Jupyter
    as highlighted Python; run as a script (:func:`run_headless`) it is printed, indented.
    """
    path = Path(path)
    text = path.read_text(encoding="utf-8")
    nodes = {node.name: node for node in ast.parse(text).body
             if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))}
    unknown = [name for name in names if name not in nodes]
    if unknown:
        raise ValueError(f"names: expected functions or classes of {path.name}, got {unknown}")
    lines = text.splitlines()

    def whole_lines(node):                  # its decorators, and a comment after its last line
        first = min([d.lineno for d in node.decorator_list] + [node.lineno])
        return "\n".join(lines[first - 1:node.end_lineno])
    head = f"{label}: {path.name}" if label else path.name
    shown = Listing([(f"{head}, {name}", whole_lines(nodes[name])) for name in names])
    if HEADLESS:
        print(shown, end="")
        return None
    return shown


# -- printing arrays -------------------------------------------------------------------------
def show(name, value, formula=None, precision=4, sci=False):
    """Print one stage: ``name = formula   shape (n, k)`` and its values (``sci``: as 1.2e-04)."""
    value = np.asarray(value)
    head = f"{name} = {formula}" if formula else name
    print(f"\n{head}   shape {value.shape}")
    fmt = {"float_kind": f"{{:.{precision - 1}e}}".format} if sci else None
    with np.printoptions(precision=precision, suppress=not sci, linewidth=100, formatter=fmt):
        print("  " + np.array2string(value, prefix="  "))


def show_stages(stages, net, precision=4):
    """Print forward (a0, z1, ...) or backward (dout, dz2, ...) stages with their formulas,
    as ``python -m mlp_ref stages`` does."""
    for name, value in stages.items():
        show(name, value, stage_formula(name, net.activations), precision=precision)


def show_params(net, precision=4):
    """Print every weight and bias of ``net``, W1, b1, W2, ...: the numbers to check by hand."""
    for name, value in net.params.items():
        show(name, value, precision=precision)
