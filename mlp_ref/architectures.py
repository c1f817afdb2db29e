"""Layer splitting as architecture: the accepted answer's first recipe, as networks.

    "introduce two sets of variables: one for the connections between the hidden layer
     and the first output block, one for the rest" -- then train only out2's connections
     (its snippet's ``var_list=[W_h_to_out2, b_h_to_out2]``: of "the rest", the output
     layer's part alone).

Two ways to give each group of outputs parameters of its own:

    SplitHeads   one shared trunk (layers 1 .. L-1), one output layer per group
    TwoTower     one whole MLP per group, nothing shared

Training only parameters that output 1 does not depend on leaves output 1 *exactly*
unchanged: not to first order, but to the last bit, on every input, at every step size.
The price: with split heads the trunk must stay frozen (it feeds output 1 too), so out2
can only re-weight features learnt for both; two towers can train a whole network for
out2, but share nothing and cost a trunk per group.

Parameter names: the MLP's key, then the part it belongs to. For sizes [3, 4, 2] and
groups [[0], [1]]:

    SplitHeads   trunk     W1 (3, 4), b1 (4,)                      as in MLP, layers 1 .. L-1
                 head j    W2_head{j} (4, len(heads[j])), b2_head{j} (len(heads[j]),)
    TwoTower     tower k   W1_tower{k} (3, 4), b1_tower{k} (4,),
                           W2_tower{k} (4, len(groups[k])), b2_tower{k} (len(groups[k]),)

Column c of head (or tower) j is output ``groups[j][c]``; the model's output puts every
column back in its place, so it is (n, K) like an MLP's.

Both classes compute *through* an MLP from network.py: the backprop math lives in one
place. A SplitHeads model is exactly an MLP whose last weight matrix is the heads'
columns put side by side; a TwoTower model is one MLP per group.
"""
from __future__ import annotations

import difflib
import inspect
import reprlib
from dataclasses import dataclass, field
from functools import partial

import numpy as np

from .boundary.checks import BadType, BadValue, check_inputs, check_keep, checked, describe, is_whole
from .boundary.model_checks import check_mlp
from .jacobian import OutputJacobian, flatten
from .network import BACKWARD, INPUTS, MLP, Backward, Model, Piece, check_record


def check_groups(name, groups, K):
    """``groups`` as a list of lists of int that partitions range(K).

    Each output index 0 .. K-1 must be in exactly one group, and no group may be empty.
    Raises ValueError or TypeError naming ``name`` and saying what is wrong.
    """
    example = reprlib.repr([[k] for k in range(min(K, 7))])     # (reprlib: the first few, then ...)
    if isinstance(groups, (str, bytes)) or not isinstance(groups, (list, tuple)):
        raise BadType(f"{name}: expected a list of groups of output indices, e.g. {example}, "
                      f"got {describe(groups)}", argument=name)
    if len(groups) == 0:
        raise BadValue(f"{name}: expected at least one group of output indices, e.g. {example}, "
                       f"got none", argument=name)
    owner = {}                       # output index -> the group that holds it
    out = []
    for j, group in enumerate(groups):
        if isinstance(group, (str, bytes)) or not isinstance(group, (list, tuple, range, np.ndarray)):
            raise BadType(f"{name}[{j}]: expected a list of output indices, "
                          f"got {describe(group)}", argument=name)
        if len(group) == 0:
            raise BadValue(f"{name}[{j}]: the group is empty; every group needs at least one output", argument=name)
        cols = []
        for c in group:
            if not is_whole(c):
                raise BadType(f"{name}[{j}]: expected whole numbers (output indices), "
                              f"got {describe(c)}", argument=name)
            c = int(c)
            if not 0 <= c < K:
                raise BadValue(f"{name}[{j}]: output index {c} is out of range for "
                               f"{K} outputs (0 .. {K - 1})", argument=name)
            if c in owner:
                where = f"twice in group {j}" if owner[c] == j else f"in groups {owner[c]} and {j}"
                raise BadValue(f"{name}: output {c} is {where}; each output must be in "
                               f"exactly one group", argument=name)
            owner[c] = j
            cols.append(c)
        out.append(cols)
    missing = [c for c in range(K) if c not in owner]
    if missing:
        raise BadValue(f"{name}: output(s) {reprlib.repr(missing)} are in no group; the groups must cover "
                       f"every output 0 .. {K - 1}, each exactly once", argument=name)
    return out


