"""Optimizers check their hyperparameters at every step, in the arithmetic's dtype, and compute
in the network's dtype (issue 30, the fuzzing findings)."""
from fractions import Fraction

import numpy as np
import pytest

import mlp_ref as mr
from mlp_ref import optim
from mlp_ref.setups import G_QUESTION

OPTIMIZERS = [optim.SGD, optim.Momentum, optim.Adam]
EPS32 = float(np.finfo(np.float32).eps)


def net_and_direction(dtype=np.float64):
    net = mr.MLP([3, 4, 2], dtype=dtype, seed=0)
    X = np.random.default_rng(0).random((5, 3))
    return net, net.gradient(X, G_QUESTION)


def snapshot(net, opt):
    """Every bit of the network and of the optimizer's state."""
    state = {name: getattr(opt, name, None) for name in ("shapes", "dtype", "t")}
    for name in ("v", "m"):
        value = getattr(opt, name, None)
        state[name] = None if value is None else {k: a.tobytes() for k, a in value.items()}
    return {k: v.tobytes() for k, v in net.params.items()}, state


def refused(call, exc_type, name):
    """Run call, expect exc_type naming ``name`` (its ``argument`` and the message's first word)."""
    with pytest.raises(exc_type) as info:
        call()
    assert info.value.argument == name
    assert str(info.value).startswith(f"{name}: ")
    return info.value


# -- 1. an lr (or any hyperparameter) that no float holds ---------------------------------------
@pytest.mark.parametrize("cls", OPTIMIZERS)
@pytest.mark.parametrize("lr", [10 ** 400, -10 ** 400, Fraction(10 ** 400, 3)])
def test_an_lr_beyond_every_float_is_a_value_error_naming_lr(cls, lr):
    refused(lambda: cls(lr), ValueError, "lr")


def test_a_decay_rate_or_eps_beyond_every_float_is_named():
    refused(lambda: optim.Momentum(0.1, beta=10 ** 400), ValueError, "beta")
    refused(lambda: optim.Adam(0.1, beta2=10 ** 400), ValueError, "beta2")
    refused(lambda: optim.Adam(0.1, eps=10 ** 400), ValueError, "eps")


@pytest.mark.parametrize("cls", OPTIMIZERS)
def test_an_lr_that_overflows_the_networks_dtype_is_refused_and_changes_nothing(cls):
    # 1e39 is a float64 but above float32's largest value, 3.4e38: it would be inf there
    net, D = net_and_direction(np.float32)
    opt = cls(1e39)
    before = snapshot(net, opt)
    refused(lambda: opt.apply(net, D), ValueError, "lr")
    assert snapshot(net, opt) == before
    net64, D64 = net_and_direction(np.float64)
    assert all(np.isfinite(u).all() for u in cls(1e39).update({k: d * 1e-300 for k, d in D64.items()}).values())


def test_an_update_that_overflows_blames_lr_when_the_state_is_finite():
    # SGD: U = lr * D with |D| = 1e10 and lr = 1e300 is 1e310 > 1.8e308; D itself is ordinary
    net, D = net_and_direction()
    big = {k: np.full_like(d, 1e10) for k, d in D.items()}
    for opt in (optim.SGD(1e300), optim.Momentum(1e300)):
        before = snapshot(net, opt)
        refused(lambda: opt.apply(net, big), ValueError, "lr")
        assert snapshot(net, opt) == before


def test_a_parameter_overflow_names_the_optimizers_lr_not_the_one_it_passes_to_step():
    """apply calls net.step(U, 1.0): when theta - U overflows, the lr to blame is the optimizer's."""
    net, D = net_and_direction()
    net.params["W1"][...] = 1.5e308
    opt = optim.SGD(1e308)
    before = snapshot(net, opt)
    exc = refused(lambda: opt.apply(net, {k: -np.ones_like(d) for k, d in D.items()}), ValueError, "lr")
    assert f"{1e308:g}" in str(exc)                    # the step size used, not step's 1.0
    assert snapshot(net, opt) == before


# -- 2. hyperparameters set after construction ----------------------------------------------------
BAD_SETTINGS = [
    (optim.Momentum, "beta", 5.0, ValueError),
    (optim.Momentum, "beta", -0.1, ValueError),
    (optim.Momentum, "beta", 1.0, ValueError),
    (optim.Momentum, "beta", float("nan"), ValueError),
    (optim.Momentum, "beta", "0.9", TypeError),
    (optim.Adam, "eps", -1e-8, ValueError),
    (optim.Adam, "eps", 0.0, ValueError),
    (optim.Adam, "beta2", 1.5, ValueError),
    (optim.Adam, "beta1", 1.0, ValueError),       # 1 - beta1^t = 0: was blamed on D
    (optim.Adam, "beta1", 10 ** 400, ValueError),
    (optim.Adam, "lr", 0.0, ValueError),
    (optim.SGD, "lr", -1.0, ValueError),
    (optim.SGD, "lr", float("inf"), ValueError),
    (optim.SGD, "lr", 10 ** 400, ValueError),
    (optim.SGD, "lr", None, TypeError),
    (optim.Momentum, "order", "sideways", ValueError),
    (optim.Adam, "constraint", 3.0, TypeError),
]


@pytest.mark.parametrize("cls, name, value, exc_type", BAD_SETTINGS,
                         ids=[f"{c.__name__}.{n}={v!r}" for c, n, v, _ in BAD_SETTINGS])
