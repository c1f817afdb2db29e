"""The fast tier equals the reference: gradient and step bit for bit, the projection and restore
to 1e-12 relative in float64 (to float32's roundoff times the Gram's condition in float32)."""
import numpy as np
import pytest

import mlp_ref as mr
from mlp_ref import fast, fixes, pseudoinverse
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
    from mlp_ref.fast.bench import peak_bytes
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
    return pseudoinverse.GramSolver(OutputJacobian(net, X, keep).gram()).cond


#: the tiers are compared here, not their accuracy (test_rank_and_scale): a warning that the
#: dtype cannot resolve some constraints is expected on some random problems, in both tiers
NOT_RESOLVED = pytest.mark.filterwarnings("ignore::mlp_ref.fixes.PrecisionWarning")


@NOT_RESOLVED
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
    """cond(J1 J1^T) = 2.4e11 on the seed network. Refined, both tiers hold J1 D = 0 to the accuracy
    ``fixes.nullspace`` states, (HELD_EPS + m) eps ||J| (|D| + |g|)||, and agree as far as J D = 0
    pins D down (``close``). One solve alone is a backward-stable solve of J J^T alpha = J g: it
    leaves at most about m eps cond |J g| (measured: 1e-8 |J g|, above the refined accuracy,
    which is why the default refines)."""
    net, X, _ = SETUPS["seed"]()
    J = OutputJacobian(net, X, [0])
    g = net.gradient(X, G_QUESTION)
    cond, m, eps = gram_cond(net, X, [0]), J.n_rows, np.finfo(float).eps

    def accuracy(D):
        size = np.linalg.norm(J.magnitude({k: np.abs(D[k]) + np.abs(v) for k, v in g.items()}))
        return (pseudoinverse.HELD_EPS + m) * eps * size

    for refine in (1, 2):
        D = fast.project(net, X, G_QUESTION, refine=refine)
        assert close(D, fixes.project(net, X, G_QUESTION, refine=refine), g, RTOL, cond)
        assert np.linalg.norm(J.matvec(D)) <= accuracy(D)
    unrefined = fast.project(net, X, G_QUESTION, refine=0)
    left = np.linalg.norm(J.matvec(unrefined))
    assert accuracy(unrefined) < left <= m * eps * cond * np.linalg.norm(J.matvec(g))


def test_equal_inputs_take_the_same_path_to_the_same_bits():
    for name, net, X, G in QUESTION:
        a = fast.project(net, X, G)
        for keep_X in (X, X.copy(), np.asfortranarray(X)):
            b = fast.project(net, X, G, keep_X=keep_X)
            assert all(np.array_equal(a[k], b[k]) for k in a)
        c = fixes.project(net, X, G, keep_X=X.copy())
        d = fixes.project(net, X, G)
        assert all(np.array_equal(c[k], d[k]) for k in c)


@NOT_RESOLVED
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


@NOT_RESOLVED
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
    assert report_fast.converged == report_ref.converged and report_fast.tol == report_ref.tol
    # the same iteration, rounded differently: the same number of steps, unless a residual lies
    # within the roundoff of the outputs (a few eps * max(1, max |ref|)) of tol, where either
    # tier may stop one step apart
    floor = 64 * np.finfo(float).eps * max(1.0, float(np.abs(ref_values).max()))
    decided = all(abs(h - report_ref.tol) > floor for h in report_ref.history + report_fast.history)
    assert abs(report_fast.iterations - report_ref.iterations) <= (0 if decided else 1)
    scale = max(np.linalg.norm(flatten(moved.params)), 1.0)
    assert np.linalg.norm(flatten(a.params) - flatten(b.params)) <= RTOL * scale


