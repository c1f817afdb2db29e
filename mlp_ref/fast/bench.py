"""Performance: what the gradient and each fix cost, measured against the hardware's floor.

``python -m mlp_ref bench`` times the fast tier (``mlp_ref.fast``), with the reference tier
beside it, on an MNIST-sized network ([784, 512, 512, 10], tanh, a batch of 256), in float64
and float32:

    gradient    fast.gradient(net, X, G): forward, backward with parameter grads
    step        fast.step(net, fast.gradient(net, X, G), lr): the gradient, then the update
    products    the gradient's matrix products alone, inputs and outputs preallocated:
                the floor no NumPy code can beat, since a gradient is at least its matmuls
    project     fast.project holding output 0 on all rows, as a multiple of the gradient
                (and with refine=0: what the refinement pass costs)
    restore     one Gauss-Newton iteration of fast.restore
    reference   net.gradient, net.step and fixes.project: the lesson's code, what the tricks buy
    dense       the same projection through a dense Jacobian J (n rows x P columns) and a dense
                solve, for n = 16 .. 256 constraints: what the Gram trick saves, in time and memory

Timing: ``time.perf_counter`` around each call, after a warm-up call, ``repeats`` times, and the
median reported. Each group (the gradient and the step; the two projections, interleaved;
restore; the reference; each sweep row) runs in a fresh Python process (``_call``), as a plain
loop of its calls, and then times the gradient's matmuls, the floor, in the same process: every
time is reported over that floor
(``_relative``), so a process that caught the machine slow (another tenant, the clock) does not
skew a ratio between groups. Peak memory: ``tracemalloc`` in a separate run (NumPy reports its
array buffers to tracemalloc; BLAS's own work space is not seen).

Faults, and the two allocator settings: every NumPy expression allocates its result, and a call
frees its arrays when it returns (6 MiB for a step, 10 MiB for a projection, at these sizes in
float64). By default glibc hands free memory at the top of its heap back to the operating
system once there is more than about twice its largest recently freed block, and the next call
takes it back one 4 KiB page at a time: a minor page fault, ~3 us each in a virtual machine,
counted per call (``getrusage``). How many a loop pays depends on the heap's layout, that is on
everything else the process holds, not on the arithmetic. So each group is timed twice, each
time in a fresh process: with glibc's defaults (a plain loop, as a script would run it), and
after ``keep_freed_memory()``, where freed memory is reused and the faults vanish: what our own
code costs.

Results are plain dicts and lists (``run``), JSON-ready (``--json PATH``); the table is ``format_table``;
``measurements.projection_cost`` reads the saved run for the projection-cost figure.
"""
from __future__ import annotations

import ctypes
import json
import mmap
import multiprocessing
import os
import platform
import sys
import time
from concurrent.futures import ProcessPoolExecutor

import numpy as np

from .. import fast, fixes, jacobian, pseudoinverse
from ..files import atomic
from ..network import MLP
from .memory import peak_bytes
from .threads import THREAD_VARIABLES

SIZES = [784, 512, 512, 10]
BATCH = 256
CONSTRAINTS = (16, 32, 64, 128, 256)
DENSE_LIMIT = 2 * 2**30          # bytes: skip the dense Jacobian when n q P itemsize exceeds it
KEEP = [0]
LR = 1e-3

try:                             # not on Windows; the fault counts are then left out
    import resource
except ImportError:              # pragma: no cover
    resource = None


# -- the machine ---------------------------------------------------------------------------


def machine_info():
    """The BLAS NumPy was built with, the thread count it will use, and the CPU count.

    The thread count is read from the environment variables BLAS libraries obey, else it is
    the number of CPUs this process may run on (OpenBLAS's and MKL's default): threadpoolctl,
    which would ask the library itself, is not a dependency of this project.
    """
    blas = "unknown"
    try:
        config = np.show_config(mode="dicts")            # NumPy >= 1.26
        dep = config["Build Dependencies"]["blas"]
        blas = " ".join(str(dep[k]) for k in ("name", "version") if dep.get(k))
        detail = dep.get("openblas configuration")
        if detail:
            blas += f" ({' '.join(str(detail).split())})"
    except Exception:                                    # older NumPy: no dicts mode
        pass
    try:
        cpus = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        cpus = os.cpu_count() or 1
    threads, source = cpus, "default: one per CPU (threadpoolctl not available)"
    for var in THREAD_VARIABLES:
        value = os.environ.get(var, "").strip()
        if value.isdigit() and int(value) > 0:
            threads, source = int(value), f"from ${var}"
            break
    return {"blas": blas, "threads": threads, "threads_source": source, "cpus": cpus,
            "numpy": np.__version__, "python": platform.python_version(),
            "platform": platform.platform(terse=True), "processor": platform.machine(),
            "openblas_env": {k: v for k, v in os.environ.items() if k.startswith("OPENBLAS_")}}


