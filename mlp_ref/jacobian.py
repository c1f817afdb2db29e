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

This module is the reference: each product is written as its formula. ``mlp_ref.fast`` computes
the same products with the tricks a benchmark needs (shared records, kept factors, freed signals).

A model made of several MLPs (``SplitHeads``, ``TwoTower``: see ``network.Piece``) has the
Jacobian of its pieces (``architectures.PiecewiseJacobian``): ``of(net, X, keep)`` returns the
right one for any model.
"""
from __future__ import annotations

import numpy as np

from .boundary import checks, diagnosis
from .boundary.checks import check_keep
from .boundary.model_checks import check_mlp, check_net
from .network import MLP


class OutputJacobian:
    """The Jacobian J of outputs ``keep`` of an MLP on the rows of X, as an implicit operator.

    Parameters
    ----------
    net : MLP
    X : array_like, shape (n, d)
    keep : list of int, length q        the output columns whose Jacobian we want

    Attributes
    ----------
    inputs  : dict l -> ndarray (n, n_{l-1})     a_{l-1}, the input of layer l
    signals : dict l -> ndarray (n, q, n_l)      S_l[i, j] = dO_{i, keep[j]} / dz_{l, i}
    outputs : ndarray (n, q)                     the kept outputs O[:, keep]
    shape   : (m, P) with m = n q
    """

    def __init__(self, net, X, keep=(0,)):
        self.net = check_mlp(net, " (for any model, use jacobian.of)")
        record = net.forward(X)
        n, K = record.output.shape
        self.keep = check_keep(keep, K)
        self.outputs = record.output[:, self.keep]
        self.inputs = {l: record.a[l - 1] for l in range(1, net.depth + 1)}
        # backprop of G = e_k (one-hot on column k): its stages dz_l are the signals of output k
        backs = [net.backward(record, np.eye(K, dtype=net.dtype)[k]) for k in self.keep]
        self.signals = {l: np.stack([b.stages[f"dz{l}"] for b in backs], axis=1)
                        for l in range(1, net.depth + 1)}
        self.shape = (n * len(self.keep), net.n_params)

    @property
    def n_rows(self):
        return self.shape[0]

    def input_kernels(self):
        """a_{l-1} a_{l-1}^T + 1 per layer, dict l -> (n, n): the inputs' factor of the Gram."""
        return {l: A @ A.T + 1.0 for l, A in self.inputs.items()}

    def gram(self):
        """J J^T = sum_l (S_l S_l^T) * (a_{l-1} a_{l-1}^T + 1), shape (m, m): never forms J."""
        n, q = self.outputs.shape
        total = np.zeros((n * q, n * q), dtype=self.net.dtype)
        for l, AA in self.input_kernels().items():
            S = self.signals[l].reshape(n * q, -1)              # row c = i q + j
            AA = np.repeat(np.repeat(AA, q, axis=0), q, axis=1)  # row c uses sample i's input
            total += (S @ S.T) * AA
        return total

    def matvec(self, D):
        """J . D for a direction D (dict like params); returns shape (m,).

        Row c = (i, j): sum_l S_l[i, j] . (a_{l-1, i} @ DW_l + Db_l), the first-order
        change of O_{i, keep[j]} along D.
        """
        D = checks.param_dict("D", D, self.net.param_shapes, self.net.dtype)
        out = np.zeros(self.outputs.shape, dtype=self.net.dtype)
        for l, S in self.signals.items():
            dz = self.inputs[l] @ D[f"W{l}"] + D[f"b{l}"]      # (n, n_l): the change of z_l along D
            out += np.einsum("ijk,ik->ij", S, dz)               # S_l[i, j] . dz_i
        return out.reshape(-1)

    def magnitude(self, D):
        """|J| |D|, shape (m,): the scale of J . D's roundoff (``diagnosis.magnitude``)."""
        return diagnosis.magnitude(self, D)

    def rmatvec(self, alpha):
        """J^T alpha for alpha of shape (m,); returns a dict like params.

        Per layer, E_l = sum_j alpha_ij S_l[i, j] (n, n_l) are the per-sample signals of J^T alpha,
        summed over rows as a backward pass sums dW_l and db_l.
        """
        alpha = np.reshape(alpha, self.outputs.shape)
        D = {}
        for l, S in self.signals.items():
            E = np.einsum("ij,ijk->ik", alpha, S)
            D[f"W{l}"] = self.inputs[l].T @ E
            D[f"b{l}"] = E.sum(axis=0)
        return D

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


def of(net, X, keep=(0,)):
    """The Jacobian of outputs ``keep`` of any model of the package on the rows of X: an MLP's
    own, or that of a model made of MLPs, assembled from its pieces' (``net.jacobian``, in
    ``architectures``)."""
    if isinstance(net, MLP):
        return OutputJacobian(net, X, keep)
    return check_net(net).jacobian(X, keep)


def dense_rows(net, X, keep=(0,)):
    """The dense Jacobian J of outputs ``keep`` on X, shape (n q, P), rows sample-major."""
    return of(net, X, keep).dense()


def flatten(D):
    """A dict like params as one vector, in the order W1, b1, W2, b2, ... (row-major)."""
    return np.concatenate([np.ravel(v) for v in checks.check_flat(D).values()])


def unflatten(vector, like):
    """The inverse of ``flatten``: a dict with the keys and shapes of ``like``."""
    vector = checks.check_vector(vector, like)          # (P,): a (P, 1) column is taken too
    out, start = {}, 0
    for key, value in like.items():
        size = np.size(value)
        out[key] = np.reshape(vector[start:start + size], np.shape(value))
        start += size
    return out


@checks.overflow_is_reported
def tangent_kernel_by_layer(net, X, i=0, j=1):
    """The cross-output tangent kernel K_ij = J_i J_j^T of an MLP, split into one share per layer.

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
    K = check_mlp(net).sizes[-1]
    i, j = (check_keep([k], K, name)[0] for k, name in ((i, "i"), (j, "j")))
    jac = OutputJacobian(net, X, keep=[i, j] if i != j else [i])
    a, b = (0, 1) if i != j else (0, 0)
    kernels = jac.input_kernels()
    shares = {l: (S[:, a, :] @ S[:, b, :].T) * kernels[l] for l, S in jac.signals.items()}
    shares["total"] = sum(shares[l] for l in jac.signals)
    diagnosis.finite_kernel(net, jac, kernels, shares["total"])
    return shares
