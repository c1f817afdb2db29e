# %% [markdown]
# # Tutorial 09: the field's tools at the field's scale: EWC, A-GEM, GPM beside the exact projection
#
# **The question** ([Stack Overflow 42182233](https://stackoverflow.com/questions/42182233)):
# an MLP has two outputs, and the gradient of the loss with respect to the outputs is
# $G = [0, -1]$: "raise out2, leave out1 alone". A gradient step raises out2, but out1 moves
# too. How do we take a step that leaves out1 unchanged?
#
# Tutorial 08 asked it of a real task: hold outputs 0-4 on old digits while learning new ones.
# Continual learning asks it of every task it has learnt, and answers with its own rules, read
# here beside ours: A-GEM (a constraint on the memory's *loss*), EWC (a penalty weighted by the
# Fisher), GPM (a basis of every layer's *inputs*) and OGD, which is our projection on a memory.
# We run them on the field's protocol, permuted digits, with its metrics, and then take the two
# holding routes, the exact one (a Gram of every constraint) and the basis one (a small matrix
# per layer), from 40 to 80,000 constraints.

# %%
import numpy as np

import mlp_ref as mr
from mlp_ref import baselines, fixes
from mlp_ref.classroom.tutorial import figure, run_headless
from mlp_ref.measurements import permuted, scale

run_headless(globals())    # as a script: prints the text cells and runs the code; in Jupyter: nothing

result = permuted.load()   # the table over 5 seeds, as `continual-table --seeds 5` measured it (section 2)
ladder = scale.load()      # the ladder, as `python -m mlp_ref.measurements.scale --json` measured it
M = result["methods"]

# %% [markdown]
# ## 1. The rules, as their formulas
#
# Each rule returns a direction $D$, as every fix of this project does (a step is
# $\theta \leftarrow \theta - \eta D$), from the batch's gradient $g$ and something kept from
# the old tasks:
#
# * **A-GEM** (Chaudhry et al. 2019) keeps the memory's gradient $r$ and one inequality:
#   $D = g - \frac{\min(0,\, g \cdot r)}{r \cdot r} r$. When $g$ does not point against $r$ it is
#   $g$ itself; else only the component along $r$ goes, so $D \cdot r = 0$.
#
# * **EWC** (Kirkpatrick et al. 2017) keeps the old parameters and the diagonal Fisher $F$, the
#   mean of the squared per-row gradients of the loss on old data, and pulls:
#   $D = g + \lambda F \odot (\theta - \theta^*)$.
#
# * **GPM** (Saha et al. 2021) keeps, for each layer, an orthonormal basis $U_l$ of the inputs
#   $[a_{l-1}, 1]$ that layer saw on old data, and removes them from every column of the layer's
#   update: $[dW_l; db_l] \leftarrow (I - U_l U_l^\top)[dW_l; db_l]$. An old row $x$ in the span
#   has $x (I - U_l U_l^\top) = 0$: its $z_l$ does not move, in exact arithmetic at any $\eta$,
#   and so nothing above it. The basis is built from $\sum_i x_i x_i^\top$ (here as its
#   triangular factor, batch by batch), a $d \times d$ matrix whatever the number of rows, and
#   kept to an energy fraction (the threshold) or cut at an eigenvalue (Adam-NSCL, AlphaEdit:
#   `gpm_bases(..., cut=...)`).
#
# On a small network, with a memory whose gradient conflicts with the batch's: A-GEM's
# correction leaves $D \cdot r$ at round-off (where $r \cdot r$ would underflow, however small the
# memory's gradient, the dots are taken again of $g$ and $r$ scaled by powers of two).
#
# A step along GPM at threshold 1.0 moves the memory's outputs by round-off *amplified by the
# stepped weights*, not by nothing: each layer's round-off (the rows lie in the span, and the
# step is orthogonal to it, to about $d\,\epsilon$) reaches the output through every layer above,
# whose weights the step has made large. With three layers it grows like $\eta^3 \epsilon$:
# round-off at $\eta = 1$, far above it at $\eta = 10^4$ (`baselines.gpm` states the bound;
# tests/test_baselines.py asserts it at $\eta$ = 1, 100 and $10^4$). The batch's outputs move by
# several units or more.

# %%
net = mr.MLP([6, 9, 8, 4], hidden="tanh", init_std=0.5, seed=0)
rng = np.random.default_rng(1)
X, G, keep_X = rng.normal(size=(10, 6)), rng.normal(size=(10, 4)), rng.normal(size=(5, 6))
keep_G = rng.normal(size=(5, 4))
g = net.gradient(X, G)
if baselines.dot(g, net.gradient(keep_X, keep_G)) > 0:      # the sign at which they conflict
    keep_G = -keep_G
