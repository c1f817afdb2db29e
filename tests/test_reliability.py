"""Numerical care: nothing non-finite passes silently, a rejected step changes nothing, every
stage has its shape on random architectures, and seeds fix every bit (no global random state).
Bad input is tested in test_bad_input.py, files in test_saving.py."""
import re
import warnings
from pathlib import Path

import numpy as np
import pytest

import mlp_ref as mr
from mlp_ref import activations

ACTS = ["sigmoid", "tanh", "relu", "identity"]

from _nets import X5, direction, net342, param_bytes, same_network  # noqa: E402


# -- step is atomic --------------------------------------------------------------------
@pytest.mark.parametrize("bad_last", ["nan", "inf", "shape", "str", "overflow"])
def test_a_step_rejected_by_its_last_key_changes_nothing(bad_last):
    net = mr.MLP([3, 5, 4, 2], hidden=["tanh", "relu"], seed=4)
    last = list(net.params)[-1]                      # b3: checked after W1 .. W3 were fine
    shape = net.params[last].shape
    bad, lr = {"nan": (np.full(shape, np.nan), 0.1), "inf": (np.full(shape, np.inf), 0.1),
               "shape": (np.ones(shape + (1,)), 0.1), "str": ("ones", 0.1),
               "overflow": (np.full(shape, 1e300), 1e100)}[bad_last]
    D = direction(net, **{last: bad})
    assert list(D)[-1] == last
    before = param_bytes(net)
    held = net.params["W1"]
    with pytest.raises((ValueError, TypeError), match=rf"^(D\['{last}'\]|lr): "):
        net.step(D, lr)
    assert param_bytes(net) == before
    # and a good step then updates the very same arrays in place
    net.step(direction(net), 0.5)
    assert net.params["W1"] is held and param_bytes(net) != before


# -- numerical care ----------------------------------------------------------------------
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("name", ACTS)
def test_activations_never_warn_for_any_finite_input(name, dtype):
    fi = np.finfo(dtype)
    z = np.array([-fi.max, -1e308, -1e4, -745.2, -104, -88.7, -1.0, -fi.tiny, -fi.smallest_subnormal,
                  0.0, fi.smallest_subnormal, fi.tiny, 1.0, 88.7, 104, 745.2, 1e4, 1e308, fi.max])
    with np.errstate(over="ignore"):                 # 1e308 itself saturates to inf in float32
        z = np.clip(z, -fi.max, fi.max).astype(dtype)
    act = activations.get(name)
    # underflow is the correctly rounded answer, left to the caller's errstate (the network's
    # own passes ignore it: the test below); nothing else may be flagged
    with warnings.catch_warnings(), np.errstate(all="raise", under="ignore"):
        warnings.simplefilter("error")
        a = act.f(z)
        d = act.df(z, a)
    assert a.dtype == dtype and d.dtype == dtype
    assert np.isfinite(a).all() and np.isfinite(d).all()
    if name in ("sigmoid", "tanh"):
        assert a[0] == (0.0 if name == "sigmoid" else -1.0) and a[-1] == 1.0
        assert np.all(np.diff(a) >= 0)               # monotone, also in the saturated tails


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("name", ["sigmoid", "tanh", "relu"])
def test_forward_and_backward_flag_nothing_under_errstate_raise_for_tiny_and_huge_units(name, dtype):
    """A student's ``np.errstate(all="raise")`` meets no underflow from inside the network: a
    hidden layer whose pre-activations span subnormal to saturated values (identity output, so
    the output stays finite) passes forward and backward without a FloatingPointError."""
    fi = np.finfo(dtype)
    z = np.array([-1e30, -745.2, -104, -1.0, -fi.tiny, -fi.smallest_subnormal, 0.0,
                  fi.smallest_subnormal, fi.tiny, 1.0, 104, 745.2, 1e30], dtype=dtype)
    net = mr.MLP([1, len(z), 1], hidden=name, dtype=dtype, init_std=0.0)
    net.params["W1"][0] = z                       # x = 1: z1 = W1, every kind of unit at once
    net.params["W2"][:, 0] = dtype(1e-3)
    with warnings.catch_warnings(), np.errstate(all="raise"):
        warnings.simplefilter("error")
        record = net.forward(np.ones((1, 1), dtype))
        back = net.backward(record, [1.0])
    assert np.isfinite(back.grads["W1"]).all()