def _mlp_with(template, params):
    """An MLP with the structure of ``template`` (sizes, activations, dtype) computing with
    ``params``: the arrays are shared, not copied. ``template.params`` is kept empty, so
    the copy costs nothing."""
    net = template.copy()
    net.params = params
    return net


def _structure(net, sizes):
    """An MLP with the activations and dtype of ``net`` but other sizes, holding no parameters."""
    template = MLP(sizes, hidden=net.activations[:-1], output=net.output, init_std=0.0, seed=0,
                   dtype=net.dtype)
    template.params = {}
    return template


#: The keywords an MLP takes besides its sizes, which SplitHeads and TwoTower pass on to it.
MLP_KEYWORDS = tuple(inspect.signature(MLP).parameters)[1:]


class _Composed(Model):
    """What SplitHeads and TwoTower share beyond ``network.Model``: being built from an MLP
    (``_build``, which each defines) and the activation names they were built with."""

    def jacobian(self, X, keep=(0,)):
        """The Jacobian of outputs ``keep`` on the rows of X, from the pieces' (``jacobian.of``)."""
        return PiecewiseJacobian(self, X, keep)

    @classmethod
    def _mlp(cls, sizes, own, keywords):
        """``MLP(sizes, **keywords)``; a keyword no MLP takes is refused in this class's name,
        with the keywords it does take (``own``: the class's own, besides an MLP's)."""
        unknown = [k for k in keywords if k not in MLP_KEYWORDS]
        if unknown:
            close = difflib.get_close_matches(unknown[0], (own, *MLP_KEYWORDS), n=1)
            hint = f" (did you mean {close[0]!r}?)" if close else ""
            raise BadType(f"{unknown[0]}: not a keyword argument of {cls.__name__}{hint}; "
                          f"expected {own!r} or an MLP's: {', '.join(MLP_KEYWORDS)}", argument=unknown[0])
        return MLP(sizes, **keywords)

    @classmethod
    def _from(cls, net, groups):
        check_mlp("net", net)
        model = object.__new__(cls)
        model._build(net.copy(), groups)        # the copy is ours to consume; net is untouched
        return model

    def _take_structure(self, net):
        self.sizes = list(net.sizes)
        self.dtype = net.dtype
        self._activations = net.activations

    @property
    def activations(self):
        return self._activations


