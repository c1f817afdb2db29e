"""Measurements: plain NumPy results for tables, tutorials and plots (no matplotlib here).

Every experiment starts from a setup (``setups.SETUPS``: the seed's network, or the
visible one), takes steps with one *rule* after another, and reports how far out1 drifted
(max |delta out1|, on the batch and on unseen probe inputs) and how much out2 gained
(its mean change on the batch). The network handed in is never modified.
"""
from __future__ import annotations

import numpy as np

from . import fixes
from .data import probe_inputs
from .setups import G_QUESTION, SETUPS

#: How many unseen probe inputs (``data.probe_inputs``) measure the drift off the batch.
N_PROBE = 256

#: The answer's mask: hide out1 from the loss, keep out2.
MASK = np.array([0.0, 1.0])

#: The penalty weight of the table. Gradient descent on lam/2 ||O_1 - ref||^2 alone is
#: stable only while lr * lam * lambda_max(J_1 J_1^T) < 2; lambda_max is ~15 (seed) and
#: ~170 (visible) at the start and grows as the outputs move, so with the table's lrs a
#: lam of 10 diverges within a few dozen steps. 0.5 stays stable on both.
PENALTY_LAM = 0.5

#: Each rule as a function (net, X, G, ref) -> direction D, where ref holds out1's
#: starting values on X (what penalty and restore pull back to). Rules hold output 0.
DIRECTIONS = {
    "naive": lambda net, X, G, ref: fixes.naive(net, X, G),
    "masked": lambda net, X, G, ref: fixes.masked(net, X, G, MASK),
    "freeze": lambda net, X, G, ref: fixes.freeze(net, X, G),
    "project": lambda net, X, G, ref: fixes.project(net, X, G),
    "project+restore": lambda net, X, G, ref: fixes.project(net, X, G),
    "penalty": lambda net, X, G, ref: fixes.penalty(net, X, G, keep=[0], ref=ref, lam=PENALTY_LAM),
    "span": lambda net, X, G, ref: fixes.span_project(net, X, G),
}

#: What each rule guarantees for out1, in one line (printed under the table).
GUARANTEES = {
    "naive": "nothing: out1 drifts O(lr) through the shared layers",
    "masked": "nothing here: G's out1 column is already 0, so the mask changes nothing",
    "freeze": "exactly 0 on every input at every lr (var_list = output layer only)",
    "project": "O(lr^2) on the batch, O(lr) on unseen inputs",
    "project+restore": "~1e-12 on the batch after Gauss-Newton restoring; O(lr) unseen",
    "penalty": "none: first step = naive; a restoring force over many steps",
    "span": "~roundoff on the batch, but with keep_X = batch it freezes the hidden layers",
}

#: The question's learning rates: the answer's GradientDescentOptimizer(0.1) for the seed
#: network; smaller for the trained visible network, whose outputs react ~10x more.
LR = {"seed": 0.1, "visible": 0.01}


def penalty_rule(lam):
    """The penalty rule with weight ``lam``, for sweeps over lambda."""
    return lambda net, X, G, ref: fixes.penalty(net, X, G, keep=[0], ref=ref, lam=lam)


def take_step(net, rule, X, G, lr, ref, directions=DIRECTIONS):
    """One step of ``rule`` on net, in place: theta <- theta - lr D (then restore, if asked)."""
    net.step(directions[rule](net, X, G, ref), lr)
    if rule.endswith("+restore"):
        fixes.restore(net, X, ref)
    return net


def _effect(net0, net, X, P):
    """(max |d out1| on X, max |d out1| on P, mean d out2 on X) between two networks."""
    before_X, after_X = net0(X), net(X)
    return (float(np.max(np.abs(after_X[:, 0] - before_X[:, 0]))),
            float(np.max(np.abs(net(P)[:, 0] - net0(P)[:, 0]))),
            float(np.mean(after_X[:, 1] - before_X[:, 1])))


def one_step(setup="visible", rules=None, lrs=None, G=G_QUESTION, n_probe=N_PROBE):
    """One step of each rule from the same start, over a range of learning rates.

    Returns a dict with ``lrs`` (m,), and per rule name a dict of arrays (m,):
    ``drift_batch``, ``drift_unseen`` (max |delta out1|) and ``gain`` (mean delta out2).
    """
    net0, X, _ = SETUPS[setup]()
    P = probe_inputs(n_probe)
    rules = list(DIRECTIONS) if rules is None else rules
    lrs = np.logspace(-5, 0, 11) if lrs is None else np.asarray(lrs, dtype=float)
    ref = net0(X)[:, 0]
    out = {"lrs": lrs, "setup": setup}
    for rule in rules:
        rows = [_effect(net0, take_step(net0.copy(), rule, X, G, lr, ref), X, P) for lr in lrs]
        drift_batch, drift_unseen, gain = (np.array(col) for col in zip(*rows))
        out[rule] = {"drift_batch": drift_batch, "drift_unseen": drift_unseen, "gain": gain}
    return out


