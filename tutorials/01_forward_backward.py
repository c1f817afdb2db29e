# %% [markdown]
# # Tutorial 01: forward and backward, stage by stage
#
# **The question** ([Stack Overflow 42182233](https://stackoverflow.com/questions/42182233)):
# an MLP has two outputs, and the gradient of the loss with respect to the outputs is
# $G = [0, -1]$: "raise out2, leave out1 alone". A gradient step raises out2, but out1 moves
# too. How do we take a step that leaves out1 unchanged?
#
# This tutorial runs the accepted answer's own network and looks at every stage of backprop, to
# see where out1's movement comes from. out1 and out2 are the network's output columns 0 and 1
# (Python counts from 0: `keep=[0]` in later tutorials means "hold out1").
#
# Run it as a script, `python tutorials/01_forward_backward.py` (add `--step` to pause at each
# section), or open it in Jupyter as a notebook (`jupytext --to notebook` or the jupytext
# extension) and run it cell by cell.

# %%
import numpy as np

import mlp_ref as mr
from mlp_ref.classroom.tutorial import animation, figure, run_headless, show, show_params, show_stages
from mlp_ref.measurements import question
from mlp_ref.setups import G_QUESTION, seed_setup

run_headless(globals())    # as a script: prints the text cells and runs the code; in Jupyter: nothing
LR = 0.1                   # the answer's GradientDescentOptimizer(0.1)

# %% [markdown]
# ## 1. The network and the data of the answer
#
# A 3-4-2 network: 3 inputs, one hidden layer of 4 sigmoid units, 2 identity outputs. Weights
# and biases are drawn from $\mathcal{N}(0, 0.1^2)$ like the answer's
# `tf.random_normal(stddev=0.1)`; the data are 8 samples $x$ uniform in $[0, 1)^3$. Rows are
# samples and $z = a W + b$ (`z = a @ W + b`), exactly as in the answer's TensorFlow code, so
# every line below can be read against it. Here are all 26 numbers of the network: with them,
# every stage below can be checked by hand.

# %%
net, X, Y = seed_setup()
print(net)
print("parameters:", {k: v.shape for k, v in net.params.items()}, f"-> P = {net.n_params} numbers")
show_params(net)
show("X", X)

# %% [markdown]
# ## 2. Forward: the network keeps every stage
#
# `net.forward(X)` returns a record of every pre-activation $z_l = a_{l-1} W_l + b_l$ and
# activation $a_l = f_l(z_l)$, with $a_0 = X$. Nothing is hidden inside the network object:
# backward will read this record. Check one entry by hand: `z1[0, 0]` is
# `X[0] @ W1[:, 0] + b1[0]`.

# %%
record = net.forward(X)
show_stages(record.stages, net)
print(f"\nby hand: X[0] @ W1[:, 0] + b1[0] = {X[0] @ net.params['W1'][:, 0] + net.params['b1'][0]:.4f}"
      f"   z1[0, 0] = {record.z[1][0, 0]:.4f}")

# %% [markdown]
# ## 3. Backward with $G = [0, -1]$
#
# `net.backward(record, G)` runs the chain rule from the output back to the input, one line per
# line of the forward pass, in reverse:
#
# $$dz_2 = G, \quad dW_2 = a_1^\top dz_2, \quad db_2 = \textstyle\sum_i dz_{2,i}, \quad
#   da_1 = dz_2 W_2^\top, \quad dz_1 = da_1 \odot \sigma'(z_1), \quad dW_1 = X^\top dz_1, \quad
#   db_1 = \textstyle\sum_i dz_{1,i}$$
#
# (and $da_0 = dz_1 W_1^\top$, $\partial L / \partial X$, which no parameter needs).
#
# $G = \partial L / \partial O$ for every row: 0 for out1 (leave it alone), $-1$ for out2 (a step
# against the gradient raises it). No loss needs to be written down: $G$ itself defines one,
# $L = \sum_{ik} G_{ik} O_{ik}$, whose gradient with respect to $O$ is $G$ (the scalar the finite
# differences of §8 differentiate). The parameter gradients are
# $g = \sum_i \sum_k G_{ik} \, \partial O_{ik} / \partial \theta$ (sample $i$, output $k$). The
# figure shows every stage as a heatmap.

# %%
back = net.backward(record, G_QUESTION)
show_stages(back.stages, net)
figure("backprop_stages", question.backprop_stages(net, X, G_QUESTION))

# %% [markdown]
# The same stages, one at a time, from the output down: out1's column of zeros runs through
# `dout`, `dz2`, `dW2` and `db2`, and then the shared layer lights up in every entry.

# %%
animation("backprop")

# %% [markdown]
# ## 4. Why the first column of dW2 is exactly zero
#
# $dz_2 = G$ because the output layer is the identity, and $dW_2 = a_1^\top dz_2$: column $k$
# of $dW_2$ only ever sees column $k$ of $dz_2$. $G$'s first column is 0 on every row, so out1's
# own weights `W2[:, 0]` and its bias `b2[0]` get a gradient of exactly zero.