class SplitHeads(_Composed):
    """A shared trunk and one output layer ("head") per group of outputs.

    Layers 1 .. L-1 are an MLP's; layer L is split by output columns:

        a_{L-1} = trunk(X)                                          (n, n_{L-1})
        O[:, heads[j]] = f_L(a_{L-1} @ W{L}_head{j} + b{L}_head{j})   (n, len(heads[j]))

    This is *exactly* the MLP whose W_L has column heads[j][c] equal to column c of
    W{L}_head{j} (and b_L likewise): forward and backward assemble that W_L and run the
    MLP's code. The heads' gradients are the columns of the MLP's dW_L, and the trunk's
    gradient sums over the heads (they fork from a_{L-1}), which the product
    dz_L @ W_L.T does in one go.

    Parameters
    ----------
    sizes : list of int, length L + 1
        As for MLP, e.g. [3, 4, 2]; K = sizes[-1] outputs.
    heads : list of lists of int
        A partition of range(K): each output in exactly one head, no head empty.
        The default ([0], [1]) gives out1 and out2 a head each.
    hidden, output, init_std, seed, dtype
        Keywords, with MLP's meaning and defaults. The initial values are MLP(sizes, ...,
        seed=seed)'s, split: the model starts as the very same function as that MLP.

    Attributes
    ----------
    params : dict
        Trunk keys W1, b1, ..., W{L-1}, b{L-1} (as in MLP), then for each head j
        W{L}_head{j} (n_{L-1}, len(heads[j])) and b{L}_head{j} (len(heads[j]),).
    heads : list of lists of int
    """

    def __init__(self, sizes, heads=([0], [1]), **mlp):
        self._build(self._mlp(sizes, "heads", mlp), heads)

    @classmethod
    def from_mlp(cls, net, heads=([0], [1])):
        """``net``'s last layer split into heads (copies: ``net`` is untouched), the same outputs to the last bit."""
        return cls._from(net, heads)

    def _build(self, net, heads):
        """Take ``net``'s parameters (net is ours to consume) and split its last layer."""
        L = net.depth
        self.heads = check_groups("heads", heads, net.sizes[-1])
        self._take_structure(net)
        W, b = net.params[f"W{L}"], net.params[f"b{L}"]
        self.params = {k: v for k, v in net.params.items() if k not in (f"W{L}", f"b{L}")}
        for j, cols in enumerate(self.heads):
            self.params[f"W{L}_head{j}"] = W[:, cols].copy()
            self.params[f"b{L}_head{j}"] = b[cols].copy()
        net.params = {}                 # the template keeps the structure; params live here
        self._template = net

    # -- naming ------------------------------------------------------------------------
    @property
    def trunk_keys(self):
        """The shared parameters W1, b1, ..., W{L-1}, b{L-1}: every output depends on them."""
        return [f"{p}{l}" for l in range(1, self.depth) for p in "Wb"]

    def head_keys(self, j):
        """The parameters of head j, [W{L}_head{j}, b{L}_head{j}]: only outputs heads[j] depend on them."""
        if not is_whole(j) or not 0 <= j < len(self.heads):
            raise BadValue(f"j: expected a head index 0 .. {len(self.heads) - 1}, got {j!r}", argument="j")
        return [f"W{self.depth}_head{j}", f"b{self.depth}_head{j}"]

    def __repr__(self):
        return (f"SplitHeads({self.sizes}, heads={self.heads}, hidden={self.hidden!r}, "
                f"output={self.output!r})")

    @property
    def output_keys(self):
        """Every head's parameters: the output layer, as ``var_list`` names it."""
        return [k for j in range(len(self.heads)) for k in self.head_keys(j)]

    # -- the equivalent MLP --------------------------------------------------------------
    def _to_mlp(self, D):
        """A dict like params under the equivalent MLP's keys: the heads' columns side by side in
        W_L and b_L (new arrays), the trunk's arrays as they are."""
        L = self.depth
        W = np.empty((self.sizes[-2], self.sizes[-1]), dtype=self.dtype)
        b = np.empty(self.sizes[-1], dtype=self.dtype)
        for j, cols in enumerate(self.heads):
            W[:, cols] = D[f"W{L}_head{j}"]
            b[cols] = D[f"b{L}_head{j}"]
        out = {k: D[k] for k in self.trunk_keys}
        out[f"W{L}"], out[f"b{L}"] = W, b
        return out

    def _to_model(self, D):
        """The inverse of ``_to_mlp``: W_L's and b_L's columns handed back to their heads (copies)."""
        L = self.depth
        out = {k: D[k] for k in self.trunk_keys}
        for j, cols in enumerate(self.heads):
            out[f"W{L}_head{j}"] = D[f"W{L}"][:, cols]
            out[f"b{L}_head{j}"] = D[f"b{L}"][cols]
        return out

    def _as_mlp(self):
        """The same function as one MLP: trunk arrays shared, W_L and b_L assembled from the heads."""
        return _mlp_with(self._template, self._to_mlp(self.params))

    def to_mlp(self):
        """An independent MLP computing the same function (the heads joined back into W_L, b_L)."""
        return self._as_mlp().copy()

    def pieces(self):
        """One piece: the equivalent MLP, computing every output (see ``network.Piece``)."""
        return [Piece(self._as_mlp(), list(range(self.sizes[-1])), self._to_mlp, self._to_model)]

    # -- forward and backward ------------------------------------------------------------
    def forward(self, X):
        """X (n, d) -> the equivalent MLP's Forward record: ``.output`` (n, K) and every z_l
        and a_l (z_L, a_L with all K columns, in output order)."""
        X = checked(INPUTS, locals())
        return self._as_mlp().forward(X)

    def backward(self, record, G):
        """Backpropagate G = dL/dO through the record of ``self.forward(X)``.

        Parameters
        ----------
        record : Forward
        G : array_like, shape (n, K) or (K,)

        Returns
        -------
        Backward. ``stages`` are the MLP's (dout, dz_L, dW_L, db_L, da_{L-1}, ..., db1, da0)
        with, after db_L, each head's share:

            dW{L}_head{j} = dW_L[:, heads[j]]  = a_{L-1}.T @ dz_L[:, heads[j]]
            db{L}_head{j} = db_L[heads[j]]

        ``grads`` holds dW_l, db_l for the trunk and the heads' shares, keyed like params.
        """
        record, G = checked(BACKWARD, locals())
        back = self._as_mlp().backward(record, G)
        grads = self._to_model(back.grads)
        heads = {f"d{k}": grads[k] for k in grads if k not in self.trunk_keys}
        stages = {}
        for name, value in back.stages.items():
            stages[name] = value
            if name == f"db{self.depth}":
                stages.update(heads)
        return Backward(stages=stages, grads=grads)


