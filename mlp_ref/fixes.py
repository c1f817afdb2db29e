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

import numpy as np

from . import jacobian
from .baselines import Bases, agem, ewc, ewc_merge, fisher_diagonal, gpm, gpm_bases  # noqa: F401
from .boundary import checks, diagnosis
from .boundary.checks import all_or_nothing, check_inputs, check_keep, check_rcond

# what a caller of the rules may catch or read: the warning, restore's report; and the field's
# rules, A-GEM, EWC and GPM, written in ``baselines``, read here as fixes.agem, fixes.gpm, ...
from .boundary.diagnosis import PrecisionWarning, RestoreReport, finite_gram, warn_if_not_held  # noqa: F401
from .boundary.model_checks import (
    check_net,
    check_nullspace,
    check_penalty,
    check_ref,
    check_restore,
    check_rule,
    check_trainable,
    check_XG,
)
from .jacobian import flatten, unflatten
from .pseudoinverse import GramSolver


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
    mask = checks.mask("mask", mask, net.dtype, *G.shape)
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
    X, G, keep_X = check_rule(net, X, G, keep_X)
    g = net.gradient(X, G)
    with diagnosis.made_from_G(net, G, g):           # D is made from G: an overflow is G's
        return nullspace(net, g, keep_X, keep, rcond, refine)


@checks.overflow_is_reported
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
    measured, and a PrecisionWarning says why it falls short (``diagnosis.warn_if_not_held``).
    """
    D, keep_X, rcond, refine = check_nullspace(net, D, keep_X, rcond, refine)
    J = jacobian.of(net, keep_X, keep)
    gram = finite_gram(J, keep_X)
    solve = GramSolver(gram, rcond)                       # (J J^T)^+
    given = D
    for _ in range(1 + refine):                           # the projection, then its refinements
        alpha = solve(J.matvec(D))                        # (J J^T)^+ J D
        D = subtract(D, J.rmatvec(alpha))                 # D - J^T alpha
        diagnosis.finite_direction(D, given, net.dtype)
    warn_if_not_held(J, gram, solve, given, D, refine)
    return D


def subtract(A, B):
    """A - B for two dicts like params."""
    return {k: A[k] - B[k] for k in A}


@checks.overflow_is_reported
def project_dense(net, X, G, keep=(0,), keep_X=None):
    """``project`` with J built: D = g - J^+ J g, for small networks and for teaching.

    J (n' q, P) has one row per kept output and row of keep_X, dO/dtheta, one column per
    parameter. J^+ = J^T (J J^T)^+ is its pseudo-inverse, computed by NumPy from J's SVD,
    which does not square J's condition number as the Gram route does. Memory n' q P: this is
    what ``project`` avoids by never building J; the two agree to roundoff.
    """
    X, G, keep_X = check_rule(net, X, G, keep_X)
    g = net.gradient(X, G)
    J = jacobian.dense_rows(net, keep_X, keep)              # (n' q, P)
    D = flatten(g) - np.linalg.pinv(J) @ (J @ flatten(g))   # g - J^+ J g
    diagnosis.finite_projection(net, G, D)
    return unflatten(D, g)


@checks.overflow_is_reported
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
    X, G, keep, lam = check_penalty(net, X, G, keep, lam)
    out = net(X)
    ref = out[:, keep] if ref is None else check_ref(ref, X.shape[0], keep, net.dtype)
    residual = out[:, keep] - ref                          # O_keep - ref
    G_total = np.array(G)
    G_total[:, keep] += lam * residual                     # G + the penalty's output gradient
    with diagnosis.pulled(G, G_total, residual, ref, lam):    # an overflow: G's, lam's or ref's?
        return net.gradient(X, G_total)


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
    X, G, keep_X = check_rule(net, X, G, keep_X)
    keep, rcond = check_keep(keep, net.sizes[-1]), check_rcond(rcond)
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


def restore(net, keep_X, ref, keep=(0,), tol=1e-12, max_iter=20, rcond=None):
    """Gauss-Newton retraction onto {O_keep(keep_X) = ref}, in place.

    Repeats  theta <- theta - J^T (J J^T)^+ (O_keep(keep_X) - ref)  (the smallest step that
    cancels the residual to first order) until max |O_keep - ref| <= tol or ``max_iter``
    steps. Near the constraint the residual squares at each step (quadratic convergence), so
    after a projected step of size lr (residual O(lr^2)) a few steps reach roundoff: two to
    four at the tutorials' step sizes.

    The tolerance is max(tol, 16 eps * max(1, max |ref|)): no finer than the dtype resolves at
    the size of what is held (``diagnosis.restore_tolerance``). The report says when tol was
    raised so, and why when it did not converge.

    ref : shape (len(keep_X), len(keep)), or (n,) when one output is kept
    Returns a RestoreReport.
    """
    keep_X, keep, ref, tol, max_iter, rcond = check_restore(net, keep_X, ref, keep, tol,
                                                            max_iter, rcond)
    tol, note = diagnosis.restore_tolerance(tol, ref)
    history, solve = [], None
    with all_or_nothing(net):
        for it in range(max_iter + 1):
            with diagnosis.blamed_on_ref(history):
                r = (net(keep_X)[:, keep] - ref).reshape(-1)  # rows c = i q + j, as J's
            history.append(diagnosis.largest_residual(r, ref))
            if history[-1] <= tol or it == max_iter:
                break
            J = jacobian.of(net, keep_X, keep)
            solve = GramSolver(finite_gram(J, keep_X), rcond)     # (J J^T)^+
            with np.errstate(over="ignore", invalid="ignore"):    # an overflow is named by the step
                D = J.rmatvec(solve(r))                           # J^T (J J^T)^+ r
            diagnosis.restoring_step(net, D, history[-1])
    return diagnosis.restore_report(history, tol, note, solve, r.size)
