"""The question itself: what one plain step does, where out1's drift comes from, and what each
fix touches.

* ``naive_step_effect``: out1 and out2 before and after one gradient step with G = [0, -1];
* ``backprop_stages``: every stage of backprop, its formula, and the entries a fix zeroes;
* ``tangent_kernel``: the cross-output kernel K_12 = J_1 J_2^T split by layer;
* ``first_order_drift``: out1's change against its first-order prediction -lr K_12 G_2;
* ``weight_changes``: which weights one step of each rule moves.
"""
from __future__ import annotations

import numpy as np

from .. import fixes
from ..jacobian import tangent_kernel_by_layer
from ..setups import G_QUESTION, LR, SETUPS
from . import rules as rules_


def naive_step_effect(net, X, G=G_QUESTION, lr=0.1):
    """Outputs on X before and after one plain gradient step theta <- theta - lr * g.

    Returns a dict: ``before`` and ``after`` (n, K), ``delta`` = after - before, ``lr``, and
    ``ratio``, the median over samples of |delta out2| / |delta out1|. The network is not
    modified.
    """
    before = net(X)
    after = net.copy().step(fixes.naive(net, X, G), lr)(X)
    delta = after - before
    return {"before": before, "after": after, "delta": delta, "lr": lr,
            "ratio": float(np.median(np.abs(delta[:, 1]) / np.abs(delta[:, 0])))}


# -- the stages of backprop -------------------------------------------------------------------
def stage_formula(name, activations):
    """The formula that computes stage ``name`` of a network with these activations (layers
    1 .. L), as NumPy code: "a0 @ W1 + b1", "sigmoid(z1)", "da1 * sigmoid'(z1)", "a1.T @ dz2",
    "dz2.sum(axis=0)", "dz2 @ W2.T"; a0 is "X" and dout is "G"."""
    if name in ("a0", "dout"):
        return {"a0": "X", "dout": "G"}[name]
    kind, l = name.rstrip("0123456789"), int(name.lstrip("adzWb"))
    if kind == "da":
        return f"dz{l + 1} @ W{l + 1}.T"
    act = activations[l - 1]
    da = "dout" if l == len(activations) else f"da{l}"
    return {"z": f"a{l - 1} @ W{l} + b{l}", "a": f"{act}(z{l})",
            "dz": da if act == "identity" else f"{da} * {act}'(z{l})",
            "dW": f"a{l - 1}.T @ dz{l}", "db": f"dz{l}.sum(axis=0)"}[kind]


def probe_G(n, K):
    """An output gradient (n, K) with no zero entry: 1, 2, 3, ... row by row."""
    return 1.0 + np.arange(n * K, dtype=float).reshape(n, K)


def zeroed_by_rule(rule, net, X):
    """Which parameter-gradient entries a direction rule forces to zero.

    ``rule(net, X, G)`` returns a direction D like params (any of ``mlp_ref.fixes``, with its
    extra arguments bound, e.g. ``lambda net, X, G: fixes.freeze(net, X, G, ["W2", "b2"])``).
    It is called with a G that has no zero entry, so a zero in D is the rule's doing, not G's.
    Returns {"dW1": bool array, ...} for the parameters with at least one zeroed entry.
    """
    D = rule(net, X, probe_G(len(X), net.sizes[-1]))
    return {f"d{k}": D[k] == 0.0 for k in net.params if np.any(D[k] == 0.0)}


def backprop_stages(net, X, G=G_QUESTION, mask=rules_.MASK, trainable=("W2", "b2")):
    """Every forward and backward stage of ``net`` on X for G, and which entries two fixes zero.

    Returns a dict:

    ``forward``   name -> array, a0, z1, a1, ..., in forward order
    ``backward``  name -> array, dout, dzL, dWL, dbL, ..., da0, in backward order
    ``formulas``  name -> the formula of every stage (``stage_formula``)
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
    masked = net.backward(record, probe_G(*record.output.shape) * np.asarray(mask, dtype=float)).stages
    trainable = list(trainable)
    zeroed = {
        "masked": {name: masked[name] == 0.0 for name in masked if np.any(masked[name] == 0.0)},
        "freeze": zeroed_by_rule(lambda net, X, G: fixes.freeze(net, X, G, trainable), net, X),
    }
    stages = {**record.stages, **back.stages}
    return {"forward": record.stages, "backward": back.stages, "zeroed": zeroed,
            "formulas": {name: stage_formula(name, net.activations) for name in stages},
            "G": np.asarray(G, dtype=float), "mask": np.asarray(mask, dtype=float),
            "trainable": trainable}


# -- why out1 moves: the cross-output tangent kernel -------------------------------------------
def tangent_kernel(setup="visible"):
    """The cross-output kernel K_12 = J_1 J_2^T of the setup's batch, split by layer.

    Returns a dict: ``setup``, ``shares`` (layer l or "total" -> (n, n)), ``norms`` (layer ->
    Frobenius norm) and ``fractions`` (layer -> the sum of its entries over the total's).
    """
    net, X, _ = SETUPS[setup]()
    shares = tangent_kernel_by_layer(net, X, 0, 1)
    total = shares["total"].sum()
    layers = [l for l in shares if l != "total"]
    return {"setup": setup, "shares": shares,
            "norms": {l: float(np.linalg.norm(v)) for l, v in shares.items()},
            "fractions": {l: float(shares[l].sum() / total) for l in layers}}


def first_order_drift(setup="visible", lrs=None, G=G_QUESTION):
    """out1's change after one naive step, against its first-order prediction.

    To first order, a step theta <- theta - lr g with g = J_1^T G_1 + J_2^T G_2 moves out1 by

        delta out1 = -lr J_1 g = -lr (K_11 G_1 + K_12 G_2),      K_ij = J_i J_j^T (n, n),

    and with the question's G (G_1 = 0) only the cross-output kernel K_12 is left.

    Returns a dict: ``lrs`` (m,), ``actual`` and ``predicted`` (m, n), and ``rel_error`` (m,),
    max |actual - predicted| / max |actual| per lr: O(lr), the size of the neglected term.
    """
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


# -- what one step of each fix moves -----------------------------------------------------------
def weight_changes(setup="seed", rules=("naive", "masked", "freeze", "project"), lr=None,
                   G=G_QUESTION):
    """|change| of every parameter after one step of each rule, from the same start.

    The change is measured on the network itself (theta after minus theta before), so an
    entry is 0.0 exactly when the step left that parameter's bits alone.

    Returns a dict: ``setup``, ``sizes``, ``lr``, ``rules``, and per rule a dict with ``delta`` (a dict
    like params of |theta_after - theta_before|) and ``drift_batch`` (max |delta out1| on X).
    """
    net0, X, _ = SETUPS[setup]()
    lr = LR[setup] if lr is None else lr
    ref = net0(X)[:, 0]
    rules = rules_.resolve(rules)
    out = {"setup": setup, "sizes": list(net0.sizes), "lr": lr, "rules": [rule.name for rule in rules]}
    for rule in rules:
        net = rule.step(net0.copy(), X, G, lr, ref)
        out[rule.name] = {"delta": {k: np.abs(net.params[k] - net0.params[k]) for k in net0.params},
                          "drift_batch": float(np.max(np.abs(net(X)[:, 0] - ref)))}
    return out
