"""Optimizers: each update against its formula, and the ordering pitfall of a constraint."""
import numpy as np
import pytest

import mlp_ref as mr
from mlp_ref import optim
from mlp_ref.setups import G_QUESTION, seed_setup

OPTIMIZERS = [optim.SGD, optim.Momentum, optim.Adam]


# -- helpers: flatten a dict like params, and a projection built independently of fixes.py --
def flat(D, keys):
    return np.concatenate([np.ravel(D[k]) for k in keys])


def unflat(v, shapes):
    out, i = {}, 0
    for k, s in shapes.items():
        size = int(np.prod(s))
        out[k] = v[i:i + size].reshape(s)
        i += size
    return out


def null_projection(A, shapes):
    """D -> the orthogonal projection of D onto null(A), A of shape (m, P)."""
    keys = list(shapes)
    P_null = np.eye(A.shape[1]) - np.linalg.pinv(A) @ A
    return lambda D: unflat(P_null @ flat(D, keys), shapes)


def rel_violation(A, U, keys):
    """|A u| / (|A|_2 |u|): 0 when u is in null(A), about 1 when u ignores the constraint."""
    u = flat(U, keys)
    return np.linalg.norm(A @ u) / (np.linalg.norm(A, 2) * np.linalg.norm(u))


def random_directions(shapes, steps, seed=0):
    rng = np.random.default_rng(seed)
    return [{k: rng.normal(size=s) for k, s in shapes.items()} for _ in range(steps)]


@pytest.fixture
def seed():
    net, X, _ = seed_setup()
    return net, X


# -- each optimizer against its formula ------------------------------------------------
def test_sgd_update_is_lr_times_D_and_apply_equals_net_step(seed):
    net, X = seed
    D = net.gradient(X, G_QUESTION)
    U = optim.SGD(0.1).update(D)
    assert all(np.array_equal(U[k], 0.1 * D[k]) for k in D)
    a, b = net.copy(), net.copy()
    optim.SGD(0.1).apply(a, D)
    b.step(D, 0.1)
    assert all(np.array_equal(a.params[k], b.params[k]) for k in D)


def test_momentum_matches_the_hand_unrolled_recurrence(seed):
    net, _ = seed
    Ds = random_directions(net.param_shapes, 3)
    lr, beta = 0.1, 0.9
    opt = optim.Momentum(lr, beta=beta)
    Us = [opt.update(D) for D in Ds]
    for k in net.params:
        v1 = Ds[0][k]                       # v_0 = 0, so v_1 = D_1 exactly
        v2 = beta * v1 + Ds[1][k]
        v3 = beta * v2 + Ds[2][k]
        # the same arithmetic in the same order: equal to the last bit
        assert np.array_equal(Us[0][k], lr * v1)
        assert np.array_equal(Us[1][k], lr * v2)
        assert np.array_equal(Us[2][k], lr * v3)
        assert np.array_equal(opt.v[k], v3)


def test_adam_matches_the_paper_on_three_steps(seed):
    net, _ = seed
    Ds = random_directions(net.param_shapes, 3, seed=1)
    lr, b1, b2, eps = 0.01, 0.9, 0.999, 1e-8
    opt = optim.Adam(lr, beta1=b1, beta2=b2, eps=eps)
    ours = [opt.update(D) for D in Ds]
    # Kingma & Ba (2015), Algorithm 1, one key at a time
    for k in net.params:
        m = np.zeros(net.params[k].shape)
        v = np.zeros(net.params[k].shape)
        for t, D in enumerate(Ds, start=1):
            g = D[k]
            m = b1 * m + (1 - b1) * g
            v = b2 * v + (1 - b2) * g ** 2
            m_hat = m / (1 - b1 ** t)
            v_hat = v / (1 - b2 ** t)
            step = lr * m_hat / (np.sqrt(v_hat) + eps)
            np.testing.assert_allclose(ours[t - 1][k], step, rtol=1e-15, atol=0)
    assert opt.t == 3


def test_first_adam_step_is_lr_times_sign_whatever_the_size_of_D(seed):
    net, _ = seed
    rng = np.random.default_rng(2)
    # |D| spans 1e-3 .. 1e3, all >> eps = 1e-8
    D = {k: rng.choice([-1.0, 1.0], size=s) * 10.0 ** rng.uniform(-3, 3, size=s)
         for k, s in net.param_shapes.items()}
    U = optim.Adam(0.05).update(D)
    for k in D:
        # U_1 = lr D / (|D| + eps): off lr sign(D) by lr eps / |D| <= 1e-5 relative
        np.testing.assert_allclose(U[k], 0.05 * np.sign(D[k]), rtol=1e-5, atol=0)


