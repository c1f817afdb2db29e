"""The deck for the 90-minute class: ``python -m mlp_ref slides --out FILE.pdf`` writes a PDF drawn
with matplotlib (PdfPages: no LaTeX, no browser) and the speaker notes beside it, FILE.notes.md.

``SLIDES`` is the deck, in order: each slide's title, its few lines, the package figure it shows
(a name of ``figures.FIGURES``, drawn by the figures' own code from the same measurements), its
formula in mathtext, the minutes of the class it covers and what the teacher says and does
(the notes). The teacher's guide's 90-minute plan (tutorials/README.md) follows this deck. The
same command gives the same bytes: the PDF records no date.
"""
from __future__ import annotations

import os

from ..files import atomic
from ..measurements import rules
from . import figures

#: One slide per entry. "- " starts a bullet. Minutes: (start, end) of the 90-minute plan.
SLIDES = [
    {"kind": "title", "title": "Raise out2, hold out1",
     "lines": ["One question about a gradient step, and every answer to it, measured",
               "mlp-ref: a pure-NumPy MLP with its backward pass in view"],
     "minutes": (0, 2),
     "notes": "Say the question before any code: we want to change one output of a network and "
              "leave another exactly where it is. Everything today is measured by the package."},
    {"title": "The question", "figure": "seed_problem.png",
     "lines": ["The loss's gradient G = [0, \u22121] says: raise out2, leave out1 alone. "
               "A plain step raises out2. Does out1 stay?"],
     "formula": r"$\theta \leftarrow \theta - \eta\, g,\qquad g = \sum_i J_i^T G_i$",
     "minutes": (2, 10),
     "notes": "Stack Overflow 42182233. Run `python -m mlp_ref` (the table) and show the figure: "
              "out2 rises as asked, out1 moves too, thousands of times less on the seed network "
              "but not zero. Ask the room why before going on."},
    {"title": "Backprop, stage by stage", "figure": "backprop_stages.png",
     "lines": ["Tutorial 01. The 3-4-2 network, G = [0, \u22121]: out1's column is 0 in dout, dz2, "
               "dW2, db2; dW1 and db1 are not 0."],
     "formula": r"$dW_2 = a_1^T dz_2,\qquad dW_1 = X^T\,(dz_2 W_2^T \odot \sigma'(z_1))$",
     "minutes": (10, 30),
     "notes": "Tutorial 01, sections 1-6. Check z1[0, 0] by hand from the printed weights. The two "
              "facts: dW2[:, 0] is exactly 0, no entry of dW1 is. figures/backprop.gif shows the "
              "zero column travelling down and the shared layer lighting up."},
    {"title": "Why out1 moves", "figure": "tangent_kernel.png",
     "lines": ["Tutorial 02. To first order, out1 moves by the cross-output kernel K\u2081\u2082; "
               "the output layer's share is exactly 0: it all flows through the shared layers."],
     "formula": r"$\Delta O_1 = -\eta\, K_{12}\, G_2,\qquad K_{12} = J_1 J_2^T$",
     "minutes": (30, 45),
     "notes": "Tutorial 02, sections 3-4: the printed J1, then K12 by layer. The misconception to "
              "correct: 'the output layer leaks'. It does not; the shared layers do."},
    {"title": "Masking the loss", "figure": "backprop_zeroed.png",
     "lines": ["Tutorial 03. The accepted answer's mask [0, 1] on the loss: G's out1 column is "
               "already 0, so the masked step is the naive one, bit for bit."],
     "formula": r"$G \odot [0, 1] = [0, -1] \odot [0, 1] = G$",
     "minutes": (45, 55),
     "notes": "Tutorial 03, sections 2 and 4. In the answer's script var_list and the mask held "
              "out1 together, neither alone. Hatched cells: what each fix zeroes. A mask is for "
              "missing labels."},
    {"title": "Layer splitting", "figure": "network_fixes.png",
     "lines": ["Tutorial 04. Train only what out1 does not read (var_list = [W2, b2]).",
               "- out1's drift is exactly 0.0, on every input, at every lr",
               "- the price: the shared layer cannot learn for out2"],
     "formula": r"$\partial O_1 / \partial W_2[:, 1] = 0 \;\Rightarrow\; \Delta O_1 = 0$",
     "minutes": (55, 65),
     "notes": "Tutorial 04, section 1 (exact at every lr) and section 5 (the price: what out2 can "
              "no longer learn). Separate heads and two towers are the same idea."},
    {"title": "Projection", "figure": "projection_geometry.png",
     "lines": ["Tutorial 05. Remove from g what moves out1 on the batch: J\u2081D = 0, so out1 holds "
               "to first order. Drift O(\u03b7\u00b2) on the batch, O(\u03b7) off it."],
     "formula": r"$D = g - J_1^T (J_1 J_1^T)^+ J_1\, g$",
     "minutes": (65, 78),
     "notes": "Tutorial 05, sections 1-4: the projected step along the tangent of out1's level "
              "set, slope 2 on the batch and slope 1 off it. figures/projection_step.gif moves it."},
    {"title": "Restoring", "figure": "drift_vs_lr.png",
     "lines": ["Tutorial 05. Gauss-Newton steps back onto out1's level set: the residual squares "
               "each step, down to round-off."],
     "formula": r"$\theta \leftarrow \theta - J_1^T (J_1 J_1^T)^+ (O_1(\theta) - O_1^{ref})$",
     "minutes": (78, 85),
     "notes": "Tutorial 05, section 5. On the figure: naive and the mask O(lr), projection O(lr^2), "
              "restore and freeze at round-off or exactly 0."},
    {"title": "What each fix guarantees", "lines": [],
     "minutes": (85, 87),
     "notes": "Tutorial 06's table, measured: read one line per fix. Every line is asserted by "
              "the tests on the runs that show it."},
    {"title": "Misconceptions",
     "lines": ["- \"Mask the loss and out1 will not move.\" With G = [0, \u22121] it is the naive step.",
               "- \"out1's weights got no gradient, so out1 cannot move.\" It reads the shared layers.",
               "- \"The cross-talk is in the output layer.\" Its share of K\u2081\u2082 is exactly 0.",
               "- \"A small enough step holds out1.\" Drift is O(\u03b7): smaller, never zero.",
               "- \"Projection holds out1.\" On the batch, to first order: O(\u03b7\u00b2); off it O(\u03b7).",
               "- \"A penalty holds out1.\" Its first step is the naive one; a pull, never a guarantee."],
     "minutes": (87, 88),
     "notes": "Ask the room which of these they believed at the start. Each is corrected by a "
              "tutorial: 03, 01, 02, 01 and 05, 05 and 06, 06."},
    {"title": "A real task", "figure": "continual_tradeoff.png",
     "lines": ["Tutorial 08. Digits 0-4, then 5-9, every fix with a memory of old images: what each "
               "keeps, and what the new digits pay."],
     "formula": None,
     "minutes": (88, 89),
     "notes": "Only a pointer in 90 minutes: figures/continual_steps.gif shows the run step by "
              "step. Tutorial 08 is the week's last day."},
    {"title": "Exercises",
     "lines": ["python -m mlp_ref check tutorials/exercises/NN_....py grades each one:",
               "- 01 layer backward (after tutorial 01)",
               "- 02 masked loss (after 03)",
               "- 03 freeze (after 04)",
               "- 04 projection (after 05)",
               "- 05 restore (after 05)",
               "Homework: exercises 01 and 04. Explore: python -m mlp_ref explore"],
     "minutes": (89, 90),
     "notes": "Give exercises 01 and 04 as homework. The explorer (python -m mlp_ref explore, or "
              "the live page from --html on the course site) lets students move lr, the steps, "
              "the fix and lambda themselves."},
]


