"""The field's protocol on the shipped digits: permuted digits, five tasks, one shared head.

Permuted MNIST (Goodfellow et al. 2013; the benchmark of EWC, GEM, A-GEM, OGD, GPM) on the 8 x 8
digits of ``data.digits``: task t shows every image with its 64 pixels shuffled by a fixed seeded
permutation pi_t, and asks for the same ten digits through the same ten outputs (one shared head:
domain-incremental). One [64, H, H, 10] tanh network learns the tasks one after another, each by
``STEPS`` full-batch gradient steps on the MSE to one-hot targets, and every method takes the
same steps from the same start:

    naive     the plain gradient of the current task
    ewc       baselines.ewc: the penalty of every earlier task, Fisher on its training images
    agem      baselines.agem: the memory's loss (m images of each earlier task) must not rise
    gpm       baselines.gpm: bases of every layer's inputs on each earlier task's training images
    project   fast.project (OGD, Farajtabar et al. 2019): all ten outputs held on the memory
    joint     the upper bound: task t trains on tasks 0 .. t together (everything replayed), each
              step on a seeded sample of their images as large as one task's batch

After task i the network is tested on every task j: R[i, j] is that accuracy (argmax over the
ten outputs). ACC = mean_j R[T-1, j]; BWT = mean_{j < T-1} (R[T-1, j] - R[j, j]) (Lopez-Paz and
Ranzato 2017): negative BWT is forgetting; F, forgetting as Chaudhry et al. 2018 define it and
Mammoth reports it (``forgetting``); FWT, forward transfer against the untrained network's
accuracies (GEM's, ``forward_transfer``).

Seeds (``run(seeds=N)``): seed s draws its own train/test split of the digits, its own
permutations, initialisation and memory; seed 0 is the single run of the default. With N seeds
every number is the mean over the runs, beside its spread (the sample standard deviation,
ddof = 1), and ``exceeds_spread`` says which differences between methods are larger than it.

``--data mnist:DIR`` (``mnist``): the same protocol on MNIST's 28 x 28 images from the user's own
IDX files (``files.idx``), with GPM's network and step where this machine allows (``MNIST``).

Plain arrays and numbers (no matplotlib); ``plots.field`` draws a run; ``python -m mlp_ref
continual-table`` prints one.
"""
from __future__ import annotations

import time
import tracemalloc

import numpy as np

from .. import baselines, data, fast, losses, resources
from ..files import idx
from ..network import MLP

#: The protocol: tasks, widths, steps per task and step size, memory rows per earlier task.
TASKS = 5
HIDDEN = 100
STEPS = 60
LR = 2.0
MEMORY = 20
SEED = 0
INIT_STD = 0.1
#: EWC's weight is EWC_SAFETY / (lr max F), F the merged Fisher of the earlier tasks: the penalty
#: alone moves theta_k - anchor_k by the factor 1 - lr lam F_k a step, stable exactly while
#: lr lam F_k < 2, so this is half the largest stable weight (a larger one diverges at this lr).
EWC_SAFETY = 1.0
#: GPM's energy threshold (Saha et al.'s Permuted MNIST script uses 0.95, 0.99, 0.99 per layer).
GPM_THRESHOLD = 0.97
HIDDEN_ACTIVATION = "tanh"
METHODS = ("naive", "ewc", "agem", "gpm", "project", "joint")

#: Permuted MNIST as GPM's published script runs it (Saha et al. 2021, ``main_pmnist.py`` in
#: github.com/sahagobinda/GPM), where this machine allows, and where it does not, what differs:
#:   same      a [784, 100, 100, 10] ReLU network, 10 tasks, mini-batches of 10, plain SGD,
#:             pixels scaled to (x / 255 - 0.1307) / 0.3081, each task a fixed pixel permutation
#:   differs   the MSE to one-hot targets, not cross-entropy (lr 0.05: the MSE's gradient on ten
#:             outputs, 2 (O - Y) / (n K), is about a fifth of cross-entropy's, so GPM's 0.01
#:             times five); biases in every layer (GPM's layers have none); one epoch of the
#:             60,000 training images a task, not 5 epochs of 54,000 (no validation split); one
#:             energy threshold, 0.97, for every layer, not 0.95, 0.99, 0.99; GPM's bases read
#:             the task's first 300 training images of a seeded shuffle, as GPM's do (300
#:             random ones); the memory (A-GEM, project) 20 images per task; the permutations
#:             are ours (seeded), not GPM's. The first task is permuted too.
MNIST = {"tasks": 10, "hidden": 100, "activation": "relu", "lr": 0.05, "batch": 10, "epochs": 1,
         "m": MEMORY, "threshold": GPM_THRESHOLD, "basis_rows": 300}
