"""Every fix of mlp-ref in TensorFlow 2: functions a student can import, call and read.

    import sys
    from mlp_ref.resources import frameworks_folder
    sys.path.insert(0, str(frameworks_folder()))      # this file's folder, inside the package
    import tf_fixes

(TensorFlow and mlp-ref needed: pip install -e '.[frameworks]' from the project's root.)

The TF 2 way: eager tensors, ``tf.GradientTape`` for every derivative, lists of variables
(the answer's ``var_list``) to say what learns, ``tf.linalg`` for the solves. Each rule takes a
model (callable on X (n, d) -> (n, K), with ``trainable_variables``), a batch X and an output
gradient G ((K,) or (n, K): G = [0, -1] asks out2 to rise and out1 to stay), and returns a
direction D: a list of tensors, one per ``model.trainable_variables``, as ``tape.gradient``
returns them. A step is ``step(model, D, lr)``: theta <- theta - lr * D. The NumPy reference
of each function is named in its docstring; tests/test_frameworks.py checks that, in
float64 from the same weights, each D equals the reference's to 1e-12.

Precision, said once here and again where it matters:

* J1 (the Jacobian of the kept output over the batch) and every solve with it are float64,
  even for a float32 model: the question's cross-talk is a tiny component of g (|J1 g| is
  about 1e-4 of |J1| |g| on the seed network), so float32 rounding of J1 would leave |J1 D| a
  sizeable fraction of |J1 g|.
* The solve is a least-squares problem on J1 itself (``tf.linalg.lstsq(..., fast=False)``, a
  complete orthogonal decomposition), never ``pinv(J1 @ J1^T)`` nor ``fast=True`` (Cholesky of
  the normal equations): forming J1 J1^T squares J1's condition number, 2e11 on the seed network.
* A Python float handed to TensorFlow or Keras often becomes a float32: TF1's
  ``GradientDescentOptimizer(0.1)`` steps by 0.10000000149..., Keras keeps a learning rate in a
  float32 variable. Where it matters we pass float64 tensors or a callable.
"""
import tensorflow as tf

ACTIVATIONS = {"sigmoid": tf.sigmoid, "tanh": tf.tanh, "relu": tf.nn.relu,
               "identity": tf.identity}


def as_dtype(x, dtype):
    """x (a tensor, a NumPy array, a Python float or list) as a tensor of ``dtype``.

    ``tf.cast(0.999, tf.float64)`` is 0.9990000128...: a Python float is first made a float32
    tensor, then cast. ``tf.convert_to_tensor(x, dtype)`` converts it straight to the dtype.
    """
    return tf.cast(x, dtype) if tf.is_tensor(x) else tf.convert_to_tensor(x, dtype=dtype)


class MLP(tf.Module):
    """z_l = a_{l-1} @ W_l + b_l, a_l = f_l(z_l): the answer's network in TF 2.

    ``params`` is the list [W1, b1, W2, b2, ...] of ``tf.Variable`` (named as in mlp-ref, in
    the row-vector convention of the answer's code); ``apply(params, X)`` runs the same network
    on any list of tensors in their place, which is how J1 is computed in float64.
    """

    def __init__(self, net, dtype=tf.float64):
        super().__init__(name="mlp")
        self.activations = list(net.activations)
        self.params = [tf.Variable(as_dtype(value, tf.as_dtype(dtype)), name=key)
                       for key, value in net.params.items()]

    def apply(self, params, X):
        a = X
        for l, act in enumerate(self.activations):
            a = ACTIVATIONS[act](a @ params[2 * l] + params[2 * l + 1])
        return a

    def __call__(self, X):
        return self.apply(self.params, X)


def model_from(net, dtype=tf.float64):
    """A TF 2 ``MLP`` with the weights of an ``mlp_ref.MLP``.

    dtype: a tf dtype or its name ("float32"); float32 weights are net's, rounded.
    """
    return MLP(net, dtype)


def tensor(array, model):
    """An array as a tensor of the model's dtype."""
    return as_dtype(array, model.trainable_variables[0].dtype)


def outputs(model, X):
    """model(X) as a NumPy array (n, K)."""
    return model(tensor(X, model)).numpy()


def as_mlp_ref(model, D):
    """A direction (one tensor per trainable variable) as mlp-ref's dict W1, b1, ... (NumPy)."""
    return {v.name.split(":")[0]: d.numpy() for v, d in zip(model.trainable_variables, D)}


def step(model, D, lr):
    """theta <- theta - lr * D, in place (D may be float64 for a float32 model: rounded)."""
    for v, d in zip(model.trainable_variables, D):
        v.assign_sub(tf.cast(lr * d, v.dtype))


def _rows(G, out):
    """G as (n, K) in the output's dtype: a (K,) G is the same gradient for every row."""
    return tf.broadcast_to(as_dtype(G, out.dtype), tf.shape(out))


