"""One check at the door. A public function of the lesson declares above its ``def`` what it takes,
argument -> check in the order checked (as scikit-learn's ``_parameter_constraints``), and its first
line is the door: ``net, X, G, ... = checked(PROJECT, locals())``. A check ``check_*(name, value,
got)`` returns the value as the body uses it or raises ``BadValue`` / ``BadType`` naming ``name``
(``exc.argument``); ``got`` holds the network (``net`` or ``self``) and the values checked before.
Calls from inside the lesson (``INSIDE``) skip the checks, as scikit-learn skips nested validation."""
from __future__ import annotations

import contextlib
import decimal
import functools
import numbers
import os
import reprlib
import sys
from operator import attrgetter, itemgetter

import numpy as np
import numpy.ma  # noqa: F401  (here, not lazily on the first check a debugger steps into)


class ArgumentError(Exception):
    """A refused argument: ``argument`` is its name, the word its message begins with, so that a
    caller decides by the attribute, never by reading the message. An entry's name names its
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


#: The modules whose calls pass checked values: the lesson's and the fast tier's. A call from one of
#: them skips the door; a call from anywhere else (a tutorial, a test, the measurements) is checked.
INSIDE = frozenset(f"mlp_ref.{name}" for name in "activations architectures baselines data fast fixes gradcheck "
                   "jacobian losses network optim pseudoinverse setups".split())


def checked(takes, args):
    """``args`` (the function's ``locals()`` on its first line) checked against ``takes``, in its order (one
    value alone, more as a tuple); from inside the lesson (``INSIDE``), as they came, in one line."""
    return itemgetter(*takes)(args if sys._getframe(2).f_globals.get("__name__") in INSIDE else check_all(takes, args))


def check_all(takes, args):
    """Every argument checked, in the order of ``takes``: a dict of the checked values."""
    got = {"net": args.get("net", args.get("self"))}
    for name, check in takes.items():
        got[name] = check(name, args[name], got)
    return got


# -- what came, and whether it is finite ------------------------------------------------------
def describe(x):
    """A short description of what came: type, and shape/dtype for arrays."""
    if isinstance(x, np.ndarray):
        return f"array of shape {x.shape} and dtype {x.dtype}"
    return f"{type(x).__name__} {reprlib.repr(x)}"   # reprlib: a huge list prints as [1, 2, ...]


def finite(a):
    """Whether every entry of ``a`` is finite: one reduction in C (``ndarray.all`` is Python in NumPy)."""
    return bool(np.logical_and.reduce(np.isfinite(a), axis=None))


def all_finite(arrays):
    """Whether every entry of every array of ``arrays`` is finite: ``finite`` of each, all in C."""
    return all(map(functools.partial(np.logical_and.reduce, axis=None), map(np.isfinite, arrays)))


#: the machine epsilon and the smallest normal number of a dtype, as floats (``np.finfo`` runs Python each call)
eps = functools.lru_cache(maxsize=None)(lambda dtype: float(np.finfo(dtype).eps))
tiny = functools.lru_cache(maxsize=None)(lambda dtype: float(np.finfo(dtype).tiny))


def count_nonfinite(a):
    """'2 NaN, 1 inf' for an array holding them."""
    return ", ".join(f"{c} {what}" for c, what in [(np.isnan(a).sum(), "NaN"), (np.isinf(a).sum(), "inf")] if c)


gib = lambda n: f"{n / 2**30:.3g} GiB"      # a size in messages


@functools.lru_cache(maxsize=None)
def machine_memory():
    """This machine's physical memory in bytes (None where the OS does not say)."""
    with contextlib.suppress(AttributeError, OSError, ValueError):       # no sysconf, or no such name
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")


SHAPE, DTYPE, WRITEABLE = attrgetter("shape"), attrgetter("dtype"), attrgetter("flags.writeable")


# -- numbers ------------------------------------------------------------------------------------
def is_whole(x):
    """Whether ``x`` is a whole number: a Python or NumPy int, not a bool (nor 3.0)."""
    return type(x) is int or (isinstance(x, numbers.Integral) and not isinstance(x, (bool, np.bool_)))


def check_whole(name, x, got=None, minimum=1, maximum=None, what="a whole number"):
    """A whole number >= minimum (and <= maximum), as an int; ``what`` names it in messages."""
    expected = f"{what} >= {minimum}" if maximum is None else f"{what} {minimum} .. {maximum}"
    if not is_whole(x):
        raise BadType(f"{name}: expected {expected}, got {describe(x)}", argument=name)
    if x < minimum or (maximum is not None and x > maximum):
        raise BadValue(f"{name}: expected {expected}, got {x}", argument=name)
    return int(x)