def _only(result, rules):
    """``result`` (a measurement of every rule) with only ``rules`` drawn."""
    return dict(result, rules=[r for r in result["rules"] if r in rules])


#: The figures a slide draws otherwise than figures/ does, with less to read from the back of a
#: room (their ``brief`` forms; the seed network's kernel only; the two fixes slide 6 compares;
#: the five rules slide 8 speaks of). The others are the figures' own.
SLIDE_FIGURES = {
    "seed_problem.png": lambda plots: plots.seed_problem(figures.seed_effect(), brief=True),
    "backprop_stages.png": lambda plots: plots.backprop_stages(
        figures.seed_stages(), title=figures.STAGES_TITLE, brief=True),
    "backprop_zeroed.png": lambda plots: plots.backprop_stages(
        figures.seed_stages(), zeroed=figures.seed_stages()["zeroed"], title=figures.ZEROED_TITLE,
        brief=True),
    "projection_geometry.png": lambda plots: plots.projection_geometry(figures.geometry(), brief=True),
    "tangent_kernel.png": lambda plots: plots.tangent_kernel(figures.tangent_kernels()[:1]),
    "network_fixes.png": lambda plots: plots.network_fixes(
        _only(figures.seed_weight_changes(), ("naive", "freeze"))),
    "drift_vs_lr.png": lambda plots: plots.drift_vs_lr(
        [_only(r, ("naive", "masked", "freeze", "project", "project+restore"))
         for r in figures.drift_results()], brief=True),
    "continual_tradeoff.png": lambda plots: plots.continual_tradeoff(figures.continual_run(), brief=True),
}


