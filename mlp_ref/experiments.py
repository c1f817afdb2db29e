"""Measurements: plain NumPy results for tables, tutorials and plots (no matplotlib here)."""
from __future__ import annotations

import numpy as np

from .setups import G_QUESTION


def naive_step_effect(net, X, G=G_QUESTION, lr=0.1):
    """Outputs on X before and after one plain gradient step theta <- theta - lr * g.

    Returns a dict of arrays: ``before`` and ``after`` (n, K), and ``delta`` = after - before.
    The network is not modified.
    """
    before = net(X)
    stepped = net.copy().step(net.gradient(X, G), lr)
    after = stepped(X)
    return {"before": before, "after": after, "delta": after - before, "lr": lr}
