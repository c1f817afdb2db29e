"""What holds on every CPU whatever its last bits: restore holds ref to a tolerance that scales
with its size where the caller's asks for less than the dtype resolves; project holds J D = 0 to
the accuracy it states, or warns why the dtype cannot; both tiers keep the same constraints at the
rank's cut-off; and an overflow on the way to a named error is that error alone.

Every bound below is derived in the test from eps, the sizes and the Gram's spectrum, never
copied from one machine's output.
"""
import re
import warnings

import numpy as np
import pytest

import mlp_ref as mr
from mlp_ref import fast, fixes, pseudoinverse
from mlp_ref.data import probe_inputs
from mlp_ref.jacobian import OutputJacobian, flatten
from mlp_ref.setups import G_QUESTION, SETUPS, seed_setup

TIERS = {"reference": fixes, "fast": fast}
EPS32 = float(np.finfo(np.float32).eps)


def in_dtype(net, dtype):
    """A copy of an MLP in another dtype, its parameters rounded to it."""
    copy = mr.MLP(net.sizes, hidden=net.hidden, output=net.output, dtype=dtype)
    for k, v in net.params.items():
        copy.params[k][...] = v
    return copy


def exact_jacobian(net, X, keep):
    """J of outputs ``keep`` at the parameters of ``net`` as they are (float32 ones included),
    computed in float64: J D measured with a roundoff far below float32's."""
    return OutputJacobian(in_dtype(net, np.float64), np.asarray(X, dtype=np.float64), keep)


def wide(D):
    return {k: np.asarray(v, dtype=np.float64) for k, v in D.items()}


def norm(v):
    return float(np.linalg.norm(flatten(v) if isinstance(v, dict) else v))


def accuracy(J, D, given, dtype):
    """The accuracy ``nullspace`` states, (HELD_EPS + m) eps ||J| (|D| + |D_given|)||, plus the
    roundoff of its own check of J D in the dtype (a sum of at most w + 1 terms a layer, w the
    widest layer: gamma_{w+1} ||J| |D||)."""
    eps = float(np.finfo(dtype).eps)
    m, w = J.n_rows, max(J.net.sizes)
    D, given = wide(D), wide(given)
    size = norm(J.magnitude({k: np.abs(D[k]) + np.abs(v) for k, v in given.items()}))
    return (pseudoinverse.HELD_EPS + m + w + 1) * eps * size


def projected(tier, net, X, G, **kw):
    """(D, the PrecisionWarnings the call raised)."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", fixes.PrecisionWarning)
        D = tier.project(net, X, G, **kw)
    return D, [w for w in caught if issubclass(w.category, fixes.PrecisionWarning)]


# -- restore: a tolerance that scales with what it holds ---------------------------------------------
@pytest.mark.parametrize("tier", TIERS)
def test_restore_holds_ref_to_tol_or_to_the_dtypes_resolution_at_its_size(tier):
    """max |O - ref| <= max(tol, 16 eps max(1, max |ref|)): 1e-3 and 1e200 converge alike, where
    an absolute 1e-12 at 1e100 asks for less than one ulp (1.9e84) and converged only on lucky
    kernels. Below 1e-12 / (16 eps) = 2.8e2 the caller's tol stands, and the note is empty."""
    net, X = mr.MLP([3, 4, 2]), np.random.default_rng(0).random((5, 3))
    floor = fixes.RESTORE_FLOOR_EPS * np.finfo(float).eps
    for size in (1e-3, 1.0, 1e10, 1e100, -1e100, 1e200):
        moved = net.copy()
        report = TIERS[tier].restore(moved, X, np.full(5, size))
        assert report.converged and report.tol == max(1e-12, floor * abs(size)), (size, str(report))
        assert report.residual == np.abs(moved(X)[:, 0] - size).max() <= report.tol
        assert (report.note == "") == (abs(size) < 1e-12 / floor), (size, report.note)


