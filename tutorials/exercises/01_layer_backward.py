"""Exercise 01 (after tutorial 01): the backward stages of one layer.

Expected time: 30 minutes.

A layer computes z = a_prev @ W + b and a = f(z). Its backward pass turns da = dL/da, the
gradient arriving from above, into the four stages of the tutorial: dz, dW, db and da_prev.
Write them, then chain two layers into the backward pass of the question's 3-4-2 network.

Check your work (it prints PASS, or the stage, the worst entry, yours and ours, and a hint):

    python -m mlp_ref check tutorials/exercises/01_layer_backward.py
"""
import numpy as np

EXERCISE = "01_layer_backward"

#: Predict, then run (before you write any code): with G = [0, -1] on the question's network,
#: the largest |entry| of dW2[:, 0] (out1's output weights): a number.
PREDICT_DW2_COLUMN0 = None

#: And is dW1 (the shared hidden layer's weights) all zero too? True or False.
PREDICT_DW1_IS_ZERO = None


def sigmoid(z):
    """Given: the logistic function 1 / (1 + exp(-z)), elementwise. z: any shape."""
    return 1.0 / (1.0 + np.exp(-z))


def sigmoid_backward(da, z):
    """The stage dz = dL/dz of a sigmoid layer a = sigmoid(z).

    Parameters
    ----------
    da : ndarray, shape (n, m)     dL/da, arriving from the layer above
    z : ndarray, shape (n, m)      the pre-activation of the forward pass

    Returns
    -------
    dz : ndarray, shape (n, m)     da * sigmoid'(z), where sigmoid'(z) = s (1 - s), s = sigmoid(z)
    """
    raise NotImplementedError


def affine_backward(dz, a_prev, W):
    """The stages dW, db and da_prev of z = a_prev @ W + b.

    Parameters
    ----------
    dz : ndarray, shape (n, m)       dL/dz
    a_prev : ndarray, shape (n, d)   the layer's input in the forward pass
    W : ndarray, shape (d, m)        the layer's weights

    Returns
    -------
    dW : ndarray, shape (d, m)       dL/dW, summed over the n rows
    db : ndarray, shape (m,)         dL/db, summed over the n rows
    da_prev : ndarray, shape (n, d)  dL/da_prev, for the layer below
    """
    raise NotImplementedError


def two_layer_backward(X, params, G):
    """Every backward stage of out = sigmoid(X @ W1 + b1) @ W2 + b2 (the question's network).

    Parameters
    ----------
    X : ndarray, shape (n, d)        the inputs
    params : dict                    "W1" (d, h), "b1" (h,), "W2" (h, K), "b2" (K,)
    G : ndarray, shape (n, K)        dL/dout

    Returns
    -------
    dict with the stages of ``net.backward``, in its order and under its names:
    "dout" (n, K), "dz2" (n, K), "dW2" (h, K), "db2" (K,), "da1" (n, h),
    "dz1" (n, h), "dW1" (d, h), "db1" (h,), "da0" (n, d).
    Run the forward pass first (keep z1 and a1); use your two functions above.
    """
    raise NotImplementedError
