"""Argument checks shared by every public entry point.

Every failure raises ``ValueError`` or ``TypeError`` whose message starts with the
argument's name, says what was expected and what came, so that a student who passes
a wrong shape learns which argument to fix instead of reading a NumPy broadcasting
error from deep inside the code.
"""
from __future__ import annotations

import contextlib
import decimal
import functools
import math
import numbers
import os
import reprlib
import sys

import numpy as np
import numpy.ma  # noqa: F401  (here, not lazily on the first check a debugger steps into)


class ArgumentError(Exception):
    """A refused argument: ``argument`` is its name, the word its message begins with, so that
    a caller decides by the attribute, never by reading the message. An entry's name names its
    argument: ``D['W1']`` and ``sizes[2]`` are D's and sizes'."""

    def __init__(self, message, argument):
        super().__init__(message)
        self.argument = argument.split("[", 1)[0]

    def __reduce__(self):                       # pickled whole (a child process's error)
        return type(self), (str(self), self.argument)


class BadValue(ArgumentError, ValueError):
    """A ValueError naming the argument whose value was refused (``exc.argument``)."""


class BadType(ArgumentError, TypeError):
    """A TypeError naming the argument whose type was refused (``exc.argument``)."""


def overflow_is_reported(function):
    """``function`` run with NumPy's floating-point warnings off but for division by zero: it
    checks its own results for inf and NaN and raises a ValueError naming what is to blame,
    and that error is the whole report. (Whether a matmul that overflows also warns depends on
    the CPU kernel that runs it: some do, some do not; the error is raised on every machine.)
    Underflow is the correctly rounded answer (activations.py). An errstate of its own for
    each function: one instance entered twice at once would not restore the state."""
    return np.errstate(over="ignore", invalid="ignore", under="ignore")(function)


def finite(a):
    """Whether every entry of ``a`` is finite: one reduction in C (``ndarray.all`` goes through
    NumPy's Python layer, which a debugger stepping through the lesson would walk into)."""
    return bool(_ALL(np.isfinite(a), axis=None))


_ALL = np.logical_and.reduce


@functools.lru_cache(maxsize=None)
def eps(dtype):
    """The machine epsilon of ``dtype`` as a float (``np.finfo`` runs Python each call)."""
    return float(np.finfo(dtype).eps)


@functools.lru_cache(maxsize=None)
def tiny(dtype):
    """The smallest normal number of ``dtype`` as a float."""
    return float(np.finfo(dtype).tiny)


_finite = finite            # for the functions whose argument ``finite`` hides this one


def describe(x):
    """A short description of what came: type, and shape/dtype for arrays."""
    if isinstance(x, np.ndarray):
        return f"array of shape {x.shape} and dtype {x.dtype}"
    return f"{type(x).__name__} {reprlib.repr(x)}"   # reprlib: a huge list prints as [1, 2, ...]


