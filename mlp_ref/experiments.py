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



# -- the optimizer's role ---------------------------------------------------------------

#: The two orders of projection and optimizer (see ``optim``): project the incoming
#: gradient and let Adam rescale it (the pitfall), or project Adam's final update.
OPTIMIZER_ORDERS = {"project gradient, then Adam": "gradient", "Adam, then project update": "update"}


def _adam_holding_out1(net, X, lr, order):
    from .optim import Adam
    return Adam(lr, constraint=lambda U: fixes.nullspace(net, U, X, keep=[0]), order=order)


def optimizer_order(setup="visible", lrs=None, steps=100, lr=None, G=G_QUESTION):
    """Adam with a null-space projection in either order.

    Returns a dict with ``lrs`` (m,) and, per order name (``OPTIMIZER_ORDERS``):
    ``one_step`` (m,) max |delta out1| on the batch after one Adam step at each lr, and
    ``drift``, ``gain`` (steps + 1,) over ``steps`` Adam steps at ``lr``.
    """
    net0, X, _ = SETUPS[setup]()
    lrs = np.logspace(-5, -2, 7) if lrs is None else np.asarray(lrs, dtype=float)
    lr = 1e-3 if lr is None else lr
    out = {"lrs": lrs, "lr": lr, "steps": np.arange(steps + 1), "setup": setup}
    for name, order in OPTIMIZER_ORDERS.items():
        one = []
        for eta in lrs:
            net = net0.copy()
            _adam_holding_out1(net, X, eta, order).apply(net, fixes.naive(net, X, G))
            one.append(np.max(np.abs(net(X)[:, 0] - net0(X)[:, 0])))
        net = net0.copy()
        opt = _adam_holding_out1(net, X, lr, order)
        drift, gain = [0.0], [0.0]
        for _ in range(steps):
            opt.apply(net, fixes.naive(net, X, G))
            d = net(X) - net0(X)
            drift.append(float(np.max(np.abs(d[:, 0]))))
            gain.append(float(np.mean(d[:, 1])))
        out[name] = {"one_step": np.array(one), "drift": np.array(drift), "gain": np.array(gain)}
    return out


# -- what out2 can still learn --------------------------------------------------------------

def out2_capacity(n=32, steps=200, lr=0.05, seed=5):
    """Teach out2 a *new* function while holding out1, with each kind of layer splitting.

    Start from the visible network; the new target for out2 is y2' = x1 x2 - x3 on n fresh
    inputs (out1 must keep its values there). Each variant runs ``steps`` steps of
    gradient descent on the MSE of out2 alone:

        naive          every parameter of the MLP (out1 is free to drift)
        freeze         the MLP's output layer only (var_list), = SplitHeads' head 1
        heads          SplitHeads.from_mlp, head 1 trained: the same function as freeze
        towers         TwoTower.from_mlp, all of tower 1 trained: a whole network for out2
        project+restore  every parameter, projected and restored to hold out1 on the n inputs

    Returns a dict: per variant ``mse`` (steps + 1,) of out2 against the new target,
    ``drift_batch`` and ``drift_unseen`` (final max |delta out1| on the n inputs and on
    probe inputs), ``n_moved`` (how many parameters changed) and ``n_params``.
    """
    from .architectures import SplitHeads, TwoTower
    from .data import seed_data
    from .losses import mse

    net0, _, _ = SETUPS["visible"]()
    X, _ = seed_data(n=n, seed=seed)
    target = X[:, 0] * X[:, 1] - X[:, 2]
    P = probe_inputs(N_PROBE)
    ref = net0(X)[:, 0]
    L = net0.depth

    def G_for(model):                        # dL/dO of the MSE on out2 only
        G = np.zeros((n, 2))
        G[:, 1] = mse(model(X)[:, 1:], target[:, None])[1][:, 0]
        return G

    def only(model, keys):
        return lambda: {k: (g if k in keys else np.zeros_like(g))
                        for k, g in model.gradient(X, G_for(model)).items()}

    net, net_f, net_p = net0.copy(), net0.copy(), net0.copy()
    heads, towers = SplitHeads.from_mlp(net0), TwoTower.from_mlp(net0)
    variants = {
        "naive": (net, lambda: net.gradient(X, G_for(net)), None),
        "freeze": (net_f, only(net_f, [f"W{L}", f"b{L}"]), None),
        "heads": (heads, only(heads, heads.head_keys(1)), None),
        "towers": (towers, only(towers, towers.tower_keys(1)), None),
        "project+restore": (
            net_p, lambda: fixes.nullspace(net_p, net_p.gradient(X, G_for(net_p)), X, keep=[0]),
            lambda: fixes.restore(net_p, X, ref)),
    }
    out = {"target": "x1 x2 - x3", "n": n, "steps": np.arange(steps + 1)}
    for name, (model, direction, after) in variants.items():
        start = {k: v.copy() for k, v in model.params.items()}
        out1_X, out1_P = model(X)[:, 0], model(P)[:, 0]      # each model's own start
        losses = [mse(model(X)[:, 1:], target[:, None])[0]]
        for _ in range(steps):
            model.step(direction(), lr)
            if after is not None:
                after()
            losses.append(mse(model(X)[:, 1:], target[:, None])[0])
        out[name] = {"mse": np.array(losses),
                     "drift_batch": float(np.max(np.abs(model(X)[:, 0] - out1_X))),
                     "drift_unseen": float(np.max(np.abs(model(P)[:, 0] - out1_P))),
                     "n_moved": int(sum(np.sum(model.params[k] != start[k]) for k in start)),
                     "n_params": model.n_params}
    return out


