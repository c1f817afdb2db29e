"""Masking the loss, and the accepted answer's script replayed: the mask changes nothing when G
already ignores out1; the script holds out1 only through var_list; a mask is for missing labels."""
import numpy as np
import pytest

from mlp_ref import fixes, losses
from mlp_ref.measurements import answer_replay
from mlp_ref.measurements.rules import MASK
from mlp_ref.setups import G_QUESTION, OUT1, OUT2


def test_the_masked_loss_zeroes_out1s_column_and_keeps_out2s(setups):
    net, X, Y = setups["seed"]
    _, G = losses.mse(net(X), Y)
    _, G_masked = losses.masked_mse(net(X), Y, MASK)
    assert np.all(G_masked[:, 0] == 0.0) and np.array_equal(G_masked[:, 1], G[:, 1])
    assert np.all(G[:, 0] != 0.0)
    masked, naive = fixes.masked(net, X, G, MASK), fixes.naive(net, X, G)
    assert not all(np.array_equal(masked[k], naive[k]) for k in naive)


def test_with_the_questions_G_the_mask_is_the_naive_step_bit_for_bit(setups):
    for net, X, _ in setups.values():
        naive = fixes.naive(net, X, G_QUESTION)
        masked = fixes.masked(net, X, G_QUESTION, MASK)
        assert all(np.array_equal(naive[k], masked[k]) for k in naive)


@pytest.fixture(scope="module")
def replay():
    return {r["op"]: r for r in answer_replay.replay_answer()}


def test_the_masked_loss_with_var_list_holds_out1_bit_for_bit(replay):
    assert np.all(replay["train_op2"]["d_out1"] == 0.0)
    assert np.array_equal(replay["train_op2"]["hidden"], replay["initial"]["hidden"])


def test_the_other_ops_move_out1_and_the_mask_alone_does_not_hold_it(replay):
    for op in ("train_op12", "train_op_all", "mask, all variables"):
        assert np.max(np.abs(replay[op]["d_out1"])) > 1e-6, op
    unrun = replay["mask, all variables"]
    assert not np.array_equal(unrun["hidden"], replay["initial"]["hidden"])
    assert 1.5e-5 < np.max(np.abs(unrun["d_out1"])) < 3e-5        # "about 2e-5"


def test_each_change_of_out1_is_measured_from_the_state_it_says(replay):
    # the ops run one after another, the unrun one from the start: replay prints both changes
    assert [replay[op]["after"] for op in ("train_op2", "train_op12", "train_op_all")] == [
        "initial", "train_op2", "train_op12"]
    assert replay["mask, all variables"]["after"] == "initial"
    out1 = {op: r["out"][:, OUT1] for op, r in replay.items()}
    for op, r in replay.items():
        if op != "initial":
            assert np.array_equal(r["d_out1"], out1[op] - out1[r["after"]]), op
            assert np.array_equal(r["d_out1_start"], out1[op] - out1["initial"]), op
    # train_op2 moved nothing, so train_op12's change since the start is its own, bit for bit;
    # train_op_all's since the start is the sum of the two that moved out1
    assert np.array_equal(replay["train_op12"]["d_out1_start"], replay["train_op12"]["d_out1"])
    total = replay["train_op_all"]["d_out1_start"]
    np.testing.assert_allclose(total, replay["train_op12"]["d_out1"] + replay["train_op_all"]["d_out1"],
                               rtol=0, atol=1e-15)
    assert np.max(np.abs(total)) > np.max(np.abs(replay["train_op_all"]["d_out1"]))


def test_out1_is_the_column_keep_out1_holds_and_G_leaves_alone(setups):
    assert (OUT1, OUT2) == (0, 1) and G_QUESTION[OUT1] == 0.0 and G_QUESTION[OUT2] < 0
    assert MASK[OUT1] == 0.0 and MASK[OUT2] == 1.0           # the answer's mask hides out1
    net, X, _ = setups["visible"]
    moved = {name: net.copy().step(D, 1e-3)(X) - net(X) for name, D in (
        ("naive", fixes.naive(net, X, G_QUESTION)),
        ("held", fixes.project(net, X, G_QUESTION, keep=[OUT1])))}
    # keep=[OUT1] holds column OUT1 (to O(lr^2): over 100 times less than naive) and column OUT2 rises
    assert np.max(np.abs(moved["held"][:, OUT1])) < 0.01 * np.max(np.abs(moved["naive"][:, OUT1]))
    assert np.all(moved["held"][:, OUT2] > 0)


def test_the_losses_decrease_as_the_script_says(replay):
    order = ["initial", "train_op2", "train_op12", "train_op_all"]
    for a, b in zip(order, order[1:]):
        assert replay[b]["loss"] < replay[a]["loss"]
        assert replay[b]["loss2"] < replay[a]["loss2"]


def test_a_mask_makes_the_gradient_blind_to_missing_labels(setups):
    net, X, Y = setups["seed"]
    out = net(X)
    missing = np.ones_like(Y)
    missing[[2, 5], 0] = 0.0
    filled = []
    for value in (0.0, 1000.0):
        y = Y.copy()
        y[[2, 5], 0] = value
        filled.append((y, *losses.masked_mse(out, y, missing)))
    (_, l0, G0), (y_junk, l1, G1) = filled
    g0, g1 = net.gradient(X, G0), net.gradient(X, G1)
    assert all(np.array_equal(g0[k], g1[k]) for k in g0)         # bit for bit
    assert l1 - l0 == pytest.approx(2 * 1000.0 ** 2 / Y.size)    # a constant apart
    norm = lambda g: np.sqrt(sum(np.sum(v ** 2) for v in g.values()))     # noqa: E731
    assert norm(net.gradient(X, losses.mse(out, y_junk)[1])) > 100 * norm(g0)   # "dominate"
    change = np.abs(net.copy().step(g0, 0.1)(X)[[2, 5], 0] - out[[2, 5], 0])
    assert np.all((0.15 < change) & (change < 0.25))              # "by about 0.2"
