"""Bad input to every rule: the right exception, and a message that names the argument."""
import numpy as np
import pytest

from mlp_ref import fixes, optim
from mlp_ref.setups import seed_setup

NET, X, _ = seed_setup()
G = np.array([0.0, -1.0])
REF = NET(X)[:, 0]

CASES = [
    ("naive X 1-D", lambda: fixes.naive(NET, X[0], G), ValueError, "X:"),
    ("naive X width", lambda: fixes.naive(NET, X[:, :2], G), ValueError, "X:"),
    ("naive X NaN", lambda: fixes.naive(NET, np.where(X > 0.9, np.nan, X), G), ValueError, "X:"),
    ("naive X strings", lambda: fixes.naive(NET, [["a", "b", "c"]], G), TypeError, "X:"),
    ("naive G shape", lambda: fixes.naive(NET, X, [0.0, -1.0, 2.0]), ValueError, "G:"),
    ("naive G rows", lambda: fixes.naive(NET, X, np.zeros((3, 2))), ValueError, "G:"),
    ("naive G inf", lambda: fixes.naive(NET, X, [0.0, np.inf]), ValueError, "G:"),
    ("masked mask shape", lambda: fixes.masked(NET, X, G, [1, 0, 1]), ValueError, "mask:"),
    ("masked mask values", lambda: fixes.masked(NET, X, G, [0.5, 1]), ValueError, "mask:"),
    ("freeze unknown name", lambda: fixes.freeze(NET, X, G, trainable=["W3"]), ValueError, "trainable:"),
    ("freeze not a list", lambda: fixes.freeze(NET, X, G, trainable=3), TypeError, "trainable:"),
    ("project keep empty", lambda: fixes.project(NET, X, G, keep=[]), ValueError, "keep:"),
    ("project keep range", lambda: fixes.project(NET, X, G, keep=[2]), ValueError, "keep:"),
    ("project keep negative", lambda: fixes.project(NET, X, G, keep=[-1]), ValueError, "keep:"),
    ("project keep repeated", lambda: fixes.project(NET, X, G, keep=[0, 0]), ValueError, "keep:"),
    ("project keep float", lambda: fixes.project(NET, X, G, keep=[0.0]), TypeError, "keep:"),
    ("project keep_X width", lambda: fixes.project(NET, X, G, keep_X=np.zeros((4, 2))), ValueError, "keep_X:"),
    ("project rcond", lambda: fixes.project(NET, X, G, rcond=-1.0), ValueError, "rcond:"),
    ("project refine", lambda: fixes.project(NET, X, G, refine=-1), ValueError, "refine:"),
    ("penalty lam", lambda: fixes.penalty(NET, X, G, lam=-1.0), ValueError, "lam:"),
    ("penalty ref shape", lambda: fixes.penalty(NET, X, G, ref=np.zeros(3)), ValueError, "ref:"),
    ("penalty ref NaN", lambda: fixes.penalty(NET, X, G, ref=np.full(8, np.nan)), ValueError, "ref:"),
    ("span keep", lambda: fixes.span_project(NET, X, G, keep=[5]), ValueError, "keep:"),
    ("nullspace D key", lambda: fixes.nullspace(NET, {"W1": np.zeros((3, 4))}, X), ValueError, "D:"),
    ("nullspace D shape", lambda: fixes.nullspace(
        NET, {k: np.zeros(3) for k in NET.params}, X), ValueError, "D["),
    ("restore tol", lambda: fixes.restore(NET.copy(), X, REF, tol=0.0), ValueError, "tol:"),
    ("restore max_iter", lambda: fixes.restore(NET.copy(), X, REF, max_iter=0), ValueError, "max_iter:"),
    ("restore max_iter float", lambda: fixes.restore(NET.copy(), X, REF, max_iter=2.5), TypeError, "max_iter:"),
    ("restore ref shape", lambda: fixes.restore(NET.copy(), X, REF[:3]), ValueError, "ref:"),
    ("restore keep_X", lambda: fixes.restore(NET.copy(), X[:, :1], REF), ValueError, "keep_X:"),
    ("adam lr", lambda: optim.Adam(0.0), ValueError, "lr:"),
    ("adam order", lambda: optim.Adam(0.1, order="sideways"), ValueError, "order:"),
    ("momentum beta", lambda: optim.Momentum(0.1, beta=1.0), ValueError, "beta:"),
]


@pytest.mark.parametrize("call, exc, name", [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_bad_input_is_rejected_naming_the_argument(call, exc, name):
    with pytest.raises(exc) as info:
        call()
    assert str(info.value).startswith(name), str(info.value)


def test_a_rejected_restore_changes_nothing():
    net = NET.copy()
    with pytest.raises(ValueError):
        fixes.restore(net, X, REF[:3])
    assert all(np.array_equal(net.params[k], NET.params[k]) for k in net.params)
