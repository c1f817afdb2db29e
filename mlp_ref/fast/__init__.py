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
  call faults the same memory in again one page at a time (the bench counts the faults of each
  loop: benchmarks/README.md). Keeping less alive at the peak keeps a loop of calls below
  glibc's give-back point. So: results are written into arrays
  we already own (``out=``, in-place ``+=``, ``*=``), the forward record and each stage are let
  go of as soon as the chain rule has read them for the last time, and the step's new values
  are computed in buffers kept from one step to the next.
* Work not needed is not done: no dL/dX, no stage kept, no multiplication by f'(z) = 1 for the
  identity output; the projection shares one forward record between the gradient and the
  Jacobian, and never builds g (see ``project``).
* One backward pass for several output gradients: the question's G and the one-hot e_k whose
  signals make the Jacobian are stacked, so f'(z_l) is computed once per layer and each da_l is
  one product (``backprop``).
* The solve: the Gram is factorised by Cholesky once, shifted so that the factorisation's
  success certifies the rank, by blocks whose n^3/3 is one matrix product each (``cholesky``:
  LAPACK's own runs at a quarter of the matmul rate here); solves are block substitutions in
  matrix products, and conjugate gradients on the system remove the shift (``GramSolver``);
  the reference diagonalises it.

Every model of the package is accepted. The tricks are written for the MLP; SplitHeads and
TwoTower (whose forward assembles arrays anyway) are handed to the reference.
"""
from __future__ import annotations

import weakref
from functools import partial
from typing import NamedTuple

import numpy as np

from .. import fixes, jacobian, pseudoinverse
from ..boundary import diagnosis
from ..boundary.checks import check_lr, check_params_like, check_writable, checked, finite
from ..boundary.model_checks import check_net
from ..fixes import NULLSPACE, PROJECT, RESTORE, RULE
from ..network import INPUTS, MLP
from ..pseudoinverse import default_rcond, held_unassured, warn_if_not_held

#: What ``step`` takes: D's finiteness is checked through the new values (``step``)
STEP = {"net": check_net, "lr": check_lr, "D": partial(check_params_like, finite=False)}


# -- the gradient ---------------------------------------------------------------------------
def forward_arrays(net, X):
    """The forward record (z, a) as two dicts l -> array: ``net.forward(X)``, with z_l = a @ W_l
    and then z_l += b_l in place (the reference's a @ W + b allocates the product and then the
    sum: one (n, n_l) array more per layer). Same bits: both round the product, then the sum.
    The identity output's a_L is z_L itself (no copy). Quiet as the reference is: an output
    that is not finite is reported by the reference's own pass, naming the culprit."""
    X = checked(INPUTS, locals())
    z, a = {}, {0: np.ascontiguousarray(X)}         # the layout the reference's copy has
    with np.errstate(over="ignore", invalid="ignore", under="ignore"):    # an overflow is named below
        for l in range(1, net.depth + 1):
            z[l] = a[l - 1] @ net.params[f"W{l}"]
            z[l] += net.params[f"b{l}"]
            act = net.act(l)
            a[l] = z[l] if act.name == "identity" else act.f(z[l])
    if not finite(a[net.depth]):
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
    [784, 512, 512, 10] in float64: 6 MiB instead of 13).

    Refused as the reference refuses it when the backward pass overflows (a G too large for
    the dtype, say): the gradient is checked finite at the end, and the reference's own pass
    then names the culprit. (The reference also refuses an overflow of dL/dX alone, which
    the fast tier never computes.)"""
    net, X, G = checked(RULE, locals())
    if not isinstance(net, MLP):
        return fixes.naive(net, X, G)                 # composed models: the reference
    z, a = forward_arrays(net, X)
    with np.errstate(over="ignore", invalid="ignore"):    # an overflow is reported below
        grads = backprop(net, z, a, G[None])[0]
    if not all_finite(grads):
        net.backward(net.forward(X), G)               # the reference's message: G, or the parameters
    return grads


def all_finite(arrays):
    """Every array of the dict finite. An array is finite exactly when its smallest and largest
    entries are (a NaN anywhere makes both NaN): two reductions, no array of booleans."""
    return all(np.isfinite(v.min()) and np.isfinite(v.max()) for v in arrays.values())


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
    message), by ``all_finite``: two reductions an array, no array of booleans.
    """
    net, lr, D = checked(STEP, locals())
    check_writable(net)
    new = _buffers(net)
    with np.errstate(over="ignore", invalid="ignore"):
        for key in net.params:
            np.multiply(D[key], lr, out=new[key])
            np.subtract(net.params[key], new[key], out=new[key])
    if not all_finite(new):
        broken = [key for key in new if not all_finite({key: new[key]})]
        D = check_params_like("D", D, {"net": net})                       # NaN/inf in D: say so
        raise diagnosis.step_overflow(net, broken, lr, D)
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
        """J J^T: the q outputs of a row share that row's input kernel, broadcast, not repeated.

        The first layer's share is the total to add into (no zeros to allocate and add), and
        each later layer's is made in one kept (nq, nq) buffer: at 2,560 constraints every such
        array is 50 MiB, which the allocator hands back and the next layer faults in again.
        The same sum, layer by layer in the same order: the same bits as the reference's."""
        n, q = self.outputs.shape
        total = buffer = None
        for l, AA in self.input_kernels().items():
            S = self.signals[l].reshape(n * q, -1)
            if total is None:
                share = total = S @ S.T
            else:
                share = buffer = np.matmul(S, S.T, out=buffer)
            share.reshape(n, q, n, q)[...] *= AA[:, None, :, None]
            if share is not total:
                total += share
        return total

    def matvec(self, D):
        out = np.zeros(self.outputs.shape, dtype=self.net.dtype)
        for l, S in self.signals.items():
            dz = self.inputs[l] @ D[f"W{l}"]
            dz += D[f"b{l}"]                          # in place: no second (n, n_l) array
            out += np.einsum("ijk,ik->ij", S, dz)
        return out.reshape(-1)

    def magnitude(self, D):
        """|J| |D|: the reference's formula (``jacobian.magnitude``)."""
        return jacobian.magnitude(self, D)

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
    """``pseudoinverse.GramSolver`` (gram^+ rhs, rank-revealing), without diagonalising at full rank.

    The reference diagonalises the Gram to find its rank: an eigendecomposition with its
    eigenvectors, many times the flops of a Cholesky factorisation (the bench prints both
    times). Here, when the rank is full, one Cholesky factorisation (n^3/3) and nothing else of
    order n^3 (no inverse, no eigenvalue):

    1. The rank, certified by the factorisation itself (``certify``): gram - sigma I = L L^T,
       with a shift sigma chosen so that the factorisation's success proves every eigenvalue
       of gram above the reference's cut-off rcond * lam_max by a margin: full rank, for
       certain. Within that margin (the factorisation fails) the tiers make one decision: the
       reference's, ``pseudoinverse.GramSolver`` on ``reference`` (the reference tier's own Gram of
       the same constraints, or a function that computes it; gram itself when not given). Its
       eigenvalues and ours differ in their last bits (eigh against eigvalsh; and a Gram from the
       stacked backward pass against one from q passes: other matrix shapes, other roundings),
       so that deciding on our own, at an eigenvalue at the cut-off, the tiers would keep
       different numbers of constraints. At full rank gram itself is then factorised (shift
       0); else the reference's pseudo-inverse is used. Within the margin the fast tier pays
       what the reference pays (its Jacobian, its Gram, eigh); outside it, a factorisation.
    2. The solve (``__call__``, ``refined``): (L L^T)^-1 = (gram - sigma I)^-1, by block
       substitution (``CholeskySolve``), is not gram^-1 but a preconditioner for it, close
       to it when sigma << lam_min; conjugate gradients with it (``_iterate``) reach gram^-1
       rhs in two or three steps of n^2 work each.

    The interface is the reference's (``rank``, ``cond``, ``rcond``, ``exact``, ``cond_exceeds``,
    ``refined``, the call), with: ``cond`` exact when the eigenvalues were computed, else the
    upper bound the certificate gives (trace / (sigma - beta) < 1 / rcond, often far above
    cond); ``cond_exceeds(c)``, cond > c, from bounds when they settle it, else from an
    estimate; ``exact`` (the eigenvalues were computed); ``shift``, the sigma of the factor
    (0.0: gram's own factor; None: the pseudo-inverse). gram must be exactly symmetric, as
    ``Jacobian.gram`` makes it (``cholesky`` reads its lower triangle only), and is left as it came.
    """

    def __init__(self, gram, rcond=None, *, reference=None):
        m = gram.shape[0]
        self.rcond = default_rcond(m, gram.dtype) if rcond is None else rcond
        self.gram, self.exact = gram, False
        self._pinv = self._factor = self._estimate = self.shift = None
        certificate = certify(gram, self.rcond) if m else None
        if certificate is not None:
            L, self.shift, beta, trace = certificate
            self._factor, self.rank = CholeskySolve(L), m
            self.cond = float(trace / (self.shift - beta))   # lam_max <= T, lam_min >= sigma - beta
            # a lower bound of cond: lam_max >= max gram_ii, and lam_min <= min gram_ii, lam_min <=
            # lam_min(L L^T) + sigma + beta <= (the smallest pivot l_ii^2) + sigma + beta, as every
            # pivot of L L^T lies between its extreme eigenvalues
            diag, eps = np.diagonal(gram), np.finfo(gram.dtype).eps
            smallest = min(diag.min(), (np.diagonal(L) ** 2).min() * (1 + 2 * eps) + self.shift + beta)
            self._at_least = float(diag.max() / smallest) * (1 - 2 * eps)
            return
        decided = pseudoinverse.GramSolver(_reference_gram(gram, reference), self.rcond)
        self.rank, self.cond, self.exact = decided.rank, decided.cond, True
        if self.rank == m:
            try:
                self._factor, self.shift = CholeskySolve(cholesky(gram)), 0.0
            except np.linalg.LinAlgError:
                pass
        if self._factor is None:
            self._pinv = decided

    def cond_exceeds(self, threshold):
        """cond(gram) > threshold. From the eigenvalues when they were computed; else from the
        bounds (the certificate's upper bound, the diagonal's and pivots' lower bound) when
        they settle it; else from ``estimate_cond``, which is itself a lower bound of cond up to
        roundoff: a True from it is certain, a False is an estimate (within a factor 1.5 of
        cond on the Grams the tests draw)."""
        if self.exact:
            return self.cond > threshold
        if self.cond <= threshold or self._at_least > threshold:
            return self._at_least > threshold
        return self.estimate_cond() > threshold

    def estimate_cond(self, rounds=5, vectors=2):
        """lam_max / lam_min estimated by Rayleigh quotients: ``rounds`` of power iteration on
        gram for the top, of inverse iteration for the bottom, on ``vectors`` fixed starting
        vectors (equal inputs give equal bits). x^T gram x <= lam_max and y^T gram y >= lam_min
        for unit x, y, so the estimate never exceeds cond (but for roundoff).

        The inverse iteration runs on the shifted factor, (gram - sigma I)^-1: the same
        eigenvectors, its largest eigenvalue 1 / (lam_min - sigma) at gram's smallest, so it
        converges to the bottom at least as fast as gram^-1 would, at two substitutions a
        round instead of a refined solve. Each round's products with gram take the top and
        the bottom vectors together, one product of four columns: one pass over gram instead
        of four. Five rounds of two vectors: one vector, or fewer rounds, left estimates off by
        more than 1.5 on the Grams of the tests."""
        if self.exact:
            return self.cond
        if self._estimate is None:
            gram = self.gram
            start = np.random.default_rng(0).standard_normal((gram.shape[0], 2 * vectors))
            both = start.astype(gram.dtype)
            both /= np.linalg.norm(both, axis=0)
            for _ in range(rounds):
                image = gram @ both
                quotients = np.sum(both * image, axis=0)             # Rayleigh quotients
                both[:, :vectors] = image[:, :vectors]               # power iteration: the top
                both[:, vectors:] = self._factor(both[:, vectors:])  # inverse iteration: the bottom
                both /= np.linalg.norm(both, axis=0)
            self._estimate = float(quotients[:vectors].max() / quotients[vectors:].min())
        return self._estimate

    def __call__(self, rhs):
        if self._pinv is not None:
            return self._pinv(rhs)
        if np.ndim(rhs) == 2:
            return np.stack([self._iterate(self.gram, column, 1) for column in rhs.T], axis=1)
        return self._iterate(self.gram, rhs, 1)

    def refined(self, rhs, passes):
        """gram^+ rhs, refined on the system gram: through a factor, at least ``passes``
        iterations of ``_iterate`` (which goes on while the residual falls); through the
        pseudo-inverse (rank deficient), as the reference refines: rhs solved, then ``passes``
        times the residual rhs - gram alpha (n^2 work) solved again and added."""
        if self._pinv is None:
            return self._iterate(self.gram, rhs, max(passes, 1))
        alpha = self._pinv(rhs)
        for _ in range(passes):
            alpha += self._pinv(rhs - self.gram @ alpha)
        return alpha

    #: steps of ``_iterate`` at most (two or three are taken on the Grams of the tests and of the
    #: memory sweep, lam_min within 1.1 sigma included: three or four substitutions a solve)
    MAX_ITERATIONS = 50

    def _iterate(self, gram, rhs, passes):
        """gram^-1 rhs by conjugate gradients preconditioned by the factor, (L L^T)^-1 = (gram -
        sigma I)^-1, started from alpha = (L L^T)^-1 rhs.

        Its first step is the refinement alpha += (L L^T)^-1 (rhs - gram alpha), whose error
        shrinks by sigma / (lam - sigma) along each eigenvector of gram: 3e-7 at most on the
        memory sweep's Grams (cond < 1.2e3, sigma ~ 2e-10 lam_max), so one step meets the floor
        roundoff leaves. Conjugate gradients rather than that refinement repeated, because the
        refinement diverges where lam_min < 2 sigma (a factor-2 window of cond just inside the
        certified range), while conjugate gradients converge for any positive definite
        preconditioner, at a rate set by cond((L L^T)^-1 gram) <= lam_min / (lam_min - sigma).

        It stops, after at least ``passes`` steps, at the first step that does not lower the
        true residual rhs - gram alpha (the recurrence's residual falls on past the floor that
        the true one meets), which each step computes before it prepares the next (a step not
        taken costs no substitution); the iterate of the least true residual is returned.
        Products with gram one column at a time: a BLAS matrix-vector product streams gram once
        at memory speed, where the general product of two columns is slower than two of them.
        """
        solve = self._factor
        alpha = solve(rhs)
        residual = rhs - gram @ alpha
        best, least = alpha, np.linalg.norm(residual)
        if not least > 0:                               # exact, or not finite: nothing to gain
            return alpha
        z = solve(residual)
        p, rz = z, residual @ z
        for k in range(self.MAX_ITERATIONS):
            gram_p = gram @ p
            curvature = p @ gram_p
            if not (curvature > 0 and rz > 0):          # converged exactly (n steps at most)
                break
            step = rz / curvature
            alpha = alpha + step * p
            size = np.linalg.norm(rhs - gram @ alpha)
            if size < least:
                best, least = alpha, size
            elif k + 1 >= passes or not np.isfinite(size):
                break
            residual -= step * gram_p
            z = solve(residual)
            rz, rz_before = residual @ z, rz
            p = z + (rz / rz_before) * p
        return best


