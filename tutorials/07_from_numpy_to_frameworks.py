# %% [markdown]
# # Tutorial 07: from NumPy to frameworks: every fix in PyTorch, TensorFlow 2 and JAX, run and checked
#
# **The question** ([Stack Overflow 42182233](https://stackoverflow.com/questions/42182233)):
# an MLP has two outputs, and the gradient of the loss with respect to the outputs is
# $G = [0, -1]$: "raise out2, leave out1 alone". A gradient step raises out2, but out1 moves
# too. How do we take a step that leaves out1 unchanged?
#
# The accepted answer is written in TensorFlow 1, and a student who outgrows a 26-parameter
# NumPy network takes the fixes to PyTorch, TensorFlow 2 or JAX. They ship inside the package
# (`mlp_ref/resources/frameworks/`, found by `frameworks_folder()` from any folder) as functions
# to import and call, `torch_fixes.py`, `tf_fixes.py` and `jax_fixes.py` (with optax), each in
# its framework's own idiom, with the same names (`model_from`, `naive`, `freeze`, `masked`,
# `project`, `restore`, `penalty`, `adam_projected`, ...). This tutorial shows their source, read
# from those files (what you read is what runs), and runs them for each framework that is
# installed, from the weights of mlp-ref's two setups, beside the NumPy reference.
#
# mlp-ref itself never imports a framework, and this tutorial runs without one: it then shows
# the code and says what it did not run. To run everything: `pip install -e '.[frameworks]'`.

# %%
import importlib
import os
import sys

import numpy as np

from mlp_ref import fixes, losses, optim, setups
from mlp_ref.classroom.tutorial import figure, listing, run_headless
from mlp_ref.data import probe_inputs
from mlp_ref.jacobian import dense_rows, flatten
from mlp_ref.measurements import rules, table
from mlp_ref.measurements.drift import one_step_beside
from mlp_ref.resources import frameworks_folder
from mlp_ref.setups import G_QUESTION, SETUPS

run_headless(globals())    # as a script: prints the text cells and runs the code; in Jupyter: nothing

FOLDER = frameworks_folder()                # inside the installed package: found from any folder
#: name shown -> (file in FOLDER, the modules it needs: the framework's own first)
FRAMEWORKS = {"PyTorch": ("torch_fixes", ("torch",)), "TensorFlow 2": ("tf_fixes", ("tensorflow",)),
              "JAX": ("jax_fixes", ("jax", "optax"))}
LR = setups.LR                          # 0.1 on the seed network, 0.01 on the visible one
MASK = np.array([0.0, 1.0])                  # the answer's mask
SETUP = {name: make() for name, make in SETUPS.items()}      # name -> (net, X, Y)

#: (framework, quantity, setup) -> the number printed; tests/test_frameworks_tutorial.py checks
#: each against the claim the narration makes about it.
MEASURED = {}


def load(framework):
    """The framework's fixes module, or None (said plainly) when the framework is not installed."""
    module, needs = FRAMEWORKS[framework]
    if str(FOLDER) not in sys.path:
        sys.path.insert(0, str(FOLDER))
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")      # TensorFlow: no start-up chatter
    os.environ.setdefault("OMP_NUM_THREADS", "1")       # PyTorch: with matrices this small, a
                                                        # second thread only waits for the first
    try:
        return importlib.import_module(module)
    except ModuleNotFoundError as exc:
        if exc.name is None or exc.name.split(".")[0] not in needs:
            raise                                           # a real error, not a missing framework
        print(f"{framework}: NOT RUN here, {exc.name.split('.')[0]} is not installed;\n"
              f"  its code is shown all the same (pip install -e '.[frameworks]' to run it).")
        return None


def source(framework, *names):
    """The source of functions or classes of the framework's file, as they stand in it."""
    return listing(FOLDER / f"{FRAMEWORKS[framework][0]}.py", *names, label=framework)


