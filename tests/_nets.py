"""Small networks and comparisons shared by the test modules."""
import numpy as np

import mlp_ref as mr

X5 = np.linspace(0.0, 1.0, 15).reshape(5, 3)          # 5 samples of the [3, 4, 2] network


def net342(**kw):
    return mr.MLP([3, 4, 2], **kw)


def record342():
    return net342().forward(X5)


def torn_record():
    """A record whose z2 was replaced by that of another batch: the rows no longer match."""
    rec = record342()
    rec.z[2] = rec.z[2][:3]
    return rec


def direction(net, **replace):
    """A valid direction (all ones) with some keys replaced."""
    D = {k: np.ones_like(v) for k, v in net.params.items()}
    D.update(replace)
    return D


def param_bytes(net):
    return {k: v.tobytes() for k, v in net.params.items()}


def same_network(a, b):
    assert repr(a) == repr(b)
    assert (a.sizes, a.activations, a.dtype, a.init_std, a.seed) == \
           (b.sizes, b.activations, b.dtype, b.init_std, b.seed)
    assert list(a.params) == list(b.params)
    assert param_bytes(a) == param_bytes(b)
    X = np.random.default_rng(0).normal(size=(4, a.sizes[0]))
    assert a(X).tobytes() == b(X).tobytes()


# (id, call, exception, regex that must match the start of the message)