def page_fault_cost(mib=16):
    """Seconds per minor page fault: first touches of a fresh anonymous mapping, one byte per
    page, less the same loop over the then-mapped pages. NumPy's temporaries pay this whenever
    the allocator has handed memory back to the operating system between two calls."""
    size = mib * 2**20
    page = mmap.PAGESIZE
    region = mmap.mmap(-1, size)
    try:
        f0 = _faults()
        t0 = time.perf_counter()
        for offset in range(0, size, page):
            region[offset] = 1
        first = time.perf_counter() - t0
        faults = _faults() - f0
        t0 = time.perf_counter()
        for offset in range(0, size, page):
            region[offset] = 2
        again = time.perf_counter() - t0
    finally:
        region.close()
    return max(first - again, 0.0) / max(faults, 1)


# -- measuring -----------------------------------------------------------------------------
def _faults():
    return resource.getrusage(resource.RUSAGE_SELF).ru_minflt if resource else 0


def time_interleaved(calls, repeats):
    """Time each callable of ``calls`` (name -> f) ``repeats`` times, one call of each per round.

    Every f is first called once (warm-up: BLAS threads start, caches fill). Returns
    name -> {"median_s", "min_s", "times_s", "faults"}: the median time, the best one, every
    time, and the median number of minor page faults per call.
    """
    for f in calls.values():
        f()
    times = {name: [] for name in calls}
    faults = {name: [] for name in calls}
    for _ in range(repeats):
        for name, f in calls.items():
            f0 = _faults()
            t0 = time.perf_counter()
            f()
            times[name].append(time.perf_counter() - t0)
            faults[name].append(_faults() - f0)
    return {name: {"median_s": float(np.median(t)), "min_s": float(np.min(t)), "times_s": t,
                   "faults": int(np.median(faults[name]))}
            for name, t in times.items()}


# -- the problem ---------------------------------------------------------------------------
def problem(sizes=SIZES, batch=BATCH, dtype=np.float64, seed=0):
    """A tanh MLP of ``sizes`` (init N(0, 1/d_in)), inputs X ~ N(0, 1) of shape (batch, d) and an
    output gradient G ~ N(0, 1) with column 0 zero: as in the question, output 0 is not asked to move.
    """
    rng = np.random.default_rng(seed)
    net = MLP(sizes, hidden="tanh", output="identity", init_std=1.0 / np.sqrt(sizes[0]),
              seed=seed, dtype=dtype)
    X = rng.normal(size=(batch, sizes[0])).astype(dtype)
    G = rng.normal(size=(batch, sizes[-1])).astype(dtype)
    G[:, KEEP] = 0.0
    return net, X, G


def step_products(net, X, G):
    """A function running exactly the matrix products of one training step, nothing else.

    forward:   a_{l-1} @ W_l                 for l = 1 .. L
    backward:  a_{l-1}.T @ dz_l  (dW_l)      for l = L .. 1
               dz_l @ W_l.T      (da_{l-1})  for l = L .. 2   (no da_0: the step needs no dL/dX)

    Inputs come from a real forward/backward record and the outputs are preallocated
    (``out=``), so the function measures the BLAS calls alone: the floor of a NumPy step.
    Returns (f, flops), flops the multiply-adds counted twice.
    """
    record = net.forward(X)
    stages = net.backward(record, G).stages
    work, flops = [], 0
    for l in range(1, net.depth + 1):
        W, a = net.params[f"W{l}"], record.a[l - 1]
        work.append((a, W, np.empty((a.shape[0], W.shape[1]), net.dtype)))
    for l in range(net.depth, 0, -1):
        W, a, dz = net.params[f"W{l}"], record.a[l - 1], stages[f"dz{l}"]
        work.append((a.T, dz, np.empty(W.shape, net.dtype)))
        if l > 1:
            work.append((dz, W.T, np.empty(a.shape, net.dtype)))
    for x, y, _ in work:
        flops += 2 * x.shape[0] * x.shape[1] * y.shape[1]

    def products():
        for x, y, out in work:
            np.matmul(x, y, out=out)
    return products, flops


