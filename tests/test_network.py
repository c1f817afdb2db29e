"""The MLP's interface and the mathematics of each piece, checked on real runs."""
import copy
import warnings

import numpy as np
import pytest

import mlp_ref as mr
from mlp_ref import activations


def test_interface_of_the_seed_network():
    net = mr.MLP([3, 4, 2], hidden="sigmoid", output="identity", init_std=0.1, seed=0)
    assert net.sizes == [3, 4, 2]
    assert {k: v.shape for k, v in net.params.items()} == {
        "W1": (3, 4), "b1": (4,), "W2": (4, 2), "b2": (2,)}
    assert list(net.params) == ["W1", "b1", "W2", "b2"]
    assert all(v.dtype == np.float64 for v in net.params.values())
    assert repr(net) == "MLP([3, 4, 2], hidden='sigmoid', output='identity')"
    assert net.n_params == 3 * 4 + 4 + 4 * 2 + 2


def test_repr_lists_mixed_hidden_activations():
    net = mr.MLP([2, 3, 3, 1], hidden=["tanh", "relu"])
    assert repr(net) == "MLP([2, 3, 3, 1], hidden=['tanh', 'relu'], output='identity')"
    assert net.activations == ["tanh", "relu", "identity"]


def test_initialisation_is_normal_with_init_std_for_weights_and_biases():
    net = mr.MLP([200, 300, 1], init_std=0.1, seed=5)
    w = net.params["W1"].ravel()
    b = net.params["b1"]
    # 60000 draws: the sample std is within 1% of 0.1 with overwhelming probability
    assert abs(w.std() / 0.1 - 1) < 0.01 and abs(w.mean()) < 0.002
    assert abs(b.std() / 0.1 - 1) < 0.15          # 300 draws
    assert np.all(mr.MLP([2, 3, 1], init_std=0.0).params["W1"] == 0.0)


def test_same_seed_same_bits_other_seed_other_bits():
    a, b, c = mr.MLP([3, 4, 2], seed=7), mr.MLP([3, 4, 2], seed=7), mr.MLP([3, 4, 2], seed=8)
    for k in a.params:
        assert a.params[k].tobytes() == b.params[k].tobytes()
    assert any(a.params[k].tobytes() != c.params[k].tobytes() for k in a.params)


def test_forward_record_holds_every_stage_and_matches_the_formula():
    net = mr.MLP([3, 5, 4, 2], hidden=["tanh", "sigmoid"], seed=2, init_std=0.7)
    X = np.random.default_rng(0).random((6, 3))
    rec = net.forward(X)
    assert list(rec.stages) == ["a0", "z1", "a1", "z2", "a2", "z3", "a3"]
    p = net.params
    z1 = X @ p["W1"] + p["b1"]
    a1 = np.tanh(z1)
    z2 = a1 @ p["W2"] + p["b2"]
    a2 = 1 / (1 + np.exp(-z2))
    out = a2 @ p["W3"] + p["b3"]
    np.testing.assert_allclose(rec.z[1], z1, rtol=1e-15, atol=0)
    np.testing.assert_allclose(rec.a[2], a2, rtol=1e-15, atol=0)
    np.testing.assert_allclose(rec.output, out, rtol=1e-14, atol=1e-16)
    assert np.array_equal(net(X), rec.output)


def test_backward_names_stages_in_backward_order_with_the_right_shapes():
    net = mr.MLP([3, 4, 2], seed=0)
    X = np.random.default_rng(0).random((8, 3))
    back = net.backward(net.forward(X), [0.0, -1.0])
    assert list(back.stages) == ["dout", "dz2", "dW2", "db2", "da1", "dz1", "dW1", "db1", "da0"]
    shapes = {"dout": (8, 2), "dz2": (8, 2), "dW2": (4, 2), "db2": (2,), "da1": (8, 4),
              "dz1": (8, 4), "dW1": (3, 4), "db1": (4,), "da0": (8, 3)}
    assert {k: v.shape for k, v in back.stages.items()} == shapes
    for k, g in back.grads.items():
        assert g.shape == net.params[k].shape
        assert g is back.stages["d" + k]


def test_backward_is_a_pure_function_of_the_record():
    net = mr.MLP([3, 4, 4, 2], hidden="relu", seed=3, init_std=0.5)
    X = np.random.default_rng(1).normal(size=(5, 3))
    G = np.random.default_rng(2).normal(size=(5, 2))
    rec = net.forward(X)
    first, second = net.backward(rec, G), net.backward(rec, G)
    for k in first.stages:
        assert np.array_equal(first.stages[k], second.stages[k])
    # and modifying the returned stages does not leak into the record or G
    first.stages["dout"][:] = 99.0
    assert np.array_equal(net.backward(rec, G).stages["dout"], G)


