"""The PyTorch, TensorFlow and JAX fixes of mlp_ref/resources/frameworks (package data), checked
against the NumPy reference.

From the same weights on the seed and the visible setups: every direction equals mlp_ref.fixes'
(float64, 1e-12 relative); freezing holds out1 bit for bit; the projection drifts O(lr^2) on the
batch; restore converges; in float32, the bounds tutorial 07 states. Each test runs once per
framework (skipped when it is not installed, a failure in CI).
"""
import subprocess
import sys

import numpy as np
import pytest
from _extras import require
from _frameworks import FRAMEWORKS_DIR, load, rel_error

from mlp_ref import fixes, losses, optim, setups
from mlp_ref.measurements import fits, rules, table
from mlp_ref.data import probe_inputs
from mlp_ref.jacobian import dense_rows, flatten
from mlp_ref.setups import G_QUESTION, SETUPS, seed_setup

LR = setups.LR                   # the question's step sizes: 0.1 (seed), 0.01 (visible)
MASK = np.array([0.0, 1.0])           # the answer's mask: hide out1 from the loss


#: every test here runs PyTorch, TensorFlow or JAX: the slow run's (.ci/run)
pytestmark = pytest.mark.slow


@pytest.fixture(scope="module", params=["torch", "tensorflow", "jax"])
def fx(request):
    return load(request.param)


@pytest.fixture(scope="module")
def torch_fx():
    return load("torch")


@pytest.fixture(scope="module", params=list(SETUPS))
def setup(request):
    net, X, Y = SETUPS[request.param]()
    return request.param, net, X, Y


def ratio_J1(fx, model, X, D, G):
    """|J1 D| / |J1 g|, with J1 the float64 Jacobian of the model's own weights and D rounded
    to the model's dtype (what a step applies)."""
    J1 = np.asarray(fx.jacobian(model, X))
    g = np.asarray(fx.flat(fx.naive(model, X, G)), dtype=np.float64)
    dtype = np.asarray(fx.outputs(model, X)).dtype
    d = np.asarray(fx.flat(D)).astype(dtype).astype(np.float64)
    return np.linalg.norm(J1 @ d) / np.linalg.norm(J1 @ g)


# -- the model ---------------------------------------------------------------------------------
def test_the_model_computes_the_reference_outputs(fx, setup):
    _, net, X, _ = setup
    assert rel_error(fx.outputs(fx.model_from(net), X), net(X)) <= 1e-14


# -- every direction, float64, equal to the reference --------------------------------------------
@pytest.mark.parametrize("rule", ["naive", "freeze", "project"])
def test_the_direction_equals_the_references(fx, setup, rule):
    _, net, X, _ = setup
    model = fx.model_from(net)
    D = getattr(fx, rule)(model, X, G_QUESTION)
    assert rel_error(fx.as_mlp_ref(model, D), getattr(fixes, rule)(net, X, G_QUESTION)) <= 1e-12


def test_the_penalty_direction_equals_the_references_away_from_ref(fx, setup):
    name, net, X, _ = setup
    ref = net(X)[:, 0]
    net = net.copy().step(fixes.naive(net, X, G_QUESTION), LR[name])    # now out1 != ref
    model = fx.model_from(net)
    lam = 100.0                                     # large, so that its term shows after one step
    D = fx.penalty(model, X, G_QUESTION, ref, lam=lam)
    expected = fixes.penalty(net, X, G_QUESTION, keep=[0], ref=ref, lam=lam)
    assert rel_error(fx.as_mlp_ref(model, D), expected) <= 1e-12
    assert rel_error(expected, fixes.naive(net, X, G_QUESTION)) > 1e-3     # the term is not 0


def test_the_penalty_first_step_is_the_naive_step_exactly(fx, setup):
    """At the start out1 = ref: the penalty's output gradient lam * (out1 - ref) is exactly 0."""
    _, net, X, _ = setup
    model = fx.model_from(net)
    D = fx.penalty(model, X, G_QUESTION, fx.outputs(model, X)[:, 0], lam=10.0)
    naive = fx.as_mlp_ref(model, fx.naive(model, X, G_QUESTION))
    assert all(np.array_equal(v, naive[k]) for k, v in fx.as_mlp_ref(model, D).items())


