"""out1's drift under every rule: one step against lr (drift_vs_lr.png), many steps
(trajectories.png, pareto.png), and a slice of input space off the batch (heldout_drift.png)."""
import numpy as np
import pytest

from mlp_ref import fixes
from mlp_ref.classroom import figures
from mlp_ref.measurements import drift, fits, rules
from mlp_ref.setups import N_PROBE, SETUPS


def test_one_step_measures_each_rule_from_the_same_start():
    res = drift.one_step("seed", rules=["naive", "freeze"], lrs=[1e-3, 1e-2])
    assert res["rules"] == ["naive", "freeze"] and res["n_probe"] == N_PROBE
    assert res["naive"]["drift_batch"].shape == (2,) and "orders" not in res
    assert np.all(res["freeze"]["drift_batch"] == 0.0) and np.all(res["freeze"]["drift_unseen"] == 0.0)
    assert np.all(res["naive"]["drift_batch"] > 0) and np.all(res["naive"]["gain"] > 0)


def test_drift_vs_lr_slopes_zeros_and_round_off(drift_results):
    small = np.asarray(figures.DRIFT_LRS) <= figures.DRIFT_SLOPE_MAX_LR
    for res in drift_results:
        lrs = res["lrs"]
        # written "1.00" and "2.00" in the figure and the README
        for rule, k in (("naive", 1), ("project", 2)):
            slope = res["orders"][rule]["batch"][1]
            assert abs(slope - k) < 0.005
            assert slope == fits.loglog_slope(lrs[small], res[rule]["drift_batch"][small])
        assert np.all(res["freeze"]["drift_batch"] == 0.0)                # "exactly (0.0)"
        assert np.max(res["span"]["drift_batch"]) <= 1e-12                # "to round-off"
        assert np.max(res["project+restore"]["drift_batch"]) <= 1e-12
        for rule in ("masked", "penalty"):                                # drawn as "= naive"
            assert np.array_equal(res[rule]["drift_batch"], res["naive"]["drift_batch"])


def test_a_stiff_penalty_diverges():
    t = drift.trajectories("visible", rules=[rules.penalty(3.0)], steps=60)["penalty"]
    assert t["drift_batch"][-1] > 1e3 * t["drift_batch"][1]


def test_the_figures_measurements_are_read_only(trajectories, tangent_kernels):
    """Shared by every figure and every test of a process: none can change them for the others."""
    for array in (trajectories["naive"]["drift_batch"], tangent_kernels["seed"]["shares"]["total"]):
        with pytest.raises(ValueError, match="read-only"):
            array[0] = 1.0


def test_many_steps(trajectories):
    traj = trajectories
    assert len(traj["steps"]) == figures.STEPS + 1 == 201 and traj["lr"] == 0.01
    assert traj["rules"] == list(rules.RULES) and traj["n_probe"] == N_PROBE
    end = {rule: {k: v[-1] for k, v in traj[rule].items()} for rule in traj["rules"]}
    assert np.all(traj["freeze"]["drift_batch"] == 0.0)
    assert np.all(traj["freeze"]["drift_unseen"] == 0.0)
    assert np.max(traj["project+restore"]["drift_batch"]) <= 1e-12         # "on the batch"
    assert end["project+restore"]["drift_unseen"] > end["naive"]["drift_unseen"]   # "even more"
    # README: "the penalty pulls the drift on the batch under half of naive's from step 8 on (37% at
    # the end), but on the unseen inputs it ends just over half (54%), and at 0 on neither"
    ratio = {where: traj["penalty"][f"drift_{where}"][1:] / traj["naive"][f"drift_{where}"][1:]
             for where in ("batch", "unseen")}                                     # [k]: step k + 1
    assert ratio["batch"][6] >= 0.5 and np.all(ratio["batch"][7:] < 0.5)
    assert round(100 * ratio["batch"][-1]) == 37
    assert 0.5 < ratio["unseen"][-1] and round(100 * ratio["unseen"][-1]) == 54
    assert end["penalty"]["drift_batch"] > 0.1 and end["penalty"]["drift_unseen"] > 0.1
    for key in ("drift_batch", "drift_unseen", "gain"):
        assert np.array_equal(traj["masked"][key], traj["naive"][key])
    # pareto.png: "freezing ... with half the gain", "projection + restore keeps the gain"
    assert 0.4 < end["freeze"]["gain"] / end["naive"]["gain"] < 0.5
    assert end["project+restore"]["gain"] > 0.95 * end["naive"]["gain"]
    assert end["project+restore"]["drift_unseen"] == max(e["drift_unseen"] for e in end.values())


