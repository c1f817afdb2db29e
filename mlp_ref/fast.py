"""The fast tier: the reference's gradient, step, projection and restore, with every trick for
speed and memory, each explained where it stands, and tested equal to the reference.

    fast.gradient(net, X, G)      == net.backward(net.forward(X), G).grads, bit for bit
    fast.step(net, D, lr)         == net.step(D, lr), bit for bit
    fast.project(net, X, G, ...)  == fixes.project(...), to 1e-12 relative in float64
    fast.nullspace(net, D, ...)   == fixes.nullspace(...), likewise
    fast.restore(net, ...)        == fixes.restore(...), likewise

The reference (``network``, ``jacobian``, ``fixes``) is the lesson: one array per stage of the
chain rule, each product written as its formula. This module is what ``python -m mlp_ref bench``
measures. What it does differently, and why (the bench measures each effect):

* Memory is the cost. A NumPy expression allocates its result, and a freshly allocated array
  is paid for twice: glibc hands large freed blocks back to the operating system, and the next
  call faults the same memory in again one 4 KiB page at a time (~3 us a page in a virtual
  machine; a step of [784, 512, 512, 10] in float64 touches 13 MiB). Keeping less alive at the
  peak keeps a loop of calls below glibc's give-back point. So: results are written into arrays
  we already own (``out=``, in-place ``+=``, ``*=``), the forward record and each stage are let
  go of as soon as the chain rule has read them for the last time, and the step's new values
  are computed in buffers kept from one step to the next.
* Work not needed is not done: no dL/dX, no stage kept, no multiplication by f'(z) = 1 for the
  identity output; the projection shares one forward record between the gradient and the
  Jacobian, and never builds g (see ``project``).
* One backward pass for several output gradients: the question's G and the one-hot e_k whose
  signals make the Jacobian are stacked, so f'(z_l) is computed once per layer and each da_l is
  one product (``backprop``).
* The solve: the Gram is factorised by Cholesky, its rank certified from the factor and its
  inverse, and refined on the system itself when it is well conditioned (``GramSolver``); the
  reference diagonalises it.

Every model of the package is accepted. The tricks are written for the MLP; SplitHeads and
TwoTower (whose forward assembles arrays anyway) are handed to the reference.
"""
from __future__ import annotations

import weakref

import numpy as np

from . import _checks, fixes, jacobian
from .fixes import RestoreReport
from .jacobian import check_keep, default_rcond, kept_eigenvalues
from .network import MLP, check_inputs, check_lr, check_writable, overflow_error


# -- the gradient ---------------------------------------------------------------------------
def forward(net, X):
    """The forward record (z, a) as two dicts l -> array: ``net.forward(X)``, with z_l = a @ W_l
    and then z_l += b_l in place (the reference's a @ W + b allocates the product and then the
    sum: one (n, n_l) array more per layer). Same bits: both round the product, then the sum.
    The identity output's a_L is z_L itself (no copy)."""
    X = check_inputs(net, X)
    z, a = {}, {0: np.ascontiguousarray(X)}         # the layout the reference's copy has
    for l in range(1, net.depth + 1):
        z[l] = a[l - 1] @ net.params[f"W{l}"]
        z[l] += net.params[f"b{l}"]
        act = net.act(l)
        a[l] = z[l] if act.name == "identity" else act.f(z[l])
    if not np.isfinite(a[net.depth]).all():
        net.forward(X)                               # the reference's message, naming the culprit
    return z, a


