"""Each fix's guarantee, asserted on real runs of both setups."""
import inspect

import numpy as np
import pytest
from _fd import fd_jacobian

import mlp_ref as mr
from mlp_ref import fixes, jacobian, pseudoinverse
from mlp_ref.data import probe_inputs
from mlp_ref.jacobian import flatten
from mlp_ref.setups import G_QUESTION, LR, SETUPS

SETUP_NAMES = list(SETUPS)
LRS = [1e-3, 1e-1, 10.0]


@pytest.fixture(scope="module", params=SETUP_NAMES)
def setup(request):
    net, X, _ = SETUPS[request.param]()
    return request.param, net, X


def outputs_after(net, D, lr, X):
    return net.copy().step(D, lr)(X)


def test_mask_on_the_question_equals_naive_exactly(setup):
    _, net, X = setup
    a = fixes.naive(net, X, G_QUESTION)
    b = fixes.masked(net, X, G_QUESTION, mask=[0, 1])
    for k in a:
        assert np.array_equal(a[k], b[k])


def test_mask_does_change_the_gradient_when_G_has_a_first_column(setup):
    _, net, X = setup
    G = np.random.default_rng(0).normal(size=(X.shape[0], 2))
    a = fixes.naive(net, X, G)
    b = fixes.masked(net, X, G, mask=[0, 1])
    assert not np.allclose(a["W1"], b["W1"])
    c = fixes.naive(net, X, G * [0, 1])
    assert all(np.array_equal(b[k], c[k]) for k in b)


@pytest.mark.parametrize("lr", LRS)
def test_freeze_leaves_out1_bit_for_bit_on_batch_and_unseen_inputs(setup, lr):
    _, net, X = setup
    P = probe_inputs(200)
    D = fixes.freeze(net, X, G_QUESTION)
    for inputs in (X, P):
        before, after = net(inputs), outputs_after(net, D, lr, inputs)
        assert np.array_equal(before[:, 0], after[:, 0])
        assert np.all(after[:, 1] > before[:, 1])        # out2 rises everywhere


def test_freeze_with_the_answers_var_list_on_the_seed_network():
    net, X, _ = SETUPS["seed"]()
    D = fixes.freeze(net, X, G_QUESTION, trainable=["W2", "b2"])
    assert np.all(D["W1"] == 0) and np.all(D["b1"] == 0)
    assert np.all(D["W2"][:, 0] == 0) and D["b2"][0] == 0      # out1's own weights get no gradient
    assert np.all(D["W2"][:, 1] != 0)


def test_naive_step_moves_out1(setup):
    _, net, X = setup
    D = fixes.naive(net, X, G_QUESTION)
    drift = np.abs(outputs_after(net, D, 1e-2, X)[:, 0] - net(X)[:, 0]).max()
    assert drift > 1e-7


def relative_residual(J, D, g):
    return np.linalg.norm(J @ flatten(D)) / np.linalg.norm(J @ flatten(g))


def test_project_kills_the_first_order_drift_with_J_from_finite_differences(setup):
    _, net, X = setup
    g = fixes.naive(net, X, G_QUESTION)
    D = fixes.project(net, X, G_QUESTION)
    J = fd_jacobian(net, X, [0])
    assert relative_residual(J, D, g) <= 1e-10
    # g - D lies in the row space of J: it is J^T beta for some beta
    diff = flatten(g) - flatten(D)
    beta, *_ = np.linalg.lstsq(J.T, diff, rcond=None)
    assert np.linalg.norm(J.T @ beta - diff) <= 1e-9 * np.linalg.norm(diff)
    # and D is still a descent direction for the question's loss: out2 rises
    assert np.all(outputs_after(net, D, 1e-3, X)[:, 1] > net(X)[:, 1])


def test_project_on_other_inputs_and_several_outputs():
    net, X, _ = SETUPS["visible"]()
    keep_X = probe_inputs(5, seed=7)
    G = np.random.default_rng(3).normal(size=(X.shape[0], 2))
    g = fixes.naive(net, X, G)
    D = fixes.project(net, X, G, keep=[0, 1], keep_X=keep_X)
    J = fd_jacobian(net, keep_X, [0, 1])
    assert relative_residual(J, D, g) <= 1e-10
    D1 = fixes.project(net, X, G, keep=[1], keep_X=keep_X)
    J1 = fd_jacobian(net, keep_X, [1])
    assert relative_residual(J1, D1, g) <= 1e-10


@pytest.mark.parametrize("keep", [[0], [1], [0, 1]])
def test_project_agrees_with_the_dense_projection(keep):
    net, X, _ = SETUPS["visible"]()
    G = np.random.default_rng(4).normal(size=(X.shape[0], 2))
    J = jacobian.dense_rows(net, X, keep)
    g = flatten(fixes.naive(net, X, G))
    dense = g - J.T @ np.linalg.lstsq(J @ J.T, J @ g, rcond=None)[0]
    ours = flatten(fixes.project(net, X, G, keep=keep))
    np.testing.assert_allclose(ours, dense, rtol=0, atol=1e-10 * np.abs(g).max())


