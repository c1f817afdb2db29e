"""The fast tier equals the reference: gradient and step bit for bit, the projection and restore
to 1e-12 relative in float64 (to float32's roundoff times the Gram's condition in float32)."""
import numpy as np
import pytest

import mlp_ref as mr
from mlp_ref import fast, fixes, jacobian
from mlp_ref.jacobian import OutputJacobian, flatten
from mlp_ref.setups import G_QUESTION, SETUPS

RTOL = 1e-12
ACTS = ["tanh", "sigmoid", "relu", "identity"]


def rel(a, b):
    """|a - b| / |b| (|a - b| when b is all zeros)."""
    a, b = (flatten(v) if isinstance(v, dict) else np.ravel(v) for v in (a, b))
    return np.linalg.norm(a - b) / (np.linalg.norm(b) or 1.0)


def random_problem(seed, dtype=np.float64):
    """A random MLP (depth 1 to 3, mixed activations, 2 to 4 outputs), inputs and G."""
    rng = np.random.default_rng(seed)
    sizes = [int(rng.integers(2, 9))] + [int(rng.integers(2, 9)) for _ in range(rng.integers(0, 3))] \
        + [int(rng.integers(2, 5))]
    hidden = [ACTS[i] for i in rng.integers(0, len(ACTS), len(sizes) - 2)]
    net = mr.MLP(sizes, hidden=hidden, output=ACTS[rng.integers(0, 3)] if seed % 3 else "identity",
                 init_std=float(rng.choice([0.3, 0.7, 1.0])), seed=seed, dtype=dtype)
    n = int(rng.integers(1, 9))
    X = rng.normal(size=(n, sizes[0])).astype(dtype)
    G = rng.normal(size=(n, sizes[-1])).astype(dtype)
    return net, X, G


def question_problems():
    out = []
    for name, make in SETUPS.items():
        net, X, _ = make()
        out.append((name, net, X, G_QUESTION))
    return out


RANDOM = [random_problem(seed) for seed in range(40)]
QUESTION = question_problems()


# -- gradient and step: bit for bit ---------------------------------------------------------------
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_fast_gradient_is_the_reference_gradient_bit_for_bit(dtype):
    for seed in range(40):
        net, X, G = random_problem(seed, dtype)
        for g in (G, G[0]):                                   # (n, K), and (K,) for every row
            ref = net.backward(net.forward(X), g).grads
            ours = fast.gradient(net, X, g)
            assert list(ours) == list(ref) == list(net.params)
            for k in ref:
                assert ours[k].dtype == dtype and np.array_equal(ours[k], ref[k]), (seed, k)


def test_fast_gradient_takes_any_memory_layout_of_X_to_the_same_bits():
    net, X, G = random_problem(3)
    wide = np.asfortranarray(np.repeat(X, 2, axis=1))[:, ::2]  # strided, Fortran-ordered
    assert np.array_equal(wide, X)
    ref = net.gradient(X, G)
    assert all(np.array_equal(fast.gradient(net, wide, G)[k], ref[k]) for k in ref)


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_fast_step_is_the_reference_step_bit_for_bit(dtype):
    for seed in range(20):
        net, X, G = random_problem(seed, dtype)
        twin = net.copy()
        held = dict(net.params)
        for _ in range(3):                                    # buffers reused from step 2 on
            fast.step(net, fast.gradient(net, X, G), 0.3)
            twin.step(twin.gradient(X, G), 0.3)
            for k in net.params:
                assert np.array_equal(net.params[k], twin.params[k]), (seed, k)
                assert net.params[k] is held[k]               # in place: references stay valid


def test_fast_step_rejects_what_the_reference_rejects_and_changes_nothing():
    net, X, G = random_problem(5)
    before = {k: v.copy() for k, v in net.params.items()}
    D = net.gradient(X, G)
    bad = [({**D, "W1": np.full_like(D["W1"], np.nan)}, 0.1, "D['W1']"),
           ({k: np.full_like(v, 1e300) for k, v in D.items()}, 1e10, "lr"),
           (D, -1.0, "lr"),
           ({k: v for k, v in D.items() if k != "b1"}, 0.1, "D")]
    for direction, lr, name in bad:
        for step in (fast.step, lambda n, d, r: n.step(d, r)):
            with pytest.raises(ValueError) as info:
                step(net, direction, lr)
            assert str(info.value).startswith(name), str(info.value)
            assert all(np.array_equal(net.params[k], before[k]) for k in before)