def note(framework, quantity, setup, value, fmt=".1e"):
    """Keep a measured number under (framework, quantity, setup) and print it."""
    MEASURED[(framework, quantity, setup)] = value
    print(f"  {framework:12} {setup:8} {quantity:48} {value:{fmt}}")


def rel_error(a, b):
    a, b = flatten(a), flatten(b)
    return float(np.max(np.abs(a - b)) / np.max(np.abs(b)))


def drift(fx, model, X, out1):
    return float(np.max(np.abs(fx.outputs(model, X)[:, 0] - out1)))


def out1_after(fx):
    """out1 on the batch after one step of a rule at each lr, each from net's weights, in fx's
    framework: what ``drift.one_step_beside`` measures beside mlp_ref's own step."""
    def run(rule, net, X, G, lrs):
        D = getattr(fx, rule)(fx.model_from(net), X, G)
        rows = []
        for lr in lrs:
            model = fx.model_from(net)
            fx.step(model, D, lr)
            rows.append(fx.outputs(model, X)[:, 0])
        return rows
    return run


# %% [markdown]
# ## 0. Three files, one set of functions
#
# `torch_fixes.py`, `tf_fixes.py` and `jax_fixes.py` define the same functions with the same
# meaning. A rule takes a model, a batch $X$ and the output gradient $G$ (here the question's
# $G = [0, -1]$) and returns a direction $D$ shaped like the parameters (a dict in PyTorch, a
# list in TensorFlow, like `p.grad` and `tape.gradient`; in JAX a pytree like the params, as
# `jax.grad` returns it); `step(model, D, lr)` applies $\theta \leftarrow \theta - \eta D$
# (in JAX, whose arrays never change, by making new params).
#
# Importing `jax_fixes` turns on JAX's `jax_enable_x64`, without which every float64 array would
# be made float32. In float64, from the same weights, every direction is
# compared below with `mlp_ref.fixes`: the claim is a relative difference
# $\max|D - D_{\mathrm{ref}}| / \max|D_{\mathrm{ref}}|$ of at most 1e-12 (one exception, Adam's
# projected update on the seed network, whose ill-conditioned $J_1$ leaves more: section 8).

# %%
MODULES = {name: load(name) for name in FRAMEWORKS}
RUN = {name: fx for name, fx in MODULES.items() if fx is not None}
print(f"frameworks run here: {', '.join(RUN) or 'none'};  their code is read from {FOLDER.name}/")

# %% [markdown]
# ## 1. The model: the same weights, the same outputs
#
# `model_from(net)` builds the framework's model from an `mlp_ref.MLP`'s weights. mlp-ref and
# the answer's TensorFlow code write $z_l = a_{l-1} W_l + b_l$, rows as samples;
# `torch.nn.Linear` stores `weight` $= W^\top$ (Flax's `Dense` keeps $W$ as it is, as
# `jax_fixes.Model` does: a pure function `apply(params, X)` and its params). The outputs agree
# with `net(X)` to round-off.

# %%
source("PyTorch", "model_from")

# %%
source("TensorFlow 2", "as_dtype", "MLP", "model_from")

# %%
source("JAX", "Model", "model_from")

# %%
for name, fx in RUN.items():
    for setup, (net, X, _) in SETUP.items():
        note(name, "max |model(X) - net(X)| / max |net(X)|", setup,
             rel_error({"o": fx.outputs(fx.model_from(net), X)}, {"o": net(X)}))

# %% [markdown]
# ## 2. The plain gradient, and freezing: var_list = [W2, b2]
#
# `naive` is the vector-Jacobian product $g = \sum_k J_k^\top G_{:,k}$, with $J_k$ the Jacobian
# of output $k$ over the batch and $G_{:,k}$ column $k$ of $G$ (`out.backward(G)`,
# `tape.gradient` with `output_gradients=G`, `jax.vjp`). `freeze` trains only the output layer,
# the `var_list = [W2, b2]` of the answer's scripts: `requires_grad_(False)` in PyTorch, a
# shorter variable list in TensorFlow, `jax.lax.stop_gradient` on the other parameters in JAX
# (and in an optax training loop, section 10).
#
# With $G = [0, -1]$ out1's own output weights get a zero gradient, so out1 does not move at
# all: after a step of `freeze`, $\max|\Delta \mathrm{out}_1|$ is exactly 0.0 on the batch and
# on 256 unseen inputs, in float64 and in float32.

