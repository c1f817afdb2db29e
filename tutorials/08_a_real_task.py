"""Tutorial 08: the fixes on a real task - keep digits 0-4 while learning 5-9.

Everything so far happened on 8 toy samples. Where these fixes are used for real is continual
learning and model editing: hold what a network already gets right on *old* data while it trains
on *new* data, so keep_X (a memory of old images) is not the batch X. We train a 64-64-64-10 tanh
network on the handwritten digits 0-4, then on 5-9, holding outputs 0-4 with every fix, and read
what each keeps, what it costs the new digits, and what it costs in time and memory.

    python tutorials/08_a_real_task.py            run straight through
    python tutorials/08_a_real_task.py --step     pause before each section
"""
# %%
import numpy as np

from mlp_ref import continual, data
from mlp_ref.continual import find
from mlp_ref.tutorial import section

images, labels = data.digits_arrays()
result = continual.run()                   # the first task, then every fix: a few seconds


def pct(x):
    return f"{100 * x:.0f}%"


# %%
section("1. The data and the first task", """
    data.digits() splits the 1,797 handwritten digits of UCI's optdigits (8 x 8 pixels, 0..16,
    shipped with the package) into a training and a test set, a third of each digit for
    testing. Inputs are centred by the mean old training image. The network learns digits 0-4
    from one-hot targets over all ten outputs with the package's own MSE: 60 full-batch steps,
    lr 2. Accuracy is read class-incrementally, the argmax over all ten outputs: that is how a
    network that must tell every digit apart is used, and where forgetting shows.""")
print(f"images {images.shape}, pixels {images.min()}..{images.max()}, "
      f"digits {np.bincount(labels).tolist()}")
print(f"training images: {result['n_train']}, test images: {result['n_test']}, "
      f"network {result['sizes']} ({result['n_params']} parameters)")
print(f"after the first task: {pct(result['first'])} of the old test digits right")

# %%
section("2. Every fix, 20 steps on digits 5-9", """
    The second task trains on the ~600 images of 5-9 the same way, and its targets say 0 for
    outputs 0-4 on every new image: a plain step pushes outputs 0-4 down, on old images too.
    Each fix holds outputs 0-4; those with a memory hold them on m old *training* images. The
    drift columns are measured on the 300 old *test* images, none of them in the memory.""")
print(continual.format_runs(result))

# %%
naive, freeze, towers = (find(result, f) for f in ("naive", "freeze", "towers"))
section("3. Naive: forgetting within a few steps", f"""
    A plain step learns the new digits ({pct(naive['new_acc'][-1])} right after 20 steps) and
    forgets the old: {pct(naive['old_acc'][-1])} of them are still right. Outputs 0-4 moved by
    {naive['drift_mean']:.2f} on average, up to {naive['drift_max']:.2f}: the shared layers
    moved, and every output reads them.""")

# %%
section("4. Separate heads and towers: exactly held, and still forgetting", f"""
    freeze trains only the head of outputs 5-9 (SplitHeads); two towers give 5-9 a whole network
    of their own (TwoTower). Outputs 0-4 are unchanged bit for bit on every old test image (max
    drift {freeze['drift_max']} and {towers['drift_max']}), yet the old accuracy falls, to
    {pct(freeze['old_acc'][-1])} and {pct(towers['old_acc'][-1])}: nothing holds outputs 5-9
    *down* on old images, and wherever one of them rises above the right old output, the argmax
    is wrong. Holding the old outputs is not holding the old task. What they give up: the
    frozen trunk leaves the head only features learnt for 0-4 ({pct(freeze['new_acc'][-1])} of
    the new digits after 20 steps); a tower learns them ({pct(towers['new_acc'][-1])}) with
    twice the parameters, and shares nothing.""")
for run in (naive, freeze, towers):
    print(f"{run['fix']:7}: old test images read as a new digit: {pct(run['old_as_new'])}")

# %%
p = {m: find(result, "project", m) for m in result["memory_sizes"]}
r = {m: find(result, "project+restore", m) for m in continual.RESTORE_SIZES}
small, large = min(p), max(p)
section("5. Projection with a memory: held on the memory, and off it as m grows", f"""
    fast.project (the fast tier's fixes.project, equal to 1e-12) keeps every parameter
    trainable and removes from each step what moves outputs 0-4 on the memory, to first order.
    On the memory itself they drift only by the accumulated O(lr^2) terms ({p[small]['memory_drift']:.0e}
    at m = {small}), and restoring after each step brings that to round-off
    ({r[small]['memory_drift']:.0e}). Off the memory is another matter: with m = {small} the old
    test images drift by {p[small]['drift_mean']:.2f} on average, hardly less than naive, and
    {pct(p[small]['old_acc'][-1])} stay right; with m = {large} they drift by
    {p[large]['drift_mean']:.4f} and {pct(p[large]['old_acc'][-1])} stay right, at
    {pct(p[large]['new_acc'][-1])} on the new digits. The constraints hold where they are
    imposed; how far that generalises depends on how well the memory covers the old digits.
    Restoring changes nothing off the memory (the same drift, to 1%).""")
