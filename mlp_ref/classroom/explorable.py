"""The explorable of the question: ``python -m mlp_ref explore`` opens a window on the seed and the
visible setups, with controls for the fix, lr, the number of steps and lam, and panels that
redraw live (out1's and out2's change on every sample, out1's drift against lr with the current
point marked, the network with the weights the steps moved). In Jupyter, ``%matplotlib widget``
(ipympl) and ``mlp_ref.classroom.explorable.explorer()`` run the same window in a notebook.

``python -m mlp_ref explore --html FILE.html`` writes the same controls as a static page over a
grid of precomputed states (``GRID``): every state's picture (a PNG) and numbers are embedded,
a few lines of plain JavaScript show the one the controls name; no server, no network, works
on a phone. The same command gives the same bytes.

Every state is ``measurements.explorer.state``; every picture is ``plots.explorer.explorer_panels``.
matplotlib is imported only when something is drawn.
"""
from __future__ import annotations

import base64
import html
import json
import os

import numpy as np

from ..files import atomic
from ..measurements import explorer as measure
from ..measurements.rules import PENALTY_LAM
from ..setups import LR, SETUPS
from . import figures

#: The static page's grid: every combination is drawn (lam only for the penalty).
GRID = {"setup": tuple(SETUPS), "fix": measure.FIXES, "lr": (0.001, 0.01, 0.03, 0.1),
        "steps": (1, 20), "lam": (PENALTY_LAM, 5.0)}
#: The page's pictures: one column of panels (a phone's screen), at this resolution.
PAGE_DPI = 72
#: The live window's drift curve: max |delta out1| at these lrs (the current lr is marked on it).
LIVE_LRS = tuple(np.logspace(-4, -0.5, 8))
#: The live window's slider ranges: log10 lr, steps, log10 lam.
LIVE_RANGES = {"lr": (-4.0, -0.5), "steps": (1, 100), "lam": (-2.0, 1.3)}


def key(setup, fix, lr_index, steps_index, lam_index):
    """A state's name on the page: "seed|penalty|2|0|1"; the lam index is "-" but for the
    penalty (the other fixes do not depend on lam)."""
    return "|".join([setup, fix, str(lr_index), str(steps_index),
                     str(lam_index) if fix == "penalty" else "-"])


def grid_states(grid=GRID):
    """(key, setup, fix, lr, steps, lam) for every state of the page's grid, in page order."""
    for setup in grid["setup"]:
        for fix in grid["fix"]:
            lams = list(enumerate(grid["lam"])) if fix == "penalty" else [(0, PENALTY_LAM)]
            for s, steps in enumerate(grid["steps"]):
                for li, lam in lams:
                    for i, lr in enumerate(grid["lr"]):
                        yield key(setup, fix, i, s, li), setup, fix, lr, steps, lam


def numbers(state):
    """The numbers the page prints beside a state's picture, as text."""
    return {"drift": "0 exactly" if state["drift_batch"] == 0.0 else f"{state['drift_batch']:.3g}",
            "gain": f"{state['gain']:+.4g}",
            "taken": f"{state['taken']} of {state['steps']}" + (" (diverged)" if state["diverged"] else "")}


def page_picture(state, curve):
    """A state's picture for the page: the panels in one column, as a palette PNG, deterministic."""
    from ..plots import explorer as drawing
    fig = drawing.explorer_panels(state, curve, portrait=True)
    return drawing.page_png(fig, PAGE_DPI, figures.metadata("png"))


def page_data(grid=GRID, log=None):
    """{key: {"img": data URI, "drift", "gain", "taken"}} for every state of ``grid``: each
    picture shows its state and the drift of the states beside it (the same setup, fix, steps
    and lam at every lr of the grid)."""
    every = list(grid_states(grid))
    states = {(setup, fix, lr, steps, lam): measure.state(setup, fix, lr, steps, lam)
              for _, setup, fix, lr, steps, lam in every}
    data = {}
    for n, (k, setup, fix, lr, steps, lam) in enumerate(every, 1):
        curve = {"lrs": np.array(grid["lr"]),
                 "drift": np.array([states[(setup, fix, x, steps, lam)]["drift_batch"] for x in grid["lr"]])}
        png = page_picture(states[(setup, fix, lr, steps, lam)], curve)
        data[k] = {"img": "data:image/png;base64," + base64.b64encode(png).decode("ascii"),
                   **numbers(states[(setup, fix, lr, steps, lam)])}
        if log is not None:
            log(f"[{n}/{len(every)}] {k}")
    return data