@dataclass
class TowerForward:
    """What ``TwoTower.forward`` leaves behind for ``TwoTower.backward``.

    Attributes
    ----------
    X : ndarray, shape (n, d)
    towers : list of Forward     tower k's record; its output is (n, len(groups[k]))
    output : ndarray, shape (n, K)   the towers' columns put back in output order
    """
    X: np.ndarray
    towers: list = field(default_factory=list)
    output: np.ndarray = None

    @property
    def stages(self):
        """Every tower's forward stages, suffixed by the tower: a0_tower0, z1_tower0, ..."""
        return {f"{name}_tower{k}": v for k, rec in enumerate(self.towers)
                for name, v in rec.stages.items()}


class TwoTower(_Composed):
    """One independent MLP ("tower") per group of outputs; nothing is shared. Named for the
    question's two outputs and two towers (the default groups); any partition of the outputs
    into groups gives one tower per group.

        O[:, groups[k]] = tower_k(X),     tower k of sizes [d, n_1, ..., n_{L-1}, len(groups[k])]

    Parameters
    ----------
    sizes : list of int, length L + 1
        [d, n_1, ..., n_{L-1}, K]: every tower has these hidden widths.
    groups : list of lists of int
        A partition of range(K), one tower per group (two by default: ([0], [1])).
    hidden, output, init_std, seed, dtype
        Keywords, with MLP's meaning and defaults. Tower k starts as MLP(sizes, ...,
        seed=seed) restricted to the outputs groups[k] (see ``from_mlp``): all towers start
        with equal trunks, which then train independently, and the model starts as the same
        function as that MLP.

    Attributes
    ----------
    params : dict
        For each tower k, the MLP keys with the suffix ``_tower{k}``:
        W1_tower{k}, b1_tower{k}, ..., W{L}_tower{k} (n_{L-1}, len(groups[k])), b{L}_tower{k}.
    groups : list of lists of int

    The cost against SplitHeads: (number of groups - 1) extra trunks, and no feature
    learnt for one output can serve another.
    """

    def __init__(self, sizes, groups=([0], [1]), **mlp):
        self._build(self._mlp(sizes, "groups", mlp), groups)

    @classmethod
    def from_mlp(cls, net, groups=([0], [1])):
        """One tower per group, each a copy of ``net`` keeping only its group's output columns.

        Every tower starts with ``net``'s trunk, so the model starts as the same function
        as ``net`` (to rounding: a product with fewer columns may round differently).
        """
        return cls._from(net, groups)

    def _build(self, net, groups):
        """One tower per group from ``net``'s parameters (copied: towers share nothing)."""
        L = net.depth
        self.groups = check_groups("groups", groups, net.sizes[-1])
        self._take_structure(net)
        self.params = {}
        self._templates = []
        for k, cols in enumerate(self.groups):
            for key, value in net.params.items():
                if key == f"W{L}":
                    value = value[:, cols]
                elif key == f"b{L}":
                    value = value[cols]
                self.params[f"{key}_tower{k}"] = value.copy()
            self._templates.append(_structure(net, self.sizes[:-1] + [len(cols)]))

    # -- naming ------------------------------------------------------------------------
    def tower_keys(self, k):
        """The parameters of tower k: only outputs groups[k] depend on them."""
        if not is_whole(k) or not 0 <= k < len(self.groups):
            raise BadValue(f"k: expected a tower index 0 .. {len(self.groups) - 1}, got {k!r}", argument="k")
        return [f"{p}{l}_tower{k}" for l in range(1, self.depth + 1) for p in "Wb"]

    def tower(self, k):
        """Tower k as an independent MLP (a copy), outputs groups[k]."""
        self.tower_keys(k)                       # k checked: a tower index, with its message
        return self._tower(k).copy()

    @property
    def output_keys(self):
        """Every tower's output layer: the parameters ``var_list`` would name."""
        return [f"{p}{self.depth}_tower{k}" for k in range(len(self.groups)) for p in "Wb"]

    def pieces(self):
        """One piece per tower: the tower's MLP (sharing this model's arrays), its group of
        outputs, and its keys with and without the suffix ``_tower{k}`` (see ``network.Piece``)."""
        return [Piece(self._tower(k), list(cols), partial(self._tower_part, k),
                      partial(self._tower_keys_back, k)) for k, cols in enumerate(self.groups)]

    def _tower_part(self, k, D):
        """Tower k's entries of a dict like params, under the tower MLP's keys."""
        n = len(f"_tower{k}")
        return {key[:-n]: D[key] for key in self.tower_keys(k)}

    @staticmethod
    def _tower_keys_back(k, D):
        """A dict like tower k's MLP params, under this model's keys."""
        return {f"{key}_tower{k}": v for key, v in D.items()}

    def _tower(self, k):
        """Tower k as an MLP sharing this model's arrays."""
        return _mlp_with(self._templates[k], self._tower_part(k, self.params))

    def __repr__(self):
        return (f"TwoTower({self.sizes}, groups={self.groups}, hidden={self.hidden!r}, "
                f"output={self.output!r})")

    # -- forward and backward ------------------------------------------------------------
    def forward(self, X):
        """X (n, d) -> TowerForward: every tower run on X, its Forward record kept, and
        ``.output`` (n, K) their columns put back in output order."""
        X = checked(INPUTS, locals())
        records = [self._tower(k).forward(X) for k in range(len(self.groups))]
        n = records[0].output.shape[0]
        out = np.empty((n, self.sizes[-1]), dtype=self.dtype)
        for cols, rec in zip(self.groups, records):
            out[:, cols] = rec.output
        return TowerForward(X=records[0].X, towers=records, output=out)

    def backward(self, record, G):
        """Backpropagate G = dL/dO: tower k receives G's columns groups[k].

        Parameters
        ----------
        record : TowerForward       from ``self.forward(X)``
        G : array_like, shape (n, K) or (K,)

        Returns
        -------
        Backward. ``stages`` are every tower's (dout_tower0, dz{L}_tower0, ...), and the total
        ``da0`` = sum_k da0_tower{k}: X feeds every tower, so the gradients add at that fork.
        ``grads`` are keyed like params.
        """
        record, G = checked(TOWER_BACKWARD, locals())
        stages, grads = {}, {}
        da0 = 0.0
        for k, cols in enumerate(self.groups):
            back = self._tower(k).backward(record.towers[k], G[:, cols])
            stages.update({f"{name}_tower{k}": v for name, v in back.stages.items()})
            grads.update(self._tower_keys_back(k, back.grads))
            da0 = da0 + back.stages["da0"]
        stages["da0"] = da0
        return Backward(stages=stages, grads=grads)


