"""Exercise 04 (after tutorial 05): null-space projection, dense and then without J.

Expected time: 50 minutes.

The projected direction D = g - J1^T (J1 J1^T)^+ J1 g removes from the gradient g whatever
moves out1 on the batch, to first order (J1 D = 0). Build J1 and project with np.linalg.pinv;
then compute the same D from the Gram matrix J1 J1^T, which needs only the layer inputs and
one backward pass, never J1 itself.

    python -m mlp_ref check tutorials/exercises/04_projection.py
"""
import numpy as np

from mlp_ref import jacobian

EXERCISE = "04_projection"

#: Predict, then run: out1's drift on the batch after one projected step grows like lr^p:
#: p = 1 or 2?
PREDICT_DRIFT_ORDER_ON_BATCH = None

#: And on 256 unseen inputs, off the batch: p = 1 or 2?
PREDICT_DRIFT_ORDER_OFF_BATCH = None


def jacobian_out1(net, X):
    """J1, the Jacobian of out1 (output column 0) over the rows of X.

    Parameters
    ----------
    net : mlp_ref.MLP                 P parameters, K outputs
    X : ndarray, shape (n, d)

    Returns
    -------
    J1 : ndarray, shape (n, P)        row i = d out1(X[i]) / d theta, flattened in the order of
                                      jacobian.flatten: W1, b1, W2, b2, ..., each row-major.
    Row i is one backward pass: the gradient for sample i alone with G = [1, 0, ...].
    """
    raise NotImplementedError


def project_dense(net, X, G):
    """D = g - J1^T (J1 J1^T)^+ J1 g, with J1 from jacobian_out1 and np.linalg.pinv.

    Parameters
    ----------
    net : mlp_ref.MLP
    X : ndarray, shape (n, d)
    G : ndarray, shape (n, K) or (K,)     dL/dout

    Returns
    -------
    dict like net.params (jacobian.unflatten turns a flat vector back into one).
    """
    raise NotImplementedError


def out1_signals(net, X):
    """Given: the layer inputs A_l = a_{l-1} (n, n_{l-1}) and the signals S_l = dz_l (n, n_l)
    of out1, per layer l = 1 .. L: row i of S_l is d out1(X[i]) / d z_l(X[i])."""
    record = net.forward(X)
    e1 = np.zeros(net.sizes[-1])
    e1[0] = 1.0
    stages = net.backward(record, e1).stages
    return ({l: record.a[l - 1] for l in range(1, net.depth + 1)},
            {l: stages[f"dz{l}"] for l in range(1, net.depth + 1)})


def gram_out1(net, X):
    """J1 J1^T without building J1.

    Parameters
    ----------
    net : mlp_ref.MLP
    X : ndarray, shape (n, d)

    Returns
    -------
    ndarray, shape (n, n): sum over layers l of (S_l S_l^T) * (A_l A_l^T + 1), elementwise
    product, with A_l, S_l from out1_signals. (Row i of J1, in layer l, is outer(A_l[i], S_l[i])
    for W_l and S_l[i] for b_l; the "+ 1" is the bias's input.)
    """
    raise NotImplementedError


def project_gram(net, X, G):
    """The same D as project_dense, without building J1.

    Parameters
    ----------
    net : mlp_ref.MLP
    X : ndarray, shape (n, d)
    G : ndarray, shape (n, K) or (K,)

    Returns
    -------
    dict like net.params. Three steps, none of them (n, P):
    J1 g, shape (n,): row i is sum_l S_l[i] . (A_l[i] @ g_W_l + g_b_l);
    alpha = (J1 J1^T)^+ J1 g, shape (n,), with gram_out1;
    J1^T alpha is a gradient: net.gradient(X, G') with G'[:, 0] = alpha and 0 elsewhere.
    """
    raise NotImplementedError
