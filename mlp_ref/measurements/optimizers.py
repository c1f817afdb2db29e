"""The optimizer's role: Adam holding out1 by projection, in either order.

Adam rescales each coordinate of its step. Projecting the incoming gradient and letting Adam
rescale it leaves the null space of out1's Jacobian (the pitfall); projecting Adam's final
update keeps the step in it (see ``mlp_ref.optim``).
"""
from __future__ import annotations

import numpy as np

from .. import fixes
from ..optim import Adam
from ..setups import G_QUESTION, SETUPS
from .fits import loglog_slope

#: The two orders of projection and optimizer: order name -> ``Adam(order=...)``.
OPTIMIZER_ORDERS = {"project gradient, then Adam": "gradient", "Adam, then project update": "update"}


def _adam_holding_out1(net, X, lr, order):
    return Adam(lr, constraint=lambda U: fixes.nullspace(net, U, X, keep=[0]), order=order)


def optimizer_order(setup="visible", lrs=None, steps=100, lr=1e-3, G=G_QUESTION, slope_max_lr=1e-3):
    """Adam with a null-space projection in either order.

    Returns a dict with ``lrs`` (m,), ``lr``, ``steps``, ``setup``, ``slope_max_lr`` and, per
    order name (``OPTIMIZER_ORDERS``): ``one_step`` (m,) max |delta out1| on the batch after
    one Adam step at each lr, ``slope`` its log-log slope fitted over lr <= slope_max_lr (None
    with fewer than two such lrs), and ``drift``, ``gain`` (steps + 1,) over ``steps`` Adam
    steps at ``lr``.
    """
    net0, X, _ = SETUPS[setup]()
    lrs = np.logspace(-5, -2, 7) if lrs is None else np.asarray(lrs, dtype=float)
    out = {"lrs": lrs, "lr": lr, "steps": np.arange(steps + 1), "setup": setup,
           "slope_max_lr": slope_max_lr}
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
        one = np.array(one)
        slope = loglog_slope(lrs, one, slope_max_lr) if np.sum(lrs <= slope_max_lr) >= 2 else None
        out[name] = {"one_step": one, "slope": slope, "drift": np.array(drift), "gain": np.array(gain)}
    return out
