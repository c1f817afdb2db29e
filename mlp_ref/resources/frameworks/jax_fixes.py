"""Every fix of mlp-ref in JAX and optax: functions a student can import, call and read.

    import sys
    from mlp_ref.resources import frameworks_folder
    sys.path.insert(0, str(frameworks_folder()))      # this file's folder, inside the package
    import jax_fixes

(JAX, optax and mlp-ref needed: pip install -e '.[frameworks]' from the project's root.)

The JAX way: parameters are a pytree of immutable arrays (here a dict W1, b1, W2, ... as in
mlp-ref, and z = a @ W + b as in the answer's TensorFlow code and Flax's ``Dense``), the network
is a pure function ``apply(params, X)``, and every derivative is a transformation of it:
``jax.vjp`` for the gradient, ``jax.lax.stop_gradient`` to cut a parameter out of it,
``jax.linearize`` and ``jax.linear_transpose`` for J1 and J1^T as functions, optax for the
optimizers (``optax.partition`` or ``optax.transforms.freeze`` for the answer's ``var_list``).
A rule takes a ``Model``, a batch X and an output gradient G ((K,) or (n, K): G = [0, -1] asks
out2 to rise and out1 to stay), and returns a direction D: a pytree shaped like the parameters.
``Model`` only holds the current params so that the calls read as in torch_fixes and tf_fixes:
``step(model, D, lr)`` makes NEW params theta - lr * D and keeps them there; no array is ever
written. The NumPy reference of each function is named in its docstring;
tests/test_frameworks.py checks that, in float64 from the same weights, each D equals the
reference's to 1e-12.

Precision, said once here and again where it matters:

* Importing this file turns on ``jax_enable_x64``: without it JAX makes every float64 array a
  float32 one, and the checks against mlp-ref could not be made. The switch is JAX's, for the
  whole process: set it before any JAX array is made (here, at import), and a float32 model
  stays float32 (the dtype of its arrays decides; a Python float takes the array's dtype).
* J1 (the Jacobian of the kept output over the batch) and every solve with it are float64, even
  for a float32 model: the question's cross-talk is a tiny component of g (|J1 g| is about
  1e-4 of |J1| |g| on the seed network), so float32 rounding of J1 would leave |J1 D| a
  sizeable fraction of |J1 g|.
* J1 is never built. ``jax.linearize`` gives v -> J1 v, ``jax.linear_transpose`` gives
  a -> J1^T a, and the n x n Gram J1 J1^T is n of their products, as ``mlp_ref.fixes.nullspace``
  does it. Solving with the Gram squares J1's condition number (cond(J1 J1^T) is 2e11 on the
  seed network, five of float64's sixteen digits), so the projection is done three times with
  it: iterative refinement, as mlp-ref does, recovers them.
"""
import jax

jax.config.update("jax_enable_x64", True)     # before any array is made: see the docstring

import jax.numpy as jnp  # noqa: E402  (after the switch above)
import numpy as np  # noqa: E402
import optax  # noqa: E402
from jax.flatten_util import ravel_pytree  # noqa: E402

ACTIVATIONS = {"sigmoid": jax.nn.sigmoid, "tanh": jnp.tanh, "relu": jax.nn.relu,
               "identity": lambda z: z}


class Model:
    """A network as JAX writes one: a pure function ``apply(params, X)`` and its params.

    ``params`` is a dict W1, b1, W2, ... of JAX arrays (a pytree), z_l = a_{l-1} @ W_l + b_l
    as in mlp-ref. The arrays are never changed: a step rebinds ``params`` to new ones.
    """

    def __init__(self, params, activations):
        self.params = params
        self.activations = tuple(activations)

    def apply(self, params, X):
        a = X
        for l, act in enumerate(self.activations, start=1):
            a = ACTIVATIONS[act](a @ params[f"W{l}"] + params[f"b{l}"])
        return a


def model_from(net, dtype=jnp.float64):
    """A ``Model`` with the weights of an ``mlp_ref.MLP``.

    dtype: a JAX or NumPy dtype or its name ("float32"); float32 weights are net's, rounded.
    """
    params = {key: jnp.asarray(value, dtype=dtype) for key, value in net.params.items()}
    return Model(params, net.activations)


