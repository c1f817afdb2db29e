"""The field's protocol on permuted digits (measurements/permuted.py): ACC and BWT against their
definitions, the tasks, what each method holds on a small run, and (slow) every number tutorial
09 and the README state, asserted on the run they come from (``figures.permuted_run``, the very
run field_accuracy.png and field_acc_bwt.png are drawn from), and continual-table's output."""
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
    field_accuracy.png is drawn from."""
    m = full["methods"]
    acc = {k: round(v["ACC"], 2) for k, v in m.items()}
    bwt = {k: round(v["BWT"], 2) for k, v in m.items()}
    s = full["setup"]
    assert (s["tasks"], s["hidden"], s["steps"], s["lr"], s["memory"], s["threshold"]) == \
        (5, 100, 60, 2.0, 20, 0.97)
    assert s["n_train"] == 1198
    assert m["project"]["constraints"] == 800
    diag = np.diag(m["naive"]["R"])
    assert 0.91 <= round(diag.min(), 2) and round(diag.max(), 2) <= 0.94          # 91-94%
    assert (acc["naive"], bwt["naive"]) == (0.36, -0.71)
    assert (acc["ewc"], bwt["ewc"]) == (0.43, -0.61)
    assert (acc["agem"], bwt["agem"]) == (0.42, -0.63)
    assert (acc["gpm"], bwt["gpm"]) == (0.64, -0.14)
    assert (acc["project"], bwt["project"]) == (0.69, -0.24)
    assert (acc["joint"], bwt["joint"]) == (0.78, -0.08)
    assert round(m["gpm"]["R"][-1, -1], 2) == 0.55                  # GPM's diagonal at task 5
    assert np.all(np.diff(np.diag(m["gpm"]["R"])[1:]) < 0)          # ... falling from task 2 on
    assert round(np.diag(m["project"]["R"]).min(), 2) >= 0.84
    # the order: joint, then the projection and GPM, then EWC and A-GEM, then naive (and on the
    # four Kang et al. 2022's table shares, fine-tuning < EWC < GPM < multitask, theirs)
    exact = {k: v["ACC"] for k, v in m.items()}
    assert exact["joint"] > exact["project"] > exact["gpm"] > exact["ewc"] > exact["agem"] > exact["naive"]
    sequential = ("naive", "ewc", "agem", "gpm", "project")
    assert max(sequential, key=lambda k: m[k]["BWT"]) == "gpm"      # forgets least
    assert max(sequential, key=lambda k: m[k]["ACC"]) == "project"  # ends highest


@pytest.mark.slow
def test_the_shipped_table_is_the_protocols_run():
    """field_table.json (what the figures and tutorial 09 read) is ``permuted.run()`` rerun: the
    same protocol, every method's R within 2 of the 599 test images (a test image whose two
    largest outputs are within round-off of each other may go either way on another CPU after
    300 steps; on the machine that wrote it the run is equal bit for bit), ACC and BWT to the
    two decimals the text quotes, and each method's ranks, weights and constraints."""
    shipped, fresh = permuted.load(), permuted.run()
    assert shipped["setup"] == fresh["setup"]
    n_test = shipped["setup"]["n_test"]
    for name in permuted.METHODS:
        a, b = shipped["methods"][name], fresh["methods"][name]
        assert np.abs(a["R"] - b["R"]).max() * n_test <= 2, name
        assert (round(a["ACC"], 2), round(a["BWT"], 2)) == (round(b["ACC"], 2), round(b["BWT"], 2))
        for key in permuted.EXTRAS:
            assert (key in a) == (key in b), (name, key)
        if name == "ewc":
            np.testing.assert_allclose(a["lams"], b["lams"], rtol=1e-6)
        elif name == "gpm":
            assert a["ranks"] == [list(r) for r in b["ranks"]] or a["ranks"] == b["ranks"]
        elif name == "project":
            assert a["constraints"] == b["constraints"]


def test_the_shipped_table_reads_back_as_a_run():
    shipped = permuted.load()
    assert list(shipped["methods"]) == list(permuted.METHODS)
    for r in shipped["methods"].values():
        assert r["R"].shape == (5, 5) and (r["ACC"], r["BWT"]) == permuted.acc_bwt(r["R"])
    assert permuted.from_json(permuted.as_json(shipped))["methods"]["gpm"]["ranks"] == \
        shipped["methods"]["gpm"]["ranks"]


@pytest.mark.slow
def test_continual_table_prints_the_table_and_writes_the_json(tmp_path, capsys):
    from mlp_ref.classroom import cli
    path = tmp_path / "table.json"
    assert cli.main(["continual-table", "--json", str(path)]) == 0
    out = capsys.readouterr()
    doc = json.loads(path.read_text())
    assert set(doc["methods"]) == set(permuted.METHODS)
    for name, r in doc["methods"].items():
        assert (r["ACC"], r["BWT"]) == pytest.approx(permuted.acc_bwt(r["R"]), abs=0)
        assert name in out.out
    assert "continual-table:" in out.err


@pytest.mark.slow
def test_tutorial_09_states_the_runs_numbers(full):
    """Each ACC and BWT tutorial 09 quotes is the run's, rounded as the text rounds it."""
    from _runs import ROOT

    from mlp_ref.classroom import tutorial
    text = " ".join(c.source for c in tutorial.cells((ROOT / "tutorials" / "09_the_field.py").read_text())
                    if c.kind == "markdown")
    text = " ".join(text.replace("#", " ").split())
    m = full["methods"]

    def minus(x):
        return f"{x:.2f}".replace("-", "\u2212")
    claims = [f"Naive forgets: ACC {m['naive']['ACC']:.2f}, BWT {minus(m['naive']['BWT'])}",
              f"EWC (ACC {m['ewc']['ACC']:.2f}, BWT {minus(m['ewc']['BWT'])})",
              f"A-GEM ({m['agem']['ACC']:.2f}, {minus(m['agem']['BWT'])})",
              f"BWT {minus(m['gpm']['BWT'])}, and learns each new task less",
              f"falls to {m['gpm']['R'][-1, -1]:.2f} by task 5",
              f"ACC {m['project']['ACC']:.2f} (BWT {minus(m['project']['BWT'])})",
              f"reaches {m['joint']['ACC']:.2f} (BWT {minus(m['joint']['BWT'])})",
              f"{m['project']['constraints']} constraints at the last task"]
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