r = net.gradient(keep_X, keep_G)
D = fixes.agem(net, X, G, keep_X, keep_G)
print(f"A-GEM: g.r = {baselines.dot(g, r):+.3g}, D.r = {baselines.dot(D, r):+.1e}")
bases = fixes.gpm_bases(net, keep_X, threshold=1.0)
print("GPM at 1.0, ranks of the bases per layer:", bases.ranks[0])
for lr in (1.0, 100.0, 1e4):
    stepped = net.copy()
    stepped.step(fixes.gpm(net, X, G, bases), lr)
    held, moved = np.max(np.abs(stepped(keep_X) - net(keep_X))), np.max(np.abs(stepped(X) - net(X)))
    print(f"  lr {lr:5}: max |change of every output| on keep_X {held:.1e}, on the batch {moved:.3g}")

# %% [markdown]
# ## 2. The protocol: five permuted digit tasks, one shared head
#
# Permuted MNIST (the benchmark of EWC, GEM, A-GEM, OGD and GPM) on the shipped 8 × 8 digits:
# task $t$ shows every image with its 64 pixels shuffled by a fixed seeded permutation, and asks
# for the same ten digits through the same ten outputs.
#
# A [64, 100, 100, 10] tanh network learns
# the five tasks one after another, 60 full-batch steps each at $\eta = 2$ on the MSE to one-hot
# targets; every method takes the same steps from the same start. A-GEM and the projection keep
# a memory of 20 images of each earlier task (the projection holds all ten outputs there: 800
# constraints at the last task); EWC's Fisher and GPM's bases read each earlier task's training
# images.
#
# After task $i$ the network is tested on every task $j$: that accuracy is $R[i, j]$.
# The field's two numbers (Lopez-Paz and Ranzato 2017): $\mathrm{ACC}$, the mean of $R$'s last
# row, and $\mathrm{BWT} = \frac{1}{T-1}\sum_{j<T-1} (R[T-1, j] - R[j, j])$, how much each task lost
# after it was learnt (negative: forgetting). Joint training, each task on all tasks so far, is the
# upper bound.
#
# Two more of the field's numbers: forgetting $F$ (Chaudhry et al. 2018, as Mammoth
# reports it), the mean over earlier tasks of the fall from each one's best accuracy to its last,
# $\frac{1}{T-1}\sum_{j<T-1} (\max_{i \ge j} R[i, j] - R[T-1, j])$; and forward transfer (GEM's
# FWT), how well each task is done *before* it is trained, against the untrained network's
# accuracy $b_j$: $\frac{1}{T-1}\sum_{j \ge 1} (R[j-1, j] - b_j)$. `permuted.forgetting` and
# `permuted.forward_transfer` are these formulas, tested on a matrix checked by hand.
#
# One run is one draw. Each seed draws its own split of the digits, permutations, initialisation
# and memory (every method the same ones), and the table gives the mean and the spread (the
# sample standard deviation) over 5 seeds, as the papers do, with each method's CPU seconds and
# peak memory per run (what it keeps at the last task, plus `tracemalloc`'s peak while that task
# trains). Thirty method-runs take `continual-table --seeds 5` a minute or two, so this tutorial
# reads the run the package ships (`permuted.load()`, the command's own JSON) and runs one method
# here, the plain step of seed 0, to see that it is the same run.

# %%
print(permuted.format_table(result))
here = permuted.run_method("naive")
images = result["setup"]["n_test"] * np.abs(here["R"] - M["naive"]["runs"][0]["R"]).max()
print(f"naive, seed 0, run here: ACC {here['ACC']:.2f}, BWT {here['BWT']:+.2f}; "
      f"R differs from the shipped one by {images:.0f} images at most")
figure("field_accuracy", result)

# %% [markdown]
# ## 3. Reading the table
#
# Means ± std over the 5 seeds. Each task alone is learnt to 93-94% (naive's diagonal). Naive
# forgets: ACC 0.38 ± 0.04, BWT −0.70 ± 0.05. EWC (ACC 0.43 ± 0.03, BWT −0.63 ± 0.05) and A-GEM
# (0.41 ± 0.04, −0.66 ± 0.06) forget almost as much. EWC's weight is half the largest with which
# its pull alone is stable at this step size ($\eta \lambda F_k < 2$ for every parameter: a larger
# one diverges), and that is a weak pull. A-GEM's single averaged inequality only keeps the
# memory's *loss* from rising to first order.
#
# GPM (threshold 0.97)
# forgets least of the sequential methods, BWT −0.17 ± 0.03, and learns each new task less (its
# diagonal falls to 0.55 by task 5, as its bases fill each layer); the projection on 20 images per
# task learns each new task nearly as well as naive (its diagonal stays at 0.84 or above) and ends
# highest of them, ACC 0.70 ± 0.02 (BWT −0.23 ± 0.02).
# Joint training, which replays everything, reaches 0.79 ± 0.01 (BWT −0.075 ± 0.004).
#
# **What the spread allows one to conclude.** Call a difference real when the two intervals mean
# ± std do not overlap (`permuted.exceeds_spread`). Then joint > the projection > GPM > the other
# three, in ACC, each gap beyond the spread, and GPM forgets less than the projection (BWT) beyond
# it too. EWC, A-GEM and naive are *not* told apart: their gaps (0.01 and 0.03) are smaller than
# their spreads, and one seed's order (EWC 0.43 above A-GEM 0.42) is noise. Seed by seed, though,
# EWC and A-GEM each end above naive in all five runs: the seeds differ more among themselves than
# these methods do on one seed.
#
# Forgetting $F$ equals $-$BWT to the third decimal for every method but joint (0.076 against
# 0.075): a task rarely rises again after it is learnt. FWT is near 0 (+0.005 to +0.024): learning
# other permutations hardly helps a new one before it is seen. The projection's step is the
# costly one, more than 3 times any other method's CPU time and the most memory.

