"""Every backward stage agrees with centred finite differences, on many random networks."""
import warnings

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
    with pytest.raises(ValueError, match="net: .*float64") as info:
        gradcheck.check(net, np.zeros((2, 3)), [0.0, 1.0])
    assert info.value.argument == "net"


def test_rel_error_uses_the_cs231n_floor():
    assert gradcheck.rel_error([0.0], [0.0]) == 0.0
    assert gradcheck.rel_error([1e-9], [0.0]) == pytest.approx(1e-9 / 1e-8)
    assert gradcheck.rel_error([1.0], [3.0]) == pytest.approx(0.5)


# -- the numerical side stays in extended precision ---------------------------------------------
@pytest.mark.skipif(np.finfo(np.longdouble).eps > 1e-18,
                    reason="this platform's long double is float64: no extended precision to keep")
def test_a_perturbed_stage_is_not_rounded_back_to_float64():
    """At a sigmoid unit with z = 12, f'(z) = 6.1e-6: a z stage moved by h = 1e-5 moves a by
    6.1e-11. Were a rounded to float64 (spacing 1.1e-16 near 1), as ``MLP.forward_from`` rounds
    its input, the centred difference of dz1 would be off by up to 1.1e-16 / (2 * 6.1e-11) = 9e-7
    of itself, above tol = 1e-7. In extended precision (spacing 5.4e-20 near 1) it is off by
    2000 times less, and float64's own f'(z) = a (1 - a) by about eps / f'(z) = 4e-11."""
    net = mr.MLP([2, 3, 2], hidden="sigmoid", init_std=0.5, seed=0)
    net.params["b1"][:] = 12.0
    X = np.random.default_rng(0).normal(size=(4, 2))
    report = gradcheck.check(net, X, [1.0, -1.0])
    assert {s.stage: s for s in report.stages}["dz1"].rel_error < 1e-7, str(report)


# -- a FAIL names its likely cause ---------------------------------------------------------------
def assert_every_failure_is(report, cause):
    assert not report.ok
    assert report.causes and set(report.causes.values()) == {cause}, str(report)
    assert report.worst.cause == cause
    assert all((s.hint is None) == (s.rel_error < report.tol) for s in report.stages)
    assert f"likely cause: {cause}" in str(report).splitlines()[-1]


@pytest.mark.parametrize("case", [*range(8), "seed"])
def test_a_correct_check_at_the_default_h_passes_with_no_hint(case):
    if case == "seed":
        net, X, _ = mr.setups.seed_setup()
        G = [0.0, -1.0]
    else:
        net, X, G = random_case(case)
    report = gradcheck.check(net, X, G)
    assert report.ok and report.causes == {}
    assert all(s.cause is None and s.hint is None for s in report.stages)
    assert str(report).splitlines()[-1].endswith(": PASS")


def test_a_relu_kink_within_h_is_named():
    """One relu pre-activation at z = h / 3, every other one at least 100 h |dz/dx| from 0.
    Moving z1[0, j] by +-h crosses the kink: relu(z + h) - relu(z - h) = z + h, so the centred
    difference of dz1 there is da1 (z + h) / 2h = (2/3) da1 against backward's da1, a relative
    error (1/3) / (5/3) = 0.2 whatever the rounding."""
    h = 1e-5
    net = mr.MLP([3, 4, 2], hidden="relu", init_std=0.5, seed=3)
    X = np.random.default_rng(1).normal(size=(5, 3))
    j = 2
    net.params["b1"][j] += h / 3 - net.forward(X).z[1][0, j]
    record = net.forward(X)
    z = record.z[1]
    assert abs(z[0, j] - h / 3) < h / 100
    others = np.delete(np.abs(z).ravel(), j)          # z[0, j] is entry j of the flattened z
    # a step h in any entry of X, W1, b1 or z1 moves z1 by at most h max(1, |X|, |W1|)
    assert others.min() > 100 * h * max(1.0, np.abs(X).max(), np.abs(net.params["W1"]).max())
    da1 = net.backward(record, [1.0, -1.0]).stages["da1"]
    assert abs(da1[0, j]) > 1e-3
    report = gradcheck.check(net, X, [1.0, -1.0], h=h)
    assert_every_failure_is(report, "kink")
    by_stage = {s.stage: s for s in report.stages}
    assert by_stage["dz1"].index == (0, j) and by_stage["dz1"].rel_error > 0.1


def test_a_saturated_sigmoid_is_named():
    """A single sigmoid unit at z* with f'(z*) = 0.1 eps_ext / h, O = G (a - 1).

    In extended precision sigma(z* +- h) lie in [1/2, 1), where numbers are spaced u = eps_ext / 2;
    they differ by 2 h f'(z*) = 0.2 u, so once rounded they are equal or a whole number of
    spacings apart. a - 1 and the product by G = 2**27 are exact, so the centred difference is
    m G u / 2h for an integer m, while the derivative is G f'(z*) = 0.2 G u / 2h: it is 0
    (rel_error 1) or at least 4 times too large, whatever the rounding. Backward's value,
    G f'(z*) = 1.5e-7 on x86, is above the 1e-8 floor of rel_error, and float64's f'(z) = a (1 - a)
    is off by at most eps / f'(z*) of itself, a few per cent. The check fails, and the cause is
    the unit: its f'(z) is 1e-14 of f'(0) = 1/4."""
    h = 1e-5
    eps_ext = float(np.finfo(np.longdouble).eps)
    z_star = -np.log(0.1 * eps_ext / h)               # 34.5 with 80-bit long doubles, 26.8 without
    net = mr.MLP([1, 1, 1], hidden="sigmoid", output="identity")
    net.params["W1"][...] = 0.0                        # z = 0 * x + b1 = b1 exactly
    net.params["b1"][...] = z_star
    net.params["W2"][...] = 1.0
    net.params["b2"][...] = -1.0
    G = [2.0 ** 27]
    record = net.forward(np.ones((1, 1)))
    ours = net.backward(record, G).stages["dz1"][0, 0]
    assert ours > 1e-8
    report = gradcheck.check(net, np.ones((1, 1)), G, h=h)
    assert_every_failure_is(report, "saturated")
    assert set(report.causes) == {"dz1", "dW1", "db1"}            # the stages through the unit
    assert all(s.rel_error > 0.5 for s in report.stages if s.stage in report.causes)