def check_seed(name, x, got=None):
    """None or a whole number >= 0: what ``np.random.default_rng`` accepts, in its plain form."""
    return None if x is None else check_whole(name, x, minimum=0, what="None or a whole number")


def check_real(name, x, got=None, low=None, strict=False, below=None, what="a number"):
    """A finite real number as a float: >= low (> if ``strict``), < below (``what`` says what that is)."""
    if isinstance(x, (bool, np.bool_)) or not isinstance(x, numbers.Real):
        raise BadType(f"{name}: expected a real number, got {describe(x)}", argument=name)
    try:
        x = float(x)
    except OverflowError:
        came = f"{decimal.Decimal(int(x)):.3g}" if isinstance(x, numbers.Integral) else describe(x)
        raise BadValue(f"{name}: expected a finite number that fits in a float (|{name}| <= "
                       f"{sys.float_info.max:.3g}), got {came}", argument=name) from None
    if not np.isfinite(x):
        raise BadValue(f"{name}: expected a finite number, got {x}", argument=name)
    if low is not None and (x <= low if strict else x < low):
        raise BadValue(f"{name}: expected a number {'>' if strict else '>='} {low}, got {x}", argument=name)
    if below is not None and x >= below:
        raise BadValue(f"{name}: expected {what}, got {x}", argument=name)
    return x


check_positive = functools.partial(check_real, low=0.0, strict=True)      # a finite number > 0


def check_weight(name, x, got):
    """A number >= 0 that fits in the network's dtype (NumPy 2 would round a larger one to inf)."""
    x, top = check_real(name, x, low=0.0), float(np.finfo(got["net"].dtype).max)
    if x > top:
        raise BadValue(f"{name}: expected a number <= {top:.3g}, which fits in {got['net'].dtype}, got {x:g}",
                       argument=name)
    return x


def check_representable(name, value, dtype):
    """A positive number as a scalar of ``dtype``, refusing one that rounds to 0 or inf there."""
    with np.errstate(over="ignore", under="ignore"):
        scalar = np.dtype(dtype).type(value)
    if not np.isfinite(scalar) or scalar == 0:
        raise BadValue(f"{name}: expected a value representable in {dtype} (between "
                       f"{np.finfo(dtype).smallest_subnormal:.3g} and {np.finfo(dtype).max:.3g}), got {value}",
                       argument=name)
    return scalar


def check_lr(name, lr, got):
    """lr > 0 as a scalar of the network's dtype, refusing one that rounds to 0 or inf there."""
    return check_representable(name, check_positive(name, lr), got["net"].dtype)


def check_rcond(name, rcond, got=None):
    """None (the solver's default) or a relative eigenvalue cut-off in (0, 1)."""
    return rcond if rcond is None else check_real(name, rcond, low=0.0, strict=True, below=1.0,
                                                  what="a relative cut-off below 1 (or None)")


# -- arrays ---------------------------------------------------------------------------------------
def check_array(name, x, dtype, finite_values=True):
    """``x`` as a numeric ndarray of ``dtype``, finite everywhere (unchecked if not ``finite_values``)."""
    if type(x) is np.ndarray and x.dtype == dtype and (not finite_values or finite(x)):
        return x                                                # as it came, finite
    if isinstance(x, np.ma.MaskedArray):        # np.asarray would drop the mask, use the values under it
        raise BadType(f"{name}: expected a plain array, got a numpy masked array of shape {x.shape} "
                      f"(its mask would be ignored; pass {name}.filled(value) or the rows you mean)", argument=name)
    try:
        arr = np.asarray(x)
    except Exception as exc:  # ragged lists and the like
        raise BadType(f"{name}: expected a numeric array, got {describe(x)} ({exc})", argument=name) from None
    if arr.dtype.kind == "c":
        raise BadType(f"{name}: expected real numbers, got {describe(arr)}", argument=name)
    if arr.dtype.kind not in "biuf":            # text, None, objects; timedelta64 too (a NumPy integer: durations)
        raise BadType(f"{name}: expected a numeric array (bool, int or float), got {describe(x)}", argument=name)
    if finite_values:
        check_finite(name, arr, "expected finite values")
    with np.errstate(over="ignore"):            # 1e300 -> inf in float32: said below
        out = arr.astype(dtype, copy=False)
    # A narrowing cast is checked again, with its own message: 1e300 is finite but becomes
    # inf in float32, and "expected finite values, got inf" would blame a value nobody wrote.
    if finite_values and arr.dtype.kind == "f" and arr.dtype.itemsize > out.dtype.itemsize:
        check_finite(name, out, f"expected values that fit in {np.dtype(dtype)} (|x| <= {np.finfo(dtype).max:.3g})",
                     original=arr)
    return out