def format_capacity(res):
    """``out2_capacity`` as text: what out2 can still learn under each kind of splitting."""
    steps = len(res["steps"]) - 1
    lines = [f"Teaching out2 a new function ({res['target']}) on {res['n']} inputs, {steps} steps, "
             f"holding out1:",
             f"{'variant':16} {'out2 MSE':>9} -> {'final':>9} {'|dout1| batch':>14} "
             f"{'|dout1| unseen':>15} {'params moved':>13}"]
    for name in ("naive", "freeze", "heads", "towers", "project+restore"):
        r = res[name]
        lines.append(f"{name:16} {r['mse'][0]:9.4f} -> {r['mse'][-1]:9.4f} {r['drift_batch']:14.3e} "
                     f"{r['drift_unseen']:15.3e} {r['n_moved']:>6} of {r['n_params']:<4}")
    return "\n".join(lines)

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


# -- the stages of backprop, and a two-parameter picture of projection -------------------------
# The stages of backprop, the entries that the two pure-gradient fixes zero, and a toy small
# enough to draw its parameter plane.

def backprop_stages(net, X, G=G_QUESTION, mask=(0.0, 1.0), trainable=("W2", "b2")):
    """Every forward and backward stage of ``net`` on X for G, and which entries two fixes zero.

    Returns a dict:

    ``forward``   name -> array, a0, z1, a1, ..., in forward order
    ``backward``  name -> array, dout, dzL, dWL, dbL, ..., da0, in backward order
    ``activations``  the activation name of each layer 1 .. L
    ``zeroed``    fix -> {stage -> bool array}: the entries the fix forces to zero,
                  whatever G is (so a zero that G itself happens to put there counts too):

        "masked"  G -> G * mask: the mask (K,) on the loss. We backpropagate a G with no
                  zero entry through the mask; the entries that come out exactly zero are
                  the ones the mask zeroes, for every G.
        "freeze"  keep only the gradients of ``trainable`` (TF's ``var_list``): every entry of
                  the other dW_l, db_l is zeroed.
    """
    record = net.forward(X)
    back = net.backward(record, G)
    masked = net.backward(record, _probe_G(record) * np.asarray(mask, dtype=float)).stages

    def freeze(net, X, G):
        return {k: (g if k in trainable else np.zeros_like(g)) for k, g in net.gradient(X, G).items()}

    zeroed = {
        "masked": {name: masked[name] == 0.0 for name in masked if np.any(masked[name] == 0.0)},
        "freeze": zeroed_by_rule(freeze, net, X),
    }
    return {"forward": record.stages, "backward": back.stages, "zeroed": zeroed,
            "activations": net.activations,
            "G": np.asarray(G, dtype=float), "mask": np.asarray(mask, dtype=float),
            "trainable": list(trainable)}