@pytest.mark.parametrize("call", ["update", "apply"])
def test_a_hyperparameter_set_between_steps_is_checked_by_the_next_step(cls, name, value, exc_type, call):
    net, D = net_and_direction()
    opt = cls(0.01)
    opt.apply(net, D)                                  # a state that a refused step must keep
    good = getattr(opt, name)
    setattr(opt, name, value)
    before = snapshot(net, opt)
    step = (lambda: opt.update(D)) if call == "update" else (lambda: opt.apply(net, D))
    refused(step, exc_type, name)
    assert snapshot(net, opt) == before
    setattr(opt, name, good)                           # set right again, the next step is taken
    opt.apply(net, D)
    assert snapshot(net, opt) != before


def test_a_hyperparameter_set_before_the_first_step_is_checked_too():
    opt = optim.Adam(0.01)
    opt.beta2 = 1.5
    refused(lambda: opt.update({"W": np.ones(3)}), ValueError, "beta2")
    assert opt.shapes is None and opt.t == 0


# -- 2b. in the network's dtype: a beta that rounds to 1.0 ------------------------------------------
@pytest.mark.parametrize("make, name", [(lambda: optim.Adam(0.03, beta2=1 - 1e-8), "beta2"),
                                        (lambda: optim.Adam(0.03, beta1=1 - 1e-8), "beta1"),
                                        (lambda: optim.Momentum(0.03, beta=1 - 1e-8), "beta")])
def test_a_beta_that_float32_rounds_to_one_is_refused_by_name(make, name):
    # float32's largest number below 1 is 1 - 2^-24 = 0.99999994; 1 - 1e-8 is nearer to 1.0
    assert np.float32(1 - 1e-8) == 1.0 and np.float64(1 - 1e-8) < 1.0
    net32, D32 = net_and_direction(np.float32)
    opt = make()
    before = snapshot(net32, opt)
    refused(lambda: opt.apply(net32, D32), ValueError, name)
    assert snapshot(net32, opt) == before
    net64, D64 = net_and_direction(np.float64)         # float64 holds it: accepted there
    assert all(np.isfinite(u).all() for u in make().apply(net64, D64).values())


def test_float32_adam_with_a_beta_near_one_takes_a_first_step_of_lr():
    """U_1 = lr * m_hat / (sqrt(v_hat) + eps) with m_hat = D and v_hat = D^2: |U_1| = lr |D| / (|D| + eps).

    float32 rounds beta2 = 1 - 1e-7 to 1 - 2^-23; the moment's weight 1 - beta2 and the bias
    correction 1 - beta2^1 must be the same number, else v_hat = (weight / correction) D^2 (here
    1.19 D^2, a first step 8% short). What is left is rounding: about ten float32 operations
    (the products and quotients of m, m_hat, v, v_hat, the square root, + eps, lr's own rounding)
    each off by at most eps32 / 2."""
    net, D = net_and_direction(np.float32)
    D = {k: np.where(d >= 0, 1.0, -1.0).astype(np.float32) * (1 + np.abs(d)) for k, d in D.items()}
    lr, eps = 0.03, 1e-8
    U = optim.Adam(lr, beta2=1 - 1e-7, eps=eps).update(D)
    for k in D:
        expected = lr * D[k].astype(float) / (np.abs(D[k].astype(float)) + eps)
        np.testing.assert_allclose(U[k], expected, rtol=10 * EPS32 / 2, atol=0)


# -- 3. the update in the network's dtype --------------------------------------------------------
def test_sgd_after_a_float32_update_steps_a_float64_network_in_float64():
    net, D = net_and_direction(np.float64)
    opt = optim.SGD(0.1)
    assert opt.update({k: d.astype(np.float32) for k, d in D.items()})["W1"].dtype == np.float32
    a, b = net.copy(), net.copy()
    U = opt.apply(a, D)
    assert all(u.dtype == np.float64 for u in U.values())
    b.step(D, 0.1)
    assert all(np.array_equal(a.params[k], b.params[k]) for k in D)     # the bits of net.step


@pytest.mark.parametrize("cls", [optim.Momentum, optim.Adam])
@pytest.mark.parametrize("made_in, used_in", [(np.float32, np.float64), (np.float64, np.float32)])
def test_a_state_made_in_another_dtype_refuses_the_network_until_reset(cls, made_in, used_in):
    first_net, first_D = net_and_direction(made_in)
    net, D = net_and_direction(used_in)
    for make_state in (lambda opt: opt.apply(first_net, first_D),
                       lambda opt: opt.update({k: d.astype(made_in) for k, d in first_D.items()})):
        opt = cls(0.1)
        make_state(opt)
        assert opt.dtype == made_in
        before = snapshot(net, opt)
        refused(lambda: opt.apply(net, D), ValueError, "net")
        assert snapshot(net, opt) == before
        opt.reset()
        U = opt.apply(net, D)
        assert opt.dtype == used_in and all(u.dtype == used_in for u in U.values())


def test_update_without_a_network_computes_in_the_states_dtype():
    _, D = net_and_direction(np.float64)
    opt = optim.Momentum(0.1)
    opt.update({k: d.astype(np.float32) for k, d in D.items()})
    assert all(u.dtype == np.float32 for u in opt.update(D).values())
