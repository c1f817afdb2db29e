"""Optimizers: small classes that turn a direction D into an update U.

A *rule* (``fixes.naive``, ``fixes.project``, ...) says which way to go: a direction D,
a dict like params. An *optimizer* says how far, and may remember past directions:

    U = opt.update(D)           # a dict like params, the amount to subtract
    theta <- theta - U          # what opt.apply(net, D) does, through net.step(U, 1.0)

    SGD        U = lr * D
    Momentum   v <- beta * v + D,                      U = lr * v
    Adam       m <- beta1 m + (1 - beta1) D,   v <- beta2 v + (1 - beta2) D^2,
               U = lr * m_hat / (sqrt(v_hat) + eps)    (bias-corrected m_hat, v_hat)

The ordering pitfall
--------------------
Holding output 1 fixed asks for J_1 . U = 0 for the update U that is *applied*. A
projection P (any linear map that removes components, e.g. onto null(J_1)) applied to
the *gradient* gives J_1 . P(D) = 0, but then Adam divides each coordinate by its own
sqrt(v_hat) + eps: the result is no longer in null(J_1). Momentum adds in old directions,
which were projected against an *older* J_1 (the constraint moves with theta). So:

    order="update"    (default, correct)   U = constraint(optimizer(D))      J_1 . U = 0
    order="gradient"  (the pitfall)        U = optimizer(constraint(D))      J_1 . U != 0 in general

For plain SGD the two orders coincide (a linear P commutes with multiplying by lr).

The state (momentum buffer, Adam moments) is created lazily on the first call, one array
per key of D, and every later D must have the same keys and shapes.
"""
from __future__ import annotations

import numpy as np

from . import _checks
from .fixes import check_net
from .network import check_lr, check_representable

ORDERS = ("update", "gradient")


