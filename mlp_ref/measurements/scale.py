"""The scale ladder: holding outputs 0-4 on memories of 8 to 16,000 old images, two ways.

Tutorial 08's task (``continual``: a [64, 64, 64, 10] tanh network learns digits 0-4, then 5-9
for 20 steps) with memories far larger than its 601 old training images: the images, then their
shifts by one pixel (the 8 neighbours), then by two (the 16 around those), then by three along
an axis, until there are at least 16,000 rows. Holding the 5 old outputs on m rows is
n = 5 m constraints: 40 to 80,000.

    exact   fast.project (the exact route: an n x n Gram, O(n^2) memory, O(n^3) time a step),
            as far as EXACT_ROWS goes
    gpm     baselines.gpm on the bases of baselines.gpm_bases over the same rows, read in
            batches (the basis route: a (d x d) matrix per layer, whatever n), at the energy
            thresholds THRESHOLDS

For each: the mean wall time of a step (the direction and the step, over the steps after the
first), the peak memory of the first step (tracemalloc; the bases' own construction, once,
separately), the largest change of outputs 0-4 on the memory and on the old test images (none
of them is in the memory), and the old and new test accuracy after the 20 steps.

``python -m mlp_ref.measurements.scale --json`` writes ``resources/scale_cost.json``; times
and peaks are this machine's and its load's.
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import time

import numpy as np

from .. import baselines, data, fast, losses, resources
from ..boundary.argtypes import path
from ..fast.memory import peak_bytes
from ..files import atomic
from .continual import LR, OLD, SECOND_STEPS, SEED, accuracy, first_task, one_hot

#: The memory sizes of the ladder (rows; 5 constraints each), those the exact route runs, and
#: GPM's energy thresholds.
ROWS = (8, 32, 128, 512, 819, 1638, 4000, 16000)
EXACT_ROWS = (8, 32, 128, 512, 819)
THRESHOLDS = (0.9, 0.99, 0.999, 1.0)
#: The rows of a batch when the bases are built: what the basis route holds at once.
BATCH = 1000


def shift(images, dx, dy):
    """(n, 64) raw 8 x 8 images moved dx pixels right and dy down, the pixels moved in 0."""
    out = np.zeros_like(images.reshape(-1, 8, 8))
    src = images.reshape(-1, 8, 8)
    ys, yd = (slice(0, 8 - dy), slice(dy, 8)) if dy >= 0 else (slice(-dy, 8), slice(0, 8 + dy))
    xs, xd = (slice(0, 8 - dx), slice(dx, 8)) if dx >= 0 else (slice(-dx, 8), slice(0, 8 + dx))
    out[:, yd, xd] = src[:, ys, xs]
    return out.reshape(-1, 64)


def offsets():
    """The shifts, nearest first: (0, 0); the 8 one-pixel ones; the 16 two-pixel ones; the 4
    three-pixel ones along an axis."""
    ring = lambda r: [(dx, dy) for dy in range(-r, r + 1) for dx in range(-r, r + 1)   # noqa: E731
                      if max(abs(dx), abs(dy)) == r]
    return [(0, 0)] + ring(1) + ring(2) + [(3, 0), (-3, 0), (0, 3), (0, -3)]


def big_memory(rows=max(ROWS), seed=SEED):
    """(rows, 64): the old training images in ``continual.memory``'s order (so that its first m
    rows are tutorial 08's memory of m), then each shift of them in ``offsets`` order, scaled as
    ``continual.tasks`` scales its inputs (centred by the mean old training image, / 16)."""
    X, y, _, _ = data.digits(seed=seed)
    raw = X[np.isin(y, OLD)]
    mean = raw.mean(axis=0)
    order = np.random.default_rng(seed + 1).permutation(len(raw))
    raw = raw[order]
    shifted = np.vstack([shift(raw, dx, dy) for dx, dy in offsets()])
    if rows > len(shifted):
        raise ValueError(f"rows: expected at most {len(shifted)} rows (the shifts of the "
                         f"{len(raw)} old images), got {rows}")
    return (shifted[:rows] - mean) / 16.0


def _batches(mem, size=BATCH):
    return (mem[i:i + size] for i in range(0, len(mem), size))


def rung(net, d, mem, route, threshold=None, steps=SECOND_STEPS, lr=LR):
    """One rung of the ladder: 20 steps of digits 5-9 from ``net`` (not modified) holding
    outputs 0-4 on ``mem`` by ``route`` ("exact" or "gpm"). Returns the row of scale_cost.json."""
    model = net.copy()
    X, Y = d["X_new"], one_hot(d["y_new"])
    keep = list(OLD)
    mem_before, test_before = net(mem)[:, keep], net(d["T_old"])[:, keep]
    row = {"route": "exact" if route == "exact" else f"gpm {threshold}", "rows": int(len(mem)),
           "constraints": len(OLD) * int(len(mem))}
    bases = None
    if route == "gpm":
        t0 = time.perf_counter()
        built = {}
        row["bases_peak_mib"] = peak_bytes(lambda: built.update(
            b=baselines.gpm_bases(net, _batches(mem), threshold=threshold))) / 2 ** 20
        row["bases_s"] = time.perf_counter() - t0
        bases = built["b"]
        row["ranks"] = bases.ranks[0]
        row["threshold"] = threshold

    def direction(G):
        if route == "exact":
            return fast.project(model, X, G, keep=OLD, keep_X=mem)
        return baselines.gpm(model, X, G, bases)

    seconds = 0.0
    for step in range(steps):
        _, G = losses.mse(model(X), Y)
        if step == 0:
            row["peak_mib"] = peak_bytes(lambda: model.step(direction(G), lr)) / 2 ** 20
        else:
            t0 = time.perf_counter()
            model.step(direction(G), lr)
            seconds += time.perf_counter() - t0
    row["ms_per_step"] = 1e3 * seconds / max(steps - 1, 1)
    test_drift = np.abs(model(d["T_old"])[:, keep] - test_before)
    row.update(memory_drift=float(np.max(np.abs(model(mem)[:, keep] - mem_before))),
               test_drift_max=float(test_drift.max()), test_drift_mean=float(test_drift.mean()),
               old_acc=accuracy(model, d["T_old"], d["t_old"]),
               new_acc=accuracy(model, d["T_new"], d["t_new"]))
    return row


def ladder(rows=ROWS, exact_rows=EXACT_ROWS, thresholds=THRESHOLDS, seed=SEED, log=None):
    """Every rung: the exact route on ``exact_rows``, then GPM at each threshold on ``rows``.
    Returns {"rows": [rung, ...], "first": old accuracy after the first task, "sizes"}."""
    net, d = first_task(seed=seed)
    big = big_memory(max(rows), seed)
    plan = [("exact", None, m) for m in exact_rows] + [("gpm", t, m) for t in thresholds for m in rows]
    out = []
    for i, (route, threshold, m) in enumerate(plan, 1):
        out.append(rung(net, d, big[:m], route, threshold))
        if log is not None:
            r = out[-1]
            log(f"[{i}/{len(plan)}] {r['route']:9} {r['constraints']:6d} constraints: "
                f"{r['ms_per_step']:9.1f} ms a step, peak {r['peak_mib']:8.1f} MiB; old "
                f"{r['old_acc']:.2f}, new {r['new_acc']:.2f}")
    return {"rows": out, "first": accuracy(net, d["T_old"], d["t_old"]), "sizes": list(net.sizes)}


def load():
    """The ladder shipped with the package (``resources/scale_cost.json``)."""
    return resources.read_json("scale_cost.json")


def find(result, route, rows):
    """The rung of ``route`` ("exact", "gpm 0.99", ...) at ``rows`` memory rows."""
    for r in result["rows"]:
        if r["route"] == route and r["rows"] == rows:
            return r
    raise ValueError(f"route: no rung {route!r} at {rows} rows in this ladder")


def main(argv=None):
    """``python -m mlp_ref.measurements.scale [--json [PATH]]``: the ladder, printed, and saved
    as JSON (``--json`` alone: the copy shipped with the package, resources/scale_cost.json)."""
    default = os.path.join(os.path.dirname(resources.__file__), "scale_cost.json")
    parser = argparse.ArgumentParser(prog="python -m mlp_ref.measurements.scale", description=main.__doc__)
    parser.add_argument("--json", nargs="?", const=default, type=path,
                        help="save the ladder here (alone: the shipped copy)")
    args = parser.parse_args(argv)
    if args.json is not None:
        try:
            atomic.check_target("--json", args.json)
        except (OSError, TypeError) as exc:
            parser.error(str(exc))

    def log(line):
        print(line, file=sys.stderr, flush=True)

    res = ladder(log=log)
    res["machine"] = {"python": platform.python_version(), "numpy": np.__version__,
                      "processor": platform.machine(), "cpus": os.cpu_count(),
                      "load": list(os.getloadavg()) if hasattr(os, "getloadavg") else None,
                      "OPENBLAS_NUM_THREADS": os.environ.get("OPENBLAS_NUM_THREADS")}
    failed = args.json and atomic.write_results(args.json, json.dumps(res, indent=1) + "\n")
    print(f"{'route':10} {'rows':>6} {'constr.':>7} {'ms/step':>9} {'peak MiB':>9} "
          f"{'drift mem':>10} {'drift test':>10} {'old':>5} {'new':>5}")
    for r in res["rows"]:
        print(f"{r['route']:10} {r['rows']:6d} {r['constraints']:7d} {r['ms_per_step']:9.1f} "
              f"{r['peak_mib']:9.1f} {r['memory_drift']:10.2e} {r['test_drift_max']:10.2e} "
              f"{r['old_acc']:5.2f} {r['new_acc']:5.2f}")
    if failed:
        log(failed)
        raise SystemExit(1)
    return res


if __name__ == "__main__":
    main()