def trajectories(setup="visible", rules=None, steps=200, lr=None, G=G_QUESTION, n_probe=N_PROBE,
                 directions=DIRECTIONS):
    """Many steps of each rule; the cumulative effect after every step.

    Returns a dict with ``steps`` (steps + 1,) and per rule a dict of arrays
    (steps + 1,): ``drift_batch``, ``drift_unseen`` (max |out1 - out1 at the start|)
    and ``gain`` (mean out2 - out2 at the start); entry 0 is the start (all zero).
    """
    net0, X, _ = SETUPS[setup]()
    P = probe_inputs(n_probe)
    lr = LR[setup] if lr is None else lr
    rules = list(directions) if rules is None else rules
    ref = net0(X)[:, 0]
    out = {"steps": np.arange(steps + 1), "setup": setup, "lr": lr}
    for rule in rules:
        net = net0.copy()
        rows = [(0.0, 0.0, 0.0)]
        for _ in range(steps):
            take_step(net, rule, X, G, lr, ref, directions)
            rows.append(_effect(net0, net, X, P))
        drift_batch, drift_unseen, gain = (np.array(col) for col in zip(*rows))
        out[rule] = {"drift_batch": drift_batch, "drift_unseen": drift_unseen, "gain": gain}
    return out


def question_table(setups=("seed", "visible"), rules=None, long_steps=100):
    """The side-by-side table for the question: per setup and rule, after 1 and after
    ``long_steps`` steps at the setup's lr: out2 gain, max |delta out1| on the batch and
    on unseen inputs. Returns a list of row dicts."""
    rows = []
    for setup in setups:
        traj = trajectories(setup, rules=rules, steps=long_steps)
        for rule in (list(DIRECTIONS) if rules is None else rules):
            t = traj[rule]
            rows.append({"setup": setup, "rule": rule, "lr": traj["lr"], "long_steps": long_steps,
                         **{f"{key}_1": float(t[key][1]) for key in ("gain", "drift_batch", "drift_unseen")},
                         **{f"{key}_n": float(t[key][-1]) for key in ("gain", "drift_batch", "drift_unseen")}})
    return rows


def format_table(rows):
    """The question table as text, with one line per rule on what it guarantees."""
    n = rows[0]["long_steps"]
    head = (f"{'setup':8} {'rule':16} {'lr':>5} | {'out2 gain':>10} {'|dout1| batch':>14} "
            f"{'|dout1| unseen':>15} | {'out2 gain':>10} {'|dout1| batch':>14} {'|dout1| unseen':>15}")
    lines = [f"{'':31} | {'after 1 step':^41} | {f'after {n} steps':^41}", head, "-" * len(head)]
    for r in rows:
        lines.append(f"{r['setup']:8} {r['rule']:16} {r['lr']:>5g} | {r['gain_1']:10.4g} "
                     f"{r['drift_batch_1']:14.3e} {r['drift_unseen_1']:15.3e} | {r['gain_n']:10.4g} "
                     f"{r['drift_batch_n']:14.3e} {r['drift_unseen_n']:15.3e}")
    lines.append("")
    lines.append("What each rule guarantees for out1:")
    for rule in dict.fromkeys(r["rule"] for r in rows):
        lines.append(f"  {rule:16} {GUARANTEES.get(rule, '')}")
    return "\n".join(lines)


def input_slice(n=41, fixed=0.5):
    """A 2-D slice of the input cube: x1, x2 on an n x n grid over [0, 1], x3 = fixed.

    Returns (x1 (n,), x2 (n,), inputs (n*n, 3)), inputs in row-major order of (x2, x1).
    """
    x1 = np.linspace(0.0, 1.0, n)
    x2 = np.linspace(0.0, 1.0, n)
    g1, g2 = np.meshgrid(x1, x2)
    return x1, x2, np.stack([g1.ravel(), g2.ravel(), np.full(g1.size, fixed)], axis=1)


def drift_over_slice(setup="visible", rules=("project", "freeze", "span"), lr=None, steps=1,
                     n=41, G=G_QUESTION):
    """|delta out1| over a 2-D slice of input space after ``steps`` steps of each rule.

    Returns dict: ``x1``, ``x2`` (n,), ``batch`` (the batch's (x1, x2), for reference), and
    per rule an (n, n) array of |delta out1| (rows x2, columns x1).
    """
    net0, X, _ = SETUPS[setup]()
    lr = LR[setup] if lr is None else lr
    x1, x2, grid = input_slice(n)
    ref = net0(X)[:, 0]
    out = {"x1": x1, "x2": x2, "batch": X[:, :2], "lr": lr, "steps": steps, "setup": setup}
    for rule in rules:
        net = net0.copy()
        for _ in range(steps):
            take_step(net, rule, X, G, lr, ref)
        out[rule] = np.abs(net(grid)[:, 0] - net0(grid)[:, 0]).reshape(n, n)
    return out