MNIST_MEAN, MNIST_STD = 0.1307, 0.3081


def permutations(tasks=TASKS, seed=SEED, pixels=data.DIGIT_PIXELS):
    """(tasks, pixels) int array: row t is task t's pixel permutation, from one seeded generator."""
    rng = np.random.default_rng(seed + 100)
    return np.array([rng.permutation(pixels) for _ in range(tasks)])


def task_data(tasks=TASKS, seed=SEED, images=None):
    """Every task's training and test sets: a list of dicts X, y, T, t (X, T (n, pixels)).

    The digits (``images`` None): pixels (0 .. 16) are centred by the mean training image and
    divided by 16, then permuted: task t's image is x[pi_t]. The same images and labels in every
    task. ``images``: MNIST's (X, y, T, t) of ``mnist``, already scaled, the same seed's way."""
    if images is None:
        X, y, T, t = data.digits(seed=seed)
        mean = X.mean(axis=0)
        X, T = (X - mean) / 16.0, (T - mean) / 16.0
    else:
        X, y, T, t = images
    return [{"X": X[:, p], "y": y, "T": T[:, p], "t": t} for p in permutations(tasks, seed, X.shape[1])]


def mnist(folder):
    """MNIST from ``folder``'s four IDX files (``files.idx``: an ``idx.IDXError`` naming the file
    if one is missing, truncated or not IDX), as GPM scales it: (x / 255 - 0.1307) / 0.3081,
    float64. Returns (X_train, y_train, X_test, y_test)."""
    X, y, T, t = idx.load_mnist(folder)
    return (X / 255.0 - MNIST_MEAN) / MNIST_STD, y, (T / 255.0 - MNIST_MEAN) / MNIST_STD, t


def one_hot(y, K=10):
    return np.eye(K)[np.asarray(y)]


def accuracy(net, X, y):
    return float(np.mean(np.argmax(net(X), axis=1) == y))


def acc_bwt(R):
    """(ACC, BWT) of an accuracy matrix R (T, T): the mean of its last row, and the mean over
    j < T - 1 of R[T-1, j] - R[j, j] (Lopez-Paz and Ranzato 2017, GEM)."""
    R = np.asarray(R, dtype=float)
    last = R.shape[0] - 1
    return float(np.mean(R[last])), float(np.mean(R[last, :last] - np.diag(R)[:last]))


def forgetting(R):
    """F of an accuracy matrix R (T, T): the mean over the tasks but the last of how far each fell
    from its best accuracy since it was learnt to its final one,

        F = mean_{j < T-1} ( max_{j <= i <= T-1} R[i, j]  -  R[T-1, j] )

    Chaudhry et al. 2018 (Riemannian Walk, ECCV: "forgetting measure", the best of the earlier
    rows minus the last) as Mammoth reports it (``utils/metrics.py``: ``forgetting``, whose rows
    start at the task's own and whose max includes the last row): a task that ends above all its
    earlier accuracies counts 0, not a negative forgetting. F >= 0; F = -BWT when each task's
    best is the accuracy just after it was learnt, R[j, j], and never rises later."""
    R = np.asarray(R, dtype=float)
    last = R.shape[0] - 1
    best = [np.max(R[j:, j]) for j in range(last)]
    return float(np.mean([b - R[last, j] for j, b in enumerate(best)]))


def forward_transfer(R, b):
    """FWT of an accuracy matrix R (T, T) against b (T,), each task's accuracy at the network's
    random initialisation, before any training (Lopez-Paz and Ranzato 2017, GEM, their b-bar):

        FWT = mean_{1 <= j <= T-1} ( R[j-1, j] - b[j] )

    how much learning tasks 0 .. j-1 helped task j before it was seen (as Mammoth's
    ``forward_transfer``). With one shared head and pixels permuted anew, about 0 here."""
    R, b = np.asarray(R, dtype=float), np.asarray(b, dtype=float)
    return float(np.mean([R[j - 1, j] - b[j] for j in range(1, R.shape[0])]))


def memory_rows(task, m, seed=SEED):
    """The indices of task's memory: the first m of a seeded permutation of its training rows
    (the same images in every task, each seen through its own permutation)."""
    return np.random.default_rng(seed + 7).permutation(len(task["X"]))[:m]


