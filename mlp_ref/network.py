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

import os
import uuid
from dataclasses import dataclass, field

import numpy as np

from . import _checks, activations

DTYPES = (np.float64, np.float32)
FILE_FORMAT = "mlp-ref MLP 1"          # what MLP.save writes; bump it if the file layout changes
ARCHITECTURE_KEYS = ("format", "sizes", "activations", "dtype", "init_std", "seed")


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


def _count_nonfinite(a):
    """'2 NaN, 1 inf' for an array holding them."""
    nan, inf = int(np.isnan(a).sum()), int(np.isinf(a).sum())
    return ", ".join(f"{c} {what}" for c, what in [(nan, "NaN"), (inf, "inf")] if c)


class MLP:
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
        self.sizes = self._check_sizes(sizes)
        L = len(self.sizes) - 1
        if isinstance(hidden, (list, tuple)):
            if len(hidden) != L - 1:
                raise ValueError(f"hidden: expected one activation name per hidden layer "
                                 f"({L - 1} for sizes {self.sizes}), got {len(hidden)}: {list(hidden)}")
            self._acts = [activations.get(h, f"hidden[{i}]") for i, h in enumerate(hidden)]
        else:
            self._acts = [activations.get(hidden, "hidden")] * (L - 1)
        self._acts.append(activations.get(output, "output"))
        self.init_std = _checks.real("init_std", init_std, low=0.0)
        try:
            self.dtype = np.dtype(dtype)
        except TypeError:
            raise TypeError(f"dtype: expected np.float64 or np.float32, got {dtype!r}") from None
        if self.dtype not in [np.dtype(t) for t in DTYPES]:
            raise ValueError(f"dtype: expected np.float64 or np.float32, got {self.dtype}")
        self.seed = _checks.seed("seed", seed)

        rng = np.random.default_rng(self.seed)
        self.params = {}
        for l in range(1, L + 1):
            n_in, n_out = self.sizes[l - 1], self.sizes[l]
            self.params[f"W{l}"] = rng.normal(0.0, self.init_std, (n_in, n_out)).astype(self.dtype)
            self.params[f"b{l}"] = rng.normal(0.0, self.init_std, (n_out,)).astype(self.dtype)

    @staticmethod
    def _check_sizes(sizes):
        # an ordered sequence: a set or a dict has a length too, but no order of layers
        if not isinstance(sizes, (list, tuple, range, np.ndarray)) or np.ndim(sizes) != 1:
            raise TypeError(f"sizes: expected a list of at least two positive whole numbers, "
                            f"got {_checks.describe(sizes)}")
        if len(sizes) < 2:
            raise ValueError(f"sizes: expected at least two positive whole numbers "
                             f"(inputs and outputs), got {list(sizes)}")
        return [_checks.positive_int(f"sizes[{i}]", s) for i, s in enumerate(sizes)]

    # -- description -------------------------------------------------------------------
    @property
    def depth(self):
        """L, the number of weight layers."""
        return len(self.sizes) - 1

    @property
    def activations(self):
        """Activation names per layer 1 .. L (the last is the output's)."""
        return [act.name for act in self._acts]

    @property
    def hidden(self):
        names = self.activations[:-1]
        return names[0] if len(set(names)) == 1 else names

    @property
    def output(self):
        return self._acts[-1].name

    @property
    def param_shapes(self):
        return {k: v.shape for k, v in self.params.items()}

    @property
    def n_params(self):
        """P, the total number of parameters."""
        return sum(v.size for v in self.params.values())

    def __repr__(self):
        hidden = self.hidden
        return f"MLP({self.sizes}, hidden={hidden!r}, output={self.output!r})"

    def copy(self):
        """An independent deep copy: stepping the copy leaves this network untouched."""
        new = object.__new__(MLP)
        new.__dict__.update(self.__dict__)
        new._acts = list(self._acts)
        new.sizes = list(self.sizes)
        new.params = {k: v.copy() for k, v in self.params.items()}
        return new

    # -- forward -----------------------------------------------------------------------
    def _layers(self, a, start=1):
        """Run layers start .. L from their input a = a_{start-1}; yield (l, z_l, a_l)."""
        for l in range(start, self.depth + 1):
            z = a @ self.params[f"W{l}"] + self.params[f"b{l}"]
            a = self._acts[l - 1].f(z)
            yield l, z, a

    def forward(self, X):
        """Run the network on X and keep every stage.

        Parameters
        ----------
        X : array_like, shape (n, d)     d = sizes[0]

        Returns
        -------
        Forward, with ``.output`` of shape (n, K) and every z_l and a_l.

        Raises ValueError if the output is not finite (X is checked, so the parameters are
        to blame: NaN/inf in them, or values so large that a layer overflows).
        """
        X = _checks.matrix("X", X, self.dtype, width=self.sizes[0], width_name="input columns")
        record = Forward(X=X, a={0: X})
        for l, z, a in self._layers(X):
            record.z[l], record.a[l] = z, a
        if not np.isfinite(record.output).all():     # one cheap pass; the diagnosis only on failure
            raise ValueError(self._why_not_finite(record))
        return record

    def _why_not_finite(self, record):
        """The message for a non-finite output: which parameter, or which stage overflowed."""
        broken = [f"{k} ({_count_nonfinite(v)})" for k, v in self.params.items()
                  if not np.isfinite(v).all()]
        if broken:
            which = "parameter" if len(broken) == 1 else "parameters"
            return (f"forward: output is not finite because {which} {', '.join(broken)} "
                    f"{'holds' if len(broken) == 1 else 'hold'} NaN/inf; "
                    f"typically an update with too large a learning rate, or a value set by hand. "
                    f"Rebuild or reload the network (net.copy() before a risky step keeps a good one)")
        stage = next(k for k, v in record.stages.items() if not np.isfinite(v).all())
        l = int(stage[1:])
        if stage[0] == "z":   # z_l = a_{l-1} @ W_l + b_l: name the two factors that blew up
            culprits = f"max |a{l - 1}| = {np.abs(record.a[l - 1]).max():.3g}, " \
                       f"max |W{l}| = {np.abs(self.params[f'W{l}']).max():.3g}"
        else:
            culprits = f"{self.activations[l - 1]} of a finite z{l}"
        return (f"forward: output is not finite: stage {stage} overflowed {self.dtype} ({culprits}) "
                f"although every parameter is finite; the parameters are too large, typically "
                f"after an update with too large a learning rate")

    def __call__(self, X):
        """The output only: ``net(X)`` is ``net.forward(X).output``."""
        return self.forward(X).output

    def forward_from(self, layer, a_prev):
        """The output of layers ``layer`` .. L started from their input ``a_prev`` = a_{layer-1}.

        Used by the gradient checker to perturb an intermediate stage and see the effect.
        """
        out = a_prev
        for _, _, out in self._layers(a_prev, start=layer):
            pass
        return out

    # -- backward ----------------------------------------------------------------------
    def backward(self, record, G, input_grad=True, param_grads=True):
        """Backpropagate G = dL/dO through the record of a forward pass.

        Parameters
        ----------
        record : Forward          from ``self.forward(X)``
        G : array_like, shape (n, K) or (K,)
            dL/dO; a (K,) vector is used for every row.
        input_grad : bool
            Also compute da0 = dL/dX (not needed for a parameter update; skipping it saves
            the largest matrix product of a wide first layer).
        param_grads : bool
            Also compute dW_l and db_l. The Jacobian code needs only the per-sample signals
            dz_l, and skipping the sums over rows saves one matrix product per layer.

        Returns
        -------
        Backward, whose ``stages`` list dout, then per layer l = L .. 1: dz_l, dW_l, db_l,
        da_{l-1}; and whose ``grads`` hold dW_l, db_l under the keys of ``params``.
        A pure function of its arguments: calling it twice gives the same answer.
        """
        self._check_record(record)
        n, K = record.output.shape
        G = _checks.rows_or_vector("G", G, self.dtype, n, K)
        stages = {"dout": np.array(G)}        # a fresh copy: the record never aliases the caller's G
        da = stages["dout"]
        for l in range(self.depth, 0, -1):
            act = self._acts[l - 1]
            dz = da if act.name == "identity" else da * act.df(record.z[l], record.a[l])
            stages[f"dz{l}"] = dz
            if param_grads:
                stages[f"dW{l}"] = record.a[l - 1].T @ dz
                stages[f"db{l}"] = dz.sum(axis=0)
            if l > 1 or input_grad:
                da = dz @ self.params[f"W{l}"].T
                stages[f"da{l - 1}"] = da
        grads = {key: stages["d" + key] for key in self.params} if param_grads else {}
        return Backward(stages=stages, grads=grads)

    def _check_record(self, record):
        if not isinstance(record, Forward):
            raise TypeError(f"record: expected the Forward record returned by net.forward(X), "
                            f"got {_checks.describe(record)}")
        L, a, z = self.depth, record.a, record.z
        complete = (isinstance(a, dict) and isinstance(z, dict)
                    and set(a) == set(range(L + 1)) and set(z) == set(range(1, L + 1))
                    and all(isinstance(v, np.ndarray) and v.ndim == 2
                            for v in [*a.values(), *z.values()]))
        if not complete:
            raise ValueError(f"record: expected a forward record of a network with sizes {self.sizes} "
                             f"(2-D arrays a[0..{L}] and z[1..{L}]), got a {_keys(a)} and z {_keys(z)}")
        widths = [a[l].shape[1] for l in range(L + 1)]
        if widths != self.sizes:
            raise ValueError(f"record: expected a forward record of a network with sizes "
                             f"{self.sizes}, got one with widths {widths}")
        n = a[0].shape[0]
        if any(v.shape[0] != n for v in record.stages.values()) or any(
                z[l].shape != a[l].shape for l in range(1, L + 1)):
            raise ValueError(f"record: expected every stage of shape (n, width) with the n = {n} rows "
                             f"of a0, got " + ", ".join(f"{k} {v.shape}" for k, v in record.stages.items()))

    def gradient(self, X, G):
        """sum_i G_i . dO_i/dtheta as a dict like params: forward then backward."""
        return self.backward(self.forward(X), G, input_grad=False).grads

    # -- update ------------------------------------------------------------------------
    def step(self, D, lr):
        """In place: theta <- theta - lr * D for every parameter.

        Parameters
        ----------
        D : dict like params      every key W1, b1, ..., each a finite array of that shape
        lr : float > 0            representable in the network's dtype

        Atomic: D and lr are checked in full, and every new value is computed and checked
        finite, before any parameter changes; a rejected step leaves the network bit for bit
        as it was. The arrays of ``params`` are updated in place (references stay valid).
        """
        lr = _checks.real("lr", lr, low=0.0, low_inclusive=False)
        with np.errstate(over="ignore", under="ignore"):
            step = self.dtype.type(lr)
        if not np.isfinite(step) or step == 0:
            raise ValueError(f"lr: expected a value representable in {self.dtype} "
                             f"(between {np.finfo(self.dtype).smallest_subnormal:.3g} and "
                             f"{np.finfo(self.dtype).max:.3g}), got {lr}")
        D = _checks.param_dict("D", D, self.param_shapes, self.dtype)
        with np.errstate(over="ignore", invalid="ignore"):
            new = {key: self.params[key] - step * d for key, d in D.items()}
        broken = [key for key, v in new.items() if not np.isfinite(v).all()]
        if broken:
            raise ValueError(f"lr: theta - lr * D would make {', '.join(broken)} overflow to inf/NaN "
                             f"(lr = {lr:g}, max |D[{broken[0]!r}]| = {np.abs(D[broken[0]]).max():.3g}); "
                             f"nothing was changed. Use a smaller lr")
        for key, v in new.items():
            self.params[key][...] = v
        return self

    # -- save / load -------------------------------------------------------------------
    def save(self, path):
        """Write the network to the .npz file ``path`` (exactly that name, no suffix added).

        The file holds plain arrays only (``np.load(path)`` shows them; no pickle):

            format        "mlp-ref MLP 1"
            sizes         (L + 1,) int64
            activations   (L,) str, per layer 1 .. L (the last is the output's)
            dtype         "float64" or "float32"
            init_std      float64
            seed          str: the seed's digits, or "None" (a str holds any Python int)
            W1, b1, ...   the parameters, in the network's dtype: bit-exact round trip

        Atomic: written to a temporary file in the same folder, then renamed over ``path``
        (``os.replace``), so a crash mid-write never leaves a half-written file at ``path``.
        """
        path = _checks.path("path", path)
        shapes = _expected_shapes(self.sizes)
        for key in shapes:
            _check_param(f"params[{key!r}]", self.params.get(key), shapes[key], self.dtype)
        arrays = {"format": np.array(FILE_FORMAT), "sizes": np.array(self.sizes, dtype=np.int64),
                  "activations": np.array(self.activations), "dtype": np.array(self.dtype.name),
                  "init_std": np.array(self.init_std, dtype=np.float64),
                  "seed": np.array(str(self.seed)), **{k: self.params[k] for k in shapes}}
        _write_atomically(path, lambda f: np.savez(f, **arrays))

    @classmethod
    def load(cls, path):
        """The network saved at ``path`` by :meth:`save`: same repr, same parameter bits.

        A damaged, truncated or foreign file raises ValueError naming the path and the key.
        """
        path = _checks.path("path", path)
        arrays = _read_npz(path)

        def fail(key, what):
            return ValueError(f"path: {path!r}: key {key!r}: {what}")

        missing = [k for k in ARCHITECTURE_KEYS if k not in arrays]
        if "format" in missing:
            raise ValueError(f"path: {path!r} is not an mlp-ref network file (no key 'format'; "
                             f"keys {sorted(arrays)})")
        if missing:
            raise fail(missing[0], f"missing; an mlp-ref network file has keys {list(ARCHITECTURE_KEYS)} "
                                   f"and the parameters")
        arch = {}
        for key, read in _ARCHITECTURE_READERS.items():
            try:
                arch[key] = read(arrays[key])
            except (TypeError, ValueError) as exc:
                raise fail(key, exc) from None
        sizes, acts = arch["sizes"], arch["activations"]
        if len(acts) != len(sizes) - 1:
            raise fail("activations", f"expected {len(sizes) - 1} names (one per layer of sizes "
                                      f"{sizes}), got {len(acts)}: {acts}")

        shapes = _expected_shapes(sizes)
        unknown = sorted(set(arrays) - set(shapes) - set(ARCHITECTURE_KEYS))
        if unknown:
            raise fail(unknown[0], f"not part of a network with sizes {sizes} "
                                   f"(its parameters are {list(shapes)})")
        for key, shape in shapes.items():
            if key not in arrays:
                raise fail(key, f"missing; a network with sizes {sizes} has parameters {list(shapes)}")
            _check_param(f"path: {path!r}: key {key!r}", arrays[key], shape, arch["dtype"],
                         why=f" (sizes {sizes}, dtype {arch['dtype'].name})")

        net = cls(sizes, hidden=acts[:-1], output=acts[-1], init_std=arch["init_std"],
                  seed=arch["seed"], dtype=arch["dtype"])
        # np.array: our own writeable copy, whatever buffer np.load handed out
        net.params = {key: np.array(arrays[key]) for key in shapes}
        return net



