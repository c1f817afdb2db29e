"""Tutorial 02: the question, measured - why a step that raises out2 moves out1 too.

The question (Stack Overflow 42182233): an MLP has two outputs; the gradient of the loss with
respect to the outputs is G = [0, -1] ("raise out2, leave out1 alone"). A gradient step raises
out2, but out1 moves too. How do we hold out1 fixed? Before any fix, this tutorial measures the
problem on two setups and finds where out1's movement comes from: the cross-output tangent
kernel, layer by layer.

    python tutorials/02_the_question.py            run straight through
    python tutorials/02_the_question.py --step     pause before each section
"""
# %%
import numpy as np

from mlp_ref import experiments, jacobian
from mlp_ref.setups import G_QUESTION, seed_setup, visible_setup
from mlp_ref.tutorial import section, show

SETUPS = {"seed": seed_setup(), "visible": visible_setup()}
LR = experiments.LR                         # seed: the answer's 0.1; visible: 0.01

# %%
section("1. Two setups, one G", """
    The seed setup is the answer's own: a 3-4-2 sigmoid network with weights N(0, 0.1^2) and 8
    samples. Its weights are so small that its four hidden units are almost alike, so the effect
    we are after is tiny there. The visible setup asks the same question of a 3-16-16-2 tanh
    network first trained on the same 8 samples, where the effect is plain to see. G = [0, -1]
    on every row: dL/d(out1) = 0, dL/d(out2) = -1, so a step against the gradient raises out2.""")
for name, (net, X, _) in SETUPS.items():
    print(f"{name:8} {net!r}   X {X.shape}   P = {net.n_params} parameters   lr = {LR[name]}")
print("G =", G_QUESTION, "for every row")

# %%
section("2. One naive step: out2 rises, and out1 moves", """
    One plain gradient step theta <- theta - lr * g, g = sum_i G_i . d out_i / d theta (what
    loss.backward() and an optimizer's step do). On the seed setup out2 rises by about 1.5 on
    average, and out1 moves by at most about 2e-4: small, but not zero. On the visible setup
    out2 rises by about 1.4, and out1 moves by up to about 0.4: more than a quarter of what out2
    gained, although G asked for no change of out1 at all.""")
effects = {}
for name, (net, X, _) in SETUPS.items():
    effects[name] = e = experiments.naive_step_effect(net, X, G_QUESTION, lr=LR[name])
    print(f"\n{name}: mean gain of out2 = {e['delta'][:, 1].mean():.3f}, "
          f"max |change of out1| = {np.max(np.abs(e['delta'][:, 0])):.2e}")
    show("  delta out1 per sample", e["delta"][:, 0], sci=True)

# %%
section("3. Why: the cross-output tangent kernel", """
    To first order a step moves output k by -lr * J_k . g, where J_k (n, P) is the Jacobian of
    output k over the batch. With G's out1 column zero, g = J_2^T G_2, so out1 moves by
    -lr * K12 @ G_2, where K12 = J_1 J_2^T (n, n) is the cross-output tangent kernel: K12[a, b]
    says how much a step that pushes out2 on sample b moves out1 on sample a.
    jacobian.tangent_kernel_by_layer splits K12 into one share per layer. The output layer's
    share is exactly 0.0, in every entry: out1 and out2 have disjoint output weights
    (W_L[:, 0], b_L[0] against W_L[:, 1], b_L[1]), so their gradients there never overlap. All
    of the cross-talk flows through the shared hidden layers: all of it through the one hidden
    layer of the seed network, about two thirds through the first and one third through the
    second hidden layer of the visible one.""")
shares = {}
for name, (net, X, _) in SETUPS.items():
    shares[name] = K = jacobian.tangent_kernel_by_layer(net, X, 0, 1)
    L = net.depth
    print(f"\n{name}: K12 is {K['total'].shape}; per layer, max |share| and the share's part of "
          f"sum(K12):")
    for l in range(1, L + 1):
        kind = "output layer" if l == L else "hidden layer"
        print(f"  layer {l} ({kind:12}) max |entry| = {np.max(np.abs(K[l])):.3e}   "
              f"part of the sum = {K[l].sum() / K['total'].sum():6.1%}")
    print(f"  output layer's share is exactly zero in every entry: {bool(np.all(K[L] == 0.0))}")

# %%
section("4. The first-order prediction matches the drift at small lr", """
    So the predicted change of out1 is -lr * K12 @ G_2 (plus -lr * K11 @ G_1, which is zero
    here). experiments.first_order_drift compares it with the actual change after one step, for
    lr from 1e-5 to 0.1. The relative error, max |actual - predicted| / max |actual|, shrinks in
    proportion to lr while lr is small (what is left is the O(lr^2) curvature term): on the
    visible setup it is
    about 3e-4 at lr = 1e-5, about 0.4 at the visible setup's lr of 0.01 (one step there is
    already far from first order). On the seed setup the prediction is good to better than 1e-3
    even at lr = 0.1.""")
for name in SETUPS:
    fo = experiments.first_order_drift(name)
    print(f"\n{name}:\n  {'lr':>6} {'max |actual|':>14} {'relative error':>16}")
    for lr, actual, err in zip(fo["lrs"], fo["actual"], fo["rel_error"]):
        print(f"  {lr:6.0e} {np.max(np.abs(actual)):14.3e} {err:16.2e}")

# %%
section("What to remember", """
    out1 moves because the parameters it reads are shared with out2: a step for out2 changes the
    hidden layers, and out1 reads them. The output layer contributes nothing to the cross-talk,
    so every fix is about the shared layers: freeze them (tutorial 04), or move them only in
    directions that leave out1 alone to first order (tutorial 05). A loss mask does neither
    (tutorial 03). Figures: figures/tangent_kernel.png (K12 by layer) and
    figures/network_fixes.png (which weights each fix moves).""")