@pytest.mark.parametrize("tier", TIERS)
def test_float32_restore_aims_at_what_float32_resolves_and_says_so(tier):
    """tol = 1e-12 is a millionth of float32's eps: unreachable. It is raised to the floor,
    16 eps * max(1, max |ref|), and the note says so; float64 keeps the caller's tol."""
    for dtype in (np.float32, np.float64):
        net64, X, _ = SETUPS["visible"]()
        net, X = in_dtype(net64, dtype), X.astype(dtype)
        ref = net(X)[:, 0]
        moved = net.copy().step(fixes.project(net, X, G_QUESTION), 0.01)
        report = TIERS[tier].restore(moved, X, ref)
        scale = max(1.0, float(np.abs(ref).max()))
        assert report.converged and report.residual <= report.tol, str(report)
        if dtype == np.float32:
            assert report.tol == fixes.RESTORE_FLOOR_EPS * EPS32 * scale
            assert "finer than float32 resolves" in report.note and report.note in str(report)
        else:
            assert report.tol == 1e-12 and report.note == ""


@pytest.mark.parametrize("tier", TIERS)
def test_a_restore_that_cannot_converge_says_why(tier):
    # float32 resolves 19 of the visible network's 40 constraints on the probe inputs (float64
    # resolves all): the residual along the other 21 is out of every Gauss-Newton step's reach
    net64, X, _ = SETUPS["visible"]()
    net, X = in_dtype(net64, np.float32), X.astype(np.float32)
    keep_X = probe_inputs(40, seed=3).astype(np.float32)
    ref = net(keep_X)[:, 0]
    moved = net.copy().step(fixes.naive(net, X, G_QUESTION), 0.01)
    report = TIERS[tier].restore(moved, keep_X, ref)
    rank = pseudoinverse.GramSolver(OutputJacobian(moved, keep_X, [0]).gram()).rank
    assert not report.converged and report.residual > 100 * report.tol
    assert rank < 40 and report.note.startswith(f"{40 - rank} of the 40 constraints")
    # a loop cut short by max_iter says that it was still falling: after a projected step the
    # residual squares at each step, 2e-2 -> 4e-4 -> ...
    net, X, _ = SETUPS["visible"]()
    moved = net.copy().step(fixes.project(net, X, G_QUESTION), 0.01)
    report = TIERS[tier].restore(moved, X, net(X)[:, 0], max_iter=1)
    assert not report.converged and report.history[1] < report.history[0] / 2
    assert "still falling" in report.note and report.note in str(report)
    # and one whose step made it worse says so: a naive step of lr 1 is far from linear
    moved = net.copy().step(fixes.naive(net, X, G_QUESTION), 1.0)
    report = TIERS[tier].restore(moved, X, net(X)[:, 0], max_iter=1)
    assert not report.converged and report.history[1] > report.history[0]
    assert "stopped falling" in report.note


# -- project: the accuracy it states, or a warning that says why not -----------------------------------
def problems(dtype):
    """The question's setups and some random networks (depth 1 to 3, mixed activations), in dtype."""
    out = [(name, in_dtype(make()[0], dtype), make()[1].astype(dtype), G_QUESTION) for name, make in SETUPS.items()]
    acts = ["tanh", "sigmoid", "relu", "identity"]
    for seed in range(30):
        rng = np.random.default_rng(seed)
        sizes = [int(rng.integers(2, 9)) for _ in range(int(rng.integers(2, 5)))] + [int(rng.integers(2, 4))]
        hidden = [acts[i] for i in rng.integers(0, 4, len(sizes) - 2)]
        net = mr.MLP(sizes, hidden=hidden, init_std=float(rng.choice([0.3, 1.0])), seed=seed, dtype=dtype)
        n = int(rng.integers(1, 9))
        out.append((f"random {seed}", net, rng.normal(size=(n, sizes[0])).astype(dtype),
                    rng.normal(size=(n, sizes[-1])).astype(dtype)))
    return out


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("tier", TIERS)
def test_project_holds_J_D_to_its_stated_accuracy_or_warns_why_not(tier, dtype):
    warned = set()
    for name, net, X, G in problems(dtype):
        for keep in ([0], [net.sizes[-1] - 1, 0]):
            D, caught = projected(TIERS[tier], net, X, G, keep=keep)
            g = net.gradient(X, G)
            J = exact_jacobian(net, X, keep)
            left, bound = norm(J.matvec(wide(D))), accuracy(J, D, g, dtype)
            solver = pseudoinverse.GramSolver(OutputJacobian(net, X, keep).gram())
            if solver.rank == J.n_rows and solver.cond > pseudoinverse.assured_cond(dtype, 1):
                # past assured_cond, what the two passes may leave is stated too
                bound = max(bound, pseudoinverse.passes_leave(solver.cond, dtype, 1) * norm(J.matvec(wide(g))))
            if not caught:
                assert left <= bound, (name, keep, left / bound)
                continue
            warned.add(name)
            # a warning is true: J D = 0 is missed, and the reason it names is there
            assert left > bound / 2, (name, keep)
            message = str(caught[0].message)
            dropped = re.search(r"(\d+) of the (\d+) constraints", message)
            if dropped:
                assert (int(dropped[1]), int(dropped[2])) == (J.n_rows - solver.rank, J.n_rows)
            else:
                assert solver.cond > pseudoinverse.assured_cond(dtype, 1), message
    if dtype == np.float32:       # the warning is really raised: float32 drops 4 of the seed's 8
        assert "seed" in warned


