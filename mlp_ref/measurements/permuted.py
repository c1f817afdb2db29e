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
Ranzato 2017): negative BWT is forgetting.

Plain arrays and numbers (no matplotlib); ``plots.field`` draws a run; ``python -m mlp_ref
continual-table`` prints one.
"""
from __future__ import annotations

import time

import numpy as np

from .. import baselines, data, fast, losses, resources
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
METHODS = ("naive", "ewc", "agem", "gpm", "project", "joint")


def permutations(tasks=TASKS, seed=SEED):
    """(tasks, 64) int array: row t is task t's pixel permutation, from one seeded generator."""
    rng = np.random.default_rng(seed + 100)
    return np.array([rng.permutation(data.DIGIT_PIXELS) for _ in range(tasks)])


def task_data(tasks=TASKS, seed=SEED):
    """Every task's training and test sets: a list of dicts X, y, T, t (X, T (n, 64)).

    Pixels (0 .. 16) are centred by the mean training image and divided by 16, then permuted:
    task t's image is x[pi_t]. The same images and labels in every task."""
    X, y, T, t = data.digits(seed=seed)
    mean = X.mean(axis=0)
    X, T = (X - mean) / 16.0, (T - mean) / 16.0
    return [{"X": X[:, p], "y": y, "T": T[:, p], "t": t} for p in permutations(tasks, seed)]


def one_hot(y, K=10):
    return np.eye(K)[np.asarray(y)]


def accuracy(net, X, y):
    return float(np.mean(np.argmax(net(X), axis=1) == y))


def acc_bwt(R):
    """(ACC, BWT) of an accuracy matrix R (T, T): the mean of its last row, and the mean over
    j < T - 1 of R[T-1, j] - R[j, j]."""
    R = np.asarray(R, dtype=float)
    last = R.shape[0] - 1
    return float(np.mean(R[last])), float(np.mean(R[last, :last] - np.diag(R)[:last]))


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
               safety=EWC_SAFETY, threshold=GPM_THRESHOLD, seed=SEED, log=None):
    """One method through every task. Returns dict: ``R`` (T, T) accuracies, ``ACC``, ``BWT``,
    ``seconds`` (wall time), ``lams`` (ewc: its weight after each earlier task), ``ranks`` (gpm:
    the first piece's bases' ranks after each task), ``constraints`` (project: rows x held
    outputs at the last task)."""
    if method not in METHODS:
        raise ValueError(f"method: expected one of {list(METHODS)}, got {method!r}")
    tasks = task_data(seed=seed) if tasks is None else tasks
    T = len(tasks)
    net = MLP([data.DIGIT_PIXELS, hidden, hidden, 10], hidden="tanh", output="identity",
              init_std=INIT_STD, seed=seed)
    state = {"fishers": [], "anchors": [], "lams": [], "safety": safety, "lr": lr}
    R = np.zeros((T, T))
    ranks = []
    rng = np.random.default_rng(seed + 11)
    t0 = time.perf_counter()
    for i, task in enumerate(tasks):
        X, Y = task["X"], one_hot(task["y"])
        if method == "joint":                   # every task so far, as large a batch as one task's
            X_all = np.vstack([tk["X"] for tk in tasks[:i + 1]])
            Y_all = one_hot(np.concatenate([tk["y"] for tk in tasks[:i + 1]]))
        for _ in range(steps):
            if method == "joint":
                rows = rng.choice(len(X_all), size=len(task["X"]), replace=False)
                X, Y = X_all[rows], Y_all[rows]
            record = net.forward(X)
            _, G = losses.mse(record.output, Y)
            net.step(_direction(method, net, X, G, state, record), lr)
        R[i] = [accuracy(net, tk["T"], tk["t"]) for tk in tasks]
        if i < T - 1:
            _after_task(method, net, task, state, m, threshold, seed)
        if method == "gpm" and "bases" in state:
            ranks.append(state["bases"].ranks[0])
        if log is not None:
            log(f"continual-table: {method}, task {i + 1}/{T} ({time.perf_counter() - t0:.1f} s)")
    ACC, BWT = acc_bwt(R)
    out = {"R": R, "ACC": ACC, "BWT": BWT, "seconds": time.perf_counter() - t0}
    if method == "gpm":
        out["ranks"] = ranks
    if method == "ewc":
        out["lams"] = state["lams"]
    if method == "project":
        out["constraints"] = 10 * m * (T - 1)
    return out


