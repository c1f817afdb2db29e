"""Every expression written for speed gives the numbers of the plain one it replaces (1e-12)."""
import numpy as np
import pytest

import mlp_ref as mr
from mlp_ref import activations, bench, fixes, jacobian
from mlp_ref.jacobian import OutputJacobian, flatten
from mlp_ref.setups import G_QUESTION, SETUPS

RTOL = 1e-12


def rel(a, b):
    a, b = (flatten(v) if isinstance(v, dict) else np.ravel(v) for v in (a, b))
    return np.linalg.norm(a - b) / np.linalg.norm(b)


def problems():
    """(name, net, X, G): the question's two setups with G = [0, -1], and random tanh/relu nets."""
    out = []
    for name, make in SETUPS.items():
        net, X, _ = make()
        out.append((name, net, X, G_QUESTION))
    net, X, G = bench.problem([12, 9, 7, 4], 10, seed=1)
    out.append(("tanh 12-9-7-4", net, X, G))
    net = mr.MLP([6, 8, 5, 3], hidden=["relu", "sigmoid"], init_std=0.5, seed=2)
    X = np.random.default_rng(2).normal(size=(7, 6))
    out.append(("relu/sigmoid 6-8-5-3", net, X, np.random.default_rng(3).normal(size=(7, 3))))
    return out


PROBLEMS = problems()
IDS = [p[0] for p in PROBLEMS]


@pytest.mark.parametrize("name, net, X, G", PROBLEMS, ids=IDS)
def test_forward_and_backward_equal_the_plain_formulas(name, net, X, G):
    record = net.forward(X)
    a = X
    for l in range(1, net.depth + 1):
        z = a @ net.params[f"W{l}"] + net.params[f"b{l}"]
        assert np.array_equal(record.z[l], z)
        a = record.a[l]
    stages = net.backward(record, G).stages
    for l in range(1, net.depth + 1):
        act = activations.get(net.activations[l - 1])
        da = stages["dout"] if l == net.depth else stages[f"da{l}"]
        if act.name != "identity":
            plain = da * {"tanh": lambda a: 1.0 - a * a, "sigmoid": lambda a: a * (1.0 - a),
                          "relu": lambda a: (record.z[l] > 0).astype(a.dtype)}[act.name](record.a[l])
            assert np.array_equal(stages[f"dz{l}"], plain)


@pytest.mark.parametrize("name, net, X, G", PROBLEMS, ids=IDS)
@pytest.mark.parametrize("keep", [[0], [0, 1]])
def test_project_on_the_batch_equals_nullspace_of_the_gradient(name, net, X, G, keep):
    g = net.gradient(X, G)
    fast = fixes.project(net, X, G, keep=keep)                          # keep_X = X: shared record
    plain = fixes.nullspace(net, g, np.array(X), keep)                   # the general path
    if np.linalg.norm(flatten(plain)) > 1e-10 * np.linalg.norm(flatten(g)):
        assert rel(fast, plain) <= RTOL
    else:   # holding every output G moves: g lies in J's row space and D is roundoff, whose
        # digits no two methods share; compare against the size of g instead
        assert np.linalg.norm(flatten(fast) - flatten(plain)) <= RTOL * np.linalg.norm(flatten(g))
    assert rel(fixes.project(net, X, G, keep=keep, keep_X=X), fast) == 0.0   # keep_X is X: same path


@pytest.mark.parametrize("name, net, X, G", PROBLEMS, ids=IDS)
@pytest.mark.parametrize("keep", [[0], [1, 0]])
def test_jacobian_products_equal_the_dense_jacobian(name, net, X, G, keep):
    J = OutputJacobian(net, X, keep)
    Jd = J.dense()
    assert rel(J.gram(), Jd @ Jd.T) <= RTOL
    g = net.gradient(X, G)
    assert rel(J.matvec(g), Jd @ flatten(g)) <= RTOL
    dz = net.backward(net.forward(X), G, input_grad=False, param_grads=False).stages
    assert rel(J.matvec_gradient({l: dz[f"dz{l}"] for l in J.signals}), J.matvec(g)) <= RTOL
    alpha = np.random.default_rng(0).normal(size=J.n_rows)
    assert rel(J.rmatvec(alpha), Jd.T @ alpha) <= RTOL


