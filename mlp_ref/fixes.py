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

from contextlib import contextmanager
from dataclasses import dataclass, field

import numpy as np

from . import _checks, jacobian
from ._checks import BadValue, check_inputs
# the checks that know what a model is, also read as fixes.check_net, fixes.MAX_REFINE, ...
from ._model_checks import (MAX_REFINE, check_net, check_ref, check_refine,  # noqa: F401
                            check_trainable, check_XG)
from .jacobian import GramSolver, check_keep, check_rcond, flatten, unflatten
# the accuracy accounting of nullspace, also read as fixes.PrecisionWarning, fixes.HELD_EPS, ...
from ._diagnosis import (HELD_EPS, PrecisionWarning, assured_cond, held_unassured,  # noqa: F401
                         length, passes_leave, warn_if_not_held)


def naive(net, X, G):
    """The plain gradient g = sum_i J_i^T G_i, the direction of ``loss.backward()``.

    Guarantee: none for out1. Its first-order change is -lr * J_1 g = -lr * K_12 G_2
    (K_12 the cross-output tangent kernel), O(lr) on every input.
    """
    X, G = check_XG(net, X, G)
    return net.gradient(X, G)


def masked(net, X, G, mask):
    """The gradient of the masked loss, the answer's ``loss2``: g with G replaced by mask * G.

    mask : array_like of 0/1, shape (K,) or (n, K)

    A 0 in the mask zeroes that column of G, so that output contributes nothing to the
    gradient. In the question, G's column 0 (out1's) is *already* zero: masked(mask=[0, 1]) equals
    naive exactly, and out1 still drifts O(lr) whenever shared parameters move. A mask is
    the tool for a missing label, not for invariance.
    """
    X, G = check_XG(net, X, G)
    mask = _checks.mask("mask", mask, net.dtype, *G.shape)
    return net.gradient(X, mask * G)


def freeze(net, X, G, trainable=None):
    """The ``var_list`` recipe: the gradient, with every parameter not in ``trainable`` zeroed.

    trainable : list of parameter names, e.g. ["W2", "b2"] (the answer's var_list);
                defaults to the output layer's, ``net.output_keys``

    Guarantee: if out1 does not depend on any trainable parameter, out1 is unchanged bit
    for bit, on every input and at every lr. With G = [0, -1], dW_L[:, 0] and db_L[0] are
    already zero, so training only the output layer never touches out1's weights. Cost:
    the shared trunk can no longer learn anything for out2.
    """
    X, G = check_XG(net, X, G)
    trainable = check_trainable(net, net.output_keys if trainable is None else trainable)
    g = net.gradient(X, G)
    return {k: (v if k in trainable else np.zeros_like(v)) for k, v in g.items()}


def project(net, X, G, keep=(0,), keep_X=None, rcond=None, refine=1):
    """Null-space projection: D = g - J_1^T (J_1 J_1^T)^+ J_1 g, so that J_1 . D = 0.

    keep   : output indices to hold (any subset)
    keep_X : inputs on which to hold them, shape (n', d); defaults to X

    Guarantee: the kept outputs move O(lr^2) on keep_X (the first-order term is zero;
    the curvature of the network is not). On inputs that were not constrained the drift
    is O(lr) in general. Among all directions with J_1 . D = 0, D is the closest to g.
    """
    X, G = check_XG(net, X, G)
    keep_X = X if keep_X is None else check_inputs(net, keep_X, "keep_X")
    g = net.gradient(X, G)
    try:
        return nullspace(net, g, keep_X, keep, rcond, refine)
    except ValueError as exc:
        if getattr(exc, "argument", None) != "D":     # D is ours here, made from G: G's size is to blame
            raise
        raise projection_overflow(net, G, f" (a gradient of max |g| = {largest(g):.3g})") from None


