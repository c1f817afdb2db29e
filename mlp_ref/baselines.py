"""The field's baselines, as their formulas: A-GEM, EWC and GPM beside the exact projection.

Continual learning and model editing compare every new rule with these. Each returns a
direction D (a dict like params; a step is theta <- theta - lr * D), as the rules of ``fixes``
do, and says what it holds:

    rule   holds, on the memory (old data)                     per step, beyond a gradient
    agem   nothing exactly: the memory's loss does not rise    one more gradient, a dot product
           to first order (one averaged inequality)
    ewc    nothing exactly: a pull back to the old parameters  nothing (the Fisher: once a task)
           weighted by the diagonal Fisher (a penalty)
    gpm    every layer's input span: at threshold 1.0 every    a (d x r) projection per layer
           output on every memory row moves only by round-off
           amplified by the stepped weights (``gpm``: it
           grows with lr); below 1.0, approximately

(``fixes.project`` with keep_X = the memory is OGD, Farajtabar et al. 2019: the kept outputs to
O(lr^2) on the memory, through a Gram of their n = rows x kept outputs constraints.) GPM holds
more than was asked, every output through every unit, and so leaves the new task less to learn;
its cost does not grow with the memory: each layer's basis comes from a (d x d) matrix
accumulated over any number of rows.

Every rule works on every model of the package (MLP, SplitHeads, TwoTower), through the MLPs
it is made of (``net.pieces()``), or is refused with a TypeError starting ``net:``.
"""
from __future__ import annotations

import warnings
from dataclasses import dataclass
from functools import partial

import numpy as np

from .boundary import diagnosis
from .boundary.checks import (
    all_finite,
    check_inputs,
    check_output_grads,
    check_params_like,
    check_real,
    checked,
    eps,
    tiny,
)
from .boundary.model_checks import (
    check_anchors,
    check_bases,
    check_batches,
    check_cut,
    check_fisher,
    check_fishers,
    check_net,
    check_threshold,
)
from .pseudoinverse import PrecisionWarning
from .network import dot  # noqa: F401  (baselines.dot: the inner product of two dicts like params)

# -- A-GEM ---------------------------------------------------------------------------------
#: What each rule takes, beside it (checked once, at the door: ``boundary.checks.checked``), in order.
AGEM = {"net": check_net, "X": check_inputs, "G": check_output_grads, "keep_X": check_inputs,
        "keep_G": check_output_grads}


def agem(net, X, G, keep_X, keep_G):
    """Averaged Gradient Episodic Memory (Chaudhry et al. 2019): g, with the component that
    would raise the memory's loss removed when, and only when, there is one.

        g = gradient(X, G),   r = gradient(keep_X, keep_G)      (r: the memory's gradient)
        D = g - min(0, g.r) / (r.r) * r                          (D = g when r.r = 0)

    X (n, d), G (n, K) or (K,): the new batch and dL/dO there; keep_X (m, d), keep_G (m, K) or
    (K,): the memory and the gradient of its loss with respect to its outputs.

    Guarantee: D.r >= 0 to round-off (D.r = 0 but for the dots' and the subtraction's rounding,
    at most a few times P eps |g| |r| for P parameters, when the correction is made), so a small
    step does not raise the memory's loss, to first order: one averaged inequality, not a held
    output. When g.r >= 0 D is g itself, bit for bit. This holds at every scale of g and r: where
    a dot is so small that its products may have underflowed (below P tiny / eps: r's entries
    1e-23 in float32, or 1e-170 in float64, square to below the smallest number), or so large it
    overflowed, they are taken again of g 2^-a and r 2^-b, a and b the exponents of their largest
    entries (``_agem_scaled``); scaling by a power of two is exact, so D is the same formula's.
    """
    net, X, G, keep_X, keep_G = checked(AGEM, locals())
    g = net.gradient(X, G)
    r = net.gradient(keep_X, keep_G)
    with np.errstate(over="ignore", under="ignore", invalid="ignore"):   # judged on the next line
        g_r, r_r = dot(g, r), dot(r, r)
    floor = net.n_params * tiny(net.dtype) / eps(net.dtype)   # below it, underflow may decide the sign
    if not (floor < abs(g_r) < np.inf and floor < r_r < np.inf):
        return _agem_scaled(g, r)
    if g_r >= 0:
        return g
    return {k: g[k] - (g_r / r_r) * r[k] for k in g}


