"""The multilayer perceptron, with a forward pass that leaves a record and a backward
pass that reads it and names every stage.

Conventions (the seed's TensorFlow code uses the same ones, so the two line up):

    rows are samples:        X has shape (n, d)
    layer l = 1 .. L:        z_l = a_{l-1} @ W_l + b_l,    a_l = f_l(z_l),    a_0 = X
    the output:              O = a_L, shape (n, K)

Backward takes G = dL/dO, shape (n, K) -- or (K,), the same for every row -- and runs
the chain rule from the output back to the input, one line per line of the forward
pass, in reverse:

    dout  = G                               dL/da_L
    dz_l  = da_l * f_l'(z_l)                dL/dz_l      (n, n_l)
    dW_l  = a_{l-1}.T @ dz_l                dL/dW_l      (n_{l-1}, n_l), summed over rows
    db_l  = dz_l.sum(axis=0)                dL/db_l      (n_l,)
    da_{l-1} = dz_l @ W_l.T                 dL/da_{l-1}  (n, n_{l-1})

so ``grads`` is sum_i G_i . dO_i/dtheta: the gradient of any loss whose derivative
with respect to the output is G.
"""
from __future__ import annotations

import reprlib
from dataclasses import dataclass
from functools import partial
from itertools import repeat

import numpy as np

from . import activations
from .boundary import diagnosis
from .boundary.checks import (
    DTYPE,
    DTYPES,
    SHAPE,
    BadType,
    BadValue,
    all_finite,
    check_inputs,
    check_lr,
    check_matrix,
    check_output_grads,
    check_params_like,
    check_real,
    check_seed,
    check_sizes,
    check_whole,
    check_writable,
    checked,
    describe,
    finite,
    gib,
    machine_memory,
)
from .files import saving


@dataclass
class Forward:
    """What ``MLP.forward`` leaves behind for ``MLP.backward`` to read.

    Attributes
    ----------
    X : ndarray, shape (n, d)         the input, as the network's dtype
    z : dict l -> ndarray (n, n_l)     pre-activations, l = 1 .. L
    a : dict l -> ndarray (n, n_l)     activations, l = 0 .. L (a[0] is X, a[L] the output)
    """
    X: np.ndarray
    z: dict
    a: dict

    def __init__(self, X):
        self.X, self.z, self.a = X, {}, {0: X}          # the record starts at a0 = X

    @property
    def depth(self):
        return len(self.z)

    @property
    def output(self):
        """The network output O = a_L, shape (n, K)."""
        return self.a[len(self.z)]                      # L = len(z)

    @property
    def stages(self):
        """Every forward stage in order: a0, z1, a1, z2, a2, ..."""
        out = {"a0": self.a[0]}
        for l in range(1, self.depth + 1):
            out[f"z{l}"] = self.z[l]
            out[f"a{l}"] = self.a[l]
        return out


@dataclass
class Backward:
    """What ``MLP.backward`` returns.

    Attributes
    ----------
    stages : dict name -> ndarray   every stage in backward order:
             dout, dzL, dWL, dbL, da{L-1}, ..., dz1, dW1, db1, da0
    grads  : dict like params       dW_l and db_l under the keys "W_l", "b_l"
    """
    stages: dict
    grads: dict


@dataclass
class Piece:
    """One MLP inside a model, and how its parameters sit among the model's.

    A model of this package is made of MLPs (an MLP of itself, SplitHeads of the MLP its heads
    assemble, TwoTower of one MLP per tower); whatever needs layers (Jacobians, span
    projection) works on the pieces and puts the results back.

    mlp      : MLP        computing the model's outputs ``outputs``: its column c is output outputs[c]
    outputs  : list of int
    to_mlp   : D -> dict like mlp.params     this piece's part of a dict like the model's params
    to_model : D -> dict of model keys       a dict like mlp.params, under the model's keys
    """
    mlp: "MLP"
    outputs: list
    to_mlp: object
    to_model: object


# -- dicts like params: the algebra of directions --------------------------------------------
def subtract(A, B):
    """A - B for two dicts like params."""
    return {k: A[k] - B[k] for k in A}


def dot(A, B):
    """The inner product of two dicts like params, sum_k <A_k, B_k>, as a Python float."""
    return float(sum(map(np.vdot, A.values(), map(B.__getitem__, A))))      # A_k . B_k, k in A's order


def largest(D):
    """max |D| over every array of a dict like params, as a float."""
    return max(float(np.abs(v).max()) for v in D.values())