def test_dense_jacobian_matches_finite_differences(setup):
    _, net, X = setup
    np.testing.assert_allclose(jacobian.dense_rows(net, X, [0, 1]), fd_jacobian(net, X, [0, 1]),
                               rtol=1e-8, atol=1e-10)


def one_step_drifts(net, X, D, lrs):
    base = net(X)[:, 0]
    return np.array([np.abs(outputs_after(net, D, lr, X)[:, 0] - base).max() for lr in lrs])


def slope(lrs, drifts):
    return np.polyfit(np.log(lrs), np.log(drifts), 1)[0]


SMALL_LRS = np.logspace(-4, -2, 5)


def test_drift_slopes_naive_and_mask_1_project_2_freeze_exactly_0(setup):
    _, net, X = setup
    rules = {
        "naive": fixes.naive(net, X, G_QUESTION),
        "masked": fixes.masked(net, X, G_QUESTION, [0, 1]),
        "project": fixes.project(net, X, G_QUESTION),
        "freeze": fixes.freeze(net, X, G_QUESTION),
    }
    d = {name: one_step_drifts(net, X, D, SMALL_LRS) for name, D in rules.items()}
    assert 0.9 <= slope(SMALL_LRS, d["naive"]) <= 1.1
    assert 0.9 <= slope(SMALL_LRS, d["masked"]) <= 1.1
    assert 1.8 <= slope(SMALL_LRS, d["project"]) <= 2.2
    assert np.all(d["freeze"] == 0.0)


def test_projected_step_drifts_O_lr_on_unseen_inputs(setup):
    _, net, X = setup
    P = probe_inputs(200)
    D = fixes.project(net, X, G_QUESTION)
    # smaller steps than on the batch: on the seed net the first-order term off the batch is
    # small, and the O(lr^2) term still bends the curve at lr ~ 1e-3
    lrs = np.logspace(-6, -4, 5)
    assert 0.95 <= slope(lrs, one_step_drifts(net, P, D, lrs)) <= 1.05


def test_restore_brings_out1_back_after_a_projected_step(setup):
    _, net, X = setup
    ref = net(X)[:, 0]
    stepped = net.copy().step(fixes.project(net, X, G_QUESTION), 0.1)
    before = np.abs(stepped(X)[:, 0] - ref).max()
    report = fixes.restore(stepped, X, ref)
    after = np.abs(stepped(X)[:, 0] - ref).max()
    assert report.converged and after <= 1e-10 and after == report.residual
    assert report.history[0] == before > 1e-8
    assert 1 <= report.iterations <= 20
    assert stepped(X)[:, 1].mean() > net(X)[:, 1].mean()      # the gain for out2 survives


def test_restore_takes_two_to_four_steps_at_the_tutorials_step_sizes():
    """The docstring: after a projected step of size lr, "two to four at the tutorials' step sizes"."""
    for name, make in SETUPS.items():
        net, X, _ = make()
        stepped = net.copy().step(fixes.project(net, X, G_QUESTION), LR[name])
        report = fixes.restore(stepped, X, net(X)[:, 0])
        assert report.converged and 2 <= report.iterations <= 4, (name, report.iterations)


def test_restore_reports_non_convergence_honestly():
    net, X, _ = SETUPS["visible"]()
    ref = net(X)[:, 0]
    stepped = net.copy().step(fixes.naive(net, X, G_QUESTION), 1.0)
    report = fixes.restore(stepped, X, ref, max_iter=1, tol=1e-14)
    assert not report.converged
    assert report.iterations == 1 and len(report.history) == 2
    assert report.residual == np.abs(stepped(X)[:, 0] - ref).max() > 1e-14
    assert "NOT converged" in str(report)
    assert report.note and report.note in str(report)               # and it says why


def test_restore_with_nothing_to_do_takes_no_step():
    net, X, _ = SETUPS["seed"]()
    before = {k: v.copy() for k, v in net.params.items()}
    report = fixes.restore(net, X, net(X)[:, 0])
    assert report.converged and report.iterations == 0
    assert all(np.array_equal(before[k], net.params[k]) for k in before)


def test_penalty_first_step_is_the_naive_step(setup):
    _, net, X = setup
    a = fixes.naive(net, X, G_QUESTION)
    b = fixes.penalty(net, X, G_QUESTION, keep=[0], ref=net(X)[:, 0], lam=10.0)
    assert all(np.array_equal(a[k], b[k]) for k in a)