def smooth_case():
    """A tanh network whose units all have |z| < 2, so none is saturated (tanh'(2) = 0.07)."""
    net = mr.MLP([3, 4, 2], hidden="tanh", init_std=0.5, seed=0)
    X = np.random.default_rng(0).normal(size=(5, 3))
    assert np.abs(net.forward(X).z[1]).max() < 2
    return net, X, np.array([1.0, -1.0])


def test_h_too_small_is_named_when_x_plus_h_rounds_back_to_x():
    """h below half the spacing of the numbers near every output O: O +- h rounds back to O, so
    the centred difference of dout is exactly 0 against backward's G, a relative error of 1."""
    net, X, G = smooth_case()
    out = np.abs(net.forward(X).output).astype(np.longdouble)
    h = float(np.finfo(np.longdouble).eps * out.min() / 8)         # spacing near O >= eps |O| / 2
    assert np.all(out + np.longdouble(h) == out)
    report = gradcheck.check(net, X, G, h=h)
    assert_every_failure_is(report, "h too small")
    assert {s.stage: s for s in report.stages}["dout"].rel_error == 1.0


def test_h_too_small_is_named_when_round_off_swamps_the_difference():
    """At h = 1e-14 the step itself is rounded: O +- h is stored to within eps_ext |O| / 2, a part
    of about eps_ext |O| / 4h = 1e-6 of the step. The centred difference of dout, computed here
    exactly as the checker does (IEEE arithmetic, the same operations), is off by more than tol."""
    net, X, G = smooth_case()
    h = 1e-14
    O = net.forward(X).output.astype(np.longdouble)
    G_ext = np.broadcast_to(G, O.shape).astype(np.longdouble)
    num = (G_ext * (O + np.longdouble(h)) - G_ext * (O - np.longdouble(h))) / (2.0 * h)
    assert gradcheck.rel_error(G_ext.astype(float), num.astype(float)) >= 1e-7
    report = gradcheck.check(net, X, G, h=h)
    assert_every_failure_is(report, "h too small")


@pytest.mark.parametrize("h", [1.0, 1e300])
def test_h_too_large_is_named(h):
    """At h = 1 the centred difference of tanh's layers is off by about h^2 |f'''| / 6, a tenth
    of the derivative, not a matter of rounding; at h = 1e300 every difference is ~1 / h."""
    net, X, G = smooth_case()
    report = gradcheck.check(net, X, G, h=h)
    assert_every_failure_is(report, "h too large")
    assert report.max_rel_error > 1e-2


def test_a_wrong_derivative_is_blamed_on_the_backward(monkeypatch):
    wrong = activations.Activation("tanh_wrong", np.tanh, lambda z, a: 1.0 - z * z)
    monkeypatch.setitem(activations.ACTIVATIONS, "tanh_wrong", wrong)
    net = mr.MLP([3, 4, 2], hidden="tanh_wrong", init_std=0.5, seed=1)
    X = np.random.default_rng(0).normal(size=(5, 3))
    for h in (1e-5, 1e-4):                             # at the default h, and at another one
        assert_every_failure_is(gradcheck.check(net, X, [0.0, -1.0], h=h), "backward")


# -- a step that overflows: the clear error alone ------------------------------------------------
def test_a_step_that_overflows_raises_its_error_and_no_warning():
    x = np.array([1.0, 2.0])
    with warnings.catch_warnings():
        warnings.simplefilter("error")                 # a RuntimeWarning would fail here
        with pytest.raises(ValueError) as info:
            gradcheck.numerical_gradient(lambda: x ** 2, x, h=1e308)   # (x + h)^2 = inf, inf - inf
        assert info.value.argument == "h" and str(info.value).startswith("h: ")
        zero = np.zeros(1)
        with pytest.raises(ValueError) as info:        # finite values, a slope of 1e310
            gradcheck.numerical_gradient(lambda: zero * 1e300 * 1e10, zero, h=1e-20)
        assert info.value.argument == "f" and str(info.value).startswith("f: ")
    assert x.tolist() == [1.0, 2.0]


@pytest.mark.parametrize("name", ["h", "tol"])
def test_a_step_or_tolerance_beyond_every_float_is_named(name):
    net, X, G = smooth_case()
    with pytest.raises(ValueError) as info:
        gradcheck.check(net, X, G, **{name: 10 ** 400})
    assert info.value.argument == name and str(info.value).startswith(f"{name}: ")