# %%
for a, b, gap, beyond in permuted.separations(result):
    print(f"ACC {a:>7} - {b:<7} {gap:+.3f}: {'beyond' if beyond else 'within'} the spread")
for name, r in M.items():
    print(f"{name:8} ACC per seed {[round(x['ACC'], 3) for x in r['runs']]}  "
          f"diagonal {np.round(np.diag(r['R']), 2)}")
print("GPM's ranks per layer after each task (seed 0):")
print("   ", M["gpm"]["ranks"])
print("EWC's weight after each task (seed 0):", np.round(M["ewc"]["lams"], 2))
figure("field_acc_bwt", result)

# %% [markdown]
# ## 4. What each method holds, exactly
#
# * **The exact projection** (OGD with the memory's output gradients): the memory's outputs, to
#   $O(\eta^2)$ a step (tutorial 05), and nothing off the memory; it costs a Gram of every
#   constraint.
# * **GPM at threshold 1.0**: every layer's input span on the old rows, so every output on them,
#   to round-off amplified by the stepped weights (section 1: it grows with $\eta$;
#   tests/test_baselines.py bounds it from eps). Below 1.0 only approximately: the rows' energy
#   outside the basis (at most 1 − threshold of it) still moves.
# * **A-GEM**: nothing exactly; the memory's loss does not rise, to first order.
# * **EWC**: nothing exactly; a pull, as tutorial 08's penalty.
#
# What GPM holds is more than was asked: every output, through every unit. That is why its
# diagonal falls. At threshold 1.0 it holds task 1 to round-off: on a smaller run of this
# protocol (tests/test_permuted.py) task 1's accuracy stays the same to the last image after
# every later task, and BWT is exactly 0.

# %% [markdown]
# ## 5. The papers' own numbers
#
# The papers report Permuted MNIST: 28 × 28 images, 10 or more tasks, cross-entropy, mini-batch
# SGD. GPM's published script (`main_pmnist.py` in github.com/sahagobinda/GPM) runs 10 tasks on
# a 784-100-100-10 network, batches of 10, 5 epochs a task at lr 0.01, energy thresholds 0.95,
# 0.99, 0.99 for the three layers, and computes BWT as we do, the mean over earlier tasks of the
# last row minus the diagonal.
#
# Kang et al. (2022, "Forget-free continual learning with winning subnetworks", ICML, Table 1)
# ran that code on that protocol, 5 runs each, and list (ACC in %, BWT as printed there; their
# multitask row is quoted from Saha et al. 2021):
#
# | method | ACC (%) | BWT |
# |---|---|---|
# | fine-tuning (our naive) | 78.22 | −0.21 |
# | EWC | 92.01 | −0.03 |
# | GPM | 94.96 | −0.02 |
# | multitask (our joint) | 96.70 | |
#
# A-GEM's paper (Chaudhry et al. 2019) and Adam-NSCL's (Wang et al. 2021) report their own
# protocols, which we could not read while writing this: no number of theirs is quoted here.
#
# The data differ in every way that matters: 8 × 8 images and 64 pixels to permute instead of
# 784, 1,198 training images per task instead of 60,000, full-batch steps on an MSE. So compare
# the order, not the numbers. On the four methods both tables share it is the same:
# fine-tuning, then EWC, then GPM, then joint training (here fine-tuning and EWC within the
# spread). The gaps are not: here a plain step forgets far more (BWT −0.70), and EWC, held to a
# weight that stays stable at our large full-batch step, recovers little of it. Ours also places
# the projection on the memory between GPM and joint.
#
# **With your own MNIST.** `python -m mlp_ref continual-table --data mnist:DIR [--tasks N]
# [--seeds N]` reads the four IDX files (`train-images-idx3-ubyte`, `train-labels-idx1-ubyte`,
# `t10k-images-idx3-ubyte`, `t10k-labels-idx1-ubyte`, gzipped or not) from DIR. torchvision's
# `datasets.MNIST(root, download=True)` leaves them in `root/MNIST/raw/`; Keras's
# `~/.keras/datasets/mnist.npz` is a NumPy archive, not IDX. Nothing is downloaded, and a missing,
# truncated or wrong file is refused in one line naming it.
#
# It runs GPM's protocol where this machine allows: the 784-100-100-10 ReLU network, 10 tasks,
# SGD on batches of 10, pixels scaled as GPM's script does, GPM's bases from 300 random images of
# each task. It differs in: the MSE on one-hot targets instead of cross-entropy (so lr 0.05, about
# GPM's 0.01 at the MSE's smaller gradient), biases in every layer, one epoch of the 60,000 images
# a task instead of 5 of 54,000, one energy threshold 0.97 for all layers instead of 0.95, 0.99,
# 0.99, and our own seeded permutations (`permuted.MNIST` lists it all). This project's machine
# has no MNIST, so no MNIST number of ours is quoted: the papers' above stay theirs.