# %%
source("PyTorch", "naive", "output_layer", "freeze")

# %%
source("TensorFlow 2", "naive", "freeze")

# %%
source("JAX", "naive", "output_layer", "freeze")

# %%
probes = probe_inputs()
for name, fx in RUN.items():
    for setup, (net, X, _) in SETUP.items():
        for rule in ("naive", "freeze"):
            model = fx.model_from(net)
            D = getattr(fx, rule)(model, X, G_QUESTION)
            note(name, f"{rule}: relative difference from mlp_ref", setup,
                 rel_error(fx.as_mlp_ref(model, D), getattr(fixes, rule)(net, X, G_QUESTION)))
    net, X, _ = SETUP["visible"]
    for dtype in ("float64", "float32"):
        model = fx.model_from(net, dtype)
        before = {"batch": fx.outputs(model, X)[:, 0], "unseen": fx.outputs(model, probes)[:, 0]}
        fx.step(model, fx.freeze(model, X, G_QUESTION), LR["visible"])
        note(name, f"freeze {dtype}: |change of out1|, batch", "visible",
             drift(fx, model, X, before["batch"]))
        note(name, f"freeze {dtype}: |change of out1|, 256 unseen", "visible",
             drift(fx, model, probes, before["unseen"]))

# %% [markdown]
# ## 3. The answer's mask
#
# `masked(model, X, Y, mask)` differentiates the answer's `loss2`,
# $\mathrm{mean}\big((m \odot O - Y)^2\big)$, as `mlp_ref.losses.masked_mse` does. The answer
# masks the output and not the target, so the masked column (out1's) still adds $y_1^2$ to the
# value; $\mathrm{mean}\big((m \odot (O - Y))^2\big)$ masks both. For a 0/1 mask the two have the
# same gradient ($m^2 = m$), and their values differ by exactly
# $\mathrm{mean}\big((1 - m) \odot Y^2\big)$, a constant. Which one a framework snippet writes
# changes the number printed as the loss, never the step. (And with $G = [0, -1]$ the mask changes
# nothing at all: out1's column of $G$ is already 0; see tutorial 03.)

# %%
source("PyTorch", "masked_loss", "masked")

# %%
source("TensorFlow 2", "masked_loss", "masked")

# %%
source("JAX", "masked_loss", "masked")

# %%
net, X, Y = SETUP["seed"]
print(f"seed setup: the answer's loss2 = {losses.masked_mse(net(X), Y, MASK)[0]:.4f};\n"
      f"  masking the target too: {np.mean((MASK * (net(X) - Y)) ** 2):.4f};  "
      f"mean((1 - mask) y^2) = {np.mean((1 - MASK) * Y ** 2):.4f}")
for name, fx in RUN.items():
    for setup, (net, X, Y) in SETUP.items():
        model = fx.model_from(net)
        value, D = fx.masked(model, X, Y, MASK)
        note(name, "loss2: relative difference from masked_mse", setup,
             abs(value - losses.masked_mse(net(X), Y, MASK)[0]) / value)
        note(name, "gradient: relative difference from mlp_ref", setup,
             rel_error(fx.as_mlp_ref(model, D), fixes.masked(net, X, losses.mse(net(X), Y)[1], MASK)))

