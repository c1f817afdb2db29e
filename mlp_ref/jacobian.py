"""Output Jacobians without building them, and the cross-output tangent kernel.

For a kept output k and an input row x_i, the Jacobian row J_{ik} = dO_{ik}/dtheta has,
in layer l, the blocks

    dO_ik/dW_l = outer(a_{l-1,i}, s_{l,ik}),        dO_ik/db_l = s_{l,ik},

where s_{l,ik} = dO_ik/dz_{l,i} is the per-sample backprop *signal*: the row i of the
stage dz_l of a backward pass with G = e_k (one-hot on column k). So J is fully described
by the layer inputs a_{l-1} (n, n_{l-1}) and the signals S_l (n, q, n_l), q kept outputs:
n * sum_l (n_{l-1} + q n_l) numbers instead of n * q * P. Everything we need follows
layer by layer, with rows c = (i, j) in sample-major order (c = i * q + j):

    Gram        J J^T  = sum_l (S_l S_l^T) * (a_{l-1} a_{l-1}^T + 1)        (m, m), m = n q
    J . D              = sum_l  rowwise  S_l . (a_{l-1} @ DW_l + Db_l)       (m,)
    J^T alpha          = { W_l: a_{l-1}^T @ (sum_j alpha_ij S_l,ij),  b_l: column sums }

(the "+ 1" is the bias: its "input" is the constant 1). Cost: q signal-only backward
passes, one product a a^T and S S^T per layer; memory O(n^2 + n * width), never O(n * P).

A gradient on the same rows factors the same way: g = { W_l: a_{l-1}^T dz_l, b_l: column
sums of dz_l }, dz_l its per-sample signals (the stages of its backward pass). Then the
change of z_l along g is a_{l-1} (a_{l-1}^T dz_l) + 1 (1^T dz_l) = (a a^T + 1) dz_l, so

    J g                = sum_l  rowwise  S_l . ((a_{l-1} a_{l-1}^T + 1) @ dz_l)

reuses the Gram's factors and never builds g (``matvec_gradient``).
"""
from __future__ import annotations

import numpy as np

from . import _checks


def check_keep(keep, K, name="keep"):
    """``keep`` as a list of distinct output indices in range(K), non-empty."""
    if isinstance(keep, (int, np.integer)) and not isinstance(keep, bool):
        keep = [keep]
    if isinstance(keep, (str, bytes, dict)) or not hasattr(keep, "__iter__"):
        raise TypeError(f"{name}: expected a list of output indices, got {_checks.describe(keep)}")
    keep = list(keep)
    if not keep:
        raise ValueError(f"{name}: expected at least one output index, got an empty list")
    for k in keep:
        if isinstance(k, (bool, np.bool_)) or not isinstance(k, (int, np.integer)):
            raise TypeError(f"{name}: expected whole-number output indices, got {keep!r}")
        if not 0 <= k < K:
            raise ValueError(f"{name}: output index {k} out of range for {K} outputs "
                             f"(expected 0 .. {K - 1})")
    if len(set(keep)) != len(keep):
        raise ValueError(f"{name}: expected distinct output indices, got {keep}")
    return [int(k) for k in keep]


