"""Every answer to the question, as a rule that returns a direction D.

A step is theta <- theta - lr * D (``net.step(D, lr)``), and to first order output k
changes by  dO_k = -lr * J_k . D.  With the question's G = [0, -1] the naive direction is
g = J_2^T G_2, so out1 moves by  -lr * J_1 J_2^T G_2: the cross-output tangent kernel
(``jacobian.tangent_kernel_by_layer``). Each rule below says, in its docstring, what it
does to that term, and what it guarantees:

    rule         out1 drift on the constrained batch      on unseen inputs
    naive        O(lr)                                    O(lr)
    masked       O(lr) (G's column 1 is already 0)        O(lr)
    freeze       exactly 0, any lr                        exactly 0
    project      O(lr^2)                                  O(lr)
    + restore    ~ roundoff (Gauss-Newton to tol)         O(lr)
    penalty      O(lr) on the first step (= naive)        O(lr)
    span         ~ roundoff on keep_X, any lr             0 only where layer inputs stay in the span
                 (with keep_X = X it is freeze)

Every rule is a pure function: the network is not modified (except by ``restore``,
whose job that is). Every rule works on every model of the package (MLP, SplitHeads,
TwoTower): the Jacobian-based ones through ``jacobian.of``, which knows each model's pieces.

This is the reference, written as the formulas; ``mlp_ref.fast`` has the same rules with the
tricks a benchmark needs, tested equal.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from functools import partial

import numpy as np

from . import jacobian
from .baselines import Bases, agem, ewc, ewc_merge, fisher_diagonal, gpm, gpm_bases  # noqa: F401
from .boundary import diagnosis
from .boundary.checks import (
    BadValue,
    all_finite,
    check_inputs,
    check_keep,
    check_output_grads,
    check_output_mask,
    check_params_like,
    check_positive,
    check_rcond,
    check_weight,
    check_whole,
    checked,
    eps,
    finite,
)
from .boundary.model_checks import check_net, check_ref, check_refine, check_trainable
from .jacobian import flatten, unflatten
from .network import Model, largest, subtract

# what a caller of the rules may catch: the warning; and the field's rules, A-GEM, EWC and GPM,
# written in ``baselines``, read here as fixes.agem, fixes.gpm, ...
from .pseudoinverse import GramSolver, PrecisionWarning, warn_if_not_held  # noqa: F401

#: What each rule takes, beside it (checked once, at the door: ``boundary.checks.checked``), in order.
RULE = {"net": check_net, "X": check_inputs, "G": check_output_grads}


def naive(net, X, G):
    """The plain gradient g = sum_i J_i^T G_i, the direction of ``loss.backward()``.

    Guarantee: none for out1. Its first-order change is -lr * J_1 g = -lr * K_12 G_2
    (K_12 the cross-output tangent kernel), O(lr) on every input.
    """
    net, X, G = checked(RULE, locals())
    return net.gradient(X, G)


MASKED = {**RULE, "mask": check_output_mask}


def masked(net, X, G, mask):
    """The gradient of the masked loss, the answer's ``loss2``: g with G replaced by mask * G.

    mask : array_like of 0/1, shape (K,) or (n, K)

    A 0 in the mask zeroes that column of G, so that output contributes nothing to the
    gradient. In the question, G's column 0 (out1's) is *already* zero: masked(mask=[0, 1]) equals
    naive exactly, and out1 still drifts O(lr) whenever shared parameters move. A mask is
    the tool for a missing label, not for invariance.
    """
    net, X, G, mask = checked(MASKED, locals())
    return net.gradient(X, mask * G)


FREEZE = {**RULE, "trainable": check_trainable}


def freeze(net, X, G, trainable=None):
    """The ``var_list`` recipe: the gradient, with every parameter not in ``trainable`` zeroed.

    trainable : list of parameter names, e.g. ["W2", "b2"] (the answer's var_list);
                defaults to the output layer's, ``net.output_keys``

    Guarantee: if out1 does not depend on any trainable parameter, out1 is unchanged bit
    for bit, on every input and at every lr. With G = [0, -1], dW_L[:, 0] and db_L[0] are
    already zero, so training only the output layer never touches out1's weights. Cost:
    the shared trunk can no longer learn anything for out2.
    """
    net, X, G, trainable = checked(FREEZE, locals())
    g = net.gradient(X, G)
    return {k: (v if k in trainable else np.zeros_like(v)) for k, v in g.items()}


HOLD = {"keep": check_keep, "keep_X": check_inputs, "rcond": check_rcond}
PROJECT = {**RULE, **HOLD, "refine": check_refine}


def project(net, X, G, keep=(0,), keep_X=None, rcond=None, refine=1):
    """Null-space projection: D = g - J_1^T (J_1 J_1^T)^+ J_1 g, so that J_1 . D = 0.

    keep   : output indices to hold (any subset)
    keep_X : inputs on which to hold them, shape (n', d); defaults to X

    Guarantee: the kept outputs move O(lr^2) on keep_X (the first-order term is zero;
    the curvature of the network is not). On inputs that were not constrained the drift
    is O(lr) in general. Among all directions with J_1 . D = 0, D is the closest to g.
    """
    net, X, G, keep, keep_X, rcond, refine = checked(PROJECT, locals())
    g = net.gradient(X, G)
    try:
        return nullspace(net, g, keep_X, keep, rcond, refine)
    except BadValue as exc:             # D = g overflowed: g is made from G, so G is named
        size = f"max |G| = {np.abs(G).max():.3g} (a gradient of max |g| = {largest(g):.3g})"
        raise (diagnosis.too_large("G", "the projected direction", net.dtype, size) if exc.argument == "D"
               else exc) from None


NULLSPACE = {"net": check_net, "D": check_params_like, "keep_X": check_inputs, "keep": check_keep,
             "rcond": check_rcond, "refine": check_refine}


def nullspace(net, D, keep_X, keep=(0,), rcond=None, refine=1):
    """D - J^T (J J^T)^+ J D: the part of D that moves no kept output on keep_X (to first order).

    J is the Jacobian of outputs ``keep`` on the rows of keep_X, used through its per-layer
    Gram factors (``jacobian``), never built. Constraints that are redundant or numerically
    dependent are dropped by the pseudo-inverse (``GramSolver``): then the result is whatever
    is left, possibly zero (for instance when there are more independent constraints than
    parameters).

    Solving through J J^T squares J's condition number: on the seed network (small
    weights, near-identical hidden units, cond(J J^T) ~ 2e11) one solve leaves
    |J D| ~ 1e-8 |J g|. Each ``refine`` pass projects the remainder J D once more with the same
    Gram (iterative refinement), which multiplies the error by about eps * cond(J J^T); the
    default single pass brings the seed problem to ~1e-13.

    Accuracy, with refine >= 1 and m constraints: |J D| <= (32 + m) eps ||J| (|D| + |D_given|)||,
    about what rounding J . D_given and D to the dtype leaves. Where that is not assured it is
    measured, and a PrecisionWarning says why it falls short (``pseudoinverse.warn_if_not_held``).
    """
    net, D, keep_X, keep, rcond, refine = checked(NULLSPACE, locals())
    J = jacobian.of(net, keep_X, keep)
    given = D
    with np.errstate(over="ignore", invalid="ignore"):    # an overflow is named below
        gram = J.gram()                                   # J J^T
        if not finite(gram):
            raise diagnosis.gram_overflow(J, keep_X)
        solve = GramSolver(gram, rcond)                   # (J J^T)^+
        for _ in range(1 + refine):                       # the projection, then its refinements
            alpha = solve(J.matvec(D))                    # (J J^T)^+ J D
            D = subtract(D, J.rmatvec(alpha))             # D - J^T alpha
    if not all_finite(D.values()):
        raise diagnosis.too_large("D", "D - J^T (J J^T)^+ J D", net.dtype, f"max |D| = {largest(given):.3g}")
    warn_if_not_held(J, gram, solve, given, D, refine)
    return D


PROJECT_DENSE = {**RULE, "keep": check_keep, "keep_X": check_inputs}


def project_dense(net, X, G, keep=(0,), keep_X=None):
    """``project`` with J built: D = g - J^+ J g, for small networks and for teaching.

    J (n' q, P) has one row per kept output and row of keep_X, dO/dtheta, one column per
    parameter. J^+ = J^T (J J^T)^+ is its pseudo-inverse, computed by NumPy from J's SVD,
    which does not square J's condition number as the Gram route does. Memory n' q P: this is
    what ``project`` avoids by never building J; the two agree to roundoff.
    """
    net, X, G, keep, keep_X = checked(PROJECT_DENSE, locals())
    g = net.gradient(X, G)
    J = jacobian.dense_rows(net, keep_X, keep)                  # (n' q, P)
    with np.errstate(over="ignore", invalid="ignore"):          # an overflow is named below
        D = flatten(g) - np.linalg.pinv(J) @ (J @ flatten(g))   # g - J^+ J g
    if not finite(D):
        raise diagnosis.too_large("G", "the projected direction", net.dtype, f"max |G| = {np.abs(G).max():.3g}")
    return unflatten(D, g)


PENALTY = {**RULE, "keep": check_keep, "ref": check_ref, "lam": check_weight}


def penalty(net, X, G, keep=(0,), ref=None, lam=0.5):
    """The gradient of L + lam/2 * ||O_keep(X) - ref||^2: g + lam * J_keep^T (O_keep - ref).

    ref : the values to hold, shape (n, len(keep)), or (n,) when one output is kept;
          defaults to the current outputs (then the penalty term's gradient is zero)

    The penalty's own output gradient is lam * (O_keep - ref), so we simply add it to G's
    kept columns and backpropagate once. At the start O_keep = ref: the first step equals
    the naive one. Over many steps it is a restoring force that grows with the drift,
    never a guarantee: it pulls back only the patterns of drift that the kept outputs'
    Jacobian reaches (on the visible setup, saturated after some steps, out1's mean over the
    batch and not its spread: tutorial 06).

    Stability: near ref, a step of size lr multiplies the residual O_keep - ref by
    I - lr * lam * J J^T, which shrinks it only while lr * lam * lambda_max(J J^T) < 2
    (``penalty_limit`` gives that bound); above it the residual oscillates and grows. The
    default lam = 0.5 is stable on both of the question's setups at the learning rates the
    tutorials use (lr * lam * lambda_max = 0.76 on the seed setup at lr 0.1, 0.83 on the
    visible one at lr 0.01).
    """
    net, X, G, keep, ref, lam = checked(PENALTY, locals())
    out = net(X)
    ref = out[:, keep] if ref is None else ref
    with np.errstate(over="ignore", invalid="ignore"):     # an overflow is named below
        residual = out[:, keep] - ref                      # O_keep - ref
        G_total = np.array(G)
        G_total[:, keep] += lam * residual                 # G + the penalty's output gradient
    if not finite(residual):
        raise diagnosis.distance_overflow(ref, net.dtype)
    if not finite(G_total):
        raise diagnosis.pull_overflow(G, residual, lam)
    try:
        return net.gradient(X, G_total)
    except BadValue as exc:             # the backward pass overflowed: G's, lam's or ref's?
        raise diagnosis.pull_overflow(G, residual, lam, exc) from None


PENALTY_LIMIT = {"net": check_net, "X": check_inputs, "keep": check_keep}


def penalty_limit(net, X, keep=(0,)):
    """The largest stable lr * lam for ``penalty`` on X at the current parameters:
    2 / lambda_max(J J^T), J the Jacobian of outputs ``keep`` on the rows of X.

    A step multiplies the residual O_keep - ref by I - lr * lam * J J^T (to first order), whose
    eigenvalues 1 - lr * lam * lambda_i lie in (-1, 1) exactly when lr * lam * lambda_max < 2.
    The bound moves as the network trains: check it again after many steps.
    """
    net, X, keep = checked(PENALTY_LIMIT, locals())
    J = jacobian.of(net, X, keep)
    with np.errstate(over="ignore", invalid="ignore"):     # an overflow is named below
        gram = J.gram()
    if not finite(gram):
        raise diagnosis.gram_overflow(J, X, "X", "X")
    lam_max = np.linalg.eigvalsh(gram)[-1]
    return 2.0 / lam_max if lam_max > 0 else np.inf


SPAN = {**RULE, **HOLD}


def span_project(net, X, G, keep=(0,), keep_X=None, rcond=None):
    """Span projection (GPM, Saha et al. 2021; Adam-NSCL, Wang et al. 2021), layer by layer.

    For every hidden layer l < L, the update [dW_l; db_l] is projected onto the null
    space of that layer's input span on keep_X, A~ = [a_{l-1}, 1] (n', n_{l-1} + 1):
    then A~ [dW_l; db_l] = 0, so z_l(keep_X) does not change *at all*, at any lr; the
    layers above then see unchanged inputs. In the output layer only the columns of the
    kept outputs are projected (out2's own weights move freely).

    Guarantee: out1 on keep_X is unchanged up to roundoff, at any lr, and on any input
    whose layer inputs lie in the protected spans. Cost: once keep_X spans a layer's
    input space (n' >= n_{l-1} + 1 in general position) that layer is frozen outright.
    And when keep_X is the batch X itself, every hidden layer freezes whatever the widths:
    the batch's gradient dW_l = a_{l-1}^T dz_l lies in the span of its own layer inputs.
    So for the question as asked (hold out1 on the batch we train on) the rule collapses
    to layer splitting, freeze([f"W{L}", f"b{L}"]); it earns its keep in continual
    learning, where keep_X (old data) differs from X (new data).

    For a model made of several MLPs (``net.pieces()``), each piece computing a kept output
    is projected so; a piece computing none (another tower) keeps its gradient.
    """
    net, X, G, keep, keep_X, rcond = checked(SPAN, locals())
    g = net.gradient(X, G)
    D = dict(g)
    for piece in net.pieces():
        local = [piece.outputs.index(k) for k in keep if k in piece.outputs]
        if local:
            D.update(piece.to_model(_span_project_mlp(piece.mlp, piece.to_mlp(g), keep_X,
                                                      local, rcond)))
    return D


def _span_project_mlp(net, g, keep_X, keep, rcond):
    """``span_project`` of the gradient g of one MLP."""
    record = net.forward(keep_X)
    D = {}
    for l in range(1, net.depth + 1):
        A = record.a[l - 1]
        A1 = np.hstack([A, np.ones((A.shape[0], 1), dtype=A.dtype)])
        # right singular vectors with significant singular values span the rows of A1
        _, s, Vt = np.linalg.svd(A1, full_matrices=False)
        tol = (max(A1.shape) * np.finfo(A1.dtype).eps if rcond is None else rcond) * s[0]
        V = Vt[s > tol].T                                       # (n_{l-1} + 1, r)
        Wb = np.vstack([g[f"W{l}"], g[f"b{l}"][None, :]])       # (n_{l-1} + 1, n_l)
        cols = slice(None) if l < net.depth else keep
        Wb[:, cols] -= V @ (V.T @ Wb[:, cols])
        D[f"W{l}"], D[f"b{l}"] = Wb[:-1], Wb[-1]
    return D


# -- restore: Gauss-Newton back onto the constraint --------------------------------------------
RESTORE = {"net": check_net, "keep_X": check_inputs, "keep": check_keep, "ref": check_ref,
           "tol": check_positive, "max_iter": check_whole, "rcond": check_rcond}


def restore(net, keep_X, ref, keep=(0,), tol=1e-12, max_iter=20, rcond=None):
    """Gauss-Newton retraction onto {O_keep(keep_X) = ref}, in place.

    Repeats  theta <- theta - J^T (J J^T)^+ (O_keep(keep_X) - ref)  (the smallest step that
    cancels the residual to first order) until max |O_keep - ref| <= tol or ``max_iter``
    steps. Near the constraint the residual squares at each step (quadratic convergence), so
    after a projected step of size lr (residual O(lr^2)) a few steps reach roundoff: two to
    four at the tutorials' step sizes.

    The tolerance is max(tol, 16 eps * max(1, max |ref|)): no finer than the dtype resolves at
    the size of what is held (``restore_tolerance``). The report says when tol was raised so,
    and why when it did not converge. A failure changes nothing (``all_or_nothing``).

    ref : shape (len(keep_X), len(keep)), or (n,) when one output is kept
    Returns a RestoreReport.
    """
    net, keep_X, keep, ref, tol, max_iter, rcond = checked(RESTORE, locals())
    return gauss_newton(net, keep_X, keep, ref, tol, max_iter, type(net).forward, jacobian.at,
                        partial(GramSolver, rcond=rcond), Model.step)


def gauss_newton(net, keep_X, keep, ref, tol, max_iter, forward, jacobian_at, Solver, step):
    """``restore``'s loop, in place, for either tier: ``forward(net, keep_X)`` is a forward record (its
    ``.output``), ``jacobian_at(net, keep_X, keep, record)`` the Jacobian J of the kept outputs from it,
    ``Solver(gram)`` the pseudo-inverse of J J^T, ``step(net, D, 1.0)`` takes theta <- theta - D."""
    tol, note = restore_tolerance(tol, ref)
    history, solve = [], None
    with all_or_nothing(net), np.errstate(over="ignore", invalid="ignore"):   # overflows are named below
        for it in range(max_iter + 1):
            try:
                record = forward(net, keep_X)                         # the outputs at theta
            except BadValue as exc:                                   # they overflowed: ref's steps?
                raise diagnosis.unreachable(history, exc, stepping=False) from None
            r = (record.output[:, keep] - ref).reshape(-1)            # the residual, rows c = i q + j as J's
            history.append(float(np.abs(r).max()))                    # its max
            if not np.isfinite(history[-1]):
                raise diagnosis.distance_overflow(ref, net.dtype)
            if history[-1] <= tol or it == max_iter:                  # converged, or out of steps
                break
            J = jacobian_at(net, keep_X, keep, record)                # J at theta
            gram = J.gram()                                           # J J^T
            if not finite(gram):
                raise diagnosis.gram_overflow(J, keep_X)
            solve = Solver(gram)                                      # (J J^T)^+
            try:
                step(net, J.rmatvec(solve(r)), 1.0)                   # theta <- theta - J^T (J J^T)^+ r
            except BadValue as exc:                                   # a step that does not fit: ref's
                raise diagnosis.unreachable(history, exc, stepping=True) from None
    converged = history[-1] <= tol
    return RestoreReport(converged=converged, iterations=len(history) - 1, residual=history[-1],
                         history=history, tol=tol,
                         note=note if converged else diagnosis.why_not_converged(history, solve, r.size))


#: restore aims no closer to ref than this many eps of the dtype times max(1, max |ref|): where
#: the dtype resolves every constraint it comes within 2 eps * max(1, max |ref|) of ref (measured
#: on 200 random networks in float64 and float32), while an absolute 1e-12 is less than one ulp
#: of 1e100 (1.9e84), and a millionth of float32's eps.
RESTORE_FLOOR_EPS = 16


def restore_tolerance(tol, ref):
    """(the tolerance ``restore`` stops at, a note): tol, or where tol asks for less than the dtype
    resolves at the size of what is held, its resolution there, RESTORE_FLOOR_EPS * eps *
    max(1, max |ref|) (at least 1: an output near 0 is still a sum of terms that need not be
    small), and then the note says so. So ref = 1e-3 and ref = 1e100 both converge on every CPU
    (an absolute 1e-12 at 1e100 asks for less than one unit in the last place, 1.9e84), and
    float32 (eps 1.2e-7) aims at what it can reach."""
    floor = RESTORE_FLOOR_EPS * eps(ref.dtype) * max(1.0, float(np.abs(ref).max()))
    if tol >= floor:
        return tol, ""
    return floor, (f"tol = {tol:.3g} is finer than {ref.dtype} resolves at max |ref| = "
                   f"{float(np.abs(ref).max()):.3g}: held to {RESTORE_FLOOR_EPS} eps * max(1, max |ref|) "
                   f"= {floor:.3g}")


@dataclass
class RestoreReport:
    """What ``restore`` did: it never loops forever and never pretends it converged.

    converged  : max |O_keep(keep_X) - ref| <= tol at the end
    iterations : Gauss-Newton steps taken
    residual   : the final max |O_keep(keep_X) - ref|
    history    : the residual before each step, and after the last one
    tol        : the tolerance it stopped at: the caller's tol, or the dtype's resolution at the
                 size of ref where tol asks for less (``restore_tolerance``)
    note       : "" when there is nothing to add; else why tol was raised to the floor, or why
                 the loop did not converge
    """
    converged: bool
    iterations: int
    residual: float
    history: list = field(default_factory=list)
    tol: float = 0.0
    note: str = ""

    def __str__(self):
        state = "converged" if self.converged else "NOT converged"
        return (f"restore: {state} after {self.iterations} iteration(s), "
                f"max |O - ref| = {self.residual:.3e}" + (f" ({self.note})" if self.note else ""))


class all_or_nothing:
    """A block after which the network holds its new parameters, or, on any failure or
    interruption inside it, the very bits it had at the start, in the same arrays."""

    def __init__(self, net):
        self.net, self.start = net, {k: v.copy() for k, v in net.params.items()}

    def __enter__(self):
        return self.net

    def __exit__(self, kind, error, traceback):
        if kind is not None:
            for k, v in self.start.items():
                if self.net.params[k].flags.writeable:
                    self.net.params[k][...] = v