def _agem_scaled(g, r):
    """A-GEM's D from g and r scaled by powers of two, so that no dot under- or overflows."""
    a, b = _exponent(g), _exponent(r)
    if a is None or b is None:                                  # g = 0 or r = 0: nothing to remove
        return g
    g_hat = {k: np.ldexp(v, -a) for k, v in g.items()}          # exact: a power of two
    r_hat = {k: np.ldexp(v, -b) for k, v in r.items()}
    g_r, r_r = dot(g_hat, r_hat), dot(r_hat, r_hat)             # |entries| <= 1: no overflow, r.r >= 1/4
    if g_r >= 0:
        return g
    c = g_r / r_r                        # g.r / r.r = c 2^(a-b), so D = g - c r_hat 2^a = 2^a (g_hat - c r_hat)
    return {k: np.ldexp(g_hat[k] - c * r_hat[k], a) for k in g}


def _exponent(D):
    """e with 2^(e-1) <= max |D| < 2^e (np.frexp's), or None when D is zero everywhere."""
    top = max(float(np.max(np.abs(v))) for v in D.values())
    return None if top == 0 else int(np.frexp(top)[1])


# -- EWC -----------------------------------------------------------------------------------
EWC = {"net": check_net, "X": check_inputs, "G": check_output_grads, "fisher": check_fisher,
       "anchor": check_params_like, "lam": partial(check_real, low=0.0)}


def ewc(net, X, G, fisher, anchor, lam):
    """Elastic Weight Consolidation (Kirkpatrick et al. 2017): the gradient of
    L + lam/2 sum_k F_k (theta_k - anchor_k)^2,

        D = g + lam * fisher * (theta - anchor)        per parameter, elementwise

    fisher : dict like params, >= 0     the diagonal Fisher of the old task (``fisher_diagonal``)
    anchor : dict like params           the parameters after the old task
    lam    : >= 0                       the penalty's weight

    Several old tasks: sum_t F_t (theta - anchor_t) = F (theta - anchor) with F = sum_t F_t and
    anchor = sum_t F_t anchor_t / F (``ewc_merge``): one call holds them all.

    Guarantee: none. At the anchor the pull is zero, so the first step is the plain one; after
    that it is a restoring force whose weight nothing ties to an output: like ``fixes.penalty``,
    a pull, never a guarantee.
    """
    net, X, G, fisher, anchor, lam = checked(EWC, locals())
    g = net.gradient(X, G)
    with np.errstate(over="ignore", invalid="ignore"):                    # an overflow is named below
        D = {k: g[k] + lam * fisher[k] * (net.params[k] - anchor[k]) for k in g}
    if not all_finite(D.values()):
        raise diagnosis.too_large("lam", "lam * fisher * (theta - anchor)", net.dtype, f"lam = {lam:.3g}")
    return D


EWC_MERGE = {"fishers": check_fishers, "anchors": check_anchors}


def ewc_merge(fishers, anchors):
    """(F, anchor) of several tasks' penalties as one: F = sum_t F_t and anchor = sum_t F_t
    anchor_t / F (anchor_t's last where F = 0), so that F (theta - anchor) = sum_t F_t (theta -
    anchor_t) for every theta: the gradient of the summed penalties, exactly (but round-off).

    fishers : non-empty list of dicts like params, every entry finite and >= 0, all with the
              first's keys and shapes;   anchors : as many dicts of the same keys and shapes."""
    fishers, anchors = checked(EWC_MERGE, locals())
    F = {k: sum(f[k] for f in fishers) for k in fishers[0]}
    anchor = {}
    for k in F:
        weighted = sum(f[k] * a[k] for f, a in zip(fishers, anchors))
        with np.errstate(invalid="ignore", divide="ignore"):
            anchor[k] = np.where(F[k] > 0, weighted / np.where(F[k] > 0, F[k], 1), anchors[-1][k])
    return F, anchor


FISHER = {"net": check_net, "keep_X": check_inputs, "keep_G": check_output_grads}