class Optimizer:
    """What every optimizer shares: arguments, state bookkeeping, the constraint and its order.

    A subclass defines ``_rule(D)``: a *pure* function of D and the current state that
    returns ``(U, new_state)``. ``update`` commits ``new_state`` only after the
    constraint has run without error, so a rejected call leaves the optimizer as it was.

    Parameters
    ----------
    lr : float > 0
        The learning rate (step size).
    constraint : callable dict -> dict, or None
        Maps a direction (a dict like params) to a direction with the same keys and
        shapes, typically a projection that removes the components that would move
        output 1. It receives fresh arrays it may modify.
    order : "update" or "gradient"
        Where the constraint is applied: to the final update (correct), or to the
        incoming direction before the optimizer transforms it (the pitfall; kept to
        demonstrate it). Ignored when ``constraint`` is None.
    """

    def __init__(self, lr, constraint=None, order="update"):
        self.lr = _checks.real("lr", lr, low=0.0, low_inclusive=False)
        if constraint is not None and not callable(constraint):
            raise TypeError(f"constraint: expected a callable taking and returning a dict like "
                            f"params, or None, got {_checks.describe(constraint)}")
        self.constraint = constraint
        if not isinstance(order, str) or order not in ORDERS:
            raise ValueError(f"order: expected one of {', '.join(map(repr, ORDERS))}, got {order!r}")
        self.order = order
        self.reset()

    def reset(self):
        """Forget every past direction: the next call starts from fresh state."""
        self.shapes = None      # key -> shape, fixed by the first direction
        self.dtype = None       # float32 if the first direction was all float32, else float64
        self._reset_state()

    def _reset_state(self):
        pass

    # -- the public calls --------------------------------------------------------------
    def update(self, D):
        """The update U for direction D, advancing the state by one step.

        Parameters
        ----------
        D : dict key -> array_like
            A direction like params (a gradient, or any rule's output).

        Returns
        -------
        U : dict key -> ndarray, the same keys and shapes as D
            The amount to subtract: theta <- theta - U.
        """
        U, commit = self._prepare(D)
        commit()
        return U

    def apply(self, net, D):
        """U = self.update(D), then net.step(U, 1.0): theta <- theta - U. Returns U.

        Atomic: D is checked against ``net``'s parameter shapes first, and the optimizer's
        state advances only once the network has taken the step (``net.step`` checks
        everything, writability included, before its first change), so a rejected call
        changes neither the optimizer nor the network.
        """
        net = check_net(net)
        D = _checks.param_dict("D", D, net.param_shapes, net.dtype)    # in the network's dtype
        first = self.shapes is None
        U, commit = self._prepare(D)
        try:
            net.step(U, 1.0)
        except Exception:
            if first:           # forget the shapes this first direction fixed: nothing happened
                self.reset()
            raise
        commit()
        return U

    def _prepare(self, D):
        """(U, commit): the update for D, and the call that stores the new state. Nothing of
        ``self`` has changed until ``commit()`` (the shapes fixed by a first direction are
        forgotten again if anything fails before it)."""
        first = self.shapes is None
        try:
            D = self._check_direction(D)
            if self.constraint is not None and self.order == "gradient":
                D = self._constrain(D)
            with np.errstate(over="ignore", invalid="ignore"):
                U, state = self._rule(D)
            self._check_finite(D, U, state)
            if self.constraint is not None and self.order == "update":
                U = self._constrain(U)
        except Exception:
            if first:           # forget the shapes the rejected first direction fixed
                self.reset()
            raise

        def commit():
            for name, value in state.items():
                setattr(self, name, value)
        return U, commit

    def _check_finite(self, D, U, state):
        """Refuse a D whose update or new state would overflow: an inf moment would make every
        later update 0 or NaN with only a warning."""
        arrays = [(f"U[{k!r}]", u) for k, u in U.items()]
        for name, value in state.items():
            if isinstance(value, dict):
                arrays += [(f"{name}[{k!r}]", a) for k, a in value.items()]
        for what, a in arrays:
            if not np.isfinite(a).all():
                big = max(float(np.max(np.abs(d))) for d in D.values())
                raise ValueError(f"D: expected values small enough for {type(self).__name__}'s "
                                 f"arithmetic in {self.dtype.name}, got |D| up to {big:.3g}, which "
                                 f"makes {what} overflow ({_checks.count_nonfinite(a)})")

    def __repr__(self):
        extra = "".join(f", {k}={v!r}" for k, v in self._hyper().items())
        con = "" if self.constraint is None else f", constraint={self.constraint!r}, order={self.order!r}"
        return f"{type(self).__name__}(lr={self.lr!r}{extra}{con})"

    def _hyper(self):
        return {}

    # -- checks ------------------------------------------------------------------------
    def _check_direction(self, D):
        """D as a dict of finite arrays of the state's dtype, with the state's keys and shapes."""
        if self.shapes is not None:
            return _checks.param_dict("D", D, self.shapes, self.dtype)
        if not isinstance(D, dict) or not D:
            raise TypeError(f"D: expected a non-empty dict like params (key -> array), "
                            f"got {_checks.describe(D)}")
        all32 = all(getattr(v, "dtype", None) == np.float32 for v in D.values())
        dtype = np.dtype(np.float32 if all32 else np.float64)
        self._check_hyper(dtype)
        D = {k: _checks.as_array(f"D[{k!r}]", v, dtype) for k, v in D.items()}
        # fixed by the first direction; _rule creates the state from these shapes
        self.shapes = {k: a.shape for k, a in D.items()}
        self.dtype = dtype
        return D

    def _check_hyper(self, dtype):
        """The hyperparameters, representable in the state's dtype (in float32, 1e300 is inf
        and 1e-50 is 0): checked once the first direction has fixed it."""
        check_lr(self.lr, dtype)

    def _constrain(self, D):
        """Run the constraint on fresh copies and check that it returned a direction like D."""
        out = self.constraint({k: np.array(v) for k, v in D.items()})
        return _checks.param_dict("constraint(...)", out, self.shapes, self.dtype)

    def _zeros(self):
        return {k: np.zeros(s, dtype=self.dtype) for k, s in self.shapes.items()}

    def _scalar(self, x):
        """A Python float as a scalar of the state's dtype, so float32 stays float32."""
        return self.dtype.type(x)


class SGD(Optimizer):
    """Plain gradient descent: U = lr * D. No state.

    Math, for every key with D[key] of shape s:

        U[key] = lr * D[key]                         shape s

    ``SGD(lr).apply(net, D)`` leaves exactly the bits of ``net.step(D, lr)``.
    With a linear constraint P, P(lr D) = lr P(D): both orders give the same update.

    dtype: U has the dtype of the first direction when it was all float32, else float64.
    """

    def _rule(self, D):
        lr = self._scalar(self.lr)
        return {k: lr * d for k, d in D.items()}, {}


class Momentum(Optimizer):
    """Heavy-ball momentum: a running sum of past directions, each weighed by beta^age.

    Math, for every key (all arrays of that key's shape s), starting from v_0 = 0:

        v_t = beta * v_{t-1} + D_t                   shape s
        U_t = lr * v_t                               shape s

    so U_t = lr * sum_{k<=t} beta^(t-k) D_k: old directions stay in the update. A
    direction projected against step k's constraint is not projected against step t's,
    so with a constraint that moves with theta (as J_1 does), order="gradient" breaks
    J_1 . U = 0 from the second step on. (For a constraint that never changes, a sum of
    projected directions stays projected; the pitfall then shows only with Adam.)

    With order="update" the buffer v still sums the *unconstrained* directions; only
    the applied update is projected, U_t = P_t(lr v_t). That is all J_1 . U = 0 asks for.

    Parameters
    ----------
    lr : float > 0
    beta : float in [0, 1)        0 is plain SGD
    constraint, order             see :class:`Optimizer`

    Attributes
    ----------
    v : dict key -> ndarray, or None before the first call     the velocity v_t

    dtype: the state and U take the dtype of the first direction when it was all
    float32, else float64.
    """

    def __init__(self, lr, beta=0.9, constraint=None, order="update"):
        self.beta = _unit_interval("beta", beta)
        super().__init__(lr, constraint, order)

    def _reset_state(self):
        self.v = None

    def _hyper(self):
        return {"beta": self.beta}

    def _rule(self, D):
        beta, lr = self._scalar(self.beta), self._scalar(self.lr)
        v_prev = self.v if self.v is not None else self._zeros()
        v = {k: beta * v_prev[k] + D[k] for k in D}
        return {k: lr * v[k] for k in D}, {"v": v}


