"""MNIST as its users have it: the four IDX files of LeCun, Cortes and Burges, read from a folder.

The IDX format (yann.lecun.com/exdb/mnist, the page that distributed MNIST): a big-endian header,
two zero bytes, a type byte (0x08: unsigned bytes), the number of dimensions, then each dimension
as a 4-byte integer, then the values, row-major. So the images' magic number is 0x00000803 (2051:
three dimensions, images x rows x columns) and the labels' 0x00000801 (2049: one dimension).

    train-images-idx3-ubyte   train-labels-idx1-ubyte   t10k-images-idx3-ubyte   t10k-labels-idx1-ubyte

each also accepted gzipped (the same name + ``.gz``, as the files are distributed). Where users
usually have them: torchvision's ``datasets.MNIST(root, download=True)`` keeps them in
``root/MNIST/raw/`` (both the .gz and the unpacked files); many course folders hold the four files
as downloaded. Keras's ``~/.keras/datasets/mnist.npz`` is not IDX: it is a NumPy archive of the
same arrays (``np.load`` it and keep the arrays, or point at the IDX files instead).

Nothing is downloaded here. A file that is missing, truncated, longer than its header says, or
not the IDX file it should be is refused with an ``IDXError`` naming the file, in one line.
"""
from __future__ import annotations

import gzip
import os
import zlib

import numpy as np

#: The four files: (split, what) -> their name, without .gz
FILES = {("train", "images"): "train-images-idx3-ubyte", ("train", "labels"): "train-labels-idx1-ubyte",
         ("test", "images"): "t10k-images-idx3-ubyte", ("test", "labels"): "t10k-labels-idx1-ubyte"}
#: The magic number of each kind: unsigned bytes (0x08), three or one dimensions
MAGIC = {"images": 0x00000803, "labels": 0x00000801}


class IDXError(ValueError):
    """A file of the MNIST folder that cannot be read as the IDX file it should be; ``path`` is it."""

    def __init__(self, path, why):
        super().__init__(f"{path}: {why}")
        self.path = path


def find(folder, name):
    """The path of ``name`` or ``name.gz`` in ``folder`` (the unpacked file first), or IDXError."""
    if not os.path.isdir(folder):
        raise IDXError(folder, "no such folder")
    for candidate in (name, name + ".gz"):
        path = os.path.join(folder, candidate)
        if os.path.isfile(path):
            return path
    hint = ""
    if os.path.isfile(os.path.join(folder, "mnist.npz")):
        hint = " (mnist.npz there is Keras's NumPy archive, not the IDX files)"
    elif os.path.isdir(os.path.join(folder, "MNIST", "raw")):
        hint = f" (torchvision keeps them in {os.path.join(folder, 'MNIST', 'raw')})"
    raise IDXError(os.path.join(folder, name), f"no such file (nor {name}.gz){hint}")


def read(path, kind):
    """The array of one IDX file of ``kind`` ("images": uint8 (n, rows, cols); "labels": uint8 (n,))."""
    try:
        with open(path, "rb") as raw:
            head = raw.read(2)
            raw.seek(0)
            if head == b"\x1f\x8b":                          # gzip's own magic, whatever the name
                with gzip.open(raw) as unpacked:
                    blob = unpacked.read()
            else:
                blob = raw.read()
    except (EOFError, gzip.BadGzipFile, zlib.error) as exc:
        raise IDXError(path, f"not a whole gzip file ({exc})") from None
    except OSError as exc:
        raise IDXError(path, f"cannot be read ({exc.strerror or exc})") from None
    if len(blob) < 4:
        raise IDXError(path, f"truncated: {len(blob)} bytes, not even the 4-byte magic number")
    magic = int.from_bytes(blob[:4], "big")
    if magic != MAGIC[kind]:
        raise IDXError(path, f"wrong magic number 0x{magic:08x}, expected 0x{MAGIC[kind]:08x} "
                             f"(IDX {kind}: unsigned bytes, {MAGIC[kind] & 0xFF} dimensions)")
    ndim = magic & 0xFF
    if len(blob) < 4 + 4 * ndim:
        raise IDXError(path, f"truncated: {len(blob)} bytes, shorter than its {4 + 4 * ndim}-byte header")
    shape = tuple(int.from_bytes(blob[4 + 4 * i:8 + 4 * i], "big") for i in range(ndim))
    need = 4 + 4 * ndim + int(np.prod(shape))
    if len(blob) != need:
        what = "truncated" if len(blob) < need else "longer than its header says"
        raise IDXError(path, f"{what}: {len(blob)} bytes, its header {shape} needs {need}")
    return np.frombuffer(blob, dtype=np.uint8, offset=4 + 4 * ndim).reshape(shape)


def load_mnist(folder):
    """The four files of ``folder``: (X_train, y_train, X_test, y_test), X as uint8 (n, rows * cols)
    and y as int64 (n,), every label 0 .. 9, as many labels as images (else IDXError)."""
    out = []
    for split in ("train", "test"):
        images = read(find(folder, FILES[split, "images"]), "images")
        labels_path = find(folder, FILES[split, "labels"])
        labels = read(labels_path, "labels")
        if len(labels) != len(images):
            raise IDXError(labels_path, f"{len(labels)} labels for {len(images)} images")
        if labels.size and labels.max() > 9:
            raise IDXError(labels_path, f"a label {labels.max()}, expected digits 0 .. 9")
        out += [images.reshape(len(images), -1), labels.astype(np.int64)]
    if out[0].shape[1] != out[2].shape[1]:
        raise IDXError(find(folder, FILES["test", "images"]), f"images of {out[2].shape[1]} pixels, the training "
                                                              f"images' have {out[0].shape[1]}")
    return tuple(out)
