"""Tutorial 05: null-space projection - keep every parameter trainable, remove what moves out1.

Layer splitting (tutorial 04) holds out1 exactly by not training the shared layers at all. The
other road keeps every parameter trainable and removes from the gradient g the part that moves
out1 on the batch, to first order: D = g - J1^T (J1 J1^T)^+ J1 g, so that J1 . D = 0. This
tutorial measures what that buys (drift O(lr^2) instead of O(lr), on the batch only), shows the
restoring step that removes the rest, and why J1 never has to be built.

    python tutorials/05_projection.py            run straight through
    python tutorials/05_projection.py --step     pause before each section
"""
# %%
import numpy as np

from mlp_ref import MLP, data, experiments, fixes, jacobian
from mlp_ref.setups import G_QUESTION, seed_setup, visible_setup
from mlp_ref.tutorial import section

PROBE = data.probe_inputs()                # 256 unseen inputs
LRS = np.logspace(-5, -3, 5)               # small enough for the asymptotic orders to show
net, X, _ = visible_setup()
out1_ref = net(X)[:, 0]                    # the values to hold on the batch

# %%
section("1. The projected direction", """
    fixes.project(net, X, G) returns D = g - J1^T (J1 J1^T)^+ J1 g, where J1 (n, P) is the
    Jacobian of out1 over the batch. J1 . D is the first-order change of out1 along D: on the
    visible setup J1 . g is about 49 (that is what moved out1 in tutorial 02), and J1 . D is
    round-off, below 1e-12. The part removed, g - D = J1^T alpha, is orthogonal to D (their
    cosine is round-off): D is the orthogonal projection of g onto the null space of J1, the
    closest direction to g that does not move out1 to first order. It keeps about 84% of g's
    length.""")
g = fixes.naive(net, X, G_QUESTION)
D = fixes.project(net, X, G_QUESTION)
J1 = jacobian.OutputJacobian(net, X, keep=[0])
flat_g, flat_D = jacobian.flatten(g), jacobian.flatten(D)
cosine = flat_D @ (flat_g - flat_D) / (np.linalg.norm(flat_D) * np.linalg.norm(flat_g - flat_D))
print(f"max |J1 . g| = {np.max(np.abs(J1.matvec(g))):.3g}    max |J1 . D| = "
      f"{np.max(np.abs(J1.matvec(D))):.1e}")
ratio = np.linalg.norm(flat_D) / np.linalg.norm(flat_g)
print(f"cos(D, g - D) = {cosine:.1e}    |D| / |g| = {ratio:.3f}")

# %%
section("2. One step: O(lr) becomes O(lr^2)", """
    J1 . D = 0 removes the first-order term; the second-order one (the curvature of the
    network) is left. experiments.one_step takes one step of each rule at every lr and measures
    max |change of out1| on the batch; a straight line on log-log axes has the order as its
    slope. Fitted over lr from 1e-5 to 1e-3, on both setups: naive 1.00, projected 2.00. Ten
    times smaller a step, a hundred times smaller a drift - but never zero.""")
steps = {name: experiments.one_step(name, rules=["naive", "project"], lrs=LRS)
         for name in ("seed", "visible")}
for name, res in steps.items():
    print(f"\n{name}: max |change of out1| on the batch after one step")
    print(f"  {'lr':>6} {'naive':>11} {'project':>11}")
    for i, lr in enumerate(LRS):
        print(f"  {lr:6.0e} {res['naive']['drift_batch'][i]:11.3e} "
              f"{res['project']['drift_batch'][i]:11.3e}")
    print(f"  fitted log-log slopes: naive "
          f"{experiments.loglog_slope(LRS, res['naive']['drift_batch']):.2f}, project "
          f"{experiments.loglog_slope(LRS, res['project']['drift_batch']):.2f}")

# %%
section("3. Only on the batch", """
    The projection removes the rows of J1 on the inputs it was given (keep_X, the batch by
    default), and nothing else. On 256 unseen inputs the projected step moves out1 O(lr) again:
    slope 1, like naive. At lr = 1e-3 on the visible setup out1 drifts about 20 times more off
    the batch than on it.""")
for name, res in steps.items():
    unseen = res["project"]["drift_unseen"]
    print(f"{name:8} projected, unseen inputs: slope {experiments.loglog_slope(LRS, unseen):.2f};"
          f"  at lr 1e-3: batch {res['project']['drift_batch'][-1]:.1e}, unseen {unseen[-1]:.1e}")

# %%
section("4. The restoring step", """
    After a projected step out1 is off by O(lr^2) on the batch. fixes.restore pulls it back:
    theta <- theta - J1^T (J1 J1^T)^+ (out1(theta) - out1_ref), the smallest step that cancels
    the residual to first order, repeated with J1 recomputed. Near the constraint each step
    squares the residual (Gauss-Newton converges quadratically): after one projected step at
    lr = 0.01 on the visible setup, three restoring steps take it from about 2e-2 to round-off
    (below 1e-12, restore's tolerance). Off the batch nothing is restored: the drift on unseen
    inputs stays at a few hundredths, O(lr).""")
stepped = net.copy().step(D, 0.01)
report = fixes.restore(stepped, X, out1_ref)
print(report)
print("max |out1 - out1_ref| before each restoring step and after the last:",
      ", ".join(f"{r:.1e}" for r in report.history))
print(f"on unseen inputs after restoring: max |change of out1| = "
      f"{np.max(np.abs(stepped(PROBE)[:, 0] - net(PROBE)[:, 0])):.3f}")

# %%
section("5. The Gram trick: J1 is never built", """
    Everything above needs only three things: J1 J1^T (n, n), J1 . D and J1^T alpha. Per layer,
    row i of J1 is outer(a_{l-1,i}, s_{l,i}) for the weights and s_{l,i} for the bias, where
    s_{l,i} is sample i's backprop signal dz_l for G = e_1 (1 on out1, 0 elsewhere) and
    a_{l-1,i} the layer's input. So J1 J1^T = sum_l (S_l S_l^T) * (A_{l-1} A_{l-1}^T + 1), from
    the layer inputs and one signal-only backward pass. On the seed network it equals the
    product of the dense (8, 26) Jacobian with itself to round-off. For a network the size of an
    MNIST classifier, 784-512-512-10, and a batch of n = 256, J1 would hold n P = 171 million
    numbers (1.4 GB in float64); the layer inputs and signals (n times 784 + 512 + 512 + 512 +
    512 + 10 = 2842 per sample) and the Gram matrix (n^2) hold 0.79 million (6.3 MB), over 200
    times less.""")
seed_net, seed_X, _ = seed_setup()
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

# %%
section("What to remember", """
    Projection keeps every parameter trainable and removes, to first order, whatever would move
    out1 on the batch: drift O(lr^2) there, still O(lr) anywhere else. Restoring steps bring
    the batch back to round-off. It costs a few backward passes and an n x n solve, never the
    n x P Jacobian. With momentum or Adam, project the final update, not the gradient (tutorial
    06). Figures: figures/projection_geometry.png (the picture in two parameters),
    figures/drift_vs_lr.png (the slopes), figures/heldout_drift.png (off the batch).""")
