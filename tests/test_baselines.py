"""The field's baselines (mlp_ref.baselines: A-GEM, EWC, the diagonal Fisher, GPM) against their
formulas on random networks, in float64 and float32, on every model; GPM at threshold 1.0 holds
every output on the memory to round-off at any lr; bases read in batches equal bases read whole.

Tolerances: float64 and float32 bounds are written in units of the dtype's eps, from the sums
involved (a dot product of P terms is off by at most about P eps times the sum of the absolute
products, Higham's gamma_P), never fitted to one CPU's bits."""
import numpy as np
import pytest

import mlp_ref as mr
from mlp_ref import baselines, fixes

DTYPES = [np.float64, np.float32]


def _models(dtype, seed=0):
    sizes = [6, 9, 8, 4]
    return [mr.MLP(sizes, hidden="tanh", init_std=0.5, seed=seed, dtype=dtype),
            mr.SplitHeads(sizes, heads=[[0, 1], [2, 3]], hidden="tanh", init_std=0.5, seed=seed,
                          dtype=dtype),
            mr.TwoTower(sizes, groups=[[0], [1, 2, 3]], hidden="tanh", init_std=0.5, seed=seed,
                        dtype=dtype)]


def _data(dtype, n=10, m=5, d=6, K=4, seed=1):
    rng = np.random.default_rng(seed)
    return [rng.normal(size=s).astype(dtype) for s in ((n, d), (n, K), (m, d), (m, K))]


def _abs_dot(A, B):
    return sum(float(np.abs(A[k]).astype(float).ravel() @ np.abs(B[k]).astype(float).ravel()) for k in A)


def _f64(D):
    return {k: np.asarray(v, dtype=np.float64) for k, v in D.items()}


# -- A-GEM ---------------------------------------------------------------------------------
@pytest.mark.parametrize("dtype", DTYPES)
def test_agem_removes_exactly_the_component_against_the_memory_gradient(dtype):
    for net in _models(dtype):
        X, G, KX, KG = _data(dtype)
        g, r = _f64(net.gradient(X, G)), _f64(net.gradient(KX, KG))
        if baselines.dot(g, r) > 0:                 # make the two gradients conflict
            KG = -KG
            r = _f64(net.gradient(KX, KG))
        g_r, r_r = baselines.dot(g, r), baselines.dot(r, r)
        assert g_r < 0
        D = _f64(fixes.agem(net, X, G, KX, KG))
        want = {k: g[k] - (g_r / r_r) * r[k] for k in g}         # the formula, in float64
        eps, P = float(np.finfo(dtype).eps), net.n_params
        # the coefficient g.r / r.r is off by (2 P + 2) eps relative, times the sums of |g||r|
        # and |r||r| over g.r and r.r; each entry then by one more rounding of g and of the product
        coef_err = (P + 2) * eps * (_abs_dot(g, r) / abs(g_r) + _abs_dot(r, r) / r_r) * abs(g_r / r_r)
        for k in g:
            bound = coef_err * np.abs(r[k]) + 2 * eps * (np.abs(g[k]) + abs(g_r / r_r) * np.abs(r[k]))
            assert np.all(np.abs(D[k] - want[k]) <= bound), k
        # and the corrected direction no longer points against the memory: D.r = 0 to round-off
        assert abs(baselines.dot(D, r)) <= 4 * (P + 2) * eps * (_abs_dot(D, r) + abs(g_r) + _abs_dot(g, r))


def _sign_safe_dot(A, B):
    """A.B and sum |A||B| in float64 of A and B each divided by its largest entry (a power of two
    would do; any positive factor keeps the sign): no product underflows, at any scale."""
    a = max(float(np.max(np.abs(v))) for v in A.values())
    b = max(float(np.max(np.abs(v))) for v in B.values())
    A = {k: v.astype(float) / a for k, v in A.items()}
    B = {k: v.astype(float) / b for k, v in B.items()}
    return baselines.dot(A, B), _abs_dot(A, B)