def dense_project(net, X, G, keep=KEEP, keep_X=None, rcond=None, refine=1):
    """``fixes.project`` computed through the dense Jacobian J (m, P), m = n q: the textbook way.

    The same algorithm and the same solver as ``fixes.nullspace`` (eigen-decomposed Gram,
    ``refine`` refinement passes), but with J built: memory m * P, time m^2 P for J J^T.
    """
    keep_X = X if keep_X is None else keep_X
    g = net.gradient(X, G)
    J = jacobian.dense_rows(net, keep_X, keep)                 # (m, P): what the Gram trick avoids
    solve = pseudoinverse.GramSolver(J @ J.T, rcond)
    D = jacobian.flatten(g)
    for _ in range(1 + refine):
        D = D - J.T @ solve(J @ D)
    return jacobian.unflatten(D, g)


def dense_bytes(net, n_rows, q=len(KEEP)):
    """n q P itemsize: the bytes of the dense Jacobian alone (building it briefly needs about twice)."""
    return n_rows * q * net.n_params * net.dtype.itemsize


# -- the benchmark -------------------------------------------------------------------------
def time_gradient(dtype, sizes=SIZES, batch=BATCH, repeats=15):
    """A loop of ``fast.gradient`` and of training steps (``fast.step`` of it), interleaved,
    then the matmul floor; their peak memory."""
    net, X, G = problem(sizes, batch, dtype)

    def gradient():
        fast.gradient(net, X, G)

    def step():
        fast.step(net, fast.gradient(net, X, G), LR)

    timings = time_interleaved({"gradient": gradient, "step": step}, repeats)
    return {"n_params": net.n_params, "timings": timings, **_floor_after(net, X, G, timings, repeats),
            "peak_bytes": {"gradient": peak_bytes(gradient), "step": peak_bytes(step)}}


def time_projections(dtype, sizes=SIZES, batch=BATCH, repeats=15):
    """A loop of ``fast.project`` holding output 0 on every row (refine=None, the default, and
    refine=0, interleaved), then the matmul floor; the projection's peak memory."""
    net, X, G = problem(sizes, batch, dtype)

    def project():
        fast.project(net, X, G, keep=KEEP)

    def project_unrefined():
        fast.project(net, X, G, keep=KEEP, refine=0)

    timings = time_interleaved({"project": project, "project_refine0": project_unrefined}, repeats)
    return {"timings": timings, **_floor_after(net, X, G, timings, repeats),
            "peak_bytes": {"project": peak_bytes(project)}}


def time_restore(dtype, sizes=SIZES, batch=BATCH, repeats=15):
    """A loop of single ``fast.restore`` iterations, then the matmul floor."""
    net, X, G = problem(sizes, batch, dtype)
    ref = net(X)[:, KEEP]
    moved = net.copy().step(fixes.project(net, X, G, keep=KEEP), LR)    # off the constraint

    def restore_iteration():                 # one Gauss-Newton step (and the forward pass that
        fast.restore(moved, X, ref, keep=KEEP, tol=1e-300, max_iter=1)    # checks it); the cost
                                             # does not depend on how far off the constraint it is
    timings = time_interleaved({"restore": restore_iteration}, repeats)
    return {"timings": timings, **_floor_after(net, X, G, timings, repeats)}


def time_reference(dtype, sizes=SIZES, batch=BATCH, repeats=15):
    """The reference tier beside the fast one: ``net.gradient``, ``net.step`` of it and
    ``fixes.project``, interleaved, then the matmul floor; their peak memory."""
    net, X, G = problem(sizes, batch, dtype)

    def gradient():
        net.gradient(X, G)

    def step():
        net.step(net.gradient(X, G), LR)

    def project():
        fixes.project(net, X, G, keep=KEEP)

    calls = {"reference_gradient": gradient, "reference_step": step, "reference_project": project}
    timings = time_interleaved(calls, repeats)
    return {"timings": timings, **_floor_after(net, X, G, timings, repeats),
            "peak_bytes": {name: peak_bytes(f) for name, f in calls.items()}}


#: the groups of measurements, each timed in a process of its own
GROUPS = (time_gradient, time_projections, time_restore, time_reference)


def _floor_after(net, X, G, timings, repeats):
    """Time a step's matmuls (``step_products``) after the loop that was measured, and note the
    floor's median in every timing of that loop: {"products_flops": ...} for the result.

    After, not interleaved: the floor keeps its arrays alive, and with glibc's defaults any array
    kept alive during a loop changes where the loop's own arrays land, hence how many pages it
    faults in (here, a floor made first takes a float64 projection from ~4000 faults a call to 0).
    """
    products, flops = step_products(net, X, G)
    floor = time_interleaved({"products": products}, repeats)["products"]
    for t in timings.values():
        t["floor_s"] = floor["median_s"]
    if "gradient" in timings:                # the gradient's own group reports the floor as a row
        timings["products"] = {**floor, "floor_s": floor["median_s"]}
    return {"products_flops": flops}


