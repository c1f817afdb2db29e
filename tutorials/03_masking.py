# %% [markdown]
# # Tutorial 03: masking the loss: what the accepted answer recommends, and what it really does
#
# **The question** ([Stack Overflow 42182233](https://stackoverflow.com/questions/42182233)):
# an MLP has two outputs, and the gradient of the loss with respect to the outputs is
# $G = [0, -1]$: "raise out2, leave out1 alone". A gradient step raises out2, but out1 moves
# too. How do we take a step that leaves out1 unchanged?
#
# The accepted answer gives two recipes in TensorFlow 1: train only the connections from the
# hidden layer to the second output block (`var_list`; its script passes all of `W2, b2`, out1's
# column included), and multiply the output by a 0/1 mask before the loss,
# which it recommends. This tutorial takes the mask apart: its gradient, the answer's script
# replayed line for line in NumPy, and the one case the script never ran. The mask
# `[0, 1]` hides output column 0 (out1) from the loss and keeps column 1 (out2).

# %%
import numpy as np

from mlp_ref import fixes, losses
from mlp_ref.classroom import report
from mlp_ref.classroom.tutorial import figure, run_headless, show
from mlp_ref.measurements import answer_replay, question
from mlp_ref.measurements.rules import MASK  # [0, 1]: hide out1 from the loss, keep out2
from mlp_ref.setups import G_QUESTION, LR, seed_setup, visible_setup

run_headless(globals())    # as a script: prints the text cells and runs the code; in Jupyter: nothing
net, X, Y = seed_setup()
out = net(X)

# %% [markdown]
# ## 1. The answer's masked loss and its gradient
#
# The answer's `loss2` is the mean of $(m \odot O - Y)^2$ over all $nK$ entries, with the mask
# $m = [0, 1]$ on every row (`losses.masked_mse`). Its gradient with respect to the output is
#
# $$G = \frac{2}{nK}\, m \odot (m \odot O - Y):$$
#
# wherever the mask is 0, that column of $G$ is exactly zero, and out1 contributes nothing to
# the parameter gradient. The other column is the plain MSE's, bit for bit. (A printed `-0.` is
# IEEE's negative zero, 0 times a negative number: it equals 0.)

# %%
loss, G_mse = losses.mse(out, Y)
loss2, G_masked = losses.masked_mse(out, Y, MASK)
show("G of the MSE, dL/dout", G_mse)
show("G of the masked MSE (loss2)", G_masked)
print(f"\nout1's column of G_masked is all zero: {bool(np.all(G_masked[:, 0] == 0.0))};  "
      f"out2's column equals the MSE's bit for bit: {np.array_equal(G_masked[:, 1], G_mse[:, 1])}")

# %% [markdown]
# ## 2. In the question the mask changes nothing
#
# The question's $G = [0, -1]$ has a first column that is **already** zero. Multiplying it by
# the mask $[0, 1]$ gives the same $G$, so the masked direction (`fixes.masked`) is the naive
# one, bit for bit, on every parameter, on both setups, and out1 drifts exactly as much. The
# mask only changes a step when $G$'s first column is not zero, as with the MSE of section 1:
# then it removes out1's own pull, but still not the cross-talk through the shared layers. The
# figure hatches what each fix zeroes: the mask only entries that are already 0 here.

# %%
for name, (n_net, n_X, _) in {"seed": (net, X, Y), "visible": visible_setup()}.items():
    naive = fixes.naive(n_net, n_X, G_QUESTION)
    masked = fixes.masked(n_net, n_X, G_QUESTION, MASK)
    same = all(np.array_equal(naive[k], masked[k]) for k in naive)
    lr = LR[name]
    drift = np.max(np.abs(n_net.copy().step(masked, lr)(n_X)[:, 0] - n_net(n_X)[:, 0]))
    print(f"{name:8} G = [0, -1]:  masked == naive on every parameter: {same}\n"
          f"{'':8} max |change of out1| after one masked step (lr {lr}) = {drift:.2e}")
naive_mse, masked_mse = fixes.naive(net, X, G_mse), fixes.masked(net, X, G_mse, MASK)
print(f"seed     G of the MSE:  masked == naive on every parameter: "
      f"{all(np.array_equal(naive_mse[k], masked_mse[k]) for k in naive_mse)}")
stages = question.backprop_stages(net, X, G_QUESTION)     # with what the mask, var_list zero
figure("backprop_stages", stages, zeroed=stages["zeroed"])

