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

from dataclasses import dataclass, field

import math
import numbers
import reprlib

import numpy as np

from . import _checks, activations, saving
from ._checks import BadType, BadValue, DTYPES, check_sizes


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
    z: dict = field(default_factory=dict)
    a: dict = field(default_factory=dict)

    @property
    def depth(self):
        return len(self.z)

    @property
    def output(self):
        """The network output O = a_L, shape (n, K)."""
        return self.a[self.depth]

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


def _keys(d):
    """'keys [0, 1]' for a dict, else what it is."""
    return f"keys {list(d)}" if isinstance(d, dict) else _checks.describe(d)


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
        return self.forward(X).output

    def gradient(self, X, G):
        """sum_i G_i . dO_i/dtheta as a dict like params: forward, then backward."""
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
        lr = check_lr(lr, self.dtype)
        D = _checks.param_dict("D", D, self.param_shapes, self.dtype)
        check_writable(self)
        with np.errstate(over="ignore", invalid="ignore"):
            new = {k: self.params[k] - lr * D[k] for k in self.params}     # theta - lr * D
        broken = [k for k, v in new.items() if not _checks.finite(v)]
        if broken:
            raise overflow_error(self, broken, lr, D)
        for k, v in new.items():
            self.params[k][...] = v
        return self


def check_inputs(net, X, name="X"):
    """X (or keep_X, ...) as a finite (n, d) array of the network's dtype, d = sizes[0], whose
    forward record (every z_l and a_l: n x 2 (n_1 + ... + n_L) numbers) fits in this machine's
    memory: a batch too large is refused before NumPy tries, naming its rows."""
    X = _checks.matrix(name, X, net.dtype, width=net.sizes[0], width_name="input columns")
    _checks.fits_in_memory(name, X.shape[0] * 2 * sum(net.sizes[1:]) * net.dtype.itemsize, "record")
    return X


def check_lr(lr, dtype):
    """lr > 0 as a scalar of ``dtype``, refusing one that rounds to 0 or inf there."""
    return check_representable("lr", _checks.real("lr", lr, low=0.0, low_inclusive=False), dtype)


def check_representable(name, value, dtype):
    """A positive number as a scalar of ``dtype``, refusing one that rounds to 0 or inf there."""
    with np.errstate(over="ignore", under="ignore"):
        scalar = np.dtype(dtype).type(value)
    if not np.isfinite(scalar) or scalar == 0:
        raise BadValue(f"{name}: expected a value representable in {dtype} "
                       f"(between {np.finfo(dtype).smallest_subnormal:.3g} and "
                       f"{np.finfo(dtype).max:.3g}), got {value}", argument=name)
    return scalar


def check_writable(net):
    """Raise ValueError unless every parameter array can be written in place."""
    frozen = [k for k, v in net.params.items() if not v.flags.writeable]
    if frozen:
        raise BadValue(f"net: parameters {frozen} are read-only arrays (loaded with mmap_mode='r', "
                       f"or set by hand?); nothing was changed. Give the network writable "
                       f"copies: net.params[k] = net.params[k].copy()", argument="net")