def test_vector_G_is_the_same_for_every_row():
    net = mr.MLP([3, 4, 2], seed=0)
    X = np.random.default_rng(0).random((8, 3))
    rec = net.forward(X)
    a = net.backward(rec, [0.0, -1.0])
    b = net.backward(rec, np.tile([0.0, -1.0], (8, 1)))
    for k in a.stages:
        assert np.array_equal(a.stages[k], b.stages[k])


def test_grads_are_the_sum_over_rows_of_per_sample_grads():
    net = mr.MLP([3, 4, 2], hidden="tanh", seed=0, init_std=0.5)
    X = np.random.default_rng(0).random((5, 3))
    G = np.random.default_rng(1).normal(size=(5, 2))
    total = net.gradient(X, G)
    parts = [net.gradient(X[i:i + 1], G[i:i + 1]) for i in range(5)]
    for k in total:
        np.testing.assert_allclose(total[k], sum(p[k] for p in parts), rtol=1e-13, atol=1e-15)


def test_step_is_theta_minus_lr_times_D_and_copy_is_independent():
    net = mr.MLP([3, 4, 2], seed=0)
    before = net.copy()
    D = {k: np.full_like(v, 2.0) for k, v in net.params.items()}
    net.step(D, 0.25)
    for k in net.params:
        assert np.array_equal(net.params[k], before.params[k] - 0.25 * 2.0)
    assert not np.array_equal(net.params["W1"], before.params["W1"])
    assert before.sizes == net.sizes and repr(before) == repr(net)


def test_float32_network_stays_float32():
    net = mr.MLP([3, 4, 2], seed=0, dtype=np.float32)
    X = np.random.default_rng(0).random((4, 3))
    rec = net.forward(X)
    assert rec.output.dtype == np.float32
    back = net.backward(rec, [0.0, -1.0])
    assert all(g.dtype == np.float32 for g in back.grads.values())
    net.step(back.grads, 0.1)
    assert all(v.dtype == np.float32 for v in net.params.values())


@pytest.mark.parametrize("name", ["sigmoid", "tanh", "relu", "identity"])
def test_activation_derivative_matches_finite_differences(name):
    act = activations.get(name)
    z = np.linspace(-4, 4, 81)
    z = z[np.abs(z) > 1e-3]                        # away from relu's kink
    h = 1e-6
    num = (act.f(z + h) - act.f(z - h)) / (2 * h)
    np.testing.assert_allclose(act.df(z, act.f(z)), num, rtol=1e-8, atol=1e-10)


def test_sigmoid_is_stable_for_huge_inputs():
    z = np.array([-1e4, -800.0, -50.0, 0.0, 50.0, 800.0, 1e4])
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        s = activations.sigmoid(z)
        t = activations.tanh(z)
    assert np.all(np.isfinite(s)) and np.all(np.isfinite(t))
    assert s[0] == 0.0 and s[-1] == 1.0 and s[3] == 0.5
    # symmetry sigma(-z) = 1 - sigma(z), to roundoff, where both are representable
    zz = np.linspace(-30, 30, 61)
    np.testing.assert_allclose(activations.sigmoid(-zz), 1 - activations.sigmoid(zz), atol=1e-16)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        s32 = activations.sigmoid(z.astype(np.float32))
    assert s32.dtype == np.float32 and np.all(np.isfinite(s32))


def test_unknown_activation_lists_the_known_ones():
    with pytest.raises(ValueError, match="hidden: unknown activation 'swish'; known: identity, relu, sigmoid, tanh"):
        mr.MLP([3, 4, 2], hidden="swish")
    with pytest.raises(ValueError, match="output: unknown activation"):
        mr.MLP([3, 4, 2], output="softmax")


def test_small_interface_details():
    assert repr(mr.MLP([2, 1], hidden="tanh")) == "MLP([2, 1], output='identity')"
    with pytest.raises(TypeError, match="dtype:"):
        mr.MLP([2, 1], dtype=None)
    with pytest.raises(TypeError, match="net: expected an MLP"):
        mr.gradcheck.check("not a net", np.zeros((1, 2)), [1.0])


# -- every stage its own array ----------------------------------------------------------------
def shares(a, b):
    return np.shares_memory(a, b)


