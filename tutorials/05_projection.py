# %% [markdown]
# # Tutorial 05: null-space projection: keep every parameter trainable, remove what moves out1
#
# **The question** ([Stack Overflow 42182233](https://stackoverflow.com/questions/42182233)):
# an MLP has two outputs, and the gradient of the loss with respect to the outputs is
# $G = [0, -1]$: "raise out2, leave out1 alone". A gradient step raises out2, but out1 moves
# too. How do we take a step that leaves out1 unchanged?
#
# Layer splitting (tutorial 04) holds out1 exactly by not training the shared layers at all. The
# other road keeps every parameter trainable and removes from the gradient $g$ the part that
# moves out1 on the batch, to first order:
#
# $$D = g - J_1^\top (J_1 J_1^\top)^{+} J_1 g, \qquad \text{so that} \qquad J_1 D = 0.$$
#
# This tutorial computes it twice on the small network, with the Jacobian written out and
# `np.linalg.pinv`, and without ever building $J_1$ (the Gram route of `fixes.project`), then
# measures what it buys (drift $O(\eta^2)$ instead of $O(\eta)$, on the batch only), and shows the
# restoring step that removes the rest. In the code, `keep=[0]` means "hold output column 0",
# out1.

# %%
import numpy as np

from mlp_ref import MLP, data, fixes, jacobian
from mlp_ref.classroom.tutorial import animation, figure, run_headless, show
from mlp_ref.measurements import drift, fits, projection
from mlp_ref.setups import G_QUESTION, seed_setup, visible_setup

run_headless(globals())    # as a script: prints the text cells and runs the code; in Jupyter: nothing

PROBE = data.probe_inputs()                # 256 unseen inputs
LRS = np.logspace(-5, -3, 5)               # small enough for the asymptotic orders to show
net, X, _ = visible_setup()
out1_ref = net(X)[:, 0]                    # the values to hold on the batch

# %% [markdown]
# ## 1. The projected direction
#
# `fixes.project(net, X, G)` returns $D = g - J_1^\top (J_1 J_1^\top)^{+} J_1 g$, where $J_1$
# ($n \times P$, $P$ the number of parameters) is the Jacobian of out1 over the batch. A step
# $\theta \leftarrow \theta - \eta D$ moves out1 by $-\eta J_1 D$ to first order: on the visible
# setup $\max|J_1 g|$ is about 49, so the naive step of $\eta = 0.01$ moves out1 by about 0.49 to
# first order (0.39 measured, in tutorial 02), and $J_1 D$ is round-off, below 1e-12.
#
# The part removed, $g - D = J_1^\top \alpha$, is orthogonal to $D$ (their cosine is round-off):
# $D$ is the orthogonal projection of $g$ onto the null space of $J_1$, the closest direction to
# $g$ that does not move out1 to first order. It keeps about 84% of $g$'s length. The figure draws
# the same thing in a network with two parameters: the projected step runs along the tangent of
# out1's level set.

# %%
g = fixes.naive(net, X, G_QUESTION)
D = fixes.project(net, X, G_QUESTION)
J1 = jacobian.OutputJacobian(net, X, keep=[0])
flat_g, flat_D = jacobian.flatten(g), jacobian.flatten(D)
cosine = flat_D @ (flat_g - flat_D) / (np.linalg.norm(flat_D) * np.linalg.norm(flat_g - flat_D))
print(f"max |J1 . g| = {np.max(np.abs(J1.matvec(g))):.3g}    max |J1 . D| = "
      f"{np.max(np.abs(J1.matvec(D))):.1e}")
ratio = np.linalg.norm(flat_D) / np.linalg.norm(flat_g)
print(f"cos(D, g - D) = {cosine:.1e}    |D| / |g| = {ratio:.3f}")
figure("projection_geometry", projection.projection_geometry)      # computed only when drawn

# %% [markdown]
# The same picture, moving: a naive step leaves out1's level set, the projected step runs along
# its tangent, and restoring steps bring θ back onto the curve.

# %%
animation("projection_step")

