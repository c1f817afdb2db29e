"""Null-space projection, measured: the projected direction, drift O(lr^2) on the batch and
O(lr) off it, the restoring step, the Gram trick's memory, and the two-parameter picture."""
import numpy as np

import mlp_ref as mr
from mlp_ref import fixes, jacobian
from mlp_ref.data import probe_inputs
from mlp_ref.measurements import drift, fits, projection
from mlp_ref.setups import G_QUESTION, LR

LRS = np.logspace(-5, -3, 5)


def test_the_projected_direction(setups):
    net, X, _ = setups["visible"]
    g, D = fixes.naive(net, X, G_QUESTION), fixes.project(net, X, G_QUESTION)
    J1 = jacobian.OutputJacobian(net, X, keep=[0])
    assert 45 < np.max(np.abs(J1.matvec(g))) < 53                # "about 49"
    moved = net.copy().step(g, LR["visible"])(X)[:, 0] - net(X)[:, 0]   # tutorial 02's naive step
    assert LR["visible"] == 0.01 and 0.47 < 0.01 * np.max(np.abs(J1.matvec(g))) < 0.51  # "about 0.49"
    assert round(float(np.max(np.abs(moved))), 2) == 0.39                 # "0.39 measured"
    assert np.max(np.abs(J1.matvec(D))) < 1e-12                  # "below 1e-12"
    fg, fD = jacobian.flatten(g), jacobian.flatten(D)
    assert abs(fD @ (fg - fD)) < 1e-12 * np.linalg.norm(fD) * np.linalg.norm(fg - fD)
    assert 0.82 < np.linalg.norm(fD) / np.linalg.norm(fg) < 0.86  # "about 84%"


def test_one_step_slopes_are_1_and_2_on_the_batch_and_1_off_it():
    for name in ("seed", "visible"):
        res = drift.one_step(name, rules=["naive", "project"], lrs=LRS)
        naive = fits.loglog_slope(LRS, res["naive"]["drift_batch"])
        proj = fits.loglog_slope(LRS, res["project"]["drift_batch"])
        assert abs(naive - 1.0) < 0.005 and abs(proj - 2.0) < 0.005      # printed "1.00", "2.00"
        assert abs(fits.loglog_slope(LRS, res["project"]["drift_unseen"]) - 1.0) < 0.05
        if name == "visible":
            v = res["project"]
            assert 15 < v["drift_unseen"][-1] / v["drift_batch"][-1] < 25  # "about 20 times"


def test_restoring_converges_quadratically_on_the_batch_only(setups):
    net, X, _ = setups["visible"]
    ref = net(X)[:, 0]
    stepped = net.copy().step(fixes.project(net, X, G_QUESTION), 0.01)
    report = fixes.restore(stepped, X, ref)
    h = report.history
    assert report.converged and report.iterations == 3 and h[-1] <= 1e-12
    assert 1e-2 < h[0] < 3e-2                                            # "about 2e-2"
    assert h[1] < 10 * h[0] ** 2 and h[2] < 10 * h[1] ** 2               # squares each step
    probe = probe_inputs()
    projected = net.copy().step(fixes.project(net, X, G_QUESTION), 0.01)
    before, after = (np.max(np.abs(m(probe)[:, 0] - net(probe)[:, 0])) for m in (projected, stepped))
    assert 0.01 < before < 0.1 and 0.01 < after < 0.1 and before != after   # "moves but is still
    #                                                                          a few hundredths"


