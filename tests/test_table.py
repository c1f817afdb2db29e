"""Every fix side by side: the question table after 1 and 100 steps on both setups, the
penalty's stability limit, the trade-off, and the guarantees table measured from real runs."""
import numpy as np
import pytest

from mlp_ref import fixes, jacobian
from mlp_ref.classroom import report
from mlp_ref.data import probe_inputs
from mlp_ref.measurements import rules, table
from mlp_ref.setups import G_QUESTION, LR, N_PROBE, OUT1, OUT2, seed_setup

SETUPS = ("seed", "visible")


def test_the_table_covers_every_rule_on_both_setups(question_table):
    assert set(question_table) == {(s, r) for s in SETUPS for r in rules.RULES}
    assert all(row["long_steps"] == 100 and row["lr"] == LR[row["setup"]]
               for row in question_table.values())


def test_the_table_carries_the_penaltys_lambda(question_table):
    for (setup, rule), row in question_table.items():
        assert row["settings"] == ({"lam": rules.PENALTY_LAM} if rule == "penalty" else {})


def test_the_columns_are_what_the_legend_defines_with_the_lambda_it_shows():
    # an independent run of fixes.penalty with lam = 2, three steps on the seed setup
    row, = table.question_table(setups=("seed",), rules=[rules.penalty(2.0)], long_steps=3)
    assert row["settings"] == {"lam": 2.0} and "penalty lam=2 " in report.format_table([row])
    net0, X, _ = seed_setup()
    P = probe_inputs(N_PROBE)
    assert not np.any(np.all(P[:, None, :] == X[None, :, :], axis=2))   # "none of them in the batch"
    ref, net = net0(X)[:, OUT1], net0.copy()
    for step in range(1, 4):
        net.step(fixes.penalty(net, X, G_QUESTION, keep=[OUT1], ref=ref, lam=2.0), LR["seed"])
        if step in (1, 3):
            at = "1" if step == 1 else "n"
            # "mean over the batch of (out2 - out2 at the start)", "max ... |out1 - out1 at the start|"
            assert row[f"gain_{at}"] == pytest.approx(np.mean(net(X)[:, OUT2] - net0(X)[:, OUT2]), rel=1e-12)
            assert row[f"drift_batch_{at}"] == np.max(np.abs(net(X)[:, OUT1] - ref))
            assert row[f"drift_unseen_{at}"] == np.max(np.abs(net(P)[:, OUT1] - net0(P)[:, OUT1]))
    # and the weight matters: lam = 2 pulls out1 back more than the table's 0.5 does in 3 steps
    table_lam, = table.question_table(setups=("seed",), rules=["penalty"], long_steps=3)
    assert row["drift_batch_n"] < table_lam["drift_batch_n"]


def test_mask_equals_naive_in_every_digit(question_table):
    for setup in SETUPS:
        a, b = question_table[(setup, "naive")], question_table[(setup, "masked")]
        assert {k: v for k, v in a.items() if k != "rule"} == {k: v for k, v in b.items() if k != "rule"}
        assert a["drift_batch_1"] > 0 and a["drift_unseen_n"] > a["drift_batch_1"]


def test_freeze_and_span_hold_out1_and_gain_less_than_half(question_table):
    for setup in SETUPS:
        naive, freeze, span = (question_table[(setup, r)] for r in ("naive", "freeze", "span"))
        assert (freeze["drift_batch_1"] == freeze["drift_unseen_1"] == freeze["drift_batch_n"]
                == freeze["drift_unseen_n"] == 0.0)
        assert max(span[k] for k in ("drift_batch_1", "drift_unseen_1", "drift_batch_n",
                                     "drift_unseen_n")) <= 1e-12
        assert span["gain_1"] == pytest.approx(freeze["gain_1"], rel=1e-12)   # span IS splitting
        assert 0 < freeze["gain_1"] < freeze["gain_n"] < 0.5 * naive["gain_n"]


def test_project_and_restore(question_table):
    for setup in SETUPS:
        naive, proj, rest = (question_table[(setup, k)] for k in ("naive", "project", "project+restore"))
        assert proj["drift_batch_1"] < 0.1 * naive["drift_batch_1"]   # "more than 10 times less"
        assert proj["gain_1"] > 0.5 * naive["gain_1"]                 # "most of the gain"
        assert rest["drift_batch_n"] <= 1e-12                         # the batch, to round-off
        assert rest["drift_unseen_n"] > 1e3 * rest["drift_batch_n"]   # ... but not unseen inputs
    v = lambda rule: question_table[("visible", rule)]               # noqa: E731
    assert v("project+restore")["drift_unseen_n"] > v("naive")["drift_unseen_n"]   # "the world"