def test_the_mask_follows_the_answers_formula(fx, setup):
    _, net, X, Y = setup
    model = fx.model_from(net)
    value, D = fx.masked(model, X, Y, MASK)
    out = net(X)
    answer, G_answer = losses.masked_mse(out, Y, MASK)          # mean((mask * out - y)^2)
    assert abs(value - answer) <= 1e-12 * answer
    masking_the_target = np.mean((MASK * (out - Y)) ** 2)
    assert masking_the_target < 0.5 * answer                    # not the same value ...
    _, G_mse = losses.mse(out, Y)
    for expected in (net.gradient(X, G_answer), fixes.masked(net, X, G_mse, MASK)):
        assert rel_error(fx.as_mlp_ref(model, D), expected) <= 1e-12    # ... the same gradient


# -- freezing: exactly zero --------------------------------------------------------------------
@pytest.mark.parametrize("dtype", ["float64", "float32"])
def test_freezing_holds_out1_bit_for_bit_on_batch_and_unseen_inputs(fx, setup, dtype):
    name, net, X, _ = setup
    model = fx.model_from(net, dtype)
    probes = probe_inputs()
    before = {"batch": fx.outputs(model, X), "unseen": fx.outputs(model, probes)}
    fx.step(model, fx.freeze(model, X, G_QUESTION), LR[name])
    after = {"batch": fx.outputs(model, X), "unseen": fx.outputs(model, probes)}
    for where in before:
        assert np.max(np.abs(after[where][:, 0] - before[where][:, 0])) == 0.0
        assert np.all(after[where][:, 1] > before[where][:, 1])


# -- projection and restore, float64 -------------------------------------------------------------
def test_the_projection_drifts_with_slope_2_on_the_batch(fx, setup):
    _, net, X, _ = setup
    model = fx.model_from(net)
    D = fx.project(model, X, G_QUESTION)
    out1 = fx.outputs(model, X)[:, 0]
    lrs = table.GUARANTEE_LRS
    drift = []
    for lr in lrs:
        stepped = fx.model_from(net)
        fx.step(stepped, D, lr)
        drift.append(np.max(np.abs(fx.outputs(stepped, X)[:, 0] - out1)))
    slope = fits.loglog_slope(lrs, drift, max_lr=1e-3)
    assert abs(slope - 2.0) <= 0.05, slope


def test_restore_converges_to_1e_12_in_float64(fx, setup):
    name, net, X, _ = setup
    model = fx.model_from(net)
    ref = fx.outputs(model, X)[:, 0]                  # before the step
    fx.step(model, fx.project(model, X, G_QUESTION), LR[name])
    history = fx.restore(model, X, ref)
    assert history[0] > 1e-6                          # there was something to restore
    assert history[-1] <= 1e-12 * np.max(np.abs(ref)) and history[-1] <= 1e-12
    assert len(history) - 1 <= 10


# -- float32: the bounds the tutorial states ------------------------------------------------------
def test_float32_projection_leaves_at_most_1e_5_of_J1_g(fx, setup):
    _, net, X, _ = setup
    model = fx.model_from(net, "float32")
    assert ratio_J1(fx, model, X, fx.project(model, X, G_QUESTION), G_QUESTION) <= 1e-5


def restore_bound_float32(net, X, ref):
    """What restore can reach in float32: 1e-6 of the outputs, or their round-off floor where that
    is larger. out1 = a1 @ W2[:, 0] + b2[0] is a sum of h + 1 terms: float32 evaluates it, and ref,
    to within gamma_(h+1) * S each (S = max over samples of sum |a1_j W2_j0| + |b2_0|, Higham's
    bound for a dot product), and the parameters move on float32's grid, about eps * S per ulp: so
    |O - ref| cannot be asked below about (2 (h + 1) + 2) eps * S (16 eps * S for h = 4), whatever
    the CPU's rounding; a network whose out1 is small beside its terms (seed 2's: 0.0096 of a
    sum of 0.197) sits there, above 1e-6 * max |ref|."""
    a1 = net.forward(X).a[len(net.sizes) - 2]
    W2, b2 = net.params[f"W{len(net.sizes) - 1}"], net.params[f"b{len(net.sizes) - 1}"]
    S = np.max(np.abs(a1) @ np.abs(W2[:, 0]) + abs(b2[0]))
    floor = (2 * (a1.shape[1] + 1) + 2) * np.finfo(np.float32).eps * S
    return max(1e-6 * np.max(np.abs(ref)), floor)


def test_float32_restore_reaches_1e_6_within_10_iterations(fx, setup):
    name, net, X, _ = setup
    model = fx.model_from(net, "float32")
    ref = fx.outputs(model, X)[:, 0]
    fx.step(model, fx.project(model, X, G_QUESTION), LR[name])
    history = fx.restore(model, X, ref, max_iter=10)
    assert history[-1] <= restore_bound_float32(net, X, ref)


