"""The measurements behind the table, the replay and the figures, checked against the claims."""
import numpy as np
import pytest

from mlp_ref import experiments as E
from mlp_ref import cli


@pytest.fixture(scope="module")
def table():
    return {(r["setup"], r["rule"]): r for r in E.question_table()}


def test_table_covers_every_rule_on_both_setups(table):
    assert set(table) == {(s, r) for s in ("seed", "visible") for r in E.DIRECTIONS}


def test_table_mask_equals_naive_exactly(table):
    for setup in ("seed", "visible"):
        a, b = table[(setup, "naive")], table[(setup, "masked")]
        assert {k: v for k, v in a.items() if k != "rule"} == {k: v for k, v in b.items() if k != "rule"}
        assert a["drift_batch_1"] > 0 and a["drift_unseen_n"] > a["drift_batch_1"]


def test_table_freeze_is_exactly_zero_everywhere_and_still_raises_out2(table):
    for setup in ("seed", "visible"):
        r = table[(setup, "freeze")]
        assert r["drift_batch_1"] == r["drift_unseen_1"] == r["drift_batch_n"] == r["drift_unseen_n"] == 0.0
        assert r["gain_1"] > 0 and r["gain_n"] > r["gain_1"]


def test_table_project_and_restore(table):
    for setup in ("seed", "visible"):
        naive, proj, rest = (table[(setup, k)] for k in ("naive", "project", "project+restore"))
        # one projected step: out1 drifts far less than a naive one, for nearly the same gain
        assert proj["drift_batch_1"] < 0.1 * naive["drift_batch_1"]
        assert proj["gain_1"] > 0.5 * naive["gain_1"]
        # restoring every step holds the batch to roundoff over the whole run ...
        assert rest["drift_batch_n"] <= 1e-12
        # ... but not unseen inputs
        assert rest["drift_unseen_n"] > 1e3 * rest["drift_batch_n"]


def test_table_penalty_first_step_is_naive_then_it_pulls_back(table):
    for setup in ("seed", "visible"):
        naive, pen = table[(setup, "naive")], table[(setup, "penalty")]
        assert pen["drift_batch_1"] == naive["drift_batch_1"] and pen["gain_1"] == naive["gain_1"]
        assert pen["drift_batch_n"] < 0.5 * naive["drift_batch_n"]
        assert pen["drift_batch_n"] > 1e-6                        # a force, never a guarantee


def test_table_span_with_the_batch_is_layer_splitting(table):
    for setup in ("seed", "visible"):
        span, freeze = table[(setup, "span")], table[(setup, "freeze")]
        assert span["gain_1"] == pytest.approx(freeze["gain_1"], rel=1e-12)
        assert span["drift_batch_n"] <= 1e-12


def test_penalty_with_a_large_weight_diverges():
    t = E.trajectories("visible", rules=["stiff"], steps=60,
                       directions={"stiff": E.penalty_rule(3.0)})["stiff"]
    assert t["drift_batch"][-1] > 1e3 * t["drift_batch"][1]


def test_one_step_shapes_and_exact_zeros():
    res = E.one_step("seed", rules=["naive", "freeze"], lrs=[1e-3, 1e-2])
    assert res["naive"]["drift_batch"].shape == (2,)
    assert np.all(res["freeze"]["drift_batch"] == 0.0) and np.all(res["freeze"]["drift_unseen"] == 0.0)
    assert np.all(res["naive"]["drift_batch"] > 0)


def test_drift_over_slice():
    res = E.drift_over_slice("visible", rules=("project", "freeze"), n=9)
    assert res["project"].shape == (9, 9)
    assert np.all(res["freeze"] == 0.0)
    assert res["project"].max() > 1e-3                            # off the batch, it drifts


def test_tangent_kernel_experiment_output_layer_zero():
    res = E.tangent_kernel("visible")
    assert res["norms"][3] == 0.0 and res["norms"][1] > 0 and res["norms"][2] > 0


@pytest.fixture(scope="module")
def replay():
    return {r["op"]: r for r in E.replay_answer()}


def test_replay_masked_loss_with_var_list_holds_out1_bit_for_bit(replay):
    assert np.all(replay["train_op2"]["d_out1"] == 0.0)
    assert np.array_equal(replay["train_op2"]["hidden"], replay["initial"]["hidden"])


def test_replay_other_ops_move_out1_and_the_mask_alone_does_not_hold_it(replay):
    for op in ("train_op12", "train_op_all", "mask, all variables"):
        assert np.max(np.abs(replay[op]["d_out1"])) > 1e-6, op
    assert not np.array_equal(replay["mask, all variables"]["hidden"], replay["initial"]["hidden"])