def overflow_error(net, broken, lr, D):
    """The error for a step whose new values would not be finite (D itself is finite): the
    parameters that already were not, or else lr."""
    already = [f"{k} ({_checks.count_nonfinite(net.params[k])})" for k in broken
               if not _checks.finite(net.params[k])]
    if already:
        return BadValue(f"net: parameter{'s' if len(already) > 1 else ''} {', '.join(already)} "
                        f"already hold{'' if len(already) > 1 else 's'} NaN/inf, whatever the step; "
                        f"nothing was changed. Rebuild or reload the network (net.copy() before a "
                        f"risky step keeps a good one)", argument="net")
    return BadValue(f"lr: theta - lr * D would make {', '.join(broken)} overflow to inf/NaN "
                    f"(lr = {float(lr):g}, max |D[{broken[0]!r}]| = "
                    f"{np.abs(D[broken[0]]).max():.3g}); nothing was changed. Use a smaller lr",
                    argument="lr")


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
        self.sizes = check_sizes(sizes)
        L = len(self.sizes) - 1
        if isinstance(hidden, (list, tuple)):
            if len(hidden) != L - 1:
                raise BadValue(f"hidden: expected one activation name per hidden layer "
                               f"({L - 1} for sizes {self.sizes}), got {len(hidden)}: {reprlib.repr(list(hidden))}",
                               argument="hidden")
            self._acts = [activations.get(h, f"hidden[{i}]") for i, h in enumerate(hidden)]
        else:
            self._acts = [activations.get(hidden, "hidden")] * (L - 1)
        self._acts.append(activations.get(output, "output"))
        self.init_std = _checks.real("init_std", init_std, low=0.0)
        try:
            if dtype is None:                    # np.dtype(None) would quietly mean float64
                raise TypeError
            self.dtype = np.dtype(dtype)
        except TypeError:
            raise BadType(f"dtype: expected np.float64 or np.float32, got {dtype!r}", argument="dtype") from None
        if self.dtype not in [np.dtype(t) for t in DTYPES]:
            raise BadValue(f"dtype: expected np.float64 or np.float32, got {self.dtype}", argument="dtype")
        self.seed = _checks.seed("seed", seed)
        if math.copysign(1.0, self.init_std) < 0:
            raise BadValue("init_std: expected a number >= 0 (0.0 for all-zero parameters), got -0.0",
                           argument="init_std")
        # normal draws stay within 64 standard deviations (beyond 38 the chance is below 1e-300)
        top = float(np.finfo(self.dtype).max) / 64
        if self.init_std > top:
            raise BadValue(f"init_std: expected a number <= {top:.3g}, so that every parameter drawn "
                           f"fits in {self.dtype.name}, got {self.init_std:g}", argument="init_std")
        P = sum((a + 1) * b for a, b in zip(self.sizes, self.sizes[1:]))
        memory = _checks.machine_memory()
        if memory is not None and P * self.dtype.itemsize > memory:
            raise BadValue(f"sizes: {self.sizes} means {P} parameters, "
                           f"{_checks.gib(P * self.dtype.itemsize)} in {self.dtype.name}, "
                           f"more than this machine's memory ({_checks.gib(memory)})", argument="sizes")

        rng = np.random.default_rng(self.seed)
        self.params = {}
        for l in range(1, L + 1):
            n_in, n_out = self.sizes[l - 1], self.sizes[l]
            self.params[f"W{l}"] = rng.normal(0.0, self.init_std, (n_in, n_out)).astype(self.dtype)
            self.params[f"b{l}"] = rng.normal(0.0, self.init_std, (n_out,)).astype(self.dtype)

    # -- description -------------------------------------------------------------------
    @property
    def _stage_widths(self):
        """The widths of a0, z1, a1, ..., zL, aL."""
        return [self.sizes[0], *(w for w in self.sizes[1:] for _ in "za")]

    @property
    def activations(self):
        """Activation names per layer 1 .. L (the last is the output's)."""
        return [act.name for act in self._acts]

    def act(self, l):
        """The activation of layer l = 1 .. L: an object with ``.name``, ``.f(z)``, ``.df(z, a)``."""
        if isinstance(l, bool) or not isinstance(l, numbers.Integral):
            raise BadType(f"l: expected a layer number 1 .. {self.depth}, got {_checks.describe(l)}", argument="l")
        if not 1 <= l <= self.depth:
            raise BadValue(f"l: expected a layer number 1 .. {self.depth}, got {l}", argument="l")
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
    @_checks.overflow_is_reported
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
        X = check_inputs(self, X)
        record = Forward(X=X.copy())
        a = record.a[0] = record.X
        for l, act in enumerate(self._acts, start=1):
            z = record.z[l] = a @ self.params[f"W{l}"] + self.params[f"b{l}"]
            a = record.a[l] = act.f(z)
        if not _checks.finite(a):                       # a = a_L, the output
            raise self._why_not_finite(record)
        return record

    def _why_not_finite(self, record):
        """The error for a non-finite output, naming what is to blame: the parameter that holds
        NaN/inf, X when it is the large factor of z1, else the stage that overflowed."""
        broken = [f"{k} ({_checks.count_nonfinite(v)})" for k, v in self.params.items()
                  if not _checks.finite(v)]
        if broken:
            which = "parameter" if len(broken) == 1 else "parameters"
            return BadValue(f"forward: output is not finite because {which} {', '.join(broken)} "
                            f"{'holds' if len(broken) == 1 else 'hold'} NaN/inf; "
                            f"typically an update with too large a learning rate, or a value set by hand. "
                            f"Rebuild or reload the network (net.copy() before a risky step keeps a good one)",
                            argument="forward")
        stage = next(k for k, v in record.stages.items() if not _checks.finite(v))
        l = int(stage[1:])
        big_X, big_W = float(np.abs(record.X).max()), float(np.abs(self.params["W1"]).max())
        if stage == "z1" and big_X > big_W:      # the input, not the weights, is what is huge
            return BadValue(f"X: expected values for which z1 = X @ W1 + b1 stays finite in {self.dtype}, "
                            f"got max |X| = {big_X:.3g} (max |W1| = {big_W:.3g}); scale X down", argument="X")
        if stage[0] == "z":   # z_l = a_{l-1} @ W_l + b_l: name the two factors that blew up
            culprits = f"max |a{l - 1}| = {np.abs(record.a[l - 1]).max():.3g}, " \
                        f"max |W{l}| = {np.abs(self.params[f'W{l}']).max():.3g}"
        else:
            culprits = f"{self.activations[l - 1]} of a finite z{l}"
        return BadValue(f"forward: output is not finite: stage {stage} overflowed {self.dtype} ({culprits}) "
                        f"although every parameter is finite; the parameters are too large, typically "
                        f"after an update with too large a learning rate", argument="forward")

    @_checks.overflow_is_reported
    def forward_from(self, layer, a_prev):
        """The output of layers ``layer`` .. L started from their input ``a_prev`` = a_{layer-1}.

        Used by the gradient checker to perturb an intermediate stage and see the effect.
        """
        layer = _checks.whole_number("layer", layer)
        if layer > self.depth + 1:
            raise BadValue(f"layer: expected a layer 1 .. {self.depth + 1} (L + 1: the output "
                            f"itself), got {layer}", argument="layer")
        a = a_prev = _checks.matrix("a_prev", a_prev, self.dtype, width=self.sizes[layer - 1],
                                    width_name=f"columns (the width of layer {layer - 1})")
        for l in range(layer, self.depth + 1):
            a = self._acts[l - 1].f(a @ self.params[f"W{l}"] + self.params[f"b{l}"])
        if not _checks.finite(a):
            raise self._why_from_not_finite(layer, a_prev)
        return a

    def _why_from_not_finite(self, layer, a_prev):
        """The error for a non-finite output of ``forward_from``: a parameter it reads that
        holds NaN/inf, else a_prev or the weights, whichever is the larger factor."""
        used = [f"{kind}{l}" for l in range(layer, self.depth + 1) for kind in "Wb"]
        broken = [k for k in used if not _checks.finite(self.params[k])]
        if broken:
            return BadValue(f"forward_from: the output is not finite because {', '.join(broken)} "
                            f"{'holds' if len(broken) == 1 else 'hold'} NaN/inf; rebuild or reload the network",
                            argument="forward_from")
        big_a = float(np.abs(a_prev).max())
        big_W = max(float(np.abs(self.params[f"W{l}"]).max()) for l in range(layer, self.depth + 1))
        if big_a > big_W:
            return BadValue(f"a_prev: expected values for which the output of layers {layer} .. {self.depth} "
                            f"stays finite in {self.dtype}, got max |a_prev| = {big_a:.3g} "
                            f"(max |W| = {big_W:.3g}); scale a_prev down", argument="a_prev")
        return BadValue(f"forward_from: the output of layers {layer} .. {self.depth} overflowed {self.dtype} "
                        f"(max |a_prev| = {big_a:.3g}, max |W| = {big_W:.3g}): the parameters are too large",
                        argument="forward_from")

    # -- backward ----------------------------------------------------------------------
    @_checks.overflow_is_reported
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
        self.check_record(record)
        n, K = record.output.shape
        G = _checks.rows_or_vector("G", G, self.dtype, n, K)
        stages = {"dout": G.copy()}                     # dL/da_L, a copy of the caller's G
        da = stages["dout"]
        for l in range(self.depth, 0, -1):
            dz = stages[f"dz{l}"] = da * self._acts[l - 1].df(record.z[l], record.a[l])
            stages[f"dW{l}"] = record.a[l - 1].T @ dz
            stages[f"db{l}"] = dz.sum(axis=0)
            da = stages[f"da{l - 1}"] = dz @ self.params[f"W{l}"].T
        grads = {key: stages[f"d{key}"] for key in self.params}      # W1, b1, W2, b2, ...
        self._check_backward(stages, grads, G, record)
        return Backward(stages=stages, grads=grads)

    def _check_backward(self, stages, grads, G, record):
        """Refuse a backward pass that overflowed: name the record when it holds NaN/inf (edited
        by hand: forward's records are finite), G when its values are the large factor (every
        stage is linear in G), else the parameters.

        A NaN or inf in any stage reaches a gradient or da0: one in dz_l makes its column sum
        db_l NaN or inf, and one in da_l (l >= 1) makes dz_l = da_l * f'(z_l) NaN or inf, as
        inf * 0 is NaN. So when the gradients and da0 are finite, every stage is."""
        if all(_checks.finite(v) for v in (*grads.values(), stages["da0"])):
            return
        broken = next(k for k, v in stages.items() if not _checks.finite(v))
        torn = next((k for k, v in record.stages.items() if not _checks.finite(v)), None)
        if torn is not None:
            raise BadValue(f"record: stage {torn} holds NaN/inf "
                           f"({_checks.count_nonfinite(record.stages[torn])}), which no record of "
                           f"net.forward(X) does; run forward again", argument="record")
        big_G = float(np.abs(G).max())
        if big_G > 1.0:
            raise BadValue(f"G: expected values for which the backward pass stays finite in "
                           f"{self.dtype}, got max |G| = {big_G:.3g}, which makes stage {broken} "
                           f"overflow ({_checks.count_nonfinite(stages[broken])}); scale G down", argument="G")
        raise BadValue(f"backward: stage {broken} overflowed {self.dtype} "
                       f"({_checks.count_nonfinite(stages[broken])}) with max |G| = {big_G:.3g}: "
                       f"the parameters are too large", argument="backward")

    def check_record(self, record):
        """Raise TypeError/ValueError unless ``record`` is a whole forward record of this network:
        a0, z1, a1, ..., zL, aL, each an (n, n_l) array of the network's dtype."""
        if not isinstance(record, Forward):
            raise BadType(f"record: expected the Forward record returned by net.forward(X), "
                          f"got {_checks.describe(record)}", argument="record")
        try:                            # the record as forward makes it: compared in one go
            arrays = [record.a[0], *(v for l in range(1, self.depth + 1) for v in (record.z[l], record.a[l]))]
            layout = [(type(v), v.shape, v.dtype) for v in arrays]
            n = arrays[0].shape[0]
        except (KeyError, TypeError, AttributeError, IndexError):
            layout = n = None
        if (layout == [(np.ndarray, (n, w), self.dtype) for w in self._stage_widths]
                and len(record.a) == self.depth + 1 and len(record.z) == self.depth):
            return
        self._why_not_a_record(record)

    def _why_not_a_record(self, record):
        """Raise the error that says what is wrong with a record that is not as forward makes it
        (or nothing, for a right record whose arrays are of a subclass of ndarray)."""
        L, a, z = self.depth, record.a, record.z
        complete = (isinstance(a, dict) and isinstance(z, dict)
                    and set(a) == set(range(L + 1)) and set(z) == set(range(1, L + 1))
                    and all(isinstance(v, np.ndarray) and v.ndim == 2
                            for v in [*a.values(), *z.values()]))
        if not complete:
            raise BadValue(f"record: expected a forward record of a network with sizes {self.sizes} "
                           f"(2-D arrays a[0..{L}] and z[1..{L}]), got a {_keys(a)} and z {_keys(z)}",
                           argument="record")
        widths = [a[l].shape[1] for l in range(L + 1)]
        if widths != self.sizes:
            raise BadValue(f"record: expected a forward record of a network with sizes "
                           f"{self.sizes}, got one with widths {widths}", argument="record")
        wrong = {k: v.dtype for k, v in record.stages.items() if v.dtype != self.dtype}
        if wrong:
            raise BadValue(f"record: expected every stage in the network's dtype {self.dtype}, got "
                           + ", ".join(f"{k} {d}" for k, d in wrong.items())
                           + " (a record of another network, or edited by hand?)", argument="record")
        n = a[0].shape[0]
        if any(v.shape[0] != n for v in record.stages.values()) or any(
                z[l].shape != a[l].shape for l in range(1, L + 1)):
            raise BadValue(f"record: expected every stage of shape (n, width) with the n = {n} rows "
                           f"of a0, got " + ", ".join(f"{k} {v.shape}" for k, v in record.stages.items()),
                           argument="record")

    # -- save / load (the file format lives in saving.py) ---------------------------------
    def save(self, path):
        """Write the network to the .npz file ``path``: architecture and parameters, plain
        arrays only (no pickle), written atomically. See ``mlp_ref.saving``."""
        saving.save(self, path)

    @classmethod
    def load(cls, path):
        """The network saved at ``path`` by :meth:`save`: same repr, same parameter bits.
        A damaged, truncated or foreign file raises ValueError naming the path and the key."""
        return saving.load(cls, path)