# %% [markdown]
# ## 6. The scale ladder: 40 to 80,000 constraints
#
# Back to tutorial 08's task (hold outputs 0-4 while 20 steps learn digits 5-9), with memories
# of up to 16,000 rows: the 601 old training images, then their one-pixel shifts, then the
# two-pixel ones and three along an axis. Holding 5 outputs on $m$ rows is $n = 5m$ constraints.
# The exact route (`fast.project`) solves an $n \times n$ Gram each step; the basis route (GPM)
# builds its bases once, from a $d \times d$ matrix per layer read batch by batch, and then
# projects each step through them: its step does not depend on $n$.

# %%
print(f"{'route':10} {'rows':>6} {'n':>6} {'ms/step':>9} {'peak MiB':>9} {'drift on memory':>16} "
      f"{'drift off it':>13} {'old':>5} {'new':>5}")
for r in ladder["rows"]:
    print(f"{r['route']:10} {r['rows']:6d} {r['constraints']:6d} {r['ms_per_step']:9.1f} "
          f"{r['peak_mib']:9.1f} {r['memory_drift']:16.1e} {r['test_drift_max']:13.1e} "
          f"{r['old_acc']:5.2f} {r['new_acc']:5.2f}")
figure("scale_cost", ladder)

# %% [markdown]
# The exact route's step grows with $n$: 2.3 ms at 40 constraints, 55 ms at 640, 1.0 s at 2,560
# and 3.8 s at 4,095, with a peak of 311 MiB (its Gram alone is 128 MiB; 80,000 constraints
# would need a Gram of 48 GiB). GPM's step takes 2.1 to 6.6 ms at every size from 40 to 80,000
# constraints, at every threshold, with a peak of 3.2 MiB: it does not grow with the memory.
# Building the bases, once, reads the 16,000 rows in batches of 1,000 in at most 0.28 s, with a
# peak of 5.9 MiB. The exact step is the cheaper one only at the smallest memory (40
# constraints); from 640 on it costs 9 times GPM's slowest step or more.
#
# What GPM gives up is the new task. It holds every output through every unit, so once its
# bases fill the layers nothing is left to learn: at threshold 1.0 from 640 constraints on (128
# rows: bases of ranks 54, 65, 65, layers 2 and 3 spanned), at 0.99 and 0.999 from 2,560 on, no
# new digit is right (at most 1%) while 98% of the old ones stay right. At threshold 1.0 the
# memory's outputs move by round-off only, below 2e-14 at every size, and from 2,560 constraints
# on the old test images' too: their layer inputs all lie in the bases' span, and nothing moves.
#
# At 0.9 it learns (72% to 81% of the new digits) but holds only approximately: the memory's
# outputs move by up to 0.66. The exact route at 4,095 constraints holds the memory to 3.3e-04
# and learns 78% of the new digits, keeping 92% of the old. The times are one run's on this
# project's 2-core machine, in one BLAS thread, while other work ran (`machine` in the JSON).

# %% [markdown]
# ## What to remember
#
# The field's rules hold different things. A-GEM and EWC hold nothing exactly, and on this
# protocol they forget almost as much as a plain step. The exact projection holds exactly the
# outputs it is told to, on the memory, and learns the new task nearly unhindered, at a Gram of
# every constraint. GPM holds every layer's inputs: the most forgetting-proof of the sequential
# methods and the one that learns least, at a cost that does not grow with the memory. The
# figures are in `figures/` (`field_accuracy.png`, `field_acc_bwt.png`, `scale_cost.png`:
# `python -m mlp_ref figures`), and `python -m mlp_ref continual-table` prints the table.
