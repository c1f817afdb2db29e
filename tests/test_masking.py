"""Masking the loss, and the accepted answer's script replayed: the mask changes nothing when G
already ignores out1; the script holds out1 only through var_list; a mask is for missing labels."""
import numpy as np
import pytest

from mlp_ref import fixes, losses
from mlp_ref.measurements import answer_replay
from mlp_ref.measurements.rules import MASK
from mlp_ref.setups import G_QUESTION


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