@pytest.mark.parametrize("name, net, X, G", PROBLEMS, ids=IDS)
def test_a_jacobian_from_a_shared_record_is_the_same_jacobian(name, net, X, G):
    a = OutputJacobian(net, X, [0, 1])
    b = OutputJacobian(net, keep=[0, 1], record=net.forward(X))
    for l in a.signals:
        assert np.array_equal(a.signals[l], b.signals[l])
        assert np.array_equal(a.inputs[l], b.inputs[l])
    assert np.array_equal(a.gram(), b.gram())


def test_a_jacobian_wants_X_or_a_record_not_both():
    net, X, _ = SETUPS["seed"]()
    with pytest.raises(TypeError, match="either X or record"):
        OutputJacobian(net, X, record=net.forward(X))
    with pytest.raises(TypeError, match="either X or record"):
        OutputJacobian(net)
    other = mr.MLP([3, 5, 2])
    with pytest.raises(ValueError, match="record"):
        OutputJacobian(net, record=other.forward(X))


def test_restore_with_a_shared_record_gives_the_same_network():
    net, X, _ = SETUPS["visible"]()
    ref = net(X)[:, 0]
    moved = net.copy().step(fixes.project(net, X, G_QUESTION), 0.1)
    restored = moved.copy()
    report = fixes.restore(restored, X, ref)
    assert report.converged
    # the plain Gauss-Newton loop, written out
    plain = moved.copy()
    for _ in range(report.iterations):
        J = OutputJacobian(plain, X, [0])
        r = J.outputs[:, 0] - ref
        plain.step(J.rmatvec(jacobian.GramSolver(J.gram())(r)), 1.0)
    for k in net.params:
        assert np.array_equal(restored.params[k], plain.params[k])


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_step_through_its_kept_buffers_is_theta_minus_lr_D_bit_for_bit(dtype):
    net, X, G = bench.problem([12, 9, 7, 4], 10, dtype=dtype, seed=1)
    plain = {k: v.copy() for k, v in net.params.items()}
    held = dict(net.params)
    lr = dtype(0.3)
    for _ in range(3):                                   # the buffers are reused from step 2 on
        D = net.gradient(X, G)
        net.step(D, 0.3)
        for k in plain:
            plain[k] = plain[k] - lr * D[k]               # the plain expression, fresh arrays
            assert net.params[k].dtype == dtype
            assert np.array_equal(net.params[k], plain[k]), k
            assert net.params[k] is held[k]               # updated in place
    for k, buffer in net._buffers.items():               # kept, and never a parameter itself
        assert buffer.shape == net.params[k].shape and not np.shares_memory(buffer, net.params[k])


def test_a_copy_steps_with_buffers_of_its_own():
    net, X, G = bench.problem([12, 9, 7, 4], 10, seed=1)
    net.step(net.gradient(X, G), 0.1)                    # net now has its buffers
    twin = net.copy()
    before = {k: v.copy() for k, v in net.params.items()}
    twin.step(twin.gradient(X, G), 0.1)
    assert all(np.array_equal(net.params[k], before[k]) for k in before)
    assert all(not np.shares_memory(twin._buffers[k], net._buffers[k]) for k in before)


def test_step_buffers_follow_parameters_replaced_by_hand():
    net = mr.MLP([3, 4, 2], seed=0)
    net.step({k: np.ones_like(v) for k, v in net.params.items()}, 0.5)
    net.params["W1"] = np.zeros((3, 4))                  # a new array, same shape: buffers still fit
    net.step({k: np.ones_like(v) for k, v in net.params.items()}, 0.5)
    assert np.array_equal(net.params["W1"], np.full((3, 4), -0.5))