def test_float32_project_is_held_to_eps32_times_the_square_root_of_the_condition():
    """Where float32 resolves every constraint, the stated accuracy gives, with
    ||J| x| <= ||J||_F ||x|| <= sqrt(m lam_max) ||x|| and ||J g|| >= sqrt(lam_min) ||g - D||
    (g - D lies in J's row space):

        |J D| / |J g| <= (HELD_EPS + m + w + 1) eps32 sqrt(m cond(J J^T)) (|D| + |g|) / |g - D|.

    On the visible setup (cond 4e3) that is 1e-3; measured, 4e-8 (reference) and 1.3e-6 (fast)."""
    cases = 0
    for name, net, X, G in problems(np.float32):
        keep = [0]
        J = exact_jacobian(net, X, keep)
        lam = np.linalg.eigvalsh(J.gram())
        if pseudoinverse.GramSolver(OutputJacobian(net, X, keep).gram()).rank < J.n_rows or lam[0] <= 0:
            continue
        cases += 1
        g = net.gradient(X, G)
        m, w = J.n_rows, max(net.sizes)
        for tier in TIERS.values():
            D, caught = projected(tier, net, X, G, keep=keep)
            assert not caught, name
            moved = norm(J.matvec(wide(g)))
            bound = ((pseudoinverse.HELD_EPS + m + w + 1) * EPS32 * np.sqrt(m * lam[-1] / lam[0])
                     * (norm(wide(D)) + norm(wide(g))) / norm({k: g[k] - D[k] for k in g}))
            assert norm(J.matvec(wide(D))) <= bound * moved, (name, tier.__name__)
    assert cases >= 10


def test_the_seed_network_in_float32_warns_that_it_drops_half_its_constraints():
    """cond(J1 J1^T) = 2e11 on the seed network: float32 (rcond = 8 eps32 = 9.5e-7) resolves 4 of
    the 8 constraints. D still moves the other 4, by at most sqrt(lam) |D| each, lam their
    eigenvalues of J J^T, all below the cut-off: far above float32's rounding of D, and said."""
    net64, X, _ = SETUPS["seed"]()
    net, X = in_dtype(net64, np.float32), X.astype(np.float32)
    J = exact_jacobian(net, X, [0])
    lam = np.linalg.eigvalsh(J.gram())
    cut = pseudoinverse.default_rcond(8, np.float32) * lam[-1]
    rank = pseudoinverse.GramSolver(OutputJacobian(net, X, [0]).gram()).rank
    assert rank == 4
    g = net.gradient(X, G_QUESTION)
    for tier in TIERS.values():
        D, caught = projected(tier, net, X, G_QUESTION)
        assert len(caught) == 1 and "4 of the 8 constraints" in str(caught[0].message)
        left = norm(J.matvec(wide(D)))
        assert left > 2 * accuracy(J, D, g, np.float32)
        # at most what dropping 4 eigenvalues below the cut can leave (float32's own eigenvalues
        # may place the cut a few eps32 lam_max from float64's: twice the cut covers it)
        assert left <= np.sqrt(4 * 2 * cut) * norm(wide(D)) + accuracy(J, D, g, np.float32)
        measured = float(re.search(r"\|J D\| = ([\d.e+-]+) \|J D_given\|", str(caught[0].message))[1])
        assert measured == pytest.approx(left / norm(J.matvec(wide(g))), rel=0.1)


def test_float64_holds_the_question_without_a_warning():
    for name, make in SETUPS.items():
        net, X, _ = make()
        for keep in ([0], [0, 1]):
            for tier in TIERS.values():
                with warnings.catch_warnings():
                    warnings.simplefilter("error", fixes.PrecisionWarning)
                    tier.project(net, X, G_QUESTION, keep=keep)