@_checks.overflow_is_reported
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

    Accuracy, with refine >= 1 and m constraints: |J D| <= (32 + m) * eps * ||J| (|D| +
    |D_given|)|| (eps of the network's dtype; |J| |x| the product of absolute values,
    ``magnitude``; ``HELD_EPS``), about what rounding J . D_given and D to the dtype leaves.
    Where it is not assured (constraints dropped, or cond(J J^T) above ``assured_cond``) the
    result is measured, and a PrecisionWarning says by how much it falls short and why (above
    ``assured_cond``, falling short of it by no more than the passes leave at that condition
    number, (eps cond)^(1 + refine) |J D_given|, is no shortfall: it is all they can do):
    constraints the dtype cannot resolve (float32 drops each whose eigenvalue of J J^T is below
    m * 1.2e-7 times the largest: on the seed network 4 of 8, and |J D| stays at 7e-4 |J g|,
    where 3e-8 is float32's own rounding), or a condition number too large for the passes.
    """
    net = check_net(net)
    D = _checks.param_dict("D", D, net.param_shapes, net.dtype)
    keep_X = check_inputs(net, keep_X, "keep_X")
    rcond, refine = check_rcond(rcond), check_refine(refine)
    J = jacobian.of(net, keep_X, keep)
    gram = finite_gram(J, keep_X)
    solve = GramSolver(gram, rcond)                       # (J J^T)^+
    given = D
    for _ in range(1 + refine):                           # the projection, then its refinements
        alpha = solve(J.matvec(D))                        # (J J^T)^+ J D
        D = subtract(D, J.rmatvec(alpha))                 # D - J^T alpha
        if not all(_checks.finite(v) for v in D.values()):
            raise BadValue(f"D: expected values for which D - J^T (J J^T)^+ J D stays finite in "
                           f"{net.dtype}, got max |D| = {largest(given):.3g}; scale D down", argument="D")
    warn_if_not_held(J, gram, solve, given, D, refine)
    return D


def projection_overflow(net, G, detail=""):
    """The error for a projected direction that overflows: D is made from G, so G is named."""
    return BadValue(f"G: expected values for which the projected direction stays finite in "
                    f"{net.dtype}, got max |G| = {float(np.abs(G).max()):.3g}{detail}", argument="G")


def largest(D):
    """max |D| over every array of a dict like params."""
    return max(float(np.abs(v).max()) for v in D.values())


def subtract(A, B):
    """A - B for two dicts like params."""
    return {k: A[k] - B[k] for k in A}


def project_dense(net, X, G, keep=(0,), keep_X=None):
    """``project`` with J built: D = g - J^+ J g, for small networks and for teaching.

    J (n' q, P) has one row per kept output and row of keep_X, dO/dtheta, one column per
    parameter. J^+ = J^T (J J^T)^+ is its pseudo-inverse, computed by NumPy from J's SVD,
    which does not square J's condition number as the Gram route does. Memory n' q P: this is
    what ``project`` avoids by never building J; the two agree to roundoff.
    """
    X, G = check_XG(net, X, G)
    keep_X = X if keep_X is None else check_inputs(net, keep_X, "keep_X")
    g = net.gradient(X, G)
    J = jacobian.dense_rows(net, keep_X, keep)              # (n' q, P)
    with np.errstate(over="ignore", invalid="ignore"):      # an overflow is named below
        D = flatten(g) - np.linalg.pinv(J) @ (J @ flatten(g))    # g - J^+ J g
    if not np.isfinite(D).all():
        raise projection_overflow(net, G)
    return unflatten(D, g)


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
    X, G = check_XG(net, X, G)
    keep = check_keep(keep, net.sizes[-1])
    lam = _checks.real("lam", lam, low=0.0)
    top = float(np.finfo(net.dtype).max)
    if lam > top:                   # NumPy 2 would round it to inf in the network's dtype
        raise BadValue(f"lam: expected a number <= {top:.3g}, which fits in {net.dtype}, got {lam:g}", argument="lam")
    out = net(X)
    ref = out[:, keep] if ref is None else check_ref(ref, X.shape[0], keep, net.dtype)
    G_total = np.array(G)
    with np.errstate(over="ignore", invalid="ignore"):
        residual = out[:, keep] - ref
        G_total[:, keep] += lam * residual
    if not np.isfinite(residual).all():
        raise BadValue(f"ref: expected values whose distance to the outputs stays finite in "
                       f"{net.dtype}, got max |ref| = {float(np.abs(ref).max()):.3g}", argument="ref")
    if not np.isfinite(G_total).all():
        raise BadValue(f"lam: expected a weight for which G + lam * (O_keep - ref) stays finite "
                       f"in {net.dtype}, got lam = {lam:.3g} (max |O_keep - ref| = "
                       f"{float(np.abs(residual).max()):.3g})", argument="lam")
    try:
        return net.gradient(X, G_total)
    except ValueError as exc:           # G_total overflowed the backward pass: whose part is large?
        big_G, far = float(np.abs(G).max()), float(np.abs(residual).max())
        if getattr(exc, "argument", None) != "G" or lam * far <= big_G:
            raise                       # the caller's G: its own message says so
        blamed = "lam" if lam >= far else "ref"
        raise BadValue(f"{blamed}: expected values for which the pull lam * (O_keep - ref) keeps the "
                       f"backward pass finite in {net.dtype}, got max |lam * (O_keep - ref)| = "
                       f"{lam * far:.3g} (lam = {lam:.3g}, max |O_keep - ref| = {far:.3g}, "
                       f"max |G| = {big_G:.3g})", argument=blamed) from None


def penalty_limit(net, X, keep=(0,)):
    """The largest stable lr * lam for ``penalty`` on X at the current parameters:
    2 / lambda_max(J J^T), J the Jacobian of outputs ``keep`` on the rows of X.

    A step multiplies the residual O_keep - ref by I - lr * lam * J J^T (to first order), whose
    eigenvalues 1 - lr * lam * lambda_i lie in (-1, 1) exactly when lr * lam * lambda_max < 2.
    The bound moves as the network trains: check it again after many steps.
    """
    X = check_inputs(check_net(net), X)
    lam_max = np.linalg.eigvalsh(finite_gram(jacobian.of(net, X, keep), X, "X", "X"))[-1]
    return 2.0 / lam_max if lam_max > 0 else np.inf


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
    X, G = check_XG(net, X, G)
    keep = check_keep(keep, net.sizes[-1])
    keep_X = X if keep_X is None else check_inputs(net, keep_X, "keep_X")
    rcond = check_rcond(rcond)
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


#: restore aims no closer to ref than this many eps of the dtype times max(1, max |ref|): where
#: the dtype resolves every constraint it comes within 2 eps * max(1, max |ref|) of ref (measured
#: on 200 random networks in float64 and float32), while an absolute 1e-12 is less than one ulp
#: of 1e100 (1.9e84), and a millionth of float32's eps.
RESTORE_FLOOR_EPS = 16


def restore_tolerance(tol, ref):
    """(the tolerance ``restore`` stops at, a note): tol, or where tol asks for less than the dtype
    resolves at the size of what is held, its resolution there, RESTORE_FLOOR_EPS * eps *
    max(1, max |ref|) (at least 1: an output near 0 is still a sum of terms that need not be
    small), and then the note says so."""
    floor = RESTORE_FLOOR_EPS * float(np.finfo(ref.dtype).eps) * max(1.0, float(np.abs(ref).max()))
    if tol >= floor:
        return tol, ""
    return floor, (f"tol = {tol:.3g} is finer than {ref.dtype} resolves at max |ref| = "
                   f"{float(np.abs(ref).max()):.3g}: held to {RESTORE_FLOOR_EPS} eps * max(1, max |ref|) "
                   f"= {floor:.3g}")


def largest_residual(r, ref):
    """max |r| for the residual r = O_keep - ref, refused naming ref when it is not finite (the
    outputs are: the forward pass checks them)."""
    top = float(np.max(np.abs(r)))
    if not np.isfinite(top):
        raise BadValue(f"ref: expected values whose distance to the outputs stays finite in "
                       f"{r.dtype}, got max |ref| = {float(np.abs(ref).max()):.3g}", argument="ref")
    return top


def restore_report(history, tol, note, solve, m):
    """The RestoreReport of a finished loop: ``solve``, the last step's GramSolver (None: no
    step), m the number of constraints. When it did not converge, the note says why."""
    converged = history[-1] <= tol
    if not converged:
        note = why_not_converged(history, solve, m)
    return RestoreReport(converged=converged, iterations=len(history) - 1, residual=history[-1],
                         history=history, tol=tol, note=note)


def why_not_converged(history, solve, m):
    """The reason a restore stopped short of its tolerance, from its residuals and last solve."""
    if solve is not None and solve.rank < m:
        return (f"{m - solve.rank} of the {m} constraints have eigenvalues of J J^T at most rcond = "
                f"{solve.rcond:.2g} times the largest (zero or dependent rows, or beyond the dtype's "
                f"resolution), and no Gauss-Newton step moves the residual along them")
    if len(history) > 1 and history[-1] > 0.5 * min(history[:-1]):
        return (f"the residual stopped falling (at {history[-1]:.3g}, its least {min(history):.3g}): "
                f"ref may be too far for Gauss-Newton's linear model, or its steps no more exact "
                f"than eps * cond(J J^T) allows, cond = {solve.cond:.3g}")
    return "the residual was still falling: a larger max_iter may reach tol"


@_checks.overflow_is_reported
def finite_gram(J, keep_X, name="keep_X (X when not given)", short="keep_X"):
    """J J^T, refused when it overflows, naming what is to blame: the inputs ``keep_X`` (the
    argument ``name``, ``short`` in formulas) when their own products a0 a0^T overflow, else the
    parameters (hidden activations or signals too large)."""
    gram = J.gram()
    if _checks.finite(gram):
        return gram
    broken = [l for l, A in J.inputs.items() if not _checks.finite(A @ A.T)]
    if broken and broken[0] == 1:
        raise BadValue(f"{name}: expected values for which the Gram J J^T (which holds "
                       f"{short} @ {short}.T) stays finite, got max |{short}| = "
                       f"{float(np.abs(keep_X).max()):.3g}; scale {short} down", argument=short)
    what = (f"the inputs of layer {broken[0]}, a{broken[0] - 1}, reach "
            f"{float(np.abs(J.inputs[broken[0]]).max()):.3g}" if broken else
            "its signals (the output side's weights) overflow")
    raise BadValue(f"net: the Gram J J^T overflows {gram.dtype}: {what}, with max |{short}| = "
                   f"{float(np.abs(keep_X).max()):.3g}; the parameters are too large", argument="net")


def check_restore(net, keep_X, ref, keep, tol, max_iter, rcond):
    """The arguments of ``restore``, checked (``fast.restore`` takes the same)."""
    keep_X = check_inputs(check_net(net), keep_X, "keep_X")
    keep = check_keep(keep, net.sizes[-1])
    ref = check_ref(ref, keep_X.shape[0], keep, net.dtype)
    tol = _checks.real("tol", tol, low=0.0, low_inclusive=False)
    max_iter = _checks.whole_number("max_iter", max_iter)
    return keep_X, keep, ref, tol, max_iter, check_rcond(rcond)


@contextmanager
def all_or_nothing(net):
    """On any failure or interruption inside the block, every parameter goes back to the very
    bits it had at the start, in the same arrays; then the error goes on."""
    start = {k: v.copy() for k, v in net.params.items()}
    try:
        yield
    except BaseException:
        for k, v in start.items():
            if net.params[k].flags.writeable:
                net.params[k][...] = v
        raise


def restoring_step(net, D, residual, step=None):
    """theta <- theta - D (``step`` is net.step or fast.step), the error blaming ``ref`` when the
    step, built from ref, does not fit the parameters."""
    try:
        (step or type(net).step)(net, D, 1.0)
    except ValueError as exc:
        if getattr(exc, "argument", None) not in ("D", "lr"):   # the network's own (read-only, ...)
            raise
        raise BadValue(f"ref: expected values the network can reach, got max |O - ref| = "
                       f"{residual:.3g}, whose Gauss-Newton step does not fit the "
                       f"parameters ({exc})", argument="ref") from None


@contextmanager
def blamed_on_ref(history):
    """A forward pass of ``restore`` that overflows after its first steps: the steps that ref
    asked for did it, so ref is named (``history``: the residuals so far; none: the network
    was broken before any step, and says so itself). The residual's own overflow is silent
    here: ``largest_residual`` names it."""
    try:
        with np.errstate(over="ignore", invalid="ignore"):
            yield
    except ValueError as exc:
        if not history or getattr(exc, "argument", None) != "forward":
            raise
        raise BadValue(f"ref: expected values the network can reach: {len(history)} restoring "
                       f"step(s) toward max |O - ref| = {history[0]:.3g} made its output "
                       f"overflow ({exc})", argument="ref") from None


def restore(net, keep_X, ref, keep=(0,), tol=1e-12, max_iter=20, rcond=None):
    """Gauss-Newton retraction onto {O_keep(keep_X) = ref}, in place.

    Repeats  theta <- theta - J^T (J J^T)^+ (O_keep(keep_X) - ref)  (the smallest step that
    cancels the residual to first order) until max |O_keep - ref| <= tol or ``max_iter``
    steps. Near the constraint the residual squares at each step (quadratic convergence), so
    after a projected step of size lr (residual O(lr^2)) a few steps reach roundoff: two to
    four at the tutorials' step sizes.

    The tolerance scales with what is held where tol asks for less than the dtype resolves: it
    is max(tol, 16 eps * max(1, max |ref|)) (``restore_tolerance``), so that ref = 1e-3 and
    ref = 1e100 both converge on every CPU (an absolute 1e-12 at 1e100 asks for less than one
    unit in the last place, 1.9e84), and float32 (eps 1.2e-7) aims at what it can reach. The
    report's note says when tol was raised so; a report that did not converge says why.

    ref : shape (len(keep_X), len(keep)), or (n,) when one output is kept
    Returns a RestoreReport.
    """
    keep_X, keep, ref, tol, max_iter, rcond = check_restore(net, keep_X, ref, keep, tol,
                                                            max_iter, rcond)
    tol, note = restore_tolerance(tol, ref)
    history, solve = [], None
    with all_or_nothing(net):
        for it in range(max_iter + 1):
            with blamed_on_ref(history):
                r = (net(keep_X)[:, keep] - ref).reshape(-1)  # rows c = i q + j, as J's
            history.append(largest_residual(r, ref))
            if history[-1] <= tol or it == max_iter:
                break
            J = jacobian.of(net, keep_X, keep)
            solve = GramSolver(finite_gram(J, keep_X), rcond)     # (J J^T)^+
            with np.errstate(over="ignore", invalid="ignore"):    # an overflow is named by the step
                D = J.rmatvec(solve(r))                           # J^T (J J^T)^+ r
            restoring_step(net, D, history[-1])
    return restore_report(history, tol, note, solve, r.size)


from .baselines import Bases, agem, ewc, ewc_merge, fisher_diagonal, gpm, gpm_bases  # noqa: E402,F401
