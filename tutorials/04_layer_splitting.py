# %% [markdown]
# # Tutorial 04: layer splitting: update only what out1 does not read
#
# **The question** ([Stack Overflow 42182233](https://stackoverflow.com/questions/42182233)):
# an MLP has two outputs, and the gradient of the loss with respect to the outputs is
# $G = [0, -1]$: "raise out2, leave out1 alone". A gradient step raises out2, but out1 moves
# too. How do we take a step that leaves out1 unchanged?
#
# The accepted answer's first recipe: "introduce two sets of variables: one for the connections
# between the hidden layer and the first output block, one for the rest", then train only out2's
# connections. Its snippet passes `var_list=[W_h_to_out2, b_h_to_out2]`: of "the rest", only the
# output layer's part.
#
# There are three ways to write it down:
#
# - **freeze** every layer but the output layer: `fixes.freeze`, the `var_list = [W2, b2]` of
#   the answer's scripts. With this $G$, whose out1 column is 0, only out2's weights in that
#   layer move; §2 says when that is not enough.
# - give each output its own **head** on a shared trunk: `SplitHeads`. Training out2's head
#   alone is the snippet's `var_list`.
# - give each output a whole network of its own: **two towers**, `TwoTower`.
#
# Each holds out1 exactly: not to first order, but to the last bit, on every input, at every
# step size. Each has a price, which we measure.

# %%
import numpy as np

from mlp_ref import SplitHeads, TwoTower, data, fixes, losses
from mlp_ref.classroom import report
from mlp_ref.classroom.tutorial import figure, run_headless
from mlp_ref.measurements import question, splitting
from mlp_ref.setups import G_QUESTION, seed_setup, visible_setup

run_headless(globals())    # as a script: prints the text cells and runs the code; in Jupyter: nothing

PROBE = data.probe_inputs()                 # 256 unseen inputs from the same cube
LRS = (1e-3, 1e-2, 1e-1, 1.0, 10.0)         # from timid to absurd: the guarantee holds at all


def exactly_held(model, stepped, X):
    """out1 before and after, bit for bit, on the batch X and on the 256 unseen inputs."""
    return (np.array_equal(stepped(X)[:, 0], model(X)[:, 0])
            and np.array_equal(stepped(PROBE)[:, 0], model(PROBE)[:, 0]))


# %% [markdown]
# ## 1. Freeze: var_list = [W2, b2], the output layer
#
# `fixes.freeze(net, X, G)` keeps the gradient of the output layer only ($W_L, b_L$, the
# `var_list = [W2, b2]` of the answer's scripts) and zeroes the rest. We take one step at each
# of five step sizes $\eta$ from 0.001 to 10 on both setups and compare out1 before and after
# with `np.array_equal`, on the batch and on 256 unseen inputs: identical, bit for bit, every
# time. out2 still rises. The figure draws one step of each fix on the seed network: freezing
# moves only out2's weights.

# %%
for name, (net, X, _) in {"seed": seed_setup(), "visible": visible_setup()}.items():
    D = fixes.freeze(net, X, G_QUESTION)
    for lr in LRS:
        stepped = net.copy().step(D, lr)
        gain = np.mean(stepped(X)[:, 1] - net(X)[:, 1])
        print(f"{name:8} lr {lr:6g}: out1 identical on batch and unseen inputs: "
              f"{exactly_held(net, stepped, X)};  out2 gain {gain:9.3f}")
figure("network_fixes", lambda: question.weight_changes("seed"))

# %% [markdown]
# ## 2. Why it is exact - and when var_list alone is not enough
#
# $\mathrm{out}_1 = a_{L-1} W_L[:, 0] + b_L[0]$. Freezing keeps every hidden layer, so
# $a_{L-1}$ is the same on every input; and because $G$'s out1 column is 0, the gradient of
# $W_L[:, 0]$ and $b_L[0]$ is exactly 0, so $\theta - \eta \cdot 0$ leaves those bits alone too.
# Nothing out1 reads has changed. But that second half depends on $G$: with a real loss on both
# outputs (the MSE against the targets $Y$), out1's own weights get a gradient, and
# `var_list = [W2, b2]` moves out1. To hold out1 whatever $G$ is, freeze out1's own weights as
# well, as the answer's first recipe does (its `var_list` is out2's connections alone): that is
# what separate heads make explicit (§3).

# %%
net, X, Y = seed_setup()
_, G_mse = losses.mse(net(X), Y)
stepped = net.copy().step(fixes.freeze(net, X, G_mse, trainable=["W2", "b2"]), 0.1)
print(f"seed, G of the MSE, var_list = [W2, b2]: out1 identical: {exactly_held(net, stepped, X)};  "
      f"max |change of out1| = {np.max(np.abs(stepped(X)[:, 0] - net(X)[:, 0])):.3f}")

# %% [markdown]
# ## 3. Separate heads: SplitHeads
#
# SplitHeads.from_mlp(net) splits the output layer into one head per output on the shared
# trunk: the same function, bit for bit. Its parameter names say who reads what: trunk_keys
# (every output), head_keys(0) (out1 only), head_keys(1) (out2 only). Training head 1 alone
# holds out1 exactly even for the MSE's G, whose out1 column is not zero; training the trunk
# too moves out1 again.