#: The page around the data: the controls, the numbers, the picture, and the script that shows
#: the state the controls name. No external resource of any kind.
PAGE = """<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>mlp-ref explorer: hold out1, raise out2</title>
<style>
body {{ font-family: system-ui, sans-serif; margin: 0.8em; max-width: 1100px; line-height: 1.4; }}
h1 {{ font-size: 1.3em; margin: 0.2em 0; }}
.wrap {{ display: flex; flex-wrap: wrap; gap: 1em; align-items: flex-start; }}
form {{ flex: 1 1 260px; max-width: 380px; }}
fieldset {{ border: 1px solid #bbb; margin: 0 0 0.6em 0; padding: 0.4em 0.7em; }}
label {{ display: block; padding: 0.15em 0; }}
input[type=range] {{ width: 100%; }}
select {{ font-size: 1em; width: 100%; }}
.view {{ flex: 2 1 340px; }}
img {{ width: 100%; max-width: 560px; height: auto; }}
.numbers {{ font-size: 1.05em; }}
</style>
</head>
<body>
<h1>One step with G = [0, &minus;1]: out2 should rise, out1 should stay</h1>
<p>{intro}</p>
<div class="wrap">
<form id="controls" autocomplete="off">
<fieldset><legend>setup</legend>
{setups}
</fieldset>
<fieldset><legend>fix</legend>
<select id="fix" name="fix">
{fixes}
</select>
</fieldset>
<fieldset><legend>lr = <output id="lr-value"></output></legend>
<input type="range" id="lr" name="lr" min="0" max="{lr_max}" step="1" value="{lr_start}">
</fieldset>
<fieldset><legend>steps = <output id="steps-value"></output></legend>
<input type="range" id="steps" name="steps" min="0" max="{steps_max}" step="1" value="0">
</fieldset>
<fieldset><legend>&lambda; (penalty only) = <output id="lam-value"></output></legend>
<input type="range" id="lam" name="lam" min="0" max="{lam_max}" step="1" value="0">
</fieldset>
<p class="numbers">max |&Delta;out1| on the batch: <b id="drift"></b><br>
mean &Delta;out2: <b id="gain"></b><br>steps taken: <span id="taken"></span></p>
</form>
<div class="view"><img id="view" alt="the state the controls name"></div>
</div>
<script>
"use strict";
const GRID = {grid};
const STATES = {states};
function idx(name) {{ return Number(document.getElementById(name).value); }}
function show() {{
  const setup = document.querySelector("input[name=setup]:checked").value;
  const fix = document.getElementById("fix").value;
  const penalty = fix === "penalty";
  const key = [setup, fix, idx("lr"), idx("steps"), penalty ? idx("lam") : "-"].join("|");
  const s = STATES[key];
  const img = document.getElementById("view");
  img.src = s.img;
  img.dataset.state = key;
  for (const name of ["drift", "gain", "taken"]) document.getElementById(name).textContent = s[name];
  for (const name of ["lr", "steps", "lam"])
    document.getElementById(name + "-value").textContent = GRID[name][idx(name)];
  document.getElementById("lam").disabled = !penalty;
}}
for (const kind of ["input", "change"]) document.getElementById("controls").addEventListener(kind, show);
show();
</script>
</body>
</html>
"""

INTRO = ("Each picture is a measurement of mlp-ref, precomputed: the steps of the fix chosen, "
         "from the start of the setup, with G = [0, &minus;1] on every sample. Panels: out2's and "
         "out1's change on every sample, out1's drift against lr (the ring: this lr), and the "
         "network with the weights the steps moved (dotted: not moved at all). "
         "<code>python -m mlp_ref explore</code> opens the same with any value.")


def page(data, grid=GRID):
    """The page's text: ``PAGE`` with the controls of ``grid`` and ``data`` embedded."""
    setups = "\n".join(
        f'<label><input type="radio" name="setup" value="{s}"{" checked" if i == 0 else ""}> '
        f"{html.escape(label)}</label>"
        for i, (s, label) in enumerate((s, {"seed": "seed: 3-4-2 sigmoid",
                                            "visible": "visible: 3-16-16-2 tanh"}.get(s, s))
                                       for s in grid["setup"]))
    fixes = "\n".join(f'<option value="{f}">{html.escape(f)}</option>' for f in grid["fix"])
    seed_lr = LR["seed"]
    lr_start = grid["lr"].index(seed_lr) if seed_lr in grid["lr"] else 0
    shown = {name: [f"{v:g}" for v in grid[name]] for name in ("lr", "steps", "lam")}
    return PAGE.format(intro=INTRO, setups=setups, fixes=fixes, lr_max=len(grid["lr"]) - 1,
                       lr_start=lr_start, steps_max=len(grid["steps"]) - 1,
                       lam_max=len(grid["lam"]) - 1, grid=json.dumps(shown, sort_keys=True),
                       states=json.dumps(data, sort_keys=True, indent=0))


def write_html(path, grid=GRID, log=None):
    """Write the static page to ``path``, whole or not at all; ``path`` is checked before the
    states are computed (``atomic.target``). Returns the path."""
    path = atomic.check_target("--html", path)
    text = page(page_data(grid, log), grid)
    return atomic.write_atomically("--html", path, lambda f: f.write(text.encode("utf-8")))


# -- the live window ------------------------------------------------------------------------------
def live_measure(setup, fix, lr, steps, lam):
    """(state, curve) for the live window: ``explorer.state`` and its drift at ``LIVE_LRS``."""
    drift, diverged = measure.drift_curve(setup, fix, LIVE_LRS, steps, lam)
    return (measure.state(setup, fix, lr, steps, lam),
            {"lrs": np.array(LIVE_LRS), "drift": drift, "diverged": diverged})


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
        log(f"wrote {html_path} ({os.path.getsize(html_path) // 1024} KiB)")
        return 0
    import matplotlib
    if matplotlib.get_backend().lower() == "agg":
        log("explore: matplotlib's backend is Agg, which opens no window; use a GUI backend "
            "(e.g. MPLBACKEND=TkAgg), %matplotlib widget in Jupyter, or --html FILE.html")
        return 2
    live = explorer()
    live.show()
    return 0
