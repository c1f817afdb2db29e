"""The field's protocol on permuted digits (measurements/permuted.py): ACC, BWT, forgetting and
FWT against their definitions (a matrix checked by hand), seeds and their spread, the tasks, what
each method holds on a small run, and (slow) every number tutorial 09 and the README state,
asserted on the run they come from (``figures.permuted_run``, the very run field_accuracy.png and
field_acc_bwt.png are drawn from), and continual-table's output."""
import json

import numpy as np
import pytest

from mlp_ref.classroom import figures
from mlp_ref.measurements import permuted


def test_acc_and_bwt_are_their_definitions():
    rng = np.random.default_rng(0)
    for T in (2, 3, 5):
        R = rng.random((T, T))
        acc, bwt = permuted.acc_bwt(R)
        assert acc == pytest.approx(sum(R[T - 1, j] for j in range(T)) / T, rel=1e-15)
        assert bwt == pytest.approx(sum(R[T - 1, j] - R[j, j] for j in range(T - 1)) / (T - 1), rel=1e-14)
    no_forgetting = np.tril(np.ones((4, 4))) * 0.9
    assert permuted.acc_bwt(no_forgetting) == (0.9, 0.0)


#: A hand-made run of four tasks whose metrics a reader checks with a pencil (rows: after task i;
#: columns: task j), and the untrained network's accuracy b on each task.
HAND_R = np.array([[0.90, 0.10, 0.20, 0.10],
                   [0.95, 0.80, 0.30, 0.20],
                   [0.60, 0.85, 0.70, 0.10],
                   [0.70, 0.90, 0.50, 0.60]])
HAND_B = np.array([0.10, 0.10, 0.10, 0.20])


def test_forgetting_is_each_earlier_tasks_fall_from_its_best_by_hand():
    """Task 0: best 0.95 (after task 1), last 0.70: fell 0.25. Task 1: best 0.90 is its last:
    0 (Chaudhry et al.'s max over the earlier rows alone, 0.85, would count -0.05; Mammoth's max
    includes the last row). Task 2: best 0.70, last 0.50: 0.20. F = (0.25 + 0 + 0.20) / 3 = 0.15,
    while BWT = ((0.70 - 0.90) + (0.90 - 0.80) + (0.50 - 0.70)) / 3 = -0.10."""
    assert permuted.forgetting(HAND_R) == pytest.approx(0.15, abs=1e-15)
    assert permuted.acc_bwt(HAND_R)[1] == pytest.approx(-0.10, abs=1e-15)
    no_rise = np.tril(np.full((4, 4), 0.9)) - np.tril(np.full((4, 4), 0.1), -1)   # each falls once, by 0.1
    assert permuted.forgetting(no_rise) == pytest.approx(-permuted.acc_bwt(no_rise)[1], abs=1e-15)


def test_forward_transfer_is_each_task_before_its_training_against_the_untrained_net_by_hand():
    """GEM's FWT: task 1 before it is learnt, R[0, 1] = 0.10 against b 0.10: 0; task 2, R[1, 2]
    = 0.30 against 0.10: +0.20; task 3, R[2, 3] = 0.10 against 0.20: -0.10. FWT = 0.10 / 3."""
    assert permuted.forward_transfer(HAND_R, HAND_B) == pytest.approx(0.10 / 3, abs=1e-15)


def test_a_difference_exceeds_the_spread_when_the_intervals_do_not_overlap():
    result = {"methods": {"a": {"ACC": 0.60, "ACC_std": 0.02}, "b": {"ACC": 0.55, "ACC_std": 0.02},
                          "c": {"ACC": 0.54, "ACC_std": 0.01}, "d": {"ACC": 0.40, "ACC_std": None}}}
    assert permuted.exceeds_spread(result, "a", "b")             # 0.05 > 0.02 + 0.02
    assert not permuted.exceeds_spread(result, "b", "c")         # 0.01 < 0.02 + 0.01
    assert not permuted.exceeds_spread(result, "c", "d")         # one run: no spread to compare with
    assert [(a, b, e) for a, b, _, e in permuted.separations(result)] == \
        [("a", "b", True), ("b", "c", False), ("c", "d", False)]


