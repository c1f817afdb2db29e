"""The real task: the digits loader, and every claim tutorial 08 and the README make about the
continual-learning run, asserted on the very run the figures draw: ``continual.run()`` as the
figures command computes it (``figures.continual_run``)."""
import importlib.util
import json
from pathlib import Path

import numpy as np
import pytest

from mlp_ref import data, fixes, plots
from mlp_ref.classroom import figures, report, tutorial
from mlp_ref.measurements import continual
from mlp_ref.measurements.continual import find

ROOT = Path(__file__).resolve().parents[1]


# -- the data ---------------------------------------------------------------------------------
def test_digits_are_the_1797_uci_images():
    images, labels = data.digits_arrays()
    assert images.shape == (1797, 64) and labels.shape == (1797,)
    assert images.dtype == np.uint8 and images.min() == 0 and images.max() == 16
    assert sorted(np.unique(labels)) == list(range(10))
    assert np.all(np.bincount(labels) >= 170)        # about 180 of each digit


@pytest.mark.skipif(importlib.util.find_spec("sklearn") is None,
                    reason="scikit-learn not installed: nothing to compare the shipped copy with")
def test_shipped_digits_equal_scikit_learns_copy():
    """Read from scikit-learn's own file (without importing scikit-learn, which takes seconds)."""
    for ours, theirs in zip(data.digits_arrays("sklearn"), data.digits_arrays("shipped")):
        assert ours.dtype == theirs.dtype and np.array_equal(ours, theirs)


def test_digits_split_is_stratified_disjoint_and_seeded():
    X, y, T, t = data.digits()
    images, labels = data.digits_arrays()
    assert len(X) + len(T) == 1797
    for digit in range(10):
        count = np.sum(labels == digit)
        assert np.sum(t == digit) == round(count / 3) and np.sum(y == digit) + np.sum(t == digit) == count
    rows = {row.tobytes() for row in images.astype(np.float64)}
    assert {r.tobytes() for r in X} | {r.tobytes() for r in T} <= rows
    train_rows = {(r.tobytes(), c) for r, c in zip(X, y)}
    assert sum((r.tobytes(), c) in train_rows for r, c in zip(T, t)) <= 3     # only duplicates
    again = data.digits()
    assert all(np.array_equal(a, b) for a, b in zip(again, (X, y, T, t)))
    other = data.digits(seed=1)
    assert not np.array_equal(other[3], t) or not np.array_equal(other[2], T)


@pytest.mark.parametrize("kwargs, name", [({"source": "web"}, "source:"),
                                          ({"test_fraction": 1.0}, "test_fraction:"),
                                          ({"test_fraction": 0.0}, "test_fraction:")])
def test_digits_bad_arguments_are_named(kwargs, name):
    with pytest.raises(ValueError, match=name):
        data.digits(**kwargs)


def test_digits_split_needs_every_digit_in_both_sets():
    """The docstring: refused "below about 0.003 or above about 0.997"."""
    for fraction in (0.0028, 0.9975):
        with pytest.raises(ValueError, match="^test_fraction: expected a fraction that leaves images of every digit"):
            data.digits(test_fraction=fraction)
    for fraction in (0.003, 0.997):
        X, y, T, t = data.digits(test_fraction=fraction)
        assert set(y) == set(t) == set(range(10))


def test_inputs_are_centred_on_the_old_training_images():
    d = continual.tasks()
    assert np.max(np.abs(d["X_old"].mean(axis=0))) < 1e-12
    assert set(d["y_old"]) == set(continual.OLD) and set(d["y_new"]) == set(continual.NEW)


def test_smaller_memories_are_part_of_larger_ones():
    d = continual.tasks()
    assert np.array_equal(continual.memory(d, 32)[:8], continual.memory(d, 8))


# -- the run ----------------------------------------------------------------------------------
@pytest.fixture(scope="session")
def res():
    """``continual.run()``: the run that continual_tradeoff.png and continual_steps.png draw
    (``figures.continual_run``, the figures' own measurement)."""
    from mlp_ref.classroom import figures
    return figures.continual_run()


def test_the_run_has_every_fix_and_memory_size(res):
    got = [(r["fix"], r["m"]) for r in res["runs"]]
    assert got == [(f, m or 0) for f, m in continual.plan()]
    assert res["sizes"] == [64, 64, 64, 10] and res["n_params"] == 8970
    assert all(len(r["old_acc"]) == continual.SECOND_STEPS + 1 for r in res["runs"])