def _expected_shapes(sizes):
    """{"W1": (n_0, n_1), "b1": (n_1,), ...}: the parameter shapes that ``sizes`` implies."""
    shapes = {}
    for l in range(1, len(sizes)):
        shapes[f"W{l}"], shapes[f"b{l}"] = (sizes[l - 1], sizes[l]), (sizes[l],)
    return shapes


def _check_param(name, arr, shape, dtype, why=""):
    """A parameter exactly as a network holds it: ndarray of that shape and dtype, finite."""
    if not isinstance(arr, np.ndarray):
        raise TypeError(f"{name}: expected an array of shape {shape}, got {_checks.describe(arr)}")
    if arr.shape != shape:
        raise ValueError(f"{name}: expected shape {shape}{why}, got shape {arr.shape}")
    if arr.dtype != dtype:
        raise ValueError(f"{name}: expected dtype {np.dtype(dtype).name}{why}, got {arr.dtype}")
    if not np.isfinite(arr).all():
        raise ValueError(f"{name}: expected finite values, got {_count_nonfinite(arr)}")


def _text(arr):
    """The str held by a 0-d string array (ValueError for anything else)."""
    if not (isinstance(arr, np.ndarray) and arr.ndim == 0 and arr.dtype.kind == "U"):
        raise ValueError(f"expected a single string, got {_checks.describe(arr)}")
    return str(arr[()])