@pytest.mark.parametrize("output", ["identity", "tanh"])
def test_no_stage_aliases_another_stage_the_record_X_or_G(output):
    net = mr.MLP([3, 4, 4, 2], hidden=["tanh", "relu"], output=output, seed=1, init_std=0.7)
    X = np.random.default_rng(0).normal(size=(5, 3))
    G = np.random.default_rng(1).normal(size=(5, 2))
    record = net.forward(X)
    back = net.backward(record, G)
    forward = list(record.stages.items())
    backward = list(back.stages.items())
    for i, (name, value) in enumerate(forward + backward):
        assert not shares(value, X) and not shares(value, G), name
        for other, value2 in (forward + backward)[i + 1:]:
            assert not shares(value, value2), (name, other)


def test_backward_never_writes_the_record_whatever_the_derivative_returns(monkeypatch):
    # an activation as a student adds one: f(z) = z^2 / 2, whose derivative is z itself, returned
    # as the very array it was given, the record's z_1
    square = activations.Activation("halfsquare", lambda z: z * z / 2, lambda z, a: z)
    monkeypatch.setitem(activations.ACTIVATIONS, "halfsquare", square)
    net = mr.MLP([3, 4, 2], hidden="halfsquare", seed=2, init_std=0.8)
    X = np.random.default_rng(0).normal(size=(6, 3))
    record = net.forward(X)
    kept = {k: v.copy() for k, v in record.stages.items()}
    first = net.backward(record, [0.0, -1.0])
    second = net.backward(record, [0.0, -1.0])
    assert all(np.array_equal(record.stages[k], v) for k, v in kept.items())
    assert all(np.array_equal(first.stages[k], second.stages[k]) for k in first.stages)
    assert np.array_equal(first.stages["dz1"], first.stages["da1"] * record.z[1])
    assert mr.gradcheck.check(net, X, [0.0, -1.0]).ok


def test_step_refuses_read_only_parameters_and_changes_nothing():
    net = mr.MLP([3, 4, 2], seed=0)
    before = {k: v.copy() for k, v in net.params.items()}
    net.params["W2"].flags.writeable = False           # as np.load(..., mmap_mode="r") gives
    D = {k: np.ones_like(v) for k, v in net.params.items()}
    with pytest.raises(ValueError, match=r"^net: parameters \['W2'\] are read-only"):
        net.step(D, 0.1)
    assert all(np.array_equal(net.params[k], before[k]) for k in before)


def test_step_refuses_an_update_that_overflows_and_changes_nothing():
    net = mr.MLP([3, 4, 2], seed=0)
    before = {k: v.copy() for k, v in net.params.items()}
    D = {k: np.full_like(v, 1e300) for k, v in net.params.items()}
    with pytest.raises(ValueError, match=r"^lr: theta - lr \* D would make W1"):
        net.step(D, 1e10)
    assert all(np.array_equal(net.params[k], before[k]) for k in before)


@pytest.mark.parametrize("build", [lambda: mr.MLP([3, 4, 2], seed=0),
                                   lambda: mr.SplitHeads([3, 4, 2], seed=0),
                                   lambda: mr.TwoTower([3, 4, 2], seed=0)],
                         ids=["MLP", "SplitHeads", "TwoTower"])
def test_copy_copy_is_a_deep_copy(build):
    """``copy.copy(net)`` shares no parameter with ``net``: stepping it leaves ``net`` as it was."""
    net = build()
    X = np.random.default_rng(0).normal(size=(5, 3))
    before = net(X)
    twin = copy.copy(net)
    assert all(twin.params[k] is not net.params[k] for k in net.params)
    twin.step(twin.gradient(X, [0.0, -1.0]), 0.5)
    assert np.array_equal(net(X), before) and not np.array_equal(twin(X), before)


def test_a_batch_whose_record_does_not_fit_in_memory_is_refused_naming_its_rows(monkeypatch):
    """The forward record holds z_l and a_l for every layer: n x 2 (4 + 2) float64 numbers for a
    3-4-2 network. With the machine's memory set just below that, the batch is refused before
    NumPy allocates anything; at exactly that, it runs."""
    from mlp_ref.boundary import checks
    net = mr.MLP([3, 4, 2], seed=0)
    X = np.zeros((1000, 3))
    need = 1000 * 2 * (4 + 2) * 8
    monkeypatch.setattr(checks, "machine_memory", lambda: need - 1)
    with pytest.raises(ValueError, match=r"^X: record for its rows needs .* memory") as refused:
        net.forward(X)
    assert refused.value.argument == "X"
    with pytest.raises(ValueError) as refused:
        mr.fixes.project(net, X[:1], [0.0, -1.0], keep_X=X)
    assert refused.value.argument == "keep_X"
    monkeypatch.setattr(checks, "machine_memory", lambda: need)
    assert net.forward(X).output.shape == (1000, 2)