def test_penalty_direction_is_g_plus_lam_JT_residual(setup):
    _, net, X = setup
    ref = net(X)[:, 0] + np.linspace(-0.1, 0.1, X.shape[0])
    lam = 3.0
    D = fixes.penalty(net, X, G_QUESTION, keep=[0], ref=ref, lam=lam)
    J = fd_jacobian(net, X, [0])
    expected = flatten(fixes.naive(net, X, G_QUESTION)) + lam * J.T @ (net(X)[:, 0] - ref)
    np.testing.assert_allclose(flatten(D), expected, rtol=1e-7, atol=1e-9)


def test_tangent_kernel_output_layer_share_is_exactly_zero_and_shares_sum_to_J1_J2T(setup):
    _, net, X = setup
    shares = jacobian.tangent_kernel_by_layer(net, X)
    assert np.all(shares[net.depth] == 0.0)
    J1, J2 = fd_jacobian(net, X, [0]), fd_jacobian(net, X, [1])
    full = J1 @ J2.T
    np.testing.assert_allclose(shares["total"], full, rtol=1e-7, atol=1e-9 * np.abs(full).max())
    assert np.abs(shares["total"]).max() > 0                   # there is cross-talk to explain
    # and it is what moves out1: the first-order drift of a naive step is -lr K12 G2
    lr = 1e-6
    D = fixes.naive(net, X, G_QUESTION)
    predicted = -lr * shares["total"] @ np.full(X.shape[0], -1.0)
    actual = outputs_after(net, D, lr, X)[:, 0] - net(X)[:, 0]
    np.testing.assert_allclose(actual, predicted, rtol=1e-3, atol=1e-15)


@pytest.mark.parametrize("lr", LRS)
def test_span_projection_holds_out1_on_keep_X_at_any_lr(setup, lr):
    _, net, X = setup
    keep_X = X[:4]                       # protect half the batch, learn from all of it
    D = fixes.span_project(net, X, G_QUESTION, keep_X=keep_X)
    before, after = net(keep_X)[:, 0], outputs_after(net, D, lr, keep_X)[:, 0]
    assert np.abs(after - before).max() <= 1e-12 * max(1.0, lr)
    assert outputs_after(net, D, lr, X)[:, 1].mean() > net(X)[:, 1].mean()


def test_span_projection_collapses_to_layer_splitting_on_the_seed_problem():
    net, X, _ = SETUPS["seed"]()
    span = fixes.span_project(net, X, G_QUESTION)
    frozen = fixes.freeze(net, X, G_QUESTION, trainable=["W2", "b2"])
    scale = np.abs(fixes.naive(net, X, G_QUESTION)["W1"]).max()
    assert np.abs(span["W1"]).max() <= 1e-12 * scale and np.abs(span["b1"]).max() <= 1e-12 * scale
    assert np.array_equal(span["W2"], frozen["W2"]) and np.array_equal(span["b2"], frozen["b2"])


def test_span_projection_of_the_batch_itself_freezes_every_hidden_layer():
    # The batch's gradient dW_l = a_{l-1}^T dz_l lies in the span of the batch's own layer
    # inputs, so protecting that span removes all of it: keep_X = X is layer splitting.
    net, X, _ = SETUPS["visible"]()
    D = fixes.span_project(net, X, G_QUESTION)
    g = fixes.naive(net, X, G_QUESTION)
    for key in ["W1", "b1", "W2", "b2"]:
        assert np.abs(D[key]).max() <= 1e-12 * np.abs(g[key]).max()
    # protecting only part of the batch leaves room: layer 2's input a1 (4 rows of 16 + 1)
    D = fixes.span_project(net, X, G_QUESTION, keep_X=X[:4])
    assert np.abs(D["W1"]).max() <= 1e-12 * np.abs(g["W1"]).max()     # [X, 1] has rank 4 = width
    assert np.abs(D["W2"]).max() > 1e-2 * np.abs(g["W2"]).max()


def test_projection_with_redundant_and_excess_constraints():
    net, X, _ = SETUPS["seed"]()
    # duplicate rows: the same constraints twice change nothing
    a = fixes.project(net, X, G_QUESTION)
    b = fixes.project(net, X, G_QUESTION, keep_X=np.vstack([X, X]))
    np.testing.assert_allclose(flatten(a), flatten(b), atol=1e-12 * np.abs(flatten(a)).max())
    # more independent constraints than parameters (both outputs on 40 inputs, P = 26): only 0 is left
    many = probe_inputs(40)
    D = fixes.project(net, X, G_QUESTION, keep=[0, 1], keep_X=many)
    g = flatten(fixes.naive(net, X, G_QUESTION))
    assert np.abs(flatten(D)).max() <= 1e-6 * np.abs(g).max()


