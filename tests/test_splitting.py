"""Layer splitting (freeze / var_list, separate heads, two towers): out1 unchanged bit for bit
on every input at every lr, and what out2 can still learn."""
import numpy as np

import mlp_ref as mr
from mlp_ref import fixes, losses
from mlp_ref.data import probe_inputs
from mlp_ref.setups import G_QUESTION

PROBE = probe_inputs()


def held(model, stepped, X):
    return (np.array_equal(stepped(X)[:, 0], model(X)[:, 0])
            and np.array_equal(stepped(PROBE)[:, 0], model(PROBE)[:, 0]))


def test_freezing_holds_out1_bit_for_bit_at_every_lr(setups):
    for net, X, _ in setups.values():
        D = fixes.freeze(net, X, G_QUESTION)
        for lr in (1e-3, 1e-2, 1e-1, 1.0, 10.0):
            stepped = net.copy().step(D, lr)
            assert held(net, stepped, X), lr
            assert np.all(stepped(PROBE)[:, 1] > net(PROBE)[:, 1])


def test_var_list_alone_moves_out1_when_G_has_an_out1_column(setups):
    net, X, Y = setups["seed"]
    _, G = losses.mse(net(X), Y)
    stepped = net.copy().step(fixes.freeze(net, X, G, trainable=["W2", "b2"]), 0.1)
    assert np.max(np.abs(stepped(X)[:, 0] - net(X)[:, 0])) > 0.1


def test_heads_and_towers_hold_out1_even_for_the_mse(setups):
    net, X, Y = setups["seed"]
    _, G = losses.mse(net(X), Y)
    heads = mr.SplitHeads.from_mlp(net)
    assert np.array_equal(heads(PROBE), net(PROBE))
    assert held(heads, heads.copy().step(fixes.freeze(heads, X, G, heads.head_keys(1)), 0.1), X)
    trunk_too = fixes.freeze(heads, X, G, heads.head_keys(1) + heads.trunk_keys)
    assert not held(heads, heads.copy().step(trunk_too, 0.1), X)
    towers = mr.TwoTower.from_mlp(net)
    assert np.max(np.abs(towers(PROBE) - net(PROBE))) < 1e-15
    assert held(towers, towers.copy().step(fixes.freeze(towers, X, G, towers.tower_keys(1)), 0.1), X)
    assert (towers.n_params, net.n_params) == (42, 26)
    visible = setups["visible"][0]
    assert (mr.TwoTower.from_mlp(visible).n_params, visible.n_params) == (706, 370)


def test_what_out2_can_still_learn(capacity):
    c = capacity
    assert len(c["steps"]) == 201 and c["n"] == 32 and c["target"] == "x1 x2 - x3"
    for name in ("freeze", "heads", "towers"):                  # out1 held exactly, everywhere
        assert c[name]["drift_batch"] == c[name]["drift_unseen"] == 0.0, name
    assert c["naive"]["drift_batch"] > 0.1                      # while naive training moves out1
    # separate heads train exactly what freezing the output layer trains: out2's 16 weights
    # and its bias, the same MSE curve bit for bit, about 6 times naive's final error
    assert np.array_equal(c["heads"]["mse"], c["freeze"]["mse"])
    assert c["freeze"]["n_moved"] == c["heads"]["n_moved"] == 17
    assert 5.0 < c["freeze"]["mse"][-1] / c["naive"]["mse"][-1] < 7.5
    # two towers give out2 a whole network: it learns as unconstrained training does ...
    np.testing.assert_allclose(c["towers"]["mse"], c["naive"]["mse"], rtol=1e-9)
    assert 1.8 < c["towers"]["n_params"] / c["naive"]["n_params"] < 2.0     # "almost twice"
    # ... and projection + restore lands in between, holding out1 on the batch only
    r = c["project+restore"]
    assert c["towers"]["mse"][-1] < r["mse"][-1] < c["freeze"]["mse"][-1]
    assert r["drift_batch"] <= 1e-12 and r["drift_unseen"] > 1e-3