def _direction(method, net, X, G, state, record):
    """The step's direction; ``record`` is ``net.forward(X)``, already made for the loss, which
    the plain gradient reuses (``net.gradient`` would make it again)."""
    if method == "ewc" and state.get("fisher") is not None:
        return baselines.ewc(net, X, G, state["fisher"], state["anchor"], state["lam"])
    if method == "agem" and state.get("mem_X") is not None:
        _, keep_G = losses.mse(net(state["mem_X"]), state["mem_Y"])
        return baselines.agem(net, X, G, state["mem_X"], keep_G)
    if method == "gpm" and state.get("bases") is not None:
        return baselines.gpm(net, X, G, state["bases"])
    if method == "project" and state.get("mem_X") is not None:
        return fast.project(net, X, G, keep=range(10), keep_X=state["mem_X"])
    return net.backward(record, G).grads


def _after_task(method, net, task, state, m, threshold, seed):
    """What a method keeps of a task once it has learnt it."""
    if method in ("agem", "project"):
        rows = memory_rows(task, m, seed)
        Xm, Ym = task["X"][rows], one_hot(task["y"][rows])
        state["mem_X"] = Xm if state.get("mem_X") is None else np.vstack([state["mem_X"], Xm])
        state["mem_Y"] = Ym if state.get("mem_Y") is None else np.vstack([state["mem_Y"], Ym])
    elif method == "ewc":
        per_row_G = 2.0 * (net(task["X"]) - one_hot(task["y"]))       # d ||O_i - y_i||^2 / d O_i
        state["fishers"].append(baselines.fisher_diagonal(net, task["X"], per_row_G))
        state["anchors"].append({k: v.copy() for k, v in net.params.items()})
        state["fisher"], state["anchor"] = baselines.ewc_merge(state["fishers"], state["anchors"])
        state["lam"] = state["safety"] / (state["lr"] * max(float(v.max()) for v in state["fisher"].values()))
        state["lams"].append(state["lam"])
    elif method == "gpm":
        state["bases"] = baselines.gpm_bases(net, task["X"], threshold=threshold,
                                             previous=state.get("bases"))


def run_method(method, tasks=None, hidden=HIDDEN, steps=STEPS, lr=LR, m=MEMORY,
               safety=EWC_SAFETY, threshold=GPM_THRESHOLD, seed=SEED, log=None,
               activation=HIDDEN_ACTIVATION, batch=None, basis_rows=None, memory=False):
    """One method through every task. Returns dict: ``R`` (T, T) accuracies, ``ACC``, ``BWT``,
    ``F`` (``forgetting``), ``FWT`` (``forward_transfer``) and ``b`` (the untrained network's
    accuracy on each task, FWT's reference), ``seconds`` (the run's CPU time, ``time.process_time``),
    ``lams`` (ewc: its weight after each earlier task), ``ranks`` (gpm: the first piece's bases'
    ranks after each task), ``constraints`` (project: rows x held outputs at the last task).

    ``batch`` None: each step on the whole task (the digits' protocol); else each step on the
    next ``batch`` rows of a seeded shuffle of the task's images (MNIST's, as GPM's SGD).
    ``basis_rows``: GPM's bases read that many of the task's training images (None: all).

    ``memory``: also ``peak_mib``, the most memory the run holds at once, in MiB: the bytes of
    every array the method keeps when the last task starts (the network, its memory rows, Fishers
    and anchors, bases: ``kept_bytes``) plus the peak that ``tracemalloc`` counts while the last
    task trains (each step's temporaries: the Gram, the bases' projections, the replayed batch).
    What a method keeps only grows from task to task, so the last task holds the peak; tracing
    only it costs a fifth of tracing the whole run (a quarter more time, for the projection's
    many small arrays). The tasks' images, made before, are not counted. Else ``peak_mib`` None."""
    if method not in METHODS:
        raise ValueError(f"method: expected one of {list(METHODS)}, got {method!r}")
    tasks = task_data(seed=seed) if tasks is None else tasks
    T = len(tasks)
    net = MLP([tasks[0]["X"].shape[1], hidden, hidden, 10], hidden=activation, output="identity",
              init_std=INIT_STD, seed=seed)
    state = {"fishers": [], "anchors": [], "lams": [], "safety": safety, "lr": lr}
    b = [accuracy(net, tk["T"], tk["t"]) for tk in tasks]             # before any training
    R = np.zeros((T, T))
    ranks = []
    rng = np.random.default_rng(seed + 11)
    t0 = time.perf_counter()
    cpu0 = time.process_time()
    for i, task in enumerate(tasks):
        X, Y = task["X"], one_hot(task["y"])
        if method == "joint":                   # every task so far, as large a batch as one task's
            X_all = np.vstack([tk["X"] for tk in tasks[:i + 1]])
            Y_all = one_hot(np.concatenate([tk["y"] for tk in tasks[:i + 1]]))
        order = rng.permutation(len(task["X"])) if batch is not None else None
        if memory and i == T - 1:
            held, traced = kept_bytes(net.params, state), _trace()
        for step in range(steps):
            if method == "joint":
                rows = rng.choice(len(X_all), size=len(task["X"]) if batch is None else batch, replace=False)
                X, Y = X_all[rows], Y_all[rows]
            elif batch is not None:             # the next batch of this task's shuffle, round and round
                start = (step * batch) % len(order)
                rows = order[start:start + batch]
                X, Y = task["X"][rows], one_hot(task["y"][rows])
            record = net.forward(X)
            _, G = losses.mse(record.output, Y)
            net.step(_direction(method, net, X, G, state, record), lr)
        R[i] = [accuracy(net, tk["T"], tk["t"]) for tk in tasks]
        if memory and i == T - 1:
            peak_mib = (held + traced()) / 2 ** 20
        if i < T - 1:
            kept = task
            if method == "gpm" and basis_rows is not None:      # GPM's: bases of a few random images
                kept = {**task, "X": task["X"][rng.permutation(len(task["X"]))[:basis_rows]]}
            _after_task(method, net, kept, state, m, threshold, seed)
        if method == "gpm" and "bases" in state:
            ranks.append(state["bases"].ranks[0])
        if log is not None:
            log(f"{method}, task {i + 1}/{T} ({time.perf_counter() - t0:.1f} s)")
    ACC, BWT = acc_bwt(R)
    out = {"R": R, "ACC": ACC, "BWT": BWT, "F": forgetting(R), "FWT": forward_transfer(R, b), "b": b,
           "seconds": time.process_time() - cpu0, "peak_mib": peak_mib if memory else None}
    if method == "gpm":
        out["ranks"] = ranks
    if method == "ewc":
        out["lams"] = state["lams"]
    if method == "project":
        out["constraints"] = 10 * m * (T - 1)
    return out


