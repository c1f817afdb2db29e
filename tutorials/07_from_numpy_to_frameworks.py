"""Tutorial 07: from NumPy to frameworks - each fix written in PyTorch and TensorFlow 2.

mlp-ref itself depends on NumPy (and matplotlib for the figures) and on nothing else: no
framework is imported here either. The snippets below are printed, not run; they are short,
written against the current public APIs (PyTorch 2.x with torch.func, TensorFlow 2.x), and
every one of them is checked to be valid Python by the tests. Each is the framework version
of something the package does in NumPy, named in the narration.

    python tutorials/07_from_numpy_to_frameworks.py            run straight through
    python tutorials/07_from_numpy_to_frameworks.py --step     pause before each section
"""
# %%
from mlp_ref.tutorial import section

#: (framework, name) -> code. Printed by snippet(); compiled, never run, by the tests.
SNIPPETS = {}


def snippet(name, framework, code):
    """Keep a snippet under (framework, name) and print it, indented, under a one-line header."""
    code = code.strip("\n")
    SNIPPETS[(framework, name)] = code
    print(f"\n--- {framework}: {name} ---")
    print("\n".join("    " + line for line in code.splitlines()))


# %%
section("0. The seed network in each framework", """
    The same 3-4-2 sigmoid network as mlp_ref.MLP([3, 4, 2]), with the same names and the same
    row-vector convention z = a @ W + b, so that every snippet lines up with the NumPy code.
    G = [0, -1] is expressed as the loss L = sum(G * out), whose gradient with respect to the
    output is exactly G (what mlp_ref's net.backward(record, G) takes directly).""")
snippet("setup", "PyTorch", """
import torch
torch.manual_seed(0)
X = torch.rand(8, 3)
W1 = torch.nn.Parameter(0.1 * torch.randn(3, 4)); b1 = torch.nn.Parameter(0.1 * torch.randn(4))
W2 = torch.nn.Parameter(0.1 * torch.randn(4, 2)); b2 = torch.nn.Parameter(0.1 * torch.randn(2))
params = [W1, b1, W2, b2]

def net(x):
    return torch.sigmoid(x @ W1 + b1) @ W2 + b2       # (n, 2)

G = torch.tensor([0.0, -1.0])
loss = (G * net(X)).sum()                             # dL/dout = G on every row
""")
snippet("setup", "TensorFlow 2", """
import tensorflow as tf
X = tf.random.uniform([8, 3])
W1 = tf.Variable(tf.random.normal([3, 4], stddev=0.1)); b1 = tf.Variable(tf.random.normal([4], stddev=0.1))
W2 = tf.Variable(tf.random.normal([4, 2], stddev=0.1)); b2 = tf.Variable(tf.random.normal([2], stddev=0.1))
variables = [W1, b1, W2, b2]

def net(x):
    return tf.sigmoid(x @ W1 + b1) @ W2 + b2

G = tf.constant([0.0, -1.0])
""")

# %%
section("1. Freezing: update only what out1 does not read", """
    The accepted answer's first recipe, var_list = [W2, b2]: only the output layer learns.
    Because G's first column is 0, dW2[:, 0] and db2[0] are 0 (tutorial 01), so out1 does not
    move at all: drift exactly 0, on every input. In NumPy: keep grads["W2"], grads["b2"] and
    zero the rest (mlp_ref.fixes.freeze). In PyTorch, turn off requires_grad or give the
    optimizer only the trainable tensors; in TF 2, ask the tape for those variables only. With a
    real loss on both outputs (not G = [0, -1]) you also need the mask of section 2, or W2[:, 0]
    learns and out1 moves.""")
snippet("freeze", "PyTorch", """
W1.requires_grad_(False); b1.requires_grad_(False)     # for a module: for p in trunk.parameters(): ...
opt = torch.optim.SGD([W2, b2], lr=0.1)                # the answer's var_list=[W2, b2]
opt.zero_grad()
(G * net(X)).sum().backward()
opt.step()
""")
snippet("freeze", "TensorFlow 2", """
opt = tf.keras.optimizers.SGD(learning_rate=0.1)
with tf.GradientTape() as tape:
    loss = tf.reduce_sum(G * net(X))
grads = tape.gradient(loss, [W2, b2])                  # only the output layer
opt.apply_gradients(zip(grads, [W2, b2]))              # (Keras layers: layer.trainable = False)
""")

# %%
section("2. The mask on the loss", """
    The answer's recommended recipe multiplies the output by a 0/1 mask before the loss, so the
    gradient of out1's column is zero (mlp_ref.losses.masked_mse, mlp_ref.fixes.masked). In the
    question G's first column is ALREADY zero: the mask changes nothing, and out1 still drifts
    through the shared hidden layer. The answer's masked script only holds out1 because it also
    passes var_list = [W2, b2]. A mask is the tool for a missing label, not for invariance.""")
