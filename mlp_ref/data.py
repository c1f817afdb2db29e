"""The seed's toy data set, and unseen probe inputs from the same distribution.

The accepted answer builds (x, y) pairs with x uniform in [0, 1)^3 and

    y1 = x1 + x2 + x3,        y2 = x1^2 + x2^2 + x3^2,

plus 0.01 * uniform[0, 1) noise on both targets, with n = 8 samples. We draw the same
things in the same order from ``np.random.default_rng(seed)``, so a seed fixes the bits.
"""
from __future__ import annotations

import numpy as np

from . import _checks

INPUT_DIM = 3


def seed_data(n=8, seed=0, noise=0.01):
    """The answer's toy set.

    Returns
    -------
    X : ndarray, shape (n, 3)       uniform in [0, 1)
    Y : ndarray, shape (n, 2)       columns x1+x2+x3 and x1^2+x2^2+x3^2, plus noise
    """
    n = _checks.positive_int("n", n)
    noise = _checks.real("noise", noise, low=0.0)
    rng = np.random.default_rng(_checks.seed("seed", seed))
    X = rng.random((n, INPUT_DIM))
    Y = np.zeros((n, 2))
    Y[:, 0] += X.sum(axis=1)
    Y[:, 1] += (X ** 2).sum(axis=1)
    Y += noise * rng.random((n, 2))
    return X, Y


def probe_inputs(n=256, seed=1):
    """Unseen inputs from the same distribution as ``seed_data``'s X: uniform in [0, 1)^3.

    The default seed differs from ``seed_data``'s, so the probes are not the batch.
    """
    n = _checks.positive_int("n", n)
    return np.random.default_rng(_checks.seed("seed", seed)).random((n, INPUT_DIM))