def guarantee_lines():
    """The table of guarantees: one line per rule of the question table (``rules.RULES``)."""
    return [f"- {name}: {rule.guarantee}" for name, rule in rules.RULES.items()]


def deck():
    """The slides in order, the guarantees filled in from ``rules.RULES``."""
    return [dict(s, lines=guarantee_lines()) if s["title"] == "What each fix guarantees" else s
            for s in SLIDES]


def notes(deck_slides, pdf_name):
    """The speaker notes (markdown): per slide its title, its minutes and what to say and do."""
    out = [f"# Speaker notes for {pdf_name}", "",
           "The 90-minute class of tutorials/README.md, one section per slide.", ""]
    for number, s in enumerate(deck_slides, 1):
        start, end = s["minutes"]
        out += [f"## Slide {number}: {s['title']} (minutes {start}\u2013{end})", ""]
        if s.get("figure"):
            out += [f"Figure: figures/{s['figure']}.", ""]
        out += [s["notes"], ""]
    return "\n".join(out)


def draw(log=None):
    """Every slide as a Figure, in order."""
    from .. import plots
    from ..plots import slides as drawing
    slides_drawn, deck_slides = [], deck()
    for number, s in enumerate(deck_slides, 1):
        figure = None
        if s.get("figure"):
            figure = SLIDE_FIGURES.get(s["figure"], figures.FIGURES[s["figure"]])(plots)
        slides_drawn.append(drawing.slide(s, number, len(deck_slides), figure))
        if log is not None:
            log(f"[{number}/{len(deck_slides)}] {s['title']}")
    return slides_drawn


def notes_file(out):
    """The speaker notes' file beside the PDF ``out``: FILE.notes.md for FILE.pdf."""
    return (out[:-4] if out.lower().endswith(".pdf") else out) + ".notes.md"


def write(out, log=None):
    """The deck as the PDF ``out`` and its notes as ``out`` with .notes.md for .pdf, each whole
    or not at all. Returns (pdf path, notes path)."""
    out = atomic.check_target("--out", out)          # both files, before anything is drawn
    if atomic.target("--out", out)[1]:
        raise atomic.refused(OSError, "--out", f"{out!r} is a device; the deck is a PDF with its notes "
                                               "beside it (FILE.notes.md): name a file")
    notes_path = atomic.check_target("--out", notes_file(out))
    from ..plots import slides as drawing
    drawn = draw(log)
    software = figures.png_metadata()["Software"]
    meta = {"Creator": software, "Producer": software, "CreationDate": None, "ModDate": None,
            "Title": "mlp-ref: raise out2, hold out1"}
    atomic.write_atomically("--out", out, lambda f: drawing.write_pdf(f, drawn, meta))
    text = notes(deck(), os.path.basename(out))
    atomic.write_atomically("--out", notes_path, lambda f: f.write(text.encode("utf-8")))
    return out, notes_path