# %% [markdown]
# ## 2. The same projection with the Jacobian written out
#
# On the seed network $J_1$ is only $8 \times 26$ (tutorial 02 printed it), so we can build it and
# project with the pseudo-inverse, $D = g - J_1^{+} J_1 g$ (`np.linalg.pinv(J1)`, which equals
# $J_1^\top (J_1 J_1^\top)^{+}$ for every $J_1$, and $J_1^\top (J_1 J_1^\top)^{-1}$ when $J_1$ has
# full row rank, as here: rank 8).
#
# It agrees with `fixes.project`, which never builds $J_1$, to round-off: within
# $\epsilon \cdot \mathrm{cond}(J_1)$, about 1e-10 relative, all that a solve of this conditioning
# can promise ($\epsilon$ = 2.2e-16, float64's; the digits below depend on the machine's LAPACK).
# A warning on the way: `np.linalg.pinv(J1 @ J1.T)` would square $J_1$'s condition number (about
# 5e5 on this network with its near-identical hidden units) and agree only to about 1e-7; that is
# why `fixes.project` refines its solve once by default (`refine=1`; `fixes.nullspace`'s docstring
# says what a pass buys).

# %%
seed_net, seed_X, _ = seed_setup()
J = jacobian.dense_rows(seed_net, seed_X, keep=[0])                 # (8, 26)
g_seed = jacobian.flatten(fixes.naive(seed_net, seed_X, G_QUESTION))
D_pinv = g_seed - np.linalg.pinv(J) @ (J @ g_seed)
D_gram = jacobian.flatten(fixes.project(seed_net, seed_X, G_QUESTION))
D_square = g_seed - J.T @ np.linalg.pinv(J @ J.T) @ (J @ g_seed)
show("D with pinv(J1)", D_pinv, sci=True, precision=3)
show("D from fixes.project", D_gram, sci=True, precision=3)
scale = np.max(np.abs(g_seed))
print(f"\nrank of J1 {np.linalg.matrix_rank(J)}, condition number {np.linalg.cond(J):.1e}")
print(f"max |D_pinv - D_gram| / max |g|   = {np.max(np.abs(D_pinv - D_gram)) / scale:.1e}")
print(f"max |D_square - D_gram| / max |g| = {np.max(np.abs(D_square - D_gram)) / scale:.1e}"
      f"   (pinv of J1 J1^T: the condition number squared)")
print(f"max |J1 D_pinv| = {np.max(np.abs(J @ D_pinv)):.1e}   max |J1 g| = {np.max(np.abs(J @ g_seed)):.1e}")

# %% [markdown]
# ## 3. One step: O(lr) becomes O(lr^2)
#
# $J_1 D = 0$ removes the first-order term; the second-order one (the curvature of the network)
# is left. `measurements.drift.one_step` takes one step of each rule at every $\eta$ and measures
# $\max|\Delta \mathrm{out}_1|$ on the batch; a straight line on log-log axes has the order as
# its slope. Fitted over $\eta$ from 1e-5 to 1e-3, on both setups: naive 1.00, projected 2.00.
# Ten times smaller a step, a hundred times smaller a drift, but never zero.

# %%
steps = {name: drift.one_step(name, rules=["naive", "project"], lrs=LRS, slope_max_lr=LRS[-1])
         for name in ("seed", "visible")}            # slope_max_lr: the orders the figure writes
for name, res in steps.items():
    print(f"\n{name}: max |change of out1| on the batch after one step")
    print(f"  {'lr':>8} {'naive':>11} {'project':>11}")
    for i, lr in enumerate(LRS):
        print(f"  {lr:8.2e} {res['naive']['drift_batch'][i]:11.3e} "
              f"{res['project']['drift_batch'][i]:11.3e}")
    print(f"  fitted log-log slopes: naive "
          f"{fits.loglog_slope(LRS, res['naive']['drift_batch']):.2f}, project "
          f"{fits.loglog_slope(LRS, res['project']['drift_batch']):.2f}")
figure("drift_vs_lr", list(steps.values()))

# %% [markdown]
# ## 4. Only on the batch
#
# The projection removes the rows of $J_1$ on the inputs it was given (`keep_X`, the batch by
# default), and nothing else. On 256 unseen inputs the projected step moves out1 $O(\eta)$
# again: slope 1, like naive. At $\eta$ = 1e-3 on the visible setup out1 drifts about 20 times
# more off the batch than on it.

# %%
for name, res in steps.items():
    unseen = res["project"]["drift_unseen"]
    print(f"{name:8} projected, unseen inputs: slope {fits.loglog_slope(LRS, unseen):.2f};"
          f"  at lr 1e-3: batch {res['project']['drift_batch'][-1]:.1e}, unseen {unseen[-1]:.1e}")

