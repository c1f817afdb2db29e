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

from .boundary import diagnosis
from .boundary.checks import (
    BadType,
    BadValue,
    check_inputs,
    check_keep,
    check_params_like,
    checked,
    describe,
    finite,
)
from .boundary.model_checks import check_mlp, check_net
from .network import MLP, check_record


def check_record_of_X(name, record, got):
    """None, or an MLP's ``net.forward(X)`` of the X given (a record of the net whose a0 holds X); a
    model made of MLPs makes its own."""
    if record is None or not isinstance(got["net"], MLP):
        return None
    if not np.array_equal(check_record(name, record, got).a[0], got["X"]):
        raise BadValue(f"{name}: expected net.forward(X) of the X given, got a record of other inputs", argument=name)
    return record


#: What the Jacobians take (``boundary.checks``: checked once, at the door).
OUTPUT_JACOBIAN = {"net": check_mlp, "X": check_inputs, "keep": check_keep, "record": check_record_of_X}
JACOBIAN = {"net": check_net, "X": check_inputs, "keep": check_keep}
AT = {**JACOBIAN, "record": check_record_of_X}
DIRECTION = {"D": check_params_like}


class OutputJacobian:
    """The Jacobian J of outputs ``keep`` of an MLP on the rows of X, as an implicit operator.

    Parameters
    ----------
    net : MLP
    X : array_like, shape (n, d)
    keep : list of int, length q        the output columns whose Jacobian we want
    record : Forward, optional          ``net.forward(X)`` when it is made already (``restore``'s)

    Attributes
    ----------
    inputs  : dict l -> ndarray (n, n_{l-1})     a_{l-1}, the input of layer l
    signals : dict l -> ndarray (n, q, n_l)      S_l[i, j] = dO_{i, keep[j]} / dz_{l, i}
    outputs : ndarray (n, q)                     the kept outputs O[:, keep]
    shape   : (m, P) with m = n q
    """

    def __init__(self, net, X, keep=(0,), record=None):
        self.net, X, self.keep, record = checked(OUTPUT_JACOBIAN, locals())
        record = net.forward(X) if record is None else record      # the forward pass, unless made already
        n, K = record.output.shape
        self.outputs = record.output[:, self.keep]
        self.inputs = {l: record.a[l - 1] for l in range(1, net.depth + 1)}
        # backprop of G = e_k on every row (one-hot on column k): its stages dz_l are the signals of output k
        backs = [net.backward(record, one_hot(k, n, K, net.dtype)) for k in self.keep]
        # S_l stacked (q, n, n_l), then with the rows first: (n, q, n_l)
        self.signals = {l: np.array([b.stages[f"dz{l}"] for b in backs]).swapaxes(0, 1).copy()
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
            AA = AA.repeat(q, axis=0).repeat(q, axis=1)         # row c uses sample i's input
            total += (S @ S.T) * AA
        return total

    def matvec(self, D):
        """J . D for a direction D (dict like params); returns shape (m,).

        Row c = (i, j): sum_l S_l[i, j] . (a_{l-1, i} @ DW_l + Db_l), the first-order
        change of O_{i, keep[j]} along D.
        """
        D = checked(DIRECTION, {"net": self.net, "D": D})
        out = np.zeros(self.outputs.shape, dtype=self.net.dtype)
        for l, S in self.signals.items():
            dz = self.inputs[l] @ D[f"W{l}"] + D[f"b{l}"]      # (n, n_l): the change of z_l along D
            out += np.einsum("ijk,ik->ij", S, dz)               # S_l[i, j] . dz_i
        return out.reshape(-1)

    def magnitude(self, D):
        """|J| |D|, shape (m,): the scale of J . D's roundoff (``magnitude``)."""
        return magnitude(self, D)

    def rmatvec(self, alpha):
        """J^T alpha for alpha of shape (m,); returns a dict like params.

        Per layer, E_l = sum_j alpha_ij S_l[i, j] (n, n_l) are the per-sample signals of J^T alpha,
        summed over rows as a backward pass sums dW_l and db_l.
        """
        alpha = np.asarray(alpha).reshape(self.outputs.shape)
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


def one_hot(k, n, K, dtype):
    """The output gradient G = e_k on each of n rows: dL/dO of L = sum_i O_ik."""
    G = np.zeros((n, K), dtype=dtype)
    G[:, k] = 1.0
    return G


def at(net, X, keep, record):
    """``of(net, X, keep)`` where ``record`` is the forward record of X already made (``restore``'s, whose
    residual it gave): an MLP's Jacobian from that record; a model made of MLPs makes its pieces' own."""
    net, X, keep, record = checked(AT, locals())
    return OutputJacobian(net, X, keep, record) if isinstance(net, MLP) else net.jacobian(X, keep)


def of(net, X, keep=(0,)):
    """The Jacobian of outputs ``keep`` of any model of the package on the rows of X: an MLP's
    own, or that of a model made of MLPs, assembled from its pieces' (``net.jacobian``, in
    ``architectures``)."""
    net, X, keep = checked(JACOBIAN, locals())
    if isinstance(net, MLP):
        return OutputJacobian(net, X, keep)
    return net.jacobian(X, keep)


def magnitude(J, D):
    """|J| |D| (absolute values, entry by entry), shape (m,), for an MLP's Jacobian J of either
    tier (its ``signals``, ``inputs`` and ``outputs``): the scale of the roundoff of J . D, and of
    J . fl(D) against J . D, each at most a few eps times it."""
    out = np.zeros(J.outputs.shape, dtype=J.outputs.dtype)
    for l, S in J.signals.items():
        dz = np.abs(J.inputs[l]) @ np.abs(D[f"W{l}"]) + np.abs(D[f"b{l}"])
        out += (np.abs(S) @ dz[:, :, None])[:, :, 0]          # |S_l[i, j]| . dz_i
    return out.reshape(-1)


def dense_rows(net, X, keep=(0,)):
    """The dense Jacobian J of outputs ``keep`` on X, shape (n q, P), rows sample-major."""
    net, X, keep = checked(JACOBIAN, locals())
    return of(net, X, keep).dense()


def flatten(D):
    """A dict like params as one vector, in the order W1, b1, W2, b2, ... (row-major)."""
    if not isinstance(D, dict) or not D:
        raise BadType(f"D: expected a non-empty dict like params, got {describe(D)}", argument="D")
    return np.concatenate([np.ravel(v) for v in D.values()])


def unflatten(vector, like):
    """The inverse of ``flatten``: a dict with the keys and shapes of ``like``."""
    vector, total = np.asarray(vector), sum(np.size(value) for value in like.values())
    if vector.ndim == 2 and vector.shape[1] == 1:        # a column, as pinv(J) @ r gives it
        vector = vector[:, 0]
    if vector.shape != (total,):
        raise BadValue(f"vector: expected shape ({total},) or ({total}, 1), one entry per parameter of "
                       f"{list(like)}, got {vector.shape}", argument="vector")
    out, start = {}, 0
    for key, value in like.items():
        size = np.size(value)
        out[key] = np.reshape(vector[start:start + size], np.shape(value))
        start += size
    return out


def check_output_index(name, k, got):
    """One output index 0 .. K - 1 (i or j of a kernel)."""
    return check_keep(name, [k], got)[0]


KERNEL = {"net": check_mlp, "X": check_inputs, "i": check_output_index, "j": check_output_index}


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
    net, X, i, j = checked(KERNEL, locals())
    jac = OutputJacobian(net, X, keep=[i, j] if i != j else [i])
    a, b = (0, 1) if i != j else (0, 0)
    with np.errstate(over="ignore", invalid="ignore"):                    # an overflow is named below
        kernels = jac.input_kernels()
        shares = {l: (S[:, a, :] @ S[:, b, :].T) * kernels[l] for l, S in jac.signals.items()}
        shares["total"] = sum(shares[l] for l in jac.signals)
    if not finite(shares["total"]):
        raise diagnosis.gram_overflow(jac, X, "X", "X")
    return shares