def kept_bytes(*kept):
    """The bytes of every array in ``kept`` (arrays, dicts, lists, tuples, GPM's Bases), each once."""
    seen, total, stack = set(), 0, list(kept)
    while stack:
        x = stack.pop()
        if isinstance(x, np.ndarray) and id(x) not in seen:
            seen.add(id(x))
            total += x.nbytes
        elif isinstance(x, dict):
            stack.extend(x.values())
        elif isinstance(x, (list, tuple)):
            stack.extend(x)
        elif isinstance(x, baselines.Bases):
            stack.extend(x.bases)
    return total


def _trace():
    """Start counting allocations (``tracemalloc``); returns a function that gives their peak
    since, in bytes, and stops counting (unless something else was counting already)."""
    tracing = tracemalloc.is_tracing()
    if tracing:
        tracemalloc.reset_peak()
    else:
        tracemalloc.start()
    base = tracemalloc.get_traced_memory()[0]

    def peak():
        top = tracemalloc.get_traced_memory()[1] - base
        if not tracing:
            tracemalloc.stop()
        return top
    return peak


#: What every run reports, averaged over the seeds, each beside its spread where it has one.
SPREAD = ("ACC", "BWT", "F")


def run(methods=METHODS, log=None, seeds=1, images=None, tasks=TASKS, memory=True, **kw):
    """Every method of ``methods`` on the same tasks, for seeds 0 .. seeds - 1 (each its own
    split, permutations, initialisation and memory; every method on the same ones). Returns
    {"methods": {name: summary}, "setup": the protocol's numbers}; a summary holds ``R`` (the
    mean over the runs), ``ACC``, ``BWT``, ``F`` and ``FWT`` (means), ``ACC_std``, ``BWT_std``,
    ``F_std`` (the sample standard deviation over the runs, ddof = 1; None with one seed),
    ``seconds`` (mean CPU s of a run), ``peak_mib`` (the largest of the runs'), ``runs`` (each
    seed's {seed, R, ACC, BWT, F, FWT, b}) and the first seed's ``ranks``, ``lams``,
    ``constraints``. With one seed R, ACC and BWT are that run's own, as before seeds existed.

    ``images``: MNIST's arrays (``mnist``), or None for the shipped digits; ``memory``: measure
    ``peak_mib`` (``run_method``); ``kw``: ``run_method``'s."""
    runs = {name: [] for name in methods}
    for s in range(seeds):
        data_s = task_data(tasks, seed=s, images=images)
        for name in methods:
            def say(line, s=s):
                log(f"continual-table: seed {s + 1}/{seeds}, " + line if seeds > 1 else f"continual-table: {line}")
            runs[name].append(run_method(name, data_s, seed=s, log=None if log is None else say, memory=memory, **kw))
    setup = {"tasks": tasks, "hidden": kw.get("hidden", HIDDEN), "steps": kw.get("steps", STEPS),
             "lr": kw.get("lr", LR), "memory": kw.get("m", MEMORY), "ewc_safety": kw.get("safety", EWC_SAFETY),
             "threshold": kw.get("threshold", GPM_THRESHOLD), "seed": SEED,
             "n_train": len(data_s[0]["X"]), "n_test": len(data_s[0]["T"]), "seeds": seeds}
    if images is not None:
        setup.update({"data": "mnist", "inputs": int(images[0].shape[1]), "activation": kw.get("activation"),
                      "batch": kw.get("batch"), "basis_rows": kw.get("basis_rows")})
    return {"methods": {name: summarise(r) for name, r in runs.items()}, "setup": setup}