# -- one rank decision for both tiers ------------------------------------------------------------------
def gram_with(lam, seed=0):
    """Q diag(lam) Q^T for a random orthogonal Q, made exactly symmetric."""
    Q, _ = np.linalg.qr(np.random.default_rng(seed).normal(size=(len(lam), len(lam))))
    gram = (Q * lam) @ Q.T
    return (gram + gram.T) / 2


def ulps_apart(gram, seed):
    """gram with every entry moved by up to two units in its last place, symmetrically: a Gram of
    the same constraints computed another way (the fast tier's stacked backward pass multiplies
    other shapes than the reference's q passes)."""
    steps = np.random.default_rng(seed).integers(-2, 3, gram.shape)
    steps = np.triu(steps) + np.triu(steps, 1).T
    return gram + steps * np.spacing(np.abs(gram))


#: lam_min over the cut-off rcond * lam_max: clearly below, within roundoff of it (the computed
#: eigenvalue lands on either side, kernel by kernel), exactly at it, and clearly above
AT_THE_CUT = (1 - 1e-6, 1 - 1e-11, 1.0, 1 + 1e-11, 1 + 1e-6)


def test_both_solvers_keep_the_same_constraints_at_and_near_the_cut_off():
    for m in (8, 40):
        for rcond in (None, 1e-6):
            cut = pseudoinverse.default_rcond(m, np.float64) if rcond is None else rcond
            for seed, at in enumerate(AT_THE_CUT):
                lam = np.logspace(0, -3, m)
                lam[-1] = at * cut
                gram = gram_with(lam, seed)
                reference = pseudoinverse.GramSolver(gram, rcond)
                ours = fast.GramSolver(gram, rcond)
                assert ours.rank == reference.rank, (m, rcond, at)
                # the fast tier's own Gram differs from the reference's in its last bits: the
                # rank is decided on the reference's, and the pseudo-inverse is the reference's
                other = fast.GramSolver(ulps_apart(gram, seed), rcond, reference=gram)
                assert other.rank == reference.rank, (m, rcond, at)
                if reference.rank < m:
                    rhs = np.random.default_rng(seed).normal(size=m)
                    assert np.array_equal(other(rhs), reference(rhs))
                if rcond is not None and at in (AT_THE_CUT[0], AT_THE_CUT[-1]):
                    # 1e-6 of the cut is 1e-12 of lam_max, a thousand times the roundoff of
                    # lam_min (a few eps lam_max): decided
                    assert reference.rank == (m - 1 if at < 1 else m), (m, at)


def test_a_certified_gram_is_full_rank_for_the_reference_too():
    """The certificate proves lam_min(gram) >= rcond * trace + beta, beta = (n + 2) u trace and
    more: it leaves the reference's eigh (error a few eps lam_max) and a Gram a few ulps apart
    (the other tier's) no room to find an eigenvalue under the cut-off. Tried just above the
    certificate's shift, where it is closest."""
    claimed = 0
    for m in (2, 5, 16, 40):
        base = np.logspace(0, -3, m)
        sigma = fast.certify(gram_with(base), pseudoinverse.default_rcond(m, np.float64))[1]
        for seed, times in enumerate((1.0 + 1e-9, 1.001, 1.01, 1.1, 2.0)):
            lam = base.copy()
            lam[-1] = times * sigma
            gram = gram_with(lam, seed)
            if fast.certify(gram, pseudoinverse.default_rcond(m, np.float64)) is None:
                continue
            claimed += 1
            for reference in (gram, ulps_apart(gram, seed)):
                assert pseudoinverse.GramSolver(reference).rank == m, (m, times)
    assert claimed >= 12


def known_spectrum(lam, seed=0):
    """An MLP with one identity layer and inputs X whose out1-Gram J1 J1^T = X X^T + 1 1^T has
    the eigenvalues lam (lam[0] >= n, along the constant vector, which the bias's column adds),
    and the orthogonal Q of its eigenvectors (column j for lam[j])."""
    n = len(lam)
    start = np.random.default_rng(seed).normal(size=(n, n))
    start[:, 0] = 1.0
    Q, _ = np.linalg.qr(start)                       # Q[:, 0] = +-1 / sqrt(n)
    X = Q * np.sqrt(np.asarray(lam) - n * (np.arange(n) == 0))
    net = mr.MLP([n, 2], output="identity", init_std=0.5, seed=seed)
    return net, X, Q


