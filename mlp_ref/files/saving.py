"""Saving and loading networks: an .npz of plain arrays, written atomically.

``MLP.save(path)`` and ``MLP.load(path)`` call ``save`` and ``load`` here. The file holds
the architecture (sizes, activations, dtype, init_std, seed) and the parameters, never a
pickle, so ``np.load(path)`` shows everything and loading runs no code from the file.
"""
from __future__ import annotations

import os
import stat

import numpy as np

from .. import activations
from ..boundary import checks
from ..boundary.checks import DTYPES, BadType, BadValue, check_sizes
from . import atomic

FILE_FORMAT = "mlp-ref MLP 1"          # what MLP.save writes; bump it if the file layout changes
ARCHITECTURE_KEYS = ("format", "sizes", "activations", "dtype", "init_std", "seed")


def save(net, path):
    """Write the network to the .npz file ``path`` (exactly that name, no suffix added).

    The file holds plain arrays only (``np.load(path)`` shows them; no pickle):

        format        "mlp-ref MLP 1"
        sizes         (L + 1,) int64
        activations   (L,) str, per layer 1 .. L (the last is the output's)
        dtype         "float64" or "float32"
        init_std      float64
        seed          str: the seed's digits, or "None" (a str holds any Python int)
        W1, b1, ...   the parameters, in the network's dtype: bit-exact round trip

    Atomic (``atomic.write_atomically``): ``path`` holds the old file or the new one, never a
    torn one, and no temporary file stays behind on any exit Python sees.

    A disk that is full (or a quota, an I/O error) raises an OSError whose errno is the
    system's and whose message starts with ``path:``, names the file and says what failed;
    ``path`` is then as it was. An OSError rather than a ValueError: nothing was wrong with the
    argument, the same call succeeds once there is room, and code that handles OSError for
    files handles this one too.
    """
    missing = [name for name in ("sizes", "params", "activations", "dtype", "init_std", "seed")
               if not hasattr(net, name)]
    if missing:                # network imports this module: an MLP is told by what it holds
        raise BadType(f"net: expected an MLP (SplitHeads: save net.to_mlp()), got "
                      f"{checks.describe(net)}, which has no {', '.join(missing)}", argument="net")
    path = atomic.check_target("path", path)
    shapes = _expected_shapes(net.sizes)
    for key in shapes:
        _check_param(f"net: params[{key!r}]", net.params.get(key), shapes[key], net.dtype, argument="net")
    arrays = {"format": np.array(FILE_FORMAT), "sizes": np.array(net.sizes, dtype=np.int64),
              "activations": np.array(net.activations), "dtype": np.array(net.dtype.name),
              "init_std": np.array(net.init_std, dtype=np.float64),
              "seed": np.array(str(net.seed)), **{k: net.params[k] for k in shapes}}
    atomic.write_atomically("path", path, lambda f: np.savez(f, **arrays))


def load(cls, path):
    """The network of class ``cls`` (MLP) saved at ``path``: same repr, same parameter bits.

    A damaged, truncated or foreign file raises ValueError naming the path and the key.
    """
    path = checks.check_path("path", path)
    arrays = _read_npz(path)

    def fail(key, what):
        return BadValue(f"path: {path!r}: key {key!r}: {what}", argument="path")

    missing = [k for k in ARCHITECTURE_KEYS if k not in arrays]
    if "format" in missing:
        raise BadValue(f"path: {path!r} is not an mlp-ref network file (no key 'format'; "
                       f"keys {sorted(arrays)})", argument="path")
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
                     why=f" (sizes {sizes}, dtype {arch['dtype'].name})", argument="path")

    try:
        net = cls(sizes, hidden=acts[:-1], output=acts[-1], init_std=arch["init_std"],
                  seed=arch["seed"], dtype=arch["dtype"])
    except checks.ArgumentError as exc:      # a value its reader took that the network refuses
        name, what = exc.argument, str(exc).removeprefix(f"{exc.argument}: ")
        raise fail(name, what) if name in ARCHITECTURE_KEYS else fail("sizes", str(exc)) from None
    # np.array: our own writeable copy, whatever buffer np.load handed out
    net.params = {key: np.array(arrays[key]) for key in shapes}
    return net


