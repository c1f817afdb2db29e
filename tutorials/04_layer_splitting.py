"""Tutorial 04: layer splitting - update only what out1 does not read.

The accepted answer's first recipe: "introduce two sets of variables: one for the connections
between the hidden layer and the first output block, one for the rest", then train only the
second set (var_list). Three ways to write it down: freeze every parameter but out2's
(fixes.freeze), give each output its own head on a shared trunk (SplitHeads), or give each
output a whole network of its own (TwoTower). Each holds out1 exactly - not to first order, but
to the last bit, on every input, at every step size. Each has a price, which we measure.

    python tutorials/04_layer_splitting.py            run straight through
    python tutorials/04_layer_splitting.py --step     pause before each section
"""
# %%
import numpy as np

from mlp_ref import SplitHeads, TwoTower, data, experiments, fixes, losses
from mlp_ref.setups import G_QUESTION, seed_setup, visible_setup
from mlp_ref.tutorial import section

PROBE = data.probe_inputs()                 # 256 unseen inputs from the same cube
LRS = (1e-3, 1e-2, 1e-1, 1.0, 10.0)         # from timid to absurd: the guarantee holds at all


def exactly_held(model, stepped, X):
    """out1 before and after, bit for bit, on the batch X and on the 256 unseen inputs."""
    return (np.array_equal(stepped(X)[:, 0], model(X)[:, 0])
            and np.array_equal(stepped(PROBE)[:, 0], model(PROBE)[:, 0]))


# %%
section("1. Freeze: the var_list recipe", """
    fixes.freeze(net, X, G) keeps the gradient of the output layer only (W_L, b_L, the answer's
    var_list = [W2, b2]) and zeroes the rest. We take one step at every lr from 0.001 to 10 on
    both setups and compare out1 before and after with np.array_equal, on the batch and on 256
    unseen inputs: identical, bit for bit, every time. out2 still rises.""")
for name, (net, X, _) in {"seed": seed_setup(), "visible": visible_setup()}.items():
    D = fixes.freeze(net, X, G_QUESTION)
    for lr in LRS:
        stepped = net.copy().step(D, lr)
        gain = np.mean(stepped(X)[:, 1] - net(X)[:, 1])
        print(f"{name:8} lr {lr:6g}: out1 identical on batch and unseen inputs: "
              f"{exactly_held(net, stepped, X)};  out2 gain {gain:9.3f}")

# %%
section("2. Why it is exact - and when var_list alone is not enough", """
    out1 = a_{L-1} @ W_L[:, 0] + b_L[0]. Freezing keeps every hidden layer, so a_{L-1} is the
    same on every input; and because G's out1 column is 0, the gradient of W_L[:, 0] and b_L[0]
    is exactly 0, so theta - lr * 0 leaves those bits alone too. Nothing out1 reads has changed.
    But that second half depends on G: with a real loss on both outputs (the MSE against the
    targets Y), out1's own weights get a gradient, and var_list = [W2, b2] moves out1. To hold
    out1 whatever G is, freeze out1's own weights as well: that is what separate heads make
    explicit.""")
net, X, Y = seed_setup()
_, G_mse = losses.mse(net(X), Y)
stepped = net.copy().step(fixes.freeze(net, X, G_mse, trainable=["W2", "b2"]), 0.1)
print(f"seed, G of the MSE, var_list = [W2, b2]: out1 identical: {exactly_held(net, stepped, X)};  "
      f"max |change of out1| = {np.max(np.abs(stepped(X)[:, 0] - net(X)[:, 0])):.3f}")

# %%
section("3. Separate heads: SplitHeads", """
    SplitHeads.from_mlp(net) splits the output layer into one head per output on the shared
    trunk: the same function, bit for bit. Its parameter names say who reads what: trunk_keys
    (every output), head_keys(0) (out1 only), head_keys(1) (out2 only). Training head 1 alone
    holds out1 exactly even for the MSE's G, whose out1 column is not zero; training the trunk
    too moves out1 again.""")
heads = SplitHeads.from_mlp(net)
print(f"{heads!r}: same outputs as the MLP on unseen inputs: "
      f"{np.array_equal(heads(PROBE), net(PROBE))}")
print("trunk:", heads.trunk_keys, "  head 0:", heads.head_keys(0), "  head 1:", heads.head_keys(1))
grads = heads.gradient(X, G_mse)
for keys, what in [(heads.head_keys(1), "head 1 only"), (heads.head_keys(1) + heads.trunk_keys,
                                                         "head 1 + trunk")]:
    D = {k: (g if k in keys else np.zeros_like(g)) for k, g in grads.items()}
    moved = heads.copy().step(D, 0.1)
    print(f"  train {what:15}: out1 identical: {exactly_held(heads, moved, X)!s:5}  "
          f"max |change of out1| = {np.max(np.abs(moved(X)[:, 0] - heads(X)[:, 0])):.2e}")

# %%
section("4. Two towers: TwoTower", """
    TwoTower.from_mlp(net) gives each output a whole network of its own, each starting as a copy
    of the MLP's trunk: the same function up to rounding (a product with fewer columns may round
    in the last bit). Nothing is shared, so training every parameter of tower 1 (out2's) holds
    out1 exactly, and out2 can learn new features. The price: a second trunk, 42 parameters
    instead of 26 on the seed network, 706 instead of 370 on the visible one.""")
towers = TwoTower.from_mlp(net)
print(f"{towers!r}: max |towers - MLP| on unseen inputs = "
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

# %%
section("5. The price: what out2 can still learn", """
    experiments.out2_capacity teaches out2 a NEW function, x1 x2 - x3, on 32 inputs, for 200
    steps, holding out1, starting from the visible network. Freezing and separate heads are the
    same thing here (the same 17 parameters move: out2's 16 weights and its bias, and the same
    MSE curve, bit for bit): out2 can only re-weight features the trunk learnt for both, and its
    error stays about 6 times that of unconstrained training. Two towers learn like unconstrained
    training (the same MSE curve, to round-off: tower 1 is the MLP without out1's column), at
    almost twice the parameters. Projection with
    restoring (tutorial 05) lands in between, holds out1 on the 32 inputs to round-off - and
    lets it drift on unseen ones.""")
capacity = experiments.out2_capacity()
print(experiments.format_capacity(capacity))

# %%
section("What to remember", """
    Layer splitting is the one family of fixes whose guarantee is exact: out1 is unchanged, bit
    for bit, on every input, at every step size, because nothing it reads changes. The answer's
    var_list is one form of it; with a real loss on both outputs, freeze out1's own weights too
    (separate heads). The cost is capacity: a frozen trunk cannot learn for out2, and two towers
    share nothing. Figures: figures/network_fixes.png (freeze moves only out2's weights),
    figures/trajectories.png and figures/pareto.png (exact zeros, and half the gain).""")
