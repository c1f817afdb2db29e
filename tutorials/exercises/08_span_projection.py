"""Exercise 08 (after tutorial 08, section 6): span projection, layer by layer.

Expected time: 40 minutes.

GPM and Adam-NSCL hold a memory's outputs by keeping every layer's input on the memory where
it was: the update [dW_l; db_l] of each layer is projected onto the null space of that layer's
inputs on the memory, A~_l = [a_{l-1}(memory), 1]. Then z_l(memory) does not move at all, at
any lr, and nor does anything above it. In the output layer only out1's column is projected.

    python -m mlp_ref check tutorials/exercises/08_span_projection.py

Predict, then run: fill in the PREDICT_ constants before you write any code.
"""
import numpy as np

EXERCISE = "08_span_projection"

#: When the memory is the batch X itself, span projection equals which rule of tutorial 04?
#: "freeze" (only the output layer trains) or "project" (the null-space projection).
PREDICT_ON_THE_BATCH = None

#: After one span-projected step at lr = 1.0, max |out1(memory) before - after|: a number.
PREDICT_DRIFT_AT_LR_1 = None


def layer_inputs(net, memory):
    """Given: A~_l = [a_{l-1}(memory), 1], shape (m, n_{l-1} + 1), per layer l = 1 .. L."""
    record = net.forward(memory)
    return {l: np.hstack([record.a[l - 1], np.ones((len(memory), 1))])
            for l in range(1, net.depth + 1)}


def span_project(net, X, G, memory):
    """The gradient for G on X, each layer's update projected off its inputs on the memory.

    Parameters
    ----------
    net : mlp_ref.MLP                 L layers, K outputs
    X : ndarray, shape (n, d)         the batch the gradient is taken on
    G : ndarray, shape (n, K) or (K,)
    memory : ndarray, shape (m, d)    the inputs on which out1 must hold

    Returns
    -------
    dict like net.params. Per layer l, with U = [g_W_l; g_b_l] (n_{l-1} + 1, n_l) and
    A~ = A~_l from layer_inputs: U - pinv(A~) @ (A~ @ U), which makes A~ @ U = 0; in the output
    layer L only column 0 (out1's) is projected, the other columns keep their gradient.
    """
    raise NotImplementedError


def frozen_layers(net, memory):
    """The hidden layers that span projection freezes outright on this memory.

    Parameters
    ----------
    net : mlp_ref.MLP
    memory : ndarray, shape (m, d)

    Returns
    -------
    list of int: the hidden layers l < L whose A~_l has full column rank (np.linalg.matrix_rank
    equal to n_{l-1} + 1): their inputs span everything, so their update is projected to 0.
    """
    raise NotImplementedError