def test_nan_in_a_parameter_is_named_by_forward():
    net = net342()
    net.params["W1"][1, 2] = np.nan
    net.params["b2"][0] = np.inf
    with pytest.raises(ValueError, match=r"^net: forward's output is not finite because parameters "
                                         r"W1 \(1 NaN\), b2 \(1 inf\) hold NaN/inf"):
        net.forward(X5)


def test_finite_but_huge_parameters_are_named_by_forward():
    net = mr.MLP([3, 4, 2], hidden="relu", seed=0)
    net.params["W1"][:] = 1e200
    net.params["W2"][:] = 1e200
    with np.errstate(over="ignore", invalid="ignore"), \
            pytest.raises(ValueError, match=r"^net: forward's output is not finite: stage z2 overflowed float64 "
                                            r"\(max \|a1\| = .*, max \|W2\| = 1e\+200\)"):
        net.forward(X5 + 1.0)


def test_saturated_hidden_units_still_give_a_finite_output():
    # sigmoid/tanh absorb any finite pre-activation: huge weights are not an error there
    net = mr.MLP([3, 4, 2], hidden="tanh", seed=0)
    net.params["W1"] *= 1e300
    with warnings.catch_warnings(), np.errstate(all="raise"):
        warnings.simplefilter("error")
        out = net(X5 + 1.0)
    assert np.isfinite(out).all()


def test_an_overflow_behind_a_saturated_unit_is_still_refused_and_named():
    # backward reads only the gradients and da0 when all is well: an inf in da1 must still
    # reach them where tanh'(z1) is exactly 0 (a1 = 1.0), through inf * 0 = NaN in dz1 and db1
    net = mr.MLP([1, 1, 1], hidden="tanh", output="identity")
    net.params.update(W1=np.array([[1.0]]), b1=np.zeros(1), W2=np.array([[1e308]]), b2=np.zeros(1))
    record = net.forward([[1000.0]])
    assert record.a[1][0, 0] == 1.0 and np.isfinite(record.output).all()
    with np.errstate(over="ignore", invalid="ignore"), \
            pytest.raises(ValueError, match=r"^G: expected values .* which makes stage da1 overflow"):
        net.backward(record, [[10.0]])
    assert net.backward(record, [[1.0]]).grads["W2"][0, 0] == 1.0      # 1e308 itself is fine


# -- properties over many random architectures -------------------------------------------
def random_net(seed):
    rng = np.random.default_rng(seed)
    depth = int(rng.integers(1, 5))
    sizes = [int(v) for v in rng.integers(1, 7, size=depth + 1)]
    hidden = [ACTS[int(i)] for i in rng.integers(0, 4, size=depth - 1)]
    net = mr.MLP(sizes, hidden=hidden, output=ACTS[int(rng.integers(0, 4))],
                 init_std=float(rng.uniform(0.0, 2.0)), seed=seed,
                 dtype=[np.float64, np.float32][seed % 2])
    X = rng.normal(size=(int(rng.integers(1, 7)), sizes[0]))
    G = rng.normal(size=(len(X), sizes[-1]))
    return net, X, G


SEEDS = range(20)


@pytest.mark.parametrize("seed", SEEDS)
def test_shapes_of_every_stage(seed):
    net, X, G = random_net(seed)
    n, L = len(X), net.depth
    rec = net.forward(X)
    assert rec.output.shape == (n, net.sizes[-1]) and rec.output.dtype == net.dtype
    for l in range(L + 1):
        assert rec.a[l].shape == (n, net.sizes[l])
    back = net.backward(rec, G)
    assert {k: (g.shape, g.dtype) for k, g in back.grads.items()} == \
           {k: (p.shape, p.dtype) for k, p in net.params.items()}
    assert back.stages["da0"].shape == X.shape
    assert net.backward(rec, G[0]).stages["dout"].shape == (n, net.sizes[-1])