def as_mlp_ref(model, D):
    """A direction (a pytree like ``model.params``) as mlp-ref's dict W1, b1, ... (NumPy), in
    mlp-ref's order (a pytree's dict comes back from ``jax.tree.map`` with its keys sorted)."""
    layers = range(1, len(model.activations) + 1)
    return {key: np.asarray(D[key]) for l in layers for key in (f"W{l}", f"b{l}")}


def tensor(array, model):
    """An array as a JAX array of the model's dtype."""
    return jnp.asarray(array, dtype=model.params["W1"].dtype)


def outputs(model, X):
    """model(X) as a NumPy array (n, K)."""
    return np.asarray(model.apply(model.params, tensor(X, model)))


def step(model, D, lr):
    """theta <- theta - lr * D: new params, kept in ``model`` (D may be float64: rounded)."""
    model.params = jax.tree.map(lambda p, d: p - lr * d.astype(p.dtype), model.params, D)


def _rows(G, out):
    """G as (n, K) in the output's dtype: a (K,) G is the same gradient for every row."""
    return jnp.broadcast_to(jnp.asarray(G, dtype=out.dtype), out.shape)


def naive(model, X, G):
    """The plain gradient g = sum_k J_k^T G[:, k] (``mlp_ref.fixes.naive``).

    ``jax.vjp`` returns the outputs and the function G -> G . d out / d theta, the
    vector-Jacobian product that mlp-ref's ``net.backward(record, G)`` computes.
    """
    out, vjp = jax.vjp(lambda params: model.apply(params, tensor(X, model)), model.params)
    return vjp(_rows(G, out))[0]


def output_layer(model):
    """The names of the last layer's parameters: the answer's var_list [W2, b2]."""
    return [f"W{len(model.activations)}", f"b{len(model.activations)}"]


def freeze(model, X, G, trainable=None):
    """The answer's ``var_list=[W2, b2]`` (``mlp_ref.fixes.freeze``): only ``trainable`` learns.

    ``jax.lax.stop_gradient`` on every other parameter: the network reads their values, the
    derivative does not see them, and their direction is exactly 0. (In a training loop the
    optimizer says it: ``sgd_var_list``.) With G = [0, -1] the output layer's out1 column has a
    zero gradient, so out1 reads nothing that moves: unchanged, bit for bit, on every input.
    """
    trainable = output_layer(model) if trainable is None else list(trainable)

    def out(params):
        held = {k: v if k in trainable else jax.lax.stop_gradient(v) for k, v in params.items()}
        return model.apply(held, tensor(X, model))
    out_, vjp = jax.vjp(out, model.params)
    return vjp(_rows(G, out_))[0]


def sgd_var_list(model, lr, trainable=None):
    """Plain SGD on ``trainable`` only (default: the output layer), every other parameter held:
    ``optax.partition`` gives each label its own transformation, ``set_to_zero`` to the frozen.

    ``optax.transforms.freeze(mask)`` chained before ``optax.sgd`` does the same. NOT
    ``optax.masked(optax.sgd(lr), trainable)``: see ``sgd_masked``.
    """
    trainable = output_layer(model) if trainable is None else list(trainable)
    labels = {k: "train" if k in trainable else "frozen" for k in model.params}
    return optax.partition({"train": optax.sgd(lr), "frozen": optax.set_to_zero()}, labels)


def sgd_masked(model, lr, trainable=None):
    """What NOT to do, kept to measure it: ``optax.masked(optax.sgd(lr), trainable)``.

    ``optax.masked`` applies the inner transformation to the leaves the mask marks True and
    passes the others' updates through UNCHANGED: a frozen parameter's update is its raw
    gradient g, and ``optax.apply_updates`` adds it, theta + g, a step of size 1 up the
    gradient. The "frozen" layer moves, and out1 with it.
    """
    trainable = output_layer(model) if trainable is None else list(trainable)
    return optax.masked(optax.sgd(lr), {k: k in trainable for k in model.params})


class Optimizer:
    """An optax transformation ``tx`` and its ``state``: what a ``torch.optim`` object keeps
    inside itself."""

    def __init__(self, tx, state):
        self.tx, self.state = tx, state


def optimizer(model, tx):
    """``tx`` (an optax GradientTransformation) with its state initialised on model's params."""
    return Optimizer(tx, tx.init(model.params))


def optax_step(model, opt, X, G):
    """One step of the optimizer on the gradient ``naive(model, X, G)``: optax's update, added
    to the params by ``optax.apply_updates``. Returns the update (theta_new - theta)."""
    updates, opt.state = opt.tx.update(naive(model, X, G), opt.state, model.params)
    model.params = optax.apply_updates(model.params, updates)
    return updates


