"""The animations (``python -m mlp_ref animate``): what each frame draws is the measurement it
moves, at least 10 frames, nothing past the edge, small GIFs, the same bytes twice.

The fast tests check the frames' numbers against the mathematics; drawing every frame takes
tens of seconds, so the tests that draw are slow."""
import io

import numpy as np
import pytest
from _drawn import cut_off_texts
from PIL import Image

from mlp_ref.classroom import animations, cli, figures
from mlp_ref.measurements import motion
from mlp_ref.setups import OUT1


# -- what the frames hold: the mathematics, without drawing ---------------------------------------
def test_the_projection_frames_grow_the_step_and_then_restore():
    geometry = figures.geometry()
    frames = motion.projection_step_frames(geometry, grow=8)
    assert len(frames) >= 10
    growing = [f for f in frames if np.isnan(f["d_out1"]["project+restore"])]
    ts = np.array([f["t"] for f in growing])
    naive = np.abs([f["d_out1"]["naive"] for f in growing])
    proj = np.abs([f["d_out1"]["project"] for f in growing])
    # the naive drift is first order in the step (slope 1 in t), the projected one second order:
    # over the first halving of t the ratio of drifts is close to 2 and to 4 (the toy's curvature
    # adds O(t) relative terms, hence the loose bounds: slopes, not constants)
    slope = lambda d: np.log(d[3] / d[1]) / np.log(ts[3] / ts[1])     # noqa: E731  t = 1/4 .. 1/2
    assert 0.8 < slope(naive) < 1.3
    assert 1.7 < slope(proj) < 2.3
    assert np.all(proj < naive)
    # the points lie on the two straight steps, at the fractions said
    t0 = geometry["theta0"]
    for f in growing:
        np.testing.assert_allclose(f["naive"], t0 + f["t"] * (geometry["naive"] - t0), rtol=0, atol=1e-15)
        np.testing.assert_allclose(f["projected"], t0 + f["t"] * (geometry["projected"] - t0), rtol=0,
                                   atol=1e-15)
    # restoring: Gauss-Newton converges quadratically onto the level set, to round-off
    restored = np.abs([f["d_out1"]["project+restore"] for f in frames[len(growing):]])
    assert restored[0] < proj[-1] and restored[-1] <= 1e-12
    assert [len(f["restore"]) for f in frames[len(growing):]] == list(range(2, len(restored) + 2))


def test_the_stage_captions_say_where_out1s_column_is_zero():
    result = figures.seed_stages()
    captions = animations.stage_captions(result)
    assert list(captions) == list(result["backward"])
    for name in ("dout", "dz2", "dW2", "db2"):       # G's out1 column is 0, and so below it
        assert np.all(result["backward"][name][..., OUT1] == 0.0)
        assert captions[name] == "out1's column is exactly 0"
    for name in ("da1", "dz1", "dW1", "db1", "da0"):   # the shared layer: every entry reached
        value = result["backward"][name]
        assert np.all(value != 0.0)
        assert captions[name].startswith(f"{value.size} of {value.size} entries non-zero")


# -- the drawings: slow ---------------------------------------------------------------------------
def frames_of(name):
    """(fig, update, n) of animation ``name``."""
    return animations.ANIMATIONS[name]()


@pytest.mark.slow
def test_backprop_shows_one_more_stage_per_frame_as_measured():
    result = figures.seed_stages()
    fig, update, n = frames_of("backprop.gif")
    names = list(result["backward"])
    assert n == len(names) + 2 >= 10
    for k in range(n):
        update(k)
        shown = [ax for ax in fig.axes[:len(names)] if ax.get_visible()]
        assert len(shown) == min(k, len(names))
        for ax, name in zip(shown, names):
            np.testing.assert_array_equal(ax.images[0].get_array(), np.atleast_2d(result["backward"][name]))
        if 1 <= k <= len(names):
            assert f"{names[k - 1]} = " in fig.get_suptitle()
        assert cut_off_texts(fig) == [], k


@pytest.mark.slow
def test_continual_draws_the_accuracies_up_to_each_step():
    result = figures.continual_run()
    fig, update, n = frames_of("continual_steps.gif")
    steps = len(result["runs"][0]["old_acc"]) - 1
    assert n == steps + 1 >= 10
    naive = next(r for r in result["runs"] if r["fix"] == "naive")
    for k in (0, 7, steps):
        update(k)
        old_ax, new_ax = fig.axes[:2]
        line = next(l for l in old_ax.lines if l.get_label() == "naive")
        np.testing.assert_array_equal(line.get_ydata(), naive["old_acc"][:k + 1])
        line = next(l for l in new_ax.lines if l.get_label() == "naive")
        np.testing.assert_array_equal(line.get_ydata(), naive["new_acc"][:k + 1])
        assert f"after {k} steps" in fig.get_suptitle()
        assert cut_off_texts(fig) == [], k


@pytest.mark.slow
def test_projection_draws_each_frames_drift():
    geometry = figures.geometry()
    frames = motion.projection_step_frames(geometry)
    fig, update, n = frames_of("projection_step.gif")
    assert n == len(frames)
    for k in (0, 7, n - 1):
        update(k)
        right = fig.axes[1]
        texts = [t.get_text() for t in right.texts]
        for name in ("naive", "project"):
            assert any(t.startswith(f"{abs(frames[k]['d_out1'][name]):.1e}"[:3]) for t in texts), texts
        assert cut_off_texts(fig) == [], k


@pytest.mark.slow
def test_the_command_writes_small_gifs_of_ten_frames_or_more_the_same_bytes_twice(tmp_path):
    first, second = tmp_path / "a", tmp_path / "b"
    assert cli.main(["animate", "--out", str(first)]) == 0
    assert cli.main(["animate", "--out", str(second)]) == 0
    assert sorted(p.name for p in first.iterdir()) == sorted(animations.ANIMATIONS)
    for name in animations.ANIMATIONS:
        data = (first / name).read_bytes()
        assert data == (second / name).read_bytes(), name
        assert len(data) < 400_000, (name, len(data))
        image = Image.open(io.BytesIO(data))
        assert image.format == "GIF" and image.n_frames >= 10, name
        assert image.size[0] >= 800, name