def _reference_gram(gram, reference):
    """The Gram the rank is decided on: ``reference``, or what it computes, or gram itself."""
    if reference is None:
        return gram
    return reference() if callable(reference) else reference


def reference_gram(net, X, keep):
    """A function computing the reference tier's J J^T of outputs ``keep`` on X, for
    ``GramSolver(..., reference=...)``: called only where the certificate leaves the rank open,
    so that both tiers decide it on the same bits."""
    return partial(_gram_of, net, X, keep)


def _gram_of(net, X, keep):
    """The reference tier's J J^T of outputs ``keep`` on X, refused as it refuses one that overflows."""
    J = jacobian.of(net, X, keep)
    with np.errstate(over="ignore", invalid="ignore"):
        gram = J.gram()
    if not finite(gram):
        raise diagnosis.gram_overflow(J, X)
    return gram


#: Up to this cond(J J^T) the projection refines the system (n^2 a pass, ``GramSolver.refined``);
#: above it, the direction itself, as the reference does (J D and J^T alpha, as large as a
#: gradient). The two ways leave answers about eps * cond apart (1e-13 at cond 1e4, measured
#: on random networks), which only matters where cond is large.
REFINE_DIRECTION_ABOVE_COND = 1e4


def certify(gram, rcond):
    """(L, sigma, beta, trace) with L L^T = gram - sigma I (in floating point) when that proves
    lam_min(gram) > rcond * lam_max(gram) (and > the smallest normal number); None when the
    factorisation fails.

    The inequality (Higham, Accuracy and Stability of Numerical Algorithms, 2nd ed., ch. 10,
    Thm 10.3; the argument of Rump, "Verification of positive definiteness", BIT 46, 2006).
    Let n = gram's size, u = eps / 2, gamma_k = k u / (1 - k u), and T >= trace(gram): the
    computed trace (a sum of n nonnegative terms) over 1 - gamma_{n+1}. Let C be gram - sigma I
    as computed: C = gram - sigma I + E1 with |E1_ii| <= u gram_ii. If Cholesky runs to
    completion on C, its computed factor satisfies

        L L^T = C + dC,   |dC| <= gamma_{n+2} |L| |L^T|

    (Higham's gamma_{n+1}, one rounding more for kernels that multiply by the pivot's
    reciprocal; any order of the inner products, blocked or not, with conventional products).
    The diagonal of that equality gives sum_k l_ik^2 <= c_ii / (1 - gamma_{n+2}), so (the
    2-norm being monotone on nonnegative matrices) ||dC||_2 <= gamma_{n+2} || |L| ||_2^2 <=
    gamma_{n+2} ||L||_F^2 <= gamma_{n+2} T / (1 - gamma_{n+2}) (as c_ii <= gram_ii). With L L^T positive semi-definite,

        lam_min(gram) >= sigma - beta,   beta = (u + gamma_{n+2} / (1 - gamma_{n+2})) T + n (n + 2) eta

    (eta, the smallest subnormal: what underflow can add to each of the n + 2 roundings of an
    entry). With sigma = max(rcond T, tiny) + 2 beta (tiny: the smallest normal number, the
    reference's other cut-off): lam_min(gram) >= max(rcond T, tiny) + beta > 0, so gram is
    positive definite, lam_max(gram) <= trace(gram) <= T, and lam_min(gram) > rcond lam_max and
    > tiny: no eigenvalue under the reference's cut-offs (``kept_eigenvalues``). The margin
    beta >= (n + 2) u trace(gram) also exceeds, in practice, the error of the reference's
    computed eigenvalues (LAPACK bounds it by p(n) u ||gram||_2 with p a modest function of n,
    not stated) and the few ulps by which the reference's own Gram of the same constraints
    differs from this one, so that the reference finds the same rank: the tests check it,
    just above the shift where it is closest, the inequality does not. Where the certificate
    fails, ``GramSolver`` asks the reference.

    The price of rigour: sigma ~ 4 n u T, so the certificate covers cond up to about
    lam_max / sigma (7e9 for the 2,560 constraints of the memory sweep, trace 130 lam_max;
    1/rcond is 2e12); above it the eigenvalues decide. The trace is used rather than the
    smaller max row sum of |gram| (another pass over gram): with rcond = n eps, beta already
    makes up most of sigma, and the row sum would at most halve it.

    The shift is written into gram's diagonal and the diagonal put back, bit for bit, after
    the factorisation (in ``finally``): a copy of gram to shift would be another n^2 array to
    allocate and fill (8 n^2 bytes in float64), for n numbers that change. A read-only gram is
    copied.
    """
    n, dtype = gram.shape[0], gram.dtype
    finfo = np.finfo(dtype)
    u = finfo.eps / 2

    def gamma(k):
        return k * u / (1 - k * u)

    diag = np.diagonal(gram).copy()
    if not diag.min() > 0:                          # a zero row (or NaN): not positive definite
        return None
    with np.errstate(over="ignore", invalid="ignore"):
        # in float64 (Python floats): over 1 - gamma_{n+1}, one u more than the sum's own error
        # gamma_{n-1}, so that the rounding of this division cannot take T under the trace
        trace = float(diag.sum(dtype=dtype)) / (1 - gamma(n + 1))
    beta = (u + gamma(n + 2) / (1 - gamma(n + 2))) * trace + n * (n + 2) * float(finfo.smallest_subnormal)
    sigma = max(float(rcond) * trace, float(finfo.tiny)) + 2 * beta   # its roundings: far inside beta
    if not (np.isfinite(sigma) and 0 < gamma(n + 2) < 1):
        return None
    sigma = dtype.type(sigma)                       # what is subtracted (its rounding: far inside beta)
    shifted = gram if gram.flags.writeable else gram.copy()
    try:
        shifted.flat[::n + 1] = diag - sigma        # C = gram - sigma I, on the diagonal only
        L = cholesky(shifted)
    except np.linalg.LinAlgError:
        return None
    finally:
        shifted.flat[::n + 1] = diag
    if not np.isfinite(np.diagonal(L)).all():      # a NaN pivot some kernels let through
        return None
    return L, float(sigma), float(beta), float(trace)


