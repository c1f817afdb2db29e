"""What crosses between the grader and a submission's child process: plain data only.

A message is a length-prefixed frame holding an ``.npz`` archive: its JSON skeleton (None, bools,
ints, floats, strings, and tagged lists, tuples, dicts, arrays and networks) as one uint8 array,
and every array beside it, stored (not compressed). The grader reads a child's frames with its
own reader of ``.npy`` members (no pickle; every member's size known before it is read, none
larger than the frame: a deflated member, which could inflate a MiB into a GiB, is refused) and
``json.loads``, so that nothing a child sends can run code in the grader, and it accepts
only plain numeric ndarrays: a NumPy subclass, a lazy object or one whose ``__array__`` lies
never leaves the child as an array; it arrives as ``Other(type name)``, which every comparison
refuses as "not an array of the expected shape".
"""
from __future__ import annotations

import io
import json
import os
import select
import struct
import time
import zipfile
from dataclasses import dataclass

import numpy as np
from numpy.lib import format as npformat

from ...network import MLP

#: The largest frame the grader reads (bytes): answers are small arrays; a child that sends
#: more is refused before its bytes are held in memory.
MAX_FRAME = 64 * 2 ** 20

_NUMERIC = "biuf"                                 # bool, int, unsigned, float: what an answer is
_SCALARS = {np.float64: float, np.float32: float, np.float16: float, np.int64: int,
            np.int32: int, np.int16: int, np.int8: int, np.uint64: int, np.uint32: int,
            np.uint16: int, np.uint8: int, np.bool_: bool}


class BadFrame(Exception):
    """What came was not a message (garbage, too large, refused types)."""


@dataclass(frozen=True)
class Other:
    """A value that is not plain data, named by its type: refused wherever an answer is read."""
    type_name: str


@dataclass
class NetSpec:
    """An MLP as plain data: sizes, activations per layer, dtype name and parameters."""
    sizes: list
    activations: list
    dtype: str
    params: dict


def net_spec(net):
    return NetSpec(list(net.sizes), list(net.activations), np.dtype(net.dtype).name,
                   {k: np.array(v) for k, v in net.params.items()})


def build_net(spec):
    """The MLP a NetSpec describes (the child's copy of the grader's network); ValueError unless
    its parameters have the shapes its sizes say (checked before any array is made: a spec from
    a child cannot make the grader allocate more than the message held)."""
    sizes, acts, params = spec.sizes, spec.activations, spec.params
    if (type(sizes) is not list or not all(type(n) is int and n > 0 for n in sizes)
            or type(acts) is not list or len(acts) != len(sizes) - 1
            or spec.dtype not in ("float64", "float32")):
        raise ValueError("not a network")
    shapes = {}
    for l in range(1, len(sizes)):
        shapes[f"W{l}"], shapes[f"b{l}"] = (sizes[l - 1], sizes[l]), (sizes[l],)
    if set(params) != set(shapes) or any(type(params[k]) is not np.ndarray or params[k].shape != s
                                         for k, s in shapes.items()):
        raise ValueError("not a network")
    net = MLP(spec.sizes, hidden=acts[:-1] if len(acts) > 1 else "sigmoid", output=acts[-1],
              dtype=np.dtype(spec.dtype).type)
    net.params = {k: np.array(v, dtype=spec.dtype) for k, v in spec.params.items()}
    return net


# -- encoding ----------------------------------------------------------------------------------
def encode(obj):
    """Bytes of one message: ``obj`` made of plain data (anything else becomes Other)."""
    arrays = []

    def plain(x, depth=0):
        if depth > 20:
            return {"other": "nesting deeper than 20"}
        t = type(x)
        if x is None or t in (bool, int, str):
            return x
        if t is float:
            return {"float": repr(x)}             # JSON has no inf or nan
        if t in _SCALARS:
            return plain(_SCALARS[t](x.item()), depth)
        if t is np.ndarray:
            if x.dtype.kind not in _NUMERIC or x.dtype.hasobject:
                return {"other": f"ndarray of {x.dtype}"}
            arrays.append(np.ascontiguousarray(x))
            return {"array": len(arrays) - 1}
        if t in (list, tuple):
            return {t.__name__: [plain(v, depth + 1) for v in x]}
        if t is dict:
            if not all(type(k) in (str, int) for k in x):
                return {"other": "dict with keys that are not strings or ints"}
            return {"dict": [[k, plain(v, depth + 1)] for k, v in x.items()]}
        if t is NetSpec:
            return {"net": [x.sizes, x.activations, x.dtype, plain(x.params, depth + 1)]}
        if t is Other:
            return {"other": x.type_name}
        return {"other": _type_name(x)}

    skeleton = json.dumps(plain(obj)).encode()
    buffer = io.BytesIO()
    np.savez(buffer, skeleton=np.frombuffer(skeleton, dtype=np.uint8),
             **{f"a{i}": a for i, a in enumerate(arrays)})
    return buffer.getvalue()


def _type_name(x):
    t = type(x)
    bases = [b.__name__ for b in t.__mro__[1:] if b.__module__ == "numpy"]
    return t.__name__ + (f" (a subclass of numpy's {bases[0]})" if bases else "")