def test_fast_restore_reaches_a_huge_reference_as_the_reference_does():
    """Both tiers hold ref to max(tol, 16 eps max(1, max |ref|)), so that 1e-3 and 1e200 converge
    alike on every CPU (an absolute 1e-12 at 1e100 asks for less than one ulp, 1.9e84). The fast
    solver's conjugate gradients work on rhs scaled by a power of two: their squares of a
    residual of 1e200 (1e400) would overflow, and the loop stall, not converged."""
    net, X = mr.MLP([3, 4, 2]), np.random.default_rng(0).random((5, 3))
    for size in (1e-3, 1.0, 1e10, 1e100, 1e200):
        reports = [restore(net.copy(), X, np.full(5, size)) for restore in (fixes.restore, fast.restore)]
        assert all(r.converged and r.residual <= r.tol for r in reports), (size, [str(r) for r in reports])
        assert reports[0].tol == reports[1].tol == fixes.restore_tolerance(1e-12, np.full(5, size))[0]


# -- the fast Jacobian and solver against the reference ones --------------------------------------
@pytest.mark.parametrize("name, net, X, G", SOME)
def test_fast_jacobian_products_equal_the_reference_ones(name, net, X, G):
    keep = [1, 0]
    ref = OutputJacobian(net, X, keep)
    J = fast.Jacobian.from_record(net, *fast.forward_arrays(net, X), keep)
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
            ref, ours = pseudoinverse.GramSolver(gram), fast.GramSolver(gram)
            assert ours.rank == ref.rank
            rhs = np.random.default_rng(seed).normal(size=gram.shape[0])
            assert rel(ours.refined(rhs, 1), ref(rhs)) <= 64 * np.finfo(float).eps * ref.cond
            for threshold in (1e2, 1e4, 1e6):
                if not 0.5 < ref.cond / threshold < 2:         # an estimate decides near it
                    assert ours.cond_exceeds(threshold) == (ref.cond > threshold)
            if ours.exact:
                decided["eigenvalues"] += 1
            else:
                assert ours.cond >= ref.cond * (1 - 1e-9)      # the certified bound
                decided["bound"] += 1
    assert decided["bound"] > 100                              # the shortcut is really taken


def test_both_solvers_take_a_matrix_of_right_hand_sides_column_by_column():
    """gram^+ [r1 ... rk] = [gram^+ r1 ... gram^+ rk], also for k = m (where one 1/lambda per
    column instead of per row would pass NumPy's broadcasting unnoticed)."""
    for m, k in ((4, 3), (4, 4)):
        gram, R = spd(m, 1e3, seed=k), np.random.default_rng(k).normal(size=(m, k))
        for solver in (pseudoinverse.GramSolver(gram), fast.GramSolver(gram)):
            columns = np.stack([solver(R[:, j]) for j in range(k)], axis=1)
            assert rel(solver(R), columns) <= 1e-12 and rel(columns, np.linalg.solve(gram, R)) <= 1e-10


@pytest.mark.parametrize("Solver", [pseudoinverse.GramSolver, fast.GramSolver], ids=["reference", "fast"])
def test_both_solvers_have_one_interface(Solver):
    """Either tier's solver is made and used by the same calls: ``Solver(gram, rcond)``, the call,
    ``refined(rhs, passes)`` on its own gram, ``rank``, ``cond``, ``rcond``, ``exact``, ``gram``
    and ``cond_exceeds``; a refined solve of a well-conditioned system (cond 1e3) meets
    np.linalg.solve within m eps cond, what a backward-stable solve promises; a singular Gram
    (a constraint with a zero row: an eigenvalue exactly 0) has rank m - 1."""
    m = 6
    gram, rhs = spd(m, 1e3, seed=1), np.random.default_rng(1).normal(size=m)
    solver = Solver(gram, 1e-12)
    assert solver.gram is gram and solver.rcond == 1e-12 and solver.rank == m
    assert isinstance(solver.exact, bool) and solver.cond >= 1e3 * (1 - 1e-9)
    assert solver.cond_exceeds(10.0) and not solver.cond_exceeds(1e6)
    exact = np.linalg.solve(gram, rhs)
    for alpha in (solver(rhs), solver.refined(rhs, 2)):
        assert rel(alpha, exact) <= m * np.finfo(float).eps * 1e3 * 4
    singular = np.zeros((m, m))
    singular[1:, 1:] = spd(m - 1, 1e3, seed=2)
    assert Solver(singular).rank == m - 1