def as_array(name, x, dtype, finite=True):
    """``x`` as a numeric ndarray of ``dtype``, finite everywhere (unchecked if not ``finite``:
    for a caller that checks its own results, and calls again with ``finite`` for the message)."""
    if type(x) is np.ndarray and x.dtype == dtype:
        # the common case, an array of the right dtype: only its values need checking (the
        # checks below would pass it through unchanged; this skips their cost on tiny arrays)
        if finite:
            _all_finite(name, x, "expected finite values")
        return x
    if isinstance(x, (str, bytes)) or x is None:
        raise BadType(f"{name}: expected a numeric array, got {describe(x)}", argument=name)
    if isinstance(x, np.ma.MaskedArray):
        # np.asarray would drop the mask and hand over the values under it
        raise BadType(f"{name}: expected a plain array, got a numpy masked array of shape {x.shape} "
                      f"(its mask would be ignored; pass {name}.filled(value) or the rows you mean)", argument=name)
    try:
        arr = np.asarray(x)
    except Exception as exc:  # ragged lists and the like
        raise BadType(f"{name}: expected a numeric array, got {describe(x)} ({exc})", argument=name) from None
    if arr.dtype.kind == "c":
        raise BadType(f"{name}: expected real numbers, got {describe(arr)}", argument=name)
    # kinds b, i, u, f only: timedelta64 counts as a NumPy integer, but its numbers are durations
    if arr.dtype.kind not in "biuf":
        raise BadType(f"{name}: expected a numeric array (bool, int or float), got {describe(x)}", argument=name)
    if not finite:
        with np.errstate(over="ignore"):         # 1e300 -> inf in float32: the caller sees it
            return arr.astype(dtype, copy=False)
    _all_finite(name, arr, "expected finite values")
    if arr.dtype == dtype:
        return arr
    # A narrowing cast is checked again, with its own message: 1e300 is finite but becomes
    # inf in float32, and "expected finite values, got inf" would blame a value nobody wrote.
    with np.errstate(over="ignore"):
        out = arr.astype(dtype, copy=False)
    if arr.dtype.kind == "f" and arr.dtype.itemsize > out.dtype.itemsize:
        _all_finite(name, out, f"expected values that fit in {np.dtype(dtype)} "
                               f"(|x| <= {np.finfo(dtype).max:.3g})", original=arr)
    return out


def _all_finite(name, arr, expected, original=None):
    """Raise ValueError naming the first non-finite entry of ``arr`` (and how many there are)."""
    if finite(arr):
        return
    bad = np.argwhere(~np.isfinite(arr))
    where = tuple(int(i) for i in bad[0])
    value = (arr if original is None else original)[where]
    at = f" at index {where}" if where else ""
    more = f" ({len(bad)} such entries)" if len(bad) > 1 else ""
    raise BadValue(f"{name}: {expected}, got {value}{at}{more}", argument=name)


def matrix(name, x, dtype, width=None, width_name="columns", symbol="d"):
    """A finite 2-D array of shape (n, width) with n >= 1 (and width >= 1).

    ``symbol`` names the width in messages when it is not fixed: (n, d) for inputs, (n, K) for outputs.
    """
    if (type(x) is np.ndarray and x.dtype == dtype and x.ndim == 2 and x.shape[0] >= 1
            and x.shape[1] == (x.shape[1] if width is None else width) >= 1 and finite(x)):
        return x                                      # the common case, right as it came
    arr = as_array(name, x, dtype)
    shape = f"(n, {width if width is not None else symbol})"
    if arr.ndim != 2:
        raise BadValue(f"{name}: expected a 2-D array of shape {shape}, "
                       f"got {arr.ndim}-D array of shape {arr.shape}{_reshape_hint(name, arr, width)}", argument=name)
    if arr.shape[0] < 1:
        raise BadValue(f"{name}: expected at least one row, got shape {arr.shape}", argument=name)
    if width is not None and arr.shape[1] != width:
        raise BadValue(f"{name}: expected {width} {width_name} (shape (n, {width})), "
                       f"got shape {arr.shape}", argument=name)
    if arr.shape[1] < 1:
        raise BadValue(f"{name}: expected at least one column, got shape {arr.shape}", argument=name)
    return arr


def _reshape_hint(name, arr, width):
    """For a 1-D array, the reshape the student most likely meant."""
    if arr.ndim != 1:
        return ""
    one_row = f"; for a single sample use {name}.reshape(1, -1)"
    if width is None:
        return f"{one_row}, for a single column {name}.reshape(-1, 1)"
    if arr.size == width:
        return one_row
    if width == 1:
        return f"; for {arr.size} samples of one column use {name}.reshape(-1, 1)"
    return f"{one_row}, but that needs {width} values, not {arr.size}"