def test_first_task_is_learnt_and_naive_forgets_it(res):
    naive = find(res, "naive")
    assert round(100 * res["first"]) == 98
    assert round(100 * naive["old_acc"][-1]) == 3 and naive["new_acc"][-1] > 0.9
    assert all(r["old_acc"][0] == res["first"] for r in res["runs"])


def test_freeze_and_towers_hold_outputs_0_to_4_exactly_yet_forget(res):
    for fix in ("freeze", "towers"):
        r = find(res, fix)
        assert r["drift_max"] == 0.0 and r["drift_mean"] == 0.0
        assert r["old_acc"][-1] < res["first"] - 0.04          # the new outputs rise on old images
        assert r["old_as_new"] > 0.04
    held = [(r["fix"], r["m"]) for r in res["runs"] if np.all(r["drift_max"] == 0.0)]
    assert ("freeze", 0) in held and ("towers", 0) in held and res["exactly_held"] == held
    assert find(res, "freeze")["new_acc"][-1] < find(res, "towers")["new_acc"][-1] \
        < find(res, "naive")["new_acc"][-1]


def test_projection_holds_the_memory_and_off_it_better_as_m_grows(res):
    ms = res["memory_sizes"]
    p = [find(res, "project", m) for m in ms]
    assert all(a["drift_mean"] > b["drift_mean"] and a["drift_max"] > b["drift_max"]
               for a, b in zip(p, p[1:]))
    assert all(a["old_acc"][-1] < b["old_acc"][-1] for a, b in zip(p, p[1:]))
    naive = find(res, "naive")
    assert p[0]["drift_mean"] > 0.5 * naive["drift_mean"]     # m = 8: not much less than naive
    assert p[-1]["drift_mean"] < 0.02 * naive["drift_mean"]
    assert all(1e-4 < r["memory_drift"] < 1e-1 for r in p)    # O(lr^2) terms, accumulated
    assert all(r["memory_drift"] < r["drift_max"] for r in p)


def test_restoring_holds_the_memory_to_round_off_and_changes_nothing_off_it(res):
    for m in continual.RESTORE_SIZES:
        r, p = find(res, "project+restore", m), find(res, "project", m)
        assert r["converged"] and r["memory_drift"] <= 1e-12
        assert abs(r["drift_mean"] - p["drift_mean"]) < 0.01 * p["drift_mean"]


def test_span_projection_freezes_the_layers_its_memory_spans(res):
    large = max(res["memory_sizes"])
    ranks = res["input_ranks"]
    assert ranks[large][1:] == [65, 65] and ranks[large][0] < 65
    assert all(max(r) == m for m, r in ranks.items() if m < 65)
    s, freeze = find(res, "span", large), find(res, "freeze")
    assert np.array_equal(s["old_acc"], freeze["old_acc"])
    assert np.array_equal(s["new_acc"], freeze["new_acc"])
    assert ("span", large) in res["as_freeze"] and ("naive", 0) not in res["as_freeze"]
    for m in res["memory_sizes"]:
        assert find(res, "span", m)["memory_drift"] < 1e-12
    spans = [find(res, "span", m) for m in res["memory_sizes"]]
    assert all(a["new_acc"][-1] > b["new_acc"][-1] for a, b in zip(spans, spans[1:]))


def test_penalty_at_its_stable_weight_holds_less_than_projection(res):
    for m in res["memory_sizes"]:
        pen = find(res, "penalty", m)
        assert continual.LR * pen["lam"] * pen["lam_max"] == pytest.approx(1.0)   # < 2: stable
        assert pen["old_acc"][-1] < find(res, "project", m)["old_acc"][-1]
    lams = [find(res, "penalty", m)["lam"] for m in res["memory_sizes"]]
    assert all(a > b for a, b in zip(lams, lams[1:]))


def test_penalty_above_its_stability_limit_diverges():
    """lr lambda lambda_max > 2: the pull alone overshoots, more every step."""
    net, d = continual.first_task(steps=5)
    mem = continual.memory(d, 8)
    lam, lam_max = continual.penalty_weight(net, mem, continual.LR, safety=3.0)
    ref = net(mem)[:, list(continual.OLD)] + 0.01
    model, errors = net.copy(), []
    for _ in range(6):
        errors.append(np.max(np.abs(model(mem)[:, list(continual.OLD)] - ref)))
        model.step(fixes.penalty(model, mem, np.zeros((8, 10)), keep=continual.OLD, ref=ref,
                                 lam=lam), continual.LR)
    assert errors[-1] > 10 * errors[0]