@pytest.mark.parametrize("seed", range(5))
def test_float32_on_five_seeds_and_what_pinv_in_float32_would_do(torch_fx, seed):
    fx = torch_fx
    net, X, _ = seed_setup(seed=seed)
    model = fx.model_from(net, "float32")
    assert ratio_J1(fx, model, X, fx.project(model, X, G_QUESTION), G_QUESTION) <= 1e-5
    assert ratio_J1(fx, model, X, fx.project_with_pinv(model, X, G_QUESTION), G_QUESTION) > 1e-4
    ref = fx.outputs(model, X)[:, 0]
    fx.step(model, fx.project(model, X, G_QUESTION), LR["seed"])
    assert fx.restore(model, X, ref, max_iter=10)[-1] <= restore_bound_float32(net, X, ref)


@pytest.mark.parametrize("seed", range(5))
def test_jax_float32_on_five_seeds(jax_fx, seed):
    """What the PyTorch test above checks of project and restore, through JAX's Gram route (it
    has no pinv variant: its Gram is float64 and refined)."""
    fx = jax_fx
    net, X, _ = seed_setup(seed=seed)
    model = fx.model_from(net, "float32")
    assert ratio_J1(fx, model, X, fx.project(model, X, G_QUESTION), G_QUESTION) <= 1e-5
    ref = fx.outputs(model, X)[:, 0]
    fx.step(model, fx.project(model, X, G_QUESTION), LR["seed"])
    assert fx.restore(model, X, ref, max_iter=10)[-1] <= restore_bound_float32(net, X, ref)


# -- the penalty's stability ---------------------------------------------------------------------
def test_largest_stable_lam_is_2_over_lr_lambda_max(fx, setup):
    name, net, X, _ = setup
    J1 = dense_rows(net, X)
    expected = 2.0 / (LR[name] * np.linalg.eigvalsh(J1 @ J1.T)[-1])
    assert abs(fixes.penalty_limit(net, X) / LR[name] - expected) <= 1e-12 * expected
    assert abs(fx.largest_stable_lam(fx.model_from(net), X, LR[name]) - expected) <= 1e-12 * expected


def test_on_the_visible_setup_lam_10_diverges_within_10_steps(fx):
    net, X, _ = SETUPS["visible"]()
    lr = LR["visible"]
    assert fx.largest_stable_lam(fx.model_from(net), X, lr) < 10.0
    ref = net(X)[:, 0]
    model = fx.model_from(net)
    for _ in range(10):
        fx.step(model, fx.penalty(model, X, G_QUESTION, ref, lam=10.0), lr)
    assert not np.max(np.abs(fx.outputs(model, X)[:, 0] - ref)) < 1e3     # diverged (or nan)


def test_on_the_visible_setup_the_tutorials_lam_holds_out1_better_than_naive(torch_fx):
    """50 steps, in PyTorch only: its direction equals TensorFlow's (both equal mlp-ref's)."""
    fx = torch_fx
    net, X, _ = SETUPS["visible"]()
    lr, lam = LR["visible"], rules.PENALTY_LAM
    assert lam < fx.largest_stable_lam(fx.model_from(net), X, lr)
    ref = net(X)[:, 0]
    model, naive = fx.model_from(net), net.copy()
    for _ in range(50):
        fx.step(model, fx.penalty(model, X, G_QUESTION, ref, lam=lam), lr)
        naive.step(fixes.naive(naive, X, G_QUESTION), lr)
    drift = np.max(np.abs(fx.outputs(model, X)[:, 0] - ref))
    assert drift < 0.5 * np.max(np.abs(naive(X)[:, 0] - ref))