def rows_or_vector(name, x, dtype, n, K):
    """An (n, K) array, or a (K,) vector repeated for every one of the n rows (a new array)."""
    arr = as_array(name, x, dtype)
    if arr.shape == (K,):
        return arr[np.newaxis].repeat(n, axis=0)
    if arr.shape != (n, K):
        hint = f" (transposed? {name}.T has shape ({n}, {K}))" if arr.shape == (K, n) else ""
        raise BadValue(f"{name}: expected shape ({n}, {K}) or ({K},), got shape {arr.shape}{hint}", argument=name)
    return arr


def mask(name, x, dtype, n, K):
    """A 0/1 mask of shape (n, K), or (K,) broadcast (read-only) to every one of the n rows."""
    arr = rows_or_vector(name, x, dtype, n, K)
    if not np.all((arr == 0) | (arr == 1)):
        raise BadValue(f"{name}: expected only 0s and 1s, got values {np.unique(arr)}", argument=name)
    return arr


def whole_number(name, x, minimum=1, maximum=None, top=""):
    """A whole number >= minimum (and <= maximum, ``top`` saying what that is); bools and
    floats (even 3.0) are refused, NumPy ints are fine."""
    if isinstance(x, (bool, np.bool_)) or not isinstance(x, numbers.Integral):
        raise BadType(f"{name}: expected a whole number >= {minimum}, got {describe(x)}", argument=name)
    if x < minimum:
        raise BadValue(f"{name}: expected a whole number >= {minimum}, got {x}", argument=name)
    if maximum is not None and x > maximum:
        raise BadValue(f"{name}: expected a {name} {minimum} .. {maximum} {top}, got {x}", argument=name)
    return int(x)


def layer_number(name, l, depth):
    """A layer number 1 .. depth (bools refused)."""
    if isinstance(l, bool) or not isinstance(l, numbers.Integral):
        raise BadType(f"{name}: expected a layer number 1 .. {depth}, got {describe(l)}", argument=name)
    if not 1 <= l <= depth:
        raise BadValue(f"{name}: expected a layer number 1 .. {depth}, got {l}", argument=name)
    return int(l)


def seed(name, x):
    """None or a whole number >= 0: what ``np.random.default_rng`` accepts, in its plain form."""
    if x is None:
        return None
    if isinstance(x, (bool, np.bool_)) or not isinstance(x, numbers.Integral):
        raise BadType(f"{name}: expected a whole number >= 0 or None, got {describe(x)}", argument=name)
    if x < 0:
        raise BadValue(f"{name}: expected a whole number >= 0 or None, got {x}", argument=name)
    return int(x)


def real(name, x, *, low=None, low_inclusive=True):
    """A finite real number, optionally bounded below. A number too large for a Python float
    (``10**400``, whose float() raises OverflowError) is refused by name as a ValueError."""
    if isinstance(x, (bool, np.bool_)) or not isinstance(x, numbers.Real):
        raise BadType(f"{name}: expected a real number, got {describe(x)}", argument=name)
    try:
        x = float(x)
    except OverflowError:
        got = f"{decimal.Decimal(int(x)):.3g}" if isinstance(x, numbers.Integral) else describe(x)
        raise BadValue(f"{name}: expected a finite number that fits in a float (|{name}| <= "
                       f"{sys.float_info.max:.3g}), got {got}", argument=name) from None
    if not np.isfinite(x):
        raise BadValue(f"{name}: expected a finite number, got {x}", argument=name)
    if low is not None:
        if (x < low) if low_inclusive else (x <= low):
            op = ">=" if low_inclusive else ">"
            raise BadValue(f"{name}: expected a number {op} {low}, got {x}", argument=name)
    return x