def test_fast_step_refuses_a_read_only_parameter_before_changing_any():
    net, X, G = random_problem(6)
    before = {k: v.copy() for k, v in net.params.items()}
    last = list(net.params)[-1]
    net.params[last].flags.writeable = False
    for step in (fast.step, lambda n, d, r: n.step(d, r)):
        with pytest.raises(ValueError, match=r"^net: parameters \['" + last):
            step(net, net.gradient(X, G), 0.1)
        assert all(np.array_equal(net.params[k], before[k]) for k in before)


def test_a_copy_steps_with_buffers_of_its_own():
    net, X, G = random_problem(7)
    fast.step(net, fast.gradient(net, X, G), 0.1)            # net now has its buffers
    twin = net.copy()
    before = {k: v.copy() for k, v in net.params.items()}
    fast.step(twin, fast.gradient(twin, X, G), 0.1)
    assert all(np.array_equal(net.params[k], before[k]) for k in before)
    assert any(not np.array_equal(twin.params[k], before[k]) for k in before)


def test_step_buffers_follow_parameters_replaced_by_hand():
    net = mr.MLP([3, 4, 2], seed=0)
    fast.step(net, {k: np.ones_like(v) for k, v in net.params.items()}, 0.5)
    net.params["W1"] = np.zeros((3, 4), dtype=np.float32)    # another dtype: new buffers
    net.params["W1"] = np.zeros((3, 4))
    fast.step(net, {k: np.ones_like(v) for k, v in net.params.items()}, 0.5)
    assert np.array_equal(net.params["W1"], np.full((3, 4), -0.5))


def test_fast_gradient_holds_at_most_six_tenths_of_the_references_memory():
    # tracemalloc counts NumPy's buffers: a memory claim, not a timing one
    from mlp_ref.bench import peak_bytes
    net = mr.MLP([60, 40, 40, 5], hidden="tanh", seed=0)
    rng = np.random.default_rng(0)
    X, G = rng.normal(size=(30, 60)), rng.normal(size=(30, 5))
    assert peak_bytes(lambda: fast.gradient(net, X, G)) <= 0.6 * peak_bytes(lambda: net.gradient(X, G))


# -- projection, nullspace, restore: to roundoff ------------------------------------------------
def close(ours, ref, g, rtol, cond=1.0):
    """|ours - ref| <= rtol * |ref|, or within what roundoff leaves undetermined when that is more.

    Two floors no two methods get under. D = g - J^T alpha cancels most of g when the kept
    outputs are most of what G moves (all of it when every output G moves is held: then D is
    pure roundoff): the roundoff of that difference is a few eps * |g|. And D is pinned down
    by J D = 0 only as far as J's smallest singular value allows: a residual of eps |J| |D|
    leaves D free by eps * sqrt(cond(J J^T)) * |D| (1e-10 on the seed network, cond 2e11).
    """
    eps = np.finfo(flatten(g).dtype).eps
    size = np.linalg.norm(flatten(ref))
    diff = np.linalg.norm(flatten(ours) - flatten(ref))
    return diff <= max(rtol * size, 64 * eps * np.linalg.norm(flatten(g)), eps * np.sqrt(cond) * size)


def gram_cond(net, X, keep):
    return jacobian.GramSolver(OutputJacobian(net, X, keep).gram()).cond


@pytest.mark.parametrize("name, net, X, G", QUESTION + [(f"random {i}", *p) for i, p in enumerate(RANDOM)])
def test_fast_project_equals_the_reference_in_float64(name, net, X, G):
    g = net.gradient(X, G)
    other = np.random.default_rng(1).normal(size=(5, X.shape[1]))
    K = net.sizes[-1]
    for keep in ([0], [K - 1, 0]):
        for keep_X in (None, X.copy(), other):
            ref = fixes.project(net, X, G, keep=keep, keep_X=keep_X)
            ours = fast.project(net, X, G, keep=keep, keep_X=keep_X)
            assert list(ours) == list(net.params)
            cond = gram_cond(net, X if keep_X is None else keep_X, keep)
            assert close(ours, ref, g, RTOL, cond), (keep, None if keep_X is None else keep_X.shape)