# %% [markdown]
# ## 4. Null-space projection: J1 D = 0
#
# `project` removes from $g$ its part along the rows of $J_1$, the $n \times P$ Jacobian of out1
# over the batch ($P$ the number of parameters):
#
# $$D = g - J_1^\top \alpha, \qquad \alpha = \mathrm{argmin}_\alpha \lVert J_1^\top \alpha - g \rVert,$$
#
# so that $J_1 D = 0$ and out1 drifts $O(\eta^2)$ on the batch. Two precision choices are made
# here and said in the code: $J_1$ is computed in float64 whatever the model's dtype, and in
# PyTorch and TensorFlow the solve is a least-squares one on $J_1$ itself (an SVD in PyTorch, a
# complete orthogonal decomposition in TensorFlow), never `pinv(J1 @ J1.T)` in the model's
# dtype, whose condition number is the square of $J_1$'s (2e11 on the seed network).
#
# JAX goes the way `mlp_ref.fixes.nullspace` goes and never builds $J_1$: `jax.linearize` gives
# $v \mapsto J_1 v$, `jax.linear_transpose` gives $\alpha \mapsto J_1^\top \alpha$, and the
# $n \times n$ Gram $J_1 J_1^\top$ is $n$ of their products, pseudo-inverted in float64. The
# projection is then done again on what it left of $J_1 D$ (iterative refinement, as
# `mlp_ref.fixes` does): once more in PyTorch and TensorFlow, twice more through JAX's Gram,
# whose squared condition number lets each pass remove only part of it. Measured: the direction
# equals mlp_ref's to 1e-12.

# %%
source("PyTorch", "jacobian", "remove_rows", "project")

# %%
source("TensorFlow 2", "jacobian", "remove_rows", "project")

# %%
source("JAX", "linearized", "gram_pinv", "remove_rows", "project")

# %%
for name, fx in RUN.items():
    for setup, (net, X, _) in SETUP.items():
        model = fx.model_from(net)
        note(name, "project: relative difference from mlp_ref", setup,
             rel_error(fx.as_mlp_ref(model, fx.project(model, X, G_QUESTION)),
                       fixes.project(net, X, G_QUESTION)))

# %% [markdown]
# A direction that equals mlp_ref's should move out1 as mlp_ref's does. One step of `naive` and
# one of `project` at each $\eta$ from 1e-5 to 1e-2, taken in each framework from the same weights
# (`measurements.drift.one_step_beside`), and out1's drift on the batch drawn over mlp_ref's
# curves: every point lands on mlp_ref's, within 1e-3 relative at every $\eta$. (The largest
# differences are at the smallest drift, about 1e-13 after a projected step of 1e-5 on the seed
# network: a difference of two values of out1 near 0.05, each known to a few units of its last
# digit.) The fitted log-log slopes over $\eta \le$ 1e-3 are 1.00 for naive and 2.00 for project,
# in NumPy, PyTorch, TensorFlow and JAX, on both setups: $O(\eta)$ against $O(\eta^2)$.

# %%
beside = {setup: one_step_beside({name: out1_after(fx) for name, fx in RUN.items()},
                                 setup, table.GUARANTEE_LRS)
          for setup in SETUP}
for setup, res in beside.items():
    print(f"{setup}: mlp_ref's max |change of out1| on the batch after one step")
    print(f"  {'lr':8}" + "".join(f"{lr:9.0e}" for lr in res["lrs"]))
    for rule in res["rules"]:
        print(f"  {rule:8}" + "".join(f"{d:9.1e}" for d in res["drift"]["mlp_ref"][rule])
              + f"   fitted slope {res['slopes']['mlp_ref'][rule]:.3f}")
for name in RUN:
    for setup, res in beside.items():
        for rule in res["rules"]:
            note(name, f"{rule}: fitted slope of the drift, lr <= 1e-3", setup,
                 res["slopes"][name][rule], ".3f")
            note(name, f"{rule}: drift, relative difference from mlp_ref", setup,
                 res["rel_error"][name][rule])
figure("frameworks_drift_vs_lr", list(beside.values()),
       missing=[name for name in FRAMEWORKS if name not in RUN])