def cholesky(C, block=256, leaf=16):
    """``np.linalg.cholesky(C)``: L lower-triangular with L L^T = C (C's lower triangle only is
    read; LinAlgError if a pivot is not positive), by blocks of ``block`` columns, left-looking:

        P = C[s:, s:e] - L[s:, :s] L[s:e, :s]^T      (one matrix product: the n^3/3 of the work)
        L[s:e, s:e] = cholesky(P's top block)         (LAPACK, block x block)
        L[e:, s:e]^T = L[s:e, s:e]^-1 P's rest^T      (forward substitution, ``lower_solve``)

    Why not LAPACK's own: its factorisation runs far below the speed of a matrix product on the
    bench's machines, and this one spends its n^3/3 in one product per block (the bench's memory
    sweep times both: benchmarks/README.md). Every entry
    is still (c_ij - the sum of l_ik l_jk, in some order) / l_jj, and every pivot sqrt(c_jj -
    the sum of l_jk^2): the substitutions divide, no block is inverted, and the products are
    conventional. So the bound of ``certify`` (Higham's Thm 10.3, any order of the inner
    products) holds for this factor as for LAPACK's.
    """
    n = C.shape[0]
    L = np.zeros_like(C)
    for s in range(0, n, block):
        e = min(s + block, n)
        panel = C[s:, s:e] - L[s:, :s] @ L[s:e, :s].T if s else C[s:, s:e]
        L[s:e, s:e] = np.linalg.cholesky(panel[:e - s])
        if e < n:
            L[e:, s:e] = lower_solve(L[s:e, s:e], np.ascontiguousarray(panel[e - s:].T), leaf).T
    return L