def backprop(net, z, a, Gs, grads=True, signals=False):
    """The reference's backward loop for B output gradients at once, consuming the record z, a.

    Gs      : (B, n, K), B output gradients on the same n rows (the question's G, and the
              one-hot e_k whose signals make a Jacobian): each layer computes f'(z_l) once and
              multiplies the B stacked da_l by it, and da_{l-1} = dz_l W_l^T is one product of
              B n rows instead of B products
    grads   : also return dW_l, db_l of the first gradient (a dict like params; needs B = 1)
    signals : also return dz_l, the per-sample signals, as dict l -> (B, n, n_l)

    dz_l = da_l * f'(z_l) is written over da_l, which is ours (a fresh product, or the copy of
    Gs): the same bits as the reference's product. For the identity output dz_L is da_L itself
    (the reference multiplies by 1, exactly). z_l, a_l and da_l are deleted right after their
    last use, so the peak holds one layer's stages, not all of them. No da_0: the parameters do
    not need dL/dX.
    """
    B, n, K = Gs.shape
    out, kept = {}, {}
    da = np.array(Gs, order="C").reshape(B * n, K)   # ours to write over, laid out as the reference's
    for l in range(net.depth, 0, -1):
        act = net.act(l)
        dz = da                                  # dz_l = da_l * f'(z_l), written over da_l
        if act.name != "identity":
            dz.reshape(B, n, -1)[...] *= act.df(z[l], a[l])
        del z[l], a[l]                           # read for the last time
        if grads:
            out[f"W{l}"] = a[l - 1].T @ dz
            out[f"b{l}"] = dz.sum(axis=0)
        if signals:
            kept[l] = dz.reshape(B, n, -1)
        da = dz @ net.params[f"W{l}"].T if l > 1 else None
        del dz                                   # freed before dz_{l-1} is made, unless kept
    grads_in_order = {key: out[key] for key in net.params} if grads else None
    return grads_in_order, kept


def gradient(net, X, G):
    """sum_i G_i . dO_i/dtheta as a dict like params: bit for bit the reference's
    ``net.backward(net.forward(X), G).grads``, at about half its peak memory (for
    [784, 512, 512, 10] in float64: 6 MiB instead of 13)."""
    if not isinstance(net, MLP):
        return fixes.naive(net, X, G)                 # composed models: the reference
    z, a = forward(net, X)
    n, K = a[net.depth].shape
    G = _checks.rows_or_vector("G", G, net.dtype, n, K)
    return backprop(net, z, a, G[None])[0]


# -- the step ----------------------------------------------------------------------------------
#: the arrays ``step`` computes new values in, per network, kept from one step to the next
_BUFFERS = weakref.WeakKeyDictionary()


def _buffers(net):
    """One array per parameter for ``step``, made again if the parameters' shapes or dtype change.

    Why keep them: a step's new values are as large as the network (5 MiB for
    [784, 512, 512, 10] in float64); fresh arrays every step are handed back to the system by
    the C allocator after each step and faulted in again on the next, which costs more than
    the arithmetic (``python -m mlp_ref bench`` counts the faults). A weak reference: the
    buffers go when the network goes; a copy of the network gets its own.
    """
    buffers = _BUFFERS.get(net)
    if buffers is None or list(buffers) != list(net.params) or any(
            b.shape != p.shape or b.dtype != p.dtype
            for b, p in zip(buffers.values(), net.params.values())):
        buffers = _BUFFERS[net] = {k: np.empty_like(p) for k, p in net.params.items()}
    return buffers


def step(net, D, lr):
    """In place: theta <- theta - lr * D; bit for bit ``net.step(D, lr)``, atomic as it is.

    The reference checks D finite, computes theta - lr * D into new arrays, checks them finite
    and copies them in. Here: new = lr * D and new = theta - new in two ``out=`` passes into
    kept buffers (same bits: lr * D, then the difference); D is checked finite through the new
    values, which are finite only if D is (its own check runs only on failure, for the
    message); and an array is finite exactly when its smallest and largest entries are (a NaN
    anywhere makes both NaN): two reductions, no array of booleans.
    """
    lr = check_lr(lr, fixes.check_net(net).dtype)
    checked = _checks.param_dict("D", D, net.param_shapes, net.dtype, finite=False)
    check_writable(net)
    new = _buffers(net)
    with np.errstate(over="ignore", invalid="ignore"):
        for key, d in checked.items():
            np.multiply(d, lr, out=new[key])
            np.subtract(net.params[key], new[key], out=new[key])
    broken = [key for key, v in new.items() if not (np.isfinite(v.min()) and np.isfinite(v.max()))]
    if broken:
        checked = _checks.param_dict("D", D, net.param_shapes, net.dtype)   # NaN/inf in D: say so
        raise overflow_error(broken, lr, checked)
    for key, v in new.items():
        np.copyto(net.params[key], v)
    return net


