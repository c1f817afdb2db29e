"""Tutorial 07 prints the framework code that runs, runs it, and every claim it makes holds.

Run in this process with the three frameworks (skipped without them, a failure in CI); its run
with PyTorch, TensorFlow and JAX hidden, as on a teacher's machine with only numpy and matplotlib, is
tests/test_tutorials.py's, and its notebook tests/test_notebooks.py's.
The numbers it prints are kept in its MEASURED dict; each is checked here against the claim the
narration makes about it, and the prose's own numbers are recomputed from mlp_ref.
"""
import inspect
import io
from contextlib import redirect_stdout
from pathlib import Path

import numpy as np
import pytest
from _extras import require
from _frameworks import NAMES, load, printed_sources

from mlp_ref import fixes, losses, setups
from mlp_ref.measurements import rules
from mlp_ref.jacobian import dense_rows
from mlp_ref.setups import G_QUESTION, SETUPS

ROOT = Path(__file__).resolve().parents[1]
TUTORIAL = ROOT / "tutorials" / "07_from_numpy_to_frameworks.py"
EPS = np.finfo(np.float64).eps


#: every test here runs PyTorch or TensorFlow: the slow run's (.ci/run)
pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def with_frameworks():
    """The tutorial run in this process, with the three frameworks, as ``python tutorials/07_...py``
    runs it (run_headless: markdown printed, cells run, then SystemExit 0): (its namespace,
    what it printed, the three fixes modules)."""
    modules = {name: load(framework) for name, framework in NAMES.items()}
    out = io.StringIO()
    namespace = {"__name__": "__main__", "__file__": str(TUTORIAL)}
    with redirect_stdout(out), pytest.raises(SystemExit) as end:
        exec(compile(TUTORIAL.read_text(), str(TUTORIAL), "exec"), namespace)
    assert end.value.code == 0
    return namespace, out.getvalue(), modules


def test_the_printed_source_is_the_code_that_runs(with_frameworks):
    _, printed, modules = with_frameworks
    blocks = printed_sources(printed)
    assert len(blocks) >= 28
    for (framework, name), source in blocks.items():
        assert source == inspect.getsource(getattr(modules[framework], name)).strip("\n")


def test_with_frameworks_it_runs_all_three(with_frameworks):
    namespace, printed, _ = with_frameworks
    assert set(namespace["RUN"]) == set(NAMES)
    assert "NOT RUN" not in printed and "Ran here: PyTorch, TensorFlow 2, JAX." in printed


def measured(with_frameworks, quantity):
    """(framework, setup) -> value, for every framework and setup the tutorial measured."""
    found = {(fw, setup): v for (fw, q, setup), v in with_frameworks[0]["MEASURED"].items()
             if q == quantity}
    assert found, quantity
    return found


@pytest.mark.parametrize("quantity, bound", [
    ("max |model(X) - net(X)| / max |net(X)|", 1e-14),
    ("naive: relative difference from mlp_ref", 1e-12),
    ("freeze: relative difference from mlp_ref", 1e-12),
    ("loss2: relative difference from masked_mse", 1e-12),
    ("gradient: relative difference from mlp_ref", 1e-12),
    ("project: relative difference from mlp_ref", 1e-12),
    ("restore float64: final residual / max |ref|", 1e-12),
    ("float32 project: |J1 D| / |J1 g|", 1e-5),
    ("restore float32: final residual / max |ref|", 1e-6),
    ("restore float32: iterations", 10),
    ("restore float64: iterations", 4),                   # "within a few iterations"
    ("penalty: relative difference from mlp_ref", 1e-12),
])
def test_each_printed_number_is_within_the_bound_the_text_states(with_frameworks, quantity, bound):
    for key, value in measured(with_frameworks, quantity).items():
        assert value <= bound, (key, value)


def test_freezing_moves_out1_by_exactly_zero(with_frameworks):
    for dtype in ("float64", "float32"):
        for where in ("batch", "256 unseen"):
            values = measured(with_frameworks, f"freeze {dtype}: |change of out1|, {where}")
            assert all(v == 0.0 for v in values.values())


