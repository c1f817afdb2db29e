"""Exercise 09 (after tutorial 07, section 8): project Adam's update, not its gradient.

Expected time: 40 minutes.

Adam divides each coordinate of its momentum by a different number. A direction with J1 D = 0
rescaled coordinate by coordinate no longer has J1 D = 0: projecting the gradient and then
letting Adam precondition it does not hold out1. Project the update Adam is about to apply.

    python -m mlp_ref check tutorials/exercises/09_adam_projection.py

Predict, then run: fill in the PREDICT_ constants before you write any code.
"""
import numpy as np

from mlp_ref import jacobian

EXERCISE = "09_adam_projection"

#: Project the gradient, then let Adam rescale it: does the update still satisfy J1 U = 0
#: (to round-off)? True or False.
PREDICT_GRADIENT_ORDER_HOLDS = None

#: On Adam's first step, max |U| / lr (with eps = 1e-8 and gradients far larger): a number.
PREDICT_FIRST_STEP_SIZE = None


def adam_update(D, m, v, t, lr, beta1=0.9, beta2=0.999, eps=1e-8):
    """One step of Adam (Kingma & Ba, 2015, Algorithm 1), for every key of D.

    Parameters
    ----------
    D : dict like net.params          the direction of this step (a gradient), each key an
                                      array of that parameter's shape
    m, v : dict like D                the moments after step t - 1 (zeros before the first)
    t : int                           this step's number, 1 for the first
    lr, beta1, beta2, eps : float

    Returns
    -------
    (U, m, v): dicts like D, new arrays. m = beta1 m + (1 - beta1) D, v = beta2 v + (1 - beta2)
    D^2, U = lr m_hat / (sqrt(v_hat) + eps) with m_hat = m / (1 - beta1^t), v_hat = v / (1 - beta2^t).
    """
    raise NotImplementedError


def project_out1(net, X, D):
    """D - J1^+ J1 D: the part of any direction D that moves out1 on X not at all, to first order.

    Parameters
    ----------
    net : mlp_ref.MLP
    X : ndarray, shape (n, d)
    D : dict like net.params

    Returns
    -------
    dict like net.params; J1 from jacobian.dense_rows(net, X, keep=[0]), np.linalg.pinv.
    """
    raise NotImplementedError
