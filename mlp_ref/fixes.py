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
whose job that is).
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from . import _checks
from .jacobian import GramSolver, OutputJacobian, check_keep


def _G(net, X, G):
    """(X, G) checked: X (n, d) and G (n, K) or (K,)."""
    X = _checks.matrix("X", X, net.dtype, width=net.sizes[0], width_name="input columns")
    G = _checks.rows_or_vector("G", G, net.dtype, X.shape[0], net.sizes[-1])
    return X, G


def _rcond(rcond):
    """None (the solver's default) or a relative eigenvalue cut-off in (0, 1)."""
    if rcond is None:
        return None
    rcond = _checks.real("rcond", rcond, low=0.0, low_inclusive=False)
    if rcond >= 1.0:
        raise ValueError(f"rcond: expected a relative cut-off below 1 (or None), got {rcond}")
    return rcond


def _keep_X(net, X, keep_X):
    if keep_X is None:
        return X
    return _checks.matrix("keep_X", keep_X, net.dtype, width=net.sizes[0],
                          width_name="input columns")


def naive(net, X, G):
    """The plain gradient g = sum_i J_i^T G_i, the direction of ``loss.backward()``.

    Guarantee: none for out1. Its first-order change is -lr * J_1 g = -lr * K_12 G_2
    (K_12 the cross-output tangent kernel), O(lr) on every input.
    """
    X, G = _G(net, X, G)
    return net.gradient(X, G)


def masked(net, X, G, mask):
    """The gradient of the masked loss, the answer's ``loss2``: g with G replaced by mask * G.

    mask : array_like of 0/1, shape (K,) or (n, K)

    A 0 in the mask zeroes that column of G, so that output contributes nothing to the
    gradient. In the question, G's column 1 is *already* zero: masked(mask=[0, 1]) equals
    naive exactly, and out1 still drifts O(lr) whenever shared parameters move. A mask is
    the tool for a missing label, not for invariance.
    """
    X, G = _G(net, X, G)
    mask = _checks.rows_or_vector("mask", mask, net.dtype, *G.shape)
    if not np.all((mask == 0) | (mask == 1)):
        raise ValueError(f"mask: expected only 0s and 1s, got values {np.unique(mask)}")
    return net.gradient(X, mask * G)


def freeze(net, X, G, trainable=None):
    """The ``var_list`` recipe: the gradient, with every parameter not in ``trainable`` zeroed.

    trainable : list of parameter names, e.g. ["W2", "b2"] (the answer's var_list);
                defaults to the output layer's, [f"W{L}", f"b{L}"]

    Guarantee: if out1 does not depend on any trainable parameter, out1 is unchanged bit
    for bit, on every input and at every lr. With G = [0, -1], dW_L[:, 0] and db_L[0] are
    already zero, so training only the output layer never touches out1's weights. Cost:
    the shared trunk can no longer learn anything for out2.
    """
    X, G = _G(net, X, G)
    if trainable is None:
        trainable = [f"W{net.depth}", f"b{net.depth}"]
    trainable = check_trainable(net, trainable)
    g = net.gradient(X, G)
    return {k: (v if k in trainable else np.zeros_like(v)) for k, v in g.items()}


def check_trainable(net, trainable):
    if isinstance(trainable, str):
        trainable = [trainable]
    if not hasattr(trainable, "__iter__"):
        raise TypeError(f"trainable: expected a list of parameter names from {list(net.params)}, "
                        f"got {_checks.describe(trainable)}")
    trainable = list(trainable)
    unknown = [k for k in trainable if k not in net.params]
    if unknown:
        raise ValueError(f"trainable: unknown parameter names {unknown}; "
                         f"known: {list(net.params)}")
    return trainable