def check_tower_record(name, record, got):
    """A TowerForward of this TwoTower: its towers' records, and .output (n, K) on their n rows."""
    model = got["net"]
    if not isinstance(record, TowerForward) or len(record.towers) != len(model.groups):
        raise BadType(f"{name}: expected the TowerForward record returned by model.forward(X) of a TwoTower "
                      f"with {len(model.groups)} towers, got {describe(record)}", argument=name)
    if not (isinstance(record.output, np.ndarray) and record.output.ndim == 2):
        raise BadValue(f"{name}: expected .output, the (n, {model.sizes[-1]}) array that "
                       f"forward made, got {describe(record.output)}", argument=name)
    n, K = record.output.shape
    rows = [t.output.shape[0] for t in record.towers]
    if K != model.sizes[-1] or rows != [n] * len(rows):
        raise BadValue(f"{name}: expected this model's forward record, .output (n, {model.sizes[-1]}) and "
                       f"every tower on its n rows, got .output {record.output.shape} and towers on {rows} rows",
                       argument=name)
    for k, tower in enumerate(record.towers):     # each tower's record, as its MLP's forward made it
        check_record(name, tower, {"net": model._tower(k)})
    return record


TOWER_BACKWARD = {"record": check_tower_record, "G": BACKWARD["G"]}
PIECEWISE = {"X": check_inputs, "keep": check_keep}