def tangent_kernel(setup="visible"):
    """The cross-output kernel K_12 = J_1 J_2^T of the setup's batch, split by layer."""
    from .jacobian import tangent_kernel_by_layer
    net, X, _ = SETUPS[setup]()
    shares = tangent_kernel_by_layer(net, X, 0, 1)
    return {"setup": setup, "shares": shares,
            "norms": {l: float(np.linalg.norm(v)) for l, v in shares.items()}}


def naive_step_effect(net, X, G=G_QUESTION, lr=0.1):
    """Outputs on X before and after one plain gradient step theta <- theta - lr * g.

    Returns a dict of arrays: ``before`` and ``after`` (n, K), and ``delta`` = after - before.
    The network is not modified.
    """
    before = net(X)
    stepped = net.copy().step(net.gradient(X, G), lr)
    after = stepped(X)
    return {"before": before, "after": after, "delta": after - before, "lr": lr}


# -- the accepted answer's TensorFlow script, replayed ---------------------------------

#: The script's train ops: (name, loss, var_list), run one after another as it does.
#: "mask, all variables" is the case the answer never ran.
ANSWER_OPS = [
    ("train_op2", "loss2", ["W2", "b2"]),
    ("train_op12", "loss", ["W2", "b2"]),
    ("train_op_all", "loss", None),
]
UNRUN_OP = ("mask, all variables", "loss2", None)


def _answer_state(net, X, Y, mask):
    from .losses import masked_mse, mse
    record = net.forward(X)
    return {"hidden": record.a[1], "out": record.output,
            "loss": mse(record.output, Y)[0], "loss2": masked_mse(record.output, Y, mask)[0]}


def _answer_op(net, X, Y, mask, loss, var_list, lr):
    from .losses import masked_mse, mse
    out = net(X)
    _, G = mse(out, Y) if loss == "loss" else masked_mse(out, Y, mask)
    D = fixes.freeze(net, X, G, trainable=var_list) if var_list else fixes.naive(net, X, G)
    net.step(D, lr)


def replay_answer(lr=0.1):
    """The answer's script in NumPy: the seed setup, then its three train ops in order,
    then (from the same start as train_op2) the op it never ran: the mask with all variables.

    Returns a list of rows, one per state: ``op``, ``loss_name``, ``var_list``,
    ``hidden`` (8, 4), ``out`` (8, 2), ``loss``, ``loss2``, and ``d_out1`` (8,), the change
    of out1 made by that op (zeros for the initial state).
    """
    from .setups import seed_setup
    net, X, Y = seed_setup()
    mask = np.tile(MASK, (X.shape[0], 1))          # the script's mask_out1: [0, 1] per row
    start = net.copy()
    rows = [{"op": "initial", "loss_name": None, "var_list": None,
             **_answer_state(net, X, Y, mask), "d_out1": np.zeros(X.shape[0])}]
    for op, loss, var_list in ANSWER_OPS:
        before = net(X)[:, 0]
        _answer_op(net, X, Y, mask, loss, var_list, lr)
        rows.append({"op": op, "loss_name": loss, "var_list": var_list,
                     **_answer_state(net, X, Y, mask), "d_out1": net(X)[:, 0] - before})
    op, loss, var_list = UNRUN_OP
    net = start
    before = net(X)[:, 0]
    _answer_op(net, X, Y, mask, loss, var_list, lr)
    rows.append({"op": op, "loss_name": loss, "var_list": var_list,
                 **_answer_state(net, X, Y, mask), "d_out1": net(X)[:, 0] - before})
    return rows


def format_replay(rows, precision=4):
    """The replay as the script prints it (hidden, out, loss, loss2) plus the change of out1."""
    lines = []
    with np.printoptions(precision=precision, suppress=True, linewidth=100):
        for r in rows:
            if r["op"] == "initial":
                title = "initial state"
            else:
                vl = f"var_list={r['var_list']}" if r["var_list"] else "all variables"
                title = f"after {r['op']}: minimize {r['loss_name']}, {vl}"
            lines += [f"== {title}", f"hidden =\n{r['hidden']}", f"out =\n{r['out']}",
                      f"loss = {r['loss']:.6f}   loss2 = {r['loss2']:.6f}"]
            if r["op"] != "initial":
                d = np.max(np.abs(r["d_out1"]))
                verdict = "out1 unchanged, bit for bit" if d == 0.0 else "out1 MOVED"
                lines.append(f"max |change of out1| = {d:.3e}   -> {verdict}")
            lines.append("")
    lines.append("Verdict: the mask alone does not hold out1. train_op2 keeps it fixed only because "
                 "var_list = [W2, b2] also freezes the shared layer W1, b1; the same masked loss "
                 "on all variables moves out1.")
    return "\n".join(lines)
