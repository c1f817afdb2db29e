"""Layer splitting as architecture: separate heads and separate towers, on real runs."""
import numpy as np
import pytest

import mlp_ref as mr
from mlp_ref import optim
from mlp_ref.architectures import SplitHeads, TowerForward, TwoTower
from mlp_ref.data import probe_inputs, seed_data
from mlp_ref.setups import G_QUESTION


def only(grads, trainable):
    """The direction that moves only the keys in ``trainable`` (the var_list recipe)."""
    return {k: (g if k in trainable else np.zeros_like(g)) for k, g in grads.items()}


def centred_difference(f, x, G, h=1e-3):
    """d sum(G * f()) / dx for every entry of the array x (perturbed in place, then restored).

    The five-point centred difference

        (8 (f(x+h) - f(x-h)) - (f(x+2h) - f(x-2h))) / (12 h),      error O(h^4),

    rather than the two-point (f(x+h) - f(x-h)) / 2h with h = 1e-5: that one's roundoff,
    about 1e-16 |O| / 1e-5 = 1e-11, is already 1e-7 relative on a gradient entry of 1e-4,
    which small networks do have. With h = 1e-3 the roundoff is ~1e-13 and the
    truncation ~h^4 = 1e-12. Entries are subtracted before summing, so outputs the
    perturbation does not reach cancel exactly.
    """
    num = np.zeros_like(x)
    for idx in np.ndindex(*x.shape):
        old = x[idx]
        outs = {}
        for s in (2, 1, -1, -2):
            x[idx] = old + s * h
            outs[s] = f()
        x[idx] = old
        num[idx] = np.sum(G * (8 * (outs[1] - outs[-1]) - (outs[2] - outs[-2]))) / (12 * h)
    return num


def numerical_param_grads(model, X, G):
    """d sum(G * model(X)) / d theta for every parameter, by centred differences."""
    return {key: centred_difference(lambda: model(X), p, G) for key, p in model.params.items()}


def rel_error(a, b):
    return float(np.max(np.abs(a - b) / np.maximum(1e-8, np.abs(a) + np.abs(b))))


MODELS = [
    lambda: SplitHeads([3, 5, 4, 3], heads=([0, 2], [1]), hidden=["tanh", "sigmoid"], init_std=0.6, seed=3),
    lambda: TwoTower([3, 5, 4, 3], groups=([2], [0, 1]), hidden=["tanh", "sigmoid"], init_std=0.6, seed=3),
]


# -- the interface and the gradients -----------------------------------------------------
def test_names_shapes_and_repr():
    s = SplitHeads([3, 4, 2])
    assert {k: v.shape for k, v in s.params.items()} == {
        "W1": (3, 4), "b1": (4,), "W2_head0": (4, 1), "b2_head0": (1,), "W2_head1": (4, 1), "b2_head1": (1,)}
    assert s.trunk_keys == ["W1", "b1"] and s.head_keys(1) == ["W2_head1", "b2_head1"]
    assert s.n_params == mr.MLP([3, 4, 2]).n_params == 26
    assert repr(s) == "SplitHeads([3, 4, 2], heads=[[0], [1]], hidden='sigmoid', output='identity')"
    t = TwoTower([3, 4, 2])
    assert list(t.params) == ["W1_tower0", "b1_tower0", "W2_tower0", "b2_tower0",
                              "W1_tower1", "b1_tower1", "W2_tower1", "b2_tower1"]
    assert t.params["W2_tower1"].shape == (4, 1)
    assert t.n_params == 2 * (12 + 4) + 2 * (4 + 1) == 42         # a trunk per tower
    assert t.tower_keys(0) == ["W1_tower0", "b1_tower0", "W2_tower0", "b2_tower0"]
    assert repr(t) == "TwoTower([3, 4, 2], groups=[[0], [1]], hidden='sigmoid', output='identity')"
    assert isinstance(t.forward(np.zeros((2, 3))), TowerForward)