def one_hot(keep, n, K, dtype):
    """(q, n, K): for each kept output k, the output gradient e_k on every row."""
    E = np.zeros((len(keep), n, K), dtype=dtype)
    for j, k in enumerate(keep):
        E[j, :, k] = 1.0
    return E


# -- the Jacobian ------------------------------------------------------------------------------
class Jacobian:
    """``jacobian.OutputJacobian`` from parts the caller may share with other work, holding only
    what its products need.

    inputs  : dict l -> (n, n_{l-1})     the layer inputs a_{l-1}
    outputs : (n, q)                     the kept outputs
    signals : dict l -> (q, n, n_l)      S_l, as a stacked backward pass computes them

    ``from_record`` makes them from a forward record with one stacked backward pass for all
    kept outputs. The inputs' factor of the Gram, a_{l-1} a_{l-1}^T + 1, is computed once
    (``input_kernels``) for both the Gram and J g, then dropped (``drop_input_kernels``) before
    the direction, the largest array, is made.
    """

    def __init__(self, net, inputs, outputs, signals):
        self.net, self.inputs, self.outputs = net, inputs, outputs
        # (n, q, n_l), a view: rows c = i q + j, as the reference's
        self.signals = {l: np.moveaxis(S, 0, 1) for l, S in signals.items()}
        self._kernels = None

    @classmethod
    def from_record(cls, net, z, a, keep):
        """The Jacobian of outputs ``keep`` from a forward record z, a, which it consumes."""
        n, K = a[net.depth].shape
        inputs = {l: a[l - 1] for l in range(1, net.depth + 1)}
        outputs = a[net.depth][:, keep]
        signals = backprop(net, z, a, one_hot(keep, n, K, net.dtype), grads=False, signals=True)[1]
        return cls(net, inputs, outputs, signals)

    def input_kernels(self):
        if self._kernels is None:
            self._kernels = {}
            for l, A in self.inputs.items():
                AA = A @ A.T             # NumPy sees A and A.T share memory: one symmetric product (syrk)
                AA += 1.0                # the bias, whose "input" is the constant 1; in place
                self._kernels[l] = AA
        return self._kernels

    def drop_input_kernels(self):
        self._kernels = None

    def gram(self):
        """J J^T: the q outputs of a row share that row's input kernel, broadcast, not repeated."""
        n, q = self.outputs.shape
        total = np.zeros((n, q, n, q), dtype=self.net.dtype)
        for l, AA in self.input_kernels().items():
            S = self.signals[l].reshape(n * q, -1)
            SS = (S @ S.T).reshape(n, q, n, q)
            SS *= AA[:, None, :, None]
            total += SS
        return total.reshape(n * q, n * q)

    def matvec(self, D):
        out = np.zeros(self.outputs.shape, dtype=self.net.dtype)
        for l, S in self.signals.items():
            dz = self.inputs[l] @ D[f"W{l}"]
            dz += D[f"b{l}"]                          # in place: no second (n, n_l) array
            out += np.einsum("ijk,ik->ij", S, dz)
        return out.reshape(-1)

    def matvec_gradient(self, dz):
        """J g for the gradient g on the same rows whose per-sample signals are ``dz`` (l -> (n, n_l)).

        g_W = a^T dz and g_b = 1^T dz, so the change of z_l along g is (a a^T + 1) dz_l: an
        (n, n) by (n, n_l) product with the Gram's own factor, instead of building g (n_{l-1}
        by n_l per layer) and multiplying it by a_{l-1} again.
        """
        out = np.zeros(self.outputs.shape, dtype=self.net.dtype)
        for l, AA in self.input_kernels().items():
            out += np.einsum("ijk,ik->ij", self.signals[l], AA @ dz[l])
        return out.reshape(-1)

    def weighted_signals(self, alpha):
        """(l, sum_j alpha_ij S_l[i, j]) for each layer, the (n, n_l) signals of J^T alpha: made one
        layer at a time, as the caller asks, so that only one is held when the caller wants that."""
        alpha = np.reshape(alpha, self.outputs.shape)
        for l, S in self.signals.items():
            yield l, np.einsum("ij,ijk->ik", alpha, S)

    def from_signals(self, signals):
        """{W_l: a_{l-1}^T E_l, b_l: column sums of E_l}, emptying ``signals`` as it goes: each
        E_l is freed as soon as its layer is done, while the direction grows."""
        D = {}
        for l in sorted(signals):                     # W1, b1, W2, ...: the order of params
            E = signals.pop(l)
            D[f"W{l}"] = self.inputs[l].T @ E
            D[f"b{l}"] = E.sum(axis=0)
        return D

    def rmatvec(self, alpha):
        return self.from_signals(dict(self.weighted_signals(alpha)))