def test_time_and_memory_are_measured(res):
    assert all(r["seconds_per_step"] > 0 and r["peak_bytes"] > 0 for r in res["runs"])
    large = max(res["memory_sizes"])
    # the Gram of 5 m constraints, 8 (5 m)^2 bytes, is held at the peak
    assert find(res, "project", large)["peak_bytes"] > 8 * (5 * large) ** 2


def test_fast_and_reference_tiers_train_alike():
    net, d = continual.first_task(steps=10)
    a = continual.second_task(net, d, "project+restore", m=8, steps=3, tier="fast")
    b = continual.second_task(net, d, "project+restore", m=8, steps=3, tier="reference")
    assert np.array_equal(a["old_acc"], b["old_acc"]) and np.array_equal(a["new_acc"], b["new_acc"])
    assert a["drift_max"] == pytest.approx(b["drift_max"], rel=1e-9)


@pytest.mark.parametrize("kwargs, name", [({"fix": "mask"}, "fix:"),
                                          ({"fix": "project", "m": 0}, "m:"),
                                          ({"fix": "naive", "tier": "gpu"}, "tier:")])
def test_second_task_bad_arguments_are_named(kwargs, name):
    net, d = continual.first_task(steps=1)
    with pytest.raises(ValueError, match=name):
        continual.second_task(net, d, steps=1, **kwargs)


# -- the cost sweep shipped with the package -----------------------------------------------------
@pytest.fixture(scope="module")
def cost():
    """The arrays continual_cost.png draws (the figures' own cached copy)."""
    return figures.continual_cost()


def test_cost_sweep_covers_8_to_512_images(cost):
    assert list(cost["m"]) == list(continual.COST_SIZES)
    assert np.array_equal(cost["constraints"], 5 * cost["m"])
    assert np.array_equal(cost["gram_bytes"], 8 * cost["constraints"] ** 2)
    assert np.all(cost["peak_reference"] >= cost["gram_bytes"])


def test_cost_sweep_is_what_the_command_writes_whole_saying_each_size(tmp_path, capsys):
    out = tmp_path / "cost.json"
    res = continual.main(["--sizes", "8,16", "--repeats", "1", "--json", str(out)])
    saved = json.loads(out.read_text())
    assert saved["m"] == [8, 16] and saved["gram_bytes"] == res["gram_bytes"]
    assert set(saved) == set(continual.load_cost())
    err = capsys.readouterr().err.splitlines()
    assert [line.split(":")[0] for line in err[:2]] == ["[1/2] m = 8", "[2/2] m = 16"]
    assert err[-1] == f"wrote {out}"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["cost.json"]      # no temporary left


# -- what the README, benchmarks/README.md and tutorial 08 say ---------------------------------
def _flat(text):
    return " ".join(text.split())


def pct(x):
    return f"{100 * x:.0f}%"


def test_readme_states_the_run(res):
    readme = _flat((ROOT / "README.md").read_text())
    naive, freeze, towers = (find(res, f) for f in ("naive", "freeze", "towers"))
    p = [find(res, "project", m) for m in res["memory_sizes"]]
    assert res["memory_sizes"] == (8, 32, 128) and continual.SECOND_STEPS == 20
    claims = [
        f"{pct(res['first'])} of the old test digits right after the first task, "
        f"{pct(naive['old_acc'][-1])} after the second",
        f"{pct(freeze['old_acc'][-1])} and {pct(towers['old_acc'][-1])} of the old digits stay right",
        f"the new digits only the old features ({pct(freeze['new_acc'][-1])} right), a tower "
        f"learns them ({pct(towers['new_acc'][-1])})",
        "falls from " + " to ".join(f"{r['drift_mean']:.2g}" for r in p)
        + f" (naive: {naive['drift_mean']:.2g})",
        "and " + ", ".join(pct(r["old_acc"][-1]) for r in p) + " of the old digits stay right, at "
        + ", ".join(pct(r["new_acc"][-1]) for r in p) + " on the new",
    ]
    for claim in claims:
        assert claim in readme, claim
    assert max(find(res, "penalty", m)["old_acc"][-1] for m in res["memory_sizes"]) <= 0.5