def spd(n, cond, seed, dtype=np.float64):
    """A random symmetric positive definite matrix, eigenvalues log-spaced from 1 to 1 / cond."""
    return gram_with(np.logspace(0, -np.log10(cond), n), seed, dtype)


def gram_with(lam, seed=0, dtype=np.float64):
    """Q diag(lam) Q^T for a random orthogonal Q, made exactly symmetric (as a Gram is)."""
    Q, _ = np.linalg.qr(np.random.default_rng(seed).normal(size=(len(lam), len(lam))))
    gram = (Q * lam) @ Q.T
    return ((gram + gram.T) / 2).astype(dtype)


def test_block_substitution_solves_as_numpy_does():
    # forward error of a backward-stable triangular solve: at most about n eps cond(L)
    eps = np.finfo(float).eps
    for block, sizes in ((16, (1, 5, 15, 16, 17, 32, 53)), (128, (100, 128, 300))):
        for n in sizes:
            L = np.linalg.cholesky(spd(n, 1e6, n))
            tol = 4 * n * eps * np.linalg.cond(L)
            solve = fast.CholeskySolve(L, block)
            for b in (np.random.default_rng(n).normal(size=n), np.random.default_rng(n).normal(size=(n, 3))):
                assert rel(solve.solve_lower(b), np.linalg.solve(L, b)) <= tol, (block, n)
                assert rel(solve.solve_upper(b), np.linalg.solve(L.T, b)) <= tol, (block, n)
                assert rel(solve(b), np.linalg.solve(L @ L.T, b)) <= tol ** 2 / (4 * n * eps), (block, n)


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_the_blocked_cholesky_factorises_as_lapack_does(dtype):
    # Higham Thm 10.3: L L^T = C + dC with |dC| <= gamma_{n+1} |L| |L^T|, for any order of the
    # inner products; and L is LAPACK's to within its forward error, eps cond(C) at most
    eps = np.finfo(dtype).eps
    for block, leaf, sizes in ((16, 4, (1, 5, 15, 16, 17, 53)), (256, 16, (300,))):
        for n in sizes:
            C = spd(n, 1e4, n).astype(dtype)
            L = fast.cholesky(C, block, leaf)
            assert L.dtype == dtype and np.array_equal(L, np.tril(L)), (block, n)
            bound = (n + 1) * eps * (np.abs(L) @ np.abs(L.T))
            assert np.all(np.abs(L @ L.T - C) <= bound), (block, n)
            assert rel(L, np.linalg.cholesky(C)) <= 4 * n * eps * 1e4, (block, n)
            upper = np.triu(np.random.default_rng(n).normal(size=(n, n)), 1).astype(dtype)
            assert np.array_equal(fast.cholesky(np.tril(C) + upper, block, leaf), L)  # lower half only


def test_the_blocked_cholesky_refuses_what_is_not_positive_definite_in_any_block():
    C = spd(53, 1e3, 0)
    for i in (0, 20, 52):                               # the first, a middle and the last block
        broken = C.copy()
        broken[i, i] = -1.0
        with pytest.raises(np.linalg.LinAlgError):
            fast.cholesky(broken, 16, 4)
    with pytest.raises(np.linalg.LinAlgError):
        fast.cholesky(gram_with(np.array([3.0, 2.0, 1.0, -1e-3] * 10)), 16, 4)


def test_lower_solve_is_a_forward_substitution():
    # its backward error: T Y - R within (b + 1) eps |T| |Y|, entry by entry
    eps = np.finfo(float).eps
    for b, leaf in ((1, 16), (7, 16), (16, 16), (37, 4), (64, 8)):
        T = np.linalg.cholesky(spd(b, 1e6, b))
        R = np.random.default_rng(b).normal(size=(b, 11))
        Y = fast.lower_solve(T, R, leaf)
        assert np.all(np.abs(T @ Y - R) <= (b + 1) * eps * (np.abs(T) @ np.abs(Y))), b