def check_finite(name, arr, expected, original=None):
    """Raise ValueError naming the first non-finite entry of ``arr`` (and how many there are)."""
    if finite(arr):
        return
    bad = np.argwhere(~np.isfinite(arr))
    where = tuple(int(i) for i in bad[0])
    value = (arr if original is None else original)[where]
    at, more = f" at index {where}" if where else "", f" ({len(bad)} such entries)" if len(bad) > 1 else ""
    raise BadValue(f"{name}: {expected}, got {value}{at}{more}", argument=name)


def check_matrix(name, x, dtype, width=None, width_name="columns", symbol="d"):
    """A finite 2-D array (n, width), n >= 1; ``symbol`` names a width not fixed: (n, d), (n, K)."""
    arr = check_array(name, x, dtype)
    if arr.ndim != 2:
        raise BadValue(f"{name}: expected a 2-D array of shape (n, {symbol if width is None else width}), got "
                       f"{arr.ndim}-D array of shape {arr.shape}{_reshape_hint(name, arr, width)}", argument=name)
    if width is not None and arr.shape[1] != width:
        raise BadValue(f"{name}: expected {width} {width_name} (shape (n, {width})), got shape {arr.shape}",
                       argument=name)
    if 0 in arr.shape:
        raise BadValue(f"{name}: expected at least one row and one column, got shape {arr.shape}", argument=name)
    return arr


def _reshape_hint(name, arr, width):
    """For a 1-D array, the reshape the student most likely meant."""
    one_row = f"; for a single sample use {name}.reshape(1, -1)"
    if arr.ndim != 1:
        return ""
    if width is None:
        return f"{one_row}, for a single column {name}.reshape(-1, 1)"
    if arr.size == width:
        return one_row
    if width == 1:
        return f"; for {arr.size} samples of one column use {name}.reshape(-1, 1)"
    return f"{one_row}, but that needs {width} values, not {arr.size}"


def check_rows(name, x, dtype, n, K, mask=False):
    """An (n, K) array, or (K,) repeated for each of the n rows (a new array); 0s and 1s for a ``mask``."""
    arr = check_array(name, x, dtype)
    if arr.shape != (n, K) and arr.shape != (K,):
        hint = f" (transposed? {name}.T has shape ({n}, {K}))" if arr.shape == (K, n) else ""
        raise BadValue(f"{name}: expected shape ({n}, {K}) or ({K},), got shape {arr.shape}{hint}", argument=name)
    if mask and not np.all((arr == 0) | (arr == 1)):
        raise BadValue(f"{name}: expected only 0s and 1s, got values {np.unique(arr)}", argument=name)
    return arr if arr.ndim == 2 else arr[np.newaxis].repeat(n, axis=0)


# -- what the lesson's functions take ------------------------------------------------------------
def check_inputs(name, X, got):
    """X (keep_X: X itself when not given beside X) as a finite (n, d) array of the network's dtype whose
    record (n x 2 (n_1 + ... + n_L) numbers) fits in memory: a batch too large is refused, naming its rows."""
    net, memory = got["net"], machine_memory() or np.inf
    if type(X) is np.ndarray and X.dtype == net.dtype and X.ndim == 2 and X.shape[1] == net.sizes[0] and \
            0 < X.shape[0] * 2 * sum(net.sizes[1:]) * net.dtype.itemsize <= memory and finite(X):
        return X                                                        # as it came
    if X is None and name == "keep_X" and "X" in got:
        return got["X"]
    X = check_matrix(name, X, net.dtype, width=net.sizes[0], width_name="input columns")
    need = X.shape[0] * 2 * sum(net.sizes[1:]) * net.dtype.itemsize
    if need > memory:
        raise BadValue(f"{name}: record for its rows needs {gib(need)}, more than this machine's memory "
                       f"({gib(memory)}); pass fewer rows at a time", argument=name)
    return X