@pytest.mark.parametrize("dtype, scales", [(np.float32, (1e-23, 1e-40)), (np.float64, (1e-170, 1e-300))])
def test_agem_keeps_its_guarantee_at_any_scale_of_the_memorys_gradient(dtype, scales):
    """keep_G x 1e-23 (float32) or x 1e-170 (float64): r.r underflows to 0 in the dtype, and the
    unscaled formula returned g although g.r < 0. Scaled by powers of two, D.r >= 0 to round-off:
    D.r is r.g - (g.r / r.r) r.r, rounded in P-term dots and one subtraction per entry, so
    |D.r| <= 4 (P + 2) eps (sum |D||r| + sum |g||r|) (Higham's gamma_P), with r and D normalised."""
    eps = float(np.finfo(dtype).eps)
    for net in _models(dtype)[::2]:                       # an MLP, and two towers (every piece scaled)
        X, G, KX, KG = _data(dtype)
        if baselines.dot(net.gradient(X, G), net.gradient(KX, KG)) > 0:
            KG = -KG
        for scale in scales:
            for small_G, small_KG in ((1.0, scale), (scale, 1.0), (scale, scale)):
                G_s, KG_s = (G * dtype(small_G)).astype(dtype), (KG * dtype(small_KG)).astype(dtype)
                g, r = net.gradient(X, G_s), net.gradient(KX, KG_s)
                if small_KG < 1e-20 and scale in (scales[0],):
                    assert baselines.dot(r, r) == 0.0                 # the case the issue found: r.r underflows
                g_r, _ = _sign_safe_dot(g, r)
                if not (np.isfinite(g_r) and g_r < 0 and all(np.any(v) for v in (*g.values(),))):
                    continue                                          # subnormal r: nothing left to conflict
                D = fixes.agem(net, X, G_s, KX, KG_s)
                assert not all(np.array_equal(D[k], g[k]) for k in g), (scale, "no correction made")
                D_r, abs_D_r = _sign_safe_dot(D, r)
                _, abs_g_r = _sign_safe_dot(g, r)
                d_scale = max(float(np.max(np.abs(v))) for v in D.values())
                g_scale = max(float(np.max(np.abs(v))) for v in g.values())
                assert D_r >= -4 * (net.n_params + 2) * eps * (abs_D_r + abs_g_r * g_scale / d_scale), \
                    (type(net).__name__, scale, small_G, small_KG, D_r)


@pytest.mark.parametrize("dtype", DTYPES)
def test_agem_is_the_plain_gradient_bit_for_bit_when_there_is_no_conflict(dtype):
    for net in _models(dtype):
        X, G, KX, KG = _data(dtype)
        g = net.gradient(X, G)
        same = fixes.agem(net, X, G, X, G)               # r = g: g.r = |g|^2 >= 0
        assert all(np.array_equal(same[k], g[k]) for k in g)
        zero = fixes.agem(net, X, G, KX, np.zeros_like(KG))       # r = 0: r.r = 0, D = g
        assert all(np.array_equal(zero[k], g[k]) for k in g)
        r = net.gradient(KX, KG)                          # g.r > 0 for one sign of keep_G
        KG = KG if baselines.dot(g, r) > 0 else -KG
        agree = fixes.agem(net, X, G, KX, KG)
        assert all(np.array_equal(agree[k], g[k]) for k in g)


# -- EWC -----------------------------------------------------------------------------------
@pytest.mark.parametrize("dtype", DTYPES)
def test_ewc_adds_the_gradient_of_the_fisher_weighted_penalty(dtype):
    """D - g is the gradient of lam/2 sum F (theta - anchor)^2: checked by central differences,
    exact for a quadratic but for rounding (in float64, whatever the network's dtype)."""
    rng = np.random.default_rng(3)
    for net in _models(dtype):
        X, G, _, _ = _data(dtype)
        fisher = {k: rng.random(v.shape).astype(dtype) for k, v in net.params.items()}
        anchor = {k: (v + rng.normal(size=v.shape)).astype(dtype) for k, v in net.params.items()}
        lam = 0.7
        D, g = fixes.ewc(net, X, G, fisher, anchor, lam), net.gradient(X, G)

        def penalty(theta):
            f64 = {k: (np.asarray(fisher[k], np.float64), np.asarray(anchor[k], np.float64)) for k in theta}
            return 0.5 * lam * sum(float(np.sum(F * (theta[k] - A) ** 2)) for k, (F, A) in f64.items())
        theta = _f64(net.params)
        h, eps = 1e-3, float(np.finfo(dtype).eps)
        for k in theta:
            for idx in [tuple(rng.integers(0, s) for s in theta[k].shape) for _ in range(3)]:
                up, down = dict(theta), dict(theta)
                up[k], down[k] = theta[k].copy(), theta[k].copy()
                up[k][idx] += h
                down[k][idx] -= h
                fd = (penalty(up) - penalty(down)) / (2 * h)
                pull = float(D[k][idx]) - float(g[k][idx])
                # the difference quotient of a quadratic is exact; its rounding ~ eps64 * P / h;
                # D's own: two roundings of lam F (theta - anchor) and of g + pull, in dtype
                scale = abs(fd) + abs(float(g[k][idx]))
                assert abs(pull - fd) <= 4 * eps * scale + 1e-9 * (1 + penalty(theta)), (k, idx)