class OutputJacobian:
    """The Jacobian J of outputs ``keep`` on the rows of X, as an implicit operator.

    Parameters
    ----------
    net : MLP
    X : array_like, shape (n, d)
    keep : list of int, length q        the output columns whose Jacobian we want
    record : Forward, optional
        ``net.forward(X)`` already run by the caller: pass it instead of X to save a forward pass.

    Attributes
    ----------
    inputs  : dict l -> ndarray (n, n_{l-1})     a_{l-1}, the input of layer l
    signals : dict l -> ndarray (n, q, n_l)      S_l[i, j] = dO_{i, keep[j]} / dz_{l, i}
    outputs : ndarray (n, q)                     the kept outputs O[:, keep]
    shape   : (m, P) with m = n q
    """

    def __init__(self, net, X=None, keep=(0,), record=None):
        self.net = net
        if (X is None) == (record is None):
            raise TypeError("OutputJacobian: expected either X or record (a forward record of "
                            "net, to reuse instead of running the forward pass again), not "
                            + ("both" if X is not None else "neither"))
        if record is None:
            record = net.forward(X)
        else:
            net.check_record(record)
        n, K = record.output.shape
        self.keep = check_keep(keep, K)
        q = len(self.keep)
        self.outputs = record.output[:, self.keep]
        self.inputs = {l: record.a[l - 1] for l in range(1, net.depth + 1)}
        self.signals = {}
        for j, k in enumerate(self.keep):
            e_k = np.zeros(K, dtype=net.dtype)
            e_k[k] = 1.0
            back = net.backward(record, e_k, input_grad=False, param_grads=False)
            for l in range(1, net.depth + 1):
                dz = back.stages[f"dz{l}"]
                if q == 1:                   # one kept output: the stage itself, seen as (n, 1, n_l)
                    self.signals[l] = dz[:, None, :]
                else:
                    if j == 0:
                        self.signals[l] = np.empty((n, q, dz.shape[1]), dtype=net.dtype)
                    self.signals[l][:, j, :] = dz
        self.shape = (n * q, net.n_params)
        self._input_kernels = None

    @property
    def n_rows(self):
        return self.shape[0]

    def _flat_signals(self, l):
        """S_l as (m, n_l), rows c = i * q + j."""
        S = self.signals[l]
        return S.reshape(-1, S.shape[2])

    def input_kernels(self):
        """a_{l-1} a_{l-1}^T + 1 per layer, dict l -> (n, n): the inputs' factor of the Gram.

        Computed once and kept: ``gram`` and ``matvec_gradient`` both need it.
        """
        if self._input_kernels is None:
            self._input_kernels = {}
            for l, A in self.inputs.items():
                AA = A @ A.T                 # NumPy sees A and A.T share memory: one symmetric product (syrk)
                AA += 1.0                    # the bias, whose "input" is the constant 1; in place
                self._input_kernels[l] = AA
        return self._input_kernels

    def drop_input_kernels(self):
        """Let the kept input kernels go (n^2 numbers per layer): for a caller done with
        ``gram`` and ``matvec_gradient`` that is about to allocate more. Made again if asked."""
        self._input_kernels = None

    def gram(self):
        """J J^T, shape (m, m), from the per-layer factors: never forms J."""
        n, q = self.signals[1].shape[:2]
        total = np.zeros((n, q, n, q), dtype=self.net.dtype)     # rows and columns c = (i, j)
        for l, AA in self.input_kernels().items():
            S = self._flat_signals(l)
            SS = (S @ S.T).reshape(n, q, n, q)
            SS *= AA[:, None, :, None]       # row (i, j) uses sample i's input, whatever j: broadcast
            total += SS                      # over the q outputs instead of repeating AA q times
        return total.reshape(n * q, n * q)

    def matvec(self, D):
        """J . D for a direction D (dict like params); returns shape (m,).

        Row c = (i, j): sum_l S_l[i, j] . (a_{l-1, i} @ DW_l + Db_l), the first-order
        change of O_{i, keep[j]} along D.
        """
        out = np.zeros(self.signals[1].shape[:2], dtype=self.net.dtype)
        for l, S in self.signals.items():
            dz = self.inputs[l] @ D[f"W{l}"]          # (n, n_l): change of z_l along D
            dz += D[f"b{l}"]                          # in place: no second (n, n_l) array
            out += np.einsum("ijk,ik->ij", S, dz)
        return out.reshape(-1)

    def matvec_gradient(self, dz):
        """J . g for the gradient g whose per-sample signals on the rows of X are ``dz``.

        dz : dict l -> ndarray (n, n_l), the stages dz_l of ``net.backward(record, G)`` on
             the same rows as this Jacobian, so that g = { W_l: a_{l-1}^T dz_l, b_l: sums of dz_l }.

        The change of z_l along g is (a a^T + 1) @ dz_l, an (n, n) by (n, n_l) product with
        the Gram's own factor, instead of building g and then a_{l-1} @ g_W (n_{l-1} wide).
        Equal to ``matvec(g)`` up to roundoff. Returns shape (m,).
        """
        out = np.zeros(self.signals[1].shape[:2], dtype=self.net.dtype)
        for l, AA in self.input_kernels().items():
            out += np.einsum("ijk,ik->ij", self.signals[l], AA @ dz[l])
        return out.reshape(-1)

    def weighted_signals(self, alpha):
        """sum_j alpha_ij S_l[i, j] per layer: dict l -> (n, n_l), the per-sample signals of J^T alpha."""
        n, q = self.signals[1].shape[:2]
        alpha = np.asarray(alpha, dtype=self.net.dtype).reshape(n, q)
        return {l: np.einsum("ij,ijk->ik", alpha, S) for l, S in self.signals.items()}

    def from_signals(self, signals, consume=False):
        """The direction whose per-sample signals on the rows of X are ``signals`` (dict l -> (n, n_l)):
        { W_l: a_{l-1}^T @ E_l, b_l: column sums of E_l }, as a backward pass sums dW_l and db_l.

        consume=True empties ``signals`` as it goes, for a caller whose own temporary it is:
        each E_l is freed as soon as its layer is done, while the direction grows.
        """
        D = {}
        for l in list(signals):
            E = signals.pop(l) if consume else signals[l]
            D[f"W{l}"] = self.inputs[l].T @ E
            D[f"b{l}"] = E.sum(axis=0)
        return D

    def rmatvec(self, alpha):
        """J^T alpha for alpha of shape (m,); returns a dict like params."""
        return self.from_signals(self.weighted_signals(alpha), consume=True)

    def dense(self):
        """J itself, shape (m, P), columns in the order of ``flatten``: for teaching and tests.

        Memory m * P: fine for small networks, exactly what the Gram trick avoids.
        """
        blocks = []
        for l, S in self.signals.items():
            A = self.inputs[l]
            W_block = np.einsum("ia,ijk->ijak", A, S)             # outer(a_i, s_ij)
            blocks += [W_block.reshape(self.n_rows, -1), S.reshape(self.n_rows, -1)]
        return np.concatenate(blocks, axis=1)


