"""out1's drift and out2's gain under each rule: one step over a range of lrs (also taken by
other code, a framework, beside the reference), many steps, and a slice of input space.

Every run starts from a setup (``setups.SETUPS``: the seed's network, or the visible one),
takes steps with one rule after another (``rules``), and reports how far out1 drifted (max
|delta out1|, on the batch and on unseen probe inputs) and how much out2 gained (its mean
change on the batch). The network handed in is never modified.
"""
from __future__ import annotations

import numpy as np

from ..data import probe_inputs
from ..setups import G_QUESTION, LR, N_PROBE, OUT1, SETUPS
from . import fits, rules as rules_


def effect(start, net, X, P):
    """(max |d out1| on X, max |d out1| on P, mean d out2 on X) from the start to net.

    start : (net0(X), net0(P)), the outputs before the first step
    """
    before_X, before_P = start
    after_X = net(X)
    return (float(np.max(np.abs(after_X[:, OUT1] - before_X[:, OUT1]))),
            float(np.max(np.abs(net(P)[:, OUT1] - before_P[:, OUT1]))),
            float(np.mean(after_X[:, 1] - before_X[:, 1])))


def _columns(rows):
    drift_batch, drift_unseen, gain = (np.array(col) for col in zip(*rows))
    return {"drift_batch": drift_batch, "drift_unseen": drift_unseen, "gain": gain}


def one_step(setup="visible", rules=None, lrs=None, G=G_QUESTION, n_probe=N_PROBE,
             slope_max_lr=None):
    """One step of each rule from the same start, over a range of learning rates.

    rules : names or ``rules.Rule`` objects (default: every rule of ``rules.RULES``)
    slope_max_lr : if given, also measure each drift's order over lr <= slope_max_lr

    Returns a dict with ``lrs`` (m,), ``setup``, ``n_probe``, ``rules`` (their names), and per
    rule name a dict of arrays (m,): ``drift_batch``, ``drift_unseen`` (max |delta out1|) and
    ``gain`` (mean delta out2); with ``slope_max_lr``, also ``slope_max_lr`` and ``orders``
    (see ``orders``).
    """
    net0, X, _ = SETUPS[setup]()
    P = probe_inputs(n_probe)
    lrs = np.logspace(-5, 0, 11) if lrs is None else np.asarray(lrs, dtype=float)
    start = net0(X), net0(P)
    ref = start[0][:, OUT1]
    rules = rules_.resolve(rules)
    out = {"lrs": lrs, "setup": setup, "n_probe": n_probe, "rules": [rule.name for rule in rules]}
    for rule in rules:
        out[rule.name] = _columns([effect(start, rule.step(net0.copy(), X, G, lr, ref), X, P)
                                   for lr in lrs])
    if slope_max_lr is not None:
        out.update(slope_max_lr=slope_max_lr, orders=orders(out, slope_max_lr))
    return out


def orders(result, max_lr=1e-3):
    """The measured order of each rule's one-step drift in ``one_step``'s result:
    {rule: {"batch": (label, slope), "unseen": (label, slope)}} (``fits.drift_order``)."""
    return {rule: {where: fits.drift_order(result["lrs"], result[rule][f"drift_{where}"], max_lr)
                   for where in ("batch", "unseen")}
            for rule in result["rules"]}


def one_step_beside(others, setup, lrs, rules=("naive", "project"), G=G_QUESTION, slope_max_lr=1e-3):
    """``one_step``'s drift on the batch, measured again on steps that other code takes (a
    framework's fixes, say), from the same weights: each beside the reference's.

    others : {label: out1_after}, ``out1_after(rule, net, X, G, lrs)`` -> array (m, n): out1 on
             X after ONE step of the rule named ``rule`` from ``net``'s weights, one row per lr
             (each from the start). The code behind it is the caller's: mlp_ref imports none.
    lrs : (m,) step sizes (tutorial 07: ``table.GUARANTEE_LRS``, 1e-5 to 1e-2)
    rules : names of rules that drift (an exact 0 has no slope), known to the reference
            (``rules.RULES``) and to the others

    Returns a dict with ``lrs``, ``setup``, ``rules``, ``slope_max_lr``, ``who`` (["mlp_ref",
    *others]), and per who: ``drift`` {rule: max |delta out1| on the batch (m,)}, ``slopes``
    {rule: the fitted log-log slope over lr <= slope_max_lr} and, for the others,
    ``rel_error`` {rule: max over lrs of |drift - mlp_ref's| / mlp_ref's}.
    """
    lrs = np.asarray(lrs, dtype=float)
    rules = list(rules)
    ref = one_step(setup, rules=rules, lrs=lrs, G=G)
    net, X, _ = SETUPS[setup]()
    out1 = net(X)[:, OUT1]
    drifts = {"mlp_ref": {rule: ref[rule]["drift_batch"] for rule in rules}}
    for label, out1_after in others.items():
        drifts[label] = {rule: np.max(np.abs(np.asarray(out1_after(rule, net.copy(), X, G, lrs))
                                             - out1), axis=1) for rule in rules}
    mine = drifts["mlp_ref"]
    return {"lrs": lrs, "setup": setup, "rules": rules, "slope_max_lr": slope_max_lr,
            "who": list(drifts), "drift": drifts,
            "slopes": {who: {rule: fits.loglog_slope(lrs, d[rule], slope_max_lr) for rule in rules}
                       for who, d in drifts.items()},
            "rel_error": {who: {rule: float(np.max(np.abs(d[rule] - mine[rule]) / mine[rule]))
                                for rule in rules} for who, d in drifts.items() if who != "mlp_ref"}}


