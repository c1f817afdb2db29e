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


# -- teaching figures (phase 1) --
# Results for the figures of plots.py that do not need mlp_ref.fixes: the stages of backprop,
# the entries that the two pure-gradient fixes zero, and a two-parameter picture of projection.

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
