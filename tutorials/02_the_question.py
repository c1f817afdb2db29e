# %% [markdown]
# # Tutorial 02: the question, measured: why a step that raises out2 moves out1 too
#
# **The question** ([Stack Overflow 42182233](https://stackoverflow.com/questions/42182233)):
# an MLP has two outputs, and the gradient of the loss with respect to the outputs is
# $G = [0, -1]$: "raise out2, leave out1 alone". A gradient step raises out2, but out1 moves
# too. How do we take a step that leaves out1 unchanged?
#
# Before any fix, this tutorial measures the problem on two setups and finds where out1's
# movement comes from: the Jacobian of out1, printed in full for the small network, and the
# cross-output tangent kernel it makes with out2's, layer by layer. (out1 and out2 are output
# columns 0 and 1.)

# %%
import numpy as np

from mlp_ref import jacobian
from mlp_ref.classroom.tutorial import figure, run_headless, show
from mlp_ref.measurements import question
from mlp_ref.setups import G_QUESTION, LR, seed_setup, visible_setup

run_headless(globals())    # as a script: prints the text cells and runs the code; in Jupyter: nothing
SETUPS = {"seed": seed_setup(), "visible": visible_setup()}

# %% [markdown]
# ## 1. Two setups, one G
#
# The seed setup is the answer's own: a 3-4-2 sigmoid network with weights
# $\mathcal{N}(0, 0.1^2)$ and 8 samples. Its weights are so small that its four hidden units are
# almost alike, so the effect we are after is tiny there. The visible setup asks the same
# question of a 3-16-16-2 tanh network first trained on the same 8 samples, where the effect is
# plain to see. $G = [0, -1]$ on every row: $\partial L/\partial \mathrm{out}_1 = 0$,
# $\partial L/\partial \mathrm{out}_2 = -1$, so a step against the gradient raises out2.

# %%
for name, (net, X, _) in SETUPS.items():
    print(f"{name:8} {net!r}\n{'':8} X {X.shape}, P = {net.n_params} parameters, lr = {LR[name]}")
print("G =", G_QUESTION, "for every row")

# %% [markdown]
# ## 2. One naive step: out2 rises, and out1 moves
#
# One plain gradient step $\theta \leftarrow \theta - \eta\, g$ with
# $g = \sum_i \sum_k G_{ik}\, \partial O_{ik}/\partial\theta$ (sample $i$, output $k$: what
# `loss.backward()` and an optimizer's step do). On the seed setup out2 rises by about 1.5 on
# average, and out1 moves by at most about 2e-4: small, but not zero. On the visible setup out2
# rises by about 1.4, and out1 moves by up to about 0.4: up to about a quarter of what out2 gained
# (a fifth on average), although $G$ asked for no change of out1 at all. The figure shows the
# visible setup.

# %%
steps = {}
for name, (net, X, _) in SETUPS.items():
    g = net.gradient(X, G_QUESTION)                  # g = sum_i G_i . dO_i/dtheta
    before, after = net(X), net.copy().step(g, LR[name])(X)
    steps[name] = {"before": before, "after": after, "delta": after - before, "lr": LR[name]}
    delta = steps[name]["delta"]
    print(f"\n{name}: mean gain of out2 = {delta[:, 1].mean():.3f}, "
          f"max |change of out1| = {np.max(np.abs(delta[:, 0])):.2e}")
    show("  delta out1 per sample", delta[:, 0], sci=True)
figure("step_effect", question.naive_step_effect(*SETUPS["visible"][:2], G_QUESTION, lr=LR["visible"]))

# %% [markdown]
# ## 3. The Jacobian of out1, all of it
#
# To first order a step $D$ moves output $k$ by $-\eta\, J_k D$, where $J_k$ ($n \times P$) is the
# Jacobian of output $k$ over the batch: row $i$ is $\partial O_{i,k}/\partial\theta$, the
# gradient of one number. So row $i$ of $J_1$ is one backward pass of $G = [1, 0]$ on sample $i$
# alone. On the seed network $J_1$ is $8 \times 26$: here it is, one block of columns per
# parameter, in the order `W1, b1, W2, b2` (row-major, as `jacobian.flatten` orders them).
#
# The columns of `W2[:, 1]` and `b2[1]`, out2's own weights, are exactly 0: out1 does not read
# them. The columns of `W1` and `b1` are not: out1 reads the shared hidden layer. (At three
# decimals a few small entries of the `W1` columns print as `0.` or `-0.`: small, not zero; the
# count below is of exact zeros.)

# %%
net, X, _ = SETUPS["seed"]
J1 = np.array([jacobian.flatten(net.gradient(X[i:i + 1], [1.0, 0.0])) for i in range(len(X))])
J2 = np.array([jacobian.flatten(net.gradient(X[i:i + 1], [0.0, 1.0])) for i in range(len(X))])
print(f"J1 {J1.shape}; equal to jacobian.dense_rows(net, X, keep=[0]) to "
      f"{np.max(np.abs(J1 - jacobian.dense_rows(net, X, keep=[0]))):.0e}")
start = 0
for key, value in net.params.items():
    show(f"J1, the columns of {key}", J1[:, start:start + value.size], precision=3)
    start += value.size