# %%
dW2, db2 = back.grads["W2"], back.grads["b2"]
show("dW2[:, 0]", dW2[:, 0], "a1.T @ dz2[:, 0]")
show("db2[0]", db2[0], "dz2[:, 0].sum()")
assert np.all(dW2[:, 0] == 0.0) and db2[0] == 0.0

# %% [markdown]
# ## 5. ... and why dW1 is not
#
# $da_1 = dz_2 W_2^\top$: with $dz_2 = [0, -1]$ on every row, every row of $da_1$ is
# `-W2[:, 1]`, out2's weights into the hidden layer (compare with `W2` printed in section 1).
# That is not zero, so $dz_1 = da_1 \odot \sigma'(z_1)$, $dW_1$ and $db_1$ are not zero either:
# not one of their entries is. $W_1$ and $b_1$ are **shared** by both outputs, and
# $\mathrm{out}_1 = a_1 W_2[:, 0] + b_2[0]$ reads the same hidden layer $a_1$ that the step is
# about to change. This is the heart of the question.

# %%
da1 = back.stages["da1"]
show("-W2[:, 1]", -net.params["W2"][:, 1])
print("every row of da1 equals -W2[:, 1]:", bool(np.all(da1 == -net.params["W2"][:, 1])))
print("entries of dW1 that are zero:", np.count_nonzero(back.grads["W1"] == 0.0), "of",
      back.grads["W1"].size, "  entries of db1 that are zero:",
      np.count_nonzero(back.grads["b1"] == 0.0), "of", back.grads["b1"].size)

# %% [markdown]
# ## 6. The step: out2 rises, and out1 moves
#
# One plain gradient step $\theta \leftarrow \theta - \eta\, g$ with $\eta = 0.1$. `W2[:, 0]`
# and `b2[0]` do not change (their gradient is zero), so out1's change is **exactly** the change
# of the hidden layer read through out1's unchanged weights:
#
# $$\Delta \mathrm{out}_1 = (a_1^{\mathrm{after}} - a_1^{\mathrm{before}})\, W_2[:, 0].$$
#
# Here out2 rises by about 1.5 on every sample, while out1 moves by between 1e-4 and 2e-4:
# about $10^4$ times less (the weights are small at this initialisation), but not zero.

# %%
stepped = net.copy().step(back.grads, LR)
after = stepped.forward(X)
d_out = after.output - record.output
show("delta out2", d_out[:, 1], "out2_after - out2_before")
show("delta out1", d_out[:, 0], "out1_after - out1_before", sci=True)
d_hidden = (after.a[1] - record.a[1]) @ net.params["W2"][:, 0]
print("\nmax |delta out1 - (a1_after - a1_before) @ W2[:, 0]| =",
      f"{np.max(np.abs(d_out[:, 0] - d_hidden)):.1e}   (round-off)")
print(f"delta out2 from {d_out[:, 1].min():.3f} to {d_out[:, 1].max():.3f};"
      f"  |delta out1| from {np.abs(d_out[:, 0]).min():.2e} to {np.abs(d_out[:, 0]).max():.2e}")
figure("seed_problem", question.naive_step_effect(net, X, G_QUESTION, lr=LR))     # the same step

# %% [markdown]
# ## 7. Drift is proportional to the step size
#
# Halve the learning rate and out1's drift halves too (to first order): it is $O(\eta)$. A
# smaller step moves out1 less, never not at all. Later tutorials measure this over many step
# sizes and compare every fix.

# %%
half = net.copy().step(back.grads, LR / 2)(X) - record.output
ratio = np.abs(d_out[:, 0]) / np.abs(half[:, 0])
print(f"|delta out1 at lr {LR}| / |delta out1 at lr {LR / 2}|, sample by sample:")
print("  ", np.round(ratio, 3))

# %% [markdown]
# ## 8. Check every stage against finite differences
#
# `mlp_ref.gradcheck.check` perturbs every entry of every stage by $\pm h$, runs the rest of the
# network forward and compares the centred difference of $L = \sum_{ik} G_{ik} O_{ik}$ with
# backward's value. Every stage passes
# the project's tolerance of 1e-7 on the relative error; in float64 the worst is below 1e-10
# here. Run it on any network you build: it names the stage and the entry that fails. (The
# exercises' grader, `python -m mlp_ref check`, does the same for your own code.)

# %%
report = mr.gradcheck.check(net, X, G_QUESTION)
for s in report.stages:              # each stage at its worst entry: backward's value, the difference's
    print(f"{s.stage:>4} {str(s.shape):>7}  rel_error {s.rel_error:8.2e}   "
          f"ours {s.ours:+.10e}   numerical {s.numerical:+.10e}")
print(str(report).splitlines()[-1])     # the verdict

# %% [markdown]
# ## What to remember
#
# With $G = [0, -1]$, out1's own weights get no gradient, so masking out1 or excluding
# `W2[:, 0]` changes nothing: the gradient already leaves them alone. out1 moves because the
# hidden layer it reads is shared and does get a gradient. To hold out1 fixed, a fix must
# control the change of the shared parameters: freeze them (the answer's `var_list = [W2, b2]`),
# or project the step so that out1's first-order change is zero.
#
# Exercise: `tutorials/exercises/01_layer_backward.py` (the backward stages of one layer).
