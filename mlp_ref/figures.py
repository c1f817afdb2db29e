"""Write every figure to a folder, byte-identical from run to run.

Each entry of ``FIGURES`` maps a file name to a function that computes its results
(``experiments``) and draws them (``plots``). ``write_all`` prints one progress line per
figure with its time. To add a figure: a function in ``experiments`` returning arrays, one in
``plots`` drawing them, and a line here.
"""
from __future__ import annotations

import functools
import os
import time

from . import experiments
from .setups import G_QUESTION, seed_setup

def png_metadata():
    """The PNG text chunk: no time stamp, and the versions that decide the bytes.

    The same versions of matplotlib (which ships its own FreeType) and numpy give the same
    bytes; the test of committed figures compares bytes exactly when the versions match.
    """
    import matplotlib
    import numpy
    return {"Software": f"mlp-ref figures; matplotlib {matplotlib.__version__}; "
                        f"numpy {numpy.__version__}"}


def _seed_problem():
    from . import plots
    net, X, _ = seed_setup()
    return plots.seed_problem(experiments.naive_step_effect(net, X, G_QUESTION, lr=0.1))


def _backprop_stages():
    from . import plots
    net, X, _ = seed_setup()
    return plots.backprop_stages(
        experiments.backprop_stages(net, X, G_QUESTION),
        title="Backprop of G = [0, \u22121]: out1's column is 0 in dout, dz2, dW2, db2 \u2014\n"
              "but dW1 and db1 are not: a step moves the shared hidden layer, and out1 with it")


def _backprop_zeroed():
    from . import plots
    net, X, _ = seed_setup()
    result = experiments.backprop_stages(net, X, G_QUESTION)
    return plots.backprop_stages(
        result, zeroed=result["zeroed"],
        title="What each fix zeroes: the mask [0, 1] only entries that are already 0 here;\n"
              "freezing W1, b1 (var_list = [W2, b2]) all of the hidden layer's gradient")


def _projection_geometry():
    from . import plots
    return plots.projection_geometry(experiments.projection_geometry())


#: The number of steps of trajectories.png and pareto.png (every rule of the question table).
STEPS = 200
#: The step sizes of drift_vs_lr.png: from far inside the first-order regime to the seed's lr.
DRIFT_LRS = (1e-5, 3e-5, 1e-4, 3e-4, 1e-3, 3e-3, 1e-2, 3e-2, 1e-1)


def _network_fixes():
    from . import plots
    return plots.network_fixes(experiments.weight_changes("seed"))


def _tangent_kernel():
    from . import plots
    return plots.tangent_kernel([experiments.tangent_kernel("seed"),
                                 experiments.tangent_kernel("visible")])


def _drift_vs_lr():
    from . import plots
    return plots.drift_vs_lr([experiments.one_step("visible", lrs=DRIFT_LRS),
                              experiments.one_step("seed", lrs=DRIFT_LRS)])


@functools.lru_cache(maxsize=1)
def _visible_trajectories():
    """The visible setup's 200 steps, shared by trajectories.png and pareto.png."""
    return experiments.trajectories("visible", steps=STEPS)


def _trajectories():
    from . import plots
    return plots.trajectories(_visible_trajectories())


def _pareto():
    from . import plots
    return plots.pareto(_visible_trajectories())


def _heldout_drift():
    from . import plots
    rules = ("naive", "project", "freeze", "span")
    return plots.heldout_drift(experiments.drift_over_slice("visible", rules=rules))


def _optimizer_order():
    from . import plots
    return plots.optimizer_order(experiments.optimizer_order("visible"))


#: The measurements the projection-cost figure is drawn from: written by
#: ``python -m mlp_ref bench --json figures/data/projection_cost.json`` on the project's own
#: machine and committed, so that drawing never times anything (timings are not reproducible).
PROJECTION_COST_DATA = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                                    "figures", "data", "projection_cost.json")


def _projection_cost():
    import json

    from . import plots
    with open(PROJECTION_COST_DATA) as fh:
        return plots.projection_cost(json.load(fh))


FIGURES = {
    "seed_problem.png": _seed_problem,
    "backprop_stages.png": _backprop_stages,
    "backprop_zeroed.png": _backprop_zeroed,
    "projection_geometry.png": _projection_geometry,
    "network_fixes.png": _network_fixes,
    "tangent_kernel.png": _tangent_kernel,
    "drift_vs_lr.png": _drift_vs_lr,
    "trajectories.png": _trajectories,
    "pareto.png": _pareto,
    "heldout_drift.png": _heldout_drift,
    "optimizer_order.png": _optimizer_order,
    "projection_cost.png": _projection_cost,
}


def write_all(out="figures", names=None, log=print):
    """Draw every figure (or those in ``names``) into the folder ``out``; return the paths."""
    os.makedirs(out, exist_ok=True)
    names = list(FIGURES) if names is None else list(names)
    unknown = [n for n in names if n not in FIGURES]
    if unknown:
        raise ValueError(f"names: unknown figures {unknown}; known: {list(FIGURES)}")
    paths, metadata = [], png_metadata()
    for i, name in enumerate(names, 1):
        t0 = time.perf_counter()
        fig = FIGURES[name]()
        path = os.path.join(out, name)
        fig.savefig(path, metadata=metadata)
        paths.append(path)
        log(f"[{i}/{len(names)}] {path}  ({time.perf_counter() - t0:.1f} s)")
    return paths