def fisher_diagonal(net, keep_X, keep_G):
    """The empirical diagonal Fisher of a memory: the mean over its rows of the squared per-row
    gradients of the loss,

        F_k = (1/m) sum_i (d l_i / d theta_k)^2

    keep_X (m, d); keep_G (m, K): row i is d l_i / d O_i, the gradient of row i's own loss with
    respect to its outputs (for l_i = ||O_i - y_i||^2: 2 (O_i - y_i); ``losses.mse``'s G is that
    divided by m K, the mean's share).

    A row's gradient of an MLP factors per layer: d l_i / d W_l = a_{l-1,i} dz_{l,i}^T (an outer
    product) and d l_i / d b_l = dz_{l,i}, so its square is a_{l-1,i}^2 (dz_{l,i}^2)^T, and

        F_{W_l} = (a_{l-1}^2)^T (dz_l^2) / m,     F_{b_l} = mean_i dz_{l,i}^2

    (squares elementwise): one backward pass of keep_G, never m gradients.

    Returns a dict like params, every entry >= 0.

    Underflow is said, not hidden: F is quadratic in keep_G, so it is computed from keep_G 2^-e
    (e the exponent of max |keep_G|: exact, a power of two) and multiplied by 4^e at the end, bit
    for bit the unscaled result wherever nothing underflows. An entry that is positive there but
    below the dtype's smallest normal number once multiplied (keep_G of 1e-170 in float64, 1e-20
    in float32: squares below 2.2e-308, 1.2e-38) is lost, and EWC holds nothing through it: a
    ``PrecisionWarning`` says how many (scale keep_G up by s and EWC's lam down by s^2 instead).
    """
    net, keep_X, keep_G = checked(FISHER, locals())
    m = keep_X.shape[0]
    top = float(np.max(np.abs(keep_G), initial=0.0))
    e = int(np.frexp(top)[1]) if top > 0 else 0
    keep_G = np.ldexp(keep_G, -e)                            # max |keep_G| in [1/2, 1): exact
    F = {}
    for piece in net.pieces():
        mlp = piece.mlp
        record = mlp.forward(keep_X)
        stages = mlp.backward(record, keep_G[:, piece.outputs]).stages
        part = {}
        with np.errstate(over="ignore", invalid="ignore", under="ignore"):    # an overflow is named below
            for l in range(1, mlp.depth + 1):
                dz2 = stages[f"dz{l}"] ** 2
                part[f"W{l}"] = (record.a[l - 1] ** 2).T @ dz2 / m
                part[f"b{l}"] = dz2.sum(axis=0) / m
        F.update(piece.to_model(part))
    if not all_finite(F.values()):
        raise diagnosis.too_large("keep_G", "the squared per-row gradients", net.dtype,
                                  f"max |keep_G| = {top:.3g}")
    tiny = float(np.finfo(net.dtype).tiny)
    with np.errstate(over="ignore", under="ignore"):
        scaled = {k: np.ldexp(v, 2 * e) for k, v in F.items()}                  # times 4^e, exact if normal
    if not all_finite(scaled.values()):
        raise diagnosis.too_large("keep_G", "the squared per-row gradients", net.dtype, f"max |keep_G| = {top:.3g}")
    lost = sum(np.count_nonzero((F[k] >= tiny) & (scaled[k] < tiny)) for k in F)
    if lost:
        warnings.warn(f"fisher_diagonal: {lost} of {net.n_params} entries of the Fisher underflow in {net.dtype} "
                      f"(below {tiny:.3g}; max |keep_G| = {top:.3g}): EWC holds nothing through them; scale "
                      f"keep_G up by s and lam down by s^2", PrecisionWarning, stacklevel=2)
    return scaled


# -- GPM -----------------------------------------------------------------------------------
@dataclass
class Bases:
    """GPM's memory: for each MLP of the model (``net.pieces()``) and each of its layers l, an
    orthonormal basis U (n_{l-1} + 1, r) of the inputs [a_{l-1}, 1] that layer has seen on old
    data. ``bases[p][l - 1]`` is piece p's layer l. ``ranks`` gives every r.

    ``made_by_gpm_bases``: True when ``gpm_bases`` made them, which leaves every U read-only;
    ``gpm`` then skips recomputing U^T U (d r^2 a step: at MNIST's widths more than the
    projection itself) for as long as U stays read-only, i.e. unchanged since it was made."""
    bases: list
    made_by_gpm_bases: bool = False

    @property
    def ranks(self):
        return [[U.shape[1] for U in piece] for piece in self.bases]