class GramSolver:
    """``jacobian.GramSolver`` (gram^+ rhs, rank-revealing), without diagonalising at full rank.

    The reference diagonalises the Gram to find its rank: about 2 ms at n = 256 and 0.8 s at
    n = 2,560 constraints, several times the solve. Here:

    1. gram = L L^T (Cholesky, n^3/3): if it fails, gram is not numerically positive definite
       and the reference's pseudo-inverse is used.
    2. L^-1 by blocks (``lower_inverse``, another n^3/3), then alpha = L^-T (L^-1 rhs): NumPy has
       no triangular solve, and with the inverse every later solve is two products.
    3. The rank, certified from what we hold (``cond_bound``): an upper bound on cond from gram
       and L^-1. When it is below 1 / rcond, no eigenvalue falls under the reference's cut-off:
       full rank, for certain. Otherwise the eigenvalues are computed, as in the reference, so
       that both tiers always keep the same constraints.

    Attributes: ``rank``; ``cond``, exact when the eigenvalues were computed, else that upper
    bound; ``cond_exceeds(c)`` decides cond > c, estimating cond only when the bounds leave it
    open.
    """

    def __init__(self, gram, rcond=None):
        m = gram.shape[0]
        self.rcond = default_rcond(m, gram.dtype) if rcond is None else rcond
        self.gram, self.exact = gram, False
        self._pinv = self._inverse = None
        try:
            L = np.linalg.cholesky(gram)
        except np.linalg.LinAlgError:
            L = None
        if L is not None and m:
            inverse = lower_inverse(L)
            bound = cond_bound(gram, inverse)
            if bound * self.rcond < 1.0:
                pivots = np.diag(L) ** 2              # each between lam_min and lam_max
                self._inverse, self.rank, self.cond = inverse, m, float(bound)
                self._at_least = float(pivots.max() / pivots.min())
                return
        lam = np.linalg.eigvalsh(gram)
        kept = kept_eigenvalues(lam, self.rcond)
        self.rank, self.exact = int(kept.sum()), True
        self.cond = float(lam[-1] / lam[kept][0]) if self.rank else 1.0
        if self.rank == m and L is not None:
            self._inverse = lower_inverse(L)
        else:
            self._pinv = jacobian.GramSolver(gram, self.rcond)

    def cond_exceeds(self, threshold):
        """cond(gram) > threshold: from the bounds when they settle it, else estimated by a few
        rounds of power iteration on gram and on its inverse, from fixed starting vectors (equal
        inputs give equal bits), typically within a factor 1.5 of cond."""
        if self.exact or self.cond <= threshold:
            return self.cond > threshold
        if self._at_least > threshold:
            return True
        return self._estimate_cond() > threshold

    def _estimate_cond(self, rounds=5, vectors=2):
        gram = self.gram
        start = np.random.default_rng(0).standard_normal((gram.shape[0], vectors))
        top, bottom = start.astype(gram.dtype), start.astype(gram.dtype)
        for _ in range(rounds):
            top = gram @ top
            top /= np.linalg.norm(top, axis=0)
            bottom = self(bottom)
            bottom /= np.linalg.norm(bottom, axis=0)
        lam_max = np.max(np.sum(top * (gram @ top), axis=0))
        inv_lam_min = np.max(np.sum((self._inverse @ bottom) ** 2, axis=0))   # y^T gram^-1 y
        return float(lam_max * inv_lam_min)

    def __call__(self, rhs):
        if self._pinv is not None:
            return self._pinv(rhs)
        return self._inverse.T @ (self._inverse @ rhs)

    def refined(self, gram, rhs, passes):
        """gram^+ rhs, then ``passes`` rounds of iterative refinement on the system itself: the
        residual rhs - gram alpha (n^2 work) is solved again and added."""
        alpha = self(rhs)
        for _ in range(passes):
            alpha += self(rhs - gram @ alpha)
        return alpha


