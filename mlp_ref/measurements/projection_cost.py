"""The cost of a projection, from the bench's saved run: the Gram projection (``fast.project``)
against a dense Jacobian, in time and memory, over the number of constrained rows.

Timings are not reproducible, so figures never time anything: they read the run of the
project's machine that ships with the package (``resources.PROJECTION_COST``).
"""
from __future__ import annotations

import numpy as np

from .. import resources


def load():
    """The saved bench run (the dict of ``bench.run``) that ships with the package."""
    return resources.read_json(resources.PROJECTION_COST)


def projection_cost_data(results, dtype="float64"):
    """The arrays of the projection-cost figure, for one dtype of ``bench.run``'s results.

    Returns a dict of 1-D arrays over the constraint counts: ``n``, ``gram_s``, ``dense_s``,
    ``gram_peak_bytes``, ``dense_peak_bytes`` (NaN where the dense Jacobian was skipped),
    ``dense_bytes_estimate`` (J alone); ``step_s`` (one training step, for scale, in the
    sweep's allocator setting: glibc keeping freed memory where it was measured), ``dtype``,
    ``sizes``, ``n_params``; and at the largest n with a dense measurement (None without
    one) ``largest_dense_n``, ``speedup`` (dense time over Gram time) and ``memory_ratio``
    (dense peak over Gram peak).
    """
    rows = [r for r in results["results"] if r["dtype"] == dtype]
    if not rows:
        have = [r["dtype"] for r in results["results"]]
        raise ValueError(f"dtype: no results for {dtype!r}; results hold {have}")
    sweep = rows[0]["sweep"]

    def column(key):
        return np.array([np.nan if row[key] is None else row[key] for row in sweep], dtype=float)

    d = {"n": column("n"), "gram_s": column("gram_s"), "dense_s": column("dense_s"),
         "gram_peak_bytes": column("gram_peak_bytes"),
         "dense_peak_bytes": column("dense_peak_bytes"),
         "dense_bytes_estimate": column("dense_bytes_estimate"),
         "step_s": (rows[0].get("kept") or rows[0])["timings"]["step"]["median_s"],
         "dtype": dtype, "sizes": rows[0]["sizes"], "n_params": rows[0]["n_params"],
         "largest_dense_n": None, "speedup": None, "memory_ratio": None}
    dense = np.flatnonzero(~np.isnan(d["dense_s"]))
    if dense.size:
        i = dense[-1]
        d.update(largest_dense_n=int(d["n"][i]), speedup=float(d["dense_s"][i] / d["gram_s"][i]),
                 memory_ratio=float(d["dense_peak_bytes"][i] / d["gram_peak_bytes"][i]))
    return d