@pytest.mark.parametrize("name, net, X, G", PROBLEMS, ids=IDS)
@pytest.mark.parametrize("keep", [[0], [0, 1]])
def test_the_full_rank_solve_equals_the_eigendecomposition(name, net, X, G, keep):
    gram = OutputJacobian(net, X, keep).gram()
    solver = jacobian.GramSolver(gram)
    lam, V = np.linalg.eigh(gram)                         # the pseudo-inverse, written out
    kept = lam > solver.rcond * lam[-1]
    eps = np.finfo(gram.dtype).eps
    # the eigenvalues with and without eigenvectors agree to eps * max(lam); a ratio, to cond * eps
    assert solver.rank == kept.sum()
    assert abs(solver.cond / (lam[-1] / lam[kept][0]) - 1) <= 64 * eps * solver.cond
    rhs = np.random.default_rng(0).normal(size=gram.shape[0])
    plain = V[:, kept] @ ((V[:, kept].T @ rhs) / lam[kept])
    if solver.rank == gram.shape[0]:                     # the LU path: same alpha up to cond * eps
        assert solver.V is None
        assert rel(solver(rhs), plain) <= 64 * eps * solver.cond
    else:
        assert solver.V is not None and rel(solver(rhs), plain) <= RTOL


def test_a_rank_deficient_gram_takes_the_eigendecomposition():
    net, X, _ = SETUPS["visible"]()
    X2 = np.vstack([X[:3], X[:3]])                       # every constraint twice
    solver = jacobian.GramSolver(OutputJacobian(net, X2, [0]).gram())
    assert solver.rank == 3 and solver.V is not None


@pytest.mark.parametrize("name, net, X, G", PROBLEMS, ids=IDS)
def test_gradient_keeping_no_stage_equals_backward_bit_for_bit(name, net, X, G):
    lean = net.gradient(X, G)
    full = net.backward(net.forward(X), G, input_grad=False).grads
    assert list(lean) == list(net.params) == list(full)
    for k in full:
        assert lean[k].shape == full[k].shape and np.array_equal(lean[k], full[k]), k


def test_gradient_holds_about_half_the_memory_of_backward():
    # tracemalloc counts NumPy's buffers: a memory claim, not a timing one
    net, X, G = bench.problem([60, 40, 40, 5], 30)
    lean = bench.peak_bytes(lambda: net.gradient(X, G))
    full = bench.peak_bytes(lambda: net.backward(net.forward(X), G, input_grad=False).grads)
    assert lean <= 0.6 * full


def test_backward_leaves_its_record_whole():
    net, X, G = bench.problem([12, 9, 7, 4], 10, seed=1)
    record = net.forward(X)
    stages = {k: v.copy() for k, v in record.stages.items()}
    net.backward(record, G, input_grad=False)
    assert list(record.stages) == list(stages)
    assert all(np.array_equal(record.stages[k], v) for k, v in stages.items())


def test_dropped_input_kernels_are_made_again_the_same():
    net, X, G = bench.problem([12, 9, 7, 4], 10, seed=1)
    J = OutputJacobian(net, X, [0, 1])
    gram = J.gram()
    J.drop_input_kernels()
    assert np.array_equal(J.gram(), gram)


def test_from_signals_consumes_only_when_asked():
    net, X, G = bench.problem([12, 9, 7, 4], 10, seed=1)
    J = OutputJacobian(net, X, [0])
    E = J.weighted_signals(np.arange(1.0, 11.0))
    kept = J.from_signals(E)
    assert list(E) == [1, 2, 3]
    consumed = J.from_signals(E, consume=True)
    assert E == {} and all(np.array_equal(kept[k], consumed[k]) for k in kept)