for m in result["memory_sizes"]:
    print(f"m = {m:4d}: mean |drift| off the memory {p[m]['drift_mean']:.4f}, "
          f"on it {p[m]['memory_drift']:.1e};  old {pct(p[m]['old_acc'][-1])}, "
          f"new {pct(p[m]['new_acc'][-1])}")

# %%
spans = result["input_ranks"]
s_large = find(result, "span", large)
section("6. Span projection: when the memory spans a layer, the layer freezes", f"""
    span_project (GPM) projects each layer's update off the span of that layer's inputs on the
    memory: the memory's outputs 0-4 cannot move at all ({s_large['memory_drift']:.0e} on it),
    at any lr. But once the memory's inputs to a layer span all of its n + 1 dimensions, nothing
    is left to train there. With m = {large}, layers 2 and 3 are spanned ({spans[large][1]} and
    {spans[large][2]} of 65) and layer 1 nearly ({spans[large][0]} of 65): the rule becomes
    freezing, step for step (the same test accuracies as freeze at all 21 points:
    {np.array_equal(s_large['old_acc'], freeze['old_acc'])}). Smaller memories leave room, and
    drift off the memory accordingly.""")
for m in result["memory_sizes"]:
    s = find(result, "span", m)
    print(f"m = {m:4d}: ranks of [a_(l-1), 1] on the memory {spans[m]}; "
          f"old {pct(s['old_acc'][-1])}, new {pct(s['new_acc'][-1])}, "
          f"mean |drift| {s['drift_mean']:.1e}")

# %%
pen = find(result, "penalty", large)
section("7. The penalty, at a weight that stays stable", f"""
    The penalty pulls outputs 0-4 back on the memory with lambda/2 ||O - ref||^2. Gradient
    descent on it is stable only while lr lambda lambda_max(J J^T) < 2; we take lambda with
    lr lambda lambda_max = 1. lambda_max grows with the memory ({pen['lam_max']:.0f} at
    m = {large}), so the stable lambda shrinks ({pen['lam']:.1e}), and the pull stays weak:
    {pct(pen['old_acc'][-1])} of the old digits right at m = {large}. A penalty is a restoring
    force, never a guarantee.""")

# %%
cost = continual.load_cost()
i128, i512 = cost["m"].index(128), cost["m"].index(512)
section("8. What holding 5 m constraints costs", f"""
    Projection solves an n x n system, n = 5 m: the Gram J J^T takes 8 n^2 bytes, and the
    reference's rank-revealing eigendecomposition n^3 time. From the sweep shipped with the
    package (python -m mlp_ref.continual, on this project's machine): one projected direction
    takes {cost['reference'][i128]:.2f} s at m = 128 and {cost['reference'][i512]:.1f} s at
    m = 512 in the reference, {cost['fast'][i128]:.2f} s and {cost['fast'][i512]:.1f} s in the
    fast tier (Cholesky at full rank: n^3 / 3, once, and no eigenvalues); the Gram alone is
    {cost['gram_bytes'][i512] / 2**20:.0f} MiB at m = 512. What remains in the fast tier is that
    factorisation and the Gram's n^2 products: the cost of holding every constraint exactly.""")
for i, m in enumerate(cost["m"]):
    print(f"m = {m:4d} (n = {cost['constraints'][i]:5d}): reference {cost['reference'][i]:7.3f} s, "
          f"fast {cost['fast'][i]:7.3f} s, peak {cost['peak_reference'][i] / 2**20:7.1f} MiB, "
          f"Gram {cost['gram_bytes'][i] / 2**20:6.1f} MiB")

# %%
section("What to remember", """
    On real data the fixes differ more than on the toy. Layer splitting holds the old outputs
    exactly and still loses old digits, because the new outputs are free to rise on them.
    Projection holds exactly what it is told to hold, the memory, and off it only as well as the
    memory covers the old task: more memory, less drift, at n^2 memory and n^3 time. Span
    projection holds harder and freezes whole layers once the memory spans them. The penalty's
    stable weight is too small to hold much. Figures: figures/continual_tradeoff.png,
    figures/continual_steps.png, figures/continual_cost.png.""")