# %% [markdown]
# ## 5. Restoring steps: back onto the constraint
#
# Projection holds out1 to first order; `restore` takes Gauss-Newton steps back to
# $\mathrm{out}_1^{\mathrm{ref}}$, each the smallest $\delta$ with
# $J_1 \delta = \mathrm{out}_1 - \mathrm{out}_1^{\mathrm{ref}}$ (a least-squares solve on $J_1$,
# $J_1$ recomputed each time). $\mathrm{out}_1^{\mathrm{ref}}$ must be taken *before* the step:
# taken after, the residual is zero and nothing is restored. After one projected step at each
# setup's $\eta$, the residual falls to 1e-12 of $\max|\mathrm{out}_1^{\mathrm{ref}}|$ or
# below in float64, within a few iterations.

# %%
source("PyTorch", "restore")

# %%
source("TensorFlow 2", "restore")

# %%
source("JAX", "restore")

# %%
for name, fx in RUN.items():
    for setup, (net, X, _) in SETUP.items():
        model = fx.model_from(net)
        out1_ref = fx.outputs(model, X)[:, 0]                 # before the step
        fx.step(model, fx.project(model, X, G_QUESTION), LR[setup])
        history = fx.restore(model, X, out1_ref)
        print(f"  {name:12} {setup:8} max |out1 - out1_ref|: "
              + " -> ".join(f"{r:.1e}" for r in history))
        note(name, "restore float64: final residual / max |ref|", setup,
             history[-1] / np.max(np.abs(out1_ref)))
        note(name, "restore float64: iterations", setup, len(history) - 1, "d")

# %% [markdown]
# ## 6. float32, the frameworks' default: the precision choices, measured
#
# On the seed network (float32 weights, the question's $\eta$) the projection leaves
# $\lVert J_1 D \rVert$ at most 1e-5 of $\lVert J_1 g \rVert$ ($J_1$ here is the exact Jacobian
# of the float32 weights, $D$ rounded to float32), and `restore` reaches float32 round-off, 1e-6
# of $\max|\mathrm{out}_1^{\mathrm{ref}}|$, within 10 iterations. Done the float32 way, $J_1$
# from the float32 model and `pinv(J1 @ J1.T)` in float32 (PyTorch's `project_with_pinv` below;
# `tf_fixes.py` and `jax_fixes.py` have no such variant), the same ratio is above 1e-4: $J_1$'s
# own rounding, about 1e-7 of its size, is large against the tiny cross-talk $J_1 g$, and the
# Gram matrix squares the conditioning.

# %%
source("PyTorch", "project_with_pinv")


# %%
def ratio_J1(fx, model, X, D):
    J1 = np.asarray(fx.jacobian(model, X))
    g = np.asarray(fx.flat(fx.naive(model, X, G_QUESTION)), dtype=np.float64)
    d = np.asarray(fx.flat(D)).astype(np.float32).astype(np.float64)
    return float(np.linalg.norm(J1 @ d) / np.linalg.norm(J1 @ g))


net, X, _ = SETUP["seed"]
for name, fx in RUN.items():
    model = fx.model_from(net, "float32")
    note(name, "float32 project: |J1 D| / |J1 g|", "seed",
         ratio_J1(fx, model, X, fx.project(model, X, G_QUESTION)))
    if hasattr(fx, "project_with_pinv"):
        note(name, "float32 with pinv: |J1 D| / |J1 g|", "seed",
             ratio_J1(fx, model, X, fx.project_with_pinv(model, X, G_QUESTION)))
    out1_ref = fx.outputs(model, X)[:, 0]
    fx.step(model, fx.project(model, X, G_QUESTION), LR["seed"])
    history = fx.restore(model, X, out1_ref, max_iter=10)
    note(name, "restore float32: final residual / max |ref|", "seed",
         history[-1] / np.max(np.abs(out1_ref)))
    note(name, "restore float32: iterations", "seed", len(history) - 1, "d")