def test_seeds_are_runs_of_their_own_and_the_summary_is_their_mean_and_spread():
    """Two seeds of A-GEM on a small protocol: seed 1 is the run of its own data and start (its
    split, permutations, initialisation, memory), unlike seed 0's; the summary is their mean and
    sample std (ddof 1: |x0 - x1| / sqrt 2). One seed's summary is that run's own numbers."""
    kw = {"hidden": 8, "steps": 4, "m": 3}
    two = permuted.run(methods=("agem",), tasks=2, seeds=2, **kw)
    alone = permuted.run_method("agem", permuted.task_data(2, seed=1), seed=1, **kw)
    r = two["methods"]["agem"]
    runs = r["runs"]
    assert [x["seed"] for x in runs] == [0, 1] and not np.array_equal(runs[0]["R"], runs[1]["R"])
    assert np.array_equal(runs[1]["R"], alone["R"])
    for key in ("ACC", "BWT", "F"):
        values = [x[key] for x in runs]
        assert r[key] == pytest.approx(sum(values) / 2, abs=1e-15)
        assert r[f"{key}_std"] == pytest.approx(abs(values[0] - values[1]) / np.sqrt(2), abs=1e-15)
    assert r["peak_mib"] > 0 and r["seconds"] > 0
    single = permuted.summarise([{**alone, "peak_mib": None}])
    assert single["R"] is alone["R"] and (single["ACC"], single["BWT"]) == (alone["ACC"], alone["BWT"])
    assert single["ACC_std"] is None and single["peak_mib"] is None
    doc = permuted.as_json(two)
    assert set(doc["methods"]["agem"]) >= {"R", "ACC", "ACC_std", "BWT", "BWT_std", "F", "F_std", "FWT",
                                           "seconds", "peak_mib", "runs"}
    back = permuted.from_json(doc)
    assert np.array_equal(back["methods"]["agem"]["runs"][1]["R"], runs[1]["R"])


def test_every_task_is_the_same_images_through_its_own_fixed_permutation():
    perms = permuted.permutations()
    assert perms.shape == (permuted.TASKS, 64)
    assert all(sorted(p) == list(range(64)) for p in perms)
    assert len({tuple(p) for p in perms}) == permuted.TASKS
    assert np.array_equal(perms, permuted.permutations())              # seeded: the same twice
    tasks = permuted.task_data()
    for task, p in zip(tasks[1:], perms[1:]):
        first = tasks[0]
        # undo each permutation: the same (centred, scaled) image under every task
        assert np.array_equal(task["X"][:, np.argsort(p)], first["X"][:, np.argsort(perms[0])])
        assert np.array_equal(task["y"], first["y"]) and np.array_equal(task["t"], first["t"])


@pytest.fixture(scope="module")
def small():
    """Every method on three tasks, a narrow network and 12 steps each: a second or two."""
    tasks = permuted.task_data(tasks=3)
    return {m: permuted.run_method(m, tasks, hidden=16, steps=12, m=5) for m in permuted.METHODS}


def test_every_method_fills_its_accuracy_matrix_and_reports_its_own_acc_and_bwt(small):
    for name, r in small.items():
        R = r["R"]
        assert R.shape == (3, 3) and np.all((0 <= R) & (R <= 1)), name
        assert (r["ACC"], r["BWT"]) == permuted.acc_bwt(R), name
        assert (r["F"], r["FWT"]) == (permuted.forgetting(R), permuted.forward_transfer(R, r["b"])), name
    assert all(r["b"] == small["naive"]["b"] for r in small.values())     # one start, one b


def test_gpm_at_threshold_one_freezes_what_it_has_seen_and_forgets_nothing():
    """Bases of every layer's inputs on a task's 1,198 training images span all that these
    inputs span (the pixels and the bias: rank 62 of 65, three pixels constant; the hidden
    layers: 17 of 17): the later tasks move no layer input of task 1's images beyond round-off,
    so every accuracy of task 1 stays, bit for bit in R."""
    tasks = permuted.task_data(tasks=3)
    r = permuted.run_method("gpm", tasks, hidden=16, steps=12, threshold=1.0)
    X1 = np.hstack([tasks[0]["X"], np.ones((len(tasks[0]["X"]), 1))])
    assert r["ranks"][0] == [np.linalg.matrix_rank(X1), 17, 17] == [62, 17, 17]
    assert np.all(r["R"][:, 0] == r["R"][0, 0])
    assert r["BWT"] == 0.0


def test_joint_sees_every_task_so_far_and_naive_only_the_last(small):
    """After the first task both have seen the same data amount; from then on naive trains
    only on the newest task, joint on all: joint keeps more of task 1."""
    assert small["joint"]["R"][-1, 0] > small["naive"]["R"][-1, 0]