#: Up to this cond(J J^T) the projection refines the system (n^2 a pass, ``GramSolver.refined``);
#: above it, the direction itself, as the reference does (J D and J^T alpha, as large as a
#: gradient). The two ways leave answers about eps * cond apart (1e-13 at cond 1e4, measured
#: on random networks), which only matters where cond is large.
REFINE_DIRECTION_ABOVE_COND = 1e4


def cond_bound(gram, inverse):
    """An upper bound on cond(gram) from gram and the inverse of its Cholesky factor (see
    ``GramSolver``); inf when they are not finite."""
    with np.errstate(over="ignore", invalid="ignore"):
        lam_max = min(np.abs(gram).sum(axis=1).max(), np.trace(gram))
        absolute = np.abs(inverse)
        inv_lam_min = min(np.sum(inverse * inverse), absolute.sum(axis=0).max() * absolute.sum(axis=1).max())
        bound = lam_max * inv_lam_min
    return bound if np.isfinite(bound) else np.inf


def lower_inverse(L, block=64):
    """L^-1 for a lower-triangular L, by halves: [[A, 0], [C, D]]^-1 = [[A^-1, 0],
    [-D^-1 C A^-1, D^-1]]; blocks of at most ``block`` rows are inverted by LU (NumPy has no
    triangular inverse). About n^3/3 multiply-adds, all but the small blocks' in matrix products."""
    n = L.shape[0]
    if n <= block:
        return np.linalg.inv(L)
    h = n // 2
    A_inv, D_inv = lower_inverse(L[:h, :h], block), lower_inverse(L[h:, h:], block)
    out = np.zeros_like(L)
    out[:h, :h], out[h:, h:] = A_inv, D_inv
    out[h:, :h] = -(D_inv @ (L[h:, :h] @ A_inv))
    return out


# -- projection and restore -----------------------------------------------------------------------
def _refine(J, solve, D, passes):
    """``passes`` times, in place: D <- D - J^T (J J^T)^+ J D (the reference's refinement), one
    layer's correction at a time: only one layer's E_l is ever held beside D."""
    for _ in range(passes):
        _subtract_rmatvec(J, D, solve(J.matvec(D)))
    return D


def _subtract_rmatvec(J, D, alpha):
    """D <- D - J^T alpha, in place, layer by layer."""
    for l, E in J.weighted_signals(alpha):
        D[f"W{l}"] -= J.inputs[l].T @ E
        D[f"b{l}"] -= E.sum(axis=0)


def nullspace(net, D, keep_X, keep=(0,), rcond=None, refine=1):
    """``fixes.nullspace``: D - J^T (J J^T)^+ J D, to roundoff the same."""
    if not isinstance(net, MLP):
        return fixes.nullspace(net, D, keep_X, keep, rcond, refine)
    D = _checks.param_dict("D", D, net.param_shapes, net.dtype)
    keep_X = check_inputs(net, keep_X, "keep_X")
    rcond, refine = fixes.check_rcond(rcond), fixes.check_refine(refine)
    keep = check_keep(keep, net.sizes[-1])
    J = Jacobian.from_record(net, *forward(net, keep_X), keep)
    gram = fixes.finite_gram(J, keep_X)
    D = {k: np.array(v) for k, v in D.items()}       # ours to write over: the caller's D stays
    return project_out(J, GramSolver(gram, rcond), gram, D, refine)


def project_out(J, solve, gram, D, refine):
    """D <- D - J^T (J J^T)^+ J D in place (D must be the caller's own), given J's Gram and its
    solver: refined on the system when the Gram is well conditioned, else through D itself."""
    J.drop_input_kernels()
    if solve.cond_exceeds(REFINE_DIRECTION_ABOVE_COND):
        return _refine(J, solve, D, 1 + refine)
    _subtract_rmatvec(J, D, solve.refined(gram, J.matvec(D), refine))
    return D