def masked_loss(out, Y, mask):
    """The answer's loss2, ``mean((mask * out - Y)^2)`` (``mlp_ref.losses.masked_mse``).

    The answer masks the output, not the target: a masked column still adds Y^2 to the value,
    a constant. ``mean((mask * (out - Y))^2)`` has the same gradient for a 0/1 mask
    (mask^2 = mask) but a smaller value.
    """
    return jnp.mean((mask * out - Y) ** 2)


def masked(model, X, Y, mask):
    """The gradient of the answer's masked loss (``mlp_ref.fixes.masked`` with the MSE's G).

    Returns (loss value, D). The mask zeroes out1's column of dL/dout. When that column is
    already zero, as with the question's G = [0, -1], the mask changes nothing.
    """
    def loss(params):
        return masked_loss(model.apply(params, tensor(X, model)), tensor(Y, model),
                           tensor(mask, model))
    value, D = jax.value_and_grad(loss)(model.params)
    return float(value), D


def flat(D):
    """A direction as one vector (``ravel_pytree``'s order: the dict's keys sorted)."""
    return ravel_pytree(D)[0]


def jacobian(model, X, keep=0):
    """J1 built, shape (n, P), float64, columns in ``flat``'s order: for checking and for
    teaching only (``project`` and ``restore`` never build it; ``jax.jacrev``, one reverse pass
    per row)."""
    theta, unflat = ravel_pytree(jax.tree.map(lambda p: p.astype(jnp.float64), model.params))
    X64 = tensor(X, model).astype(jnp.float64)             # the inputs the model itself sees
    return jax.jacrev(lambda v: model.apply(unflat(v), X64)[:, keep])(theta)


def linearized(model, X, keep=0):
    """J1 and J1^T as functions, at the model's weights in float64, and the Gram J1 J1^T.

    ``jax.linearize`` evaluates out_keep and returns v -> J1 v (forward mode, one pass per v);
    ``jax.linear_transpose`` turns it into a -> J1^T a. The (n, n) Gram is J1 (J1^T e_i) for
    each unit vector e_i, ``jax.vmap``-ed: n products, never the (n, P) J1. A float32 model's
    weights are cast to float64 first: the exact Jacobian of ITS weights, without float32
    rounding. Returns (J1, J1T, gram).
    """
    theta = jax.tree.map(lambda p: p.astype(jnp.float64), model.params)
    X64 = tensor(X, model).astype(jnp.float64)             # the inputs the model itself sees
    out_keep, J1 = jax.linearize(lambda params: model.apply(params, X64)[:, keep], theta)
    transposed = jax.linear_transpose(J1, theta)

    def J1T(a):
        return transposed(a)[0]                            # one cotangent per argument: one
    gram = jax.vmap(lambda e: J1(J1T(e)))(jnp.eye(out_keep.shape[0], dtype=jnp.float64))
    return J1, J1T, gram


def gram_pinv(gram):
    """(J1 J1^T)^+, from its eigendecomposition (``hermitian=True``), eigenvalues below
    n eps * the largest dropped as zero: redundant constraints are harmless, as in
    ``mlp_ref.pseudoinverse.GramSolver``."""
    n = gram.shape[0]
    return jnp.linalg.pinv(gram, rtol=n * jnp.finfo(gram.dtype).eps, hermitian=True)


def remove_rows(J1, J1T, inverse, v, passes=3):
    """v - J1^T (J1 J1^T)^+ J1 v: v's part in the null space of J1 (a pytree like the params).

    Done ``passes`` times (iterative refinement, as ``mlp_ref.fixes.nullspace``): the Gram
    squares J1's condition number, so each pass leaves of |J1 v| up to eps * cond(J1 J1^T) of
    what it found (5e-5 on the seed network), and on the seed network two passes leave more
    than the round-off that mlp-ref's projection reaches: three are needed.
    """
    for _ in range(passes):
        v = jax.tree.map(jnp.subtract, v, J1T(inverse @ J1(v)))
    return v


def project(model, X, G, keep=0):
    """Null-space projection (``mlp_ref.fixes.project``): D = g - J1^T (J1 J1^T)^+ J1 g.

    J1 D = 0, so out_keep moves O(lr^2) on the batch (O(lr) on other inputs). g, J1 and D are
    float64 whatever the model's dtype; ``step`` rounds lr * D to the parameters' dtype.
    """
    J1, J1T, gram = linearized(model, X, keep)
    g = jax.tree.map(lambda d: d.astype(jnp.float64), naive(model, X, G))
    return remove_rows(J1, J1T, gram_pinv(gram), g)


