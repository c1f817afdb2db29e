"""The seed's toy data set, unseen probe inputs from the same distribution, and a real data set:
the 8 x 8 handwritten digits (``digits``), shipped with the package.

The accepted answer builds (x, y) pairs with x uniform in [0, 1)^3 and

    y1 = x1 + x2 + x3,        y2 = x1^2 + x2^2 + x3^2,

plus 0.01 * uniform[0, 1) noise on both targets, with n = 8 samples. We draw the same
things in the same order from ``np.random.default_rng(seed)``, so a seed fixes the bits.
"""
from __future__ import annotations

import importlib.util
import io
import os
from functools import partial

import numpy as np

from . import resources
from .boundary.checks import BadValue, check_real, check_seed, check_whole, checked

INPUT_DIM = 3

#: What the data sets take (``boundary.checks``: checked once, at the door).
SEED_DATA = {"n": check_whole, "seed": check_seed, "noise": partial(check_real, low=0.0)}
PROBE = {"n": check_whole, "seed": check_seed}
DIGITS = {"test_fraction": partial(check_real, low=0.0, strict=True, below=1.0, what="a fraction below 1"),
          "seed": check_seed}


def seed_data(n=8, seed=0, noise=0.01):
    """The answer's toy set.

    Returns
    -------
    X : ndarray, shape (n, 3)       uniform in [0, 1)
    Y : ndarray, shape (n, 2)       columns x1+x2+x3 and x1^2+x2^2+x3^2, plus noise
    """
    n, seed, noise = checked(SEED_DATA, locals())
    rng = np.random.default_rng(seed)
    X = rng.random((n, INPUT_DIM))
    Y = np.zeros((n, 2))
    Y[:, 0] += X.sum(axis=1)
    Y[:, 1] += (X ** 2).sum(axis=1)
    Y += noise * rng.random((n, 2))
    return X, Y


def probe_inputs(n=256, seed=1):
    """Unseen inputs from the same distribution as ``seed_data``'s X: uniform in [0, 1)^3.

    The default seed differs from ``seed_data``'s, so the probes are not the batch.
    """
    n, seed = checked(PROBE, locals())
    return np.random.default_rng(seed).random((n, INPUT_DIM))


# -- a real data set: the 8 x 8 handwritten digits ---------------------------------------------
#: The digits' classes, 0 .. 9, and the size of one image (8 x 8 pixels, each 0 .. 16).
DIGIT_CLASSES = 10
DIGIT_PIXELS = 64
_DIGIT_SOURCES = ("shipped", "sklearn")


def digits_arrays(source="shipped"):
    """All 1,797 handwritten digits: the UCI "optdigits" test set (Alpaydin & Kaynak 1998).

    Each image is 8 x 8 blocks counting the ink in 4 x 4 cells of a 32 x 32 bitmap, so a
    pixel is a whole number 0 .. 16. ``source="shipped"`` reads the compressed copy that ships
    with this package (``mlp_ref/resources/digits.npz``, 45 KB, CC BY 4.0: see
    ``mlp_ref/resources/README.md``); ``"sklearn"`` reads the same file scikit-learn ships
    (``sklearn/datasets/data/digits.csv.gz``) from an installed scikit-learn, without importing
    it. The two give the same arrays, in the same order.

    Returns
    -------
    images : ndarray of uint8, shape (1797, 64)     row-major 8 x 8 pixels, 0 .. 16
    labels : ndarray of uint8, shape (1797,)        the digit, 0 .. 9
    """
    if source not in _DIGIT_SOURCES:
        raise BadValue(f"source: expected one of {list(_DIGIT_SOURCES)}, got {source!r}", argument="source")
    if source == "sklearn":
        table = np.loadtxt(_sklearn_digits_file(), delimiter=",", dtype=np.uint8)
        return np.ascontiguousarray(table[:, :DIGIT_PIXELS]), table[:, DIGIT_PIXELS].copy()
    with np.load(io.BytesIO(resources.read_bytes(resources.DIGITS))) as npz:
        return npz["images"], npz["labels"]


def _sklearn_digits_file():
    """The path of scikit-learn's digits.csv.gz, found without importing scikit-learn."""
    spec = importlib.util.find_spec("sklearn")
    path = None if spec is None or spec.origin is None else os.path.join(
        os.path.dirname(spec.origin), "datasets", "data", "digits.csv.gz")
    if path is None or not os.path.exists(path):
        raise BadValue("source: 'sklearn' needs scikit-learn installed (its "
                       "datasets/data/digits.csv.gz); got none: use source='shipped'", argument="source")
    return path


def digits(test_fraction=1 / 3, seed=0, source="shipped"):
    """The handwritten digits, split into train and test sets, the same for a given seed.

    The split is stratified: ``round(test_fraction * count)`` images of each digit, chosen by
    ``np.random.default_rng(seed)``, go to the test set, the rest to the training set; each set
    keeps the images in their original order. Pixels come as float64 0 .. 16, unscaled. A
    test_fraction that leaves either set without images of some digit is refused (below about
    0.003 or above about 0.997).

    Returns
    -------
    X_train : ndarray, shape (n_train, 64)      y_train : ndarray of int, shape (n_train,)
    X_test : ndarray, shape (n_test, 64)        y_test : ndarray of int, shape (n_test,)
    """
    test_fraction, seed = checked(DIGITS, locals())
    rng = np.random.default_rng(seed)
    images, labels = digits_arrays(source)
    test = np.zeros(len(labels), dtype=bool)
    for digit in range(DIGIT_CLASSES):
        members = np.flatnonzero(labels == digit)
        count = round(test_fraction * len(members))
        if not 0 < count < len(members):
            raise BadValue(f"test_fraction: expected a fraction that leaves images of every digit "
                           f"in both sets, got {test_fraction} ({count} of the {len(members)} "
                           f"images of digit {digit} for the test set)", argument="test_fraction")
        test[rng.permutation(members)[:count]] = True
    X, y = images.astype(np.float64), labels.astype(np.int64)
    return X[~test], y[~test], X[test], y[test]
