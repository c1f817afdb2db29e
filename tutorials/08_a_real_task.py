# %% [markdown]
# # Tutorial 08: the fixes on a real task: keep digits 0-4 while learning 5-9
#
# **The question** ([Stack Overflow 42182233](https://stackoverflow.com/questions/42182233)):
# an MLP has two outputs, and the gradient of the loss with respect to the outputs is
# $G = [0, -1]$: "raise out2, leave out1 alone". A gradient step raises out2, but out1 moves
# too. How do we take a step that leaves out1 unchanged?
#
# Everything so far happened on 8 toy samples. Where these fixes are used for real is continual
# learning and model editing: hold what a network already gets right on *old* data while it
# trains on *new* data, so the inputs on which the kept outputs are held (`keep_X`, a memory of
# old images) are not the batch $X$. We train a 64-64-64-10 tanh network on the handwritten
# digits 0-4, then on 5-9, holding outputs 0-4 with every fix, and read what each keeps, what it
# costs the new digits, and what it costs in time and memory.

# %%
import numpy as np

from mlp_ref import data
from mlp_ref.classroom import report
from mlp_ref.classroom.tutorial import animation, figure, run_headless
from mlp_ref.measurements import continual
from mlp_ref.measurements.continual import find

run_headless(globals())    # as a script: prints the text cells and runs the code; in Jupyter: nothing

result = continual.run()   # the first task, then every fix at every memory size: a few seconds


def pct(x):
    return f"{100 * x:.0f}%"


# %% [markdown]
# ## 1. The data and the first task
#
# `data.digits()` splits the 1,797 handwritten digits of the test set of UCI's optdigits
# (`optdigits.tes`: 8 × 8 pixels, each 0 to 16, shipped with the package under CC BY 4.0) into a
# training and a test set, a third of each digit for testing. Inputs are centred by the mean old
# training image and divided by 16. The network learns digits 0-4 from one-hot targets over all
# ten outputs with the package's own MSE: 60 full-batch steps, lr 2.
#
# Accuracy is read class-incrementally, the argmax over all ten outputs: that is how a network
# that must tell every digit apart is used, and where forgetting shows. After the first task, 98%
# of the old test digits are right. (The cell below reads the images whole,
# `data.digits_arrays()`; the run splits them with `data.digits()`.)

# %%
images, labels = data.digits_arrays()
print(f"images {images.shape}, pixels {images.min()}..{images.max()}, "
      f"images per digit {np.bincount(labels).tolist()}")
print(f"training images: {result['n_train']['old']} old, {result['n_train']['new']} new;  "
      f"test images: {result['n_test']['old']} old, {result['n_test']['new']} new")
print(f"network {result['sizes']}, {result['n_params']} parameters;\n"
      f"after the first task {pct(result['first'])} of the old test digits are right")

# %% [markdown]
# ## 2. Every fix, 20 steps on digits 5-9
#
# The second task trains on the ~600 images of 5-9 the same way, and its targets say 0 for outputs
# 0-4 on every new image: a plain step pushes outputs 0-4 down, on old images too. Each fix holds
# outputs 0-4; those with a memory hold them on $m$ old *training* images. The drift columns are
# measured on the 300 old *test* images, none of which is in the memory (but for "on memory": the
# legend under the table says what each column holds).
#
# Projection and restoring run in the fast tier (`fast.project`, `fast.restore`: the reference's
# directions to 1e-12, sooner), the other fixes in the reference: the times and peaks compare
# these implementations (the reference's gradient keeps every stage), not the rules. The times are
# this run's, and vary from run to run. The figure: on the left, old-task against new-task test
# accuracy, one point per fix and memory size; on the right, the mean drift of outputs 0-4 on the
# old test images against $m$.

# %%
print(report.format_continual(result))
figure("continual_tradeoff", result)

# %% [markdown]
# ## 3. Naive: forgetting within a few steps
#
# A plain step learns the new digits (94% right after 20 steps) and forgets the old: 3% of
# them are still right. Outputs 0-4 moved by 0.22 on average, up to 0.90: the shared layers
# moved, and every output reads them. The figure draws the old-task (left) and new-task (right)
# test accuracy at every step, for naive and a few of the fixes.

