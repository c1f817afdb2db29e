"""The fixes on a real task: keep what a network knows about digits 0-4 while it learns 5-9.

The question's setting, grown up. A [64, H, H, 10] tanh network learns the handwritten digits
0-4 (``data.digits``: one-hot targets over all ten outputs, ``losses.mse``), then learns 5-9
the same way. Nothing in the second task's loss mentions the old digits, except that its
one-hot targets push outputs 0-4 *down* on the new images; so a plain gradient step lowers
outputs 0-4 everywhere, and read class-incrementally (the argmax over all ten outputs) the
network forgets 0-4. Each fix holds outputs 0-4 while the second task trains:

    naive             the plain gradient of the second task
    freeze            only out 5-9's own weights train (SplitHeads: heads [0-4] and [5-9])
    towers            a whole second network for out 5-9 (TwoTower), out 0-4's left alone
    project           fixes.project holding outputs 0-4 on a *memory* of m old training
                      images (keep_X != X: the memory is old data, the batch is new data)
    project+restore   the same, then fixes.restore back to the values before the second task
    span              fixes.span_project over the same memory (GPM)
    penalty           the gradient plus fixes.penalty pulling outputs 0-4 back on the memory

The memory is the first m images of one seeded permutation of the old training images, so a
smaller memory is part of every larger one; the old *test* images are never in it, and the
drift measured on them is the drift off the memory.

Projection and restoring run in the fast tier (``fast.project``, ``fast.restore``: the same
directions as ``fixes.project`` and ``fixes.restore`` to 1e-12, several times sooner at a few
hundred constraints); ``tier="reference"`` runs the reference instead.

Everything here returns plain arrays and numbers (no matplotlib); ``report.format_continual``
prints a run, ``plots.continual_tradeoff``, ``continual_steps`` and ``continual_cost`` draw it.
Times are wall-clock and vary from run to run; the rest is the same bits for the same arguments
and machine. ``python -m mlp_ref.measurements.continual`` runs the cost sweep (``main``).
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import time

import numpy as np

from .. import data, fast, fixes, losses, resources
from ..architectures import SplitHeads, TwoTower
from ..boundary.argtypes import path, rows_list, whole
from ..fast.memory import peak_bytes
from ..files import atomic
from ..jacobian import OutputJacobian
from ..network import MLP
from ..pseudoinverse import GramSolver
from .fits import loglog_slope

#: The outputs of the old task (held) and of the new one (trained).
OLD = tuple(range(5))
NEW = tuple(range(5, 10))

#: The experiment: width, steps and step size of each task, the memory sizes, the seeds.
HIDDEN = 64
FIRST_STEPS = 60
SECOND_STEPS = 20
LR = 2.0
MEMORY_SIZES = (8, 32, 128)
#: Restoring costs a Gram solve per Gauss-Newton iteration, two or three a step: it runs on the
#: smaller memories only, where it already shows all it changes (nothing, off the memory).
RESTORE_SIZES = (8, 32)
INIT_STD = 0.1
SEED = 0
#: The penalty's weight is PENALTY_SAFETY / (lr * lambda_max(J J^T)) on the memory at the start
#: of the second task: half of the largest weight for which the pull alone is stable (< 2).
PENALTY_SAFETY = 1.0

#: Every fix, in the order tables and figures list them; those that need a memory.
FIXES = ("naive", "freeze", "towers", "project", "project+restore", "span", "penalty")
MEMORY_FIXES = ("project", "project+restore", "span", "penalty")


def tasks(seed=SEED):
    """The two tasks' training and test sets, inputs centred and scaled.

    Pixels (0 .. 16) are centred by the mean old-task training image and divided by 16: the
    second task arrives later, so only the first task's data sets the centring.

    Returns
    -------
    dict of arrays: ``X_old``, ``y_old``, ``X_new``, ``y_new`` (training), ``T_old``, ``t_old``,
    ``T_new``, ``t_new`` (test); X and T are (n, 64), y and t the digits (n,).
    """
    X, y, T, t = data.digits(seed=seed)
    old, test_old = np.isin(y, OLD), np.isin(t, OLD)
    mean = X[old].mean(axis=0)
    scale = lambda A: (A - mean) / 16.0      # noqa: E731
    return {"X_old": scale(X[old]), "y_old": y[old], "X_new": scale(X[~old]), "y_new": y[~old],
            "T_old": scale(T[test_old]), "t_old": t[test_old],
            "T_new": scale(T[~test_old]), "t_new": t[~test_old]}


def one_hot(y, K=10):
    """(n, K) targets: 1 in the column of each digit, 0 in the nine others."""
    return np.eye(K)[np.asarray(y)]


def accuracy(model, X, y):
    """The fraction of rows whose largest output, over all ten, is the right digit."""
    return float(np.mean(np.argmax(model(X), axis=1) == y))


def first_task(hidden=HIDDEN, steps=FIRST_STEPS, lr=LR, seed=SEED):
    """A [64, hidden, hidden, 10] tanh network trained on digits 0-4 by full-batch gradient
    descent on the MSE against one-hot targets. Returns (net, tasks(seed))."""
    d = tasks(seed)
    net = MLP([64, hidden, hidden, 10], hidden="tanh", output="identity", init_std=INIT_STD,
              seed=seed)
    Y = one_hot(d["y_old"])
    for _ in range(steps):
        _, G = losses.mse(net(d["X_old"]), Y)
        net.step(net.gradient(d["X_old"], G), lr)
    return net, d


def memory(d, m, seed=SEED):
    """The first m images of a seeded permutation of the old training images: (m, 64)."""
    if not 1 <= m <= len(d["X_old"]):
        raise ValueError(f"m: expected a memory of 1 to {len(d['X_old'])} images (the old "
                         f"training images), got {m}")
    order = np.random.default_rng(seed + 1).permutation(len(d["X_old"]))
    return d["X_old"][order[:m]]


def penalty_weight(net, mem, lr, safety=PENALTY_SAFETY):
    """lambda = safety / (lr lambda_max(J J^T)), J: outputs 0-4 on the memory's rows; and
    lambda_max. ``fixes.penalty_limit`` gives the largest stable lr lambda, 2 / lambda_max: the
    pull multiplies the error along the Gram's top eigenvector by 1 - lr lambda lambda_max."""
    limit = fixes.penalty_limit(net, mem, OLD)
    return safety * limit / (2.0 * lr), 2.0 / limit