def test_ewc_at_the_anchor_or_with_lam_0_is_the_plain_gradient_bit_for_bit():
    for net in _models(np.float64):
        X, G, _, _ = _data(np.float64)
        g = net.gradient(X, G)
        F = {k: np.ones_like(v) for k, v in net.params.items()}
        at = fixes.ewc(net, X, G, F, net.params, 5.0)                # theta - anchor = 0
        off = fixes.ewc(net, X, G, F, {k: v + 1 for k, v in net.params.items()}, 0.0)
        assert all(np.array_equal(at[k], g[k]) and np.array_equal(off[k], g[k]) for k in g)


def test_merged_penalties_pull_as_their_sum():
    """F (theta - anchor) of ewc_merge equals sum_t F_t (theta - anchor_t) for any theta."""
    rng = np.random.default_rng(4)
    shapes = {"W1": (3, 4), "b1": (4,)}
    fishers = [{k: rng.random(s) * (rng.random(s) > 0.3) for k, s in shapes.items()} for _ in range(3)]
    anchors = [{k: rng.normal(size=s) for k, s in shapes.items()} for _ in range(3)]
    F, anchor = baselines.ewc_merge(fishers, anchors)
    eps = float(np.finfo(np.float64).eps)
    for _ in range(3):
        theta = {k: rng.normal(size=s) for k, s in shapes.items()}
        for k in shapes:
            want = sum(f[k] * (theta[k] - a[k]) for f, a in zip(fishers, anchors))
            scale = sum(f[k] * (np.abs(theta[k]) + np.abs(a[k])) for f, a in zip(fishers, anchors))
            assert np.all(np.abs(F[k] * (theta[k] - anchor[k]) - want) <= 16 * eps * scale)


@pytest.mark.parametrize("dtype", DTYPES)
def test_fisher_diagonal_is_the_mean_of_the_squared_per_row_gradients(dtype):
    for net in _models(dtype):
        _, _, KX, KG = _data(dtype, m=7)
        F = fixes.fisher_diagonal(net, KX, KG)
        rows = [_f64(net.gradient(KX[i:i + 1], KG[i:i + 1])) for i in range(len(KX))]
        eps = float(np.finfo(dtype).eps)
        for k in F:
            want = np.mean([g[k] ** 2 for g in rows], axis=0)       # the definition
            # each per-row gradient is off by a few eps (it is the same backward pass); its
            # square by twice that; the mean of m non-negative terms by m eps more
            assert np.all(np.abs(F[k] - want) <= (16 + len(KX)) * eps * want + 1e-300), k
            assert np.all(F[k] >= 0)


@pytest.mark.parametrize("dtype, scale", [(np.float64, 1e-170), (np.float32, 1e-20)])
def test_fisher_diagonal_says_when_its_squares_underflow_and_is_unchanged_where_they_do_not(dtype, scale):
    """keep_G x 1e-170 (float64) or 1e-20 (float32): every squared gradient is below the smallest
    normal number; the Fisher was all zeros without a word, and EWC held nothing. Now a
    PrecisionWarning says so. At scale 2^-k the Fisher is 4^-k times the unscaled one, bit for
    bit (powers of two are exact) while it stays normal."""
    net = _models(dtype)[0]
    _, _, KX, KG = _data(dtype, m=7)
    F = fixes.fisher_diagonal(net, KX, KG)
    quarter = fixes.fisher_diagonal(net, KX, (KG / 2).astype(dtype))
    assert all(np.array_equal(quarter[k] * 4, F[k]) for k in F)
    with pytest.warns(mr.fixes.PrecisionWarning, match="underflow"):
        tiny = fixes.fisher_diagonal(net, KX, (KG * scale).astype(dtype))
    assert all(np.all(v >= 0) for v in tiny.values())


