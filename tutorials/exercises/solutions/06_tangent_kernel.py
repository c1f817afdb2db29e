"""Exercise 06 (after tutorial 02): the cross-output tangent kernel, and where it flows.

Expected time: 30 minutes.

A naive step along G = [0, -1] moves out1 by -lr K12 G2 to first order, with K12 = J1 J2^T the
cross-output tangent kernel. Build it twice: from the two Jacobians, then layer by layer from
the signals and the layer inputs, and see which layer carries none of it.

    python -m mlp_ref check tutorials/exercises/06_tangent_kernel.py

Predict, then run: fill in the two PREDICT_ constants below before you write any code
(a number or a choice); the grader checks each against what the network does.
"""
import numpy as np

from mlp_ref import jacobian

EXERCISE = "06_tangent_kernel"

#: The largest |entry| of the output layer's share of K12 on the seed network: a number.
PREDICT_OUTPUT_LAYER_SHARE = 0.0

#: Out1's drift after one naive step at learning rate lr grows like lr^p: p = 1 or 2?
PREDICT_NAIVE_DRIFT_ORDER = 1


def jacobian_rows(net, X, k):
    """J_k, the Jacobian of output column k over the rows of X.

    Parameters
    ----------
    net : mlp_ref.MLP                 P parameters, K outputs
    X : ndarray, shape (n, d)
    k : int                           the output column, 0 <= k < K

    Returns
    -------
    ndarray, shape (n, P): row i = d out_k(X[i]) / d theta, flattened as jacobian.flatten does.
    """
    e = np.zeros(net.sizes[-1])
    e[k] = 1.0
    return np.array([jacobian.flatten(net.gradient(X[i:i + 1], e)) for i in range(len(X))])


def cross_kernel(net, X):
    """K12 = J1 J2^T, outputs 0 and 1.

    Parameters
    ----------
    net : mlp_ref.MLP                 at least 2 outputs
    X : ndarray, shape (n, d)

    Returns
    -------
    ndarray, shape (n, n): entry [a, b] = d out1(X[a])/d theta . d out2(X[b])/d theta.
    """
    return jacobian_rows(net, X, 0) @ jacobian_rows(net, X, 1).T


def output_signals(net, X, k):
    """Given: the layer inputs A_l = a_{l-1} (n, n_{l-1}) and the signals S_l = dz_l (n, n_l) of
    output k, per layer l = 1 .. L: row i of S_l is d out_k(X[i]) / d z_l(X[i])."""
    record = net.forward(X)
    e = np.zeros(net.sizes[-1])
    e[k] = 1.0
    stages = net.backward(record, e).stages
    return ({l: record.a[l - 1] for l in range(1, net.depth + 1)},
            {l: stages[f"dz{l}"] for l in range(1, net.depth + 1)})


def kernel_by_layer(net, X):
    """K12 split into one share per layer, without building a Jacobian.

    Parameters
    ----------
    net : mlp_ref.MLP                 L layers, at least 2 outputs
    X : ndarray, shape (n, d)

    Returns
    -------
    dict: layer l (int, 1 .. L) -> ndarray (n, n), share_l = (S1_l S2_l^T) * (A_l A_l^T + 1)
    (elementwise *), with S1, S2 the signals of outputs 0 and 1 from output_signals; and
    "total" -> their sum, K12.
    """
    A, S1 = output_signals(net, X, 0)
    _, S2 = output_signals(net, X, 1)
    shares = {l: (S1[l] @ S2[l].T) * (A[l] @ A[l].T + 1.0) for l in A}
    shares["total"] = sum(shares[l] for l in A)
    return shares