def test_lower_inverses_inverts_a_stack_of_triangular_blocks():
    eps = np.finfo(float).eps
    for b in (1, 2, 8, 16, 64):
        T = np.stack([np.linalg.cholesky(spd(b, 1e4, seed)) for seed in range(3)])
        inverses = fast.lower_inverses(T)
        assert np.array_equal(inverses, np.tril(inverses))
        for t, inverse in zip(T, inverses):
            assert np.abs(inverse @ t - np.eye(b)).max() <= 4 * b * eps * np.linalg.cond(t)


def _certified(gram):
    """Did the fast solver take the certificate's path (full rank for certain, no eigenvalues)?"""
    return not fast.GramSolver(gram).exact


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_the_certificate_never_claims_a_gram_with_an_eigenvalue_under_the_cut_off(dtype):
    # the eigenvalues of the float32 Grams are computed in float64, far more exactly than
    # float32's cut-off n eps: a real check of the inequality, not of the code against itself
    claims = 0
    for seed in range(150):
        rng = np.random.default_rng(seed)
        n = int(rng.integers(1, 40))
        lam = np.logspace(0, -rng.uniform(0, 16 if dtype == np.float64 else 9), n)
        gram = gram_with(lam, seed, dtype)
        rcond = pseudoinverse.default_rcond(n, dtype)
        if fast.certify(gram, rcond) is not None:
            claims += 1
            exact = np.linalg.eigvalsh(gram.astype(np.float64))
            assert exact[0] > rcond * exact[-1], (seed, n)
    assert claims > 40                                           # well-conditioned ones are claimed


def test_the_certificate_refuses_eigenvalues_near_or_under_the_cut_off_and_rank_deficient_grams():
    n = 50
    rcond = pseudoinverse.default_rcond(n, np.float64)
    for below_or_above in (0.25, 0.9, 1.1, 4.0):               # lam_min around rcond * lam_max
        lam = np.logspace(0, -3, n)
        lam[-1] = below_or_above * rcond
        gram = gram_with(lam, n)
        assert fast.certify(gram, rcond) is None
        ours, ref = fast.GramSolver(gram), pseudoinverse.GramSolver(gram)
        assert ours.exact and ours.rank == ref.rank
    for zeros in (1, 3, 10):
        lam = np.logspace(0, -3, n)
        lam[-zeros:] = 0.0
        gram = gram_with(lam, zeros)
        assert fast.certify(gram, rcond) is None and not _certified(gram)
        assert fast.GramSolver(gram).rank == pseudoinverse.GramSolver(gram).rank == n - zeros
    for cond in (1.0, 1e3, 1e8):                                # well conditioned: claimed
        assert _certified(spd(n, cond, 1))


def test_the_solver_leaves_the_gram_as_it_was():
    # the shift is written into the Gram's diagonal and put back: bit for bit, also when the
    # factorisation fails; a read-only Gram is copied instead
    for lam in (np.logspace(0, -3, 30), np.r_[np.ones(29), 0.0]):
        gram = gram_with(lam)
        before = gram.copy()
        fast.GramSolver(gram)
        assert np.array_equal(gram, before)
        gram.flags.writeable = False
        assert fast.GramSolver(gram).rank == pseudoinverse.GramSolver(before).rank


def residual(gram, alpha, rhs):
    """|rhs - gram alpha| / (|gram| |alpha|), in long double: the solve's backward error."""
    G, a, b = (np.asarray(v, dtype=np.longdouble) for v in (gram, alpha, rhs))
    return float(np.linalg.norm(b - G @ a)) / (np.linalg.norm(gram, 2) * np.linalg.norm(alpha))