@pytest.mark.parametrize("seed", SEEDS)
def test_round_trip_of_random_networks(seed, tmp_path):
    net, X, G = random_net(seed)
    net.step(net.gradient(X, G), 1e-3)
    net.save(tmp_path / "net.npz")
    same_network(net, mr.MLP.load(tmp_path / "net.npz"))


@pytest.mark.parametrize("seed", SEEDS)
def test_copy_is_independent_and_seeds_fix_every_bit(seed):
    net, X, G = random_net(seed)
    twin, _, _ = random_net(seed)
    assert param_bytes(net) == param_bytes(twin)     # same seed, same bits
    before = param_bytes(net)
    copy = net.copy()
    same_network(net, copy)
    copy.step(copy.gradient(X, G) | {"W1": np.ones_like(net.params["W1"])}, 0.5)
    copy.params["b1"][...] = 7.0
    copy.sizes.append(99)
    assert param_bytes(net) == before and net.sizes == twin.sizes
    assert not any(copy.params[k] is net.params[k] for k in net.params)


# -- reproducibility: no global random state ---------------------------------------------
LEGACY_RNG = re.compile(
    r"np\.random\.(?!default_rng\b|Generator\b|SeedSequence\b|PCG64\b|BitGenerator\b)\w+"
    r"|numpy\.random\.(?!default_rng\b|Generator\b|SeedSequence\b|PCG64\b|BitGenerator\b)\w+"
    r"|from numpy\.random import|^\s*(import random\b|from random import)", re.MULTILINE)


def test_the_package_uses_no_global_random_state():
    package = Path(mr.__file__).parent
    sources = sorted(package.rglob("*.py"))
    assert len(sources) >= 8
    offenders = [f"{p.name}: {m.group(0)}" for p in sources
                 for m in LEGACY_RNG.finditer(p.read_text())]
    assert offenders == []
    # the scanner does catch what it is meant to catch
    assert LEGACY_RNG.search("np.random.seed(0)") and LEGACY_RNG.search("x = np.random.rand(3)")
    assert LEGACY_RNG.search("import random\n") and not LEGACY_RNG.search("np.random.default_rng(0)")


def test_a_D_too_large_for_float32_is_named_without_a_warning():
    net = mr.MLP([3, 4, 2], dtype=np.float32, seed=0)
    before = param_bytes(net)
    D = {k: np.full(v.shape, 1e300) for k, v in net.params.items()}     # float64, finite
    with warnings.catch_warnings():
        warnings.simplefilter("error")                                   # no RuntimeWarning on the cast
        with pytest.raises(ValueError, match=r"^D\['W1'\]: expected values that fit in float32"):
            net.step(D, 0.1)
    assert param_bytes(net) == before


# -- restore is all or nothing -------------------------------------------------------------
def test_a_restore_stopped_after_its_first_step_puts_back_every_bit(monkeypatch):
    from mlp_ref import fixes, jacobian
    from mlp_ref.setups import seed_setup

    net, X, _ = seed_setup()
    ref = net(X)[:, 0] + 1e-3                    # reachable: restore would take several steps
    held = dict(net.params)
    before = param_bytes(net)
    calls = []
    real_at = jacobian.at                        # the Jacobian of restore's each step

    def at_then_stop(*args, **kw):
        calls.append(1)
        if len(calls) == 2:                      # after one step changed the parameters
            raise KeyboardInterrupt
        return real_at(*args, **kw)

    monkeypatch.setattr(jacobian, "at", at_then_stop)
    with pytest.raises(KeyboardInterrupt):
        fixes.restore(net, X, ref)
    assert len(calls) == 2 and param_bytes(net) == before
    assert all(net.params[k] is held[k] for k in held)   # the same arrays, put back in place
    monkeypatch.undo()
    net.params["b2"].flags.writeable = False
    with pytest.raises(ValueError, match=r"^net: parameters \['b2'\] are read-only"):
        fixes.restore(net, X, ref)
    assert param_bytes(net) == before