# -- Adam: the update projected with a fresh J1 -----------------------------------------------
def test_projected_adam_equals_the_references_for_three_steps(fx, setup):
    """Keras adds eps to sqrt(v), PyTorch and mlp-ref to sqrt(v_hat): with eps = 1e-30 where it
    goes does not matter. On the seed network J1's row space itself is known only to
    eps * cond(J1) ~ 1e-10 (cond(J1) ~ 5e5): two correct float64 projections differ by a small
    multiple of that, allowed here as n * eps * cond(J1), one for each of the n = 8 rows."""
    _, net, X, _ = setup
    model = fx.model_from(net)
    opt = fx.adam(model, lr=1e-3, eps=1e-30)
    ref_net = net.copy()
    ref_opt = optim.Adam(1e-3, eps=1e-30,
                         constraint=lambda U: fixes.nullspace(ref_net, U, X, keep=[0]))
    tol = max(1e-12, len(X) * np.finfo(float).eps * np.linalg.cond(dense_rows(net, X)))
    for _ in range(3):
        U = fx.adam_projected(model, opt, X, G_QUESTION)
        expected = ref_opt.apply(ref_net, fixes.naive(ref_net, X, G_QUESTION))
        assert rel_error(fx.as_mlp_ref(model, U), expected) <= tol
        assert rel_error(fx.outputs(model, X), ref_net(X)) <= 1e-12


# -- the storage trap ----------------------------------------------------------------------------
def test_detach_shares_storage_with_the_parameters_and_snapshot_does_not(torch_fx):
    fx = torch_fx
    net, X, _ = seed_setup()
    model = fx.model_from(net)
    detached = {k: p.detach() for k, p in model.named_parameters()}
    copied = fx.snapshot(model)
    fx.step(model, fx.naive(model, X, G_QUESTION), 0.1)
    for k, p in model.named_parameters():
        assert np.array_equal(detached[k].numpy(), p.detach().numpy())     # followed the step
        assert not np.array_equal(copied[k].numpy(), p.detach().numpy())   # kept the old values


# -- TensorFlow's Python floats ------------------------------------------------------------------
def test_tensorflow_makes_python_floats_float32_and_as_dtype_does_not():
    fx, tf = load("tensorflow"), require("tensorflow", "frameworks")
    assert float(tf.cast(0.999, tf.float64)) != 0.999                   # 0.9990000128...
    assert float(fx.as_dtype(0.999, tf.float64)) == 0.999
    assert tf.keras.optimizers.Adam(learning_rate=1e-3).learning_rate.dtype == "float32"


# -- JAX: float64 switched on at import; optax.masked is not a freeze ----------------------------
@pytest.fixture(scope="module")
def jax_fx():
    return load("jax")


def test_jax_keeps_each_models_dtype(jax_fx):
    """Importing jax_fixes turns on jax_enable_x64: a float64 model is float64 (without it JAX
    would make it float32), and a float32 model stays float32."""
    fx = jax_fx
    net, X, _ = seed_setup()
    for dtype in ("float64", "float32"):
        model = fx.model_from(net, dtype)
        assert {str(p.dtype) for p in model.params.values()} == {dtype}
        assert fx.outputs(model, X).dtype == dtype
        fx.step(model, fx.project(model, X, G_QUESTION), LR["seed"])      # D is float64
        assert {str(p.dtype) for p in model.params.values()} == {dtype}


def one_optax_step(fx, make, net, X, lr):
    """One step of the optax transformation ``make(model, lr)`` on naive's gradient, from net's
    weights: (its update, the gradient, out1 before and after on the batch and on unseen inputs)."""
    model, probes = fx.model_from(net), probe_inputs()
    before = {"batch": fx.outputs(model, X), "unseen": fx.outputs(model, probes)}
    g = fx.naive(model, X, G_QUESTION)
    updates = fx.optax_step(model, fx.optimizer(model, make(model, lr)), X, G_QUESTION)
    after = {"batch": fx.outputs(model, X), "unseen": fx.outputs(model, probes)}
    return updates, g, before, after


def test_optax_masked_passes_the_frozen_gradients_through_and_out1_moves(jax_fx, setup):
    """optax.masked(optax.sgd(lr), trainable): the leaves marked False get their raw gradient
    as update, unchanged (optax's documented "the rest are passed through"), which
    apply_updates adds: the frozen layer steps by 1 up the gradient and out1 moves, further
    than under a naive step at lr."""
    fx = jax_fx
    name, net, X, _ = setup
    updates, g, before, after = one_optax_step(fx, fx.sgd_masked, net, X, LR[name])
    frozen = set(net.params) - set(fx.output_layer(fx.model_from(net)))
    assert frozen and "W1" in frozen
    for k in frozen:
        assert np.array_equal(np.asarray(updates[k]), np.asarray(g[k]))          # bit for bit
    naive_drift = np.max(np.abs(net.copy().step(fixes.naive(net, X, G_QUESTION), LR[name])(X)[:, 0]
                                - net(X)[:, 0]))
    assert np.max(np.abs(after["batch"][:, 0] - before["batch"][:, 0])) > naive_drift