def _relative(timings, key):
    """A median over the matmul floor timed beside it: free of how fast the machine ran then."""
    return timings[key]["median_s"] / timings[key]["floor_s"]


def time_sweep_row(dtype, sizes=SIZES, batch=BATCH, n=BATCH, repeats=15, dense_repeats=3,
                   dense_limit=DENSE_LIMIT):
    """``fast.project`` against ``dense_project``, holding output 0 on the first n rows of X:
    times (medians), peaks and speed-up. The dense way is skipped above ``dense_limit`` bytes."""
    net, X, G = problem(sizes, batch, dtype)
    keep_X = None if n == batch else X[:n]
    row = {"n": n, "dense_bytes_estimate": dense_bytes(net, n), "note": ""}

    def gram():
        fast.project(net, X, G, keep=KEEP, keep_X=keep_X)

    def dense():
        dense_project(net, X, G, keep=KEEP, keep_X=keep_X)

    fits = row["dense_bytes_estimate"] <= dense_limit
    timed = time_interleaved({"gram": gram}, repeats)["gram"]
    row["gram_s"], row["gram_faults"] = timed["median_s"], timed["faults"]
    row["gram_peak_bytes"] = peak_bytes(gram)
    if fits:                                 # the dense way takes seconds: fewer calls
        row["dense_s"] = time_interleaved({"dense": dense}, dense_repeats)["dense"]["median_s"]
        row["dense_peak_bytes"] = peak_bytes(dense)
        row["speedup"] = row["dense_s"] / row["gram_s"]
    else:
        row["dense_s"] = row["dense_peak_bytes"] = row["speedup"] = None
        row["note"] = (f"dense skipped: J alone needs {row['dense_bytes_estimate'] / 2**30:.1f} GiB "
                       f"> limit {dense_limit / 2**30:.1f} GiB")
    return row


# -- the allocator -------------------------------------------------------------------------
M_TRIM_THRESHOLD, M_MMAP_THRESHOLD = -1, -3     # glibc's mallopt parameter numbers (malloc.h)
#: what keep_freed_memory sets: free memory glibc may keep at the top of its heap, and the size
#: above which a block gets a mapping of its own (returned to the system when freed)
KEEP_UP_TO, MAP_ABOVE = 256 * 2**20, 32 * 2**20
#: the same settings for a Python not yet started: glibc reads GLIBC_TUNABLES at start-up
KEEP_MEMORY = {"GLIBC_TUNABLES": f"glibc.malloc.trim_threshold={KEEP_UP_TO}:"
                                 f"glibc.malloc.mmap_threshold={MAP_ABOVE}"}
#: the two settings every measurement of the step and the fixes is made in
SETTINGS = {"default": "glibc default", "kept": "glibc keeping freed memory"}


def keep_freed_memory():
    """Ask glibc's malloc to keep freed memory for the next arrays instead of handing it back
    to the operating system: for the whole process, from now on.

    Why: a training step allocates its forward record, its backward stages and its gradient
    afresh (~13 MiB for [784, 512, 512, 10] in float64) and frees them when it returns. By
    default glibc returns the free top of its heap to the system once it exceeds twice the
    largest block recently freed, and the next step page-faults it back in; in a virtual machine
    that can cost as much as the elementwise work of a step. The price of keeping: the
    process's memory stays at its peak (here, tens of MiB).

    Returns True if glibc took the settings, False where the C library is not glibc (macOS,
    Windows, musl): nothing is changed there. To set it without code, start Python with the
    environment of ``KEEP_MEMORY``.
    """
    try:
        mallopt = ctypes.CDLL(None).mallopt
    except (OSError, AttributeError, TypeError):
        return False
    mallopt.argtypes, mallopt.restype = [ctypes.c_int, ctypes.c_int], ctypes.c_int
    return bool(mallopt(M_TRIM_THRESHOLD, KEEP_UP_TO)) and bool(mallopt(M_MMAP_THRESHOLD, MAP_ABOVE))


def _in_child(keep_memory, fn, args):
    """fn(*args), after ``keep_freed_memory()`` if ``keep_memory`` (None if glibc refused)."""
    if keep_memory and not keep_freed_memory():
        return None
    return fn(*args)


