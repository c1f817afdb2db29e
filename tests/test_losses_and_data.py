import numpy as np
import pytest

from mlp_ref import data, losses


def test_mse_by_hand_on_two_samples():
    out = np.array([[1.0, 2.0], [3.0, 5.0]])
    y = np.array([[0.0, 2.0], [1.0, 1.0]])
    # residuals 1, 0, 2, 4 -> squares 1, 0, 4, 16 -> mean 21/4
    value, G = losses.mse(out, y)
    assert value == 21 / 4
    # dL/dout = 2 r / 4
    assert np.array_equal(G, np.array([[0.5, 0.0], [1.0, 2.0]]))


def test_masked_mse_is_the_answers_loss2_and_zeroes_the_masked_column():
    out = np.array([[1.0, 2.0], [3.0, 5.0]])
    y = np.array([[0.5, 2.0], [1.0, 1.0]])
    value, G = losses.masked_mse(out, y, [0, 1])
    # (0*1 - 0.5)^2, (2-2)^2, (0*3 - 1)^2, (5-1)^2 -> 0.25 + 0 + 1 + 16
    assert value == (0.25 + 0 + 1 + 16) / 4
    assert np.all(G[:, 0] == 0.0)
    assert np.array_equal(G[:, 1], np.array([0.0, 2.0]))
    # mask (n, K) is accepted and equals the broadcast vector
    assert np.array_equal(losses.masked_mse(out, y, np.tile([0, 1], (2, 1)))[1], G)


@pytest.mark.parametrize("loss", ["mse", "masked"])
def test_loss_gradient_matches_finite_differences(loss):
    rng = np.random.default_rng(0)
    out, y = rng.normal(size=(3, 2)), rng.normal(size=(3, 2))
    f = (lambda o: losses.mse(o, y)) if loss == "mse" else (lambda o: losses.masked_mse(o, y, [1, 0]))
    _, G = f(out)
    h = 1e-6
    for idx in np.ndindex(out.shape):
        e = np.zeros_like(out)
        e[idx] = h
        num = (f(out + e)[0] - f(out - e)[0]) / (2 * h)
        assert G[idx] == pytest.approx(num, rel=1e-7, abs=1e-10)


def test_seed_data_matches_its_definition():
    X, Y = data.seed_data()
    assert X.shape == (8, 3) and Y.shape == (8, 2)
    assert np.all((0 <= X) & (X < 1))
    noise = Y - np.stack([X.sum(1), (X ** 2).sum(1)], axis=1)
    assert np.all((0 <= noise) & (noise < 0.01))
    assert noise.std() > 0                               # the noise is really there
    X0, Y0 = data.seed_data(noise=0.0)
    assert np.array_equal(Y0[:, 0], X0.sum(1)) and np.array_equal(Y0[:, 1], (X0 ** 2).sum(1))


def test_seed_data_same_seed_same_bits():
    a, b, c = data.seed_data(seed=3), data.seed_data(seed=3), data.seed_data(seed=4)
    assert a[0].tobytes() == b[0].tobytes() and a[1].tobytes() == b[1].tobytes()
    assert a[0].tobytes() != c[0].tobytes()
    assert data.seed_data(n=20)[0].shape == (20, 3)


def test_probe_inputs_are_unseen_and_from_the_same_cube():
    X, _ = data.seed_data()
    P = data.probe_inputs(100)
    assert P.shape == (100, 3) and np.all((0 <= P) & (P < 1))
    assert not np.any(np.all(np.isclose(P[:, None, :], X[None, :, :]), axis=-1))
    assert np.array_equal(P, data.probe_inputs(100))