# %%
naive, freeze, towers = (find(result, f) for f in ("naive", "freeze", "towers"))
print(f"naive: new {pct(naive['new_acc'][-1])}, old {pct(naive['old_acc'][-1])};  "
      f"|change of outputs 0-4| mean {naive['drift_mean']:.2f}, max {naive['drift_max']:.2f}")
print("old accuracy, step by step:", np.round(naive["old_acc"], 2))
figure("continual_steps", result)

# %% [markdown]
# The run again, step by step: the old digits' accuracy (left) and the new digits' (right),
# for each fix, as the 20 steps go.

# %%
animation("continual_steps")

# %% [markdown]
# ## 4. Separate heads and two towers: exactly held, and still forgetting
#
# `freeze` trains only the head of outputs 5-9 (`SplitHeads`, heads [0-4] and [5-9]); two
# towers give 5-9 a whole network of their own (`TwoTower`). Outputs 0-4 are unchanged bit for
# bit on every old test image (max change 0.0 for both), yet the old accuracy falls, to 93% and
# 88%: nothing holds outputs 5-9 *down* on old images, and wherever one of them rises above the
# right old output, the argmax is wrong (6% and 12% of the old test images end up read as a new
# digit). Holding the old outputs is not holding the old task. What each gives up: the frozen
# trunk leaves the new head only features learnt for 0-4 (62% of the new digits right after 20
# steps); a tower learns new features (85%), with a second trunk, sharing nothing.

# %%
for run in (freeze, towers):
    print(f"{run['fix']:7}: max |change of outputs 0-4| {run['drift_max']};  "
          f"old {pct(run['old_acc'][-1])}, read as a new digit {pct(run['old_as_new'])};  "
          f"new {pct(run['new_acc'][-1])}")

# %% [markdown]
# ## 5. Projection with a memory: held on the memory, and off it as $m$ grows
#
# Projection keeps every parameter trainable and removes from each step what moves outputs 0-4 on
# the memory, to first order: $D = g - J^\top (J J^\top)^{+} J g$, $J$ the Jacobian of outputs 0-4
# on the $m$ memory images ($5m$ rows; outputs are named by their digit here, 0 to 9, as out1 was
# column 0 until now). On the memory the outputs drift only by the $O(\eta^2)$ terms, accumulated
# (7e-03 at $m = 8$), and restoring after each step brings that to round-off (below 1e-12).
#
# Off the memory is another matter: with $m = 8$ the old test images drift by 0.15 on average, a
# third less than naive's 0.22 (and at most 0.93, more than naive's 0.90), and 48% stay right;
# with $m = 32$, 0.058 and 84%; with $m = 128$, 0.0026 and 89%, at 85% on the new digits. The
# constraints hold where they are imposed; off the memory they hold as well as the memory covers
# the old digits. Restoring changes almost nothing off the memory (the same drift, to 1%).

# %%
for m in result["memory_sizes"]:
    p = find(result, "project", m)
    print(f"project, m = {m:3d}: mean |drift| off the memory {p['drift_mean']:.2g}, max on it "
          f"{p['memory_drift']:.0e};  old {pct(p['old_acc'][-1])}, new {pct(p['new_acc'][-1])}")
for m in continual.RESTORE_SIZES:
    r = find(result, "project+restore", m)
    print(f"+ restore, m = {m:3d}: mean |drift| off the memory {r['drift_mean']:.2g}, max on it "
          f"{r['memory_drift']:.0e}")

# %% [markdown]
# ## 6. Span projection: when the memory spans a layer, the layer freezes
#
# `span_project` (GPM) projects each layer's update off the span of that layer's inputs on the
# memory, $[a_{l-1}, 1]$: outputs 0-4 on the memory move only by round-off, at any $\eta$ (the
# output layer's columns of 5-9 are left free, and those outputs move). But once the memory's
# inputs to a layer span all of its dimensions, nothing is left to train there.
#
# With $m = 128$ the ranks are 54, 65, 65 of 65: layers 2 and 3 are spanned (layer 1 nearly: the
# 128 memory images leave 11 pixels constant, and it still trains a little), and the run's
# accuracies are freezing's, step for step (the same test accuracies at all 21 points). Smaller
# memories leave room to learn, and drift off the memory accordingly: with $m = 32$, 89% of the
# old digits and 81% of the new.