snippet("mask", "PyTorch", """
mask = torch.tensor([0.0, 1.0])                        # (n, 2) for a per-sample mask
Y = torch.rand(8, 2)
loss = ((mask * (net(X) - Y)) ** 2).mean()
""")
snippet("mask", "TensorFlow 2", """
mask = tf.constant([0.0, 1.0])
Y = tf.random.uniform([8, 2])
with tf.GradientTape() as tape:
    loss = tf.reduce_mean(tf.square(mask * (net(X) - Y)))
grads = tape.gradient(loss, [W2, b2])                  # mask AND var_list, as in the answer
""")

# %%
section("3. Separate heads (and two towers)", """
    Give each output its own head on a shared trunk and train only out2's head: out1's head and
    the trunk it reads do not change, so out1 does not move (drift exactly 0). Train the trunk
    too and out1 moves again. Two towers share nothing at all, at the price of sharing nothing.""")
snippet("heads", "PyTorch", """
class TwoHeads(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.trunk = torch.nn.Sequential(torch.nn.Linear(3, 4), torch.nn.Sigmoid())
        self.head1 = torch.nn.Linear(4, 1)
        self.head2 = torch.nn.Linear(4, 1)

    def forward(self, x):
        h = self.trunk(x)
        return torch.cat([self.head1(h), self.head2(h)], dim=1)

model = TwoHeads()
opt = torch.optim.SGD(model.head2.parameters(), lr=0.1)   # trunk and head1 stay as they are
""")
snippet("heads", "TensorFlow 2", """
inputs = tf.keras.Input(shape=(3,))
h = tf.keras.layers.Dense(4, activation="sigmoid", name="trunk")(inputs)
out1 = tf.keras.layers.Dense(1, name="head1")(h)
out2 = tf.keras.layers.Dense(1, name="head2")(h)
model = tf.keras.Model(inputs, tf.keras.layers.Concatenate()([out1, out2]))
train_vars = model.get_layer("head2").trainable_variables  # pass these to tape.gradient
""")

# %%
section("4. Null-space projection: J1 @ D = 0", """
    Keep every parameter trainable, but remove from the gradient g its component along the rows
    of J1, the (n, P) Jacobian of out1 over the batch: D = g - J1.T (J1 J1.T)^+ J1 g, so that
    J1 @ D = 0 and out1's first-order change on the batch is zero (drift O(lr^2) on the batch,
    O(lr) on other inputs). mlp_ref.jacobian builds the rows per sample, mlp_ref.fixes.project
    does the rest. In PyTorch, torch.func.vmap(jacrev(...)) gives the per-sample Jacobian (or
    torch.autograd.functional.jacobian, one call for the whole batch); in TF 2,
    tape.jacobian. Use a pseudo-inverse or a least-squares solve: J1 J1.T is singular whenever
    two rows of J1 coincide or n > P. At scale, never build J1: J1 J1.T factors layer by layer
    into products of per-sample backprop signals and layer inputs (mlp_ref.jacobian).""")
snippet("project", "PyTorch", """
from torch.func import functional_call, jacrev, vmap

model = TwoHeads()                                   # any nn.Module with outputs (n, 2)
names = [k for k, _ in model.named_parameters()]
theta = {k: p.detach() for k, p in model.named_parameters()}

def out1_of(p, x):                                   # out1 of ONE sample x (3,)
    return functional_call(model, p, (x[None],))[0, 0]

J = vmap(jacrev(out1_of), in_dims=(None, 0))(theta, X)          # name -> (n, *shape)
J1 = torch.cat([J[k].reshape(len(X), -1) for k in names], dim=1)  # (n, P)

model.zero_grad()
(G * model(X)).sum().backward()
g = torch.cat([p.grad.reshape(-1) for p in model.parameters()])   # same order as names
alpha = torch.linalg.pinv(J1 @ J1.T) @ (J1 @ g)  # or torch.linalg.lstsq(J1.T, g[:, None]).solution[:, 0]
D = g - J1.T @ alpha                                               # J1 @ D = 0

with torch.no_grad():                                              # theta <- theta - lr * D
    i = 0
    for p in model.parameters():
        p -= 0.1 * D[i:i + p.numel()].view_as(p)
        i += p.numel()
""")
snippet("project", "TensorFlow 2", """
n = X.shape[0]
with tf.GradientTape(persistent=True) as tape:
    out = net(X)
    out1 = out[:, 0]                                 # slice INSIDE the tape, or it is not recorded
    loss = tf.reduce_sum(G * out)
J = tape.jacobian(out1, variables)                   # list: (n, 3, 4), (n, 4), (n, 4, 2), (n, 2)
J1 = tf.concat([tf.reshape(j, [n, -1]) for j in J], axis=1)              # (n, P)
g = tf.concat([tf.reshape(d, [-1]) for d in tape.gradient(loss, variables)], axis=0)
alpha = tf.linalg.pinv(J1 @ tf.transpose(J1)) @ (J1 @ g[:, None])
D = g - tf.reshape(tf.transpose(J1) @ alpha, [-1])                       # J1 @ D = 0
del tape

i = 0
for v in variables:                                  # theta <- theta - lr * D
    size = int(tf.size(v))
    v.assign_sub(0.1 * tf.reshape(D[i:i + size], v.shape))
    i += size
""")