def _call(isolate, fn, *args, keep_memory=False):
    """fn(*args), in a fresh Python process when ``isolate``, there with glibc keeping freed
    memory if ``keep_memory`` (which needs ``isolate``: the setting lasts for the process).

    Why a fresh process: the C allocator remembers. After a call that freed large arrays, glibc
    keeps more memory for the next calls, which then page-fault less (or, after other patterns,
    more). Timed in one process, the plain step would pay or save faults depending on which fix
    ran before it; in a process of its own it sees what a loop of plain steps sees.
    """
    if not isolate:
        if keep_memory:
            raise ValueError("keep_memory: needs isolate=True (the setting lasts for the process)")
        return fn(*args)
    with ProcessPoolExecutor(1, mp_context=multiprocessing.get_context("spawn")) as pool:
        return pool.submit(_in_child, keep_memory, fn, args).result()


def _ratios(timings):
    """The ratios the targets are stated in. The gradient and the fixes run in different
    processes, and a process may catch the machine fast or slow (another tenant, the clock):
    each is first divided by the matmul floor timed beside it, so the ratio compares work, not
    moments."""
    gradient = _relative(timings, "gradient")
    return {"gradient_over_products": gradient,
            "step_over_gradient": _relative(timings, "step") / gradient,
            "project_over_gradient": _relative(timings, "project") / gradient,
            "restore_over_gradient": _relative(timings, "restore") / gradient,
            "reference_gradient_over_gradient": _relative(timings, "reference_gradient") / gradient,
            "reference_project_over_project": (_relative(timings, "reference_project")
                                               / _relative(timings, "project"))}


def bench_dtype(dtype, sizes=SIZES, batch=BATCH, repeats=15, isolate=True, log=print):
    """The fast tier's gradient, step, project and restore, the matmul floor and the reference
    tier beside them, for one dtype: timings, faults, peaks and ratios, with glibc's defaults and
    (when ``isolate``) again with glibc keeping freed memory."""
    name = np.dtype(dtype).name
    args = (name, list(sizes), batch, repeats)
    out = {"dtype": name, "sizes": list(sizes), "batch": batch, "repeats": repeats}
    settings = {"default": False, "kept": True} if isolate else {"default": False}   # keep memory?
    for setting, keep_memory in settings.items():
        t0 = time.perf_counter()
        groups = [_call(isolate, group, *args, keep_memory=keep_memory)
                  for group in GROUPS]
        if None in groups:                        # no glibc to tell: nothing to compare
            out["kept"] = None
            continue
        log(f"[{name}] gradient, step and their matmuls, project, restore, the reference, "
            f"{SETTINGS[setting]}: "
            f"{repeats} calls each ({time.perf_counter() - t0:.1f} s)")
        steps = groups[0]
        timings = {k: v for g in groups for k, v in g["timings"].items()}
        if setting == "default":
            peaks = {k: v for g in groups for k, v in g.get("peak_bytes", {}).items()}
            out.update(n_params=steps["n_params"], products_flops=steps["products_flops"],
                       timings=timings, peak_bytes=peaks, **_ratios(timings))
        else:
            out["kept"] = {"timings": timings, **_ratios(timings)}
    out["products_gflops"] = out["products_flops"] / out["timings"]["products"]["median_s"] / 1e9
    out["project_peak_over_gradient"] = (out["peak_bytes"]["project"]
                                         / max(out["peak_bytes"]["gradient"], 1))
    out.setdefault("kept", None)
    return out


def bench_sweep(dtype, sizes=SIZES, batch=BATCH, constraints=CONSTRAINTS, dense_repeats=3,
                dense_limit=DENSE_LIMIT, repeats=15, isolate=True, log=print):
    """``time_sweep_row`` for each count n of ``constraint_counts``: a list of rows, each
    measured in a fresh process with glibc keeping freed memory where it can (``isolate`` and
    glibc), so that the Gram's times are its work's, as in the table's second setting."""
    name = np.dtype(dtype).name
    sweep = []
    for n in constraint_counts(batch, constraints):
        t0 = time.perf_counter()
        args = (name, list(sizes), batch, n, repeats, dense_repeats, dense_limit)
        row = _call(isolate, time_sweep_row, *args, keep_memory=isolate)
        allocator = "glibc keeping freed memory" if isolate else "the allocator's defaults"
        if row is None:                       # not glibc: nothing to tell, its defaults
            row, allocator = _call(isolate, time_sweep_row, *args), "the allocator's defaults"
        row["allocator"] = allocator
        sweep.append(row)
        log(f"[{name}] n = {n:4d} constraints: Gram {row['gram_s'] * 1e3:8.2f} ms, "
            + (f"dense {row['dense_s'] * 1e3:9.1f} ms" if row["dense_s"] else row["note"])
            + f"  ({time.perf_counter() - t0:.1f} s)")
    return sweep