def param_dict(name, D, shapes, dtype, require_all=True, finite=True):
    """A dict with exactly the keys of ``shapes``, each a finite array of that shape
    (finiteness unchecked if not ``finite``, as in ``as_array``).

    Returns a new dict of arrays converted to ``dtype``; nothing of ``D`` is modified.
    """
    if (type(D) is dict and D.keys() == shapes.keys()      # the common case, right as it came
            and all(type(v) is np.ndarray and v.dtype == dtype and v.shape == shapes[k] for k, v in D.items())
            and (not finite or _finite(np.concatenate([v.ravel() for v in D.values()])))):
        return dict(D)
    if not isinstance(D, dict):
        raise BadType(f"{name}: expected a dict like params with keys {list(shapes)}, "
                      f"got {describe(D)}", argument=name)
    unknown = [k for k in D if k not in shapes]
    if unknown:
        raise BadValue(f"{name}: unknown keys {unknown}; expected keys {list(shapes)}", argument=name)
    missing = [k for k in shapes if k not in D]
    if require_all and missing:
        raise BadValue(f"{name}: missing keys {missing}; expected keys {list(shapes)}", argument=name)
    out = {}
    for key in D:
        arr = as_array(f"{name}[{key!r}]", D[key], dtype, finite)
        if arr.shape != shapes[key]:
            raise BadValue(f"{name}[{key!r}]: expected shape {shapes[key]}, got shape {arr.shape}", argument=name)
        out[key] = arr
    return out


def path(name, x):
    """A file path: str, bytes or os.PathLike (pathlib.Path), returned as str."""
    try:
        text = os.fsdecode(os.fspath(x))
    except TypeError:
        raise BadType(f"{name}: expected a file path (str or pathlib.Path), "
                      f"got {describe(x)}", argument=name) from None
    if "\0" in text:                    # no file system takes one: the OS would refuse it
        raise BadValue(f"{name}: expected a file path without a NUL character, got {reprlib.repr(text)}", argument=name)
    return text


@functools.lru_cache(maxsize=None)
def machine_memory():
    """This machine's physical memory in bytes (None where the OS does not say): the bound for
    sizes that could never be allocated, checked before NumPy tries."""
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (AttributeError, OSError, ValueError):
        return None


def fits_in_memory(name, nbytes, what):
    """Refuse (ValueError naming ``name``) the rows of ``name`` when ``what`` (the forward
    "record", say) needs ``nbytes`` bytes for them, more than this machine's physical memory:
    a MemoryError from deep inside NumPy names nothing."""
    memory = machine_memory()
    if memory is not None and nbytes > memory:
        raise BadValue(f"{name}: {what} for its rows needs {gib(nbytes)}, more than this machine's "
                       f"memory ({gib(memory)}); pass fewer rows at a time", argument=name)


def gib(n):
    return f"{n / 2**30:.3g} GiB"


def count_negative(a):
    """How many entries of ``a`` are below 0."""
    return int(np.count_nonzero(a < 0))


def count_nonfinite(a):
    """'2 NaN, 1 inf' for an array holding them."""
    nan, inf = int(np.isnan(a).sum()), int(np.isinf(a).sum())
    return ", ".join(f"{c} {what}" for c, what in [(nan, "NaN"), (inf, "inf")] if c)


#: The dtypes a network computes in: float64 (the default, for gradient checks) and float32.
DTYPES = (np.float64, np.float32)


def check_sizes(sizes):
    """``sizes`` as a list of positive ints, at least two (inputs and outputs)."""
    if not isinstance(sizes, (list, tuple, range, np.ndarray)) or np.ndim(sizes) != 1:
        raise BadType(f"sizes: expected a list of at least two positive whole numbers, "
                      f"got {describe(sizes)}", argument="sizes")
    if len(sizes) < 2:
        raise BadValue(f"sizes: expected at least two positive whole numbers "
                       f"(inputs and outputs), got {list(sizes)}", argument="sizes")
    return [whole_number(f"sizes[{i}]", s) for i, s in enumerate(sizes)]


# -- the network's arguments ---------------------------------------------------------------
def check_inputs(net, X, name="X"):
    """X (or keep_X, ...) as a finite (n, d) array of the network's dtype, d = sizes[0], whose
    forward record (every z_l and a_l: n x 2 (n_1 + ... + n_L) numbers) fits in this machine's
    memory: a batch too large is refused before NumPy tries, naming its rows."""
    X = matrix(name, X, net.dtype, width=net.sizes[0], width_name="input columns")
    fits_in_memory(name, X.shape[0] * 2 * sum(net.sizes[1:]) * net.dtype.itemsize, "record")
    return X