def _model(net, fix):
    """The model a fix trains (a copy: ``net`` is never modified), and its trainable keys."""
    if fix == "freeze":
        model = SplitHeads.from_mlp(net, heads=[list(OLD), list(NEW)])
        return model, model.head_keys(1)
    if fix == "towers":
        model = TwoTower.from_mlp(net, groups=[list(OLD), list(NEW)])
        return model, model.tower_keys(1)
    return net.copy(), None


#: The two tiers' projection and restoring step.
TIERS = {"fast": (fast.project, fast.restore), "reference": (fixes.project, fixes.restore)}


def _direction(fix, model, trainable, X, G, mem, ref, lam, tier):
    """The direction D of one step of ``fix`` (restoring, if any, comes after the step)."""
    if fix in ("freeze", "towers"):
        return fixes.freeze(model, X, G, trainable=trainable)
    if fix in ("project", "project+restore"):
        return TIERS[tier][0](model, X, G, keep=OLD, keep_X=mem)
    if fix == "span":
        return fixes.span_project(model, X, G, keep=OLD, keep_X=mem)
    D = model.gradient(X, G)
    if fix == "penalty":        # the pull lambda J^T (O_old(mem) - ref), from the memory's rows
        pull = fixes.penalty(model, mem, np.zeros((len(mem), 10)), keep=OLD, ref=ref, lam=lam)
        D = {k: D[k] + pull[k] for k in D}
    return D