def nullspace(net, D, keep_X, keep=(0,), rcond=None, refine=None):
    """D - J^T (J J^T)^+ J D: the part of D that moves no kept output on keep_X (to first order).

    The orthogonal projection of D onto the null space of J, the Jacobian of outputs
    ``keep`` on the rows of keep_X, computed from the per-layer Gram factors (see
    ``jacobian``) without ever building J. Constraints that are redundant or
    numerically dependent are dropped by the rank-revealing solve (``GramSolver``): then
    the result is whatever is left, possibly zero (for instance when there are more
    independent constraints than parameters).

    Solving through J J^T squares J's condition number: on the seed network (small
    weights, near-identical hidden units, cond(J J^T) ~ 2e11) one solve leaves
    |J D| ~ 1e-8 |J g|. A ``refine`` pass projects the remainder J D once more with the same
    factorised Gram (iterative refinement), which multiplies the error by about
    eps * cond(J J^T); one pass brings the seed problem to ~1e-13. ``refine=None`` (the
    default) takes that pass only where it is needed, when cond(J J^T) > 1e6, i.e. when the
    first solve loses more than six digits to conditioning: the visible network (cond ~ 4e3)
    and the benchmark's (cond ~ 13) are at round-off without it, and the pass would cost as
    much as a third of the projection.
    """
    D = _checks.param_dict("D", D, net.param_shapes, net.dtype)
    keep_X = _checks.matrix("keep_X", keep_X, net.dtype, width=net.sizes[0],
                            width_name="input columns")
    refine = _check_refine(refine)
    J = OutputJacobian(net, keep_X, keep)
    solve = GramSolver(J.gram(), _rcond(rcond))
    D = {k: v.copy() for k, v in D.items()}             # ours: the caller's D stays as it was
    _refine(J, solve, D, 1)         # the projection itself is one pass of the refinement's update
    return _refine(J, solve, D, refine)


#: ``refine=None`` refines once when cond(J J^T) exceeds this (see ``nullspace``).
REFINE_ABOVE_COND = 1e6


def _check_refine(refine):
    """None (automatic) or a whole number of refinement passes >= 0."""
    return None if refine is None else _checks.positive_int("refine", refine, minimum=0)


def _refine(J, solve, D, passes):
    """``passes`` times, in place: D <- D - J^T (J J^T)^+ J D, projecting what is left of J D.

    J D is computed from D as it is (rounding and all), which is what makes each pass gain
    a factor ~ eps * cond(J J^T); D must be the caller's own (it is modified in place, which
    spares a second set of arrays as large as the parameters).
    """
    if passes is None:
        passes = int(solve.cond > REFINE_ABOVE_COND)
    for _ in range(passes):
        for l, E in J.weighted_signals(solve(J.matvec(D))).items():
            D[f"W{l}"] -= J.inputs[l].T @ E          # J^T alpha, one layer at a time: only one
            D[f"b{l}"] -= E.sum(axis=0)               # layer's correction is ever held in memory
    return D


def project(net, X, G, keep=(0,), keep_X=None, rcond=None, refine=None):
    """Null-space projection: D = g - J_1^T (J_1 J_1^T)^+ J_1 g, so that J_1 . D = 0.

    keep   : output indices to hold (any subset)
    keep_X : inputs on which to hold them, shape (n', d); defaults to X

    Guarantee: the kept outputs move O(lr^2) on keep_X (the first-order term is zero;
    the curvature of the network is not). On inputs that were not constrained the drift
    is O(lr) in general. Among all directions with J_1 . D = 0, D is the closest to g.
    """
    X, G = _G(net, X, G)
    if keep_X is not None and keep_X is not X:
        return nullspace(net, net.gradient(X, G), _keep_X(net, X, keep_X), keep, rcond, refine)
    return _project_on_batch(net, X, G, keep, rcond, refine)


def _project_on_batch(net, X, G, keep, rcond, refine):
    """``project`` when the kept outputs are held on the batch itself (keep_X = X).

    The same D as ``nullspace(net, net.gradient(X, G), X, keep)``, to roundoff, in fewer
    products, because the gradient and the Jacobian now live on the same rows:

    * one forward record serves both (``OutputJacobian(record=...)``);
    * g = sum over rows of a_{l-1}^T dz_l, and J^T alpha = the same with dz_l replaced by
      sum_j alpha_j S_l,j. Backprop is linear in G, so D = g - J^T alpha is simply the gradient
      of the output gradient G - alpha on the kept columns: its per-sample signals are
      dz_l - sum_j alpha_j S_l,j, and D costs one product a_{l-1}^T E_l per layer, g none;
    * J g comes from the Gram's own factors (``matvec_gradient``), without g.

    Only the refinement passes (J D and J^T alpha on the D we really hold) need full products.
    """
    refine = _check_refine(refine)
    J, solve, D = _first_pass_on_batch(net, X, G, keep, rcond)
    return _refine(J, solve, D, refine)     # the record's z_l and G's signals are freed by now


def _first_pass_on_batch(net, X, G, keep, rcond):
    """J on X (sharing one forward record), its Gram solver, and D = g - J^T (J J^T)^+ J g."""
    record = net.forward(X)
    J = OutputJacobian(net, keep=keep, record=record)
    stages = net.backward(record, G, input_grad=False, param_grads=False).stages
    E = {l: stages[f"dz{l}"] for l in range(1, net.depth + 1)}    # G's per-sample signals dz_l
    del record, stages         # J holds the layer inputs; the z_l and da_l are not needed again,
                               # and letting them go now lowers the projection's peak memory
    solve = GramSolver(J.gram(), _rcond(rcond))
    alpha = solve(J.matvec_gradient(E))
    J.drop_input_kernels()     # not needed again: freed before D, the largest array, is made
    for l, weighted in J.weighted_signals(alpha).items():
        E[l] -= weighted       # E_l = dz_l - sum_j alpha_j S_l,j, written over dz_l (ours)
    return J, solve, J.from_signals(E, consume=True)