def restore(model, X, ref, keep=0, rtol=None, max_iter=10):
    """Gauss-Newton back onto {out_keep(X) = ref}, in ``model`` (``mlp_ref.fixes.restore``).

    ref : out_keep(X) taken BEFORE the step that moved it, shape (n,). (Taken after the step,
          the residual is zero and nothing is restored.)
    rtol : stop when max |out_keep - ref| <= rtol * max |ref|; defaults to 1e-12 for a float64
           model and 1e-6 for float32 (its round-off: a float32 weight moves by at least one
           part in 1.7e7).

    Each iteration takes the smallest step delta with J1 delta = r, r = out_keep(X) - ref:
    delta = J1^T (J1 J1^T)^+ r, J1 linearized again at the current weights in float64. Returns
    the residuals max |out_keep - ref|, before each iteration and after the last.
    """
    dtype = model.params["W1"].dtype
    rtol = (1e-12 if dtype == jnp.float64 else 1e-6) if rtol is None else rtol
    ref = jnp.asarray(ref, dtype=jnp.float64)
    scale = float(jnp.max(jnp.abs(ref)))
    history = []
    for it in range(max_iter + 1):
        r = model.apply(model.params, tensor(X, model))[:, keep].astype(jnp.float64) - ref
        history.append(float(jnp.max(jnp.abs(r))))
        if history[-1] <= rtol * scale or it == max_iter:
            break
        J1, J1T, gram = linearized(model, X, keep)
        step(model, J1T(gram_pinv(gram) @ r), 1.0)
    return history


def penalty(model, X, G, ref, lam, keep=0):
    """The gradient of sum(G * out) + lam/2 * |out_keep - ref|^2 (``mlp_ref.fixes.penalty``).

    At the start out_keep = ref: the first step is the naive one. Plain gradient descent on the
    penalty alone is stable only while lr * lam * lambda_max(J1 J1^T) < 2
    (``largest_stable_lam``).
    """
    def loss(params):
        out = model.apply(params, tensor(X, model))
        return (jnp.sum(_rows(G, out) * out)
                + lam / 2 * jnp.sum((out[:, keep] - tensor(ref, model)) ** 2))
    return jax.grad(loss)(model.params)


def largest_stable_lam(model, X, lr, keep=0):
    """2 / (lr * lambda_max(J1 J1^T)): a penalty weight above this diverges at this lr
    (``mlp_ref.fixes.penalty_limit(net, X) / lr``).

    Gradient descent on lam/2 |out_keep - ref|^2 multiplies the residual by
    (1 - lr lam J1 J1^T); its largest eigenvalue must stay below 2 in size. lambda_max grows as
    training moves the weights: pick lam well below this.
    """
    gram = linearized(model, X, keep)[2]
    return 2.0 / (lr * float(jnp.linalg.eigvalsh(gram)[-1]))


def adam(model, lr=1e-3, eps=1e-8):
    """``optax.adam`` with its state on the model's params (eps added to sqrt(v_hat), as
    PyTorch and mlp-ref do). Python floats stay exact here: JAX gives them the params' dtype."""
    return optimizer(model, optax.adam(lr, eps=eps))


def adam_projected(model, opt, X, G, keep=0):
    """One step of ``opt`` (``adam(model)``, say) with its UPDATE projected.

    Adam rescales each coordinate: a projected gradient comes out of it no longer in J1's null
    space. So: ask optax for its update u (theta_new = theta + u), and step by U, the
    projection of -u: U - J1^T (J1 J1^T)^+ J1 U (``mlp_ref.optim.Adam(constraint=...,
    order="update")``). In optax the update is a value, not a difference of two weights. J1 is
    linearized here, at the weights before this step: a J1 from an earlier step is stale.
    Returns the applied update U (float64): theta <- theta - U.
    """
    J1, J1T, gram = linearized(model, X, keep)
    updates, opt.state = opt.tx.update(naive(model, X, G), opt.state, model.params)
    U = jax.tree.map(lambda u: -u.astype(jnp.float64), updates)
    U = remove_rows(J1, J1T, gram_pinv(gram), U)
    step(model, U, 1.0)
    return U