def lower_solve(T, R, leaf=16):
    """Y with T Y = R for T (b, b) lower-triangular and R (b, m): forward substitution,

        Y[i] = (R[i] - T[i, :i] Y[:i]) / T[i, i],

    row by row in blocks of at most ``leaf`` rows, the blocks by halves: [[A, 0], [B, D]] Y = R
    is A Y_1 = R_1, then D Y_2 = R_2 - B Y_1 (a matrix product)."""
    b = T.shape[0]
    Y = np.empty_like(R)
    if b <= leaf:
        for i in range(b):
            Y[i] = (R[i] - T[i, :i] @ Y[:i]) / T[i, i]
        return Y
    h = b // 2
    Y[:h] = lower_solve(T[:h, :h], R[:h], leaf)
    Y[h:] = lower_solve(T[h:, h:], R[h:] - T[h:, :h] @ Y[:h], leaf)
    return Y


class CholeskySolve:
    """Solves with L L^T for a lower-triangular L (n, n): forward substitution L y = b, then back
    substitution L^T x = y, by blocks of rows. NumPy has no triangular solve (and scipy is no
    dependency), and L^-1 costs another n^3/3: instead each diagonal block L_ii (at most
    ``block`` rows) is inverted once (n block^2 work in all), and a solve is then, block by block,

        y_i = L_ii^-1 (b_i - L_{i,<i} y_<i),     x_i = L_ii^-T (y_i - L_{>i,i}^T x_>i),

    matrix products over the triangle (n^2 work, a read of L's lower half each way). The
    inverted blocks add an error of eps cond(L_ii) to a solve, and cond(L_ii) = sqrt(cond of
    that diagonal block of L L^T) <= sqrt(cond(L L^T)): within what the refinement that uses
    this solve removes.

    Block 256: smaller blocks make the inverses cheaper and the solves slower (more, smaller
    products: OpenBLAS's products of a few columns are slow), larger ones the reverse; 256
    balanced them in the bench's memory sweep at n = 2,560.
    """

    def __init__(self, L, block=256):
        n, self.n, self.dtype = L.shape[0], L.shape[0], L.dtype
        self.edges = [(s, min(s + block, n)) for s in range(0, n, block)]
        # one block: its inverse is L^-1 and L is never read again (let go: n^2 numbers less)
        self.L = L if len(self.edges) > 1 else None
        size = min(block, 1 << (n - 1).bit_length())    # a power of two, for lower_inverses
        # the diagonal blocks as one stack, the last padded with the identity (whose inverse is
        # the identity), inverted together: a few calls on stacks instead of two per block
        blocks = np.zeros((len(self.edges), size, size), dtype=L.dtype)
        blocks[:] = np.eye(size, dtype=L.dtype)
        for T, (s, e) in zip(blocks, self.edges):
            T[:e - s, :e - s] = L[s:e, s:e]
        self.inverses = [T[:e - s, :e - s] for T, (s, e) in zip(lower_inverses(blocks), self.edges)]

    def solve_lower(self, b):
        """L^-1 b for b of shape (n,) or (n, k): forward substitution."""
        y = np.empty(b.shape, dtype=np.result_type(self.dtype, b))
        for (s, e), inverse in zip(self.edges, self.inverses):
            part = b[s:e] - self.L[s:e, :s] @ y[:s] if s else b[s:e]
            y[s:e] = inverse @ part
        return y

    def solve_upper(self, y):
        """L^-T y for y of shape (n,) or (n, k): back substitution."""
        x = np.empty(y.shape, dtype=np.result_type(self.dtype, y))
        n = self.n
        for (s, e), inverse in zip(reversed(self.edges), reversed(self.inverses)):
            part = y[s:e] - self.L[e:, s:e].T @ x[e:] if e < n else y[s:e]
            x[s:e] = inverse.T @ part
        return x

    def __call__(self, b):
        """(L L^T)^-1 b."""
        return self.solve_upper(self.solve_lower(b))