def _expected_shapes(sizes):
    """{"W1": (n_0, n_1), "b1": (n_1,), ...}: the parameter shapes that ``sizes`` implies."""
    shapes = {}
    for l in range(1, len(sizes)):
        shapes[f"W{l}"], shapes[f"b{l}"] = (sizes[l - 1], sizes[l]), (sizes[l],)
    return shapes


def _check_param(name, arr, shape, dtype, why="", argument=None):
    """A parameter exactly as a network holds it: ndarray of that shape and dtype, finite; the
    message starts with ``name``, the error blames ``argument`` (``name`` when not given)."""
    argument = argument or name
    if not isinstance(arr, np.ndarray):
        raise BadType(f"{name}: expected an array of shape {shape}, got {checks.describe(arr)}", argument=argument)
    if arr.shape != shape:
        raise BadValue(f"{name}: expected shape {shape}{why}, got shape {arr.shape}", argument=argument)
    if arr.dtype != dtype:
        raise BadValue(f"{name}: expected dtype {np.dtype(dtype).name}{why}, got {arr.dtype}", argument=argument)
    if not np.isfinite(arr).all():
        raise BadValue(f"{name}: expected finite values, got {checks.count_nonfinite(arr)}", argument=argument)


def _text(arr):
    """The str held by a 0-d string array (ValueError for anything else)."""
    if not (isinstance(arr, np.ndarray) and arr.ndim == 0 and arr.dtype.kind == "U"):
        raise ValueError(f"expected a single string, got {checks.describe(arr)}")
    return str(arr[()])


def _read_format(arr):
    text = _text(arr)
    if text != FILE_FORMAT:
        raise ValueError(f"expected {FILE_FORMAT!r}, got {text!r}")
    return text


def _read_sizes(arr):
    if not (arr.ndim == 1 and arr.dtype.kind in "iu"):
        raise ValueError(f"expected a 1-D array of whole numbers, got {checks.describe(arr)}")
    return check_sizes("sizes", arr.tolist())


def _read_activations(arr):
    if not (arr.ndim == 1 and arr.dtype.kind == "U" and arr.size >= 1):
        raise ValueError(f"expected a 1-D array of activation names, got {checks.describe(arr)}")
    # by name, through the same table as the constructor: an unknown name lists the known ones
    return [activations.get(str(name), f"activations[{i}]").name for i, name in enumerate(arr)]


def _read_dtype(arr):
    name = _text(arr)
    if name not in [np.dtype(t).name for t in DTYPES]:
        raise ValueError(f"expected 'float64' or 'float32', got {name!r}")
    return np.dtype(name)


def _read_init_std(arr):
    if not (arr.ndim == 0 and arr.dtype == np.float64):
        raise ValueError(f"expected a single float64, got {checks.describe(arr)}")
    return checks.check_real("init_std", float(arr), low=0.0)


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
        mode = os.stat(path).st_mode
    except OSError as exc:
        raise type(exc)(f"path: cannot read {path!r} ({exc.strerror})") from None
    if not stat.S_ISREG(mode):   # a FIFO would block open() forever, a folder cannot be read
        kind = "a folder" if stat.S_ISDIR(mode) else "not a regular file"
        raise BadValue(f"path: {path!r} is {kind}; expected a saved network (.npz file)", argument="path")
    try:
        f = open(path, "rb")
    except OSError as exc:
        raise type(exc)(f"path: cannot read {path!r} ({exc.strerror})") from None
    # our own handle, closed by `with` even when np.load fails half way (it would leak its own)
    with f:
        head = f.read(4)
        if not head.startswith(b"PK"):   # every zip (and so every .npz) starts with "PK"
            raise BadValue(f"path: {path!r} is not an .npz file (it starts with {head!r}, "
                           f"not the zip signature b'PK')", argument="path")
        f.seek(0)
        try:
            with np.load(f, allow_pickle=False) as npz:
                arrays = {key: npz[key] for key in npz.files}
        except Exception as exc:   # BadZipFile, zlib.error, EOFError, ValueError from a torn .npy ...
            raise BadValue(f"path: {path!r} is damaged or not an .npz file "
                           f"({type(exc).__name__}: {exc})", argument="path") from None
    for key, value in arrays.items():
        if not isinstance(value, np.ndarray):   # a zip member that is not an .npy comes as bytes
            raise BadValue(f"path: {path!r}: key {key!r}: expected a NumPy array, "
                           f"got {type(value).__name__}", argument="path")
    return arrays