def naive(model, X, G, var_list=None):
    """The plain gradient g = sum_k J_k^T G[:, k] (``mlp_ref.fixes.naive``).

    ``tape.gradient(out, variables, output_gradients=G)`` is the vector-Jacobian product
    G . d out / d theta, what mlp-ref's ``net.backward(record, G)`` returns. Variables not in
    ``var_list`` (default: all) get a zero direction.
    """
    variables = model.trainable_variables
    var_list = variables if var_list is None else var_list
    with tf.GradientTape() as tape:
        out = model(tensor(X, model))
    grads = tape.gradient(out, var_list, output_gradients=_rows(G, out))
    by_ref = {v.ref(): g for v, g in zip(var_list, grads)}
    return [by_ref.get(v.ref(), tf.zeros_like(v)) for v in variables]


def freeze(model, X, G, var_list=None):
    """The answer's ``minimize(loss, var_list=[W2, b2])`` (``mlp_ref.fixes.freeze``).

    Only the variables in ``var_list`` (default: the output layer's, the last two) get a
    gradient; with Keras layers, ``layer.trainable = False`` does the same. With G = [0, -1]
    out1's column of W2 and b2 has a zero gradient, so out1 reads nothing that moves: unchanged,
    bit for bit, on every input.
    """
    var_list = model.trainable_variables[-2:] if var_list is None else var_list
    return naive(model, X, G, var_list)


def masked_loss(out, Y, mask):
    """The answer's loss2, ``reduce_mean(square(mask * out - Y))`` (``losses.masked_mse``).

    The answer masks the output, not the target: a masked column still adds Y^2 to the value,
    a constant. ``mean((mask * (out - Y))^2)`` has the same gradient for a 0/1 mask
    (mask^2 = mask) but a smaller value.
    """
    return tf.reduce_mean(tf.square(mask * out - Y))


def masked(model, X, Y, mask):
    """The gradient of the answer's masked loss (``mlp_ref.fixes.masked`` with the MSE's G).

    Returns (loss value, D). The mask zeroes out1's column of dL/dout. When that column is
    already zero, as with the question's G = [0, -1], the mask changes nothing.
    """
    variables = model.trainable_variables
    with tf.GradientTape() as tape:
        loss = masked_loss(model(tensor(X, model)), tensor(Y, model), tensor(mask, model))
    return float(loss), tape.gradient(loss, variables)


def flat(D):
    """A direction as one vector, in the order of ``model.trainable_variables``."""
    return tf.concat([tf.reshape(d, [-1]) for d in D], axis=0)


def unflat(vector, model):
    """The inverse of ``flat``: one tensor per trainable variable, shaped like it."""
    out, i = [], 0
    for v in model.trainable_variables:
        size = v.shape.num_elements()
        out.append(tf.reshape(vector[i:i + size], v.shape))
        i += size
    return out


def jacobian(model, X, keep=0):
    """J1, shape (n, P): row i is d out_keep(x_i) / d theta, always in float64.

    ``model.apply`` runs the network on float64 copies of its variables, so a float32 model
    gets the exact Jacobian of ITS weights. ``experimental_use_pfor=False``: the vectorized
    jacobian builds a new graph at every eager call, far slower here than a loop of n = 8
    gradients (one per row).
    """
    theta = [tf.cast(v, tf.float64) for v in model.trainable_variables]
    X64 = tf.cast(tensor(X, model), tf.float64)          # the inputs the model itself sees
    with tf.GradientTape(persistent=True) as tape:      # persistent: one gradient per row
        tape.watch(theta)
        out_keep = model.apply(theta, X64)[:, keep]     # slice INSIDE the tape, or it is lost
    blocks = tape.jacobian(out_keep, theta, experimental_use_pfor=False)   # (n, *shape) each
    n = X64.shape[0]
    return tf.concat([tf.reshape(b, [n, -1]) for b in blocks], axis=1)


def remove_rows(J1, v):
    """v - J1^T alpha with alpha = argmin |J1^T alpha - v|: v's part in the null space of J1.

    ``fast=False``: a complete orthogonal decomposition of J1^T, rank-revealing (redundant rows
    are harmless); ``fast=True`` would solve the normal equations with J1 J1^T, squaring the
    condition number. Done twice: the second pass removes what rounding left of J1 v
    (iterative refinement, as ``mlp_ref.fixes.nullspace``).
    """
    for _ in range(2):
        alpha = tf.linalg.lstsq(tf.transpose(J1), v[:, None], fast=False)
        v = v - (tf.transpose(J1) @ alpha)[:, 0]
    return v


def project(model, X, G, keep=0):
    """Null-space projection (``mlp_ref.fixes.project``): D = g - J1^T (J1 J1^T)^+ J1 g.

    J1 D = 0, so out_keep moves O(lr^2) on the batch (O(lr) on other inputs). g, J1 and D are
    float64 whatever the model's dtype; ``step`` rounds lr * D to the variables' dtype.
    """
    J1 = jacobian(model, X, keep)
    g = tf.cast(flat(naive(model, X, G)), tf.float64)
    return unflat(remove_rows(J1, g), model)