def _probe_G(record):
    """An output gradient (n, K) with no zero entry: 1, 2, 3, ... row by row."""
    n, K = record.output.shape
    return 1.0 + np.arange(n * K, dtype=float).reshape(n, K)


def zeroed_by_rule(rule, net, X):
    """Which parameter-gradient entries a direction rule forces to zero, for the overlay of
    ``plots.backprop_stages(..., zeroed=...)``.

    ``rule(net, X, G)`` returns a direction D like params (any of ``mlp_ref.fixes``, with its
    extra arguments bound, e.g. ``lambda net, X, G: fixes.freeze(net, X, G, ["W2", "b2"])``).
    It is called with a G that has no zero entry, so a zero in D is the rule's doing, not G's.
    Returns {"dW1": bool array, ...} for the parameters with at least one zeroed entry.
    """
    D = rule(net, X, _probe_G(net.forward(X)))
    return {f"d{k}": D[k] == 0.0 for k in net.params if np.any(D[k] == 0.0)}


class TwoParamToy:
    """The smallest picture of projection: a 1-2-2 tanh MLP with two trainable parameters.

    One input x, two tanh hidden units, two identity outputs; only the first-layer weights
    theta = (theta1, theta2) are trained, the biases c and output weights V are fixed:

        h_j(theta) = tanh(theta_j * x + c_j),     out_k(theta) = sum_j h_j V[j, k]

    Both outputs depend on both parameters (every weight is shared), so no layer split
    exists, and the level sets of out1 in the theta-plane are curved.
    It is ``MLP([1, 2, 2], hidden="tanh")`` with W1 = theta, b1 = c, W2 = V, b2 = 0.
    """

    def __init__(self, x=1.0, c=(0.0, 0.0), V=((1.0, 1.0), (1.0, -0.3))):
        self.x, self.c, self.V = float(x), np.asarray(c, float), np.asarray(V, float)

    def outputs(self, theta):
        """out(theta), shape (..., 2) for theta of shape (..., 2)."""
        return np.tanh(np.asarray(theta) * self.x + self.c) @ self.V

    def grads(self, theta):
        """Rows d out_k / d theta, shape (2, 2): row k is the gradient of out_k."""
        h = np.tanh(np.asarray(theta) * self.x + self.c)
        return (self.V * ((1.0 - h ** 2) * self.x)[:, None]).T