def _read_format(arr):
    text = _text(arr)
    if text != FILE_FORMAT:
        raise ValueError(f"expected {FILE_FORMAT!r}, got {text!r}")
    return text


def _read_sizes(arr):
    if not (arr.ndim == 1 and arr.dtype.kind in "iu"):
        raise ValueError(f"expected a 1-D array of whole numbers, got {_checks.describe(arr)}")
    return MLP._check_sizes(arr.tolist())


def _read_activations(arr):
    if not (arr.ndim == 1 and arr.dtype.kind == "U" and arr.size >= 1):
        raise ValueError(f"expected a 1-D array of activation names, got {_checks.describe(arr)}")
    # by name, through the same table as the constructor: an unknown name lists the known ones
    return [activations.get(str(name), f"activations[{i}]").name for i, name in enumerate(arr)]


def _read_dtype(arr):
    name = _text(arr)
    if name not in [np.dtype(t).name for t in DTYPES]:
        raise ValueError(f"expected 'float64' or 'float32', got {name!r}")
    return np.dtype(name)


def _read_init_std(arr):
    if not (arr.ndim == 0 and arr.dtype == np.float64):
        raise ValueError(f"expected a single float64, got {_checks.describe(arr)}")
    return _checks.real("init_std", float(arr), low=0.0)


