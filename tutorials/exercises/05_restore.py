"""Exercise 05 (after tutorial 05): the restoring step.

Expected time: 30 minutes.

After a projected step out1 is off by O(lr^2) on the batch. A Gauss-Newton step,
theta <- theta - J1^T (J1 J1^T)^+ (out1(theta) - ref), cancels that residual to first order;
repeated, it squares the residual each time until round-off.

    python -m mlp_ref check tutorials/exercises/05_restore.py
"""
import numpy as np

from mlp_ref import jacobian

EXERCISE = "05_restore"

#: Predict, then run: from a residual of about 2e-2, how many Gauss-Newton steps reach 1e-12?
#: A number (to 1).
PREDICT_RESTORE_STEPS = None


def restore_step(net, X, ref):
    """One Gauss-Newton step towards out1(X) = ref, in place.

    Parameters
    ----------
    net : mlp_ref.MLP                 changed in place (net.step(D, 1.0) does theta <- theta - D)
    X : ndarray, shape (n, d)
    ref : ndarray, shape (n,)         the values out1 must keep on X

    Returns
    -------
    float: the residual max |out1(X) - ref| before the step.
    With r = out1(X) - ref (n,), the step is D = J1^T (J1 J1^T)^+ r; J1 as in exercise 04
    (jacobian.dense_rows(net, X, keep=[0]) builds it for you).
    """
    raise NotImplementedError


def restore(net, X, ref, tol=1e-12, max_iter=20):
    """restore_step until max |out1(X) - ref| <= tol, or max_iter steps, in place.

    Parameters
    ----------
    net : mlp_ref.MLP                 changed in place
    X : ndarray, shape (n, d)
    ref : ndarray, shape (n,)
    tol : float                       stop once the residual is at most tol
    max_iter : int                    never take more steps than this

    Returns
    -------
    list of float: the residual before each step and after the last one (so one entry more
    than steps taken; a single entry when the residual is already at most tol).
    """
    raise NotImplementedError