def check_lr(lr, dtype):
    """lr > 0 as a scalar of ``dtype``, refusing one that rounds to 0 or inf there."""
    return check_representable("lr", real("lr", lr, low=0.0, low_inclusive=False), dtype)


def check_representable(name, value, dtype):
    """A positive number as a scalar of ``dtype``, refusing one that rounds to 0 or inf there."""
    with np.errstate(over="ignore", under="ignore"):
        scalar = np.dtype(dtype).type(value)
    if not np.isfinite(scalar) or scalar == 0:
        raise BadValue(f"{name}: expected a value representable in {dtype} "
                       f"(between {np.finfo(dtype).smallest_subnormal:.3g} and "
                       f"{np.finfo(dtype).max:.3g}), got {value}", argument=name)
    return scalar


def check_step(net, D, lr):
    """(lr, D) of a step: lr > 0 in the network's dtype, D a finite dict like its params, whose
    arrays can all be written in place."""
    lr = check_lr(lr, net.dtype)
    D = param_dict("D", D, net.param_shapes, net.dtype)
    check_writable(net)
    return lr, D


def check_writable(net):
    """Raise ValueError unless every parameter array can be written in place."""
    frozen = [k for k, v in net.params.items() if not v.flags.writeable]
    if frozen:
        raise BadValue(f"net: parameters {frozen} are read-only arrays (loaded with mmap_mode='r', "
                       f"or set by hand?); nothing was changed. Give the network writable "
                       f"copies: net.params[k] = net.params[k].copy()", argument="net")


def record(net, record, kind):
    """Raise TypeError/ValueError unless ``record`` is a whole forward record of this network:
    a0, z1, a1, ..., zL, aL, each an (n, n_l) array of the network's dtype."""
    if not isinstance(record, kind):
        raise BadType(f"record: expected the Forward record returned by net.forward(X), "
                      f"got {describe(record)}", argument="record")
    try:                            # the record as forward makes it: compared in one go
        arrays = [record.a[0], *(v for l in range(1, net.depth + 1) for v in (record.z[l], record.a[l]))]
        layout = [(type(v), v.shape, v.dtype) for v in arrays]
        n = arrays[0].shape[0]
    except (KeyError, TypeError, AttributeError, IndexError):
        layout = n = None
    widths = [net.sizes[0], *(w for w in net.sizes[1:] for _ in "za")]      # a0, z1, a1, ...
    if (layout == [(np.ndarray, (n, w), net.dtype) for w in widths]
            and len(record.a) == net.depth + 1 and len(record.z) == net.depth):
        return
    _why_not_a_record(net, record)


def _why_not_a_record(net, record):
    """Raise the error that says what is wrong with a record that is not as forward makes it
    (or nothing, for a right record whose arrays are of a subclass of ndarray)."""
    L, a, z = net.depth, record.a, record.z
    complete = (isinstance(a, dict) and isinstance(z, dict)
                and set(a) == set(range(L + 1)) and set(z) == set(range(1, L + 1))
                and all(isinstance(v, np.ndarray) and v.ndim == 2
                        for v in [*a.values(), *z.values()]))
    if not complete:
        raise BadValue(f"record: expected a forward record of a network with sizes {net.sizes} "
                       f"(2-D arrays a[0..{L}] and z[1..{L}]), got a {_keys(a)} and z {_keys(z)}",
                       argument="record")
    widths = [a[l].shape[1] for l in range(L + 1)]
    if widths != net.sizes:
        raise BadValue(f"record: expected a forward record of a network with sizes "
                       f"{net.sizes}, got one with widths {widths}", argument="record")
    wrong = {k: v.dtype for k, v in record.stages.items() if v.dtype != net.dtype}
    if wrong:
        raise BadValue(f"record: expected every stage in the network's dtype {net.dtype}, got "
                       + ", ".join(f"{k} {d}" for k, d in wrong.items())
                       + " (a record of another network, or edited by hand?)", argument="record")
    n = a[0].shape[0]
    if any(v.shape[0] != n for v in record.stages.values()) or any(
            z[l].shape != a[l].shape for l in range(1, L + 1)):
        raise BadValue(f"record: expected every stage of shape (n, width) with the n = {n} rows "
                       f"of a0, got " + ", ".join(f"{k} {v.shape}" for k, v in record.stages.items()),
                       argument="record")