def test_project_with_a_dead_relu_row_is_sensible():
    net = mr.MLP([2, 3, 2], hidden="relu", init_std=1.0, seed=0)
    X = np.array([[1.0, 2.0], [-3.0, 0.5], [0.2, 0.2]])
    net.params["W1"][:, 0] = -5.0                                 # unit 0 dead on every row
    net.params["b1"][0] = -1.0
    D = fixes.project(net, X, G_QUESTION)
    J = fd_jacobian(net, X, [0])
    g = fixes.naive(net, X, G_QUESTION)
    assert relative_residual(J, D, g) <= 1e-10
    assert all(np.all(np.isfinite(v)) for v in D.values())


def test_one_refinement_pass_takes_the_seed_problem_from_1e_8_to_1e_13():
    # nullspace's docstring: cond(J J^T) ~ 2e11 on the seed network; one solve leaves
    # |J D| ~ 1e-8 |J g|, and the default single refinement pass ~1e-13
    net, X, _ = SETUPS["seed"]()
    J = jacobian.OutputJacobian(net, X, [0])
    assert 1e11 <= pseudoinverse.GramSolver(J.gram()).cond < 1e12
    Jg = np.abs(J.matvec(net.gradient(X, G_QUESTION))).max()
    left = {refine: np.abs(J.matvec(fixes.project(net, X, G_QUESTION, refine=refine))).max() / Jg
            for refine in (0, 1)}
    assert 1e-9 <= left[0] < 1e-7
    assert 1e-14 <= left[1] < 1e-12
    default = fixes.project(net, X, G_QUESTION)
    once = fixes.project(net, X, G_QUESTION, refine=1)
    assert all(np.array_equal(default[k], once[k]) for k in default)


def test_all_zero_constraint_rows_and_an_all_zero_gram():
    # a relu output that is dead (negative pre-activation) on some rows has all-zero Jacobian
    # rows there; on rows where every kept output is dead the whole Gram is zero
    net = mr.MLP([2, 3, 2], hidden="tanh", output="relu", init_std=1.0, seed=9)
    X = np.random.default_rng(0).normal(size=(6, 2))
    z_out = net.forward(X).z[2][:, 0]
    dead, alive = X[z_out < 0], X[z_out > 0]
    assert len(dead) and len(alive)
    G = np.random.default_rng(1).normal(size=(6, 2))
    g = fixes.naive(net, X, G)
    assert np.abs(flatten(g)).max() > 0
    # only dead rows: J = 0, nothing to remove, D = g exactly
    D = fixes.project(net, X, G, keep_X=dead)
    assert all(np.array_equal(D[k], g[k]) for k in g)
    # dead rows mixed with live ones: the zero rows are dropped, the live ones held
    D = fixes.project(net, X, G, keep_X=np.vstack([dead, alive]))
    J = fd_jacobian(net, np.vstack([dead, alive]), [0])
    assert np.all(J[: len(dead)] == 0.0)
    assert relative_residual(J, D, g) <= 1e-10
    # restore with nothing it can move reports it instead of looping or raising
    ref = net(dead)[:, 0] + 1.0
    report = fixes.restore(net.copy(), dead, ref, max_iter=3)
    assert not report.converged and report.iterations == 3
    assert report.note.startswith(f"{len(dead)} of the {len(dead)} constraints")


def test_the_penalty_is_stable_below_its_limit_and_grows_above_it():
    # near ref the residual r = O1 - ref evolves as r <- (I - lr lam J J^T) r: stable exactly
    # while lr * lam * lambda_max(J J^T) < 2, which penalty_limit returns
    net, X, _ = SETUPS["visible"]()
    limit = fixes.penalty_limit(net, X)
    J = jacobian.OutputJacobian(net, X, [0])
    assert limit == pytest.approx(2.0 / np.linalg.eigvalsh(J.gram())[-1], rel=1e-12)
    ref = net(X)[:, 0]
    start = net.copy().step(fixes.naive(net, X, G_QUESTION), 1e-4)       # a small drift to pull back
    lr = 0.01
    for factor, grows in ((0.9, False), (1.1, True)):
        moved = start.copy()
        before = np.abs(moved(X)[:, 0] - ref).max()
        for _ in range(60):
            moved.step(fixes.penalty(moved, X, np.zeros(2), ref=ref, lam=factor * limit / lr), lr)
        after = np.abs(moved(X)[:, 0] - ref).max()
        assert (after > before) == grows, (factor, before, after)


def test_the_default_penalty_is_stable_on_both_setups_at_the_tutorials_learning_rates():
    # the docstring: lr * lam * lambda_max = 0.76 (seed, lr 0.1) and 0.83 (visible, lr 0.01)
    for name, lr, expected in (("seed", 0.1, 0.76), ("visible", 0.01, 0.83)):
        net, X, _ = SETUPS[name]()
        lam = inspect.signature(fixes.penalty).parameters["lam"].default
        assert round(2 * lr * lam / fixes.penalty_limit(net, X), 2) == expected