# %% [markdown]
# ## 3. The answer's script, replayed
#
# `measurements.answer_replay.replay_answer` runs the answer's TensorFlow script in NumPy: the
# seed setup, then its three train ops one after another, each printing `hidden`, `out`, `loss`
# and `loss2` as the script does, plus the change of out1 each op made, and one op the answer
# never ran: the masked loss with **all** variables. Each op is one step of
# `net.step(net.gradient(X, G), 0.1)`, with $G$ the gradient of its loss and the parameters
# outside its `var_list` zeroed.

# %%
rows = answer_replay.replay_answer()
print(report.format_replay(rows, precision=3, verdict=False))   # the verdict: §4

# %% [markdown]
# ## 4. The verdict
#
# `train_op2` minimises the masked loss with `var_list = [W2, b2]`, and out1 does not move at
# all, bit for bit. But look at why: `var_list` freezes the shared hidden layer $W_1, b_1$
# (`hidden` is identical before and after), and with out1's column of $G$ zero, out1's own
# weights `W2[:, 0]`, `b2[0]` get no gradient either. The same masked loss on all variables
# moves out1 (by about 2e-5 here, on the seed network with its tiny weights): the mask alone
# does not hold out1. Nor does `var_list` alone: `train_op12`, the same `var_list` on the
# unmasked loss, moves out1 too. It takes both: `var_list` for the shared layer, and a zero
# out1 column of $G$ (here the mask's doing) for out1's own weights.

# %%
by_op = {r["op"]: r for r in rows}
for op in ("train_op2", "mask, all variables"):
    r = by_op[op]
    print(f"{op:20} hidden layer unchanged: "
          f"{np.array_equal(r['hidden'], by_op['initial']['hidden'])!s:5}   "
          f"max |change of out1| = {np.max(np.abs(r['d_out1'])):.2e}")

# %% [markdown]
# ## 5. What a mask is for: missing labels
#
# A mask is the right tool when a label is missing: here out1's label is unknown for samples 2
# and 5 (rows 2 and 5 of $X$: samples are counted from 0, as Python counts them). Whatever we
# write in those two places of $Y$ (0, or a made-up 1000), the masked gradient is the same, bit
# for bit: the loss changes by a constant, the gradient does not see the hole at all. Without
# the mask the made-up 1000 would dominate the gradient.
#
# What the mask does not do is hold out1 still: a step still changes out1 on samples 2 and 5
# (by about 0.2 here), because it learns out1 from the other six samples, through out1's own
# weights and the shared layers. A mask decides what the loss sees, not what the network
# changes.

# %%
missing = np.ones_like(Y)
missing[[2, 5], 0] = 0.0                         # samples 2 and 5: out1's label unknown
Y_zero, Y_junk = Y.copy(), Y.copy()
Y_zero[[2, 5], 0], Y_junk[[2, 5], 0] = 0.0, 1000.0
(l_zero, G_zero), (l_junk, G_junk) = (losses.masked_mse(out, y, missing) for y in (Y_zero, Y_junk))
g_zero, g_junk = net.gradient(X, G_zero), net.gradient(X, G_junk)
g_nomask = net.gradient(X, losses.mse(out, Y_junk)[1])
print(f"masked gradient with the holes filled by 0 == filled by 1000, every parameter: "
      f"{all(np.array_equal(g_zero[k], g_junk[k]) for k in g_zero)}")
print(f"masked loss: {l_zero:.4f} (holes = 0) vs {l_junk:.4f} (holes = 1000): a constant apart")
norm = lambda g: np.sqrt(sum(np.sum(v ** 2) for v in g.values()))
print(f"gradient norm: masked {norm(g_zero):.3f};  unmasked with the made-up 1000s "
      f"{norm(g_nomask):.1f}")
stepped = net.copy().step(g_zero, 0.1)
change = np.abs(stepped(X)[[2, 5], 0] - out[[2, 5], 0])
print(f"after one masked step (lr 0.1), |change of out1| on samples 2 and 5: "
      f"{change[0]:.3f}, {change[1]:.3f}")

# %% [markdown]
# ## What to remember
#
# A mask zeroes columns of $G$. In the question $G$'s out1 column is already zero, so the mask
# changes nothing, and out1 drifts through the shared layers exactly as before. The answer's
# masked script keeps out1 fixed because its `var_list` also freezes the shared layer, while the
# mask zeroes out1's column of the script's $G$: freezing the shared layer is layer splitting
# (tutorial 04), not masking. Use a mask for missing labels; use
# layer splitting or projection (tutorial 05) for invariance.
#
# Exercise: `tutorials/exercises/02_masked_loss.py` (the masked loss and its $G$).
