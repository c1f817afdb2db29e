"""The figures: every file written, byte-identical run to run, slide-sized and small; every plot
function returns a Figure with the expected axes; the results they draw are right."""
import os
import re
import struct
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import mlp_ref as mr
from mlp_ref import experiments, figures
from mlp_ref.setups import G_QUESTION, seed_setup

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def two_runs(tmp_path_factory):
    """The figures written twice into two folders: by ``python -m mlp_ref figures`` in a child
    process and, meanwhile, by ``figures.write_all`` in this one (two cores, half the wait)."""
    env = dict(os.environ, MPLBACKEND="Agg",
               PYTHONPATH=os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])))
    a, b = (tmp_path_factory.mktemp(name) for name in ("run_a", "run_b"))
    proc = subprocess.Popen([sys.executable, "-m", "mlp_ref", "figures", "--out", str(a)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    figures.write_all(str(b), log=lambda line: None)
    stdout, stderr = proc.communicate(timeout=120)
    assert proc.returncode == 0, stderr
    return (a, b), stdout


def png_size(path):
    """(width, height) from the IHDR chunk that every PNG starts with."""
    with open(path, "rb") as f:
        head = f.read(24)
    assert head[:8] == b"\x89PNG\r\n\x1a\n" and head[12:16] == b"IHDR"
    return struct.unpack(">II", head[16:24])


def test_every_figure_is_written(two_runs):
    (a, _), _ = two_runs
    assert sorted(p.name for p in a.iterdir()) == sorted(figures.FIGURES)
    assert {"seed_problem.png", "backprop_stages.png", "backprop_zeroed.png",
            "projection_geometry.png", "network_fixes.png", "tangent_kernel.png",
            "drift_vs_lr.png", "trajectories.png", "pareto.png", "heldout_drift.png",
            "optimizer_order.png"} <= set(figures.FIGURES)


def test_two_runs_give_identical_bytes(two_runs):
    """Also across processes: the CLI's bytes equal those drawn inside the test process."""
    (a, b), _ = two_runs
    for name in figures.FIGURES:
        assert (a / name).read_bytes() == (b / name).read_bytes(), name


def test_one_progress_line_per_figure_with_its_time(two_runs):
    _, stdout = two_runs
    lines = stdout.strip().splitlines()
    assert len(lines) == len(figures.FIGURES)
    for line, name in zip(lines, figures.FIGURES):
        assert re.fullmatch(rf"\[\d+/\d+\] .*{re.escape(name)}  \(\d+\.\d s\)", line), line


def test_pngs_are_slide_sized_and_small(two_runs):
    (a, _), _ = two_runs
    for name in figures.FIGURES:
        width, height = png_size(a / name)
        assert width >= 1000, (name, width)
        assert (a / name).stat().st_size < 300_000, name


def png_software(path):
    """The text of the PNG's "Software" tEXt chunk, or None."""
    data = Path(path).read_bytes()
    pos = 8
    while pos < len(data):
        length, kind = struct.unpack(">I4s", data[pos:pos + 8])
        if kind == b"tEXt":
            key, _, value = data[pos + 8:pos + 8 + length].partition(b"\0")
            if key == b"Software":
                return value.decode("latin-1")
        pos += 12 + length
    return None


def test_committed_figures_are_the_current_ones(two_runs):
    """figures/ in the repository is what the command writes today: after a change that moves a
    figure, run ``python -m mlp_ref figures`` and commit. Each PNG records the matplotlib and
    numpy versions that drew it; with the same versions the bytes must be identical, with
    others (a newer matplotlib renders text a little differently) the pixel size must."""
    (a, _), _ = two_runs
    current = figures.png_metadata()["Software"]
    for name in figures.FIGURES:
        committed = ROOT / "figures" / name
        assert committed.exists(), f"figures/{name} is not committed"
        assert png_size(committed) == png_size(a / name), f"figures/{name} is stale"
        assert png_software(a / name) == current
        if png_software(committed) == current:
            assert committed.read_bytes() == (a / name).read_bytes(), f"figures/{name} is stale"


# -- each plot function ---------------------------------------------------------------------------
@pytest.fixture(scope="module")
def plots():
    from mlp_ref import plots
    return plots


@pytest.fixture(scope="module")
def stages_result():
    net, X, _ = seed_setup()
    return experiments.backprop_stages(net, X, G_QUESTION)


def test_seed_problem_has_three_axes(plots):
    net, X, _ = seed_setup()
    fig = plots.seed_problem(experiments.naive_step_effect(net, X, G_QUESTION, lr=0.1))
    assert type(fig).__name__ == "Figure" and len(fig.axes) == 3


def test_backprop_stages_has_one_axes_per_stage(plots, stages_result):
    assert len(plots.backprop_stages(stages_result).axes) == 9
    assert len(plots.backprop_stages(stages_result, forward=True).axes) == 9 + 5
    assert len(plots.backprop_stages(stages_result, zeroed=stages_result["zeroed"]).axes) == 9


def test_projection_geometry_has_two_axes(plots):
    assert len(plots.projection_geometry(experiments.projection_geometry(), grid=41).axes) == 2


def test_plot_functions_draw_into_given_axes(plots, stages_result):
    from matplotlib.figure import Figure
    fig = Figure()
    axes = fig.subplots(1, 3)
    assert plots.seed_problem(experiments.naive_step_effect(*seed_setup()[:2]), axes=axes) is fig
    sub = Figure().subfigures(1, 2)[1]
    got = plots.backprop_stages(stages_result, axes=sub.subplots(1, 9))
    assert got is sub.figure                         # the root Figure, not the SubFigure
    with pytest.raises(ValueError, match="axes: expected 2"):
        plots.projection_geometry(experiments.projection_geometry(), axes=axes)


def test_plot_style_does_not_leak(plots):
    import matplotlib
    before = matplotlib.rcParams["font.size"]
    plots.projection_geometry(experiments.projection_geometry(), grid=41)
    assert matplotlib.rcParams["font.size"] == before


def test_palette_keeps_every_fix_and_has_a_marker_for_each(plots):
    assert set(plots.PALETTE) == {"naive", "masked", "freeze", "heads", "towers", "project",
                                  "project+restore", "penalty", "span"}
    assert set(plots.MARKERS) == set(plots.PALETTE)
    assert len(set(plots.PALETTE.values())) == len(plots.PALETTE)


# -- the results the figures draw ------------------------------------------------------------------
def test_backprop_stages_zeroed_entries(stages_result):
    zeroed = stages_result["zeroed"]
    masked = zeroed["masked"]
    assert set(masked) == {"dout", "dz2", "dW2", "db2"}
    for name in ("dout", "dz2", "dW2"):
        expected = np.zeros_like(masked[name])
        expected[:, 0] = True
        assert np.array_equal(masked[name], expected), name
    assert masked["db2"].tolist() == [True, False]
    # ... and those entries are already zero without the mask: that is the point
    for name, mask in masked.items():
        assert np.all(stages_result["backward"][name][mask] == 0.0)
    assert set(zeroed["freeze"]) == {"dW1", "db1"}
    assert all(np.all(m) for m in zeroed["freeze"].values())
    assert list(stages_result["backward"])[0] == "dout" and list(stages_result["forward"])[0] == "a0"


def test_two_param_toy_is_the_mlp_it_claims():
    toy = experiments.TwoParamToy()
    theta = np.array([0.3, -0.7])
    net = mr.MLP([1, 2, 2], hidden="tanh", output="identity")
    net.params.update(W1=theta[None, :].copy(), b1=toy.c.copy(), W2=toy.V.copy(), b2=np.zeros(2))
    x = np.array([[toy.x]])
    np.testing.assert_allclose(toy.outputs(theta), net(x)[0], rtol=1e-14)
    for k in range(2):
        G = np.eye(2)[k]
        np.testing.assert_allclose(toy.grads(theta)[k], net.gradient(x, G)["W1"][0], rtol=1e-13)


def test_projection_geometry_orders_and_slopes():
    r = experiments.projection_geometry()
    u = r["grad_out1"]
    assert abs(u @ (r["projected"] - r["theta0"])) < 1e-14          # along the tangent
    assert abs(r["slopes"]["naive"] - 1.0) < 0.05
    assert abs(r["slopes"]["project"] - 2.0) < 0.05
    assert np.all(r["drift"]["project+restore"] == 0.0)             # drawn as "exactly 0"
    assert np.all(r["drift"]["project"] < r["drift"]["naive"])
    toy = r["toy"]
    out0, outp = toy.outputs(r["theta0"]), toy.outputs(r["restore_path"][-1])
    assert outp[1] > out0[1] + 0.3                                   # out2 still rises


def test_zeroed_by_rule_sees_the_rule_not_G():
    net, X, _ = seed_setup()
    assert experiments.zeroed_by_rule(lambda net, X, G: net.gradient(X, G), net, X) == {}
    keep_W2 = experiments.zeroed_by_rule(
        lambda net, X, G: {k: (g if k == "W2" else 0 * g) for k, g in net.gradient(X, G).items()},
        net, X)
    assert set(keep_W2) == {"dW1", "db1", "db2"} and all(np.all(m) for m in keep_W2.values())


# -- every fix, measured --------------------------------------------------------------------------
from mlp_ref.plots import ZERO_FLOOR                               # noqa: E402  (imports matplotlib)


@pytest.fixture(scope="module")
def changes():
    return experiments.weight_changes("seed")


@pytest.fixture(scope="module")
def drift_results():
    return [experiments.one_step("visible", lrs=figures.DRIFT_LRS),
            experiments.one_step("seed", lrs=figures.DRIFT_LRS)]


@pytest.fixture(scope="module")
def traj():
    return figures._visible_trajectories()              # the figures' own (cached) run


@pytest.fixture(scope="module")
def slice_result():
    return experiments.drift_over_slice("visible", rules=("naive", "project", "freeze", "span"))


@pytest.fixture(scope="module")
def order_result():
    return experiments.optimizer_order("visible")


def test_fix_plot_functions_return_figures_with_their_axes(
        plots, changes, drift_results, traj, slice_result, order_result):
    kernels = [experiments.tangent_kernel("seed"), experiments.tangent_kernel("visible")]
    expected = [
        (plots.network_fixes(changes), 4 + 1),                  # a panel per fix, a colour bar
        (plots.tangent_kernel(kernels), 2 * 4 + 2),             # 2 setups x 4 panels, 2 bars
        (plots.drift_vs_lr(drift_results), 2),
        (plots.trajectories(traj), 5),                          # 2 broken axes (2 each), gain
        (plots.pareto(traj), 4),                                # 2 broken axes (2 each)
        (plots.heldout_drift(slice_result), 4 + 1),
        (plots.optimizer_order(order_result), 3),
    ]
    for fig, n_axes in expected:
        assert type(fig).__name__ == "Figure" and len(fig.axes) == n_axes
        assert fig.get_suptitle()                               # every figure states its takeaway


def test_fix_plot_functions_draw_into_given_axes(plots, traj, order_result):
    from matplotlib.figure import Figure
    fig = Figure()
    assert plots.optimizer_order(order_result, axes=fig.subplots(1, 3)) is fig
    assert plots.pareto(traj, axes=Figure().subplots(1, 4)).axes
    with pytest.raises(ValueError, match="axes: expected 5"):
        plots.trajectories(traj, axes=fig.subplots(1, 2))


def test_network_fixes_what_each_fix_moves(changes):
    naive, masked, freeze, proj = (changes[r]["delta"]
                                   for r in ("naive", "masked", "freeze", "project"))
    for key in naive:                                           # "= naive, bit for bit"
        assert np.array_equal(naive[key], masked[key])
    assert np.all(naive["W1"] > 0) and np.all(naive["b1"] > 0)  # the shared layer moves
    assert np.all(naive["W2"][:, 0] == 0) and naive["b2"][0] == 0   # out1's own weights do not
    assert np.all(freeze["W1"] == 0) and np.all(freeze["b1"] == 0)  # "only out2's weights move"
    assert np.all(freeze["W2"][:, 0] == 0) and freeze["b2"][0] == 0
    assert np.all(freeze["W2"][:, 1] > 0) and freeze["b2"][1] > 0
    assert np.all(proj["W2"][:, 0] > 0) and proj["b2"][0] > 0   # out1's weights move to cancel
    assert changes["freeze"]["drift_batch"] == 0.0
    assert 0 < changes["project"]["drift_batch"] < 0.1 * changes["naive"]["drift_batch"]
    assert changes["naive"]["drift_batch"] == changes["masked"]["drift_batch"] > 0


def test_tangent_kernel_output_layer_share_is_exactly_zero_on_both_setups():
    for setup in ("seed", "visible"):
        res = experiments.tangent_kernel(setup)
        shares = res["shares"]
        L = max(l for l in shares if l != "total")
        assert np.all(shares[L] == 0.0)
        assert all(res["norms"][l] > 0 for l in range(1, L))
        np.testing.assert_allclose(sum(shares[l] for l in range(1, L)), shares["total"],
                                   rtol=0, atol=1e-14 * np.max(np.abs(shares["total"])))


def test_drift_vs_lr_slopes_zeros_and_round_off(plots, drift_results):
    small = np.asarray(figures.DRIFT_LRS) <= 1e-3
    for res in drift_results:
        lrs = res["lrs"]
        # written "1.00" and "2.00" in the figure and the README
        slope = lambda rule: experiments.loglog_slope(lrs[small], res[rule]["drift_batch"][small])
        assert abs(slope("naive") - 1) < 0.005 and abs(slope("project") - 2) < 0.005
        assert np.all(res["freeze"]["drift_batch"] == 0.0)                # "exactly (0.0)"
        assert np.max(res["span"]["drift_batch"]) <= 1e-12                # "to round-off"
        assert np.max(res["project+restore"]["drift_batch"]) <= 1e-12
        for rule in ("masked", "penalty"):                                # drawn as "= naive"
            assert np.array_equal(res[rule]["drift_batch"], res["naive"]["drift_batch"])
    fig = plots.drift_vs_lr(drift_results)
    freeze = [l for l in fig.axes[0].get_lines() if l.get_label().startswith("freeze")]
    assert len(freeze) == 1 and np.all(freeze[0].get_ydata() == ZERO_FLOOR)   # the "0" row


def test_trajectories_and_pareto_claims(traj):
    assert len(traj["steps"]) == figures.STEPS + 1 == 201 and traj["lr"] == 0.01
    end = {rule: {k: v[-1] for k, v in traj[rule].items()} for rule in experiments.DIRECTIONS}
    assert np.all(traj["freeze"]["drift_batch"] == 0.0)
    assert np.all(traj["freeze"]["drift_unseen"] == 0.0)
    assert np.max(traj["project+restore"]["drift_batch"]) <= 1e-12         # "on the batch"
    assert end["project+restore"]["drift_unseen"] > end["naive"]["drift_unseen"]   # "even more"
    assert end["penalty"]["drift_batch"] < 0.5 * end["naive"]["drift_batch"]       # "pulls back"
    assert end["penalty"]["drift_batch"] > 0.1                                     # "only"
    for key in ("drift_batch", "drift_unseen", "gain"):
        assert np.array_equal(traj["masked"][key], traj["naive"][key])
    # pareto.png: "freezing ... with half the gain", "projection + restore keeps the gain"
    assert 0.4 < end["freeze"]["gain"] / end["naive"]["gain"] < 0.5
    assert end["project+restore"]["gain"] > 0.95 * end["naive"]["gain"]
    assert end["project+restore"]["drift_unseen"] == max(e["drift_unseen"] for e in end.values())


def test_heldout_drift_claims(slice_result):
    r = slice_result
    assert r["steps"] == 1 and r["lr"] == 0.01 and r["project"].shape == (41, 41)
    assert np.all(r["freeze"] == 0.0)                                      # "exactly"
    assert r["span"].max() <= 1e-12 and np.any(r["span"] == 0.0)           # "up to round-off"
    assert r["project"].min() > 1e-3                                       # "moves it everywhere"
    _, X, _ = experiments.SETUPS["visible"]()
    assert np.array_equal(r["batch"], X[:, :2])
    assert np.min(np.abs(X[:, 2] - 0.5)) > 0.01                            # no batch point on it


def test_optimizer_order_claims(order_result):
    r = order_result
    wrong, right = (r[name] for name in experiments.OPTIMIZER_ORDERS)
    assert abs(experiments.loglog_slope(r["lrs"], wrong["one_step"], 1e-3) - 1) < 0.05
    assert abs(experiments.loglog_slope(r["lrs"], right["one_step"], 1e-3) - 2) < 0.05
    assert np.all(right["drift"][1:] < wrong["drift"][1:])
    assert wrong["gain"][-1] > 0 and right["gain"][-1] > 0                  # "both learn"


def test_drift_order_classifies():
    lrs = np.logspace(-5, -3, 5)
    assert experiments.drift_order(lrs, np.zeros(5)) == ("exactly 0", None)
    assert experiments.drift_order(lrs, [0, 1e-16, 0, 2e-15, 0]) == ("round-off", None)
    label, slope = experiments.drift_order(lrs, 3 * lrs ** 2)
    assert label == "O(lr^2)" and slope == pytest.approx(2.0)
    assert experiments.drift_order(lrs, 0.5 * lrs)[0] == "O(lr)"
    with pytest.raises(ValueError, match="values"):
        experiments.loglog_slope(lrs, [1, 0, 1, 1, 1])
