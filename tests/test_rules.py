"""The one registry of rules: every rule steps by its fix, a combined rule is its own object,
and the penalty's first step is the naive step."""
import numpy as np
import pytest

from mlp_ref import fixes
from mlp_ref.measurements import rules
from mlp_ref.setups import G_QUESTION, LR


def test_the_registry_holds_every_rule_of_the_question():
    assert list(rules.RULES) == ["naive", "masked", "freeze", "project", "project+restore",
                                 "penalty", "span"]
    assert all(rules.get(name) is rule and rule.guarantee for name, rule in rules.RULES.items())
    assert rules.resolve(None) == list(rules.RULES.values())
    with pytest.raises(ValueError, match="^rule: expected a Rule or one of"):
        rules.get("project+nothing")


def test_a_rule_steps_by_its_direction(setups):
    net, X, _ = setups["seed"]
    ref = net(X)[:, 0]
    stepped = rules.get("project").step(net.copy(), X, G_QUESTION, LR["seed"], ref)
    by_hand = net.copy().step(fixes.project(net, X, G_QUESTION), LR["seed"])
    assert all(np.array_equal(stepped.params[k], by_hand.params[k]) for k in net.params)


def test_project_and_restore_is_the_projected_step_then_restore(setups):
    net, X, _ = setups["visible"]
    ref = net(X)[:, 0]
    combined = rules.get("project+restore")
    assert isinstance(combined, rules.WithRestore) and combined.rule is rules.get("project")
    stepped = combined.step(net.copy(), X, G_QUESTION, LR["visible"], ref)
    by_hand = net.copy().step(fixes.project(net, X, G_QUESTION), LR["visible"])
    report = fixes.restore(by_hand, X, ref)
    assert report.converged
    assert all(np.array_equal(stepped.params[k], by_hand.params[k]) for k in net.params)


@pytest.mark.parametrize("lam", [0.5, 3.0, 100.0])
def test_the_penalty_first_step_is_the_naive_step(setups, lam):
    # at the start out1 = ref, so the penalty's gradient lam (out1 - ref) J1 is exactly zero
    for net, X, _ in setups.values():
        ref = net(X)[:, 0]
        pen = fixes.penalty(net, X, G_QUESTION, keep=[0], ref=ref, lam=lam)
        assert all(np.array_equal(pen[k], v) for k, v in fixes.naive(net, X, G_QUESTION).items())
        stepped = rules.penalty(lam).step(net.copy(), X, G_QUESTION, 0.01, ref)
        naive = rules.get("naive").step(net.copy(), X, G_QUESTION, 0.01, ref)
        assert all(np.array_equal(stepped.params[k], naive.params[k]) for k in net.params)


def test_the_penalty_pulls_out1_back_once_it_has_moved(setups):
    # off the start, the penalty's gradient is lam J1^T (out1 - ref): the naive one plus that
    net, X, _ = setups["seed"]
    ref = net(X)[:, 0] - 0.1
    pen, naive = (fixes.penalty(net, X, G_QUESTION, ref=ref, lam=2.0), fixes.naive(net, X, G_QUESTION))
    pull = net.gradient(X, np.column_stack([2.0 * (net(X)[:, 0] - ref), np.zeros(len(X))]))
    for k in net.params:
        np.testing.assert_allclose(pen[k], naive[k] + pull[k], rtol=1e-12, atol=1e-15)
