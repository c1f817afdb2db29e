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

Hyperparameters are plain attributes (``opt.lr = 0.01`` between steps is how a schedule is
written), so they are checked at every step, not only by the constructor: a value set by hand
is refused by name before it is used, and so is one that the arithmetic's dtype cannot hold
(in float32, 1 - 1e-8 is 1.0, and a decay rate of 1.0 makes Adam divide by 1 - beta^t = 0).

dtype: ``apply(net, D)`` computes in the network's dtype, so U has the dtype of the parameters
it is subtracted from. A momentum buffer or Adam's moments belong to the dtype they were made
in: ``apply`` with a network of another dtype is refused (naming ``net``) until ``reset()``.
Converting the state instead would carry float32 history into a float64 run, and a changed
dtype usually means one optimizer shared by two networks, which mixes their histories.
SGD keeps no state, so each of its calls simply computes in that call's dtype.
"""
from __future__ import annotations

import numpy as np

from .boundary.checks import (
    BadType,
    BadValue,
    check_array,
    check_params_like,
    check_positive,
    check_real,
    check_representable,
    checked,
    count_nonfinite,
    describe,
    finite,
)
from .boundary.model_checks import check_net
from .network import largest

#: What ``Optimizer.apply`` takes (``boundary.checks``: checked once, at the door).
APPLY = {"net": check_net, "D": check_params_like}

ORDERS = ("update", "gradient")


class Optimizer:
    """What every optimizer shares: arguments, state bookkeeping, the constraint and its order.

    A subclass defines ``_rule(D, dtype)``: a *pure* function of D and the current state that
    returns ``(U, new_state)``, computed in ``dtype``. ``update`` commits ``new_state`` (and
    the shapes and dtype of a first direction) only after the constraint has run without
    error, so a rejected call leaves the optimizer as it was.

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

    Every one of these, and a subclass's own hyperparameters, may be set again between
    steps; each step checks them as they are then (see the module's docstring).
    """

    #: Whether the optimizer remembers past directions (a state tied to one dtype).
    stateful = False

    def __init__(self, lr, constraint=None, order="update"):
        self.lr = check_positive("lr", lr)
        self.constraint = constraint
        self.order = order
        self._check_settings()
        self.reset()

    def reset(self):
        """Forget every past direction: the next call starts from fresh state."""
        self.shapes = None      # key -> shape, fixed by the first direction
        self.dtype = None       # the dtype of the arithmetic, fixed with the state
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
            The amount to subtract: theta <- theta - U. Its dtype is the state's once there
            is one; before (and always for SGD) float32 when D is all float32, else float64.
        """
        U, commit = self._prepare(D)
        commit()
        return U

    def apply(self, net, D):
        """U = self.update(D) in the network's dtype, then net.step(U, 1.0): theta <- theta - U.
        Returns U.

        Atomic: D is checked against ``net``'s parameter shapes first, and the optimizer's
        state advances only once the network has taken the step (``net.step`` checks
        everything, writability included, before its first change), so a rejected call
        changes neither the optimizer nor the network. A stateful optimizer whose state was
        made in another dtype refuses the network, naming ``net`` (``reset()`` starts afresh).
        """
        net, D = checked(APPLY, locals())               # D in the network's dtype
        if self.stateful and self.dtype is not None and self.dtype != net.dtype:
            name = type(self).__name__
            raise BadValue(f"net: expected a {self.dtype} network, the dtype of this {name}'s state "
                           f"(made by its first direction), got a {net.dtype} network; nothing was "
                           f"changed. The state belongs to one run: call reset() to start afresh in "
                           f"{net.dtype}, or give each network its own {name}", argument="net")
        U, commit = self._prepare(D, net.dtype)
        try:
            net.step(U, 1.0)
        except BadValue as exc:
            if exc.argument != "lr":
                raise
            # theta - U overflowed: the 1.0 that step blames is ours, the step size is self.lr
            raise BadValue(f"lr: expected a step size for which theta - U stays finite in "
                           f"{net.dtype}, got lr = {self.lr:g}, whose update U (|U| up to "
                           f"{largest(U):.3g}) makes a parameter overflow; nothing was changed",
                           argument="lr") from None
        commit()
        return U

    def _prepare(self, D, dtype=None):
        """(U, commit): the update for D in ``dtype`` (None: the state's, else D's own), and the
        call that stores the new state. Nothing of ``self`` changes until ``commit()``."""
        self._check_settings()
        if self.stateful and self.dtype is not None:
            dtype = self.dtype                  # the state's: D is converted to it
        elif dtype is None:
            dtype = _dtype_of(D)
        dtype = np.dtype(dtype)
        self._check_hyper(dtype)
        D = self._check_direction(D, dtype)
        shapes = {k: d.shape for k, d in D.items()}
        if self.constraint is not None and self.order == "gradient":
            D = self._constrain(D, shapes)
        with np.errstate(over="ignore", invalid="ignore"):
            U, state = self._rule(D, dtype)
        self._check_finite(D, U, state, dtype)
        if self.constraint is not None and self.order == "update":
            U = self._constrain(U, shapes)

        def commit():
            self.shapes, self.dtype = shapes, dtype
            for name, value in state.items():
                setattr(self, name, value)
        return U, commit

    def _check_finite(self, D, U, state, dtype):
        """Refuse a step whose new state or update would overflow: an inf moment would make every
        later update 0 or NaN with only a warning. A state that overflows blames D (its only
        input); a finite state whose update U = lr * (...) overflows blames lr, which then is
        above 1 (a finite factor times lr <= 1 stays finite)."""
        name = type(self).__name__
        for key, value in state.items():
            for k, a in (value.items() if isinstance(value, dict) else ()):
                if not finite(a):
                    raise BadValue(f"D: expected values small enough for {name}'s arithmetic in "
                                   f"{dtype.name}, got |D| up to {largest(D):.3g}, which makes "
                                   f"{key}[{k!r}] overflow ({count_nonfinite(a)})", argument="D")
        for k, u in U.items():
            if not finite(u):
                if self.lr > 1.0:
                    raise BadValue(f"lr: expected a step size for which {name}'s update stays finite "
                                   f"in {dtype.name}, got lr = {self.lr:g}, which makes U[{k!r}] "
                                   f"overflow ({count_nonfinite(u)}; |D| up to "
                                   f"{largest(D):.3g})", argument="lr")
                raise BadValue(f"D: expected values small enough for {name}'s arithmetic in "
                               f"{dtype.name}, got |D| up to {largest(D):.3g}, which makes "
                               f"U[{k!r}] overflow ({count_nonfinite(u)})", argument="D")

    def __repr__(self):
        extra = "".join(f", {k}={v!r}" for k, v in self._hyper().items())
        con = "" if self.constraint is None else f", constraint={self.constraint!r}, order={self.order!r}"
        return f"{type(self).__name__}(lr={self.lr!r}{extra}{con})"

    def _hyper(self):
        return {}

    # -- checks ------------------------------------------------------------------------
    def _check_settings(self):
        """The constraint and the order, as they are now."""
        if self.constraint is not None and not callable(self.constraint):
            raise BadType(f"constraint: expected a callable taking and returning a dict like "
                          f"params, or None, got {describe(self.constraint)}", argument="constraint")
        if not isinstance(self.order, str) or self.order not in ORDERS:
            raise BadValue(f"order: expected one of {', '.join(map(repr, ORDERS))}, got {self.order!r}",
                           argument="order")

    def _check_direction(self, D, dtype):
        """D as a dict of finite arrays of ``dtype``, with the keys and shapes of the state once
        a first direction fixed them."""
        if self.shapes is None and (not isinstance(D, dict) or not D):
            raise BadType(f"D: expected a non-empty dict like params (key -> array), "
                          f"got {describe(D)}", argument="D")
        if self.shapes is not None:
            return check_params_like("D", D, None, self.shapes, dtype)
        return {k: check_array(f"D[{k!r}]", v, dtype) for k, v in D.items()}

    def _check_hyper(self, dtype):
        """Every hyperparameter as it is now, in the dtype of this step's arithmetic: lr > 0,
        neither 0 nor inf there (in float32, 1e300 is inf and 1e-50 is 0)."""
        _learning_rate(self.lr, dtype)

    def _constrain(self, D, shapes):
        """Run the constraint on fresh copies and check that it returned a direction like D."""
        out = self.constraint({k: np.array(v) for k, v in D.items()})
        return check_params_like("constraint(...)", out, None, shapes, _dtype_of(D))


class SGD(Optimizer):
    """Plain gradient descent: U = lr * D. No state.

    Math, for every key with D[key] of shape s:

        U[key] = lr * D[key]                         shape s

    ``SGD(lr).apply(net, D)`` leaves exactly the bits of ``net.step(D, lr)``.
    With a linear constraint P, P(lr D) = lr P(D): both orders give the same update.

    dtype: no state, so every call computes in its own dtype: the network's in ``apply``
    (U then has the bits of ``net.step(D, lr)``), and in ``update`` float32 when D is all
    float32, else float64.
    """

    def _rule(self, D, dtype):
        lr = dtype.type(self.lr)
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

    dtype: v and U take the dtype of the first call (the network's in ``apply``; in ``update``
    float32 when D is all float32, else float64), and keep it until ``reset()``: ``apply``
    with a network of another dtype is refused, naming ``net``. beta must stay below 1 in
    that dtype (float32 rounds 1 - 1e-8 to 1.0).
    """

    stateful = True

    def __init__(self, lr, beta=0.9, constraint=None, order="update"):
        self.beta = _decay_rate("beta", beta)
        super().__init__(lr, constraint, order)

    def _reset_state(self):
        self.v = None

    def _check_hyper(self, dtype):
        super()._check_hyper(dtype)
        _decay_rate("beta", self.beta, dtype)

    def _hyper(self):
        return {"beta": self.beta}

    def _rule(self, D, dtype):
        beta, lr = dtype.type(self.beta), dtype.type(self.lr)
        v_prev = self.v if self.v is not None else {k: np.zeros_like(d) for k, d in D.items()}
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

    dtype: m, v and U take the dtype of the first call (the network's in ``apply``; in
    ``update`` float32 when D is all float32, else float64), and keep it until ``reset()``:
    ``apply`` with a network of another dtype is refused, naming ``net``. The betas are used
    as that dtype rounds them, in the moments and in the bias corrections alike (1 - beta^t
    is computed in float64 from the rounded beta, then rounded): on the first step the
    correction divides by the very weight 1 - beta the moment was given, so m_hat = D and
    v_hat = D^2 up to rounding in float32 too. A beta that the dtype rounds to 1.0 (float32:
    1 - 1e-8) is refused: its moment would stay 0 and 1 - beta^t would be 0.
    """

    stateful = True

    def __init__(self, lr, beta1=0.9, beta2=0.999, eps=1e-8, constraint=None, order="update"):
        self.beta1 = _decay_rate("beta1", beta1)
        self.beta2 = _decay_rate("beta2", beta2)
        self.eps = _positive("eps", eps)
        super().__init__(lr, constraint, order)

    def _reset_state(self):
        self.t, self.m, self.v = 0, None, None

    def _check_hyper(self, dtype):
        super()._check_hyper(dtype)
        _decay_rate("beta1", self.beta1, dtype)
        _decay_rate("beta2", self.beta2, dtype)
        _positive("eps", self.eps, dtype)

    def _hyper(self):
        return {"beta1": self.beta1, "beta2": self.beta2, "eps": self.eps}

    def _rule(self, D, dtype):
        s = dtype.type
        b1, b2, lr, eps = s(self.beta1), s(self.beta2), s(self.lr), s(self.eps)
        t = self.t + 1
        m_prev = self.m if self.m is not None else {k: np.zeros_like(d) for k, d in D.items()}
        v_prev = self.v if self.v is not None else {k: np.zeros_like(d) for k, d in D.items()}
        m = {k: b1 * m_prev[k] + (1 - b1) * D[k] for k in D}
        v = {k: b2 * v_prev[k] + (1 - b2) * (D[k] * D[k]) for k in D}
        c1, c2 = s(1.0 - float(b1) ** t), s(1.0 - float(b2) ** t)
        U = {}
        for k in D:
            m_hat = m[k] / c1
            v_hat = v[k] / c2
            U[k] = lr * m_hat / (np.sqrt(v_hat) + eps)
        return U, {"t": t, "m": m, "v": v}


# -- the checks of a hyperparameter, each by its name ---------------------------------------
def _learning_rate(lr, dtype):
    """lr > 0, a scalar of ``dtype`` that is neither 0 nor inf there."""
    return check_representable("lr", check_positive("lr", lr), dtype)


def _decay_rate(name, x, dtype=None):
    """A decay rate: a finite number in [0, 1) and, in ``dtype``, still below 1.

    The moments are averages with weights (1 - beta) beta^k, and the bias correction divides
    by 1 - beta^t: with beta = 1 both are 0. A beta closer to 1 than the dtype can tell
    (float32 rounds 1 - 1e-8 to 1.0) is a beta of 1 in the arithmetic, so it is refused too.
    """
    x = check_real(name, x, low=0.0)
    if x >= 1.0:
        raise BadValue(f"{name}: expected a number in [0, 1), got {x}", argument=name)
    if dtype is not None and dtype.type(x) >= 1.0:
        below = np.nextafter(dtype.type(1.0), dtype.type(0.0))
        raise BadValue(f"{name}: expected a number in [0, 1) that stays below 1 in {dtype} (at most "
                       f"{below:.9g}), got {x!r}, which {dtype} rounds to 1.0 (1 - {name} would be 0)",
                       argument=name)
    return x


def _positive(name, x, dtype=None):
    """A finite number > 0 and, in ``dtype``, neither 0 nor inf."""
    x = check_positive(name, x)
    if dtype is not None:
        check_representable(name, x, dtype)
    return x


def _dtype_of(D):
    """The dtype a direction asks for on its own: float32 when every value is a float32 array,
    else float64 (lists, ints and mixed dicts compute in float64)."""
    values = list(D.values()) if isinstance(D, dict) else []
    all32 = bool(values) and all(getattr(v, "dtype", None) == np.float32 for v in values)
    return np.dtype(np.float32 if all32 else np.float64)