# %%
section("5. With Adam: project the update, not the gradient", """
    Momentum and Adam transform the direction: Adam divides each coordinate by its own running
    scale, so a projected gradient comes out of the optimizer no longer orthogonal to the rows
    of J1, and out1 drifts at O(lr) again. Project the FINAL update instead: let the optimizer
    compute its step, then replace the step by its projection. J1 is computed at the parameters
    before the step, as in section 4.""")
snippet("adam", "PyTorch", """
opt = torch.optim.Adam(model.parameters(), lr=1e-3)
opt.zero_grad()
(G * model(X)).sum().backward()
before = [p.detach().clone() for p in model.parameters()]
opt.step()                                           # Adam's step, not yet constrained
with torch.no_grad():
    step = torch.cat([(p - b).reshape(-1) for p, b in zip(model.parameters(), before)])
    step = step - J1.T @ (torch.linalg.pinv(J1 @ J1.T) @ (J1 @ step))   # J1 @ step = 0
    i = 0
    for p, b in zip(model.parameters(), before):
        p.copy_(b + step[i:i + p.numel()].view_as(p))
        i += p.numel()
""")
snippet("adam", "TensorFlow 2", """
opt = tf.keras.optimizers.Adam(learning_rate=1e-3)
with tf.GradientTape() as tape:
    loss = tf.reduce_sum(G * net(X))
grads = tape.gradient(loss, variables)
before = [tf.identity(v) for v in variables]
opt.apply_gradients(zip(grads, variables))           # Adam's step, not yet constrained
step = tf.concat([tf.reshape(v - b, [-1]) for v, b in zip(variables, before)], axis=0)
step = step - tf.reshape(tf.transpose(J1) @ (tf.linalg.pinv(J1 @ tf.transpose(J1))
                                             @ (J1 @ step[:, None])), [-1])
i = 0
for v, b in zip(variables, before):
    size = int(tf.size(v))
    v.assign(b + tf.reshape(step[i:i + size], v.shape))
    i += size
""")

# %%
section("6. Restoring steps: back onto the constraint", """
    Projection keeps out1 to first order only; the level set curves (figures/
    projection_geometry.png). A few Gauss-Newton steps theta <- theta - J1.T (J1 J1.T)^+ (out1(theta)
    - out1_ref), with J1 recomputed at the current theta, bring out1 back to out1_ref up to
    round-off (mlp_ref.fixes.restore).""")
snippet("restore", "PyTorch", """
out1_ref = model(X)[:, 0].detach()                   # taken BEFORE the step
for _ in range(20):
    r = model(X)[:, 0].detach() - out1_ref
    if r.abs().max() < 1e-6:                         # float32: ~1e-6 is round-off
        break
    theta = {k: p.detach() for k, p in model.named_parameters()}
    J = vmap(jacrev(out1_of), in_dims=(None, 0))(theta, X)
    J1 = torch.cat([J[k].reshape(len(X), -1) for k in names], dim=1)
    delta = J1.T @ (torch.linalg.pinv(J1 @ J1.T) @ r)
    with torch.no_grad():
        i = 0
        for p in model.parameters():
            p -= delta[i:i + p.numel()].view_as(p)
            i += p.numel()
""")

# %%
section("7. Penalty: a restoring force, not a guarantee", """
    Add lam/2 * ||out1 - out1_ref||^2 to the loss (mlp_ref.fixes.penalty). At the start out1 =
    out1_ref, so the penalty's gradient is zero and the first step is exactly the naive one;
    over many steps it pulls out1 back, but it never holds it fixed.""")
snippet("penalty", "PyTorch", """
lam = 10.0
out = model(X)
loss = (G * out).sum() + lam / 2 * ((out[:, 0] - out1_ref) ** 2).sum()
""")
snippet("penalty", "TensorFlow 2", """
lam = 10.0
out1_ref = tf.stop_gradient(net(X)[:, 0])            # taken once, before training
with tf.GradientTape() as tape:
    out = net(X)
    loss = tf.reduce_sum(G * out) + lam / 2 * tf.reduce_sum(tf.square(out[:, 0] - out1_ref))
""")

# %%
section("What to remember", f"""
    {len(SNIPPETS)} snippets, none of them run here: mlp-ref's package depends on no framework.
    Freezing, separate heads (training only out2's head) and two towers hold out1 exactly on every
    input; a mask alone does not when G's first column
    is already 0; projection holds it to first order on the batch, restoring steps to
    round-off; with Adam, project the update rather than the gradient; a penalty only pulls.""")
