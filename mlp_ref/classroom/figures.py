"""Write every figure to a folder, byte-identical from run to run.

Each entry of ``FIGURES`` maps a file name to a function that draws (``plots``) a measurement
(``measurements``); each measurement is computed once per process (a figure drawn twice, or two
figures of the same run, reuse it) and handed out read-only (``measured``), and names the
figures drawn from it (``draws``). ``write_all`` prints one progress line per figure with its
time. To add a figure: a function in a ``measurements`` module returning arrays, one in a
``plots`` module drawing them (named as the figure), and that name in the ``draws`` of the
measurement here. ``plots`` is imported only when a figure is drawn, so that
``import mlp_ref.classroom.figures`` stays free of matplotlib.
"""
from __future__ import annotations

import functools
import os
import time

import numpy

from ..files import atomic
from ..measurements import continual, drift, optimizers, permuted, projection, projection_cost, question, scale
from ..setups import G_QUESTION, LR, seed_setup

#: The number of steps of trajectories.png and pareto.png (every rule of the question table).
STEPS = 200
#: The step sizes of drift_vs_lr.png: from far inside the first-order regime to the seed's lr;
#: slopes are fitted over lr <= DRIFT_SLOPE_MAX_LR, where the drifts are asymptotic.
DRIFT_LRS = (1e-5, 3e-5, 1e-4, 3e-4, 1e-3, 3e-3, 1e-2, 3e-2, 1e-1)
DRIFT_SLOPE_MAX_LR = 1e-3


def png_metadata():
    """The PNG text chunk: the program, and nothing that differs between machines (no time stamp,
    no version: the same command writes the same bytes with any supported numpy and matplotlib,
    on any CPU; tests/test_figures.py checks it under emulated CPUs)."""
    return {"Software": "mlp-ref figures"}


#: The file formats of ``write_all`` (``figures --format``): PNG for the README, SVG and PDF
#: for slides (vector, so they scale).
FORMATS = ("png", "svg", "pdf")


def metadata(fmt):
    """What each format records beside the drawing, with every time stamp removed (None), so
    that the same command gives the same bytes (see ``png_metadata``)."""
    software = png_metadata()["Software"]
    if fmt == "png":
        return {"Software": software}
    if fmt == "svg":
        return {"Creator": software, "Date": None}
    return {"Creator": software, "Producer": software, "CreationDate": None, "ModDate": None}


# -- what each figure draws: the measurement, computed once per process -------------------------
def measured(compute):
    """The measurement ``compute()``, computed once per process and handed out read-only: every
    figure, and every caller, reads the very same numbers, and none can change them for the
    others (``np.array(a)`` is a writable copy)."""
    @functools.lru_cache(maxsize=None)
    @functools.wraps(compute)
    def once():
        return _read_only(compute())
    return once


#: file name -> how to draw it from ``plots``, in the order ``write_all`` writes them: each
#: measurement below names the figures drawn from it (``draws``).
FIGURES = {}


def draws(*names):
    """Register the figures drawn from the decorated measurement, each by the plot function of
    ``plots`` that has its name: ``@draws("pareto")`` adds pareto.png, ``plots.pareto(m())``."""
    def register(measurement):
        for name in names:
            FIGURES[f"{name}.png"] = lambda plots, name=name: getattr(plots, name)(measurement())
        return measurement
    return register


def _read_only(value):
    """``value`` with every NumPy array in it (through dicts, lists and tuples) handed out as a
    read-only view: nobody can change the measurement through it, while an array it shares with
    others (an input it kept, such as the module constant G_QUESTION) stays as writable as it was."""
    if isinstance(value, numpy.ndarray):
        view = value.view()
        view.setflags(write=False)
        return view
    if isinstance(value, dict):
        return {key: _read_only(item) for key, item in value.items()}
    if isinstance(value, tuple) and hasattr(value, "_fields"):             # a named tuple
        return type(value)(*(_read_only(item) for item in value))
    if isinstance(value, (list, tuple)):
        return type(value)(_read_only(item) for item in value)
    return value


@draws("seed_problem")
@measured
def seed_effect():
    net, X, _ = seed_setup()
    return question.naive_step_effect(net, X, G_QUESTION, lr=LR["seed"])


#: The takeaways of the two stage figures (the seed network, G = [0, -1]).
STAGES_TITLE = ("Backprop of G = [0, \u22121]: out1's column is 0 in dout, dz2, dW2, db2 \u2014\n"
                "but dW1 and db1 are not: a step moves the shared hidden layer, and out1 with it")
ZEROED_TITLE = ("What each fix zeroes: the mask [0, 1] only entries that are already 0 here;\n"
                "freezing W1, b1 (var_list = [W2, b2]) all of the hidden layer's gradient")


@measured
def seed_stages():
    net, X, _ = seed_setup()
    return question.backprop_stages(net, X, G_QUESTION)