def summarise(runs):
    """One method's runs (``measured``'s, seeds 0, 1, ...) as ``run`` reports them."""
    first = runs[0]
    out = {"R": first["R"] if len(runs) == 1 else np.mean([r["R"] for r in runs], axis=0)}
    for key in (*SPREAD, "FWT"):
        values = [r[key] for r in runs]
        out[key] = values[0] if len(runs) == 1 else float(np.mean(values))
        if key in SPREAD:
            out[f"{key}_std"] = float(np.std(values, ddof=1)) if len(runs) > 1 else None
    out["seconds"] = float(np.mean([r["seconds"] for r in runs]))
    out["peak_mib"] = None if first["peak_mib"] is None else float(max(r["peak_mib"] for r in runs))
    out["runs"] = [{"seed": s, **{k: r[k] for k in ("R", "ACC", "BWT", "F", "FWT", "b")}} for s, r in enumerate(runs)]
    out.update({k: first[k] for k in EXTRAS if k in first})
    return out


def exceeds_spread(result, a, b, key="ACC"):
    """Whether methods a and b differ in ``key`` by more than their spread: |mean_a - mean_b| >
    std_a + std_b, so that the intervals mean +- std do not overlap (False with one seed: one run
    has no spread to compare with)."""
    ra, rb = result["methods"][a], result["methods"][b]
    if ra.get(f"{key}_std") is None or rb.get(f"{key}_std") is None:
        return False
    return abs(ra[key] - rb[key]) > ra[f"{key}_std"] + rb[f"{key}_std"]


def separations(result, key="ACC"):
    """The methods in decreasing order of ``key``, and for each neighbour pair whether their gap
    exceeds the spread (``exceeds_spread``): [(higher, lower, gap, exceeds)]."""
    order = sorted(result["methods"], key=lambda k: -result["methods"][k][key])
    return [(a, b, result["methods"][a][key] - result["methods"][b][key], exceeds_spread(result, a, b, key))
            for a, b in zip(order, order[1:])]


#: What a method's run keeps beside R, ACC and BWT, when it has it (``run_method``).
EXTRAS = ("ranks", "lams", "constraints")
#: What ``as_json`` writes of a summary, in this order.
SUMMARY = ("ACC", "ACC_std", "BWT", "BWT_std", "F", "F_std", "FWT", "seconds", "peak_mib")


def as_json(result):
    """The JSON document of ``continual-table --json``: {"methods": {name: {"R", "ACC", "BWT",
    "ACC_std", "BWT_std", "F", "F_std", "FWT", "seconds", "peak_mib", "runs", and "ranks", "lams",
    "constraints" where the method has them}}, "setup": {...}} (R as lists of lists; a std of one
    seed as null). ``seconds`` and ``peak_mib`` are the machine's, not the protocol's."""
    def plain(run):
        return {k: (np.asarray(v).tolist() if k in ("R", "b") else v) for k, v in run.items()}
    return {"methods": {name: {"R": np.asarray(r["R"]).tolist(), **{k: r[k] for k in SUMMARY},
                               "runs": [plain(x) for x in r["runs"]],
                               **{k: r[k] for k in EXTRAS if k in r}}
                        for name, r in result["methods"].items()},
            "setup": result["setup"]}