@pytest.mark.parametrize("make", MODELS, ids=["SplitHeads", "TwoTower"])
def test_gradients_match_centred_differences(make):
    model = make()
    rng = np.random.default_rng(0)
    X = rng.normal(size=(6, 3))
    G = rng.normal(size=(6, 3))
    ours = model.gradient(X, G)
    num = numerical_param_grads(model, X, G)
    assert list(ours) == list(model.params)
    for key in model.params:
        assert ours[key].shape == model.params[key].shape
        assert rel_error(ours[key], num[key]) < 1e-7, key


@pytest.mark.parametrize("make", MODELS, ids=["SplitHeads", "TwoTower"])
def test_input_gradient_sums_over_the_fork(make):
    # dL/dX of L = sum(G * O): the model's da0 against centred differences in X
    model = make()
    rng = np.random.default_rng(1)
    X = rng.normal(size=(4, 3))
    G = rng.normal(size=(4, 3))
    da0 = model.backward(model.forward(X), G).stages["da0"]
    num = centred_difference(lambda: model(X), X, G)
    assert rel_error(da0, num) < 1e-7


def test_split_heads_is_the_mlp_to_the_last_bit():
    net = mr.MLP([3, 4, 2], seed=0)
    X, _ = seed_data()
    P = probe_inputs()
    for model in (SplitHeads.from_mlp(net), SplitHeads([3, 4, 2], seed=0)):
        assert np.array_equal(model(X), net(X)) and np.array_equal(model(P), net(P))
        g, g_net = model.gradient(X, G_QUESTION), net.gradient(X, G_QUESTION)
        assert np.array_equal(g["W1"], g_net["W1"]) and np.array_equal(g["b1"], g_net["b1"])
        assert np.array_equal(g["W2_head1"], g_net["W2"][:, [1]])
        assert np.array_equal(g["b2_head0"], g_net["b2"][[0]])
    # and back again
    back = SplitHeads.from_mlp(net).to_mlp()
    assert all(np.array_equal(back.params[k], net.params[k]) for k in net.params)
    # heads may hold several columns, in any order
    net3 = mr.MLP([3, 4, 3], seed=1)
    split = SplitHeads.from_mlp(net3, heads=([2, 0], [1]))
    assert np.array_equal(split.params["W2_head0"], net3.params["W2"][:, [2, 0]])
    assert np.array_equal(split(P), net3(P))


def test_towers_start_as_the_mlp_up_to_rounding():
    net = mr.MLP([3, 4, 2], seed=0)
    P = probe_inputs()
    for model in (TwoTower.from_mlp(net), TwoTower([3, 4, 2], seed=0)):
        # one output column per product instead of two: the last bit may differ
        np.testing.assert_allclose(model(P), net(P), rtol=1e-15, atol=1e-16)
    assert np.array_equal(TwoTower.from_mlp(net).tower(1)(P), TwoTower([3, 4, 2]).tower(1)(P))


def test_step_and_copy():
    model = SplitHeads([3, 4, 2])
    D = {k: np.ones_like(v) for k, v in model.params.items()}
    twin = model.copy()
    model.step(D, 0.25)
    assert all(np.array_equal(model.params[k], twin.params[k] - 0.25) for k in D)
    towers = TwoTower([3, 4, 2])
    twin = towers.copy()
    towers.step({k: np.ones_like(v) for k, v in towers.params.items()}, 0.5)
    assert all(np.array_equal(towers.params[k], twin.params[k] - 0.5) for k in towers.params)


# -- the point: out1 does not move, to the last bit ---------------------------------------
@pytest.mark.parametrize("lr", [1e-3, 1e-1, 10.0])
def test_training_only_head1_leaves_out1_bit_identical(lr):
    X, _ = seed_data()
    P = probe_inputs()
    model = SplitHeads([3, 4, 2], seed=0)
    before_X, before_P = model(X), model(P)
    model.step(only(model.gradient(X, G_QUESTION), model.head_keys(1)), lr)
    after_X, after_P = model(X), model(P)
    assert np.array_equal(after_X[:, 0], before_X[:, 0])
    assert np.array_equal(after_P[:, 0], before_P[:, 0])
    # out2 is linear in head 1: it rises by lr (a_i . sum_j a_j + n) > 0 on every input
    assert np.all(after_X[:, 1] > before_X[:, 1]) and np.all(after_P[:, 1] > before_P[:, 1])


