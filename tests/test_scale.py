"""The scale ladder (measurements/scale.py): its memory of shifted images, one rung of each
route on a small memory, and every number tutorial 09 and the README state of the ladder,
asserted on the shipped run they are drawn from (resources/scale_cost.json, the output of
``python -m mlp_ref.measurements.scale --json``)."""
import numpy as np
import pytest

from mlp_ref.measurements import continual, scale


def test_a_shift_moves_every_pixel_by_one_and_fills_with_zeros():
    image = np.arange(1, 65, dtype=float).reshape(1, 64)
    right = scale.shift(image, 1, 0).reshape(8, 8)
    assert np.array_equal(right[:, 1:], image.reshape(8, 8)[:, :-1]) and np.all(right[:, 0] == 0)
    up = scale.shift(image, 0, -2).reshape(8, 8)
    assert np.array_equal(up[:-2], image.reshape(8, 8)[2:]) and np.all(up[-2:] == 0)
    assert np.array_equal(scale.shift(image, 0, 0), image)


def test_the_memory_is_tutorial_08s_then_the_shifts_nearest_first():
    offs = scale.offsets()
    assert offs[0] == (0, 0) and len(offs) == len(set(offs)) == 1 + 8 + 16 + 4
    assert all(max(abs(dx), abs(dy)) == 1 for dx, dy in offs[1:9])
    d = continual.tasks()
    big = scale.big_memory(2000)
    assert np.array_equal(big[:128], continual.memory(d, 128))   # tutorial 08's memory, first
    n_old = len(d["X_old"])
    assert n_old * len(offs) >= max(scale.ROWS) >= 16000


@pytest.fixture(scope="module")
def small_rungs():
    net, d = continual.first_task()
    mem = scale.big_memory(40)
    return {route: scale.rung(net, d, mem, route, threshold=1.0, steps=3)
            for route in ("exact", "gpm")}


def test_a_rung_reports_what_the_ladder_records(small_rungs):
    for r in small_rungs.values():
        assert r["constraints"] == 5 * r["rows"] == 200
        for key in ("ms_per_step", "peak_mib", "memory_drift", "test_drift_max", "old_acc", "new_acc"):
            assert np.isfinite(r[key]), key


def test_gpm_at_one_holds_the_memory_harder_than_the_exact_route(small_rungs):
    """Exact: the memory's outputs move by O(lr^2) terms, a few 1e-3 after 3 steps at lr 2.
    GPM at 1.0: every layer input of the 40 memory rows is held, so their outputs move by
    round-off only (far below 1e-9 here; the bound is derived in test_baselines.py)."""
    assert small_rungs["gpm"]["memory_drift"] < 1e-9 < small_rungs["exact"]["memory_drift"]


# -- the shipped ladder: what tutorial 09 and the README say of it ------------------------------
@pytest.fixture(scope="module")
def shipped():
    return scale.load()


def test_the_shipped_ladder_has_both_routes_up_to_their_sizes(shipped):
    exact = [r for r in shipped["rows"] if r["route"] == "exact"]
    assert max(r["constraints"] for r in exact) >= 4095
    for t in scale.THRESHOLDS:
        rows = [r for r in shipped["rows"] if r["route"] == f"gpm {t}"]
        assert [r["constraints"] for r in rows][-1] == 80000
        assert [r["constraints"] for r in rows][0] == 40
    for r in shipped["rows"]:
        assert r["constraints"] == 5 * r["rows"]