GPM_BASES = {"net": check_net, "threshold": check_threshold, "cut": check_cut, "previous": check_bases,
             "keep_X": check_batches}


def gpm_bases(net, keep_X, threshold=None, cut=None, previous=None):
    """Per layer, an orthonormal basis of the layer's inputs on old data (GPM, Saha et al. 2021).

    keep_X    : (m, d) array, or any iterable of (rows, d) batches: the memory is read once, one
                batch at a time, so what is kept is (d_l x d_l) per layer, never m x d_l
    threshold : energy fraction in (0, 1] (GPM; default 0.99 when ``cut`` is not given)
    cut       : eigenvalue cut in [0, 1) instead (the null-space rules: Adam-NSCL, Wang et al.
                2021; AlphaEdit, Fang et al. 2025): keep every direction whose eigenvalue of the
                covariance exceeds cut * its largest eigenvalue; the update then lives in the
                span of the others, the (approximate) null space. cut = 0 keeps the whole range.
    previous  : the Bases of earlier tasks, to merge with (GPM's update of its memory)

    For each layer l the input rows x_i = [a_{l-1,i}, 1] give the uncentred covariance
    C = sum_i x_i x_i^T (d x d, d = n_{l-1} + 1). It is held as its triangular factor R,
    R^T R = C, updated batch by batch by a QR of [R; batch]: forming C itself would square the
    rows' condition number and leave directions with components up to sqrt(eps) |x| outside the
    basis, while R's singular values s_i are the rows' own (C's eigenvalues are s_i^2).

    With previous bases M (d, r0), GPM's criterion (Saha et al., their eq. 8 and 9): the rows'
    energy is ||R||_F^2 = sum_i |x_i|^2; M already captures ||R M||_F^2; the new directions are
    the top right singular vectors of R (I - M M^T), as many as make the captured energy reach
    ``threshold`` of the whole. threshold = 1.0 keeps every direction the rows have: every
    singular value above the numerical rank tolerance d eps s_max (``np.linalg.matrix_rank``'s),
    and then every row lies in the basis to round-off. A direction below that tolerance is never
    kept, at any threshold: it is round-off, not data.

    Returns Bases: per piece, per layer, [M, new] (orthonormal, r0 + k columns).
    """
    net, threshold, cut, previous, batches = checked(GPM_BASES, locals())
    threshold = 0.99 if threshold is None and cut is None else threshold     # GPM's default
    pieces = net.pieces()
    old = previous.bases if previous is not None else [
        [np.zeros((n + 1, 0), dtype=net.dtype) for n in piece.mlp.sizes[:-1]] for piece in pieces]
    R = [[np.zeros((0, n + 1), dtype=net.dtype) for n in piece.mlp.sizes[:-1]] for piece in pieces]
    if isinstance(batches, np.ndarray):                      # one batch (from inside the lesson)
        batches = [batches]
    with np.errstate(over="ignore", invalid="ignore", under="ignore"):
        for batch in batches:                                # sum_i x_i x_i^T, as its factor R
            for p, piece in enumerate(pieces):
                record = piece.mlp.forward(batch)
                for l in range(1, piece.mlp.depth + 1):
                    A1 = np.hstack([record.a[l - 1], np.ones((batch.shape[0], 1), dtype=net.dtype)])
                    R[p][l - 1] = np.linalg.qr(np.vstack([R[p][l - 1], A1]), mode="r")
    grown = [[_grow(R[p][l], old[p][l], threshold, cut) for l in range(len(R[p]))] for p in range(len(pieces))]
    for U in (U for piece in grown for U in piece):
        U.flags.writeable = False                             # orthonormal as made: kept so
    return Bases(grown, made_by_gpm_bases=True)