def _cost_sentence(cost):
    i, j = list(cost["m"]).index(128), list(cost["m"]).index(512)
    big = cost["m"] >= 64
    half = int(cost["constraints"][np.flatnonzero(cost["eigh"] > 0.5 * cost["reference"])[0]])
    ratio = cost["peak_reference"][-1] / cost["gram_bytes"][-1]
    slope = np.polyfit(np.log(cost["constraints"][big]), np.log(cost["reference"][big]), 1)[0]
    return (f"takes {cost['reference'][i]:.2f} s at m = 128 and {cost['reference'][j]:.1f} s at "
            f"m = 512 in the reference (a fitted slope of "
            f"{slope:.1f} in n "
            f"from m = 64 on), {cost['fast'][i]:.2f} s and {cost['fast'][j]:.2f} s in the fast "
            f"tier (`fast.project`: one Cholesky of the shifted Gram); from n = {half} constraints on, the "
            f"solve takes more than half of the reference's time, and at n = 2,560 its peak "
            f"memory, {cost['peak_reference'][-1] / 2**20:.0f} MiB, is {ratio:.1f} times the "
            f"Gram's 50 MiB.")


def test_the_performance_write_up_states_the_cost_sweep(cost):
    """benchmarks/README.md's "Holding 5 m constraints" (the README's cost paragraph moved there)."""
    text = _flat((ROOT / "benchmarks" / "README.md").read_text())
    assert _cost_sentence(cost) in text, _cost_sentence(cost)
    assert "which outgrows the Gram's n² products from n = 160 constraints on" in text
    assert _from_where(cost["constraints"], cost["eigh"] > cost["gram"]) == 160
    assert cost["gram_bytes"][-1] == 50 * 2**20


def _from_where(sizes, holds):
    """The smallest size from which ``holds`` is true at every size (None if not at the largest)."""
    sizes, holds = list(sizes), list(holds)
    start = None
    for size, ok in zip(sizes, holds):
        start = (start or size) if ok else None
    return int(start) if start is not None else None


def _tutorial_text():
    path = ROOT / "tutorials" / "08_a_real_task.py"
    return _flat(" ".join(c.source for c in tutorial.cells(path.read_text())
                          if c.kind == "markdown"))


def test_tutorial_08_says_what_the_run_does(res):
    text = _tutorial_text()
    naive, freeze, towers = (find(res, f) for f in ("naive", "freeze", "towers"))
    p = {m: find(res, "project", m) for m in res["memory_sizes"]}
    span = {m: find(res, "span", m) for m in res["memory_sizes"]}
    claims = [
        f"{continual.FIRST_STEPS} full-batch steps, lr {continual.LR:g}",
        f"After the first task, {pct(res['first'])} of the old test digits are right",
        f"## 2. Every fix, {continual.SECOND_STEPS} steps on digits 5-9",
        "the 300 old *test* images",
        f"A plain step learns the new digits ({pct(naive['new_acc'][-1])} right after 20 steps) "
        f"and forgets the old: {pct(naive['old_acc'][-1])} of them",
        f"moved by {naive['drift_mean']:.2f} on average, up to {naive['drift_max']:.2f}",
        f"to {pct(freeze['old_acc'][-1])} and {pct(towers['old_acc'][-1])}:",
        f"({pct(freeze['old_as_new'])} and {pct(towers['old_as_new'])} of the old test images "
        f"end up read as a new digit)",
        f"({pct(freeze['new_acc'][-1])} of the new digits right after 20 steps); a tower learns "
        f"new features ({pct(towers['new_acc'][-1])})",
        f"accumulated ({p[8]['memory_drift']:.0e} at $m = 8$)",
        f"with $m = 8$ the old test images drift by {p[8]['drift_mean']:.2g} on average, a third "
        f"less than naive's {naive['drift_mean']:.2g} (and at most {p[8]['drift_max']:.2f}, more than "
        f"naive's {naive['drift_max']:.2f}), and {pct(p[8]['old_acc'][-1])} stay right",
        "the 128 memory images leave 11 pixels constant",
        "slower than the Gram's $n^2$ products from $n = 160$ on, and more than half of the "
        "reference's time from $n = 640$ on",
        "more than half of its time from $m = 64$ on",
        f"with $m = 32$, {p[32]['drift_mean']:.2g} and {pct(p[32]['old_acc'][-1])}; with "
        f"$m = 128$, {p[128]['drift_mean']:.2g} and {pct(p[128]['old_acc'][-1])}, at "
        f"{pct(p[128]['new_acc'][-1])} on the new digits",
        "With $m = 128$ the ranks are " + ", ".join(map(str, res["input_ranks"][128])) + " of 65",
        f"with $m = 32$, {pct(span[32]['old_acc'][-1])} of the old digits and "
        f"{pct(span[32]['new_acc'][-1])} of the new",
        f"({find(res, 'penalty', 128)['lam_max']:.0f} at $m = 128$)",
        "at most 50% of the old digits stay right",
        f"same test accuracies at all {continual.SECOND_STEPS + 1} points",
        "the 1,797 handwritten digits",
        "(50 MiB at $m = 512$)",
    ]
    for claim in claims:
        assert claim in text, claim
    assert 0.6 < p[8]["drift_mean"] / naive["drift_mean"] < 0.75            # "a third less"
    assert p[8]["drift_max"] > naive["drift_max"]
    mem = continual.memory(continual.tasks(), 128)
    constant = int(np.sum(np.ptp(mem, axis=0) == 0))
    assert constant == 11 and res["input_ranks"][128][0] == 65 - constant
    cost = continual.constraint_cost_data(continual.load_cost())
    assert _from_where(cost["constraints"], cost["eigh"] > cost["gram"]) == 160
    assert _from_where(cost["constraints"], cost["eigh"] > 0.5 * cost["reference"]) == 640
    assert _from_where(cost["m"], cost["gram"] + cost["cholesky"] > 0.5 * cost["fast"]) == 64
    assert len(data.digits_arrays()[1]) == 1797 and res["n_test"]["old"] == 300
    assert abs(res["n_train"]["new"] - 600) < 10          # "the ~600 images of 5-9"
    assert all(r["memory_drift"] <= 1e-12 for r in res["runs"] if r["fix"] == "project+restore")