# %%
for m in result["memory_sizes"]:
    s = find(result, "span", m)
    print(f"span, m = {m:3d}: ranks of [a_(l-1), 1] on the memory {result['input_ranks'][m]};\n"
          f"{'':16}old {pct(s['old_acc'][-1])}, new {pct(s['new_acc'][-1])}, "
          f"mean |drift| {s['drift_mean']:.1e}, on the memory {s['memory_drift']:.0e}")
span = find(result, "span", max(result["memory_sizes"]))
print("the same accuracies as freeze at every step:",
      np.array_equal(span["old_acc"], freeze["old_acc"]) and
      np.array_equal(span["new_acc"], freeze["new_acc"]))

# %% [markdown]
# ## 7. The penalty, at a weight that stays stable
#
# The penalty pulls outputs 0-4 back on the memory with
# $\frac{\lambda}{2}\lVert O - \mathrm{ref}\rVert^2$. To first order, gradient descent on it is
# stable only while $\eta \lambda \lambda_{max}(J J^\top) < 2$ (`fixes.penalty_limit` gives that
# bound, here at the start of the second task: the limit moves as the network trains); we take
# $\eta \lambda \lambda_{max} = 1$. $\lambda_{max}$ grows with the memory (539 at $m = 128$), so
# the stable $\lambda$ shrinks, and the pull stays weak: at most 50% of the old
# digits stay right. A penalty is a restoring force, never a guarantee.

# %%
for m in result["memory_sizes"]:
    pen = find(result, "penalty", m)
    print(f"penalty, m = {m:3d}: lambda_max {pen['lam_max']:6.0f}, lambda {pen['lam']:.1e};  "
          f"old {pct(pen['old_acc'][-1])}, new {pct(pen['new_acc'][-1])}")

# %% [markdown]
# ## 8. What holding $5m$ constraints costs
#
# Projection solves an $n \times n$ system, $n = 5m$: the Gram $J J^\top$ holds $8 n^2$ bytes (50
# MiB at $m = 512$), and the reference's rank-revealing eigendecomposition takes $n^3$ time
# (slower than the Gram's $n^2$ products from $n = 160$ on, and more than half of the reference's
# time from $n = 640$ on); the fast tier factorises the Gram once by Cholesky, shifted so that the
# factorisation's success proves full rank (no eigenvalue needed), also $n^3$ but with a smaller
# constant.
#
# The cost sweep shipped with the package (`python -m mlp_ref.measurements.continual`, on this
# project's machine) times one projected direction from $m = 8$ to 512. What remains in the fast
# tier is that factorisation and the Gram's $n^2$ products (Gram and Cholesky below: more than
# half of its time from $m = 64$ on): the price of holding every constraint exactly, paid at every
# step. The figure draws the time and the peak memory against $n$, log-log, with the Gram's
# $8 n^2$ bytes and an $n^3$ line.

# %%
cost = continual.constraint_cost_data(continual.load_cost())
print(f"{'':11} | {'seconds, reference':^17} | {'seconds, fast tier':^26} | {'MiB':^17}")
print(f"{'m':>4} {'n':>6} | {'total':>8} {'eigh':>8} | {'total':>8} {'Gram':>8} {'Cholesky':>8} | "
      f"{'ref. peak':>9} {'Gram':>7}")
for i, m in enumerate(cost["m"].astype(int)):
    print(f"{m:4d} {int(cost['constraints'][i]):6d} | {cost['reference'][i]:8.3f} {cost['eigh'][i]:8.3f} | "
          f"{cost['fast'][i]:8.3f} {cost['gram'][i]:8.3f} {cost['cholesky'][i]:8.3f} | "
          f"{cost['peak_reference'][i] / 2**20:9.1f} {cost['gram_bytes'][i] / 2**20:7.2f}")
figure("continual_cost", cost)

# %% [markdown]
# ## What to remember
#
# On real data the fixes differ more than on the toy. Separate heads and towers hold the old
# outputs exactly and still lose old digits, because the new outputs are free to rise on them.
# Projection holds exactly what it is told to hold, the memory, and off it only as well as the
# memory covers the old task: more memory, less drift, at $n^2$ memory and $n^3$ time. Span
# projection holds harder and freezes whole layers once the memory spans them. The penalty's
# stable weight is too small to hold much. The figures above are also in `figures/`
# (`continual_tradeoff.png`, `continual_steps.png`, `continual_cost.png`:
# `python -m mlp_ref figures`).