FIGURES["backprop_stages.png"] = lambda plots: plots.backprop_stages(seed_stages(), title=STAGES_TITLE)
FIGURES["backprop_zeroed.png"] = lambda plots: plots.backprop_stages(
    seed_stages(), zeroed=seed_stages()["zeroed"], title=ZEROED_TITLE)


@draws("projection_geometry")
@measured
def geometry():
    return projection.projection_geometry()


@draws("network_fixes")
@measured
def seed_weight_changes():
    return question.weight_changes("seed")


@draws("tangent_kernel")
@measured
def tangent_kernels():
    return [question.tangent_kernel("seed"), question.tangent_kernel("visible")]


@draws("drift_vs_lr")
@measured
def drift_results():
    """The one-step runs of drift_vs_lr.png, visible setup first."""
    return [drift.one_step(setup, lrs=DRIFT_LRS, slope_max_lr=DRIFT_SLOPE_MAX_LR)
            for setup in ("visible", "seed")]


@draws("trajectories", "pareto")
@measured
def visible_trajectories():
    """The visible setup's 200 steps, shared by trajectories.png and pareto.png."""
    return drift.trajectories("visible", steps=STEPS)


#: The rules of heldout_drift.png.
HELDOUT_RULES = ("naive", "project", "freeze", "span")


@draws("heldout_drift")
@measured
def heldout_slice():
    return drift.drift_over_slice("visible", rules=HELDOUT_RULES)


@draws("optimizer_order")
@measured
def adam_orders():
    return optimizers.optimizer_order("visible")


@draws("projection_cost")
@measured
def cost():
    return projection_cost.projection_cost_data(projection_cost.load())


@draws("continual_tradeoff", "continual_steps")
@measured
def continual_run():
    """``continual.run()``: continual_tradeoff.png and continual_steps.png draw it, and
    tests/test_continual.py asserts what tutorial 08 and the README say of it on this same run."""
    return continual.run()


@draws("continual_cost")
@measured
def continual_cost():
    """The shipped cost sweep (timings are never taken while drawing), as continual_cost.png's arrays."""
    return continual.constraint_cost_data(continual.load_cost())


@draws("field_accuracy", "field_acc_bwt")
@measured
def permuted_run():
    """The field's table on permuted digits as the package ships it (``permuted.load()``: a
    minute of ``continual-table``, not rerun to draw two figures); tests/test_permuted.py remakes
    it and asserts what tutorial 09 and the README say of it."""
    return permuted.load()


@draws("scale_cost")
@measured
def scale_ladder():
    """The shipped scale ladder (``python -m mlp_ref.measurements.scale --json``)."""
    return scale.load()


def ready(out, targets):
    """Check the folder ``out`` and every file ``targets`` in it before anything is drawn (the
    refusals of ``atomic.target``, naming ``out``), then make the folder."""
    atomic.check_folder("out", out)
    if os.path.isdir(out):
        for path in targets:
            atomic.check_target("out", path)
    atomic.make_folder("out", out)


def write_all(out="figures", names=None, log=print, fmt="png"):
    """Draw every figure (or those in ``names``) into the folder ``out`` as ``fmt`` files
    (png, svg or pdf; a name's .png becomes .svg or .pdf); return the paths.

    Each file is written whole or not at all (``atomic.write_atomically``): an interrupted run
    leaves the figures it had not finished as they were. A disk that fills up raises
    ``atomic.WriteError`` (an OSError) naming ``out`` and the file it could not write.
    """
    if fmt not in FORMATS:
        raise ValueError(f"fmt: expected one of {', '.join(FORMATS)}, got {fmt!r}")
    names = list(FIGURES) if names is None else list(names)
    unknown = [n for n in names if n not in FIGURES]
    if unknown:
        raise ValueError(f"names: unknown figures {unknown}; known: {list(FIGURES)}")
    targets = [os.path.join(out, os.path.splitext(name)[0] + "." + fmt) for name in names]
    ready(out, targets)
    import matplotlib

    from .. import plots  # matplotlib: only when a figure is drawn

    # svg.hashsalt: the SVG's element ids come from a fixed salt, not a random one
    paths, meta = [], metadata(fmt)
    with matplotlib.rc_context({"svg.hashsalt": "mlp-ref"}):
        for i, name in enumerate(names, 1):
            t0 = time.perf_counter()
            fig = FIGURES[name](plots)
            path = targets[i - 1]
            atomic.write_atomically("out", path,
                                    lambda f: fig.savefig(f, format=fmt, metadata=meta))
            paths.append(path)
            # a title or label past the edge: say so (measured on the PNG, the figures' own
            # format: svg and pdf are laid out at 72 dpi, which cut_off_texts does not measure)
            cut = plots.style.cut_off_texts(fig) if fmt == "png" else []
            log(f"[{i}/{len(names)}] {path}  ({time.perf_counter() - t0:.1f} s)"
                + (f"  cut off at the figure's edge: {cut}" if cut else ""))
    return paths