# -- holding many constraints: a memory of old inputs (continual learning) ---------------------------
#: a digits-sized network trained on new rows while outputs 0-4 are held on m memory rows
MEMORY_SIZES = [64, 128, 128, 10]
MEMORY_BATCH = 600
MEMORY_KEEP = [0, 1, 2, 3, 4]
#: memory rows m: 5 m constraints, from 80 up to 4,095
MEMORY_ROWS = (16, 32, 64, 128, 256, 512, 819)


def memory_problem(m, dtype=np.float64, sizes=MEMORY_SIZES, batch=MEMORY_BATCH):
    """(net, X, G, keep_X): ``problem`` with batch + m rows, the last m of them the memory."""
    net, X, G = problem(sizes, batch + m, dtype, seed=1)
    return net, X[:batch], G[:batch], X[batch:]


def memory_parts(net, X, G, keep_X, keep=MEMORY_KEEP):
    """``fast.project(net, X, G, keep, keep_X)`` in its parts (the calls it makes), each timed
    once: where the time goes. Returns the direction and the seconds per part:

    gradient    fast.gradient on the new rows
    jacobian    the forward pass on the memory and the stacked backward pass of the kept outputs
    gram        the Gram's products: a a^T per layer, S S^T, their Hadamard products and sum
    factorise   ``fast.GramSolver``: the shifted Cholesky whose success certifies the rank, and
                the inverses of its diagonal blocks for the block substitutions
    rest        J g, the cond estimate (``cond_exceeds``), the solve, and D = g - J^T alpha
    """
    t = {}
    clock = time.perf_counter()

    def lap(name):
        nonlocal clock
        now = time.perf_counter()
        t[name], clock = now - clock, now

    g = fast.gradient(net, X, G)
    lap("gradient")
    J = fast.Jacobian.from_record(net, *fast.forward_arrays(net, keep_X), keep)
    lap("jacobian")
    gram = J.gram()
    lap("gram")
    solve = fast.GramSolver(gram)
    lap("factorise")
    D = fast.project_out(J, solve, g, 1)
    lap("rest")
    return D, t


def time_memory_row(dtype, m, repeats=5):
    """``fast.project`` holding outputs 0-4 on m memory rows while training on ``MEMORY_BATCH`` new
    rows: the median time of a call, of each part (``memory_parts``), and the peak memory."""
    net, X, G, keep_X = memory_problem(m, dtype)

    def project():
        fast.project(net, X, G, keep=MEMORY_KEEP, keep_X=keep_X)

    timed = time_interleaved({"project": project}, repeats)["project"]
    parts = [memory_parts(net, X, G, keep_X)[1] for _ in range(repeats)]
    return {"m": m, "constraints": m * len(MEMORY_KEEP), "project_s": timed["median_s"],
            "faults": timed["faults"], "peak_bytes": peak_bytes(project),
            "parts_s": {k: float(np.median([p[k] for p in parts])) for k in parts[0]}}


def bench_memory(dtype, rows=MEMORY_ROWS, repeats=5, isolate=True, log=print):
    """``time_memory_row`` for each memory size m, each in a fresh process (glibc keeping freed
    memory where it can), then the fitted growth exponents (``growth``)."""
    name = np.dtype(dtype).name
    out = []
    for m in rows:
        t0 = time.perf_counter()
        row = _call(isolate, time_memory_row, name, m, repeats, keep_memory=isolate)
        if row is None:
            row = _call(isolate, time_memory_row, name, m, repeats)
        out.append(row)
        log(f"[{name}] memory m = {m:4d}, {row['constraints']:5d} constraints: "
            f"{row['project_s'] * 1e3:9.1f} ms a step ({time.perf_counter() - t0:.1f} s)")
    return {"dtype": name, "sizes": MEMORY_SIZES, "batch": MEMORY_BATCH, "keep": MEMORY_KEEP,
            "isolated": bool(isolate), "rows": out, "growth": growth(out)}


def growth(rows, top=3):
    """Log-log slopes of time and peak memory against the constraint count, fitted over the
    ``top`` largest counts (where the n^3 and n^2 terms take over from the fixed costs)."""
    rows = sorted(rows, key=lambda r: r["constraints"])[-top:]
    if len(rows) < 2:
        return {}
    n = [r["constraints"] for r in rows]
    series = {"project": [r["project_s"] for r in rows], "peak": [r["peak_bytes"] for r in rows]}
    series.update({part: [r["parts_s"][part] for r in rows] for part in rows[0]["parts_s"]})
    return {key: loglog_slope(n, values) for key, values in series.items()}