# -- GPM -----------------------------------------------------------------------------------
def _forward_drift_bound(mlp, keep_X, D_mlp, lr):
    """How far round-off alone can move the outputs of ``mlp`` on keep_X in a step of lr along
    a direction that moves no layer input on keep_X in exact arithmetic. Per layer l, with
    A~ = [a_{l-1}, 1] (n, d) and W~ = [W_l; b_l]:
      - the forward pass before and after the step each round z_l by at most d eps |A~||W~|;
      - the step rounds W~ - lr D~ by eps |W~ - lr D~|;
      - the rows' components outside the basis are at most d eps ||A~||_F (the basis keeps every
        singular value above d eps s_max, s_max <= ||A~||_F), and the projection itself rounds
        D~ by d eps |D~|: together at most 2 d eps ||A~||_F |D~|_col * lr.
    Each layer's error reaches the output through the layers above, tanh 1-Lipschitz:
    multiplied by the infinity norm of every later W, before or after the step (|W| + lr |D|):
    at a large lr the stepped weights are large, and so is the round-off they carry."""
    eps = float(np.finfo(mlp.dtype).eps)
    record = mlp.forward(keep_X)
    total = 0.0
    for l in range(1, mlp.depth + 1):
        A1 = np.hstack([record.a[l - 1], np.ones((len(keep_X), 1))]).astype(float)
        Wb = np.vstack([mlp.params[f"W{l}"], mlp.params[f"b{l}"][None]]).astype(float)
        Db = np.vstack([D_mlp[f"W{l}"], D_mlp[f"b{l}"][None]]).astype(float)
        d = A1.shape[1]
        local = ((2 * d + 1) * eps * np.max(np.abs(A1) @ (np.abs(Wb) + lr * np.abs(Db)))
                 + 2 * d * eps * lr * np.linalg.norm(A1) * np.max(np.linalg.norm(Db, axis=0)))
        for k in range(l + 1, mlp.depth + 1):
            W_k = np.abs(mlp.params[f"W{k}"]).astype(float) + lr * np.abs(D_mlp[f"W{k}"]).astype(float)
            local *= np.max(np.sum(W_k, axis=0)) + 1.0
        total += local
    return 4 * total


@pytest.mark.parametrize("dtype", DTYPES)
def test_gpm_at_threshold_one_holds_the_memory_to_round_off_amplified_by_the_stepped_weights(dtype):
    for net in _models(dtype):
        X, G, KX, _ = _data(dtype, m=5)
        bases = fixes.gpm_bases(net, KX, threshold=1.0)
        D = fixes.gpm(net, X, G, bases)
        before = net(KX).astype(float)
        naive_moves = []
        for lr in (1.0, 100.0, 1e4):
            after = net.copy()
            after.step(D, lr)
            drift = np.abs(after(KX).astype(float) - before)
            bound = sum(_forward_drift_bound(p.mlp, KX, p.to_mlp(D), lr) for p in net.pieces())
            assert np.max(drift) <= bound, (type(net).__name__, lr, np.max(drift), bound)
            moved = net.copy()
            moved.step(net.gradient(X, G), lr)
            naive_moves.append(np.max(np.abs(moved(KX).astype(float) - before)))
        assert naive_moves[0] > 1e3 * _forward_drift_bound(net.pieces()[0].mlp, KX, net.pieces()[0].to_mlp(D), 1.0)


def test_gpm_drifts_at_large_steps_so_no_any_lr_promise_is_made():
    """What the bound above allows happens: on a [6, 9, 8, 4] tanh net at threshold 1.0, lr 1e4
    moves the memory's outputs by far more than eps in float64, and lr 100 by more than 1e-3 in
    float32 (round-off of a few ulps, multiplied by lr^3 through three stepped layers)."""
    for dtype, lr, least in ((np.float64, 1e4, 1e-6), (np.float32, 100.0, 1e-3)):
        net = _models(dtype)[0]
        X, G, KX, _ = _data(dtype, m=5)
        D = fixes.gpm(net, X, G, fixes.gpm_bases(net, KX, threshold=1.0))
        stepped = net.copy()
        stepped.step(D, lr)
        assert np.max(np.abs(stepped(KX).astype(float) - net(KX).astype(float))) > least, dtype