def test_off_the_batch(slice_result):
    r = slice_result
    assert r["steps"] == 1 and r["lr"] == 0.01 and r["project"].shape == (41, 41)
    assert np.all(r["freeze"] == 0.0)                                      # "exactly"
    assert r["span"].max() <= 1e-12 and np.any(r["span"] == 0.0)           # "up to round-off"
    assert r["project"].min() > 1e-3                                       # "moves it everywhere"
    _, X, _ = SETUPS["visible"]()
    assert np.array_equal(r["batch"], X[:, :2])
    assert r["batch_off_slice"] == np.min(np.abs(X[:, 2] - 0.5)) > 0.01    # no batch point on it
    assert np.array_equal(r["batch_x3"], X[:, 2])


def test_the_slice_figure_measures_the_batch_where_it_lies(slice_result):
    # the dots' drift is out1's at the batch inputs themselves: one_step's batch drift, same step
    r = slice_result
    assert set(r["at_batch"]) == set(r["rules"])
    one = drift.one_step("visible", rules=r["rules"], lrs=[r["lr"]], n_probe=1)
    for rule in r["rules"]:
        assert r["at_batch"][rule].shape == (8,)
        assert r["at_batch"][rule].max() == one[rule]["drift_batch"][0], rule
    # the titles, and the README: "each filled with its own drift: 0.0 under freezing, at most
    # 1e-12 under span"; "which lie off the slice" is test_off_the_batch
    assert np.all(r["at_batch"]["freeze"] == 0.0)
    assert 0 < r["at_batch"]["span"].max() <= 1e-12
    assert np.all(r["at_batch"]["project"] < r["at_batch"]["naive"])


def test_a_small_slice():
    res = drift.drift_over_slice("seed", rules=("naive",), n=3, fixed=0.25)
    x1, x2, grid = drift.input_slice(3, 0.25)
    assert res["naive"].shape == (3, 3) and np.all(grid[:, 2] == 0.25)
    assert grid[5].tolist() == [x1[2], x2[1], 0.25]                          # row-major (x2, x1)


def _out1_after(scale):
    """Another implementation of a step, made of mlp_ref's own directions, that steps by
    ``scale`` times lr: out1 on X after one step at each lr, as ``one_step_beside`` asks."""
    def run(rule, net, X, G, lrs):
        D = getattr(fixes, rule)(net, X, G)
        return [net.copy().step(D, scale * lr)(X)[:, 0] for lr in lrs]
    return run


def test_one_step_beside_puts_another_implementations_drift_beside_the_references():
    lrs = np.logspace(-5, -2, 7)
    res = drift.one_step_beside({"same": _out1_after(1.0), "double": _out1_after(2.0)}, "visible", lrs)
    assert res["who"] == ["mlp_ref", "same", "double"] and res["rules"] == ["naive", "project"]
    ref = drift.one_step("visible", rules=["naive", "project"], lrs=lrs)
    for rule, k in (("naive", 1), ("project", 2)):
        assert np.array_equal(res["drift"]["mlp_ref"][rule], ref[rule]["drift_batch"])
        assert np.array_equal(res["drift"]["same"][rule], ref[rule]["drift_batch"])
        assert res["rel_error"]["same"][rule] == 0.0
        assert res["slopes"]["mlp_ref"][rule] == fits.loglog_slope(lrs, ref[rule]["drift_batch"], 1e-3)
        assert abs(res["slopes"]["double"][rule] - k) < 0.01           # twice the lr: same order
    # twice the step moves out1 twice as far (naive, O(lr)) or four times (project, O(lr^2))
    assert 0.95 < res["rel_error"]["double"]["naive"] < 1.0
    assert 2.9 < res["rel_error"]["double"]["project"] < 3.0
    assert set(res["rel_error"]) == {"same", "double"}