def _step(fix, model, trainable, X, G, mem, ref, lam, lr, tier):
    model.step(_direction(fix, model, trainable, X, G, mem, ref, lam, tier), lr)
    if fix == "project+restore":
        return TIERS[tier][1](model, mem, ref, keep=OLD).converged
    return True


def second_task(net, d, fix, m=None, steps=SECOND_STEPS, lr=LR, seed=SEED, tier="fast"):
    """Train ``fix`` on digits 5-9 for ``steps`` full-batch steps from ``net`` (not modified).

    m : the memory size, for the fixes in MEMORY_FIXES (ignored, and reported as 0, otherwise)

    Returns
    -------
    dict:
        old_acc, new_acc : (steps + 1,)   test accuracy (argmax over all ten outputs) on the
                                          old and new digits, before each step and at the end
        drift_max, drift_mean : float     max and mean |change of outputs 0-4| on the old test
                                          images (none of them is in the memory)
        memory_drift : float              max |change of outputs 0-4| on the memory (nan without)
        old_as_new : float                the fraction of old test images read as a new digit
        seconds_per_step : float          mean wall time of a direction and its step (and
                                          restore), over every step but the first (nan if
                                          steps = 1)
        peak_bytes : int                  tracemalloc's peak during the first step (traced,
                                          so untimed: tracing slows allocation)
        converged : bool                  every restore reached its tolerance (True otherwise)
        lam, lam_max : float              the penalty's weight and lambda_max (nan otherwise)
        m : int
    """
    if fix not in FIXES:
        raise ValueError(f"fix: expected one of {list(FIXES)}, got {fix!r}")
    if tier not in TIERS:
        raise ValueError(f"tier: expected one of {list(TIERS)}, got {tier!r}")
    m = int(m) if fix in MEMORY_FIXES else 0
    if fix in MEMORY_FIXES and m < 1:
        raise ValueError(f"m: expected a memory size >= 1 for {fix!r}, got {m}")
    mem = memory(d, m, seed) if m else None
    ref = net(mem)[:, list(OLD)] if m else None
    lam, lam_max = penalty_weight(net, mem, lr) if fix == "penalty" else (np.nan, np.nan)
    model, trainable = _model(net, fix)
    X, Y = d["X_new"], one_hot(d["y_new"])
    before = net(d["T_old"])[:, list(OLD)]
    old_acc, new_acc = [accuracy(model, d["T_old"], d["t_old"])], [accuracy(model, d["T_new"],
                                                                            d["t_new"])]
    seconds, peak, converged, held = 0.0, 0, True, True
    for step in range(steps):
        _, G = losses.mse(model(X), Y)
        if step == 0:                       # traced for its memory, so untimed: tracing slows allocation
            def first_step():
                nonlocal held
                held = _step(fix, model, trainable, X, G, mem, ref, lam, lr, tier)
            peak = peak_bytes(first_step)
        else:
            t0 = time.perf_counter()
            held = _step(fix, model, trainable, X, G, mem, ref, lam, lr, tier)
            seconds += time.perf_counter() - t0
        converged &= held
        old_acc.append(accuracy(model, d["T_old"], d["t_old"]))
        new_acc.append(accuracy(model, d["T_new"], d["t_new"]))
    after = model(d["T_old"])
    drift = np.abs(after[:, list(OLD)] - before)
    memory_drift = float(np.max(np.abs(model(mem)[:, list(OLD)] - ref))) if m else np.nan
    return {"fix": fix, "m": m, "old_acc": np.array(old_acc), "new_acc": np.array(new_acc),
            "drift_max": float(drift.max()), "drift_mean": float(drift.mean()),
            "memory_drift": memory_drift,
            "old_as_new": float(np.mean(np.argmax(after, axis=1) >= len(OLD))),
            "seconds_per_step": seconds / (steps - 1) if steps > 1 else np.nan,
            "peak_bytes": peak, "converged": bool(converged), "lam": lam, "lam_max": lam_max}