@pytest.mark.parametrize("how", ["partition", "transforms.freeze"])
def test_optax_var_list_holds_out1_bit_for_bit(jax_fx, setup, how):
    """optax.partition (sgd on W2, b2, set_to_zero on the rest), or optax.transforms.freeze
    chained before sgd: the update is -lr times freeze's direction, and out1 moves by exactly 0.0
    on the batch and on unseen inputs, while out2 rises."""
    fx = jax_fx
    optax = require("optax", "frameworks")
    name, net, X, _ = setup

    def chained(model, lr):
        frozen = {k: k not in fx.output_layer(model) for k in model.params}
        return optax.chain(optax.transforms.freeze(frozen), optax.sgd(lr))
    make = fx.sgd_var_list if how == "partition" else chained
    updates, _, before, after = one_optax_step(fx, make, net, X, LR[name])
    D = fx.freeze(fx.model_from(net), X, G_QUESTION)
    for k in net.params:
        assert np.array_equal(np.asarray(updates[k]), -LR[name] * np.asarray(D[k]))
    for where in before:
        assert np.max(np.abs(after[where][:, 0] - before[where][:, 0])) == 0.0
        assert np.all(after[where][:, 1] > before[where][:, 1])


def test_the_projection_holds_J1_D_to_the_accuracy_the_reference_states(fx, setup):
    """mlp_ref.fixes.nullspace states |J D| <= (32 + m) eps ||J| (|D| + |g|)|| (m constraints),
    about what rounding J . g and D to float64 leaves; each framework's D, in float64, meets it
    with the dense J of mlp_ref (a J1 D left above it would move out1 by lr * J1 D, to first
    order, beyond the round-off that test_frameworks_tutorial.py allows the drifts)."""
    _, net, X, _ = setup
    model = fx.model_from(net)
    D = flatten(fx.as_mlp_ref(model, fx.project(model, X, G_QUESTION)))
    g = flatten(fixes.naive(net, X, G_QUESTION))
    J = dense_rows(net, X)
    bound = (32 + len(X)) * np.finfo(np.float64).eps * (np.abs(J) @ (np.abs(D) + np.abs(g)))
    assert np.all(np.abs(J @ D) <= bound)


def test_jax_needs_three_passes_through_its_gram_on_the_seed_network(jax_fx):
    """remove_rows' docstring: each pass leaves of |J1 v| at most eps * cond(J1 J1^T) of what
    it found, "5e-5 on the seed network", and two passes leave more than the round-off of
    mlp_ref's projection (the bound of the test above), three do not."""
    fx = jax_fx
    net, X, _ = seed_setup()
    model = fx.model_from(net)
    J = dense_rows(net, X)
    factor = np.finfo(np.float64).eps * np.linalg.cond(J @ J.T)
    assert 3e-5 < factor < 8e-5                                              # "5e-5"
    J1, J1T, gram = fx.linearized(model, X)
    g = fixes.naive(net, X, G_QUESTION)
    residual, left = [np.max(np.abs(J @ flatten(g)))], []
    for passes in (1, 2, 3):
        D = flatten(fx.as_mlp_ref(model, fx.remove_rows(J1, J1T, fx.gram_pinv(gram),
                                                         fx.naive(model, X, G_QUESTION), passes)))
        residual.append(np.max(np.abs(J @ D)))
        bound = (32 + len(X)) * np.finfo(np.float64).eps * (np.abs(J) @ (np.abs(D) + np.abs(flatten(g))))
        left.append(bool(np.any(np.abs(J @ D) > bound)))
    assert residual[1] <= factor * residual[0] and residual[2] <= factor * residual[1]
    assert left == [True, True, False]


def test_without_x64_jax_makes_float64_float32_and_importing_jax_fixes_switches_it_on(jax_fx):
    """Why jax_fixes turns on jax_enable_x64 at import: in a fresh process JAX makes a float64
    array float32 (with a warning); after ``import jax_fixes`` it is float64. (In a process of
    its own: the switch is JAX's, for the whole process.)"""
    code = ("import sys, warnings; warnings.simplefilter('ignore'); import jax.numpy as jnp; "
            "print(jnp.asarray(0.1, dtype='float64').dtype); "
            f"sys.path.insert(0, {str(FRAMEWORKS_DIR)!r}); import jax_fixes; "
            "print(jnp.asarray(0.1, dtype='float64').dtype)")
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert res.returncode == 0, res.stderr[-2000:]
    assert res.stdout.split() == ["float32", "float64"]