# -- what the network's methods take (declared below, checked at the door: ``boundary.checks``) ------
def check_mlp_arguments(sizes, hidden, output, init_std, seed, dtype, activation):
    """MLP's arguments, as (sizes, the activations of layers 1 .. L, init_std, seed, np.dtype); always
    checked (names become activations: ``activation(name, argument)`` looks one up)."""
    sizes = check_sizes("sizes", sizes)
    L = len(sizes) - 1
    if isinstance(hidden, (list, tuple)) and len(hidden) != L - 1:
        raise BadValue(f"hidden: expected one activation name per hidden layer ({L - 1} for sizes {sizes}), "
                       f"got {len(hidden)}: {reprlib.repr(list(hidden))}", argument="hidden")
    acts = ([activation(h, f"hidden[{i}]") for i, h in enumerate(hidden)] if isinstance(hidden, (list, tuple))
            else [activation(hidden, "hidden")] * (L - 1)) + [activation(output, "output")]
    init_std = check_real("init_std", init_std, low=0.0)
    try:
        kind = np.dtype(dtype if dtype is not None else "None")   # np.dtype(None) would mean float64
    except TypeError:
        raise BadType(f"dtype: expected np.float64 or np.float32, got {dtype!r}", argument="dtype") from None
    if kind not in DTYPES:
        raise BadValue(f"dtype: expected np.float64 or np.float32, got {kind}", argument="dtype")
    seed = check_seed("seed", seed)
    if np.copysign(1.0, init_std) < 0:
        raise BadValue("init_std: expected a number >= 0 (0.0 for all-zero parameters), got -0.0", argument="init_std")
    top = float(np.finfo(kind).max) / 64      # normal draws stay within 64 standard deviations
    if init_std > top:
        raise BadValue(f"init_std: expected a number <= {top:.3g}, so that every parameter drawn fits in "
                       f"{kind.name}, got {init_std:g}", argument="init_std")
    P, memory = sum((a + 1) * b for a, b in zip(sizes, sizes[1:])), machine_memory()
    if memory is not None and P * kind.itemsize > memory:
        raise BadValue(f"sizes: {sizes} means {P} parameters, {gib(P * kind.itemsize)} in {kind.name}, "
                       f"more than this machine's memory ({gib(memory)})", argument="sizes")
    return sizes, acts, init_std, seed, kind


def check_record(name, record, got):
    """A forward record of the network as ``forward`` makes it: a0, z1, ..., aL, (n, n_l) in its dtype."""
    net = got["net"]
    widths = (*net.sizes, *net.sizes[1:])
    try:                    # the record as forward makes it, compared in one go (in C: no line to step)
        arrays = (*record.a.values(), *record.z.values())
        if (list(record.a) == list(range(net.depth + 1)) and list(record.z) == list(range(1, net.depth + 1))
                and list(map(type, arrays)) == [np.ndarray] * len(arrays) and set(map(DTYPE, arrays)) == {net.dtype}
                and list(map(SHAPE, arrays)) == list(zip(repeat(arrays[0].shape[0]), widths))):
            return record
        came = ", ".join(f"{k} {v.shape} {v.dtype}" for k, v in record.stages.items())
    except (AttributeError, TypeError, IndexError, KeyError):
        if not (hasattr(record, "a") and hasattr(record, "z")):
            raise BadType(f"{name}: expected the Forward record returned by net.forward(X), got {describe(record)}",
                          argument=name) from None
        came = f"a {describe(record.a)} and z {describe(record.z)}"
    raise BadValue(f"{name}: expected the forward record of a network with sizes {net.sizes} in {net.dtype}, "
                   f"every stage (n, width) on the n rows of a0, got {came} (a record of another network, or "
                   f"edited by hand? run forward again)", argument=name)


def check_layer(name, l, got, beyond=0):
    """A layer number 1 .. L (.. L + 1 with ``beyond``: the output itself, to start from)."""
    return check_whole(name, l, minimum=1, maximum=got["net"].depth + beyond, what="a layer number")


def check_layer_input(name, a, got):
    """The input of layer ``got["layer"]``: (n, its width) in the network's dtype."""
    l = got["layer"]
    return check_matrix(name, a, got["net"].dtype, width=got["net"].sizes[l - 1],
                        width_name=f"columns (the width of layer {l - 1})")


#: What the models' public methods take (``boundary.checks``: checked once, at the door).
INPUTS = {"X": check_inputs}
GRADIENT = {"X": check_inputs, "G": check_output_grads}
STEP = {"lr": check_lr, "D": check_params_like}
BACKWARD = {"record": check_record, "G": check_output_grads}
LAYER = {"l": check_layer}