def _grow(R, M, threshold, cut):
    """[M, V]: M and the directions of R (I - M M^T) that GPM's criterion (or the cut) keeps."""
    d = R.shape[1]
    s_all = np.linalg.svd(R, compute_uv=False)
    tol = d * eps(R.dtype) * (s_all[0] if s_all.size else 0.0)
    R_hat = R - (R @ M) @ M.T
    _, s, Vt = _svd(R_hat)
    real = s > tol                                          # above round-off
    if cut is not None:
        keep = real & (s ** 2 > cut * s_all[0] ** 2)
    elif threshold >= 1.0:
        keep = real
    else:
        total = float(np.sum(s_all ** 2))                   # ||R||_F^2 = sum_i |x_i|^2
        held = float(np.sum((R @ M) ** 2))                  # what M already captures
        captured = held + np.cumsum(s ** 2)
        k = 0 if held >= threshold * total else int(np.searchsorted(captured, threshold * total)) + 1
        keep = real & (np.arange(s.size) < k)
    V = Vt[keep].T
    if M.shape[1] and V.shape[1]:
        V = V - M @ (M.T @ V)                               # orthogonal to M to round-off: once more
        V, _ = np.linalg.qr(V)
    return np.hstack([M, V])


def _svd(A):
    """``np.linalg.svd(A, full_matrices=False)``; where LAPACK's divide-and-conquer SVD does not
    converge (rare: it happened on one seed of the permuted-digits table, with OpenBLAS in two
    threads), the same decomposition from A^T's: A^T = V S U^T."""
    try:
        return np.linalg.svd(A, full_matrices=False)
    except np.linalg.LinAlgError:
        U, s, Vt = np.linalg.svd(A.T, full_matrices=False)
        return Vt.T, s, U.T


GPM = {"net": check_net, "X": check_inputs, "G": check_output_grads, "bases": check_bases}


def gpm(net, X, G, bases):
    """Gradient Projection Memory (Saha et al. 2021): each layer's update projected off the span
    of that layer's old inputs,

        [dW_l; db_l] <- (I - U_l U_l^T) [dW_l; db_l]         for every layer l, every column

    g = gradient(X, G); U_l from ``gpm_bases`` (n_{l-1} + 1, r_l), orthonormal.

    Why it holds: for an old input row x = [a_{l-1}, 1] in span(U_l), x (I - U_l U_l^T) = 0,
    so z_l = x [W_l; b_l] does not move, in exact arithmetic at any lr; layer by layer from the
    first, every activation on old data stays, and so does every output (the output layer's
    columns are all projected: GPM holds every output, not only the ones asked for). Below
    threshold 1.0 the rows' components outside the span (1 - threshold of their energy, at
    most) move them.

    What holds in floating point, at threshold 1.0: round-off, amplified by the stepped weights.
    At layer l, with A~ = [a_{l-1}, 1] (n, d) the memory's inputs, W~ = [W_l; b_l], D~ the step:
    the rows lie in the span to d eps ||A~||_F (``gpm_bases`` keeps every singular value above
    d eps s_max) and D~ is orthogonal to it to d eps |D~|, so a step of lr moves z_l by up to
    2 d eps lr ||A~||_F |D~|, beside the forward pass's own rounding, d eps |A~| (|W~| + lr |D~|),
    before and after. Each layer's error reaches the output through every layer above it,
    multiplied by those layers' stepped weights |W_k| + lr |D_k| (tanh is 1-Lipschitz): with L
    layers the drift grows like lr^L eps. On a [6, 9, 8, 4] tanh net in float64 it is of order
    1e-14 at lr 1, 1e-9 at lr 100 and 1e-3 at lr 1e4; in float32 lr 100 moves an output by
    tenths: not "held at any lr" (tests/test_baselines.py asserts this bound at lr 1, 100 and
    1e4 in float64 and float32, and that the large steps do drift).

    Works on every model: each MLP of it (``net.pieces()``) with its own bases.
    """
    net, X, G, bases = checked(GPM, locals())
    g = net.gradient(X, G)
    D = dict(g)
    for piece, piece_U in zip(net.pieces(), bases.bases):
        part = piece.to_mlp(g)
        out = {}
        for l, Ul in enumerate(piece_U, 1):
            Wb = np.vstack([part[f"W{l}"], part[f"b{l}"][None, :]])     # (n_{l-1} + 1, n_l)
            Wb = Wb - Ul @ (Ul.T @ Wb)
            out[f"W{l}"], out[f"b{l}"] = Wb[:-1], Wb[-1]
        D.update(piece.to_model(out))
    return D