def test_replay_losses_decrease_as_the_script_says(replay):
    order = ["initial", "train_op2", "train_op12", "train_op_all"]
    for a, b in zip(order, order[1:]):
        assert replay[b]["loss"] < replay[a]["loss"]
        assert replay[b]["loss2"] < replay[a]["loss2"]


def test_cli_table_is_the_default_and_prints_every_rule(capsys):
    assert cli.main(["--steps", "20"]) == 0             # no command: the table
    text = capsys.readouterr().out
    for rule in E.DIRECTIONS:
        assert f"seed     {rule}" in text and f"visible  {rule}" in text
        assert E.GUARANTEES[rule] in text
    assert "after 20 steps" in text and "20 steps, holding out1" in text
    # the printed numbers are the experiment's
    naive = next(r for r in E.question_table(long_steps=20) if r["rule"] == "naive")
    assert f"{naive['drift_batch_n']:14.3e}" in text
    for variant in ("freeze", "heads", "towers", "project+restore"):
        assert f"\n{variant:16} " in text.split("Teaching out2")[1]


def test_cli_replay_prints_the_verdict(capsys):
    assert cli.main(["replay"]) == 0
    text = capsys.readouterr().out
    assert text.count("out1 MOVED") == 3 and text.count("out1 unchanged, bit for bit") == 1
    assert "the mask alone does not hold out1" in text
    for op in ("train_op2", "train_op12", "train_op_all", "mask, all variables"):
        assert f"after {op}" in text


def test_penalty_stability_criterion_separates_the_stable_and_the_diverging_weight():
    from mlp_ref import jacobian
    from mlp_ref.setups import visible_setup
    net, X, _ = visible_setup()
    lam_max = np.linalg.eigvalsh(jacobian.OutputJacobian(net, X, [0]).gram())[-1]
    lr = E.LR["visible"]
    assert lr * E.PENALTY_LAM * lam_max < 2 < lr * 3.0 * lam_max


def test_visible_setup_is_trained_to_a_small_mse():
    from mlp_ref.losses import mse
    from mlp_ref.setups import VISIBLE_TRAINING, visible_setup
    net, X, Y = visible_setup()
    assert VISIBLE_TRAINING == {"steps": 500, "lr": 0.05}
    assert 1e-3 < mse(net(X), Y)[0] < 3e-3


@pytest.mark.parametrize("setup", ["seed", "visible"])
def test_project_then_adam_drifts_O_lr_and_the_right_order_O_lr2(setup):
    res = E.optimizer_order(setup, lrs=np.logspace(-5, -3, 5), steps=0)
    wrong, right = (res[name]["one_step"] for name in E.OPTIMIZER_ORDERS)
    fit = lambda d: np.polyfit(np.log(res["lrs"]), np.log(d), 1)[0]
    assert 0.9 <= fit(wrong) <= 1.1
    assert 1.8 <= fit(right) <= 2.2
    assert np.all(right < wrong)


def test_adam_orders_over_many_steps():
    res = E.optimizer_order("visible", lrs=[1e-3], steps=50)
    wrong, right = (res[name] for name in E.OPTIMIZER_ORDERS)
    assert right["drift"][-1] < 0.1 * wrong["drift"][-1]
    assert right["gain"][-1] > 0 and wrong["gain"][-1] > 0


def test_layer_splitting_holds_out1_exactly_and_costs_what_out2_can_learn(capacity):
    c = capacity
    for name in ("freeze", "heads", "towers"):
        assert c[name]["drift_batch"] == 0.0 and c[name]["drift_unseen"] == 0.0, name
    # separate heads train exactly what freezing the output layer trains
    assert np.array_equal(c["heads"]["mse"], c["freeze"]["mse"])
    assert c["freeze"]["n_moved"] == 17                     # out2's 16 weights and its bias
    # two towers give out2 a whole network: it learns as well as unconstrained training ...
    np.testing.assert_allclose(c["towers"]["mse"], c["naive"]["mse"], rtol=1e-9)
    assert c["towers"]["mse"][-1] < 0.5 * c["freeze"]["mse"][-1]
    # ... at the price of a second trunk
    assert c["towers"]["n_params"] > 1.9 * c["naive"]["n_params"]
    # while naive training moves out1
    assert c["naive"]["drift_batch"] > 0.1


def test_project_restore_learns_more_than_freezing_but_holds_only_the_batch(capacity):
    c = capacity
    assert c["project+restore"]["drift_batch"] <= 1e-12
    assert c["project+restore"]["drift_unseen"] > 1e-3
    assert c["towers"]["mse"][-1] < c["project+restore"]["mse"][-1] < c["freeze"]["mse"][-1]