def test_fast_project_on_the_seed_network_refines_as_the_reference_does():
    # cond(J1 J1^T) ~ 2e11 there: one solve alone leaves |J1 D| ~ 1e-8 |J1 g|
    net, X, _ = SETUPS["seed"]()
    J = OutputJacobian(net, X, [0])
    Jg = np.abs(J.matvec(net.gradient(X, G_QUESTION))).max()
    for refine in (1, 2):
        D = fast.project(net, X, G_QUESTION, refine=refine)
        assert rel(D, fixes.project(net, X, G_QUESTION, refine=refine)) <= 1e-11
        assert np.abs(J.matvec(D)).max() <= 1e-12 * Jg
    unrefined = fast.project(net, X, G_QUESTION, refine=0)
    assert 1e-12 * Jg < np.abs(J.matvec(unrefined)).max() <= 1e-6 * Jg


def test_equal_inputs_take_the_same_path_to_the_same_bits():
    for name, net, X, G in QUESTION:
        a = fast.project(net, X, G)
        for keep_X in (X, X.copy(), np.asfortranarray(X)):
            b = fast.project(net, X, G, keep_X=keep_X)
            assert all(np.array_equal(a[k], b[k]) for k in a)
        c = fixes.project(net, X, G, keep_X=X.copy())
        d = fixes.project(net, X, G)
        assert all(np.array_equal(c[k], d[k]) for k in c)


def test_fast_project_in_float32_agrees_to_float32_roundoff_times_the_conditioning():
    for seed in range(20):
        net, X, G = random_problem(seed, np.float32)
        g = net.gradient(X, G)
        gram = OutputJacobian(net, X, [0]).gram().astype(np.float64)
        lam = np.linalg.eigvalsh(gram)
        cond = lam[-1] / max(lam[0], lam[-1] * 1e-7) if lam[-1] > 0 else 1.0
        ours, ref = fast.project(net, X, G), fixes.project(net, X, G)
        assert all(v.dtype == np.float32 for v in ours.values())
        assert close(ours, ref, g, 64 * np.finfo(np.float32).eps * cond), seed


SOME = QUESTION + [(f"random {i}", *p) for i, p in enumerate(RANDOM[:15])]


@pytest.mark.parametrize("name, net, X, G", SOME)
def test_fast_nullspace_equals_the_reference(name, net, X, G):
    D = {k: np.random.default_rng(2).normal(size=v.shape) for k, v in net.params.items()}
    for keep in ([0], [1, 0]):
        cond = gram_cond(net, X, keep)
        # each refinement pass multiplies the error by eps * cond: 3e-4 at the seed network's
        # cond 1.2e12 when both outputs are held, where one pass leaves the two tiers 1e-9 apart
        refine = 1 if cond < 1e10 else 2
        ref = fixes.nullspace(net, D, X, keep, refine=refine)
        assert close(fast.nullspace(net, D, X, keep, refine=refine), ref, D, RTOL, cond)


@pytest.mark.parametrize("name, net, X, G", SOME)
def test_fast_restore_equals_the_reference(name, net, X, G):
    keep = [0, 1]
    ref_values = net(X)[:, keep]
    moved = net.copy().step(fixes.project(net, X, G, keep=keep), 0.05)
    a, b = moved.copy(), moved.copy()
    report_ref = fixes.restore(a, X, ref_values, keep=keep, max_iter=8)
    report_fast = fast.restore(b, X, ref_values, keep=keep, max_iter=8)
    assert report_fast.converged == report_ref.converged
    assert report_fast.iterations == report_ref.iterations
    scale = max(np.linalg.norm(flatten(moved.params)), 1.0)
    assert np.linalg.norm(flatten(a.params) - flatten(b.params)) <= RTOL * scale