@pytest.mark.parametrize("rule, order", [("naive", 1), ("project", 2)])
def test_the_drift_slopes_are_1_and_2_in_every_framework(with_frameworks, rule, order):
    """"1.00 for naive and 2.00 for project, in NumPy, PyTorch, TensorFlow and JAX, on both
    setups"."""
    slopes = measured(with_frameworks, f"{rule}: fitted slope of the drift, lr <= 1e-3")
    assert len(slopes) == 2 * len(NAMES) and all(abs(s - order) < 0.005 for s in slopes.values())
    for res in with_frameworks[0]["beside"].values():
        # a logspace grid is 10 ** x rounded: its ends are 1e-5 and 1e-2 to a few ulps, and
        # which ulp depends on numpy's kernel for the power (AVX-512 gives 9.999999999999999e-06)
        assert res["slope_max_lr"] == 1e-3
        assert np.allclose([res["lrs"][0], res["lrs"][-1]], [1e-5, 1e-2], rtol=4 * EPS, atol=0)
        assert abs(res["slopes"]["mlp_ref"][rule] - order) < 0.005


def test_each_framework_drifts_as_mlp_ref_worst_at_the_smallest_drift(with_frameworks):
    """"every point lands on mlp_ref's, within 1e-3 relative at every lr"; the largest
    differences at "about 1e-13 after a projected step of 1e-5 on the seed network", "two
    values of out1 near 0.05, each known to a few units of its last digit"."""
    for rule in ("naive", "project"):
        differences = measured(with_frameworks, f"{rule}: drift, relative difference from mlp_ref")
        assert len(differences) == 2 * len(NAMES) and all(v <= 1e-3 for v in differences.values())
    beside = with_frameworks[0]["beside"]
    net, X, _ = SETUPS["seed"]()
    out1 = net(X)[:, 0]
    assert np.all((0.045 < out1) & (out1 < 0.055))
    smallest = beside["seed"]["drift"]["mlp_ref"]["project"][0]
    assert 5e-14 < smallest < 2e-13
    # A drift is the difference of two values of out1, each rounded to a few units of its last
    # digit by every framework's own order of sums: so every framework's drift is mlp_ref's to
    # within 8 ulps of out1, whatever the drift, and the relative difference is largest where
    # the drift is smallest (which point is the very largest is a matter of the last bits).
    for setup, res in beside.items():
        net, X, _ = SETUPS[setup]()
        ulps = 8 * np.spacing(np.abs(net(X)[:, 0]).max())
        for framework in NAMES:
            for rule in res["rules"]:
                ours, theirs = (np.asarray(res["drift"][f][rule]) for f in ("mlp_ref", framework))
                assert np.all(np.abs(theirs - ours) <= ulps), (setup, framework, rule)


def test_the_figure_from_the_run_with_both_draws_their_points(with_frameworks):
    """What the notebook draws when the three frameworks are installed (its kernel in
    test_notebooks.py also runs with them hidden)."""
    from mlp_ref import plots
    beside = with_frameworks[0]["beside"]
    fig = plots.frameworks_drift_vs_lr(list(beside.values()))
    assert "PyTorch, TensorFlow 2 and JAX lands on mlp_ref's curves" in fig.get_suptitle()
    for ax, res in zip(fig.axes, beside.values()):
        lines = {line.get_label(): line.get_ydata() for line in ax.get_lines()}
        for framework in NAMES:
            for rule in ("naive", "project"):
                assert np.array_equal(lines[f"{rule}: {framework}"], res["drift"][framework][rule])


def test_float32_the_pinv_way_misses_the_bound_by_far(with_frameworks):
    assert all(v > 1e-4 for v in measured(with_frameworks, "float32 with pinv: |J1 D| / |J1 g|").values())


def test_the_penalty_numbers(with_frameworks):
    net, X, _ = SETUPS["visible"]()
    J1 = dense_rows(net, X)
    lambda_max = np.linalg.eigvalsh(J1 @ J1.T)[-1]
    assert 160 < lambda_max < 172                                   # "about 166"
    for limit in measured(with_frameworks, "largest stable lam at lr 0.01").values():
        assert 1.15 < limit < 1.25                                  # "below about 1.2"
        assert abs(limit - 2 / (0.01 * lambda_max)) <= 1e-12 * limit
    assert rules.PENALTY_LAM < 1.15                           # the lam that holds is stable
    for value in measured(with_frameworks, "lam = 10.0: |change of out1| after 10 steps").values():
        assert not value < 1e3                                      # diverged (or nan)
    naive, out1 = net.copy(), net(X)[:, 0]
    for _ in range(50):
        naive.step(fixes.naive(naive, X, G_QUESTION), setups.LR["visible"])
    naive_drift = np.max(np.abs(naive(X)[:, 0] - out1))
    quantity = f"lam = {rules.PENALTY_LAM}: |change of out1| after 50 steps"
    for value in measured(with_frameworks, quantity).values():
        assert 0.0 < value < 0.5 * naive_drift                      # "less than half ... not zero"