@pytest.mark.parametrize("lr", [1e-3, 1e-1, 10.0])
def test_training_all_of_tower1_leaves_out1_bit_identical(lr):
    X, _ = seed_data()
    P = probe_inputs()
    model = TwoTower([3, 4, 2], seed=0)
    before_X, before_P = model(X), model(P)
    grads = model.gradient(X, G_QUESTION)
    assert all(np.all(grads[k] == 0) for k in model.tower_keys(0))   # G's column 1 is zero
    model.step(only(grads, model.tower_keys(1)), lr)                  # trunk of tower 1 included
    after_X, after_P = model(X), model(P)
    assert np.array_equal(after_X[:, 0], before_X[:, 0])
    assert np.array_equal(after_P[:, 0], before_P[:, 0])
    assert np.mean(after_X[:, 1]) > np.mean(before_X[:, 1])


@pytest.mark.parametrize("make_opt", [lambda: optim.Momentum(0.5), lambda: optim.Adam(0.05)],
                         ids=["Momentum", "Adam"])
def test_freezing_survives_any_coordinate_wise_optimizer(make_opt):
    # unlike a projection, a zero on a frozen key stays zero through momentum and Adam:
    # v = beta v + 0 stays 0, and Adam's U = lr 0 / (0 + eps) = 0 exactly
    X, _ = seed_data()
    P = probe_inputs()
    for model, trainable in ((SplitHeads([3, 4, 2]), SplitHeads([3, 4, 2]).head_keys(1)),
                             (TwoTower([3, 4, 2]), TwoTower([3, 4, 2]).tower_keys(1))):
        opt = make_opt()
        before = model(P)
        for _ in range(5):
            opt.apply(model, only(model.gradient(X, G_QUESTION), trainable))
        assert np.array_equal(model(P)[:, 0], before[:, 0])
        assert np.mean(model(P)[:, 1]) > np.mean(before[:, 1])


def test_moving_the_shared_trunk_moves_out1():
    # the contrast: the same step on the split model, trunk included, drifts out1
    X, _ = seed_data()
    model = SplitHeads([3, 4, 2], seed=0)
    before = model(X)
    model.step(only(model.gradient(X, G_QUESTION), model.trunk_keys + model.head_keys(1)), 0.1)
    assert np.max(np.abs(model(X)[:, 0] - before[:, 0])) > 1e-6


# -- what each architecture can still learn for out2 ------------------------------------
def fit_out2(model, X, Y, trainable, lr=0.5, steps=300):
    """SGD on the MSE of out2 only, moving only ``trainable``; returns the final out2 MSE."""
    for _ in range(steps):
        O = model(X)
        G = np.zeros_like(O)
        G[:, 1] = 2.0 * (O[:, 1] - Y[:, 1]) / len(X)          # d mean((O2 - Y2)^2) / dO
        model.step(only(model.gradient(X, G), trainable), lr)
    return float(np.mean((model(X)[:, 1] - Y[:, 1]) ** 2))


def test_towers_fit_out2_better_than_the_frozen_trunks_head():
    X, Y = seed_data()
    net = mr.MLP([3, 4, 2], seed=0)
    start = float(np.mean((net(X)[:, 1] - Y[:, 1]) ** 2))
    heads, towers, free = SplitHeads.from_mlp(net), TwoTower.from_mlp(net), net.copy()
    head_only = fit_out2(heads, X, Y, heads.head_keys(1))
    tower = fit_out2(towers, X, Y, towers.tower_keys(1))
    unconstrained = fit_out2(free, X, Y, list(free.params))
    # measured: start 1.27, head only 0.178, tower 0.0244
    assert tower < head_only < start
    assert tower < 0.2 * head_only
    # tower 1 follows the unconstrained trajectory of out2 (out2 depends on exactly the
    # same parameters in both), but out1 stays put in the towers and drifts in the MLP
    assert abs(tower - unconstrained) < 1e-10
    assert np.array_equal(heads(X)[:, 0], SplitHeads.from_mlp(net)(X)[:, 0])
    assert np.array_equal(towers(X)[:, 0], TwoTower.from_mlp(net)(X)[:, 0])
    assert np.max(np.abs(free(X)[:, 0] - net(X)[:, 0])) > 1e-2