# %% [markdown]
# ## 5. The restoring step
#
# After a projected step out1 is off by $O(\eta^2)$ on the batch. `fixes.restore` pulls it
# back with Gauss-Newton steps,
#
# $$\theta \leftarrow \theta - J_1^\top (J_1 J_1^\top)^{+} \big(\mathrm{out}_1(\theta) - \mathrm{out}_1^{\mathrm{ref}}\big),$$
#
# the smallest step that cancels the residual to first order, repeated with $J_1$ recomputed. Near
# the constraint each step squares the residual (Gauss-Newton converges quadratically): after one
# projected step at lr = 0.01 on the visible setup, three restoring steps take it from about 2e-2
# to round-off (below 1e-12, restore's tolerance). Off the batch restoring promises nothing: the
# drift on unseen inputs, a few hundredths after the projected step, moves but is still a few
# hundredths after restoring, O(lr).

# %%
stepped = net.copy().step(D, 0.01)
report = fixes.restore(stepped, X, out1_ref)
print(report)
print("max |out1 - out1_ref| before each restoring step and after the last:\n  ",
      ", ".join(f"{r:.1e}" for r in report.history))
projected = net.copy().step(D, 0.01)
print(f"on unseen inputs: max |change of out1| after the projected step "
      f"{np.max(np.abs(projected(PROBE)[:, 0] - net(PROBE)[:, 0])):.3f}, after restoring "
      f"{np.max(np.abs(stepped(PROBE)[:, 0] - net(PROBE)[:, 0])):.3f}")

# %% [markdown]
# ## 6. The Gram trick: J1 is never built
#
# Everything above needs only three things: $J_1 J_1^\top$ ($n \times n$), $J_1 D$ and
# $J_1^\top \alpha$. Per layer, row $i$ of $J_1$ is $a_{l-1,i} \otimes s_{l,i}$ (an outer
# product) for the weights and $s_{l,i}$ for the bias, where $s_{l,i}$ is sample $i$'s backprop
# signal $dz_l$ for $G = e_1$ (1 on out1, 0 elsewhere) and $a_{l-1,i}$ the layer's input. With
# $S_l$ and $A_{l-1}$ the matrices whose rows are the $s_{l,i}$ and the $a_{l-1,i}$,
#
# $$J_1 J_1^\top = \sum_l (S_l S_l^\top) \odot (A_{l-1} A_{l-1}^\top + 1),$$
#
# from the layer inputs and one signal-only backward pass. On the seed network it equals the
# product of the dense $8 \times 26$ Jacobian with itself to round-off. For a network the size of an
# MNIST classifier, 784-512-512-10, and a batch of n = 256, J1 would hold n P = 171 million
# numbers (1.4 GB in float64); the layer inputs and signals (n times 784 + 512 + 512 + 512 +
# 512 + 10 = 2842 per sample) and the Gram matrix (n^2) hold 0.79 million (6.3 MB), over 200
# times less.

# %%
J_seed = jacobian.OutputJacobian(seed_net, seed_X, keep=[0])
dense = J_seed.dense()
gram = J_seed.gram()
print(f"seed: dense J1 {dense.shape};  max |gram() - J1 @ J1.T| / max |gram()| = "
      f"{np.max(np.abs(gram - dense @ dense.T)) / np.max(np.abs(gram)):.1e}")

big = MLP([784, 512, 512, 10], hidden="relu", init_std=0.05, seed=0)
X_big = np.random.default_rng(0).random((256, 784))
J_big = jacobian.OutputJacobian(big, X_big, keep=[0])
n, P = J_big.shape
factors = (sum(a.size for a in J_big.inputs.values()) + sum(s.size for s in J_big.signals.values())
           + J_big.gram().size)
print(f"{big!r}, n = {n}: P = {P:,} parameters")
print(f"  dense J1:                      n P = {n * P:>12,} numbers = {8 * n * P / 1e9:.2f} GB")
print(f"  inputs, signals, Gram: n 2842 + n^2 = {factors:>12,} numbers = {8 * factors / 1e6:.1f} MB"
      f"   ({n * P / factors:.0f} times less)")

# %% [markdown]
# ## What to remember
#
# Projection keeps every parameter trainable and removes, to first order, whatever would move
# out1 on the batch: drift $O(\eta^2)$ there, still $O(\eta)$ anywhere else. Restoring steps
# bring the batch back to round-off. It costs a few backward passes and an $n \times n$ solve,
# never the $n \times P$ Jacobian. With momentum or Adam, project the final update, not the
# gradient (tutorial 06).
#
# Exercises: `tutorials/exercises/04_projection.py` (dense with `pinv`, then the Gram route) and
# `tutorials/exercises/05_restore.py` (the restoring step).