# %% [markdown]
# ## 7. Penalty: a restoring force, with a stability limit
#
# `penalty` adds $\frac{\lambda}{2}\lVert \mathrm{out}_1 - \mathrm{out}_1^{\mathrm{ref}}\rVert^2$
# to the loss; its direction equals mlp_ref's to 1e-12 (measured here after one naive step, where
# the term is not zero). Gradient descent on that term alone multiplies out1's residual by
# $(I - \eta \lambda J_1 J_1^\top)$, so, linearised at the current weights, it diverges once
# $\eta \lambda \lambda_{max}(J_1 J_1^\top) > 2$ (the limit moves as the network trains):
# `largest_stable_lam` gives $2 / (\eta \lambda_{max})$, as
# `mlp_ref.fixes.penalty_limit(net, X) / lr` does.
#
# On the visible setup at $\eta = 0.01$, $\lambda_{max}$ is about 166, so $\lambda$ must stay
# below about 1.2. A tempting $\lambda = 10$ diverges: $|\Delta \mathrm{out}_1|$ passes 1e3 within
# 10 steps. $\lambda = 0.5$ (what mlp-ref's table uses) holds, and after 50 steps out1 has drifted
# less than half as far as under the naive rule, but not zero.

# %%
source("PyTorch", "penalty", "largest_stable_lam")

# %%
source("TensorFlow 2", "penalty", "largest_stable_lam")

# %%
source("JAX", "penalty", "largest_stable_lam")

# %%
lam = rules.PENALTY_LAM
net, X, _ = SETUP["visible"]
out1_ref = net(X)[:, 0]
moved = net.copy().step(fixes.naive(net, X, G_QUESTION), LR["visible"])
J1 = dense_rows(net, X)
print(f"visible setup: lambda_max(J1 J1^T) = {np.linalg.eigvalsh(J1 @ J1.T)[-1]:.1f}")
naive = net.copy()
for _ in range(50):
    naive.step(fixes.naive(naive, X, G_QUESTION), LR["visible"])
print(f"naive rule, 50 steps: max |change of out1| = {np.max(np.abs(naive(X)[:, 0] - out1_ref)):.3f}")
for name, fx in RUN.items():
    model = fx.model_from(moved)
    D = fx.penalty(model, X, G_QUESTION, out1_ref, lam=lam)
    note(name, "penalty: relative difference from mlp_ref", "visible",
         rel_error(fx.as_mlp_ref(model, D),
                   fixes.penalty(moved, X, G_QUESTION, keep=[0], ref=out1_ref, lam=lam)))
    note(name, "largest stable lam at lr 0.01", "visible",
         fx.largest_stable_lam(fx.model_from(net), X, LR["visible"]), ".3f")
    for lam_, steps in ((10.0, 10), (lam, 50)):
        model = fx.model_from(net)
        for _ in range(steps):
            fx.step(model, fx.penalty(model, X, G_QUESTION, out1_ref, lam=lam_), LR["visible"])
        note(name, f"lam = {lam_}: |change of out1| after {steps} steps", "visible",
             drift(fx, model, X, out1_ref), ".3g")

# %% [markdown]
# ## 8. Adam: project the update, with a fresh J1
#
# Adam rescales each coordinate, so a projected gradient comes out of it no longer in $J_1$'s null
# space. `adam_projected` lets the optimizer step, takes its update $U$ and projects $U$ with
# $J_1$ computed at the weights *before* this step (a $J_1$ kept from an earlier step no longer
# describes out1). Keras needs two more choices, said in `tf_fixes.adam`: its Python-float
# hyperparameters would be float32 constants even for a float64 model, and it adds $\epsilon$ to
# `sqrt(v)`, not to the bias-corrected `sqrt(v_hat)` as PyTorch, optax and mlp-ref do; with
# $\epsilon$ = 1e-30 below, where it goes does not matter.
#
# optax needs neither: a Python float takes the params' dtype, and the update is a value that
# optax returns (the step adds it), not a difference of the weights before and after.
#
# Over three steps the update equals `mlp_ref.optim.Adam(constraint=nullspace, order="update")`'s
# to 1e-12 on the visible setup. Not on the seed network: with $\mathrm{cond}(J_1) \approx$ 5e5,
# $J_1$'s row space itself is fixed only to $\epsilon_{mach} \cdot \mathrm{cond}(J_1)$, about
# 1e-10, and two correct float64 projections differ by a small multiple of that; the bound checked
# is $n \cdot \epsilon_{mach} \cdot \mathrm{cond}(J_1)$, one for each of the $n = 8$ rows (or
# 1e-12, where that is larger), printed below beside $\epsilon_{mach} \cdot \mathrm{cond}(J_1)$.