# -- the protocol's full run: tutorial 09's numbers -------------------------------------------
@pytest.fixture(scope="module")
def full():
    return figures.permuted_run()


def _r(full, name):
    return full["methods"][name]


@pytest.mark.slow
def test_tutorial_09_numbers(full):
    """What tutorial 09 (sections 2, 3 and 5) and the README say of the table, on the run
    field_accuracy.png is drawn from (the shipped five seeds: reading it costs nothing)."""
    m = full["methods"]
    acc = {k: round(v["ACC"], 2) for k, v in m.items()}
    bwt = {k: round(v["BWT"], 2) for k, v in m.items()}
    std = {k: (round(v["ACC_std"], 2), round(v["BWT_std"], 2)) for k, v in m.items()}
    s = full["setup"]
    assert (s["tasks"], s["hidden"], s["steps"], s["lr"], s["memory"], s["threshold"], s["seeds"]) == \
        (5, 100, 60, 2.0, 20, 0.97, 5)
    assert s["n_train"] == 1198
    assert m["project"]["constraints"] == 800
    diag = np.diag(m["naive"]["R"])
    assert 0.93 <= round(diag.min(), 2) and round(diag.max(), 2) <= 0.94          # 93-94%
    assert (acc["naive"], bwt["naive"], std["naive"]) == (0.38, -0.70, (0.04, 0.05))
    assert (acc["ewc"], bwt["ewc"], std["ewc"]) == (0.43, -0.63, (0.03, 0.05))
    assert (acc["agem"], bwt["agem"], std["agem"]) == (0.41, -0.66, (0.04, 0.06))
    assert (acc["gpm"], bwt["gpm"], std["gpm"]) == (0.62, -0.17, (0.03, 0.03))
    assert (acc["project"], bwt["project"], std["project"]) == (0.70, -0.23, (0.02, 0.02))
    assert (acc["joint"], std["joint"][0]) == (0.79, 0.01)
    assert (round(m["joint"]["BWT"], 3), round(m["joint"]["BWT_std"], 3)) == (-0.075, 0.004)
    assert round(m["gpm"]["R"][-1, -1], 2) == 0.55                  # GPM's diagonal at task 5
    assert np.all(np.diff(np.diag(m["gpm"]["R"])[1:]) < 0)          # ... falling from task 2 on
    assert round(np.diag(m["project"]["R"]).min(), 2) >= 0.84
    sequential = ("naive", "ewc", "agem", "gpm", "project")
    assert max(sequential, key=lambda k: m[k]["BWT"]) == "gpm"      # forgets least
    assert max(sequential, key=lambda k: m[k]["ACC"]) == "project"  # ends highest


@pytest.mark.slow
def test_what_the_spread_allows_on_the_shipped_table(full):
    """Tutorial 09 and the README: joint > project > GPM > {EWC, A-GEM, naive} in ACC with every
    one of these gaps beyond the spread (the intervals mean +- std apart); GPM's BWT above the
    projection's beyond it; EWC, A-GEM and naive not told apart (gaps 0.01 and 0.03), seed 0's EWC
    0.43 above A-GEM 0.42 noise; seed by seed EWC and A-GEM above naive in all five runs; F = -BWT
    to three decimals but joint's (0.076, 0.075); FWT +0.005 to +0.024; the projection over 3
    times any other's CPU time, and the most memory."""
    m = full["methods"]
    assert [(a, b, e) for a, b, _, e in permuted.separations(full)] == [
        ("joint", "project", True), ("project", "gpm", True), ("gpm", "ewc", True),
        ("ewc", "agem", False), ("agem", "naive", False)]
    assert permuted.exceeds_spread(full, "gpm", "project", key="BWT") and m["gpm"]["BWT"] > m["project"]["BWT"]
    for a, b in (("ewc", "agem"), ("agem", "naive"), ("ewc", "naive")):
        assert not permuted.exceeds_spread(full, a, b), (a, b)
    assert (round(m["ewc"]["ACC"] - m["agem"]["ACC"], 2), round(m["agem"]["ACC"] - m["naive"]["ACC"], 2)) == \
        (0.01, 0.03)
    assert (round(m["ewc"]["runs"][0]["ACC"], 2), round(m["agem"]["runs"][0]["ACC"], 2)) == (0.43, 0.42)
    for method in ("ewc", "agem"):
        assert all(x["ACC"] > n["ACC"] for x, n in zip(m[method]["runs"], m["naive"]["runs"])), method
    for name, r in m.items():
        if name != "joint":
            assert f"{r['F']:.3f}" == f"{-r['BWT']:.3f}", name
    assert (f"{m['joint']['F']:.3f}", f"{-m['joint']['BWT']:.3f}") == ("0.076", "0.075")
    fwt = [r["FWT"] for r in m.values()]
    assert (f"{min(fwt):+.3f}", f"{max(fwt):+.3f}") == ("+0.005", "+0.024")
    others = [r for k, r in m.items() if k != "project"]
    assert m["project"]["seconds"] > 3 * max(r["seconds"] for r in others)
    assert m["project"]["peak_mib"] > max(r["peak_mib"] for r in others)