def restore(model, X, ref, keep=0, rtol=None, max_iter=10):
    """Gauss-Newton back onto {out_keep(X) = ref}, in place (``mlp_ref.fixes.restore``).

    ref : out_keep(X) taken BEFORE the step that moved it, shape (n,). (Taken after the step,
          the residual is zero and nothing is restored.)
    rtol : stop when max |out_keep - ref| <= rtol * max |ref|; defaults to 1e-12 for a float64
           model and 1e-6 for float32 (its round-off: a float32 weight moves by at least one
           part in 1.7e7).

    Each iteration takes the smallest step delta with J1 delta = r, r = out_keep(X) - ref:
    delta = lstsq(J1, r), J1 recomputed at the current weights in float64. Returns the
    residuals max |out_keep - ref|, before each iteration and after the last.
    """
    dtype = model.trainable_variables[0].dtype
    rtol = (1e-12 if dtype == tf.float64 else 1e-6) if rtol is None else rtol
    ref = as_dtype(ref, tf.float64)
    scale = float(tf.reduce_max(tf.abs(ref)))
    history = []
    for it in range(max_iter + 1):
        r = tf.cast(model(tensor(X, model))[:, keep], tf.float64) - ref
        history.append(float(tf.reduce_max(tf.abs(r))))
        if history[-1] <= rtol * scale or it == max_iter:
            break
        delta = tf.linalg.lstsq(jacobian(model, X, keep), r[:, None], fast=False)[:, 0]
        step(model, unflat(delta, model), 1.0)
    return history


def penalty(model, X, G, ref, lam, keep=0):
    """The gradient of sum(G * out) + lam/2 * |out_keep - ref|^2 (``mlp_ref.fixes.penalty``).

    At the start out_keep = ref: the first step is the naive one. Plain gradient descent on the
    penalty alone is stable only while lr * lam * lambda_max(J1 J1^T) < 2
    (``largest_stable_lam``).
    """
    variables = model.trainable_variables
    with tf.GradientTape() as tape:
        out = model(tensor(X, model))
        loss = (tf.reduce_sum(_rows(G, out) * out)
                + lam / 2 * tf.reduce_sum(tf.square(out[:, keep] - tensor(ref, model))))
    return tape.gradient(loss, variables)


def largest_stable_lam(model, X, lr, keep=0):
    """2 / (lr * lambda_max(J1 J1^T)): a penalty weight above this diverges at this lr
    (``mlp_ref.fixes.penalty_limit(net, X) / lr``).

    Gradient descent on lam/2 |out_keep - ref|^2 multiplies the residual by
    (1 - lr lam J1 J1^T); its largest eigenvalue must stay below 2 in size. lambda_max grows as
    training moves the weights: pick lam well below this.
    """
    J1 = jacobian(model, X, keep)
    return 2.0 / (lr * float(tf.linalg.eigvalsh(J1 @ tf.transpose(J1))[-1]))


def adam(model, lr=1e-3, eps=1e-7):
    """``tf.keras.optimizers.Adam`` whose numbers have the model's dtype.

    Keras keeps a float learning rate in a float32 variable and casts beta_1, beta_2 through
    float32 (0.999 becomes 0.9990000128...), so even a float64 model would be stepped with
    float32 constants; tensors of the model's dtype (the learning rate as a callable) keep them
    exact. Keras adds eps to sqrt(v), not to the bias-corrected sqrt(v_hat) as the paper,
    PyTorch and mlp-ref do; the two agree where |gradient| >> eps.
    """
    def number(x):
        return tensor(x, model)
    return tf.keras.optimizers.Adam(learning_rate=lambda: number(lr), beta_1=number(0.9),
                                    beta_2=number(0.999), epsilon=number(eps))


def adam_projected(model, opt, X, G, keep=0):
    """One step of ``opt`` (``tf.keras.optimizers.Adam``, say), its UPDATE projected, in place.

    Adam rescales each coordinate: a projected gradient comes out of it no longer in J1's null
    space. So: let the optimizer step, take its update U = before - after (theta <- theta - U),
    and replace it by U - J1^T (J1 J1^T)^+ J1 U (``mlp_ref.optim.Adam(constraint=...,
    order="update")``).
    J1 is computed here, at the weights before this step: a J1 from an earlier step is stale.
    Returns the applied update U (float64).
    """
    variables = model.trainable_variables
    J1 = jacobian(model, X, keep)
    before = [tf.identity(v) for v in variables]    # copies: a Variable follows its updates
    opt.apply_gradients(zip(naive(model, X, G), variables))
    U = tf.cast(flat([b - v for b, v in zip(before, variables)]), tf.float64)
    U = unflat(remove_rows(J1, U), model)
    for v, b, u in zip(variables, before, U):
        v.assign(b - tf.cast(u, v.dtype))
    return U