def plan(memory_sizes=MEMORY_SIZES, restore_sizes=RESTORE_SIZES):
    """The (fix, m) pairs of the experiment, in FIXES order: m = None for fixes without memory."""
    return [(fix, m) for fix in FIXES
            for m in ((None,) if fix not in MEMORY_FIXES else
                      restore_sizes if fix == "project+restore" else memory_sizes)]


def run(hidden=HIDDEN, first_steps=FIRST_STEPS, second_steps=SECOND_STEPS, lr=LR,
        memory_sizes=MEMORY_SIZES, restore_sizes=RESTORE_SIZES, seed=SEED):
    """The whole experiment: the first task once, then every fix of ``plan``.

    Returns
    -------
    dict: ``first`` (old-task test accuracy after the first task), ``n_params``, ``sizes``,
    ``memory_sizes``, ``input_ranks`` (m -> ``input_ranks`` of that memory), ``n_train`` and
    ``n_test`` (old and new), ``exactly_held`` ((fix, m) of the runs under which outputs 0-4
    moved by exactly 0.0 on every old test image), ``as_freeze`` ((fix, m) of the runs whose test
    accuracies equal freeze's at every step), and ``runs``: a list of ``second_task`` results, the fixes in
    FIXES order, each memory fix once per memory size (project+restore per size in
    ``restore_sizes``).
    """
    net, d = first_task(hidden, first_steps, lr, seed)
    runs = [second_task(net, d, fix, m, second_steps, lr, seed)
            for fix, m in plan(memory_sizes, restore_sizes)]
    freeze = next(r for r in runs if r["fix"] == "freeze")
    return {"exactly_held": [(r["fix"], r["m"]) for r in runs if r["drift_max"] == 0.0],
            "as_freeze": [(r["fix"], r["m"]) for r in runs if r["fix"] != "freeze"
                          and np.array_equal(r["old_acc"], freeze["old_acc"])
                          and np.array_equal(r["new_acc"], freeze["new_acc"])],
            "first": accuracy(net, d["T_old"], d["t_old"]), "n_params": net.n_params,
            "input_ranks": {m: input_ranks(net, memory(d, m, seed)) for m in memory_sizes},
            "sizes": list(net.sizes), "memory_sizes": tuple(memory_sizes), "runs": runs,
            "n_train": {"old": len(d["X_old"]), "new": len(d["X_new"])},
            "n_test": {"old": len(d["T_old"]), "new": len(d["T_new"])}}


def input_ranks(net, mem):
    """For each layer l, the rank of [a_{l-1}, 1] on the memory's rows: when it reaches
    n_{l-1} + 1, span projection leaves layer l nothing to train (``fixes.span_project``)."""
    record = net.forward(mem)
    return [int(np.linalg.matrix_rank(np.hstack([record.a[l - 1], np.ones((len(mem), 1))])))
            for l in range(1, net.depth + 1)]


def find(result, fix, m=None):
    """The run of ``fix`` (at memory size m) in ``run()``'s result."""
    for r in result["runs"]:
        if r["fix"] == fix and (m is None or r["m"] == m):
            return r
    raise ValueError(f"fix: no run of {fix!r} with m = {m} in this result")


# -- the cost of holding 5 m constraints -------------------------------------------------------
#: The memory sizes of the cost sweep: 40 to 2,560 constraints (5 outputs on m images).
COST_SIZES = (8, 16, 32, 64, 128, 256, 512)


def _best_time(work, repeats):
    best = np.inf
    for _ in range(repeats):
        t0 = time.perf_counter()
        work()
        best = min(best, time.perf_counter() - t0)
    return best