def _keys(d):
    """'keys [0, 1]' for a dict, else what it is."""
    return f"keys {list(d)}" if isinstance(d, dict) else describe(d)


def mlp_arguments(sizes, hidden, output, init_std, seed_, dtype, activation):
    """MLP's arguments checked, in the order they are read; returns (sizes as a list of ints,
    the activations of layers 1 .. L, init_std as a float, the seed, dtype as np.dtype).
    ``activation(name, argument)`` looks a name up, refusing one it does not know."""
    sizes = check_sizes(sizes)
    L = len(sizes) - 1
    if isinstance(hidden, (list, tuple)):
        if len(hidden) != L - 1:
            raise BadValue(f"hidden: expected one activation name per hidden layer "
                           f"({L - 1} for sizes {sizes}), got {len(hidden)}: {reprlib.repr(list(hidden))}",
                           argument="hidden")
        acts = [activation(h, f"hidden[{i}]") for i, h in enumerate(hidden)]
    else:
        acts = [activation(hidden, "hidden")] * (L - 1)
    acts.append(activation(output, "output"))
    init_std = real("init_std", init_std, low=0.0)
    try:
        if dtype is None:                    # np.dtype(None) would quietly mean float64
            raise TypeError
        kind = np.dtype(dtype)
    except TypeError:
        raise BadType(f"dtype: expected np.float64 or np.float32, got {dtype!r}", argument="dtype") from None
    if kind not in [np.dtype(t) for t in DTYPES]:
        raise BadValue(f"dtype: expected np.float64 or np.float32, got {kind}", argument="dtype")
    seed_ = seed("seed", seed_)
    if math.copysign(1.0, init_std) < 0:
        raise BadValue("init_std: expected a number >= 0 (0.0 for all-zero parameters), got -0.0",
                       argument="init_std")
    # normal draws stay within 64 standard deviations (beyond 38 the chance is below 1e-300)
    top = float(np.finfo(kind).max) / 64
    if init_std > top:
        raise BadValue(f"init_std: expected a number <= {top:.3g}, so that every parameter drawn "
                       f"fits in {kind.name}, got {init_std:g}", argument="init_std")
    P = sum((a + 1) * b for a, b in zip(sizes, sizes[1:]))
    memory = machine_memory()
    if memory is not None and P * kind.itemsize > memory:
        raise BadValue(f"sizes: {sizes} means {P} parameters, {gib(P * kind.itemsize)} in {kind.name}, "
                       f"more than this machine's memory ({gib(memory)})", argument="sizes")
    return sizes, acts, init_std, seed_, kind


# -- the Jacobian's and the projection's arguments -------------------------------------------
def check_keep(keep, K, name="keep"):
    """``keep`` as a list of distinct output indices in range(K), non-empty."""
    if isinstance(keep, (int, np.integer)) and not isinstance(keep, bool):
        keep = [keep]
    if isinstance(keep, np.ndarray) and keep.ndim == 0:       # np.array(0): one index, as 0 is
        keep = [keep.item()]
    if isinstance(keep, (str, bytes, dict)) or not hasattr(keep, "__iter__"):
        raise BadType(f"{name}: expected a list of output indices, got {describe(keep)}", argument=name)
    keep = list(keep)
    if not keep:
        raise BadValue(f"{name}: expected at least one output index, got an empty list", argument=name)
    for k in keep:
        if isinstance(k, (bool, np.bool_)) or not isinstance(k, (int, np.integer)):
            raise BadType(f"{name}: expected whole-number output indices, got {reprlib.repr(keep)}", argument=name)
        if not 0 <= k < K:
            raise BadValue(f"{name}: output index {k} out of range for {K} outputs "
                           f"(expected 0 .. {K - 1})", argument=name)
    if len(set(keep)) != len(keep):
        raise BadValue(f"{name}: expected distinct output indices, got {reprlib.repr(keep)}", argument=name)
    return [int(k) for k in keep]