# -- the fast Jacobian and solver against the reference ones --------------------------------------
@pytest.mark.parametrize("name, net, X, G", SOME)
def test_fast_jacobian_products_equal_the_reference_ones(name, net, X, G):
    keep = [1, 0]
    ref = OutputJacobian(net, X, keep)
    J = fast.Jacobian.from_record(net, *fast.forward(net, X), keep)
    assert rel(J.gram(), ref.gram()) <= RTOL
    g = net.gradient(X, G)
    assert rel(J.matvec(g), ref.matvec(g)) <= RTOL
    dz = net.backward(net.forward(X), G).stages
    assert rel(J.matvec_gradient({l: dz[f"dz{l}"] for l in ref.signals}), ref.matvec(g)) <= RTOL
    alpha = np.random.default_rng(0).normal(size=ref.n_rows)
    assert rel(J.rmatvec(alpha), ref.rmatvec(alpha)) <= RTOL
    gram = J.gram()
    J.drop_input_kernels()
    assert np.array_equal(J.gram(), gram)                  # made again, the same


def test_fast_solver_keeps_the_constraints_the_reference_keeps():
    decided = {"bound": 0, "eigenvalues": 0}
    for seed in range(120):
        net, X, _ = random_problem(seed)
        for keep in ([0], [0, 1]):
            gram = OutputJacobian(net, X, keep).gram()
            ref, ours = jacobian.GramSolver(gram), fast.GramSolver(gram)
            assert ours.rank == ref.rank
            rhs = np.random.default_rng(seed).normal(size=gram.shape[0])
            assert rel(ours.refined(gram, rhs, 1), ref(rhs)) <= 64 * np.finfo(float).eps * ref.cond
            for threshold in (1e2, 1e4, 1e6):
                if not 0.5 < ref.cond / threshold < 2:         # an estimate decides near it
                    assert ours.cond_exceeds(threshold) == (ref.cond > threshold)
            if ours.exact:
                decided["eigenvalues"] += 1
            else:
                assert ours.cond >= ref.cond * (1 - 1e-9)      # the certified bound
                decided["bound"] += 1
    assert decided["bound"] > 100                              # the shortcut is really taken


def test_lower_inverse_inverts():
    rng = np.random.default_rng(0)
    for n in (1, 5, 64, 65, 200):
        L = np.tril(rng.normal(size=(n, n))) + n * np.eye(n)
        assert np.abs(fast.lower_inverse(L) @ L - np.eye(n)).max() <= 1e-13


def test_a_rank_deficient_gram_takes_the_pseudo_inverse():
    net, X, _ = SETUPS["visible"]()
    X2 = np.vstack([X[:3], X[:3]])                           # every constraint twice
    solver = fast.GramSolver(OutputJacobian(net, X2, [0]).gram())
    assert solver.rank == 3 and solver._pinv is not None


# -- every model ----------------------------------------------------------------------------------
def test_the_fast_tier_takes_every_model_and_refuses_anything_else():
    net, X, _ = SETUPS["visible"]()
    G = np.tile(G_QUESTION, (len(X), 1))
    for model in (mr.SplitHeads.from_mlp(net), mr.TwoTower.from_mlp(net)):
        assert rel(fast.gradient(model, X, G), model.gradient(X, G)) == 0.0
        assert rel(fast.project(model, X, G), fixes.project(model, X, G)) == 0.0
        a, b = model.copy(), model.copy()
        fast.step(a, model.gradient(X, G), 0.1)
        b.step(model.gradient(X, G), 0.1)
        assert rel(a.params, b.params) == 0.0
    for rule in (fast.gradient, fast.project):
        with pytest.raises(TypeError, match="^net: "):
            rule("not a network", X, G)


def test_the_fast_tier_blames_what_the_reference_blames():
    net = mr.MLP([3, 4, 2], seed=0)
    X = np.full((4, 3), 1e160)                     # a0 a0^T overflows in the Gram
    for project in (fast.project, fixes.project):
        with pytest.raises(ValueError, match=r"^keep_X \(X when not given\)"):
            project(net, X, [0.0, -1.0])
    net, X, _ = SETUPS["seed"]()
    before = {k: v.copy() for k, v in net.params.items()}
    for restore in (fast.restore, fixes.restore):
        with pytest.raises(ValueError, match="^ref: "):
            restore(net, X, np.full(len(X), 1e306))
        assert all(np.array_equal(net.params[k], before[k]) for k in before)