def test_float32_directions_give_float32_state_and_updates():
    net = mr.MLP([3, 4, 2], dtype=np.float32)
    X = np.random.default_rng(0).random((5, 3))
    D = net.gradient(X, G_QUESTION)
    for cls in OPTIMIZERS:
        opt = cls(0.1)
        U = opt.apply(net, D)
        assert opt.dtype == np.float32
        assert all(u.dtype == np.float32 for u in U.values())
    assert all(p.dtype == np.float32 for p in net.params.values())
    U = optim.SGD(0.1).update({k: d.astype(np.float64) for k, d in D.items()})
    assert all(u.dtype == np.float64 for u in U.values())


def test_reset_forgets_the_state(seed):
    net, X = seed
    D = net.gradient(X, G_QUESTION)
    opt = optim.Adam(0.1)
    first = opt.update(D)
    opt.update(D)
    opt.reset()
    again = opt.update(D)
    assert opt.t == 1 and all(np.array_equal(first[k], again[k]) for k in D)


# -- the ordering pitfall ----------------------------------------------------------------
@pytest.mark.parametrize("cls", OPTIMIZERS)
def test_constraint_on_the_update_holds_A_U_zero_every_step(cls, seed):
    net, X = seed
    A = np.random.default_rng(3).normal(size=(5, net.n_params))
    keys = list(net.params)
    opt = cls(0.1, constraint=null_projection(A, net.param_shapes), order="update")
    for _ in range(5):
        U = opt.apply(net, net.gradient(X, G_QUESTION))
        assert rel_violation(A, U, keys) < 1e-12


def test_constraint_on_the_gradient_breaks_adam(seed):
    net, X = seed
    A = np.random.default_rng(3).normal(size=(5, net.n_params))
    keys = list(net.params)
    opt = optim.Adam(0.1, constraint=null_projection(A, net.param_shapes), order="gradient")
    violations = [rel_violation(A, opt.apply(net, net.gradient(X, G_QUESTION)), keys)
                  for _ in range(5)]
    # Adam divides every coordinate by its own sqrt(v_hat) + eps: measured ~0.4, not ~1e-16
    assert min(violations) > 1e-6


def test_for_sgd_the_two_orders_coincide(seed):
    net, X = seed
    A = np.random.default_rng(4).normal(size=(5, net.n_params))
    con = null_projection(A, net.param_shapes)
    D = net.gradient(X, G_QUESTION)
    # lr = 0.25 is a power of two: scaling by it is exact, so P(lr D) = lr P(D) to the bit
    U_upd = optim.SGD(0.25, constraint=con, order="update").update(D)
    U_grad = optim.SGD(0.25, constraint=con, order="gradient").update(D)
    assert all(np.array_equal(U_upd[k], U_grad[k]) for k in D)
    # any other lr: equal up to the rounding of one product
    U_upd = optim.SGD(0.1, constraint=con, order="update").update(D)
    U_grad = optim.SGD(0.1, constraint=con, order="gradient").update(D)
    scale = np.linalg.norm(flat(U_upd, list(D)))
    for k in D:
        np.testing.assert_allclose(U_upd[k], U_grad[k], rtol=1e-13, atol=1e-15 * scale)


def jacobian_of_output(net, X, k):
    """J_k, shape (n, P): row i is d O[i, k] / d theta, from backward with G = e_k on row i."""
    keys = list(net.params)
    e = np.zeros(net.sizes[-1])
    e[k] = 1.0
    return np.stack([flat(net.gradient(X[i:i + 1], e), keys) for i in range(len(X))])


def test_momentum_breaks_a_constraint_that_moves_with_theta_unless_applied_to_the_update(seed):
    net0, X = seed
    keys = list(net0.params)

    def run(order):
        net = net0.copy()
        # the real constraint of the question: no first-order change of out1 on the batch,
        # J_1 evaluated at the current theta, so it changes from step to step
        con = lambda D: null_projection(jacobian_of_output(net, X, 0), net.param_shapes)(D)
        opt = optim.Momentum(1.0, beta=0.9, constraint=con, order=order)
        out = []
        for _ in range(4):
            J1 = jacobian_of_output(net, X, 0)
            out.append(rel_violation(J1, opt.apply(net, net.gradient(X, G_QUESTION)), keys))
        return out

    assert max(run("update")) < 1e-12
    bad = run("gradient")
    assert bad[0] < 1e-12            # the first step has no old directions in it
    assert min(bad[1:]) > 1e-6       # later ones carry directions projected against an old J_1