def constraint_cost(memory_sizes=COST_SIZES, hidden=HIDDEN, repeats=3, seed=SEED, log=None):
    """Time and memory of one projected direction holding outputs 0-4 on m memory images,
    training on the ~600 new images, against m. Best of ``repeats`` wall times, in seconds.

    Returns
    -------
    dict of lists, one entry per m: ``m``, ``constraints`` (5 m), ``fast`` and ``reference``
    (``fast.project`` and ``fixes.project``), ``gram`` (J J^T from its per-layer factors),
    ``eigh`` (the reference's rank-revealing solve, ``pseudoinverse.GramSolver``), ``cholesky``
    (``fast.GramSolver``: one shifted Cholesky whose success certifies full rank), ``peak_fast``,
    ``peak_reference`` (tracemalloc's peak, bytes), ``gram_bytes`` (8 n^2, n = 5 m); and
    ``sizes``, ``n_params``, ``n_new``, ``repeats``. ``log``, if given, gets a line per m.
    """
    d = tasks(seed)
    net = MLP([64, hidden, hidden, 10], hidden="tanh", init_std=INIT_STD, seed=seed)
    X = d["X_new"]
    _, G = losses.mse(net(X), one_hot(d["y_new"]))
    out = {k: [] for k in ("m", "constraints", "fast", "reference", "gram", "eigh", "cholesky",
                           "peak_fast", "peak_reference", "gram_bytes")}
    for m in memory_sizes:
        mem = memory(d, m, seed)
        gram = OutputJacobian(net, mem, OLD).gram()
        timed = {
            "fast": lambda: fast.project(net, X, G, keep=OLD, keep_X=mem),
            "reference": lambda: fixes.project(net, X, G, keep=OLD, keep_X=mem),
            "gram": lambda: OutputJacobian(net, mem, OLD).gram(),
            "eigh": lambda: GramSolver(gram),
            "cholesky": lambda: fast.GramSolver(gram),
        }
        out["m"].append(int(m))
        out["constraints"].append(len(OLD) * int(m))
        for name, work in timed.items():
            out[name].append(_best_time(work, repeats))
        out["peak_fast"].append(peak_bytes(timed["fast"]))
        out["peak_reference"].append(peak_bytes(timed["reference"]))
        out["gram_bytes"].append(int(gram.nbytes))
        if log is not None:
            log(f"[{len(out['m'])}/{len(memory_sizes)}] m = {m}: reference {out['reference'][-1]:.3f} s, "
                f"fast {out['fast'][-1]:.3f} s")
    out.update(sizes=list(net.sizes), n_params=net.n_params, n_new=len(X), repeats=repeats)
    return out


def load_cost():
    """The cost sweep shipped with the package (``resources.CONTINUAL_COST``): the output of
    ``python -m mlp_ref.measurements.continual --json`` on the project's machine."""
    return resources.read_json(resources.CONTINUAL_COST)


def constraint_cost_data(cost):
    """The arrays of continual_cost.png from a cost sweep (``constraint_cost`` or ``load_cost``),
    and what its titles, tutorial 08 and benchmarks/README.md say of them.

    Returns
    -------
    dict: every list of the sweep as a float array (``m``, ``constraints`` = n, ``fast``,
    ``reference``, ``gram``, ``eigh``, ``cholesky``, ``peak_fast``, ``peak_reference``,
    ``gram_bytes``); ``large`` (bool, n >= n_max / 8: the sizes where n^3 shows),
    ``time_slope`` (fitted log-log slope of the reference's time in n over ``large``),
    ``n_cubed`` (c n^3 over ``large``, c fitted through the solve's times there);
    ``solve_over_half_n`` (the first n at which the solve takes more than half of the
    reference's time), ``n_squared_over_rest_n`` (the first n at which the reference's peak is
    more than twice its peak at the smallest n: the n x n arrays outweigh all the rest), each
    None if never; ``peak_in_grams`` (the peak at the largest n over the Gram's 8 n^2 bytes);
    ``sizes``, ``n_params``, ``n_new``.
    """
    d = {k: np.asarray(v, dtype=float) for k, v in cost.items()
         if isinstance(v, list) and k != "sizes"}
    n = d["constraints"]
    large = n >= n[-1] / 8
    c = np.exp(np.mean(np.log(d["eigh"][large]) - 3 * np.log(n[large])))
    half = np.flatnonzero(d["eigh"] > 0.5 * d["reference"])
    heavy = np.flatnonzero(d["peak_reference"] > 2 * d["peak_reference"][0])
    d.update(large=large, time_slope=loglog_slope(n[large], d["reference"][large]),
             n_cubed=c * n[large] ** 3,
             solve_over_half_n=int(n[half[0]]) if half.size else None,
             n_squared_over_rest_n=int(n[heavy[0]]) if heavy.size else None,
             peak_in_grams=float(d["peak_reference"][-1] / d["gram_bytes"][-1]),
             sizes=list(cost["sizes"]), n_params=cost["n_params"], n_new=cost["n_new"])
    return d