# %%
source("PyTorch", "adam", "adam_projected")

# %%
source("TensorFlow 2", "adam", "adam_projected")

# %%
source("JAX", "adam", "adam_projected")

# %%
for setup, (net, X, _) in SETUP.items():
    eps_cond = np.finfo(float).eps * np.linalg.cond(dense_rows(net, X))
    print(f"{setup}: eps * cond(J1) = {eps_cond:.1e};  the bound, max(1e-12, n * eps * cond(J1)) = "
          f"{max(1e-12, len(X) * eps_cond):.1e}")
for name, fx in RUN.items():
    for setup, (net, X, _) in SETUP.items():
        model = fx.model_from(net)
        opt = fx.adam(model, lr=1e-3, eps=1e-30)
        ref_net = net.copy()
        ref_opt = optim.Adam(1e-3, eps=1e-30,
                             constraint=lambda U, ref_net=ref_net, X=X: fixes.nullspace(ref_net, U, X))
        worst = 0.0
        for _ in range(3):
            U = fx.adam_projected(model, opt, X, G_QUESTION)
            expected = ref_opt.apply(ref_net, fixes.naive(ref_net, X, G_QUESTION))
            worst = max(worst, rel_error(fx.as_mlp_ref(model, U), expected))
        note(name, "Adam, 3 steps: worst relative difference", setup, worst)

# %% [markdown]
# ## 9. A PyTorch trap: detach() is not a copy
#
# `{k: p.detach() for k, p in model.named_parameters()}` looks like a snapshot of the weights,
# but `detach()` only cuts the tensor from the autograd graph: it shares `p`'s storage, so after
# an in-place step (`p -= lr * d`, `opt.step()`) it holds the *new* values, and "before - after"
# is zero. `snapshot()` clones. (In TensorFlow, `tf.identity(v)` reads a copy; the Variable
# itself follows its updates.)

# %%
source("PyTorch", "snapshot")

# %%
if "PyTorch" in RUN:
    fx = RUN["PyTorch"]
    net, X, _ = SETUP["seed"]
    model = fx.model_from(net)
    detached, cloned = {k: p.detach() for k, p in model.named_parameters()}, fx.snapshot(model)
    fx.step(model, fx.naive(model, X, G_QUESTION), LR["seed"])
    now = fx.snapshot(model)
    print(f"after the step: detach() holds the new weights: "
          f"{all(np.array_equal(detached[k].numpy(), now[k].numpy()) for k in now)};  "
          f"snapshot() holds the old ones: "
          f"{not any(np.array_equal(cloned[k].numpy(), now[k].numpy()) for k in now)}")
else:
    print("PyTorch: NOT RUN here (not installed); the trap is shown above in snapshot's docstring.")