@pytest.mark.slow
def test_the_shipped_table_is_the_protocols_run():
    """field_table.json (what the figures and tutorial 09 read) is ``permuted.run(seeds=5)`` rerun:
    the same protocol, every run's R within 2 of the 599 test images (a test image whose two
    largest outputs are within round-off of each other may go either way on another CPU after
    300 steps; on the machine that wrote it the runs are equal bit for bit), ACC and BWT to the
    two decimals the text quotes, and seed 0's ranks, weights and constraints."""
    shipped, fresh = permuted.load(), permuted.run(seeds=5, memory=False)
    assert {k: v for k, v in shipped["setup"].items()} == fresh["setup"]
    n_test = shipped["setup"]["n_test"]
    for name in permuted.METHODS:
        a, b = shipped["methods"][name], fresh["methods"][name]
        for x, y in zip(a["runs"], b["runs"]):
            assert np.abs(x["R"] - y["R"]).max() * n_test <= 2, (name, x["seed"])
        for key in ("ACC", "BWT", "ACC_std", "BWT_std"):
            assert round(a[key], 2) == round(b[key], 2), (name, key)
        for key in permuted.EXTRAS:
            assert (key in a) == (key in b), (name, key)
        if name == "ewc":
            np.testing.assert_allclose(a["lams"], b["lams"], rtol=1e-6)
        elif name == "gpm":
            assert a["ranks"] == [list(r) for r in b["ranks"]] or a["ranks"] == b["ranks"]
        elif name == "project":
            assert a["constraints"] == b["constraints"]


def test_the_shipped_table_reads_back_as_five_runs_and_their_summary():
    """Five seeds; each run's ACC, BWT, F and FWT are its R's (and b's); the summary's means,
    sample spreads and mean R are the runs' (to the round-off of a mean of five numbers in [-1, 1],
    a few eps)."""
    shipped = permuted.load()
    assert list(shipped["methods"]) == list(permuted.METHODS) and shipped["setup"]["seeds"] == 5
    for name, r in shipped["methods"].items():
        runs = r["runs"]
        assert [x["seed"] for x in runs] == [0, 1, 2, 3, 4], name
        for x in runs:
            assert (x["ACC"], x["BWT"]) == permuted.acc_bwt(x["R"]), name
            assert (x["F"], x["FWT"]) == (permuted.forgetting(x["R"]), permuted.forward_transfer(x["R"], x["b"]))
        tol = 8 * np.finfo(float).eps
        np.testing.assert_allclose(r["R"], np.mean([x["R"] for x in runs], axis=0), rtol=0, atol=tol)
        for key in ("ACC", "BWT", "F"):
            values = [x[key] for x in runs]
            assert abs(r[key] - np.mean(values)) <= tol and abs(r[f"{key}_std"] - np.std(values, ddof=1)) <= tol
        assert abs(r["FWT"] - np.mean([x["FWT"] for x in runs])) <= tol
        assert r["seconds"] > 0 and r["peak_mib"] > 0
    assert permuted.from_json(permuted.as_json(shipped))["methods"]["gpm"]["ranks"] == \
        shipped["methods"]["gpm"]["ranks"]


@pytest.mark.slow
def test_continual_table_prints_the_table_and_writes_the_json(tmp_path, capsys):
    """One seed: R, ACC and BWT are the run's own (as before seeds existed), no spread; the text
    table names every method; a progress line on stderr."""
    from mlp_ref.classroom import cli
    path = tmp_path / "table.json"
    assert cli.main(["continual-table", "--json", str(path)]) == 0
    out = capsys.readouterr()
    doc = json.loads(path.read_text())
    assert set(doc["methods"]) == set(permuted.METHODS) and doc["setup"]["seeds"] == 1
    for name, r in doc["methods"].items():
        assert (r["ACC"], r["BWT"]) == pytest.approx(permuted.acc_bwt(r["R"]), abs=0)
        assert r["runs"][0]["R"] == r["R"] and r["ACC_std"] is None and r["peak_mib"] > 0
        assert name in out.out
    assert "continual-table:" in out.err