column = jacobian.unflatten(np.arange(net.n_params), net.params)     # parameter -> column of J1
out2s_own = [int(c) for c in (*column["W2"][:, 1], column["b2"][1])]
print(f"\ncolumns of W2[:, 1] and b2[1] (columns {out2s_own}) that are exactly 0 in every row: "
      f"{np.count_nonzero(np.all(J1[:, out2s_own] == 0.0, axis=0))} of {len(out2s_own)}")

# %% [markdown]
# ## 4. Why: the cross-output tangent kernel
#
# With $G$'s out1 column zero ($G_1 = 0$, and $G_2 = G[:, 1]$, the column of $-1$s),
# $g = J_2^\top G_2$, so out1 moves by
#
# $$\Delta \mathrm{out}_1 \approx -\eta\, J_1 g = -\eta\, K_{12}\, G_2, \qquad K_{12} = J_1 J_2^\top \;(n \times n),$$
#
# the cross-output tangent kernel: $K_{12}[a, b]$ says how much a step that pushes out2 on sample
# $b$ moves out1 on sample $a$. Splitting the columns of $J_1$ and $J_2$ by layer splits $K_{12}$
# into one share per layer. The output layer's share is exactly 0.0, in every entry: out1 and
# out2 have disjoint output weights, so their gradients there never overlap. All of the
# cross-talk flows through the shared hidden layers: all of it through the one hidden layer of
# the seed network, about two thirds through the first and one third through the second hidden
# layer of the visible one. `jacobian.tangent_kernel_by_layer` computes the same shares without
# ever building $J$, by the Gram trick of tutorial 05 (its §6).

# %%
shares = {}
for name, (net, X, _) in SETUPS.items():
    J = jacobian.dense_rows(net, X, keep=[0, 1])               # rows (i, k), sample by sample
    J1, J2 = J[0::2], J[1::2]
    sizes = [net.params[f"W{l}"].size + net.params[f"b{l}"].size for l in range(1, net.depth + 1)]
    cols = np.split(np.arange(net.n_params), np.cumsum(sizes)[:-1])     # layer l's columns
    shares[name] = K = {l: J1[:, c] @ J2[:, c].T for l, c in enumerate(cols, 1)}
    K12 = J1 @ J2.T
    fast = jacobian.tangent_kernel_by_layer(net, X, 0, 1)
    L = net.depth
    print(f"\n{name}: K12 is {K12.shape}; equal to tangent_kernel_by_layer to "
          f"{max(np.max(np.abs(K[l] - fast[l])) for l in K) / np.max(np.abs(K12)):.0e} (relative)")
    for l in range(1, L + 1):
        kind = "output layer" if l == L else "hidden layer"
        print(f"  layer {l} ({kind:12}) max |entry| = {np.max(np.abs(K[l])):.3e}   "
              f"part of the sum = {K[l].sum() / K12.sum():6.1%}")
    print(f"  output layer's share is exactly zero in every entry: {bool(np.all(K[L] == 0.0))}")
figure("tangent_kernel", lambda: [question.tangent_kernel(name) for name in SETUPS])

# %% [markdown]
# ## 5. The first-order prediction matches the drift at small lr
#
# So the predicted change of out1 is $-\eta\, K_{12} G_2$ (plus $-\eta\, K_{11} G_1$, zero
# here). Below, the actual change after one step against the prediction, for $\eta$ from 1e-5 to
# 0.1. The relative error, $\max|\text{actual} - \text{predicted}| / \max|\text{actual}|$,
# shrinks in proportion to $\eta$ while $\eta$ is small (what is left is the $O(\eta^2)$
# curvature term): on the visible setup it is about 3e-4 at $\eta$ = 1e-5 and about 0.4 at the
# visible setup's $\eta$ of 0.01 (one step there is already far from first order); at 0.1, ten
# times that, the prediction fails outright (a relative error above 1). On the seed setup the
# prediction is good to better than 1e-3 even at $\eta = 0.1$.

# %%
lrs = np.logspace(-5, -1, 5)
for name, (net, X, _) in SETUPS.items():
    K12 = sum(shares[name].values())
    G2 = np.full(len(X), G_QUESTION[1])
    g = net.gradient(X, G_QUESTION)
    print(f"\n{name}:\n  {'lr':>6} {'max |actual|':>14} {'relative error':>16}")
    for lr in lrs:
        actual = net.copy().step(g, lr)(X)[:, 0] - net(X)[:, 0]
        predicted = -lr * K12 @ G2
        error = np.max(np.abs(actual - predicted)) / np.max(np.abs(actual))
        print(f"  {lr:6.0e} {np.max(np.abs(actual)):14.3e} {error:16.2e}")

# %% [markdown]
# ## What to remember
#
# out1 moves because the parameters it reads are shared with out2: a step for out2 changes the
# hidden layers, and out1 reads them. The output layer contributes nothing to the cross-talk,
# so every fix is about the shared layers: freeze them (tutorial 04), or move them only in
# directions that leave out1 alone to first order (tutorial 05). A loss mask does neither
# (tutorial 03).