def from_json(document):
    """``as_json``'s document as ``run`` returns it (R as arrays)."""
    return {"methods": {name: {**r, "R": np.array(r["R"], dtype=float),
                               "runs": [{**x, "R": np.array(x["R"], dtype=float)} for x in r["runs"]]}
                        for name, r in document["methods"].items()},
            "setup": document["setup"]}


#: The shipped run of the default protocol over five seeds (``resources/field_table.json``):
#: written by ``python -m mlp_ref continual-table --seeds 5 --json mlp_ref/resources/field_table.json``,
#: remade and compared by tests/test_permuted.py (slow).
SHIPPED = "field_table.json"


def load():
    """The default protocol's table over five seeds as the package ships it, in ``run``'s form:
    what field_accuracy.png, field_acc_bwt.png and tutorial 09 show, with no minutes spent
    rerunning it (``continual-table --seeds 5`` reruns it)."""
    return from_json(resources.read_json(SHIPPED))


def mnist_run(folder, seeds=1, tasks=None, log=None, images=None, memory=True):
    """Permuted MNIST from ``folder``'s IDX files (or ``images``, ``mnist(folder)`` read before)
    with ``MNIST``'s settings (GPM's where this machine allows): every method, ``tasks`` tasks
    (default 10), one epoch of mini-batches each."""
    images = mnist(folder) if images is None else images
    p = {k: v for k, v in MNIST.items() if k not in ("tasks", "epochs")}
    tasks = MNIST["tasks"] if tasks is None else tasks
    steps = MNIST["epochs"] * -(-len(images[0]) // p["batch"])      # one epoch: ceil(n / batch)
    return run(log=log, seeds=seeds, images=images, tasks=tasks, memory=memory, steps=steps, **p)


def _pm(r, key, width, signed=False):
    """``key`` of a summary as mean +- std (the mean alone with one seed)."""
    mean, std = r[key], r.get(f"{key}_std")
    text = f"{mean:+.3f}" if signed else f"{mean:.3f}"
    return (text if std is None else f"{text} ± {std:.3f}").rjust(width)


def format_table(result):
    """Every method's ACC, BWT and F (mean ± std over the seeds), FWT, CPU seconds and peak MiB
    of a run ("-" where not measured), then its R (the mean over the seeds), as text."""
    lines = []
    s = result["setup"]
    seeds = s.get("seeds", 1)
    if s.get("data") == "mnist":
        lines.append(f"Permuted MNIST: {s['tasks']} tasks, [{s['inputs']}, {s['hidden']}, {s['hidden']}, 10] "
                     f"{s['activation']}, {s['steps']} steps of {s['batch']} images per task at lr {s['lr']};")
    else:
        lines.append(f"Permuted digits: {s['tasks']} tasks, [64, {s['hidden']}, {s['hidden']}, 10] tanh, "
                     f"{s['steps']} full-batch steps per task at lr {s['lr']};")
    lines.append(f"memory {s['memory']} images per earlier task (agem, project); EWC lambda = "
                 f"{s['ewc_safety']:g} / (lr max F); GPM threshold {s['threshold']}.")
    lines.append(f"{seeds} seed{'s' if seeds > 1 else ''}" + (": mean ± sample std over them." if seeds > 1 else "."))
    w = 15 if seeds > 1 else 6
    lines.append(f"{'method':8} {'ACC':>{w}} {'BWT':>{w + 1}} {'F':>{w}} {'FWT':>7} {'CPU s':>6} {'MiB':>6}")
    for name, r in result["methods"].items():
        lines.append(f"{name:8} {_pm(r, 'ACC', w)} {_pm(r, 'BWT', w + 1, True)} {_pm(r, 'F', w)} "
                     f"{r['FWT']:+7.3f} {r['seconds']:6.1f} "
                     + ("     -" if r["peak_mib"] is None else f"{r['peak_mib']:6.1f}"))
    lines.append("R (row i: after task i; column j: task j)" + (", the mean over the seeds" if seeds > 1 else ""))
    for name, r in result["methods"].items():
        rows = ["[" + " ".join(f"{v:.2f}" for v in row) + "]" for row in np.asarray(r["R"])]
        lines.append(f"{name:8} {rows[0]}")
        lines.extend(f"{'':8} {row}" for row in rows[1:])
    return "\n".join(lines)