def check_rcond(rcond):
    """None (the solver's default) or a relative eigenvalue cut-off in (0, 1)."""
    if rcond is None:
        return None
    rcond = real("rcond", rcond, low=0.0, low_inclusive=False)
    if rcond >= 1.0:
        raise BadValue(f"rcond: expected a relative cut-off below 1 (or None), got {rcond}", argument="rcond")
    return rcond


def check_gram(name, gram):
    """A finite, square, symmetric float matrix (what eigh assumes without checking)."""
    dtype = gram.dtype if isinstance(gram, np.ndarray) and gram.dtype.kind == "f" else np.float64
    gram = as_array(name, gram, dtype)
    if gram.ndim != 2 or gram.shape[0] != gram.shape[1] or gram.shape[0] < 1:
        raise BadValue(f"{name}: expected a square (m, m) matrix with m >= 1, got shape {gram.shape}", argument=name)
    scale = float(np.abs(gram).max())
    asym = float(np.abs(gram - gram.T).max())
    if asym > 1e3 * eps(dtype) * max(scale, tiny(dtype)):
        raise BadValue(f"{name}: expected a symmetric matrix, got max |gram - gram.T| = {asym:.3g} "
                       f"(max |gram| = {scale:.3g})", argument=name)
    return gram


def check_rhs(rhs, m):
    """A right-hand side of an (m, m) system: shape (m,) or (m, k)."""
    rhs = np.asarray(rhs)
    if rhs.ndim not in (1, 2) or rhs.shape[0] != m:
        raise BadValue(f"rhs: expected shape ({m},) or ({m}, k), got {rhs.shape}", argument="rhs")
    return rhs


def check_flat(D):
    """A non-empty dict like params, to be flattened into one vector."""
    if not isinstance(D, dict) or not D:
        raise BadType(f"D: expected a non-empty dict like params, got {describe(D)}", argument="D")
    return D


def check_vector(vector, like):
    """One entry per parameter of the dict ``like``: shape (P,), or a (P, 1) column."""
    vector = np.asarray(vector)
    total = sum(np.size(value) for value in like.values())
    if vector.ndim == 2 and vector.shape[1] == 1:        # a column, as pinv(J) @ r gives it
        vector = vector[:, 0]
    if vector.shape != (total,):
        raise BadValue(f"vector: expected shape ({total},) or ({total}, 1), one entry per parameter of "
                       f"{list(like)}, got {vector.shape}", argument="vector")
    return vector


def check_weight(name, x, dtype):
    """A number >= 0 that fits in ``dtype`` (NumPy 2 would round a larger one to inf there)."""
    x = real(name, x, low=0.0)
    top = float(np.finfo(dtype).max)
    if x > top:
        raise BadValue(f"{name}: expected a number <= {top:.3g}, which fits in {np.dtype(dtype)}, "
                       f"got {x:g}", argument=name)
    return x


@contextlib.contextmanager
def all_or_nothing(net):
    """On any failure or interruption inside the block, every parameter goes back to the very
    bits it had at the start, in the same arrays; then the error goes on."""
    start = {k: v.copy() for k, v in net.params.items()}
    try:
        yield
    except BaseException:
        for k, v in start.items():
            if net.params[k].flags.writeable:
                net.params[k][...] = v
        raise