def lower_inverses(T):
    """T^-1 for a stack T (k, b, b) of lower-triangular blocks, b a power of two, by halves:
    [[A, 0], [C, D]]^-1 = [[A^-1, 0], [-D^-1 C A^-1, D^-1]], the A and D of every block stacked
    into one stack of 2k for the level below: b^3 / 3 multiply-adds a block, in stacked matrix
    products, and one call a level. np.linalg.inv alone solves T X = I by LU (8 b^3 / 3, and
    7x slower at b = 256 than this on the memory sweep's factors); it inverts the 8 x 8 blocks
    at the bottom, whose upper part np.tril zeroes (LU's inverse of a triangular block is
    triangular but for roundoff where it pivots)."""
    k, b, _ = T.shape
    if b <= 8:
        return np.tril(np.linalg.inv(T))
    h = b // 2
    halves = lower_inverses(np.concatenate([T[:, :h, :h], T[:, h:, h:]]))
    A_inv, D_inv = halves[:k], halves[k:]
    out = np.zeros_like(T)
    out[:, :h, :h], out[:, h:, h:] = A_inv, D_inv
    out[:, h:, :h] = -(D_inv @ (T[:, h:, :h] @ A_inv))
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
    net, D, keep_X, keep, rcond, refine = checked(NULLSPACE, locals())
    if not isinstance(net, MLP):
        return fixes.nullspace(net, D, keep_X, keep, rcond, refine)
    with np.errstate(over="ignore", invalid="ignore"):    # an overflow is handed on below
        J = Jacobian.from_record(net, *forward_arrays(net, keep_X), keep)
        gram = J.gram()
        if not finite(gram):
            raise diagnosis.gram_overflow(J, keep_X)
        solve = GramSolver(gram, rcond, reference=reference_gram(net, keep_X, keep))
        given = D
        D = {k: np.array(v) for k, v in D.items()}       # ours to write over: the caller's D stays
        D = project_out(J, solve, D, refine)
    if not all_finite(D):         # our products overflowed: the reference's answer, or its message
        return fixes.nullspace(net, given, keep_X, keep, rcond, refine)
    warn_if_not_held(J, gram, solve, given, D, refine)
    return D