def loglog_slope(x, y):
    """The least-squares slope of log y against log x."""
    return float(np.polyfit(np.log(x), np.log(np.maximum(y, 1e-300)), 1)[0])


def constraint_counts(batch, constraints=CONSTRAINTS):
    """The counts of ``constraints`` below the batch size, then the batch itself (all rows)."""
    return sorted({c for c in constraints if c < batch} | {batch})


def run(sizes=SIZES, batch=BATCH, repeats=15, dtypes=("float64", "float32"),
        constraints=CONSTRAINTS, dense_repeats=3, dense_limit=DENSE_LIMIT, isolate=True,
        log=print, memory_rows=MEMORY_ROWS):
    """The whole benchmark: the machine, then ``bench_dtype`` for every dtype, then the sweeps.

    isolate : run each group of measurements (the step and its matmuls; the fixes; each row of
              the sweep) in a fresh Python process (see ``_call``). Without it, the dense sweeps
              still come last, since freeing their huge arrays changes what the allocator does.
              From a script of your own, call ``run`` under ``if __name__ == "__main__":``, as
              any code that starts processes must (``python -m mlp_ref bench`` does).
    """
    machine = machine_info()
    machine["page_fault_s"] = page_fault_cost()
    machine["isolated_processes"] = bool(isolate)
    results = [bench_dtype(d, sizes, batch, repeats, isolate, log) for d in dtypes]
    for r in results:
        r["sweep"] = bench_sweep(r["dtype"], sizes, batch, constraints, dense_repeats,
                                 dense_limit, repeats, isolate, log)
    memory = bench_memory(dtypes[0], memory_rows, min(repeats, 5), isolate, log) if memory_rows else None
    return {"machine": machine, "memory": memory,
            "config": {"sizes": list(sizes), "batch": batch, "repeats": repeats,
                       "dense_repeats": dense_repeats, "keep": KEEP, "lr": LR,
                       "constraints": list(constraints), "dense_limit_bytes": dense_limit,
                       "memory_rows": list(memory_rows or [])},
            "results": results}


# -- reporting -----------------------------------------------------------------------------
def _ms(seconds):
    return "-" if seconds is None else f"{seconds * 1e3:.2f}"


def _mib(nbytes):
    return "-" if nbytes is None else f"{nbytes / 2**20:.2f}"


LABELS = {"gradient": "gradient",
          "products": "  its matmuls alone (floor)",
          "step": "step (gradient + update)",
          "project": "project (keep 0, n = {batch})",
          "project_refine0": "  the same, refine=0",
          "restore": "restore, one iteration",
          "reference_gradient": "reference: net.gradient",
          "reference_step": "reference: net.step",
          "reference_project": "reference: fixes.project"}

RATIOS = [("gradient / its matmuls", "gradient_over_products"),
          ("step / gradient", "step_over_gradient"),
          ("project / gradient", "project_over_gradient"),
          ("restore / gradient", "restore_over_gradient"),
          ("reference / fast gradient", "reference_gradient_over_gradient"),
          ("reference / fast project", "reference_project_over_project")]