# -- the figures --------------------------------------------------------------------------------
def test_the_continual_tables_legend_says_what_every_column_holds(res):
    text = report.format_continual(res)
    header, *rows = text.splitlines()
    legend = [line for line in rows if line.split()[0] not in continual.FIXES]
    said = " ".join(legend)
    for column in ("old acc", "new acc", "max|d out0-4|", "mean", "on memory", "ms/step", "peak MiB"):
        assert column in header and column in said, column
    assert f"on the {res['n_test']['old']} old test images" in said and "fast tier" in said
    assert "ms/step (the mean over every step but the first)" in said     # the first is traced


def test_continual_plots_draw_into_given_axes_and_title_their_data(res, cost):
    from matplotlib.figure import Figure
    for plot, arg in ((plots.continual_tradeoff, res), (plots.continual_steps, res),
                      (plots.continual_cost, cost)):
        fig = Figure()
        assert plot(arg, axes=fig.subplots(1, 2)) is fig and len(fig.axes) == 2
        with pytest.raises(ValueError, match="^axes: expected 2"):
            plot(arg, axes=Figure().subplots(1, 3))
    naive = find(res, "naive")
    steps = plots.continual_steps(res)
    assert f"{naive['old_acc'][-1]:.0%} after {continual.SECOND_STEPS} steps" in steps.get_suptitle()
    big = cost["m"] >= 64
    slope = np.polyfit(np.log(cost["constraints"][big]), np.log(cost["reference"][big]), 1)[0]
    titles = [ax.get_title() for ax in plots.continual_cost(cost).axes]
    assert f"time: slope {slope:.1f} over the last {int(big.sum())} sizes" in titles


@pytest.mark.parametrize("argv, said", [
    (["--sizes", "8,16,"], "--sizes: expected distinct sizes, positive whole numbers"),
    (["--sizes", "-5"], "--sizes: expected distinct sizes, positive whole numbers"),
    (["--sizes", "8,8"], "--sizes: expected distinct sizes"),
    (["--hidden", "0"], "--hidden: expected a whole number >= 1"),
    (["--repeats", "0"], "--repeats: expected a whole number >= 1"),
    (["--json", ""], "--json: expected a file path, got ''"),
    (["--sizes", "8,602"], "--sizes: expected memories of at most 601 images"),
    (["--json", __file__ + "/cost.json"], "is a file, not a folder"),
])
def test_the_cost_sweeps_command_line_refuses_bad_arguments_before_any_work(argv, said, capsys):
    with pytest.raises(SystemExit) as info:
        continual.main(argv)
    assert info.value.code == 2 and said in capsys.readouterr().err


def test_a_memory_larger_than_the_old_task_is_refused():
    with pytest.raises(ValueError, match=r"^m: expected a memory of 1 to 601 images"):
        continual.memory(continual.tasks(), 602)