@pytest.mark.parametrize("dtype", DTYPES)
def test_gpm_is_the_projection_of_every_layers_update_off_its_basis(dtype):
    """D~_l = (I - U U^+) g~_l, U U^+ computed by least squares (not gpm's U U^T), on every
    layer and every column: GPM holds every output."""
    for net in _models(dtype):
        X, G, KX, _ = _data(dtype, m=3)
        bases = fixes.gpm_bases(net, KX, threshold=0.9)
        D, g = fixes.gpm(net, X, G, bases), net.gradient(X, G)
        eps = float(np.finfo(dtype).eps)
        for piece, Us in zip(net.pieces(), bases.bases):
            Dm, gm = piece.to_mlp(D), piece.to_mlp(g)
            for l, U in enumerate(Us, 1):
                U = U.astype(float)
                gb = np.vstack([gm[f"W{l}"], gm[f"b{l}"][None]]).astype(float)
                Db = np.vstack([Dm[f"W{l}"], Dm[f"b{l}"][None]]).astype(float)
                want = gb - U @ np.linalg.lstsq(U, gb, rcond=None)[0]
                assert np.all(np.abs(Db - want) <= 8 * U.shape[0] * eps * np.max(np.abs(gb), axis=0)), l


def test_bases_are_orthonormal_and_keep_the_energy_threshold_asks_for_and_no_more():
    """GPM's criterion on one task: the first k directions capture at least threshold of the
    rows' energy sum |x_i|^2, and k - 1 would not (the kept basis is the rows' top singular
    vectors), computed from the rows themselves."""
    net = mr.MLP([6, 9, 8, 4], hidden="tanh", init_std=0.5, seed=0)
    KX = np.random.default_rng(2).normal(size=(40, 6)) * np.array([5, 3, 2, 1, 0.5, 0.1])
    record = net.forward(KX)
    for threshold in (0.5, 0.9, 0.99):
        bases = fixes.gpm_bases(net, KX, threshold=threshold)
        for l, U in enumerate(bases.bases[0], 1):
            A1 = np.hstack([record.a[l - 1], np.ones((len(KX), 1))])
            assert np.allclose(U.T @ U, np.eye(U.shape[1]), atol=64 * np.finfo(float).eps)
            energy = np.sum(A1 ** 2)
            assert np.sum((A1 @ U) ** 2) >= threshold * energy * (1 - 1e-12)
            assert np.sum((A1 @ U[:, :-1]) ** 2) < threshold * energy


def test_an_eigenvalue_cut_keeps_the_directions_above_it():
    """cut c: as many directions as eigenvalues of sum_i x_i x_i^T above c times the largest."""
    net = mr.MLP([6, 9, 8, 4], hidden="tanh", init_std=0.5, seed=0)
    KX = np.random.default_rng(2).normal(size=(40, 6)) * np.array([5, 3, 2, 1, 0.5, 0.1])
    record = net.forward(KX)
    for cut in (1e-1, 1e-3):
        bases = fixes.gpm_bases(net, KX, cut=cut)
        for l, U in enumerate(bases.bases[0], 1):
            A1 = np.hstack([record.a[l - 1], np.ones((len(KX), 1))])
            lam = np.linalg.eigvalsh(A1.T @ A1)
            assert U.shape[1] == int(np.sum(lam > cut * lam[-1])), (cut, l)


@pytest.mark.parametrize("dtype", DTYPES)
def test_bases_from_batches_equal_bases_from_all_rows(dtype):
    """The same span (projectors equal to within the perturbation theory's eps s_max / s_min:
    Davis-Kahan), whatever the batches, from an iterable read once."""
    net = mr.MLP([8, 12, 10, 3], hidden="tanh", init_std=0.5, seed=5, dtype=dtype)
    rows = (np.random.default_rng(6).normal(size=(7, 8))).astype(dtype)   # fewer rows than widths
    whole = fixes.gpm_bases(net, rows, threshold=1.0)
    batched = fixes.gpm_bases(net, (rows[i:i + 3] for i in range(0, 7, 3)), threshold=1.0)
    record = net.forward(rows)
    eps = float(np.finfo(dtype).eps)
    assert whole.ranks == batched.ranks
    for l, (U, V) in enumerate(zip(whole.bases[0], batched.bases[0]), 1):
        A1 = np.hstack([record.a[l - 1], np.ones((7, 1))]).astype(float)
        s = np.linalg.svd(A1, compute_uv=False)
        s = s[s > A1.shape[1] * eps * s[0]]
        U, V = U.astype(float), V.astype(float)
        gap = 64 * A1.shape[1] * eps * s[0] / s[-1]
        assert np.max(np.abs(U @ U.T - V @ V.T)) <= gap, l