def test_projected_adam_and_its_bound(with_frameworks):
    eps = np.finfo(float).eps
    bound = {}
    for setup, make in SETUPS.items():
        net, X, _ = make()
        bound[setup] = max(1e-12, len(X) * eps * np.linalg.cond(dense_rows(net, X)))
    assert bound["visible"] == 1e-12 and 5e-11 < bound["seed"] / 8 < 2e-10     # "about 1e-10"
    for (_, setup), value in measured(with_frameworks, "Adam, 3 steps: worst relative difference").items():
        assert value <= bound[setup]


def test_detach_follows_the_step_and_snapshot_does_not(with_frameworks):
    assert ("detach() holds the new weights: True;  snapshot() holds the old ones: True"
            in with_frameworks[1])


def test_optax_masked_moves_out1_and_partition_holds_it(with_frameworks):
    """"over the frozen leaves, max |update - g| is exactly 0.0" (and partition's update there
    is 0.0); out1 moves "further than under
    the naive step, on both setups; on the visible setup out2 even falls"; with optax.partition
    "out1 moves by exactly 0.0, on the batch and on 256 unseen inputs"."""
    for value in measured(with_frameworks, "optax.masked: max |update - g|, frozen leaves").values():
        assert value == 0.0
    for value in measured(with_frameworks, "optax.partition: max |update|, frozen leaves").values():
        assert value == 0.0
    for where in ("batch", "256 unseen"):
        for value in measured(with_frameworks, f"optax.partition: |change of out1|, {where}").values():
            assert value == 0.0
    moved = measured(with_frameworks, "optax.masked: |change of out1|, batch")
    assert len(moved) == 2
    for (_, setup), value in moved.items():
        net, X, _ = SETUPS[setup]()
        stepped = net.copy().step(fixes.naive(net, X, G_QUESTION), setups.LR[setup])
        assert value > np.max(np.abs(stepped(X)[:, 0] - net(X)[:, 0]))
    assert measured(with_frameworks, "optax.masked: mean change of out2, batch")[("JAX", "visible")] < 0
    for value in measured(with_frameworks, "optax.partition: mean change of out2, batch").values():
        assert value > 0


# -- the numbers of the prose, recomputed -------------------------------------------------------
def test_seed_network_conditioning_and_cross_talk():
    """"cond(J1 J1^T) is 2e11 on the seed network"; "|J1 g| is about 1e-4 of |J1| |g|";
    "cond(J1) ~ 5e5"."""
    net, X, _ = SETUPS["seed"]()
    J1 = dense_rows(net, X)
    assert 1.5e11 < np.linalg.cond(J1 @ J1.T) < 3e11
    assert 4e5 < np.linalg.cond(J1) < 6e5
    g = np.concatenate([v.ravel() for v in fixes.naive(net, X, G_QUESTION).values()])
    assert 5e-5 < np.linalg.norm(J1 @ g) / (np.linalg.norm(J1, 2) * np.linalg.norm(g)) < 2e-4


def test_float32_rounding_of_J1_is_about_1e_7_of_its_size():
    fx, torch = load("torch"), require("torch", "frameworks")
    net, X, _ = SETUPS["seed"]()
    model = fx.model_from(net, "float32")
    J64 = np.asarray(fx.jacobian(model, X))
    J32 = np.asarray(fx.jacobian(model, X, dtype=torch.float32), dtype=np.float64)
    assert 1e-8 < np.max(np.abs(J32 - J64)) / np.max(np.abs(J64)) < 1e-6


@pytest.mark.parametrize("setup", list(SETUPS))
def test_the_two_mask_formulas_differ_by_exactly_the_hidden_columns_y_squared(setup):
    net, X, Y = SETUPS[setup]()
    mask = np.array([0.0, 1.0])
    answer = losses.masked_mse(net(X), Y, mask)[0]
    both = np.mean((mask * (net(X) - Y)) ** 2)
    assert abs((answer - both) - np.mean((1 - mask) * Y ** 2)) <= 1e-12 * answer