def dense_rows(net, X, keep=(0,)):
    """The dense Jacobian J of outputs ``keep`` on X, shape (n q, P), rows sample-major."""
    return OutputJacobian(net, X, keep).dense()


def flatten(D):
    """A dict like params as one vector, in the order W1, b1, W2, b2, ... (row-major)."""
    return np.concatenate([np.ravel(v) for v in D.values()])


def unflatten(vector, like):
    """The inverse of ``flatten``: a dict with the keys and shapes of ``like``."""
    out, start = {}, 0
    for key, value in like.items():
        size = np.size(value)
        out[key] = np.reshape(vector[start:start + size], np.shape(value))
        start += size
    if start != len(vector):
        raise ValueError(f"vector: expected {start} entries for {list(like)}, got {len(vector)}")
    return out


class GramSolver:
    """alpha = gram^+ rhs for a symmetric positive semi-definite gram, rank-revealing.

    The eigenvalues lam of gram decide everything. Those above ``rcond * max(lam)`` are
    kept, the rest are treated as exactly zero: this is what makes redundant constraints
    (duplicate rows, dead ReLU units, more constraints than parameters) harmless, since
    their directions are simply not in the row space. Then

    * every eigenvalue kept (full rank, the usual case): gram^+ = gram^-1, and an LU solve
      (``np.linalg.solve``) gives alpha;
    * some dropped: we diagonalise gram = V diag(lam) V^T and invert only the kept lam.

    Why two ways: for n = 256 constraints, the eigenvalues alone cost about 2 ms and an LU
    solve 0.6 ms, while the eigenvectors add about 3 ms, as much as half a training step of an
    MNIST-sized network in float32. Both ways agree to roundoff when the rank is full.

    rcond defaults to m * eps(dtype), the size of the roundoff in the eigenvalues of an
    (m, m) matrix; in terms of J that drops singular values below sqrt(rcond) * sigma_max
    (about 4e-8 sigma_max for m = 8 in float64).

    Attributes: ``rank``, the number of eigenvalues kept; ``cond``, the largest over the
    smallest kept eigenvalue (the condition number of what is inverted).
    """

    def __init__(self, gram, rcond=None):
        m = gram.shape[0]
        self.rcond = max(m, 1) * np.finfo(gram.dtype).eps if rcond is None else rcond
        self.gram, self.V = gram, None
        lam = np.linalg.eigvalsh(gram)                        # ascending; they decide the way
        if self._kept(lam).sum() < m:                         # rank-deficient: eigenvectors too
            lam, self.V = np.linalg.eigh(gram)
        keep = self._kept(lam)
        self.rank = int(keep.sum())
        self.cond = float(lam[-1] / lam[keep][0]) if self.rank else 1.0
        if self.V is not None:
            self.inv = np.zeros_like(lam)
            self.inv[keep] = 1.0 / lam[keep]

    def _kept(self, lam):
        """Which eigenvalues (ascending) count as nonzero: those above rcond * the largest."""
        m = len(lam)
        return lam > self.rcond * lam[-1] if m and lam[-1] > 0 else np.zeros(m, dtype=bool)

    def __call__(self, rhs):
        if self.V is None:                                    # full rank: gram^+ = gram^-1
            return np.linalg.solve(self.gram, rhs)
        return self.V @ (self.inv * (self.V.T @ rhs))


def tangent_kernel_by_layer(net, X, i=0, j=1):
    """The cross-output tangent kernel K_ij = J_i J_j^T, split into one share per layer.

    K_ij[a, b] = dO_{a,i}/dtheta . dO_{b,j}/dtheta: how much a gradient step that moves
    output j on sample b moves output i on sample a (to first order, with step size 1).
    Per layer, share_l = (S_l^(i) S_l^(j)T) * (a_{l-1} a_{l-1}^T + 1).

    For the output layer L, the signal of output i is e_i on every row and that of j is
    e_j: their product is exactly zero (out_i and out_j have disjoint output weights), so
    every bit of the cross-talk flows through the shared hidden layers.

    Returns
    -------
    dict: layer l -> ndarray (n, n), and "total" -> their sum, J_i J_j^T.
    """
    jac = OutputJacobian(net, X, keep=[i, j] if i != j else [i])
    a, b = (0, 1) if i != j else (0, 0)
    shares = {l: (S[:, a, :] @ S[:, b, :].T) * jac.input_kernels()[l]
              for l, S in jac.signals.items()}
    shares["total"] = sum(shares[l] for l in jac.signals)
    return shares
