"""Layer splitting: what out2 can still learn when out1 is held by freezing (``var_list``),
separate output heads, or two towers, against projection + restore and unconstrained training.
"""
from __future__ import annotations

import numpy as np

from .. import fixes
from ..architectures import SplitHeads, TwoTower
from ..data import probe_inputs, seed_data
from ..losses import mse
from ..setups import N_PROBE, SETUPS

#: The new function out2 is taught in ``out2_capacity``.
NEW_TARGET = "x1 x2 - x3"


def out2_capacity(n=32, steps=200, lr=0.05, seed=5):
    """Teach out2 a *new* function while holding out1, with each kind of layer splitting.

    Start from the visible network; the new target for out2 is y2' = x1 x2 - x3 on n fresh
    inputs (out1 must keep its values there). Each variant runs ``steps`` steps of
    gradient descent on the MSE of out2 alone:

        naive            every parameter of the MLP (out1 is free to drift)
        freeze           the MLP's output layer only (var_list), = SplitHeads' head 1
        heads            SplitHeads.from_mlp, head 1 trained: the same function as freeze
        towers           TwoTower.from_mlp, all of tower 1 trained: a whole network for out2
        project+restore  every parameter, projected and restored to hold out1 on the n inputs

    Returns a dict: ``target``, ``n``, ``steps``, and per variant ``mse`` (steps + 1,) of out2
    against the new target, ``drift_batch`` and ``drift_unseen`` (final max |delta out1| on
    the n inputs and on probe inputs), ``n_moved`` (how many parameters changed) and
    ``n_params``.
    """
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

    def freeze(model, keys):
        return lambda: fixes.freeze(model, X, G_for(model), trainable=keys)

    net, net_f, net_p = net0.copy(), net0.copy(), net0.copy()
    heads, towers = SplitHeads.from_mlp(net0), TwoTower.from_mlp(net0)
    variants = {
        "naive": (net, lambda: fixes.naive(net, X, G_for(net)), None),
        "freeze": (net_f, freeze(net_f, [f"W{L}", f"b{L}"]), None),
        "heads": (heads, freeze(heads, heads.head_keys(1)), None),
        "towers": (towers, freeze(towers, towers.tower_keys(1)), None),
        "project+restore": (
            net_p, lambda: fixes.nullspace(net_p, fixes.naive(net_p, X, G_for(net_p)), X, keep=[0]),
            lambda: fixes.restore(net_p, X, ref)),
    }
    out = {"target": NEW_TARGET, "n": n, "steps": np.arange(steps + 1)}
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