def run(methods=METHODS, log=None, **kw):
    """Every method of ``methods`` on the same tasks. Returns {"methods": {name: run_method},
    "setup": the protocol's numbers}."""
    seed = kw.get("seed", SEED)
    tasks = task_data(seed=seed)
    res = {name: run_method(name, tasks, log=log, **kw) for name in methods}
    setup = {"tasks": len(tasks), "hidden": kw.get("hidden", HIDDEN), "steps": kw.get("steps", STEPS),
             "lr": kw.get("lr", LR), "memory": kw.get("m", MEMORY), "ewc_safety": kw.get("safety", EWC_SAFETY),
             "threshold": kw.get("threshold", GPM_THRESHOLD), "seed": seed,
             "n_train": len(tasks[0]["X"]), "n_test": len(tasks[0]["T"])}
    return {"methods": res, "setup": setup}


#: What a method's run keeps beside R, ACC and BWT, when it has it (``run_method``).
EXTRAS = ("ranks", "lams", "constraints")


def as_json(result):
    """The JSON document of ``continual-table --json``: {"methods": {name: {"R", "ACC", "BWT",
    and "ranks", "lams", "constraints" where the method has them}}, "setup": {...}} (R as lists
    of lists). The run's wall time is left out: it is the machine's, not the protocol's."""
    return {"methods": {name: {"R": np.asarray(r["R"]).tolist(), "ACC": r["ACC"], "BWT": r["BWT"],
                               **{k: r[k] for k in EXTRAS if k in r}}
                        for name, r in result["methods"].items()},
            "setup": result["setup"]}


def from_json(document):
    """``as_json``'s document as ``run`` returns it (R as arrays)."""
    return {"methods": {name: {**r, "R": np.array(r["R"], dtype=float)}
                        for name, r in document["methods"].items()},
            "setup": document["setup"]}


#: The shipped run of the default protocol (``resources/field_table.json``): written by
#: ``python -m mlp_ref continual-table --json mlp_ref/resources/field_table.json``, remade and
#: compared by tests/test_permuted.py (slow).
SHIPPED = "field_table.json"


def load():
    """The default protocol's table as the package ships it, in ``run``'s form: what
    field_accuracy.png, field_acc_bwt.png and tutorial 09 show, with no minute spent rerunning
    it (``continual-table`` reruns it)."""
    return from_json(resources.read_json(SHIPPED))


def format_table(result):
    """R, ACC and BWT of every method, as text."""
    lines = []
    s = result["setup"]
    lines.append(f"Permuted digits: {s['tasks']} tasks, [64, {s['hidden']}, {s['hidden']}, 10] tanh, "
                 f"{s['steps']} full-batch steps per task at lr {s['lr']};")
    lines.append(f"memory {s['memory']} images per earlier task (agem, project); EWC lambda = "
                 f"{s['ewc_safety']:g} / (lr max F); GPM threshold {s['threshold']}.")
    lines.append(f"{'method':8} {'ACC':>6} {'BWT':>7}   R (row i: after task i; column j: task j)")
    for name, r in result["methods"].items():
        R = np.asarray(r["R"])
        rows = ["[" + " ".join(f"{v:.2f}" for v in row) + "]" for row in R]
        lines.append(f"{name:8} {r['ACC']:6.3f} {r['BWT']:+7.3f}   {rows[0]}")
        lines.extend(f"{'':24}{row}" for row in rows[1:])
    return "\n".join(lines)
