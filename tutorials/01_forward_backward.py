"""Tutorial 01: forward and backward, stage by stage, on the question's own network.

The question (Stack Overflow 42182233): an MLP has two outputs; the gradient of the loss with
respect to the outputs is G = [0, -1] ("raise out2, leave out1 alone"). A gradient step raises
out2, but out1 moves too. This tutorial runs the answer's exact setup and looks at every stage
of backprop, to see where out1's movement comes from.

    python tutorials/01_forward_backward.py            run straight through
    python tutorials/01_forward_backward.py --step     pause before each section

or open it in VS Code, Spyder or Jupyter (via jupytext) and run it cell by cell (# %%).
"""
# %%
import numpy as np

import mlp_ref as mr
from mlp_ref.setups import G_QUESTION, seed_setup
from mlp_ref.tutorial import section, show, show_stages

LR = 0.1                                   # the answer's GradientDescentOptimizer(0.1)

# %%
section("1. The network and the data of the answer", """
    A 3-4-2 network: 3 inputs, one hidden layer of 4 sigmoid units, 2 identity outputs; weights
    and biases drawn from N(0, 0.1^2) like the answer's tf.random_normal(stddev=0.1). The data:
    8 samples x uniform in [0, 1)^3. Rows are samples and z = a @ W + b, exactly as in the
    answer's TensorFlow code, so every line below can be read against it.""")
net, X, Y = seed_setup()
print(net)
print("parameters:", {k: v.shape for k, v in net.params.items()}, f"-> P = {net.n_params} numbers")
show("X", X)

# %%
section("2. Forward: the network keeps every stage", """
    net.forward(X) returns a record of every pre-activation z_l and activation a_l. Nothing is
    hidden inside the network object: backward will read this record.""")
record = net.forward(X)
show_stages(record.stages, net)

# %%
section("3. Backward with G = [0, -1]", """
    net.backward(record, G) runs the chain rule from the output back to the input, one line per
    line of the forward pass, in reverse. G is dL/d(out) for every row: 0 for out1 (leave it
    alone), -1 for out2 (a step against the gradient raises it). The parameter gradients
    (dW2, db2, dW1, db1) are sum_i G_i . d out_i / d theta.""")
back = net.backward(record, G_QUESTION)
show_stages(back.stages, net)

# %%
section("4. Why the first column of dW2 is exactly zero", """
    dz2 = dout = G because the output layer is the identity, and dW2 = a1.T @ dz2: column k of
    dW2 only ever sees column k of dz2. G's first column is 0 on every row, so out1's own
    weights W2[:, 0] and its bias b2[0] get a gradient of exactly zero.""")
dW2, db2 = back.grads["W2"], back.grads["b2"]
show("dW2[:, 0]", dW2[:, 0], "a1.T @ dz2[:, 0]")
show("db2[0]", db2[0], "dz2[:, 0].sum()")
assert np.all(dW2[:, 0] == 0.0) and db2[0] == 0.0

# %%
section("5. ... and why dW1 is not", """
    da1 = dz2 @ W2.T: with dz2 = [0, -1] on every row, every row of da1 is -W2[:, 1], out2's
    weights into the hidden layer. That is not zero, so dz1 = da1 * sigmoid'(z1), dW1 and db1
    are not zero either: not one of their entries is. W1 and b1 are SHARED by both outputs, and
    out1 = a1 @ W2[:, 0] + b2[0] reads the same hidden layer a1 that the step is about to change.
    This is the heart of the question.""")
da1 = back.stages["da1"]
print("every row of da1 equals -W2[:, 1]:", bool(np.all(da1 == -net.params["W2"][:, 1])))
print("entries of dW1 that are zero:", np.count_nonzero(back.grads["W1"] == 0.0), "of",
      back.grads["W1"].size, "  entries of db1 that are zero:",
      np.count_nonzero(back.grads["b1"] == 0.0), "of", back.grads["b1"].size)

# %%
section("6. The step: out2 rises, and out1 moves", f"""
    One plain gradient step theta <- theta - lr * grads with lr = {LR}. W2[:, 0] and b2[0] do
    not change (their gradient is zero), so out1 after the step is a1_after @ W2[:, 0] + b2[0]:
    its change is EXACTLY the change of the hidden layer read through out1's unchanged weights,
    delta out1 = (a1_after - a1_before) @ W2[:, 0]. Here out2 rises by about 1.5 on every
    sample, while out1 moves by between 1e-4 and 2e-4: about 10^4 times less (the weights are
    small at this initialisation), but not zero.""")
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

# %%
section("7. Drift is proportional to the step size", """
    Halve the learning rate and out1's drift halves too (to first order): it is O(lr). A smaller
    step moves out1 less, never not at all. Later tutorials measure this over many step sizes
    and compare every fix.""")
half = net.copy().step(back.grads, LR / 2)(X) - record.output
ratio = np.abs(d_out[:, 0]) / np.abs(half[:, 0])
print(f"|delta out1 at lr {LR}| / |delta out1 at lr {LR / 2}| per sample:", np.round(ratio, 3))

# %%
section("8. Check every stage against finite differences", """
    mlp_ref.gradcheck.check perturbs every entry of every stage by +-h, runs the rest of the
    network forward and compares the centred difference with backward's value. Every stage
    passes the project's tolerance of 1e-7 on the relative error; in float64 the worst is
    below 1e-10 here. Run it on any network you build: it names the stage and the entry that
    fails.""")
report = mr.gradcheck.check(net, X, G_QUESTION)
print(report)

# %%
section("What to remember", """
    With G = [0, -1], out1's own weights get no gradient, so masking out1 or excluding W2[:, 0]
    changes nothing: the gradient already leaves them alone. out1 moves because the hidden layer
    it reads is shared and does get a gradient. To hold out1 fixed, a fix must control the change
    of the shared parameters: freeze them (the answer's var_list = [W2, b2]), or project the step
    so that out1's first-order change is zero. Next: figures/backprop_stages.png and
    figures/seed_problem.png show this section's numbers as pictures.""")