def projection_geometry(theta0=(0.0, 0.6), lr=1.0, lrs=None, toy=None, n_restore=6):
    """The naive step, its projection and the restoring steps on ``TwoParamToy``.

    With G = [0, -1] the naive direction is D = G . dout/dtheta = -grad out2, and the step is
    theta0 - lr * D. Projection removes the component along u = grad out1:
    D_p = D - u (u . D) / |u|^2, so the projected step moves along the tangent of out1's level
    set and leaves it by O(lr^2), because the level set curves. The restoring (Gauss-Newton)
    step theta <- theta - u (out1(theta) - ref) / |u|^2, with u = grad out1 at theta, repeated,
    brings theta back onto the level set.

    Returns a dict of arrays: the points theta0, naive, projected, the restore path (k, 2),
    the tangent unit vector, ref = out1(theta0); and for the drift panel ``lrs`` with the
    drift |out1 - ref| after the naive, the projected and the projected+restored steps, and
    ``slopes``, the log-log slopes of the naive and projected drifts fitted over lr <= 0.1.
    """
    toy = TwoParamToy() if toy is None else toy
    theta0 = np.asarray(theta0, float)
    lrs = np.geomspace(1e-3, 1.0, 13) if lrs is None else np.asarray(lrs, float)
    ref = toy.outputs(theta0)[0]
    u, w = toy.grads(theta0)                         # grad out1, grad out2 at theta0
    D = -w                                           # G = [0, -1]: D = 0 * u - 1 * w
    D_proj = D - u * (u @ D) / (u @ u)

    def restore(theta):
        path = [theta]
        for _ in range(n_restore):
            r = toy.outputs(theta)[0] - ref
            g1 = toy.grads(theta)[0]
            theta = theta - g1 * r / (g1 @ g1)
            path.append(theta)
        return np.array(path)

    projected = theta0 - lr * D_proj
    drift = {"naive": [], "project": [], "project+restore": []}
    for eta in lrs:
        drift["naive"].append(abs(toy.outputs(theta0 - eta * D)[0] - ref))
        drift["project"].append(abs(toy.outputs(theta0 - eta * D_proj)[0] - ref))
        drift["project+restore"].append(abs(toy.outputs(restore(theta0 - eta * D_proj)[-1])[0] - ref))
    drift = {k: np.array(v) for k, v in drift.items()}
    small = lrs <= 0.1                               # the asymptotic regime of the log-log slope
    slopes = {k: float(np.polyfit(np.log(lrs[small]), np.log(drift[k][small]), 1)[0])
              for k in ("naive", "project")}
    return {"toy": toy, "theta0": theta0, "lr": lr, "ref": ref, "grad_out1": u, "grad_out2": w,
            "naive": theta0 - lr * D, "projected": projected, "restore_path": restore(projected),
            "tangent": D_proj / np.linalg.norm(D_proj),
            "lrs": lrs, "drift": drift, "slopes": slopes}


# -- what a step moves, and the measured order of each drift -------------------------------------
# The weights a step moves, the first-order prediction of out1's drift, and the order of a
# drift in lr, measured by a fitted log-log slope.

def weight_changes(setup="seed", rules=("naive", "masked", "freeze", "project"), lr=None,
                   G=G_QUESTION):
    """|change| of every parameter after one step of each rule, from the same start.

    The change is measured on the network itself (theta after minus theta before), so an
    entry is 0.0 exactly when the step left that parameter's bits alone.

    Returns a dict: ``setup``, ``sizes``, ``lr``, and per rule a dict with ``delta`` (a dict
    like params of |theta_after - theta_before|) and ``drift_batch`` (max |delta out1| on X).
    """
    net0, X, _ = SETUPS[setup]()
    lr = LR[setup] if lr is None else lr
    ref = net0(X)[:, 0]
    out = {"setup": setup, "sizes": list(net0.sizes), "lr": lr}
    for rule in rules:
        net = take_step(net0.copy(), rule, X, G, lr, ref)
        out[rule] = {"delta": {k: np.abs(net.params[k] - net0.params[k]) for k in net0.params},
                     "drift_batch": float(np.max(np.abs(net(X)[:, 0] - ref)))}
    return out


def first_order_drift(setup="visible", lrs=None, G=G_QUESTION):
    """out1's change after one naive step, against its first-order prediction.

    To first order, a step theta <- theta - lr g with g = J_1^T G_1 + J_2^T G_2 moves out1 by

        delta out1 = -lr J_1 g = -lr (K_11 G_1 + K_12 G_2),      K_ij = J_i J_j^T (n, n),

    and with the question's G (G_1 = 0) only the cross-output kernel K_12 is left.

    Returns a dict: ``lrs`` (m,), ``actual`` and ``predicted`` (m, n), and ``rel_error`` (m,),
    max |actual - predicted| / max |actual| per lr: O(lr), the size of the neglected term.
    """
    from .jacobian import tangent_kernel_by_layer
    net, X, _ = SETUPS[setup]()
    lrs = np.logspace(-5, -1, 5) if lrs is None else np.asarray(lrs, dtype=float)
    G = np.broadcast_to(np.asarray(G, dtype=float), (X.shape[0], net.sizes[-1]))
    K11 = tangent_kernel_by_layer(net, X, 0, 0)["total"]
    K12 = tangent_kernel_by_layer(net, X, 0, 1)["total"]
    g = fixes.naive(net, X, G)
    out1 = net(X)[:, 0]
    actual = np.array([net.copy().step(g, lr)(X)[:, 0] - out1 for lr in lrs])
    predicted = -lrs[:, None] * (K11 @ G[:, 0] + K12 @ G[:, 1])[None, :]
    rel_error = np.max(np.abs(actual - predicted), axis=1) / np.max(np.abs(actual), axis=1)
    return {"setup": setup, "lrs": lrs, "actual": actual, "predicted": predicted,
            "rel_error": rel_error}


