"""Projection in a picture small enough to draw: a two-parameter MLP, its naive step, the
projected step along the tangent of out1's level set, and the restoring steps back onto it.
"""
from __future__ import annotations

import numpy as np

from .fits import loglog_slope


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


def projection_geometry(theta0=(0.0, 0.6), lr=1.0, lrs=None, toy=None, n_restore=6,
                        slope_max_lr=0.1, grid=241):
    """The naive step, its projection and the restoring steps on ``TwoParamToy``.

    With G = [0, -1] the naive direction is D = G . dout/dtheta = -grad out2, and the step is
    theta0 - lr * D. Projection removes the component along u = grad out1:
    D_p = D - u (u . D) / |u|^2, so the projected step moves along the tangent of out1's level
    set and leaves it by O(lr^2), because the level set curves. The restoring (Gauss-Newton)
    step theta <- theta - u (out1(theta) - ref) / |u|^2, with u = grad out1 at theta, repeated,
    brings theta back onto the level set.

    Returns a dict of arrays: the points theta0, naive, projected, the restore path (k, 2),
    the tangent unit vector, ref = out1(theta0), ``changes`` (name -> out(end) - out(theta0)
    for the naive, projected and restored end points); and for the drift panel ``lrs`` with
    the drift |out1 - ref| after the naive, the projected and the projected+restored steps,
    and ``slopes``, the log-log slopes of the naive and projected drifts fitted over
    lr <= slope_max_lr. ``theta1``, ``theta2`` (grid,) and ``out1`` (grid, grid) sample out1
    over a square around every point drawn (a quarter of their spread as margin).
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
    path = restore(projected)
    drift = {"naive": [], "project": [], "project+restore": []}
    for eta in lrs:
        drift["naive"].append(abs(toy.outputs(theta0 - eta * D)[0] - ref))
        drift["project"].append(abs(toy.outputs(theta0 - eta * D_proj)[0] - ref))
        drift["project+restore"].append(abs(toy.outputs(restore(theta0 - eta * D_proj)[-1])[0] - ref))
    drift = {k: np.array(v) for k, v in drift.items()}
    pts = np.vstack([theta0, theta0 - lr * D, projected, path])
    lo, hi = pts.min(axis=0), pts.max(axis=0)
    pad = 0.25 * (hi - lo).max()
    theta1 = np.linspace(lo[0] - pad, hi[0] + pad, grid)
    theta2 = np.linspace(lo[1] - pad, hi[1] + pad, grid)
    T1, T2 = np.meshgrid(theta1, theta2)
    ends = {"naive": theta0 - lr * D, "project": projected, "project+restore": path[-1]}
    return {"toy": toy, "theta0": theta0, "lr": lr, "ref": ref, "grad_out1": u, "grad_out2": w,
            "naive": ends["naive"], "projected": projected, "restore_path": path,
            "tangent": D_proj / np.linalg.norm(D_proj),
            "changes": {k: toy.outputs(end) - toy.outputs(theta0) for k, end in ends.items()},
            "theta1": theta1, "theta2": theta2,
            "out1": toy.outputs(np.stack([T1, T2], axis=-1))[..., 0],
            "lrs": lrs, "drift": drift, "slope_max_lr": slope_max_lr,
            "slopes": {k: loglog_slope(lrs, drift[k], slope_max_lr) for k in ("naive", "project")}}