def decode(data):
    """The message in ``data``; BadFrame unless it is plain data, read without pickle."""
    files = _arrays(data)
    try:
        skeleton = json.loads(files.pop("skeleton").tobytes().decode())
    except Exception as exc:                      # noqa: BLE001 - any garbage a child sends
        raise BadFrame(f"not a message ({type(exc).__name__})") from None

    def value(x, depth=0):
        if depth > 22:
            raise BadFrame("nested too deep")
        if x is None or type(x) in (bool, int, str):
            return x
        if type(x) is not dict or len(x) != 1:
            raise BadFrame("not a tagged value")
        (tag, body), = x.items()
        if tag == "float" and type(body) is str:
            try:
                return float(body)
            except ValueError:
                raise BadFrame("a float that is not a number") from None
        if tag == "array" and type(body) is int:
            array = files.get(f"a{body}")
            if type(array) is not np.ndarray or array.dtype.kind not in _NUMERIC:
                raise BadFrame("an array that is not numeric")
            return array
        if tag in ("list", "tuple") and type(body) is list:
            items = [value(v, depth + 1) for v in body]
            return items if tag == "list" else tuple(items)
        if tag == "dict" and type(body) is list:
            pairs = [(k, value(v, depth + 1)) for k, v in (_pair(p) for p in body)]
            return dict(pairs)
        if tag == "net" and type(body) is list and len(body) == 4:
            params = value(body[3], depth + 1)
            if type(params) is not dict:
                raise BadFrame("a network whose parameters are not a dict")
            return NetSpec(body[0], body[1], body[2], params)
        if tag == "other" and type(body) is str:
            return Other(body[:80])
        raise BadFrame(f"unknown tag {tag[:20]!r}")

    return value(skeleton)


def _arrays(data):
    """The arrays of an ``.npz`` frame, each read only after its size is known to fit: every
    member must be stored, not compressed (``np.savez`` stores; a deflated member could inflate
    a MiB into a GiB), and the bytes its ``.npy`` header declares must be the bytes it holds.
    Nothing larger than the frame itself is ever allocated; BadFrame otherwise."""
    try:
        archive = zipfile.ZipFile(io.BytesIO(data))
        members = archive.infolist()
    except Exception as exc:                      # noqa: BLE001 - any garbage a child sends
        raise BadFrame(f"not a message ({type(exc).__name__})") from None
    if len(members) > 10_000 or sum(m.file_size for m in members) > len(data):
        raise BadFrame("a message that unpacks to more than it holds")
    files = {}
    for member in members:
        if member.compress_type != zipfile.ZIP_STORED or not member.filename.endswith(".npy"):
            raise BadFrame("a message with a compressed or foreign member")
        try:
            with archive.open(member) as f:
                raw = f.read(member.file_size + 1)
            if len(raw) != member.file_size:
                raise ValueError("size")
            header = io.BytesIO(raw)
            version = npformat.read_magic(header)
            read = {(1, 0): npformat.read_array_header_1_0,
                    (2, 0): npformat.read_array_header_2_0}[version]
            shape, fortran, dtype = read(header)
            count = int(np.prod(shape, dtype=np.int64)) if shape else 1
            body = raw[header.tell():]
            if dtype.hasobject or count < 0 or count * dtype.itemsize != len(body):
                raise ValueError("declared size")
            array = np.frombuffer(body, dtype=dtype, count=count).copy()
            array = array.reshape(shape[::-1]).T if fortran else array.reshape(shape)
        except Exception as exc:                  # noqa: BLE001 - any garbage a child sends
            raise BadFrame(f"not a message ({type(exc).__name__})") from None
        files[member.filename[:-len(".npy")]] = array
    if "skeleton" not in files:
        raise BadFrame("not a message (no skeleton)")
    return files


def _pair(p):
    if type(p) is not list or len(p) != 2 or type(p[0]) not in (str, int):
        raise BadFrame("a dict entry that is not (str or int, value)")
    return p


# -- framing -----------------------------------------------------------------------------------
def send(fd, obj, deadline=None):
    """Write one frame (8-byte length, then the message) to the file descriptor ``fd``; TimedOut
    if the reader takes none of it before ``deadline``, Closed if it has gone."""
    data = encode(obj)
    view = memoryview(struct.pack("<Q", len(data)) + data)
    while view:
        wait = None if deadline is None else deadline - time.monotonic()
        if wait is not None and wait <= 0:
            raise TimedOut
        _, ready, _ = select.select([], [fd], [], wait)
        if not ready:
            raise TimedOut
        try:
            view = view[os.write(fd, view[:1 << 16]):]
        except (BrokenPipeError, ConnectionResetError):
            raise Closed from None


class TimedOut(Exception):
    """No complete frame came before the deadline."""


class Closed(Exception):
    """The other end closed its side (the child ended, or closed the channel)."""


def _read_exact(fd, n, deadline):
    chunks, left = [], n
    while left:
        wait = None if deadline is None else deadline - time.monotonic()
        if wait is not None and wait <= 0:
            raise TimedOut
        ready, _, _ = select.select([fd], [], [], wait)
        if not ready:
            raise TimedOut
        chunk = os.read(fd, min(left, 1 << 20))
        if not chunk:
            raise Closed
        chunks.append(chunk)
        left -= len(chunk)
    return b"".join(chunks)


def receive(fd, deadline=None):
    """The next message on ``fd`` (decoded), or TimedOut, Closed, BadFrame."""
    (length,) = struct.unpack("<Q", _read_exact(fd, 8, deadline))
    if length > MAX_FRAME:
        raise BadFrame(f"a message of {length} bytes, more than {MAX_FRAME}")
    return decode(_read_exact(fd, length, deadline))