@pytest.mark.slow
def test_tutorial_09_states_the_runs_numbers(full):
    """Each mean ± std tutorial 09 quotes is the shipped run's, rounded as the text rounds it."""
    from _runs import ROOT

    from mlp_ref.classroom import tutorial
    text = " ".join(c.source for c in tutorial.cells((ROOT / "tutorials" / "09_the_field.py").read_text())
                    if c.kind == "markdown")
    text = " ".join(text.replace("#", " ").split())
    m = full["methods"]

    def minus(x, d=2):
        return f"{x:.{d}f}".replace("-", "\u2212")

    def pm(r, key, d=2):
        return f"{minus(r[key], d)} ± {r[key + '_std']:.{d}f}"
    claims = [f"Naive forgets: ACC {pm(m['naive'], 'ACC')}, BWT {pm(m['naive'], 'BWT')}",
              f"EWC (ACC {pm(m['ewc'], 'ACC')}, BWT {pm(m['ewc'], 'BWT')})",
              f"A-GEM ({pm(m['agem'], 'ACC')}, {pm(m['agem'], 'BWT')})",
              f"BWT {pm(m['gpm'], 'BWT')}, and learns each new task less",
              f"falls to {m['gpm']['R'][-1, -1]:.2f} by task 5",
              f"ACC {pm(m['project'], 'ACC')} (BWT {pm(m['project'], 'BWT')})",
              f"reaches {pm(m['joint'], 'ACC')} (BWT {pm(m['joint'], 'BWT', 3)})",
              f"{m['project']['constraints']} constraints at the last task",
              f"forgets far more (BWT {minus(m['naive']['BWT'])})"]
    for claim in claims:
        assert claim in text, claim


def test_the_field_figures_draw_each_method_into_given_axes(small):
    from matplotlib.figure import Figure

    from mlp_ref import plots
    result = {"methods": small, "setup": {"tasks": 3}}
    fig = Figure()
    axes = fig.subplots(1, len(small))
    assert plots.field_accuracy(result, axes=axes) is fig
    for ax, (name, r) in zip(axes, small.items()):
        assert f"ACC {r['ACC']:.2f}" in ax.get_title()
        assert np.array_equal(ax.images[0].get_array(), r["R"])
    fig2 = Figure()
    ax = fig2.subplots()
    plots.field_acc_bwt(result, axes=ax)
    points = np.vstack([c.get_offsets() for c in ax.collections])
    assert np.array_equal(points, [[r["BWT"], r["ACC"]] for r in small.values()])


def test_the_readmes_table_is_the_shipped_five_seeds():
    """README.md's ACC and BWT rows are the shipped run's mean±std, rounded to two decimals, in the
    README's order of methods (OGD is ``project``)."""
    from _runs import ROOT
    m = permuted.load()["methods"]
    lines = (ROOT / "README.md").read_text().splitlines()
    header = next(line for line in lines if line.startswith("| | naive | EWC |"))
    names = {"naive": "naive", "EWC": "ewc", "A-GEM": "agem", "GPM": "gpm", "OGD": "project", "joint": "joint"}
    order = [names[c.strip()] for c in header.strip("|").split("|")[1:]]
    for key in ("ACC", "BWT"):
        row = next(line for line in lines if line.startswith(f"| {key} |"))
        cells = [c.strip() for c in row.strip("|").split("|")[1:]]
        want = [f"{m[k][key]:.2f}±{m[k][key + '_std']:.2f}".replace("-", "\u2212") for k in order]
        assert cells == want, key
    text = " ".join(lines)
    assert "Joint > OGD > GPM > the rest beyond the spread; naive, EWC and A-GEM within it." in text


def test_kept_bytes_counts_every_array_once_wherever_it_is_kept():
    from mlp_ref import baselines
    a, b, U = np.zeros(10), np.zeros((3, 4), dtype=np.float32), np.zeros((5, 2))
    kept = {"params": {"W1": a, "b1": b}, "fishers": [{"W1": a}], "bases": baselines.Bases([[U]]), "lam": 0.5}
    assert permuted.kept_bytes(kept, (a,)) == 10 * 8 + 12 * 4 + 10 * 8