class Model:
    """What every model here shares (MLP, and the split architectures built on it): a dict
    of parameters ``params``, ``sizes``, ``dtype``, ``activations``, a ``forward`` that returns
    a record with ``.output``, a ``backward(record, G)`` that returns ``.grads``, and
    ``pieces()``, the MLPs it is made of (what the Jacobian of a model is built from).
    Everything below needs nothing else."""

    @property
    def depth(self):
        """L, the number of weight layers."""
        return len(self.sizes) - 1

    @property
    def hidden(self):
        """The hidden activation: one name, or the list when the layers differ."""
        names = self.activations[:-1]
        return names[0] if len(set(names)) == 1 else names

    @property
    def output(self):
        """The output layer's activation."""
        return self.activations[-1]

    @property
    def param_shapes(self):
        return {k: v.shape for k, v in self.params.items()}

    @property
    def n_params(self):
        """P, the total number of parameters."""
        return sum(v.size for v in self.params.values())

    def __call__(self, X):
        """The output only: ``net(X)`` is ``net.forward(X).output``."""
        X = checked(INPUTS, locals())
        return self.forward(X).output

    def gradient(self, X, G):
        """sum_i G_i . dO_i/dtheta as a dict like params: forward, then backward."""
        X, G = checked(GRADIENT, locals())
        return self.backward(self.forward(X), G).grads

    def copy(self):
        """An independent deep copy: stepping the copy leaves this model untouched."""
        new = object.__new__(type(self))
        new.__dict__.update({k: list(v) if isinstance(v, list) else v    # sizes, activations
                             for k, v in self.__dict__.items()})
        new.params = {k: v.copy() for k, v in self.params.items()}
        return new

    def __copy__(self):
        """``copy.copy(net)`` is ``net.copy()``: a model whose copy shared its parameter arrays
        would be stepped along with the original, the very coupling this project is about."""
        return self.copy()

    def step(self, D, lr):
        """In place: theta <- theta - lr * D for every parameter.

        Parameters
        ----------
        D : dict like params      every key W1, b1, ..., each a finite array of that shape
        lr : float > 0            representable in the network's dtype

        Atomic: D, lr and the parameters' writability are checked, and every new value is
        computed and checked finite, before any parameter changes; a rejected step leaves the
        network bit for bit as it was. The arrays of ``params`` are updated in place, so
        references to them stay valid.
        """
        lr, D = checked(STEP, locals())
        check_writable(self)                            # checked on every call: an in-place write
        with np.errstate(over="ignore", invalid="ignore"):                # an overflow is named below
            new = {k: self.params[k] - lr * D[k] for k in self.params}     # theta - lr * D
        if not all_finite(new.values()):
            raise diagnosis.step_overflow(self, [k for k, v in new.items() if not finite(v)], lr, D)
        for k, v in new.items():
            self.params[k][...] = v
        return self


FORWARD_FROM = {"layer": partial(check_layer, beyond=1), "a_prev": check_layer_input}
RECORD = {"record": check_record}