def _read_seed(arr):
    text = _text(arr)
    if text == "None":
        return None
    if not (text.isascii() and text.isdigit()):
        raise ValueError(f"expected the digits of a whole number >= 0 or 'None', got {text!r}")
    return int(text)


_ARCHITECTURE_READERS = {"format": _read_format, "sizes": _read_sizes, "activations": _read_activations,
                         "dtype": _read_dtype, "init_std": _read_init_std, "seed": _read_seed}


def _read_npz(path):
    """Every array in the .npz file at ``path``, read now (the file is closed on return)."""
    try:
        f = open(path, "rb")
    except OSError as exc:
        raise type(exc)(f"path: cannot read {path!r} ({exc.strerror})") from None
    # our own handle, closed by `with` even when np.load fails half way (it would leak its own)
    with f:
        head = f.read(4)
        if not head.startswith(b"PK"):   # every zip (and so every .npz) starts with "PK"
            raise ValueError(f"path: {path!r} is not an .npz file (it starts with {head!r}, "
                             f"not the zip signature b'PK')")
        f.seek(0)
        try:
            with np.load(f, allow_pickle=False) as npz:
                arrays = {key: npz[key] for key in npz.files}
        except Exception as exc:   # BadZipFile, zlib.error, EOFError, ValueError from a torn .npy ...
            raise ValueError(f"path: {path!r} is damaged or not an .npz file "
                             f"({type(exc).__name__}: {exc})") from None
    for key, value in arrays.items():
        if not isinstance(value, np.ndarray):   # a zip member that is not an .npy comes as bytes
            raise ValueError(f"path: {path!r}: key {key!r}: expected a NumPy array, "
                             f"got {type(value).__name__}")
    return arrays


def _write_atomically(path, write):
    """Call ``write(f)`` on a temporary file next to ``path``, then rename it to ``path``."""
    folder = os.path.dirname(os.path.abspath(path))
    if not os.path.isdir(folder):
        raise FileNotFoundError(f"path: folder {folder!r} does not exist")
    tmp = os.path.join(folder, f".{os.path.basename(path)}.{uuid.uuid4().hex}.tmp")
    # os.open with mode 0o666 lets the umask decide the permissions, as open() would
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_BINARY", 0), 0o666)
    try:
        with os.fdopen(fd, "wb") as f:
            write(f)
            f.flush()
            os.fsync(f.fileno())         # the bytes are on disk before the name points at them
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.remove(tmp)
        raise