class PiecewiseJacobian:
    """The Jacobian of outputs ``keep`` of a model made of MLPs (``net.pieces()``), same interface.

    Each kept output is computed by one piece, and depends on that piece's parameters only:
    J's rows for it are that piece's Jacobian rows, zero on every other piece's parameters. So
    J J^T is zero between outputs of different pieces (SplitHeads has one piece: its equivalent
    MLP; TwoTower one per tower), and every product is its pieces' products, put in place.
    """

    def __init__(self, net, X, keep=(0,)):
        self.net = net
        X, self.keep = checked(PIECEWISE, locals())
        self.parts = []                  # (piece, positions j in keep, the piece's Jacobian)
        for piece in net.pieces():
            js = [j for j, k in enumerate(self.keep) if k in piece.outputs]
            if js:
                local = [piece.outputs.index(self.keep[j]) for j in js]
                self.parts.append((piece, js, OutputJacobian(piece.mlp, X, local)))
        n = self.parts[0][2].outputs.shape[0]
        self.outputs = np.zeros((n, len(self.keep)), dtype=net.dtype)
        for _, js, J in self.parts:
            self.outputs[:, js] = J.outputs
        self.shape = (n * len(self.keep), net.n_params)

    @property
    def n_rows(self):
        return self.shape[0]

    def gram(self):
        n, q = self.outputs.shape
        total = np.zeros((n, q, n, q), dtype=self.net.dtype)
        for _, js, J in self.parts:
            total[np.ix_(range(n), js, range(n), js)] = J.gram().reshape(n, len(js), n, len(js))
        return total.reshape(n * q, n * q)

    def matvec(self, D):
        out = np.zeros(self.outputs.shape, dtype=self.net.dtype)
        for piece, js, J in self.parts:
            out[:, js] = J.matvec(piece.to_mlp(D)).reshape(-1, len(js))
        return out.reshape(-1)

    def magnitude(self, D):
        out = np.zeros(self.outputs.shape, dtype=self.net.dtype)
        for piece, js, J in self.parts:
            out[:, js] = J.magnitude(piece.to_mlp(D)).reshape(-1, len(js))
        return out.reshape(-1)

    def rmatvec(self, alpha):
        alpha = np.reshape(alpha, self.outputs.shape)
        D = {k: np.zeros_like(v) for k, v in self.net.params.items()}
        for piece, js, J in self.parts:
            D.update(piece.to_model(J.rmatvec(alpha[:, js].reshape(-1))))
        return D

    def dense(self):
        """J, shape (m, P), columns in the order of ``flatten(net.params)``: row c is J^T e_c."""
        return np.stack([flatten(self.rmatvec(e)) for e in np.eye(self.n_rows, dtype=self.net.dtype)])