def test_the_penalty_first_step_is_naive_then_it_pulls_back(question_table):
    for setup in SETUPS:
        naive, pen = question_table[(setup, "naive")], question_table[(setup, "penalty")]
        for key in ("gain_1", "drift_batch_1", "drift_unseen_1"):
            assert pen[key] == naive[key]                                # "in every digit"
        assert 1e-6 < pen["drift_batch_n"] < 0.5 * naive["drift_batch_n"]   # a force, no guarantee
    assert 0.6 < question_table[("visible", "penalty")]["drift_batch_n"] < 0.8   # "about 0.7"
    assert 1.8 < question_table[("visible", "naive")]["drift_batch_n"] < 2.0     # "naive's 1.9"


def test_the_penalty_holds_out1s_mean_and_no_weight_reaches_its_spread(setups):
    """Tutorial 06: about 0.7 after 100 steps for every lam from 0.05 to 1; out1's Jacobian on
    the batch has one singular value over a thousand times the next; the pull holds out1's mean
    over the batch, not the spread across the samples."""
    net, X, _ = setups["visible"]
    ref = net(X)[:, OUT1]
    for lam in (0.05, 0.5, 1.0):
        trained = net.copy()
        for _ in range(100):
            trained.step(fixes.penalty(trained, X, G_QUESTION, ref=ref, lam=lam), LR["visible"])
        residual = trained(X)[:, OUT1] - ref
        assert 0.6 < np.max(np.abs(residual)) < 0.8                          # "about 0.7"
        assert abs(residual.mean()) < 0.01 * np.max(np.abs(residual))        # the mean, held
        s = np.linalg.svd(jacobian.dense_rows(trained, X, keep=[OUT1]), compute_uv=False)
        assert s[0] > 1000 * s[1]                                            # "over a thousand times"


def test_the_penalty_limit_is_linearised_and_moves(setups):
    """Tutorial 06: lam = 1.25, just above the starting limit (1.20 at lr 0.01), stays bounded
    for 300 steps, while the limit itself rises."""
    net, X, _ = setups["visible"]
    ref, lr = net(X)[:, OUT1], LR["visible"]
    start = fixes.penalty_limit(net, X) / lr
    assert start < 1.25
    trained = net.copy()
    for _ in range(300):
        trained.step(fixes.penalty(trained, X, G_QUESTION, ref=ref, lam=1.25), lr)
    assert np.max(np.abs(trained(X)[:, OUT1] - ref)) < 1.0                   # bounded
    assert fixes.penalty_limit(trained, X) / lr > 1.25 > start                # the limit rose past it


def test_the_penalty_stability_limit_separates_the_tables_weight_from_3(setups):
    assert rules.PENALTY_LAM == 0.5
    lam_max = {}
    for name, (net, X, _) in setups.items():
        lam_max[name] = np.linalg.eigvalsh(jacobian.OutputJacobian(net, X, [0]).gram())[-1]
        assert LR[name] * rules.PENALTY_LAM * lam_max[name] < 2 < LR[name] * 3.0 * lam_max[name]
    assert 13 < lam_max["seed"] < 17 and 165.5 < lam_max["visible"] < 166.5  # "about 15", "166"
    for name, (net, X, _) in setups.items():                             # "linearised limit: lam < .."
        limit = fixes.penalty_limit(net, X) / LR[name]
        assert 0.5 < limit < 3.0 and limit == pytest.approx(2 / (LR[name] * lam_max[name]))


def test_the_trade_off(question_table):
    gain = lambda rule: (question_table[("visible", rule)]["gain_n"]      # noqa: E731
                         / question_table[("visible", "naive")]["gain_n"])
    assert gain("freeze") < 0.5 and gain("project+restore") > 0.9 and gain("penalty") >= 0.99


def test_the_measured_guarantees_are_the_designs(guarantees):
    measured = guarantees
    expected = {"naive": ("O(lr)", "O(lr)"), "masked": ("O(lr)", "O(lr)"),
                "freeze": ("exactly 0", "exactly 0"), "project": ("O(lr^2)", "O(lr)"),
                "project+restore": ("round-off", "O(lr)"), "penalty": ("O(lr)", "O(lr)")}
    for setup in SETUPS:
        for rule, (batch, unseen) in expected.items():
            got = measured[(setup, rule)]
            assert (got["batch"][0], got["unseen"][0]) == (batch, unseen), (setup, rule)
        span = measured[(setup, "span")]
        assert {span["batch"][0], span["unseen"][0]} <= {"exactly 0", "round-off"}