def format_table(results):
    """The results as text: the machine, then one table per dtype, both allocator settings side
    by side, then the ratios the targets are stated in."""
    m = results["machine"]
    lines = [f"BLAS: {m['blas']}",
             f"threads: {m['threads']} ({m['threads_source']}); CPUs: {m['cpus']}; "
             f"NumPy {m['numpy']}, Python {m['python']}, {m['platform']}",
             f"one minor page fault (first touch of memory fresh from the OS): "
             f"{m['page_fault_s'] * 1e6:.2f} us"]
    for r in results["results"]:
        where = "each group in a fresh process" if m.get("isolated_processes") else "one process"
        settings = {SETTINGS["default"]: r}
        if r.get("kept"):
            settings[SETTINGS["kept"]] = r["kept"]
        lines += ["", f"{r['dtype']}: sizes {r['sizes']}, batch {r['batch']}, P = {r['n_params']}, "
                      f"median of {r['repeats']} calls ({where}, the gradient's matmuls timed after "
                      f"each); the fast tier, then the reference",
                  "x grad = (time / the matmuls of its process) / (the gradient's time / the "
                  "matmuls of the gradient's process)",
                  f"{'':<28}" + "".join(f"{name:^27}" for name in settings),
                  f"{'measurement':<28}" + f"{'median ms':>11}{'faults':>8}{'x grad':>8}"
                  * len(settings) + f"{'peak MiB':>10}"]
        for key, label in LABELS.items():
            row = f"{label.format(batch=r['batch']):<28}"
            for setting in settings.values():
                t = setting["timings"]
                row += (f"{_ms(t[key]['median_s']):>11}{t[key]['faults']:>8}"
                        f"{_relative(t, key) / _relative(t, 'gradient'):>8.2f}")
            lines.append(row + f"{_mib(r['peak_bytes'].get(key)):>10}")
        for what, key in RATIOS:
            lines.append(f"{what + ':':<28}" + ", ".join(f"{s[key]:.2f} ({name})"
                                                          for name, s in settings.items()))
        faults = r["timings"]["project"]["faults"]
        how = (f"bench.keep_freed_memory(), or GLIBC_TUNABLES={KEEP_MEMORY['GLIBC_TUNABLES']}"
               if r.get("kept") else "not measured here (it needs glibc and isolated processes)")
        lines += [f"{'peak memory project / grad:':<28}{r['project_peak_over_gradient']:.2f};   "
                  f"matmuls at {r['products_gflops']:.1f} GFLOP/s",
                  f"(project's {faults} page faults per call cost up to "
                  f"{_ms(faults * m['page_fault_s'])} ms at the fault cost above;",
                  f" glibc keeping freed memory: {how})"]
        if r["sweep"]:
            lines += ["", f"the projection through the Gram and through the dense Jacobian, holding "
                          f"output 0 on the first n rows (each row in a fresh process, with "
                          f"{r['sweep'][0]['allocator']})",
                      f"{'constraints n':>13}{'Gram ms':>10}{'faults':>8}{'dense ms':>11}"
                      f"{'speed-up':>10}{'Gram MiB':>10}{'dense MiB':>11}  note"]
        for row in r["sweep"]:
            speed = "-" if row["speedup"] is None else f"{row['speedup']:.1f}x"
            lines.append(f"{row['n']:>13}{_ms(row['gram_s']):>10}{row['gram_faults']:>8}"
                         f"{_ms(row['dense_s']):>11}{speed:>10}{_mib(row['gram_peak_bytes']):>10}"
                         f"{_mib(row['dense_peak_bytes']):>11}  {row['note']}")
    if results.get("memory"):
        lines += [""] + format_memory(results["memory"])
    return "\n".join(lines)


MEMORY_PARTS = ("gradient", "jacobian", "gram", "factorise", "rest")


def format_memory(memory):
    """The memory sweep as lines: a row per memory size, the parts' shares, the fitted growth."""
    lines = [f"holding outputs {memory['keep']} on m memory rows while training on {memory['batch']} "
             f"new rows, sizes {memory['sizes']}, {memory['dtype']} (fast.project"
             + ("; each row in a fresh process" if memory["isolated"] else "") + "): where the time goes",
             f"{'m':>6}{'constraints':>13}{'ms a step':>11}{'peak MiB':>10}"
             + "".join(f"{part:>10}" for part in MEMORY_PARTS)]
    for r in memory["rows"]:
        total = sum(r["parts_s"].values())
        lines.append(f"{r['m']:>6}{r['constraints']:>13}{_ms(r['project_s']):>11}"
                     f"{_mib(r['peak_bytes']):>10}"
                     + "".join(f"{r['parts_s'][part] / total:>9.0%} " for part in MEMORY_PARTS))
    if memory["growth"]:
        lines.append("growth over the three largest memories, as constraints^k: "
                     + ", ".join(f"{key} k = {k:.2f}" for key, k in memory["growth"].items()))
    return lines


def main(args):
    """The ``bench`` command: run, print the table, optionally write the JSON."""
    def log(message):
        print(message, file=sys.stderr, flush=True)

    dtypes = ("float64", "float32") if args.dtype == "both" else (args.dtype,)
    results = run(sizes=args.sizes, batch=args.batch, repeats=args.repeats, dtypes=dtypes,
                  dense_repeats=args.dense_repeats,
                  dense_limit=int(args.dense_limit_gib * 2**30), log=log,
                  memory_rows=args.memory_rows)
    failed = args.json and atomic.write_results(
        args.json, json.dumps(results, indent=1, sort_keys=True) + "\n")
    print(format_table(results), flush=True)
    if failed:
        log(failed)
        return 1
    if args.json:
        log(f"wrote {args.json}")
    return 0
