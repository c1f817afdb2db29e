"""Exercise 07 (after tutorial 05, section 6): J1 D and J1^T alpha without J1.

Expected time: 40 minutes.

Row i of J1, in layer l, is outer(A_l[i], S_l[i]) for W_l and S_l[i] for b_l. So J1 D and
J1^T alpha, the two products a projection needs, factor per layer: neither needs the (n, P)
Jacobian, only the layer inputs A_l and the signals S_l of out1, (n, n_l) each.

    python -m mlp_ref check tutorials/exercises/07_gram_trick.py

Predict, then run: fill in the PREDICT_ constants before you write any code.
"""
import numpy as np

EXERCISE = "07_gram_trick"

#: For the visible network (a 3-16-16-2 MLP) and its 64-row batch, which holds more numbers:
#: the dense J1 or the Gram J1 J1^T? "dense" or "gram".
PREDICT_LARGER = "dense"

#: For random alpha (n,) and D (like params): alpha . (J1 D) - (J1^T alpha) . D, relative to
#: |alpha . (J1 D)|, is about 0 (round-off) or about 1? A number.
PREDICT_ADJOINT_GAP = 0.0


def out1_signals(net, X):
    """Given: the layer inputs A_l = a_{l-1} (n, n_{l-1}) and the signals S_l = dz_l (n, n_l)
    of out1, per layer l = 1 .. L: row i of S_l is d out1(X[i]) / d z_l(X[i])."""
    record = net.forward(X)
    e1 = np.zeros(net.sizes[-1])
    e1[0] = 1.0
    stages = net.backward(record, e1).stages
    return ({l: record.a[l - 1] for l in range(1, net.depth + 1)},
            {l: stages[f"dz{l}"] for l in range(1, net.depth + 1)})


def jvp_out1(net, X, D):
    """J1 D: how much a step along D moves out1 on each row of X, to first order.

    Parameters
    ----------
    net : mlp_ref.MLP
    X : ndarray, shape (n, d)
    D : dict like net.params          "W1" (d, h1), "b1" (h1,), ...

    Returns
    -------
    ndarray, shape (n,): row i = sum over l of S_l[i] . (A_l[i] @ D["W_l"] + D["b_l"]).
    """
    A, S = out1_signals(net, X)
    return sum(np.sum(S[l] * (A[l] @ D[f"W{l}"] + D[f"b{l}"]), axis=1) for l in A)


def vjp_out1(net, X, alpha):
    """J1^T alpha, as a dict like net.params.

    Parameters
    ----------
    net : mlp_ref.MLP
    X : ndarray, shape (n, d)
    alpha : ndarray, shape (n,)      one weight per row of X

    Returns
    -------
    dict like net.params: per layer, "W_l" = A_l^T (alpha[:, None] * S_l), shape (n_{l-1}, n_l),
    and "b_l" = the column sums of alpha[:, None] * S_l, shape (n_l,).
    """
    A, S = out1_signals(net, X)
    D = {}
    for l in A:
        weighted = alpha[:, None] * S[l]
        D[f"W{l}"] = A[l].T @ weighted
        D[f"b{l}"] = weighted.sum(axis=0)
    return D