def penalty(net, X, G, keep=(0,), ref=None, lam=10.0):
    """The gradient of L + lam/2 * ||O_keep(X) - ref||^2: g + lam * J_keep^T (O_keep - ref).

    ref : the values to hold, shape (n, len(keep)), or (n,) when one output is kept;
          defaults to the current outputs (then the penalty term's gradient is zero)

    The penalty's own output gradient is lam * (O_keep - ref), so we simply add it to G's
    kept columns and backpropagate once. At the start O_keep = ref: the first step equals
    the naive one. Over many steps it is a restoring force that grows with the drift,
    never a guarantee: the drift settles where lam * drift balances the pull of G.
    """
    X, G = _G(net, X, G)
    keep = check_keep(keep, net.sizes[-1])
    lam = _checks.real("lam", lam, low=0.0)
    out = net(X)
    ref = out[:, keep] if ref is None else check_ref(ref, X.shape[0], keep, net.dtype)
    G_total = np.array(G)
    G_total[:, keep] += lam * (out[:, keep] - ref)
    return net.gradient(X, G_total)


def check_ref(ref, n, keep, dtype):
    """ref as (n, q): accepts (n,) when a single output is kept."""
    ref = _checks.as_array("ref", ref, dtype)
    if ref.shape == (n,) and len(keep) == 1:
        ref = ref[:, None]
    if ref.shape != (n, len(keep)):
        hint = f" or ({n},)" if len(keep) == 1 else ""
        raise ValueError(f"ref: expected shape ({n}, {len(keep)}){hint} (rows of keep_X, "
                         f"kept outputs), got shape {ref.shape}")
    return ref


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
    """
    X, G = _G(net, X, G)
    keep = check_keep(keep, net.sizes[-1])
    rcond = _rcond(rcond)
    record = net.forward(_keep_X(net, X, keep_X))
    g = net.gradient(X, G)
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
    """
    converged: bool
    iterations: int
    residual: float
    history: list = field(default_factory=list)

    def __str__(self):
        state = "converged" if self.converged else "NOT converged"
        return (f"restore: {state} after {self.iterations} iteration(s), "
                f"max |O - ref| = {self.residual:.3e}")


def restore(net, keep_X, ref, keep=(0,), tol=1e-12, max_iter=20, rcond=None):
    """Gauss-Newton retraction onto {O_keep(keep_X) = ref}, in place.

    Repeats  theta <- theta - J^T (J J^T)^+ (O_keep(keep_X) - ref)  (the smallest step that
    cancels the residual to first order) until max |O_keep - ref| <= tol or ``max_iter``
    steps. Near the constraint the residual squares at each step (quadratic convergence),
    so after a projected step of size lr (residual O(lr^2)) one or two steps reach roundoff.

    ref : shape (len(keep_X), len(keep)), or (n,) when one output is kept
    Returns a RestoreReport.
    """
    keep_X = _checks.matrix("keep_X", keep_X, net.dtype, width=net.sizes[0],
                            width_name="input columns")
    keep = check_keep(keep, net.sizes[-1])
    ref = check_ref(ref, keep_X.shape[0], keep, net.dtype)
    tol = _checks.real("tol", tol, low=0.0, low_inclusive=False)
    max_iter = _checks.positive_int("max_iter", max_iter)
    rcond = _rcond(rcond)
    history = []
    for it in range(max_iter + 1):
        record = net.forward(keep_X)
        r = (record.output[:, keep] - ref).reshape(-1)   # rows c = i * q + j, as J's
        history.append(float(np.max(np.abs(r))))
        if history[-1] <= tol or it == max_iter or not np.isfinite(history[-1]):
            break
        J = OutputJacobian(net, keep=keep, record=record)   # only when a step follows
        net.step(J.rmatvec(GramSolver(J.gram(), rcond)(r)), 1.0)
    return RestoreReport(converged=history[-1] <= tol, iterations=len(history) - 1,
                         residual=history[-1], history=history)


RULES = {
    "naive": naive,
    "masked": masked,
    "freeze": freeze,
    "project": project,
    "penalty": penalty,
    "span": span_project,
}