#: Below this, a drift of out1 (whose values are ~0.05 to ~3 here) is float64 round-off; it is
#: also ``fixes.restore``'s default tolerance.
ROUNDOFF = 1e-12


def loglog_slope(lrs, values, max_lr=None):
    """The slope k of log(values) = k log(lr) + c, fitted by least squares over lr <= max_lr.

    A drift that is O(lr^k) at small lr has slope k there; fit where the asymptote holds.
    """
    lrs, values = np.asarray(lrs, dtype=float), np.asarray(values, dtype=float)
    use = lrs <= (np.inf if max_lr is None else max_lr)
    if use.sum() < 2 or np.any(values[use] <= 0.0):
        raise ValueError(f"values: expected at least two positive values with lr <= {max_lr}, "
                         f"got {values[use]}")
    return float(np.polyfit(np.log(lrs[use]), np.log(values[use]), 1)[0])


def drift_order(lrs, drift, max_lr=1e-3, roundoff=ROUNDOFF):
    """How a drift scales with lr, as measured: ("exactly 0", None), ("round-off", None) when
    every value is <= ``roundoff``, or ("O(lr^k)", slope) with k the rounded fitted slope."""
    drift = np.asarray(drift, dtype=float)
    if np.all(drift == 0.0):
        return "exactly 0", None
    if np.max(drift) <= roundoff:
        return "round-off", None
    slope = loglog_slope(lrs, drift, max_lr)
    k = int(round(slope))
    return ("O(lr)" if k == 1 else f"O(lr^{k})"), slope


#: The step sizes of ``measured_guarantees``: up to the visible setup's lr (where round-off
#: first shows in the rules that hold out1 exactly in exact arithmetic); slopes are fitted
#: over lr <= 1e-3, where the drifts are in their asymptotic regime.
GUARANTEE_LRS = np.logspace(-5, -2, 7)


def measured_guarantees(setups=("seed", "visible"), rules=None, lrs=None):
    """The order of out1's one-step drift in lr, on the batch and on unseen inputs, measured
    (``drift_order``) for every rule on every setup: the guarantees table, from real runs.

    Returns a dict (setup, rule) -> {"batch": (label, slope), "unseen": (label, slope)}.
    """
    lrs = GUARANTEE_LRS if lrs is None else np.asarray(lrs, dtype=float)
    out = {}
    for setup in setups:
        res = one_step(setup, rules=rules, lrs=lrs)
        for rule in (list(DIRECTIONS) if rules is None else rules):
            out[(setup, rule)] = {where: drift_order(lrs, res[rule][f"drift_{where}"])
                                  for where in ("batch", "unseen")}
    return out


def format_guarantees(measured):
    """``measured_guarantees`` as a table: one row per rule, batch and unseen per setup."""
    setups = list(dict.fromkeys(s for s, _ in measured))
    rules = list(dict.fromkeys(r for _, r in measured))

    def cell(label, slope):
        return label if slope is None else f"{label} ({slope:.2f})"

    head = f"{'rule':16}" + "".join(f" | {s + ' batch':>20} {s + ' unseen':>20}" for s in setups)
    lines = [head, "-" * len(head)]
    for rule in rules:
        lines.append(f"{rule:16}" + "".join(
            f" | {cell(*measured[(s, rule)]['batch']):>20} {cell(*measured[(s, rule)]['unseen']):>20}"
            for s in setups))
    return "\n".join(lines)