def test_both_tiers_keep_the_same_constraints_at_the_cut_off_and_agree_on_J_D():
    """out1's Gram with an eigenvalue at, just above and just below the cut-off rcond * lam_max
    (rcond = 1e-6), and G pushing out1 along that eigenvector u: kept, J D has no component
    along u; dropped, its component is lam_u (u . G_1), the same in both tiers. So the tiers' J D
    agree within their two stated accuracies whatever each decides, as long as they decide
    alike, and a different decision would be lam_u |u . G_1| apart, 1e6 times more. (The
    projection of one g, ``nullspace``: ``project`` adds each tier's own rounding of g.)"""
    rcond, lam_max, n = 1e-6, 10.0, 8
    for seed, at in enumerate(AT_THE_CUT):
        lam = np.array([lam_max, 7.0, 5.0, 3.0, 2.0, 1.5, 1.0, at * rcond * lam_max])
        net, X, Q = known_spectrum(lam, seed)
        G = np.stack([Q[:, -1], np.random.default_rng(seed).normal(size=n)], axis=1)
        keep = [0]
        J = OutputJacobian(net, X, keep)
        decided = pseudoinverse.GramSolver(J.gram(), rcond).rank
        fast_J = fast.Jacobian.from_record(net, *fast.forward_arrays(net, X), keep)
        ours = fast.GramSolver(fast_J.gram(), rcond, reference=fast.reference_gram(net, X, keep)).rank
        assert ours == decided, at
        if at in (AT_THE_CUT[0], AT_THE_CUT[-1]):
            assert decided == (n - 1 if at < 1 else n), at
        g = net.gradient(X, G)
        D = {}
        for tier, module in TIERS.items():
            with warnings.catch_warnings(record=True) as caught:
                warnings.simplefilter("always", fixes.PrecisionWarning)
                D[tier] = module.nullspace(net, g, X, keep, rcond=rcond)
            assert bool(caught) == (decided < n), (tier, at)      # a dropped u is warned about
        gap = norm(J.matvec({k: D["fast"][k] - D["reference"][k] for k in g}))
        bound = accuracy(J, D["fast"], g, np.float64) + accuracy(J, D["reference"], g, np.float64)
        assert gap <= bound, (at, gap, bound)
        assert lam[-1] * abs(Q[:, -1] @ G[:, 0]) > 1e6 * bound         # a disagreement would show


# -- an overflow on the way to a named error is that error alone ----------------------------------------
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("tier", TIERS)
def test_overflowing_restores_and_projections_raise_their_error_and_no_warning(tier, dtype):
    module, top = TIERS[tier], float(np.finfo(dtype).max)
    net64, X, _ = SETUPS["seed"]()
    net, X = in_dtype(net64, dtype), X.astype(dtype)
    params = {k: v.copy() for k, v in net.params.items()}
    calls = [("ref", lambda: module.restore(net, X, np.full(8, top / 2))),
             ("ref", lambda: module.restore(net, X, np.full(8, top))),
             ("G", lambda: module.project(net, X, [top / 2, 0.0])),
             ("G", lambda: module.project(net, X, [top / 2, 0.0], keep_X=X[:3] + 0.01)),
             ("D", lambda: module.nullspace(net, {k: np.full_like(v, top / 4) for k, v in params.items()}, X))]
    for name, call in calls:
        with warnings.catch_warnings():
            warnings.simplefilter("error")                      # a RuntimeWarning would raise first
            with pytest.raises(ValueError, match=f"^{name}: "):
                call()
        assert all(np.array_equal(net.params[k], params[k]) for k in params)


@pytest.mark.parametrize("tier", TIERS)
def test_the_precision_warning_points_at_the_callers_line(tier):
    """Through the errstate wrapper around the lesson's functions too: the warning's location
    is the line of the caller's code that asked for the projection."""
    net64, X, _ = seed_setup()
    net = mr.MLP([3, 4, 2], dtype=np.float32)
    net.params = {k: v.astype(np.float32) for k, v in net64.params.items()}
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", fixes.PrecisionWarning)
        TIERS[tier].project(net, X, G_QUESTION)               # float32 drops 4 of the 8
    assert [(w.filename, w.category) for w in caught] == [(__file__, fixes.PrecisionWarning)]
