"""The explorable of the question: ``python -m mlp_ref explore`` opens a window on the seed and the
visible setups, with controls for the fix, lr, the number of steps and lam, and panels that
redraw live (out1's and out2's change on every sample, out1's drift against lr with the current
point marked, the network with the weights the steps moved). In Jupyter, ``%matplotlib widget``
(ipympl) and ``mlp_ref.classroom.explorable.explorer()`` run the same window in a notebook.

``python -m mlp_ref explore --html FILE`` writes the same controls as one self-contained page
(no server, no network, works on a phone) whose JavaScript computes every state live, at any lr,
steps and lam: a transcription of the package's mathematics (``resources/explorer/mlp.js``, each
function naming its Python counterpart) that starts from the setups' parameters, embedded as
JSON (``page_data``). The package stays the reference: tests/test_explore.py checks the page's
``window.mlpRef.state`` against ``measurements.explorer.state`` in Node and in Chromium. The page's
markup, style and drawing are ``resources/explorer/page.html``, ``page.css`` and ``page.js``. The
same command gives the same bytes.

The window's states are ``measurements.explorer.state``, drawn by ``plots.explorer``; matplotlib is
imported only when the window is opened.
"""
from __future__ import annotations

import json
import os

import numpy as np

from .. import fixes
from ..files import atomic
from ..measurements import explorer as measure
from ..measurements.fits import ROUNDOFF
from ..measurements.rules import PENALTY_LAM, RULES
from ..resources import read_bytes
from ..setups import LR, SETUPS

#: The page's controls: log10 lr and log10 lam on their sliders (the number fields beside them take
#: any value), steps 1 .. 200; the drift curve is drawn at ``PAGE_CURVE_LRS``.
PAGE_RANGES = {"lr": (-4.0, 0.0), "steps": (1, 200), "lam": (-2.0, 2.0)}
PAGE_CURVE_LRS = tuple(float(x) for x in np.logspace(-4, 0, 13))
#: The page's files (``mlp_ref/resources/explorer/``): the template, its style, the mathematics
#: (the transcription) and the drawing, put into the template where it names them.
PAGE_FILES = {"/*STYLE*/": "page.css", "/*MATH*/": "mlp.js", "/*DRAWING*/": "page.js"}
#: The live window's drift curve: max |delta out1| at these lrs (the current lr is marked on it).
LIVE_LRS = tuple(np.logspace(-4, -0.5, 8))
#: The live window's slider ranges: log10 lr, steps, log10 lam.
LIVE_RANGES = {"lr": (-4.0, -0.5), "steps": (1, 100), "lam": (-2.0, 1.3)}
SETUP_LABELS = {"seed": "seed 3-4-2 sigmoid", "visible": "visible 3-16-16-2 tanh"}


def setup_data(name):
    """One setup as the page embeds it: sizes, activations, every W_l (rows) and b_l, the batch X,
    the lr the tutorials use, and ``fixes.penalty_limit`` at its start. Floats are written as
    Python's repr, which JSON.parse reads back to the same float64, bit for bit."""
    net, X, _ = SETUPS[name]()
    layers = range(1, len(net.sizes))
    return {"label": SETUP_LABELS.get(name, name), "sizes": list(net.sizes), "acts": net.activations,
            "W": [net.params[f"W{l}"].tolist() for l in layers], "b": [net.params[f"b{l}"].tolist() for l in layers],
            "X": X.tolist(), "lr": LR[name], "penalty_limit": float(fixes.penalty_limit(net, X))}


def page_data(setups=tuple(SETUPS), log=None):
    """What the page embeds: every setup of ``setups`` (``setup_data``), the fixes and which of them
    hold out1 exactly (``rules.Rule.exact``), the controls' ranges and the round-off band."""
    data = {"setups": {}, "fixes": list(measure.FIXES),
            "exact": [f for f in measure.FIXES if f in RULES and RULES[f].exact], "penalty_lam": PENALTY_LAM,
            "ranges": PAGE_RANGES, "curve_lrs": list(PAGE_CURVE_LRS),
            "roundoff": ROUNDOFF}
    for name in setups:
        if log is not None:
            log(f"explore: the {name} setup's parameters")
        data["setups"][name] = setup_data(name)
    return data


def page_text(name):
    """A file of the page (``mlp_ref/resources/explorer/``) as text."""
    return read_bytes(f"explorer/{name}").decode("utf-8")


def page(data):
    """The page: the template with its style, scripts and ``data`` (JSON) put in."""
    text = page_text("page.html")
    for marker, name in PAGE_FILES.items():
        text = text.replace(marker, page_text(name).strip())
    embedded = json.dumps(data, sort_keys=True, separators=(",", ":")).replace("</", "<\\/")
    return text.replace("/*DATA*/", embedded)


def write_html(path, log=None):
    """Write the page to ``path``, whole or not at all; ``path`` is checked before anything is
    computed (``atomic.target``). Returns the path."""
    path = atomic.check_target("--html", path)
    text = page(page_data(tuple(SETUPS), log))
    return atomic.write_atomically("--html", path, lambda f: f.write(text.encode("utf-8")))


# -- the live window ------------------------------------------------------------------------------
def live_measure(setup, fix, lr, steps, lam):
    """(state, curve) for the live window: ``explorer.state``, its drift at ``LIVE_LRS`` and the
    setup's ``fixes.penalty_limit`` at its start (which the window names when lr lam is past it)."""
    drift, diverged = measure.drift_curve(setup, fix, LIVE_LRS, steps, lam)
    net, X, _ = SETUPS[setup]()
    return (measure.state(setup, fix, lr, steps, lam),
            {"lrs": np.array(LIVE_LRS), "drift": drift, "diverged": diverged,
             "penalty_limit": float(fixes.penalty_limit(net, X))})


def explorer(fig=None):
    """The live explorer on ``fig`` (default: a new pyplot figure): returns the
    ``plots.explorer.Explorer``, whose widgets redraw the panels when moved."""
    from ..plots import explorer as drawing
    return drawing.Explorer(live_measure, fix_names=measure.FIXES, setups=tuple(SETUPS),
                            ranges=LIVE_RANGES, start={"lr": LR["seed"], "steps": 1,
                                                       "lam": PENALTY_LAM}, fig=fig)


def main(html_path=None, log=print):
    """The command: the page into ``html_path``, or the window (blocking until it is closed)."""
    if html_path is not None:
        write_html(html_path, log=log)
        log(f"wrote {html_path} ({os.path.getsize(html_path) // 1024} KiB): open it in any browser")
        return 0
    import matplotlib
    if matplotlib.get_backend().lower() == "agg":
        log("explore: matplotlib's backend is Agg, which opens no window; use a GUI backend "
            "(e.g. MPLBACKEND=TkAgg), %matplotlib widget in Jupyter, or --html FILE.html")
        return 2
    live = explorer()
    live.show()
    return 0