def main(argv=None):
    """``python -m mlp_ref.measurements.continual [--json PATH] [--sizes 8,16,...] [--hidden H]``:
    the cost sweep, printed, and saved as JSON; ``--json`` alone writes the copy that ships with
    the package (``resources.CONTINUAL_COST_PATH``), which continual_cost.png is drawn from."""
    parser = argparse.ArgumentParser(prog="python -m mlp_ref.measurements.continual", description=main.__doc__)
    parser.add_argument("--json", nargs="?", const=resources.CONTINUAL_COST_PATH, type=path,
                        help="save the sweep here (alone: the shipped copy)")
    parser.add_argument("--sizes", type=rows_list, default=list(COST_SIZES),
                        help=f"memory sizes m (default: {','.join(map(str, COST_SIZES))})")
    parser.add_argument("--hidden", type=whole(1), default=HIDDEN, help=f"hidden width (default {HIDDEN})")
    parser.add_argument("--repeats", type=whole(1), default=3, help="timed calls, the best kept (default 3)")
    args = parser.parse_args(argv)
    most = len(tasks(SEED)["X_old"])
    if max(args.sizes) > most:
        parser.error(f"--sizes: expected memories of at most {most} images (the old training "
                     f"images), got {max(args.sizes)}")
    if args.json is not None:
        try:                        # before the sweep, not after minutes of it
            atomic.check_target("--json", args.json)
        except (OSError, TypeError) as exc:
            parser.error(str(exc))

    def log(line):
        print(line, file=sys.stderr, flush=True)

    res = constraint_cost(tuple(args.sizes), args.hidden, args.repeats, log=log)
    res["machine"] = {"python": platform.python_version(), "numpy": np.__version__,
                      "processor": platform.machine(), "cpus": os.cpu_count(),
                      "load": list(os.getloadavg()) if hasattr(os, "getloadavg") else None,
                      "OPENBLAS_NUM_THREADS": os.environ.get("OPENBLAS_NUM_THREADS")}
    failed = args.json and atomic.write_results(args.json, json.dumps(res, indent=1) + "\n")
    print(f"{'m':>5} {'5m':>6} {'fast s':>8} {'ref s':>8} {'gram s':>8} {'eigh s':>8} "
          f"{'chol s':>8} {'peak MiB':>9} {'gram MiB':>9}")
    for i, m in enumerate(res["m"]):
        print(f"{m:5d} {res['constraints'][i]:6d} {res['fast'][i]:8.4f} {res['reference'][i]:8.4f} "
              f"{res['gram'][i]:8.4f} {res['eigh'][i]:8.4f} {res['cholesky'][i]:8.4f} "
              f"{res['peak_fast'][i] / 2**20:9.2f} {res['gram_bytes'][i] / 2**20:9.2f}")
    if failed:
        log(failed)
        raise SystemExit(1)
    if args.json:
        log(f"wrote {args.json}")
    return res


if __name__ == "__main__":
    main()
