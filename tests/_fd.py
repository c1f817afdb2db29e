"""Finite-difference oracles for the tests, independent of the code under test.

They use only ``net.params`` and the public forward pass, in extended precision
(np.longdouble) so their roundoff stays far below the float64 answers they judge.
"""
import numpy as np


def fd_jacobian(net, X, keep=(0,), h=1e-6):
    """J of outputs ``keep`` on X by centred differences, shape (n q, P), rows sample-major,
    columns in params order (row-major within each array)."""
    ext = net.copy()
    ext.params = {k: v.astype(np.longdouble) for k, v in ext.params.items()}
    X = np.asarray(X, dtype=np.longdouble)
    cols = []
    for key in ext.params:
        p = ext.params[key]
        for idx in np.ndindex(*p.shape):
            old = p[idx]
            p[idx] = old + h
            plus = ext.forward_from(1, X)[:, list(keep)]
            p[idx] = old - h
            minus = ext.forward_from(1, X)[:, list(keep)]
            p[idx] = old
            cols.append(((plus - minus) / (2 * h)).reshape(-1))
    return np.stack(cols, axis=1).astype(np.float64)
