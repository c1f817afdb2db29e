"""Every backward stage agrees with centred finite differences, on many random networks."""
import numpy as np
import pytest

import mlp_ref as mr
from mlp_ref import activations, gradcheck

ACTS = ["sigmoid", "tanh", "relu", "identity"]


def random_case(seed):
    """A seeded random architecture (depth 1-4, every activation), batch and G.

    init_std 0.5 keeps tanh/sigmoid out of saturation, where gradient entries of 1e-13
    would fall below what any centred difference can resolve. ReLU inputs are redrawn
    until every pre-activation is at least 1e-3 away from the kink at 0.
    """
    rng = np.random.default_rng(seed)
    depth = 1 + seed % 4
    sizes = [int(v) for v in rng.integers(1, 7, size=depth + 1)]
    hidden = [ACTS[(seed + i) % 4] for i in range(depth - 1)]
    output = ["identity", "sigmoid", "tanh", "relu"][seed % 4]
    net = mr.MLP(sizes, hidden=hidden, output=output, init_std=0.5, seed=seed)
    n = int(rng.integers(1, 7))
    for _ in range(1000):
        X = rng.normal(size=(n, sizes[0]))
        rec = net.forward(X)
        if all(np.min(np.abs(rec.z[l])) > 1e-3
               for l, name in enumerate(net.activations, 1) if name == "relu"):
            break
    G = rng.normal(size=(n, sizes[-1]))
    return net, X, G


@pytest.mark.parametrize("seed", range(40))
def test_every_stage_matches_finite_differences(seed):
    net, X, G = random_case(seed)
    report = gradcheck.check(net, X, G)
    assert report.max_rel_error < 1e-7, str(report)
    assert [s.stage for s in report.stages] == list(net.backward(net.forward(X), G).stages)


def test_cases_cover_every_activation_and_depth():
    seen_acts, seen_depths = set(), set()
    for seed in range(40):
        net, _, _ = random_case(seed)
        seen_acts.update(net.activations)
        seen_depths.add(net.depth)
    assert seen_acts == set(ACTS)
    assert seen_depths == {1, 2, 3, 4}


def test_the_checker_catches_a_wrong_derivative_and_names_the_stage(monkeypatch):
    # A classic student bug: tanh' written as 1 - z^2 instead of 1 - a^2, added as a student
    # adds an activation: a new entry of the table
    wrong = activations.Activation("tanh_wrong", np.tanh, lambda z, a: 1.0 - z * z)
    monkeypatch.setitem(activations.ACTIVATIONS, "tanh_wrong", wrong)
    net = mr.MLP([3, 4, 2], hidden="tanh_wrong", init_std=0.5, seed=1)
    X = np.random.default_rng(0).normal(size=(5, 3))
    report = gradcheck.check(net, X, [0.0, -1.0])
    assert not report.ok
    assert report.worst.stage in {"dz1", "dW1", "db1", "da0"}
    by_stage = {s.stage: s for s in report.stages}
    assert by_stage["dW2"].rel_error < 1e-7          # stages above the bug are still right
    assert "FAIL" in str(report) and "dz1" in str(report)
    worst = report.worst
    assert worst.ours != pytest.approx(worst.numerical)


def test_the_seed_network_passes_with_the_question_gradient():
    net, X, _ = mr.setups.seed_setup()
    report = gradcheck.check(net, X, [0.0, -1.0])
    assert report.ok, str(report)


def test_float32_networks_are_refused_with_a_reason():
    net = mr.MLP([3, 4, 2], dtype=np.float32)
    with pytest.raises(ValueError, match="net: .*float64"):
        gradcheck.check(net, np.zeros((2, 3)), [0.0, 1.0])


def test_rel_error_uses_the_cs231n_floor():
    assert gradcheck.rel_error([0.0], [0.0]) == 0.0
    assert gradcheck.rel_error([1e-9], [0.0]) == pytest.approx(1e-9 / 1e-8)
    assert gradcheck.rel_error([1.0], [3.0]) == pytest.approx(0.5)