def trajectories(setup="visible", rules=None, steps=200, lr=None, G=G_QUESTION, n_probe=N_PROBE):
    """Many steps of each rule; the cumulative effect after every step.

    Returns a dict with ``steps`` (steps + 1,), ``setup``, ``lr``, ``n_probe``, ``rules``, and
    per rule a
    dict of arrays (steps + 1,): ``drift_batch``, ``drift_unseen`` (max |out1 - out1 at the
    start|) and ``gain`` (mean out2 - out2 at the start); entry 0 is the start (all zero).
    """
    net0, X, _ = SETUPS[setup]()
    P = probe_inputs(n_probe)
    lr = LR[setup] if lr is None else lr
    start = net0(X), net0(P)
    ref = start[0][:, OUT1]
    rules = rules_.resolve(rules)
    out = {"steps": np.arange(steps + 1), "setup": setup, "lr": lr, "n_probe": n_probe,
           "rules": [rule.name for rule in rules]}
    for rule in rules:
        net = net0.copy()
        rows = [(0.0, 0.0, 0.0)]
        for _ in range(steps):
            rule.step(net, X, G, lr, ref)
            rows.append(effect(start, net, X, P))
        out[rule.name] = _columns(rows)
    return out


def input_slice(n=41, fixed=0.5):
    """A 2-D slice of the input cube: x1, x2 on an n x n grid over [0, 1], x3 = fixed.

    Returns (x1 (n,), x2 (n,), inputs (n*n, 3)), inputs in row-major order of (x2, x1).
    """
    x1 = np.linspace(0.0, 1.0, n)
    x2 = np.linspace(0.0, 1.0, n)
    g1, g2 = np.meshgrid(x1, x2)
    return x1, x2, np.stack([g1.ravel(), g2.ravel(), np.full(g1.size, fixed)], axis=1)


def drift_over_slice(setup="visible", rules=("project", "freeze", "span"), lr=None, steps=1,
                     n=41, fixed=0.5, G=G_QUESTION):
    """|delta out1| over a 2-D slice of input space (x3 = ``fixed``) after ``steps`` steps of
    each rule, and at the batch's own inputs, where the rules hold it.

    Returns dict: ``x1``, ``x2`` (n,), ``fixed``, ``rules``, ``batch`` (the batch's (x1, x2)),
    ``batch_x3`` (the batch's x3: no batch input need lie on the slice), ``batch_off_slice``
    (min |x3 - fixed| over the batch), per rule an (n, n) array of |delta out1| on the slice
    (rows x2, columns x1), and ``at_batch``: per rule the (m,) |delta out1| at the batch's
    inputs themselves (their own x3).
    """
    net0, X, _ = SETUPS[setup]()
    lr = LR[setup] if lr is None else lr
    x1, x2, grid = input_slice(n, fixed)
    ref = net0(X)[:, OUT1]
    out = {"x1": x1, "x2": x2, "fixed": fixed, "batch": X[:, :2], "batch_x3": X[:, 2],
           "batch_off_slice": float(np.min(np.abs(X[:, 2] - fixed))),
           "lr": lr, "steps": steps, "setup": setup, "at_batch": {}}
    rules = rules_.resolve(rules)
    out["rules"] = [rule.name for rule in rules]
    for rule in rules:
        net = net0.copy()
        for _ in range(steps):
            rule.step(net, X, G, lr, ref)
        out[rule.name] = np.abs(net(grid)[:, OUT1] - net0(grid)[:, OUT1]).reshape(n, n)
        out["at_batch"][rule.name] = np.abs(net(X)[:, OUT1] - ref)
    return out
