"""Exercise 03 (after tutorial 04): freeze, the var_list recipe, and a head of out2's own.

Expected time: 25 minutes.

TensorFlow's minimize(loss, var_list=[W2, b2]) updates only the listed variables. Write it
as a direction rule, then the stricter version that also leaves out1's own output weights
alone, which holds out1 bit for bit whatever G is.

    python -m mlp_ref check tutorials/exercises/03_freeze.py
"""
import numpy as np

EXERCISE = "03_freeze"

#: Predict, then run: after a step along freeze(..., ["W2", "b2"]) at lr 10, the largest
#: change of out1 on 256 unseen inputs: a number.
PREDICT_FREEZE_DRIFT = None

#: How many of the question's network's 26 parameters does that step train? A number.
PREDICT_TRAINABLE_COUNT = None


def freeze(net, X, G, trainable):
    """The var_list recipe: the gradient, with every parameter not in ``trainable`` zeroed.

    Parameters
    ----------
    net : mlp_ref.MLP
    X : ndarray, shape (n, d)
    G : ndarray, shape (n, K) or (K,)     dL/dout
    trainable : list of str               parameter names, e.g. ["W2", "b2"]

    Returns
    -------
    dict like net.params, every key, each a new array of that parameter's shape: the gradient
    net.gradient(X, G)[k] for k in trainable, exactly 0.0 everywhere else. net is not changed.
    """
    raise NotImplementedError


def own_head(net, X, G, hold=0):
    """Train only the output weights and biases of the outputs other than ``hold``.

    Parameters
    ----------
    net : mlp_ref.MLP                     L layers, K outputs
    X : ndarray, shape (n, d)
    G : ndarray, shape (n, K) or (K,)     dL/dout; its column ``hold`` need not be 0
    hold : int                            the output column to hold (0 is out1)

    Returns
    -------
    dict like net.params: the gradient of W_L and b_L (the output layer, f"W{net.depth}" and
    f"b{net.depth}") with column ``hold`` set to 0.0, and 0.0 for every other parameter.
    A step along it changes nothing that output ``hold`` reads, on any input, at any lr.
    """
    raise NotImplementedError