# %%
heads = SplitHeads.from_mlp(net)
print(f"{heads!r}:\n  same outputs as the MLP on unseen inputs: "
      f"{np.array_equal(heads(PROBE), net(PROBE))}")
print("trunk:", heads.trunk_keys, "  head 0:", heads.head_keys(0), "  head 1:", heads.head_keys(1))
grads = heads.gradient(X, G_mse)
for keys, what in [(heads.head_keys(1), "head 1 only"), (heads.head_keys(1) + heads.trunk_keys,
                                                         "head 1 + trunk")]:
    D = {k: (g if k in keys else np.zeros_like(g)) for k, g in grads.items()}
    moved = heads.copy().step(D, 0.1)
    print(f"  train {what:15}: out1 identical: {exactly_held(heads, moved, X)!s:5}  "
          f"max |change of out1| = {np.max(np.abs(moved(X)[:, 0] - heads(X)[:, 0])):.2e}")

# %% [markdown]
# ## 4. Two towers: TwoTower
#
# TwoTower.from_mlp(net) gives each output a whole network of its own, each starting as a copy
# of the MLP's trunk: the same function up to rounding (a product with fewer columns may round
# in the last bit). Nothing is shared, so training every parameter of tower 1 (out2's) holds
# out1 exactly, and out2 can learn new features. The price: a second trunk, 42 parameters
# instead of 26 on the seed network, 706 instead of 370 on the visible one.

# %%
towers = TwoTower.from_mlp(net)
print(f"{towers!r}:\n  max |towers - MLP| on unseen inputs = "
      f"{np.max(np.abs(towers(PROBE) - net(PROBE))):.1e};  parameters {towers.n_params} "
      f"(the MLP: {net.n_params})")
grads = towers.gradient(X, G_mse)
D = {k: (g if k in towers.tower_keys(1) else np.zeros_like(g)) for k, g in grads.items()}
moved = towers.copy().step(D, 0.1)
print(f"  train all of tower 1: out1 identical: {exactly_held(towers, moved, X)};  "
      f"out2 MSE {losses.mse(towers(X)[:, 1:], Y[:, 1:])[0]:.4f} -> "
      f"{losses.mse(moved(X)[:, 1:], Y[:, 1:])[0]:.4f}")
print(f"  the visible setup as two towers: {TwoTower.from_mlp(visible_setup()[0]).n_params} "
      f"parameters (the MLP: {visible_setup()[0].n_params})")

# %% [markdown]
# ## 5. The price: what out2 can still learn
#
# `measurements.splitting.out2_capacity` teaches out2 a **new** function, $x_1 x_2 - x_3$, on 32
# inputs, for 200 steps, holding out1, starting from the visible network. The first cell below is
# its loop for freezing, written out: the same curve, bit for bit. Freezing and separate heads are
# the same thing here (the same 17 parameters move: out2's 16 weights and its bias, and the same
# MSE curve, bit for bit): out2 can only re-weight features the trunk learnt for both, and its
# error stays about 6 times that of unconstrained training.
#
# Two towers learn like unconstrained training (the same MSE curve, to round-off: tower 1 is the
# MLP without out1's column), at almost twice the parameters. Projection with restoring (tutorial
# 05) lands in between, holds out1 on the 32 inputs to round-off - and lets it drift on unseen
# ones.
#
# `python -m mlp_ref` prints this table too, after its own `--steps`: 100 by default, so its final
# MSEs are higher than these, after 200 (`python -m mlp_ref --steps 200` prints this table's).

# %%
net = visible_setup()[0].copy()
X_new, _ = data.seed_data(n=32, seed=5)                  # 32 fresh inputs
target = X_new[:, 0] * X_new[:, 1] - X_new[:, 2]         # out2's new function
curve = []
for _ in range(200):
    loss, G2 = losses.mse(net(X_new)[:, 1:], target[:, None])      # out2's MSE and dL/d out2
    curve.append(loss)
    G = np.hstack([np.zeros((32, 1)), G2])                          # out1's column: 0
    net.step(fixes.freeze(net, X_new, G, trainable=["W3", "b3"]), 0.05)
curve.append(losses.mse(net(X_new)[:, 1:], target[:, None])[0])
print(f"freeze, written out: out2 MSE {curve[0]:.4f} -> {curve[-1]:.4f}")

# %%
capacity = splitting.out2_capacity()
print(f"the same curve as splitting.out2_capacity's, bit for bit: "
      f"{np.array_equal(curve, capacity['freeze']['mse'])}\n")
print(report.format_capacity(capacity))

# %% [markdown]
# ## What to remember
#
# Layer splitting is the one family of fixes whose guarantee is exact: out1 is unchanged, bit
# for bit, on every input, at every step size, because nothing it reads changes. The answer's
# first recipe is one form of it, its `var_list` out2's connections alone (separate heads);
# `var_list = [W2, b2]` holds out1 only while $G$'s out1 column is 0. The cost is capacity: a
# frozen trunk cannot learn for out2, and two towers share nothing.
#
# Exercise: `tutorials/exercises/03_freeze.py` (freeze, the `var_list` recipe, and a head of
# out2's own).