def project(net, X, G, keep=(0,), keep_X=None, rcond=None, refine=1):
    """``fixes.project``: D = g - J^T (J J^T)^+ J g, to roundoff the same.

    When the kept outputs are held on the batch itself (keep_X None or equal to X, compared by
    value: equal inputs take the same path), the gradient and the Jacobian live on the same
    rows, and D costs fewer products:

    * one forward record serves both;
    * backprop is linear in G, so D = g - J^T alpha is the gradient of the output gradient
      G - alpha on the kept columns: its per-sample signals are dz_l - sum_j alpha_j S_l,j, and
      D costs one product a_{l-1}^T E_l per layer, g none;
    * J g comes from the Gram's own factors (``Jacobian.matvec_gradient``), without g;
    * the refinement works on the system (``GramSolver.refined``), at n^2 a pass, unless the
      Gram is ill-conditioned (``REFINE_DIRECTION_ABOVE_COND``).
    """
    if not isinstance(net, MLP):
        return fixes.project(net, X, G, keep, keep_X, rcond, refine)
    X, G = fixes.check_XG(net, X, G)
    if keep_X is not None:
        keep_X = check_inputs(net, keep_X, "keep_X")
        if not np.array_equal(keep_X, X):
            return nullspace(net, gradient(net, X, G), keep_X, keep, rcond, refine)
    rcond, refine = fixes.check_rcond(rcond), fixes.check_refine(refine)
    keep = check_keep(keep, net.sizes[-1])
    z, a = forward(net, X)
    n, K = a[net.depth].shape
    # one backward pass for G and the one-hot e_k together: G's signals first, then J's
    Gs = np.concatenate([G[None], one_hot(keep, n, K, net.dtype)])
    inputs, outputs = {l: a[l - 1] for l in range(1, net.depth + 1)}, a[net.depth][:, keep]
    signals = backprop(net, z, a, Gs, grads=False, signals=True)[1]     # consumes z and a
    J = Jacobian(net, inputs, outputs, {l: S[1:] for l, S in signals.items()})
    dz = {l: S[0] for l, S in signals.items()}                # G's signals dz_l (views)
    del signals
    gram = fixes.finite_gram(J, X)
    solve = GramSolver(gram, rcond)
    ill = solve.cond_exceeds(REFINE_DIRECTION_ABOVE_COND)
    alpha = solve.refined(gram, J.matvec_gradient(dz), 0 if ill else refine)
    J.drop_input_kernels()        # not needed again: freed before D, the largest array, is made
    E = {l: dz[l] - weighted for l, weighted in J.weighted_signals(alpha)}   # dz_l - sum_j alpha_j S_l,j
    del dz
    if ill:
        return _refine(J, solve, J.from_signals(E), refine)
    J.signals = None              # frees the stacked signals: D needs only E_l and the inputs
    return J.from_signals(E)


def restore(net, keep_X, ref, keep=(0,), tol=1e-12, max_iter=20, rcond=None):
    """``fixes.restore``: the same Gauss-Newton loop, each iteration's forward pass shared
    between the residual and the Jacobian, solved by the fast ``GramSolver``, stepped by ``step``."""
    if not isinstance(net, MLP):
        return fixes.restore(net, keep_X, ref, keep, tol, max_iter, rcond)
    keep_X, keep, ref, tol, max_iter, rcond = fixes.check_restore(net, keep_X, ref, keep, tol,
                                                                  max_iter, rcond)
    history = []
    with fixes.all_or_nothing(net):
        for it in range(max_iter + 1):
            z, a = forward(net, keep_X)
            r = (a[net.depth][:, keep] - ref).reshape(-1)
            history.append(float(np.max(np.abs(r))))
            if history[-1] <= tol or it == max_iter or not np.isfinite(history[-1]):
                break
            J = Jacobian.from_record(net, z, a, keep)
            solve = GramSolver(fixes.finite_gram(J, keep_X), rcond)
            J.drop_input_kernels()
            fixes.restoring_step(net, J.rmatvec(solve(r)), history[-1], step)
    return RestoreReport(converged=history[-1] <= tol, iterations=len(history) - 1,
                         residual=history[-1], history=history)