# %% [markdown]
# ## 10. A JAX trap: optax.masked is not a freeze
#
# In optax the answer's `var_list` belongs to the optimizer, and the obvious way to write it,
# `optax.masked(optax.sgd(lr), trainable)`, freezes nothing. `optax.masked` applies `sgd` to the
# leaves the mask marks True and passes the others' updates through *unchanged* ("the rest are
# passed through", says its docstring): a frozen parameter's update is its raw gradient $g$, and
# `optax.apply_updates` adds it, $\theta \leftarrow \theta + g$: a step of size 1 *up* the
# gradient, $1/\eta$ times as long as the naive rule's step and the other way.
#
# The "frozen" trunk moves, and out1 with it, further than under the naive step, on both setups;
# on the visible setup out2 even falls. Measured below: over the frozen leaves,
# $\max|\text{update} - g|$ is exactly 0.0 (the update IS the gradient). Freezing in optax is
# `optax.partition` with `optax.set_to_zero()` for the frozen labels (`sgd_var_list`), or
# `optax.transforms.freeze` chained before `sgd` (its mask marks what is *frozen*, the opposite
# sense from `masked`'s): then out1 moves by exactly 0.0, on the batch and on 256 unseen inputs.

# %%
source("JAX", "sgd_var_list", "sgd_masked", "optimizer", "optax_step")

# %%
if "JAX" in RUN:
    fx = RUN["JAX"]
    for setup, (net, X, _) in SETUP.items():
        stepped = net.copy().step(fixes.naive(net, X, G_QUESTION), LR[setup])
        print(f"  mlp_ref      {setup:8} naive step at lr {LR[setup]}: |change of out1|, batch "
              f"{np.max(np.abs(stepped(X)[:, 0] - net(X)[:, 0])):.1e}")
        for label, make in (("optax.masked", fx.sgd_masked), ("optax.partition", fx.sgd_var_list)):
            model = fx.model_from(net)
            before = {"batch": fx.outputs(model, X), "256 unseen": fx.outputs(model, probes)}
            g = fx.naive(model, X, G_QUESTION)
            opt = fx.optimizer(model, make(model, LR[setup]))
            updates = fx.optax_step(model, opt, X, G_QUESTION)
            frozen = [k for k in model.params if k not in fx.output_layer(model)]
            if label == "optax.masked":              # what a frozen leaf's update is: g itself
                note("JAX", f"{label}: max |update - g|, frozen leaves", setup,
                     max(float(np.max(np.abs(updates[k] - g[k]))) for k in frozen))
            else:                                    # ... or nothing
                note("JAX", f"{label}: max |update|, frozen leaves", setup,
                     max(float(np.max(np.abs(updates[k]))) for k in frozen))
            for where, inputs in (("batch", X), ("256 unseen", probes)):
                note("JAX", f"{label}: |change of out1|, {where}", setup,
                     drift(fx, model, inputs, before[where][:, 0]))
            note("JAX", f"{label}: mean change of out2, batch", setup,
                 float(np.mean(fx.outputs(model, X)[:, 1] - before["batch"][:, 1])), ".3g")
else:
    print("JAX: NOT RUN here (not installed); the trap is said above in sgd_masked's docstring.")

# %% [markdown]
# ## What to remember
#
# In a framework as in NumPy: freezing (`var_list`, `requires_grad`) holds out1 exactly, on
# every input; a mask alone never does (and with $G = [0, -1]$ it changes nothing); projection
# holds it to first order on the batch if $J_1$ and the solve are done in float64 with a
# least-squares solve (or through the Gram, refined to round-off), and restoring steps to
# round-off if the reference was taken before the step; with Adam, project the update with a
# fresh $J_1$; a penalty only pulls, and diverges above about
# $\lambda = 2 / (\eta \lambda_{max})$ (linearised: check it again as the network trains).
#
# Copy weights with `clone()`, not `detach()`; hand TensorFlow float64 tensors, not
# Python floats; in optax, freeze with `partition` and `set_to_zero` (or `transforms.freeze`),
# never with `masked`, which passes the frozen gradients through.
#
# Exercises: port one solution of `tutorials/exercises/solutions/` to PyTorch, TensorFlow or
# JAX, and check it against `mlp_ref` as this tutorial does. And the one of
# `mlp_ref/resources/frameworks/README.md`: predict, before running it, what
# `optax.masked(optax.sgd(lr), trainable)` does to the frozen layer and to out1.

# %%
print(f"Ran here: {', '.join(RUN) or 'nothing (no framework installed)'}.")