# -- arguments -------------------------------------------------------------------------
@pytest.mark.parametrize("cls", OPTIMIZERS)
def test_bad_hyperparameters_are_named(cls):
    with pytest.raises(ValueError, match=r"^lr: expected a number > 0.0, got -1.0"):
        cls(-1.0)
    with pytest.raises(ValueError, match=r"^lr: "):
        cls(0.0)
    with pytest.raises(ValueError, match=r"^lr: expected a finite number"):
        cls(float("nan"))
    with pytest.raises(TypeError, match=r"^lr: expected a real number"):
        cls("0.1")
    with pytest.raises(ValueError, match=r"^order: expected one of 'update', 'gradient', got 'grad'"):
        cls(0.1, order="grad")
    with pytest.raises(TypeError, match=r"^constraint: expected a callable"):
        cls(0.1, constraint=np.eye(3))


def test_bad_decay_rates_and_eps_are_named():
    with pytest.raises(ValueError, match=r"^beta: expected a number in \[0, 1\), got 1.0"):
        optim.Momentum(0.1, beta=1.0)
    with pytest.raises(ValueError, match=r"^beta: "):
        optim.Momentum(0.1, beta=-0.1)
    with pytest.raises(ValueError, match=r"^beta1: "):
        optim.Adam(0.1, beta1=1.5)
    with pytest.raises(ValueError, match=r"^beta2: "):
        optim.Adam(0.1, beta2=1.0)
    with pytest.raises(ValueError, match=r"^eps: "):
        optim.Adam(0.1, eps=0.0)
    assert repr(optim.Adam(0.1)) == "Adam(lr=0.1, beta1=0.9, beta2=0.999, eps=1e-08)"
    assert repr(optim.Momentum(0.5, beta=0.0)) == "Momentum(lr=0.5, beta=0.0)"


@pytest.mark.parametrize("cls", OPTIMIZERS)
def test_directions_must_keep_the_keys_and_shapes_of_the_state(cls, seed):
    net, X = seed
    D = net.gradient(X, G_QUESTION)
    opt = cls(0.1)
    with pytest.raises(TypeError, match=r"^D: expected a non-empty dict"):
        opt.update([1.0, 2.0])
    with pytest.raises(ValueError, match=r"^D\['W1'\]: expected finite values"):
        opt.update({**D, "W1": np.full((3, 4), np.nan)})
    opt.update(D)
    with pytest.raises(ValueError, match=r"^D: missing keys \['b2'\]"):
        opt.update({k: v for k, v in D.items() if k != "b2"})
    with pytest.raises(ValueError, match=r"^D: unknown keys \['W3'\]"):
        opt.update({**D, "W3": np.zeros(2)})
    with pytest.raises(ValueError, match=r"^D\['W2'\]: expected shape \(4, 2\), got shape \(4, 3\)"):
        opt.update({**D, "W2": np.zeros((4, 3))})


def test_a_rejected_call_changes_nothing(seed):
    net, X = seed
    D = net.gradient(X, G_QUESTION)
    opt = optim.Adam(0.1, constraint=lambda D: {"W1": D["W1"]})    # forgets keys
    with pytest.raises(ValueError, match=r"^constraint\(\.\.\.\): missing keys"):
        opt.update(D)
    assert opt.t == 0 and opt.m is None and opt.shapes is None
    opt = optim.Momentum(0.1)
    opt.update(D)
    v_before = {k: v.copy() for k, v in opt.v.items()}
    params_before = {k: v.copy() for k, v in net.params.items()}
    other = mr.MLP([3, 5, 2])
    with pytest.raises(ValueError, match=r"^D\['W1'\]: expected shape \(3, 4\)"):
        opt.apply(net, other.gradient(X, G_QUESTION))
    assert all(np.array_equal(opt.v[k], v_before[k]) for k in D)
    assert all(np.array_equal(net.params[k], params_before[k]) for k in D)


def test_a_first_call_the_network_refuses_fixes_nothing(seed):
    """A first ``apply`` refused by the network (a read-only parameter) leaves the optimizer as
    new: no shapes fixed, so it serves a network of another size next."""
    net, X = seed
    read_only = net.copy()
    read_only.params["W1"].setflags(write=False)
    opt = optim.Adam(0.01)
    with pytest.raises(ValueError, match=r"^net: parameters \['W1'\] are read-only"):
        opt.apply(read_only, read_only.gradient(X, G_QUESTION))
    assert opt.t == 0 and opt.m is None and opt.shapes is None
    other = mr.MLP([3, 5, 2])
    opt.apply(other, other.gradient(X, G_QUESTION))
    assert opt.t == 1 and opt.shapes == {k: v.shape for k, v in other.params.items()}
