"""Exercise 02 (after tutorial 03): the masked loss and its G.

Expected time: 25 minutes.

The accepted answer's loss2 multiplies the output by a 0/1 mask before the squared error.
Write it with its gradient G = dL/dout, then the parameter direction a step on it takes, and
see for yourself that with the question's G = [0, -1] the mask [0, 1] changes nothing.

    python -m mlp_ref check tutorials/exercises/02_masked_loss.py
"""
import numpy as np

EXERCISE = "02_masked_loss"

#: Predict, then run: with G = [0, -1], does the mask [0, 1] change the direction at all?
#: True or False.
PREDICT_MASK_CHANGES_DIRECTION = None

#: Out1's drift after one masked step at learning rate lr grows like lr^p: p = 1 or 2?
PREDICT_MASKED_DRIFT_ORDER = None


def masked_mse(out, y, mask):
    """The answer's loss2, L = mean((mask * out - y)^2) over all n K entries, and its G.

    Parameters
    ----------
    out : ndarray, shape (n, K)      the network's output
    y : ndarray, shape (n, K)        the targets
    mask : ndarray of 0/1, shape (K,) or (n, K)   0 hides an entry of out from the loss

    Returns
    -------
    loss : float
    G : ndarray, shape (n, K)        dL/dout; exactly 0.0 wherever the mask is 0
    """
    raise NotImplementedError


def masked_direction(net, X, G, mask):
    """The direction a step on the masked loss takes: the parameter gradient for mask * G.

    Parameters
    ----------
    net : mlp_ref.MLP                with K outputs
    X : ndarray, shape (n, d)
    G : ndarray, shape (n, K) or (K,)    dL/dout before masking
    mask : ndarray of 0/1, shape (K,) or (n, K)

    Returns
    -------
    dict like net.params ("W1" (d, h1), "b1" (h1,), ...): sum_i (mask * G)_i . dout_i/dtheta.
    net.gradient(X, G) computes that sum for any G.
    """
    raise NotImplementedError
