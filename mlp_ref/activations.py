"""Activation functions and their derivatives, looked up by name.

Each activation is a pair of functions:

    f(z)        the activation, elementwise, a new array
    df(z, a)    its derivative f'(z), given both z and a = f(z), a new array

The derivative receives ``a`` as well as ``z`` because most derivatives are cheapest
in terms of the output (sigmoid' = a(1 - a), tanh' = 1 - a^2), and the forward
record already holds ``a``: backward never recomputes an activation.

Numerical care: no function here overflows for any finite input, float32 or float64.
Results that *underflow* (exp(-1e308) = 0, a tiny a squared) are rounded to 0 or to a
subnormal on purpose: that is the correctly rounded answer. NumPy ignores underflow by default;
``MLP.forward`` and ``MLP.backward`` ignore it for their whole pass, so that
``np.errstate(all="raise")`` in a student's session trips on an overflow, never on a result
rounded to zero. Called on their own, these functions leave underflow to the caller's errstate.
"""
from __future__ import annotations

from typing import Callable, NamedTuple

import numpy as np

from .boundary.checks import BadType, BadValue


class Activation(NamedTuple):
    name: str
    f: Callable[[np.ndarray], np.ndarray]
    df: Callable[[np.ndarray, np.ndarray], np.ndarray]


def sigmoid(z):
    """sigma(z) = 1 / (1 + exp(-z)), computed without overflow for any finite z.

    exp(-|z|) lies in (0, 1], so it never overflows; then
    sigma(z) = 1 / (1 + e)   for z >= 0,   and   e / (1 + e)   for z < 0,   e = exp(-|z|).
    """
    z = np.asarray(z)
    e = np.exp(-np.abs(z))
    return np.where(z >= 0, 1.0, e) / (1.0 + e)


def sigmoid_grad(z, a):
    """sigma'(z) = sigma(z) (1 - sigma(z)) = a (1 - a), a new array."""
    return a * (1.0 - a)


def tanh(z):
    """tanh(z); NumPy's tanh saturates to +-1 without overflow. (A subnormal z gives a
    subnormal tanh(z) = z, which NumPy's scalar kernel flags as an underflow and its vector
    kernels do not: see the module's docstring.)"""
    return np.tanh(z)


def tanh_grad(z, a):
    """tanh'(z) = 1 - tanh(z)^2 = 1 - a^2, a new array."""
    return 1.0 - a * a


def relu(z):
    """relu(z) = max(z, 0)."""
    return np.maximum(z, 0.0)


def relu_grad(z, a):
    """relu'(z) = 1 where z > 0, else 0 (we take 0 at the kink z = 0), a new array."""
    return (z > 0).astype(z.dtype)


def identity(z):
    """identity(z) = z, as a new array: the record's a_L must not be its z_L."""
    return np.array(z)


def identity_grad(z, a):
    """identity'(z) = 1, a new array."""
    return np.ones(z.shape, dtype=z.dtype)


ACTIVATIONS = {
    "sigmoid": Activation("sigmoid", sigmoid, sigmoid_grad),
    "tanh": Activation("tanh", tanh, tanh_grad),
    "relu": Activation("relu", relu, relu_grad),
    "identity": Activation("identity", identity, identity_grad),
}


def get(name, argument="activation"):
    """Return the :class:`Activation` called ``name``.

    ``argument`` names the caller's parameter, so a wrong name in ``MLP(hidden=...)``
    is reported as a wrong ``hidden``, not as a wrong activation in general.
    """
    if not isinstance(name, str):
        raise BadType(
            f"{argument}: expected an activation name (one of {sorted(ACTIVATIONS)}), "
            f"got {type(name).__name__} {name!r}", argument=argument)
    try:
        return ACTIVATIONS[name]
    except KeyError:
        raise BadValue(
            f"{argument}: unknown activation {name!r}; known: {', '.join(sorted(ACTIVATIONS))}",
            argument=argument) from None