class MLP(Model):
    """A fully connected network, z_l = a_{l-1} @ W_l + b_l, a_l = f_l(z_l).

    Parameters
    ----------
    sizes : list of int, length L + 1
        Widths from input to output, e.g. [3, 4, 2]: 3 inputs, one hidden layer of 4, 2 outputs.
    hidden : str or list of str
        Activation of the hidden layers: one name for all, or a list of L - 1 names.
        Known names: sigmoid, tanh, relu, identity.
    output : str
        Activation of the output layer ("identity" for a regression output, as in the seed).
    init_std : float
        Weights *and* biases are drawn from N(0, init_std^2), like the seed's
        ``tf.random_normal(stddev=0.1)``.
    seed : int or None
        Seed for ``np.random.default_rng``; the same seed gives the same bits.
    dtype : np.float64 or np.float32
        float64 by default: finite-difference checks need its precision
        (float32 roundoff, ~1e-7, swamps a centred difference with h = 1e-5).
    """

    def __init__(self, sizes, hidden="sigmoid", output="identity", init_std=0.1, seed=0,
                 dtype=np.float64):
        # checked at every call (a constructor is no rule's inner loop): names become activations
        self.sizes, self._acts, self.init_std, self.seed, self.dtype = check_mlp_arguments(
            sizes, hidden, output, init_std, seed, dtype, activations.get)
        L = self.depth
        rng = np.random.default_rng(self.seed)
        self.params = {}
        for l in range(1, L + 1):
            n_in, n_out = self.sizes[l - 1], self.sizes[l]
            self.params[f"W{l}"] = rng.normal(0.0, self.init_std, (n_in, n_out)).astype(self.dtype)
            self.params[f"b{l}"] = rng.normal(0.0, self.init_std, (n_out,)).astype(self.dtype)

    # -- description -------------------------------------------------------------------
    @property
    def activations(self):
        """Activation names per layer 1 .. L (the last is the output's)."""
        return [act.name for act in self._acts]

    def act(self, l):
        """The activation of layer l = 1 .. L: an object with ``.name``, ``.f(z)``, ``.df(z, a)``."""
        l = checked(LAYER, locals())
        return self._acts[l - 1]

    @property
    def output_keys(self):
        """The output layer's parameters [W_L, b_L]: the answer's ``var_list``."""
        return [f"W{self.depth}", f"b{self.depth}"]

    def pieces(self):
        """The MLPs this model is made of: for an MLP, itself (see ``Piece``)."""
        return [Piece(self, list(range(self.sizes[-1])), dict, dict)]

    def __repr__(self):
        if self.depth == 1:                      # no hidden layer: nothing to name
            return f"MLP({self.sizes}, output={self.output!r})"
        return f"MLP({self.sizes}, hidden={self.hidden!r}, output={self.output!r})"

    # -- forward -----------------------------------------------------------------------
    def forward(self, X):
        """Run the network on X and keep every stage.

        Parameters
        ----------
        X : array_like, shape (n, d)     d = sizes[0]

        Returns
        -------
        Forward, with ``.output`` of shape (n, K) and every z_l (n, n_l) and a_l (n, n_l),
        each an array of its own (a0 is a copy of X).

        Raises ValueError if the output is not finite, naming the parameter or the stage
        that is to blame.
        """
        X = checked(INPUTS, locals())
        record = Forward(X.copy())                      # a0 = X
        with np.errstate(over="ignore", invalid="ignore", under="ignore"):    # an overflow is named below
            for l, act in enumerate(self._acts, start=1):
                z = record.z[l] = record.a[l - 1] @ self.params[f"W{l}"] + self.params[f"b{l}"]
                a = record.a[l] = act.f(z)
        if not finite(a):                              # a = a_L, the output
            raise diagnosis.forward_overflow(self, record)
        return record

    def forward_from(self, layer, a_prev):
        """The output of layers ``layer`` .. L started from their input ``a_prev`` = a_{layer-1}
        (``layer`` = L + 1: a_prev is the output itself).

        Used by the gradient checker to perturb an intermediate stage and see the effect.
        """
        layer, a_prev = checked(FORWARD_FROM, locals())
        a = a_prev
        with np.errstate(over="ignore", invalid="ignore", under="ignore"):    # an overflow is named below
            for l in range(layer, self.depth + 1):
                a = self._acts[l - 1].f(a @ self.params[f"W{l}"] + self.params[f"b{l}"])
        if not finite(a):
            raise diagnosis.forward_from_overflow(self, layer, a_prev)
        return a

    # -- backward ----------------------------------------------------------------------
    def backward(self, record, G):
        """Backpropagate G = dL/dO through the record of a forward pass.

        Parameters
        ----------
        record : Forward          from ``self.forward(X)``
        G : array_like, shape (n, K) or (K,)
            dL/dO; a (K,) vector is used for every row.

        Returns
        -------
        Backward, whose ``stages`` are dout, then per layer l = L .. 1: dz_l, dW_l, db_l,
        da_{l-1}, each an array of its own; and whose ``grads`` hold dW_l, db_l under the
        keys of ``params``.

        A pure function of its arguments: the record is only read, and calling it twice gives
        the same bits. The record must come from the current parameters: after a ``step``, run
        ``forward`` again (a stale record mixes old activations with new weights).
        """
        record, G = checked(BACKWARD, locals())
        stages = {"dout": G.copy()}                     # dL/da_L, a copy of the caller's G
        da = stages["dout"]
        with np.errstate(over="ignore", invalid="ignore", under="ignore"):    # an overflow is named below
            for l in range(self.depth, 0, -1):
                dz = stages[f"dz{l}"] = da * self._acts[l - 1].df(record.z[l], record.a[l])
                stages[f"dW{l}"] = record.a[l - 1].T @ dz
                stages[f"db{l}"] = dz.sum(axis=0)
                da = stages[f"da{l - 1}"] = dz @ self.params[f"W{l}"].T
        grads = {key: stages[f"d{key}"] for key in self.params}      # W1, b1, W2, b2, ...
        if not all_finite((*grads.values(), stages["da0"])):
            raise diagnosis.backward_overflow(self, stages, G, record)   # every stage reaches these
        return Backward(stages=stages, grads=grads)

    def check_record(self, record):
        """Raise TypeError/ValueError unless ``record`` is a whole forward record of this network:
        a0, z1, a1, ..., zL, aL, each an (n, n_l) array of the network's dtype."""
        checked(RECORD, locals())

    # -- save / load (the file format lives in saving.py) ---------------------------------
    def save(self, path):
        """Write the network to the .npz file ``path``: architecture and parameters, plain
        arrays only (no pickle), written atomically. See ``mlp_ref.files.saving``."""
        saving.save(self, path)

    @classmethod
    def load(cls, path):
        """The network saved at ``path`` by :meth:`save`: same repr, same parameter bits.
        A damaged, truncated or foreign file raises ValueError naming the path and the key."""
        return saving.load(cls, path)