class Adam(Optimizer):
    """Adam (Kingma & Ba, 2015, Algorithm 1): a momentum of D, divided coordinate by
    coordinate by a running root-mean-square of D.

    Math, for every key (all arrays of that key's shape s; squares, roots and divisions
    elementwise), starting from m_0 = v_0 = 0, t = 1, 2, ...:

        m_t     = beta1 * m_{t-1} + (1 - beta1) * D_t        first moment,  shape s
        v_t     = beta2 * v_{t-1} + (1 - beta2) * D_t^2      second moment, shape s
        m_hat_t = m_t / (1 - beta1^t)                        bias corrections: m_0 = v_0 = 0
        v_hat_t = v_t / (1 - beta2^t)                        would shrink early estimates
        U_t     = lr * m_hat_t / (sqrt(v_hat_t) + eps)       shape s

    (eps is added after the square root, as in the paper; some libraries move it.)
    On the first step m_hat = D and v_hat = D^2, so U_1 = lr * D / (|D| + eps): about
    lr * sign(D) wherever |D| >> eps, whatever the size of D.

    Why the order matters here: dividing by sqrt(v_hat) + eps rescales each coordinate
    by a different amount, and a projected direction rescaled coordinate by coordinate
    is no longer projected. With order="gradient", J_1 . U != 0 even for a constraint
    that never changes. With order="update" (default), U_t = P(raw U_t): the moments
    still accumulate the *unconstrained* D_t, which is fine, because only the applied
    update has to satisfy J_1 . U = 0. (An alternative, not implemented: project in the
    preconditioned metric, i.e. solve for the update of the form H^-1 (m_hat - J_1^T a)
    with H = diag(sqrt(v_hat) + eps) and a chosen so that J_1 . U = 0; it keeps Adam's
    scaling inside the allowed subspace, but needs J_1 itself, not just a projection.)

    Parameters
    ----------
    lr : float > 0
    beta1, beta2 : float in [0, 1)
    eps : float > 0
    constraint, order             see :class:`Optimizer`

    Attributes
    ----------
    t : int                       steps taken so far
    m, v : dict key -> ndarray, or None before the first call

    dtype: the state and U take the dtype of the first direction when it was all
    float32, else float64; beta1^t and beta2^t are computed in float64 and then rounded.
    """

    def __init__(self, lr, beta1=0.9, beta2=0.999, eps=1e-8, constraint=None, order="update"):
        self.beta1 = _unit_interval("beta1", beta1)
        self.beta2 = _unit_interval("beta2", beta2)
        self.eps = _checks.real("eps", eps, low=0.0, low_inclusive=False)
        super().__init__(lr, constraint, order)

    def _reset_state(self):
        self.t, self.m, self.v = 0, None, None

    def _check_hyper(self, dtype):
        super()._check_hyper(dtype)
        check_representable("eps", self.eps, dtype)

    def _hyper(self):
        return {"beta1": self.beta1, "beta2": self.beta2, "eps": self.eps}

    def _rule(self, D):
        s = self._scalar
        b1, b2, lr, eps = s(self.beta1), s(self.beta2), s(self.lr), s(self.eps)
        t = self.t + 1
        m_prev = self.m if self.m is not None else self._zeros()
        v_prev = self.v if self.v is not None else self._zeros()
        m = {k: b1 * m_prev[k] + (1 - b1) * D[k] for k in D}
        v = {k: b2 * v_prev[k] + (1 - b2) * (D[k] * D[k]) for k in D}
        c1, c2 = s(1.0 - self.beta1 ** t), s(1.0 - self.beta2 ** t)
        U = {}
        for k in D:
            m_hat = m[k] / c1
            v_hat = v[k] / c2
            U[k] = lr * m_hat / (np.sqrt(v_hat) + eps)
        return U, {"t": t, "m": m, "v": v}


def _unit_interval(name, x):
    """A decay rate: a finite number in [0, 1)."""
    x = _checks.real(name, x, low=0.0)
    if x >= 1.0:
        raise ValueError(f"{name}: expected a number in [0, 1), got {x}")
    return x