def test_the_gram_trick_and_its_memory(setups):
    net, X, _ = setups["seed"]
    J = jacobian.OutputJacobian(net, X, keep=[0])
    dense = J.dense()
    assert dense.shape == (8, 26)
    assert np.max(np.abs(J.gram() - dense @ dense.T)) < 1e-14 * np.max(np.abs(J.gram()))
    big = mr.MLP([784, 512, 512, 10], hidden="relu", init_std=0.05, seed=0)
    J_big = jacobian.OutputJacobian(big, np.random.default_rng(0).random((256, 784)), keep=[0])
    n, P = J_big.shape
    factors = (sum(a.size for a in J_big.inputs.values())
               + sum(s.size for s in J_big.signals.values()) + n * n)
    assert (n, P) == (256, 669_706) and n * P == 171_444_736             # "171 million"
    assert factors == n * (784 + 2 * 512 + 2 * 512 + 10) + n ** 2 == 793_088   # "0.79 million"
    assert round(8 * n * P / 1e9, 1) == 1.4 and round(8 * factors / 1e6, 1) == 6.3
    assert n * P / factors > 200


# -- the two-parameter picture (projection_geometry.png) -----------------------------------------
def test_the_two_parameter_toy_is_the_mlp_it_claims():
    toy = projection.TwoParamToy()
    theta = np.array([0.3, -0.7])
    net = mr.MLP([1, 2, 2], hidden="tanh", output="identity")
    net.params.update(W1=theta[None, :].copy(), b1=toy.c.copy(), W2=toy.V.copy(), b2=np.zeros(2))
    x = np.array([[toy.x]])
    np.testing.assert_allclose(toy.outputs(theta), net(x)[0], rtol=1e-14)
    for k in range(2):
        np.testing.assert_allclose(toy.grads(theta)[k], net.gradient(x, np.eye(2)[k])["W1"][0],
                                   rtol=1e-13)


def test_projection_geometry_orders_and_slopes():
    r = projection.projection_geometry(grid=5)
    assert abs(r["grad_out1"] @ (r["projected"] - r["theta0"])) < 1e-14  # along the tangent
    assert abs(r["slopes"]["naive"] - 1.0) < 0.05 and abs(r["slopes"]["project"] - 2.0) < 0.05
    assert np.all(r["drift"]["project+restore"] == 0.0)             # drawn as "exactly 0"
    assert np.all(r["drift"]["project"] < r["drift"]["naive"])
    assert r["changes"]["project+restore"][1] > 0.3                  # out2 still rises
    np.testing.assert_array_equal(r["changes"]["project+restore"],
                                  r["toy"].outputs(r["restore_path"][-1]) - r["toy"].outputs(r["theta0"]))
    assert r["out1"].shape == (5, 5)
    assert r["out1"][2, 3] == r["toy"].outputs([r["theta1"][3], r["theta2"][2]])[0]


def test_pinv_with_an_explicit_jacobian_equals_the_gram_route(setups):
    net, X, _ = setups["seed"]
    J = jacobian.dense_rows(net, X, keep=[0])
    g = jacobian.flatten(fixes.naive(net, X, G_QUESTION))
    D_pinv = g - np.linalg.pinv(J) @ (J @ g)
    D_gram = jacobian.flatten(fixes.project(net, X, G_QUESTION))
    D_square = g - J.T @ np.linalg.pinv(J @ J.T) @ (J @ g)
    scale = np.max(np.abs(g))
    assert np.linalg.matrix_rank(J) == 8                                 # "rank 8"
    assert 4e5 < np.linalg.cond(J) < 6e5                                 # "about 5e5"
    # "within eps * cond(J1), about 1e-10": what a solve of this conditioning can promise, on
    # any machine (the digits below it depend on the LAPACK and its kernels)
    assert np.max(np.abs(D_pinv - D_gram)) / scale < np.finfo(float).eps * np.linalg.cond(J) < 2e-10
    assert 1e-8 < np.max(np.abs(D_square - D_gram)) / scale < 1e-6      # "only to about 1e-7"


def test_unflatten_takes_a_vector_or_a_column_of_one_entry_per_parameter(setups):
    net = setups["seed"][0]
    flat = jacobian.flatten(net.params)
    for vector in (flat, flat[:, None]):                 # pinv(J) @ r gives a column for a column r
        back = jacobian.unflatten(vector, net.params)
        assert all(np.array_equal(back[k], net.params[k]) for k in net.params)