def check_output_grads(name, G, got):
    """G as (n, K), or (K,) for every row: n the rows of X (of keep_X for keep_G, of backward's record)."""
    rows = got["keep_X"] if name == "keep_G" else got["X"] if "X" in got else got["record"].output
    return check_rows(name, G, got["net"].dtype, len(rows), got["net"].sizes[-1])


def check_output_mask(name, mask, got):
    """A 0/1 mask of G's shape (n, K), or (K,) for every row."""
    return check_rows(name, mask, got["net"].dtype, *got["G"].shape, mask=True)


def check_params_like(name, D, got, shapes=None, dtype=None, finite=True):
    """A dict with the keys and shapes of the net's parameters (or ``shapes``), finite, in its dtype."""
    shapes, dtype = got["net"].param_shapes if shapes is None else shapes, got["net"].dtype if dtype is None else dtype
    if not isinstance(D, dict):
        raise BadType(f"{name}: expected a dict like params with keys {list(shapes)}, got {describe(D)}", argument=name)
    for which, keys in (("unknown", [k for k in D if k not in shapes]), ("missing", [k for k in shapes if k not in D])):
        if keys:
            raise BadValue(f"{name}: {which} keys {keys}; expected keys {list(shapes)}", argument=name)
    out = {key: check_array(f"{name}[{key!r}]", D[key], dtype, finite) for key in shapes}
    for key, arr in out.items():
        if arr.shape != shapes[key]:
            raise BadValue(f"{name}[{key!r}]: expected shape {shapes[key]}, got shape {arr.shape}", argument=name)
    return out


def check_keep(name, keep, got):
    """``keep`` as a non-empty list of distinct output indices 0 .. K - 1 (one index: the list of it)."""
    K = got["net"].sizes[-1]
    if is_whole(keep) or (isinstance(keep, np.ndarray) and keep.ndim == 0):
        keep = [keep.item() if isinstance(keep, np.ndarray) else keep]
    if isinstance(keep, (str, bytes, dict)) or not hasattr(keep, "__iter__"):
        raise BadType(f"{name}: expected a list of output indices, got {describe(keep)}", argument=name)
    if not (keep := list(keep)):
        raise BadValue(f"{name}: expected at least one output index, got an empty list", argument=name)
    if not all(map(is_whole, keep)):
        raise BadType(f"{name}: expected whole-number output indices, got {reprlib.repr(keep)}", argument=name)
    if outside := [k for k in keep if not 0 <= k < K]:
        raise BadValue(f"{name}: output index {outside[0]} out of range for {K} outputs (expected 0 .. {K - 1})",
                       argument=name)
    if len(set(keep)) != len(keep):
        raise BadValue(f"{name}: expected distinct output indices, got {reprlib.repr(keep)}", argument=name)
    return [int(k) for k in keep]


def check_writable(net):
    """Raise ValueError unless every parameter array can be written in place (checked at every step)."""
    if not all(map(WRITEABLE, net.params.values())):
        raise BadValue(f"net: parameters {[k for k, v in net.params.items() if not v.flags.writeable]} are read-only "
                       f"arrays (loaded with mmap_mode='r', or set by hand?); nothing was changed. Give the network "
                       f"writable copies: net.params[k] = net.params[k].copy()", argument="net")


def check_path(name, x, got=None):
    """A file path: str, bytes or os.PathLike (pathlib.Path), returned as str."""
    try:
        text = os.fsdecode(os.fspath(x))
    except TypeError:
        raise BadType(f"{name}: expected a file path (str or pathlib.Path), got {describe(x)}", argument=name) from None
    if "\0" in text:                    # no file system takes one: the OS would refuse it
        raise BadValue(f"{name}: expected a file path without a NUL character, got {reprlib.repr(text)}", argument=name)
    return text


#: The dtypes a network computes in: float64 (the default, for gradient checks) and float32.
DTYPES = (np.float64, np.float32)


def check_sizes(name, sizes, got=None):
    """``sizes`` as a list of positive ints, at least two (inputs and outputs)."""
    if not isinstance(sizes, (list, tuple, range, np.ndarray)) or np.ndim(sizes) != 1:
        raise BadType(f"{name}: expected a list of at least two positive whole numbers, got {describe(sizes)}",
                      argument=name)
    if len(sizes) < 2:
        raise BadValue(f"{name}: expected at least two positive whole numbers (inputs and outputs), "
                       f"got {list(sizes)}", argument=name)
    return [check_whole(f"{name}[{i}]", s) for i, s in enumerate(sizes)]