def test_the_refined_solve_reaches_the_residual_of_the_reference():
    # including lam_min within 2 sigma of the shift, where the refinement with the shifted
    # factor does not contract (sigma / (lam_min - sigma) >= 1) and gram's own factor is made
    n = 60
    base = np.logspace(0, -3, n)
    sigma = fast.certify(gram_with(base), pseudoinverse.default_rcond(n, np.float64))[1]
    cases = [spd(n, cond, 2) for cond in (1.0, 1e3, 1e6, 1e9)]
    for times in (1.1, 1.5, 3.0, 10.0):
        lam = base.copy()
        lam[-1] = times * sigma
        cases.append(gram_with(lam))
    for seed in range(30):
        net, X, _ = random_problem(seed)
        cases.append(OutputJacobian(net, X, [0, 1]).gram())
    solved = 0
    for gram in cases:
        rhs = np.random.default_rng(3).normal(size=gram.shape[0])
        ours, ref = fast.GramSolver(gram), pseudoinverse.GramSolver(gram)
        if ref.rank < gram.shape[0]:
            continue                    # the pseudo-inverse: the reference's own solver
        solved += 1
        # backward stable as the reference: a residual of a few eps (m eps bounds a sum of m
        # terms), or within twice the reference's where that is more
        for alpha in (ours(rhs), ours.refined(rhs, 1)):
            assert residual(gram, alpha, rhs) <= max(2 * residual(gram, ref(rhs), rhs),
                                                     gram.shape[0] * np.finfo(float).eps)
    assert solved > 25


def test_the_cond_estimate_is_a_lower_bound_within_a_factor_1_5():
    # a lower bound up to roundoff: the Rayleigh quotient at the bottom, as eigh's lam_min, is
    # known to about m eps lam_max, a relative m eps cond
    eps = np.finfo(float).eps
    for seed in range(60):
        net, X, _ = random_problem(seed)
        gram = OutputJacobian(net, X, [0, 1]).gram()
        ours, ref = fast.GramSolver(gram), pseudoinverse.GramSolver(gram)
        if ref.rank == gram.shape[0]:
            roundoff = 4 * gram.shape[0] * eps * ref.cond
            assert ref.cond / 1.5 <= ours.estimate_cond() <= ref.cond * (1 + roundoff), seed


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
    for dtype, big in ((np.float32, 1e38), (np.float64, 1e308)):    # the backward pass overflows
        net, X = mr.MLP([3, 4, 2], dtype=dtype), np.ones((5, 3))
        G = np.full((5, 2), big)
        for call in (fast.gradient, fixes.naive, fast.project, fixes.project,
                     lambda net, X, G: fast.project(net, X, G, keep_X=X[:2])):
            with pytest.raises(ValueError, match=r"^G: expected values for which the backward pass"):
                call(net, X, G)
    net, X, _ = SETUPS["seed"]()                   # kept on other rows: the tiers agree, G blamed
    KX = X[:5] + 0.01
    for big, raises in ((1e305, False), (1e307, True)):
        got = []
        for project in (fast.project, fixes.project):
            if raises:
                with pytest.raises(ValueError, match=r"^G: expected values for which the projected"):
                    project(net, X, [big, 0.0], keep_X=KX)
            else:
                got.append(project(net, X, [big, 0.0], keep_X=KX))
        assert all(np.isfinite(v).all() for D in got for v in D.values())
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


@pytest.mark.parametrize("dtype, w, b", [(np.float32, 100.0, -50.0), (np.float64, 800.0, -360.0)])
def test_a_saturated_output_whose_gram_underflows_is_held_as_numerically_zero(dtype, w, b):
    """out1 = sigmoid(-50) = 2e-22 in float32 (e^-360 in float64): its Jacobian rows are that
    small, their products in J J^T subnormal, and 1 / lambda would overflow. Both tiers treat
    such a constraint as zero (``pseudoinverse.kept_eigenvalues``) and agree with the dense
    pseudo-inverse, which never squares J; before, the reference blamed D for a NaN and the
    fast tier returned it."""
    net = mr.MLP([1, 2], output="sigmoid", init_std=0.0, dtype=dtype)
    net.params["W1"][:] = [[w, 0.0]]
    net.params["b1"][:] = [b, 0.0]
    G = [0.0, -1.0]
    for X in ([[0.0], [1.0]], [[0.0]]):                   # out1 = 1.0 exactly on the second row
        gram = mr.jacobian.OutputJacobian(net, X).gram()
        assert 0 < np.abs(gram).max() < np.finfo(dtype).tiny
        ref, quick, dense = (f(net, X, G) for f in (fixes.project, fast.project, fixes.project_dense))
        for k in ref:
            assert np.isfinite(ref[k]).all() and np.array_equal(ref[k], quick[k])
            assert np.array_equal(ref[k], dense[k])