def project_out(J, solve, D, refine):
    """D <- D - J^T (J J^T)^+ J D in place (D must be the caller's own), given J's Gram and its
    solver: refined on the system when the Gram is well conditioned, else through D itself."""
    J.drop_input_kernels()
    if solve.cond_exceeds(REFINE_DIRECTION_ABOVE_COND):
        return _refine(J, solve, D, 1 + refine)
    _subtract_rmatvec(J, D, solve.refined(J.matvec(D), refine))
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
    net, X, G, keep, keep_X, rcond, refine = checked(PROJECT, locals())
    if not isinstance(net, MLP):
        return fixes.project(net, X, G, keep, keep_X, rcond, refine)
    if keep_X is not X and not np.array_equal(keep_X, X):
        try:
            return nullspace(net, gradient(net, X, G), keep_X, keep, rcond, refine)
        except ValueError as exc:     # D is ours, made from G: the reference's message
            if getattr(exc, "argument", None) != "D":
                raise
            return fixes.project(net, X, G, keep, keep_X, rcond, refine)
    with np.errstate(over="ignore", invalid="ignore"):    # an overflow is handed on at the end
        return _project_on_the_batch(net, X, G, keep, rcond, refine)


def _project_on_the_batch(net, X, G, keep, rcond, refine):
    """``project`` when keep_X is X (its docstring says how)."""
    z, a = forward_arrays(net, X)
    n, K = a[net.depth].shape
    # one backward pass for G and the one-hot e_k together: G's signals first, then J's
    Gs = np.concatenate([G[None], one_hot(keep, n, K, net.dtype)])
    inputs, outputs = {l: a[l - 1] for l in range(1, net.depth + 1)}, a[net.depth][:, keep]
    signals = backprop(net, z, a, Gs, grads=False, signals=True)[1]     # consumes z and a
    J = Jacobian(net, inputs, outputs, {l: S[1:] for l, S in signals.items()})
    dz = {l: S[0] for l, S in signals.items()}                # G's signals dz_l (views)
    del signals
    gram = J.gram()
    if not finite(gram):
        raise diagnosis.gram_overflow(J, X)
    solve = GramSolver(gram, rcond, reference=reference_gram(net, X, keep))
    ill = solve.cond_exceeds(REFINE_DIRECTION_ABOVE_COND)
    alpha = solve.refined(J.matvec_gradient(dz), 0 if ill else refine)
    J.drop_input_kernels()        # not needed again: freed before D, the largest array, is made
    # where the accuracy is not assured, D's is measured, against g (made only then)
    g = J.from_signals(dict(dz)) if held_unassured(solve, len(alpha), net.dtype, refine) else None
    E = {l: dz[l] - weighted for l, weighted in J.weighted_signals(alpha)}   # dz_l - sum_j alpha_j S_l,j
    del dz
    if ill:
        D = _refine(J, solve, J.from_signals(E), refine)
    else:
        if g is None:
            J.signals = None      # frees the stacked signals: D needs only E_l and the inputs
        D = J.from_signals(E)
    if not all_finite(D):         # G's signals overflowed: the reference says so, as for gradient
        return fixes.project(net, X, G, keep, X, rcond, refine)
    if g is not None:
        warn_if_not_held(J, gram, solve, g, D, refine)
    return D