# -- arguments -----------------------------------------------------------------------------
@pytest.mark.parametrize("cls, name", [(SplitHeads, "heads"), (TwoTower, "groups")])
def test_groups_must_partition_the_outputs(cls, name):
    sizes = [3, 4, 3]
    cases = [
        (([0], [1]), ValueError, rf"^{name}: output\(s\) \[2\] are in no group"),
        (([0, 1], [1, 2]), ValueError, rf"^{name}: output 1 is in groups 0 and 1"),
        (([0, 0], [1, 2]), ValueError, rf"^{name}: output 0 is twice in group 0"),
        (([0, 1, 2], []), ValueError, rf"^{name}\[1\]: the group is empty"),
        (([0, 1], [3]), ValueError, rf"^{name}\[1\]: output index 3 is out of range for 3 outputs"),
        (([0, 1], [-1]), ValueError, rf"^{name}\[1\]: output index -1 is out of range"),
        (([0, 1], [2.0]), TypeError, rf"^{name}\[1\]: expected whole numbers"),
        (([0, 1], 2), TypeError, rf"^{name}\[1\]: expected a list of output indices"),
        ((), ValueError, rf"^{name}: expected at least one group"),
        ("01", TypeError, rf"^{name}: expected a list of groups"),
    ]
    for groups, exc, msg in cases:
        with pytest.raises(exc, match=msg):
            cls(sizes, groups)
    cls(sizes, ([2], [0, 1]))                  # fine: any partition, in any order


def test_bad_arguments_are_named():
    with pytest.raises(ValueError, match=r"^sizes: expected at least two"):
        SplitHeads([3])
    with pytest.raises(ValueError, match=r"^hidden: unknown activation"):
        TwoTower([3, 4, 2], hidden="swish")
    with pytest.raises(TypeError, match=r"^net: expected an MLP"):
        SplitHeads.from_mlp("net")
    with pytest.raises(TypeError, match=r"^net: expected an MLP"):
        TwoTower.from_mlp(SplitHeads([3, 4, 2]))
    model = SplitHeads([3, 4, 2])
    with pytest.raises(ValueError, match=r"^D: missing keys \['b2_head1'\]"):
        model.step({k: v for k, v in model.params.items() if k != "b2_head1"}, 0.1)
    with pytest.raises(ValueError, match=r"^lr: "):
        model.step(model.params, -1.0)
    with pytest.raises(ValueError, match=r"^j: expected a head index 0 \.\. 1, got 2"):
        model.head_keys(2)
    with pytest.raises(ValueError, match=r"^X: expected 3 input columns"):
        model(np.zeros((2, 4)))
    towers = TwoTower([3, 4, 2])
    with pytest.raises(ValueError, match=r"^G: expected shape \(2, 2\) or \(2,\)"):
        towers.backward(towers.forward(np.zeros((2, 3))), np.zeros(3))
    with pytest.raises(TypeError, match=r"^record: expected the TowerForward record"):
        towers.backward(model.forward(np.zeros((2, 3))), G_QUESTION)
    with pytest.raises(ValueError, match=r"^k: expected a tower index"):
        towers.tower_keys(-1)


# -- one model contract: every rule on every model --------------------------------------------
CONTRACT_MODELS = {
    "MLP": lambda: mr.MLP([3, 5, 4, 3], hidden=["tanh", "sigmoid"], init_std=0.6, seed=3),
    "SplitHeads": lambda: SplitHeads([3, 5, 4, 3], heads=([0, 2], [1]), hidden=["tanh", "sigmoid"],
                                     init_std=0.6, seed=3),
    "TwoTower": lambda: TwoTower([3, 5, 4, 3], groups=([2], [0, 1]), hidden=["tanh", "sigmoid"],
                                 init_std=0.6, seed=3),
}
G3 = np.array([0.0, -1.0, 0.5])           # out1 (index 0) not asked to move