def test_gpm_bases_own_bases_are_read_only_so_gpm_may_trust_them_unchanged():
    """gpm skips recomputing U^T U only for gpm_bases's own, read-only bases: doubling one in place
    is refused by NumPy, and a writable copy doubled is refused by gpm even if it claims to be
    gpm_bases's."""
    net = mr.MLP([6, 9, 8, 4], hidden="tanh", init_std=0.5, seed=0)
    X, G, KX, _ = _data(np.float64)
    bases = fixes.gpm_bases(net, KX)
    assert bases.made_by_gpm_bases and not any(U.flags.writeable for U in bases.bases[0])
    with pytest.raises(ValueError, match="read-only"):
        bases.bases[0][0] *= 2
    doubled = fixes.Bases([[2 * U for U in bases.bases[0]]], made_by_gpm_bases=True)
    with pytest.raises(ValueError, match="bases: expected orthonormal bases"):
        fixes.gpm(net, X, G, doubled)


def test_merged_bases_hold_both_tasks_and_stay_orthonormal():
    """previous = the first task's bases: the second's rows are added, and the rows of both lie
    in the merged span to round-off (threshold 1.0)."""
    net = mr.MLP([8, 12, 10, 3], hidden="tanh", init_std=0.5, seed=5)
    rng = np.random.default_rng(8)
    A, B = rng.normal(size=(3, 8)), rng.normal(size=(4, 8))
    first = fixes.gpm_bases(net, A, threshold=1.0)
    both = fixes.gpm_bases(net, B, threshold=1.0, previous=first)
    eps = float(np.finfo(float).eps)
    for l, (U1, U) in enumerate(zip(first.bases[0], both.bases[0]), 1):
        assert np.array_equal(U[:, :U1.shape[1]], U1)                   # the old basis, kept
        assert np.allclose(U.T @ U, np.eye(U.shape[1]), atol=64 * eps)
        for rows in (A, B):
            A1 = np.hstack([net.forward(rows).a[l - 1], np.ones((len(rows), 1))])
            off = A1 - (A1 @ U) @ U.T
            assert np.max(np.abs(off)) <= 64 * A1.shape[1] * eps * np.max(np.abs(A1)), l
    assert [sum(r) for r in both.ranks] > [sum(r) for r in first.ranks]


def test_every_rule_is_a_pure_function_of_the_network():
    for net in _models(np.float64):
        X, G, KX, KG = _data(np.float64)
        before = {k: v.copy() for k, v in net.params.items()}
        fixes.agem(net, X, G, KX, KG)
        fixes.ewc(net, X, G, fixes.fisher_diagonal(net, KX, KG), before, 1.0)
        fixes.gpm(net, X, G, fixes.gpm_bases(net, KX))
        assert all(np.array_equal(before[k], net.params[k]) for k in before)


def test_tutorial_09s_small_example():
    """Tutorial 09, section 1: A-GEM's D.r at round-off where g.r < 0; GPM at 1.0 moves the
    memory's outputs within the round-off bound at lr 1, 100 and 1e4 (round-off at 1, far above
    it at 1e4), the batch's by more than 1."""
    net = mr.MLP([6, 9, 8, 4], hidden="tanh", init_std=0.5, seed=0)
    rng = np.random.default_rng(1)
    X, G, keep_X = rng.normal(size=(10, 6)), rng.normal(size=(10, 4)), rng.normal(size=(5, 6))
    keep_G = rng.normal(size=(5, 4))
    g = net.gradient(X, G)
    if baselines.dot(g, net.gradient(keep_X, keep_G)) > 0:
        keep_G = -keep_G
    r = net.gradient(keep_X, keep_G)
    D = fixes.agem(net, X, G, keep_X, keep_G)
    eps, P = float(np.finfo(float).eps), net.n_params
    assert baselines.dot(g, r) < 0
    assert abs(baselines.dot(D, r)) <= 4 * (P + 2) * eps * (_abs_dot(D, r) + _abs_dot(g, r))
    bases = fixes.gpm_bases(net, keep_X, threshold=1.0)
    Dg = fixes.gpm(net, X, G, bases)
    held = {}
    for lr in (1.0, 100.0, 1e4):
        stepped = net.copy()
        stepped.step(Dg, lr)
        held[lr] = np.max(np.abs(stepped(keep_X) - net(keep_X)))
        assert held[lr] <= _forward_drift_bound(net, keep_X, Dg, lr)
        assert np.max(np.abs(stepped(X) - net(X))) > 1.0
    # round-off at lr 1 (a few hundred eps), far above it at lr 1e4
    assert held[1.0] <= 1e3 * eps and held[1e4] > 1e6 * eps