def restore(net, keep_X, ref, keep=(0,), tol=1e-12, max_iter=20, rcond=None):
    """``fixes.restore``: the same Gauss-Newton loop (``fixes.gauss_newton``) and tolerance, each
    iteration's forward record shared between the residual and the Jacobian (``Record``), solved by
    the fast ``GramSolver`` (``RestoreSolver``), stepped by ``step``."""
    net, keep_X, keep, ref, tol, max_iter, rcond = checked(RESTORE, locals())
    if not isinstance(net, MLP):
        return fixes.restore(net, keep_X, ref, keep, tol, max_iter, rcond)
    solver = partial(RestoreSolver, rcond=rcond, reference=reference_gram(net, keep_X, keep))
    return fixes.gauss_newton(net, keep_X, keep, ref, tol, max_iter, Record.of, Record.jacobian, solver, step)


class Record(NamedTuple):
    """A forward record as ``forward_arrays`` leaves it (z, a), with its ``output``: what the Jacobian
    of ``restore``'s next step is made from, without a second forward pass."""
    z: dict
    a: dict
    output: np.ndarray

    @classmethod
    def of(cls, net, X):
        z, a = forward_arrays(net, X)
        return cls(z, a, a[net.depth])

    @staticmethod
    def jacobian(net, X, keep, record):
        return Jacobian.from_record(net, record.z, record.a, keep)     # consumes the record


class RestoreSolver(GramSolver):
    """``GramSolver`` for restore's residuals, which are as large as ref may be: r scaled by a
    power of two, since the solver's conjugate gradients square it: a residual of 1e200 would
    overflow them, and the loop stall. Scaling by 2^k is exact: the same bits, unless the
    unscaled solve would underflow (then more accurate ones)."""

    def __call__(self, rhs):
        scale = np.ldexp(rhs.dtype.type(1), int(np.frexp(np.abs(rhs).max())[1]) - 1)
        return super().__call__(rhs / scale) * scale