def dense_J(model, X, keep, h=1e-3):
    """The Jacobian of outputs ``keep`` on X by five-point centred differences (as
    ``centred_difference``), shape (n q, P), rows sample-major, columns in params order."""
    columns = []
    for p in model.params.values():
        for idx in np.ndindex(*p.shape):
            old, outs = p[idx], {}
            for s in (2, 1, -1, -2):
                p[idx] = old + s * h
                outs[s] = model(X)[:, keep]
            p[idx] = old
            columns.append(((8 * (outs[1] - outs[-1]) - (outs[2] - outs[-2])) / (12 * h)).ravel())
    return np.stack(columns, axis=1)


@pytest.mark.parametrize("tier", ["fixes", "fast"])
@pytest.mark.parametrize("name", list(CONTRACT_MODELS))
def test_every_rule_runs_on_every_model(name, tier):
    from mlp_ref import fast, fixes
    rules = fixes if tier == "fixes" else fast
    model = CONTRACT_MODELS[name]()
    X, _ = seed_data()
    X = X[:5]
    unseen = probe_inputs(6)
    flat = mr.jacobian.flatten
    g = model.gradient(X, G3)
    assert rel_error(flat(fixes.naive(model, X, G3)), flat(g)) == 0.0
    masked = fixes.masked(model, X, np.ones((5, 3)), mask=[0, 1, 1])
    assert rel_error(flat(masked), flat(model.gradient(X, np.tile([0.0, 1.0, 1.0], (5, 1))))) == 0.0
    # freeze: the output layer only; out1 does not move at all, anywhere
    frozen = fixes.freeze(model, X, G3)
    moved = model.copy().step(frozen, 0.5)
    assert np.all(moved(unseen)[:, 0] == model(unseen)[:, 0])
    assert not np.all(moved(unseen)[:, 1] == model(unseen)[:, 1])
    # project (through the tier under test): J1 D = 0, and D = g - J^+ J g with J by differences
    J = dense_J(model, X, [0, 2])
    D = rules.project(model, X, G3, keep=[0, 2])
    assert list(D) == list(model.params)
    assert np.abs(J @ flat(D)).max() <= 1e-9 * np.abs(J @ flat(g)).max()
    assert np.linalg.norm(flat(D) - (flat(g) - np.linalg.pinv(J) @ (J @ flat(g)))) <= 1e-7 * np.linalg.norm(flat(g))
    dense = flat(fixes.project_dense(model, X, G3, keep=[0, 2]))
    assert np.linalg.norm(dense - flat(D)) <= 1e-12 * np.linalg.norm(flat(g))
    N = rules.nullspace(model, g, unseen, keep=[0])
    J_unseen = dense_J(model, unseen, [0])
    assert np.abs(J_unseen @ flat(N)).max() <= 1e-9 * np.abs(J_unseen @ flat(g)).max()
    # restore: back onto out1 = ref after a projected step
    ref = model(X)[:, [0, 2]]
    stepped = model.copy().step(D, 0.3)
    report = rules.restore(stepped, X, ref, keep=[0, 2])
    assert report.converged and np.abs(stepped(X)[:, [0, 2]] - ref).max() <= 1e-12
    # penalty: the first step is the naive one; span: out1 held on keep_X at a large step
    assert rel_error(flat(fixes.penalty(model, X, G3, keep=[0], lam=3.0)), flat(g)) == 0.0
    spanned = model.copy().step(fixes.span_project(model, X, G3, keep=[0], keep_X=unseen[:2]), 1.0)
    assert np.abs(spanned(unseen[:2])[:, 0] - model(unseen[:2])[:, 0]).max() <= 1e-12


@pytest.mark.parametrize("rule", ["naive", "masked", "freeze", "project", "penalty", "span_project",
                                  "nullspace", "restore"])
def test_a_rule_refuses_what_is_not_a_model_naming_net(rule):
    from mlp_ref import fixes
    X, _ = seed_data()
    args = {"masked": (X, G_QUESTION, [0, 1]), "nullspace": ({}, X), "restore": (X, np.zeros(8))}
    with pytest.raises(TypeError, match="^net: "):
        getattr(fixes, rule)(object(), *args.get(rule, (X, G_QUESTION)))
