"""Every fix of mlp-ref in PyTorch: functions a student can import, call and read.

    import sys
    from mlp_ref.resources import frameworks_folder
    sys.path.insert(0, str(frameworks_folder()))      # this file's folder, inside the package
    import torch_fixes

(PyTorch and mlp-ref needed: pip install -e '.[frameworks]' from the project's root.)

Each rule takes a model (any ``torch.nn.Module`` mapping X (n, d) to outputs (n, K)), a batch
X and an output gradient G ((K,) or (n, K), as in mlp-ref: G = [0, -1] asks out2 to rise and
out1 to stay), and returns a direction D: a dict ``name -> tensor`` with the keys and shapes
of ``model.named_parameters()``. A step is ``step(model, D, lr)``: theta <- theta - lr * D.
The NumPy reference of each function is named in its docstring; tests/test_frameworks.py
checks that, in float64 from the same weights, each D equals the reference's to 1e-12.

Precision, said once here and again where it matters:

* J1 (the Jacobian of the kept output over the batch) and every solve with it are computed in
  float64, even for a float32 model: the question's cross-talk is a tiny component of g
  (|J1 g| is about 1e-4 of |J1| |g| on the seed network), so float32 rounding of J1, about
  1e-7 |J1|, would leave |J1 D| a sizeable fraction of |J1 g|.
* The solve is a least-squares problem on J1 itself (``torch.linalg.lstsq``, SVD driver), never
  ``pinv(J1 @ J1.T)``: forming J1 J1^T squares J1's condition number (cond(J1 J1^T) is 2e11
  on the seed network), and that alone costs more digits than float32 has.
"""
import torch
from torch.func import functional_call, jacrev

ACTIVATIONS = {"sigmoid": torch.nn.Sigmoid, "tanh": torch.nn.Tanh, "relu": torch.nn.ReLU}


def model_from(net, dtype=torch.float64):
    """An ``nn.Sequential`` of ``nn.Linear`` layers with the weights of an ``mlp_ref.MLP``.

    mlp-ref writes z = a @ W + b (rows are samples, as the answer's TensorFlow code);
    ``nn.Linear`` stores weight = W.T and computes the same z = a @ weight.T + bias.
    dtype: a torch dtype or its name ("float32"); float32 weights are net's, rounded.
    """
    dtype = getattr(torch, dtype) if isinstance(dtype, str) else dtype
    layers = []
    for l, act in enumerate(net.activations, start=1):
        W, b = net.params[f"W{l}"], net.params[f"b{l}"]
        linear = torch.nn.Linear(*W.shape, dtype=dtype)
        with torch.no_grad():
            linear.weight.copy_(torch.as_tensor(W.T))
            linear.bias.copy_(torch.as_tensor(b))
        layers.append(linear)
        if act != "identity":
            layers.append(ACTIVATIONS[act]())
    return torch.nn.Sequential(*layers)


def as_mlp_ref(model, D):
    """A direction of ``model`` (name -> tensor) as mlp-ref's dict W1, b1, W2, ... (NumPy)."""
    linears = [m for m in model.modules() if isinstance(m, torch.nn.Linear)]
    by_param = {id(p): name for name, p in model.named_parameters()}
    out = {}
    for l, linear in enumerate(linears, start=1):
        out[f"W{l}"] = D[by_param[id(linear.weight)]].detach().numpy().T
        out[f"b{l}"] = D[by_param[id(linear.bias)]].detach().numpy()
    return out


def tensor(array, model):
    """An array (NumPy or nested lists) as a tensor of the model's dtype."""
    return torch.as_tensor(array, dtype=next(model.parameters()).dtype)


def outputs(model, X):
    """model(X) as a NumPy array (n, K), with no graph kept."""
    with torch.no_grad():
        return model(tensor(X, model)).numpy()


def snapshot(model):
    """A copy of every parameter, as it is now: name -> tensor.

    The trap: ``{k: p.detach() for k, p in model.named_parameters()}`` is NOT a copy.
    ``detach()`` returns a tensor that shares p's storage, only cut from the autograd graph,
    so after an in-place step (``p -= lr * d``, or ``opt.step()``) it holds the NEW values, and
    "before minus after" is zero. ``.clone()`` copies the numbers.
    """
    return {name: p.detach().clone() for name, p in model.named_parameters()}


def step(model, D, lr):
    """theta <- theta - lr * D, in place (D may be float64 for a float32 model: rounded)."""
    with torch.no_grad():
        for name, p in model.named_parameters():
            p -= lr * D[name].to(p.dtype)


def _rows(G, out):
    """G as (n, K) in the output's dtype: a (K,) G is the same gradient for every row."""
    return torch.as_tensor(G, dtype=out.dtype).expand_as(out)


def naive(model, X, G):
    """The plain gradient g = sum_k J_k^T G[:, k] (``mlp_ref.fixes.naive``).

    ``torch.autograd.grad(out, params, grad_outputs=G)`` is the vector-Jacobian product
    G . d out / d theta: what ``out.backward(G)`` leaves in ``p.grad``, and what mlp-ref's
    ``net.backward(record, G)`` returns. Parameters with ``requires_grad=False`` (frozen) get
    a zero direction.
    """
    out = model(tensor(X, model))
    trainable = {n: p for n, p in model.named_parameters() if p.requires_grad}
    grads = torch.autograd.grad(out, list(trainable.values()), grad_outputs=_rows(G, out))
    grads = dict(zip(trainable, grads))
    return {n: grads[n] if n in grads else torch.zeros_like(p)
            for n, p in model.named_parameters()}


def output_layer(model):
    """The names of the last ``nn.Linear``'s parameters: the answer's var_list [W2, b2]."""
    last = [m for m in model.modules() if isinstance(m, torch.nn.Linear)][-1]
    mine = {id(last.weight), id(last.bias)}
    return [name for name, p in model.named_parameters() if id(p) in mine]


def freeze(model, X, G, trainable=None):
    """The answer's ``var_list=[W2, b2]`` (``mlp_ref.fixes.freeze``): only ``trainable`` learns.

    PyTorch's way is a setting of the model: ``requires_grad_(False)`` on every other parameter
    (they stay frozen afterwards; give an optimizer only ``[p for p in model.parameters() if
    p.requires_grad]``, as the answer gives ``var_list``). With G = [0, -1] the output layer's
    out1 row has a zero gradient, so out1 reads nothing that moves: unchanged, bit for bit, on
    every input.
    """
    trainable = output_layer(model) if trainable is None else list(trainable)
    for name, p in model.named_parameters():
        p.requires_grad_(name in trainable)
    return naive(model, X, G)


def masked_loss(out, Y, mask):
    """The answer's loss2, ``mean((mask * out - Y)^2)`` (``mlp_ref.losses.masked_mse``).

    The answer masks the output, not the target: a masked column still adds Y^2 to the value,
    a constant. ``mean((mask * (out - Y))^2)`` has the same gradient for a 0/1 mask
    (mask^2 = mask) but a smaller value.
    """
    return ((mask * out - Y) ** 2).mean()


def masked(model, X, Y, mask):
    """The gradient of the answer's masked loss (``mlp_ref.fixes.masked`` with the MSE's G).

    Returns (loss value, D). The mask zeroes out1's column of dL/dout. When that column is
    already zero, as with the question's G = [0, -1], the mask changes nothing.
    """
    loss = masked_loss(model(tensor(X, model)), tensor(Y, model), tensor(mask, model))
    names, params = zip(*model.named_parameters())
    return loss.item(), dict(zip(names, torch.autograd.grad(loss, params)))


def flat(D):
    """A direction as one vector, in the order of ``model.named_parameters()`` (D's order)."""
    return torch.cat([d.reshape(-1) for d in D.values()])


def unflat(vector, model):
    """The inverse of ``flat``: name -> tensor shaped like the parameter."""
    out, i = {}, 0
    for name, p in model.named_parameters():
        out[name] = vector[i:i + p.numel()].view_as(p)
        i += p.numel()
    return out


def jacobian(model, X, keep=0, dtype=torch.float64):
    """J1, shape (n, P): row i is d out_keep(x_i) / d theta, in float64 unless told otherwise.

    ``functional_call`` runs the model on float64 copies of its parameters, so a float32 model
    gets the exact Jacobian of ITS weights, without float32 rounding; ``jacrev`` differentiates
    that function of the parameters, one reverse pass per row.
    """
    theta = {name: p.detach().to(dtype) for name, p in model.named_parameters()}
    X_ = tensor(X, model).to(dtype)                        # the inputs the model itself sees

    def out_keep(params):
        return functional_call(model, params, (X_,))[:, keep]

    blocks = jacrev(out_keep)(theta)                       # name -> (n, *shape)
    return torch.cat([blocks[name].reshape(len(X_), -1) for name in theta], dim=1)


def remove_rows(J1, v):
    """v - J1^T alpha with alpha = argmin |J1^T alpha - v|: v's part in the null space of J1.

    A least-squares solve on J1^T (SVD driver, rank-revealing: redundant rows are harmless),
    never on J1 J1^T, whose condition number is the square of J1's. Done twice: the second pass
    removes what rounding left of J1 v (iterative refinement, as ``mlp_ref.fixes.nullspace``).
    """
    for _ in range(2):
        alpha = torch.linalg.lstsq(J1.T, v[:, None], driver="gelsd").solution[:, 0]
        v = v - J1.T @ alpha
    return v


def project(model, X, G, keep=0):
    """Null-space projection (``mlp_ref.fixes.project``): D = g - J1^T (J1 J1^T)^+ J1 g.

    J1 D = 0, so out_keep moves O(lr^2) on the batch (O(lr) on other inputs). g, J1 and D are
    float64 whatever the model's dtype; ``step`` rounds lr * D to the parameters' dtype.
    """
    J1 = jacobian(model, X, keep)
    g = flat(naive(model, X, G)).to(torch.float64)
    return unflat(remove_rows(J1, g), model)


def project_with_pinv(model, X, G, keep=0):
    """What NOT to do, kept to measure it: J1 in the model's own dtype, then pinv(J1 @ J1.T).

    In float32 on the seed network, J1's own rounding (about 1e-7 |J1|) and the squared
    condition number of J1 J1^T leave |J1 D| above 1e-4 |J1 g|, where ``project`` stays under
    1e-5.
    """
    J1 = jacobian(model, X, keep, dtype=next(model.parameters()).dtype)
    g = flat(naive(model, X, G))
    return unflat(g - J1.T @ (torch.linalg.pinv(J1 @ J1.T) @ (J1 @ g)), model)


def restore(model, X, ref, keep=0, rtol=None, max_iter=10):
    """Gauss-Newton back onto {out_keep(X) = ref}, in place (``mlp_ref.fixes.restore``).

    ref : out_keep(X) taken BEFORE the step that moved it, shape (n,). (Taken after the step,
          the residual is zero and nothing is restored.)
    rtol : stop when max |out_keep - ref| <= rtol * max |ref|; defaults to 1e-12 for a float64
           model and 1e-6 for float32 (its round-off: a float32 weight moves by at least one
           part in 1.7e7).

    Each iteration takes the smallest step delta with J1 delta = r, r = out_keep(X) - ref:
    delta = lstsq(J1, r), J1 recomputed at the current weights in float64. Returns the residuals
    max |out_keep - ref|, before each iteration and after the last.
    """
    dtype = next(model.parameters()).dtype
    rtol = (1e-12 if dtype == torch.float64 else 1e-6) if rtol is None else rtol
    ref = torch.as_tensor(ref).to(torch.float64)
    history = []
    for it in range(max_iter + 1):
        with torch.no_grad():
            r = model(tensor(X, model))[:, keep].to(torch.float64) - ref
        history.append(r.abs().max().item())
        if history[-1] <= rtol * ref.abs().max().item() or it == max_iter:
            break
        delta = torch.linalg.lstsq(jacobian(model, X, keep), r[:, None], driver="gelsd")
        step(model, unflat(delta.solution[:, 0], model), 1.0)
    return history


def penalty(model, X, G, ref, lam, keep=0):
    """The gradient of sum(G * out) + lam/2 * |out_keep - ref|^2 (``mlp_ref.fixes.penalty``).

    At the start out_keep = ref: the first step is the naive one. Plain gradient descent on the
    penalty alone is stable only while lr * lam * lambda_max(J1 J1^T) < 2
    (``largest_stable_lam``).
    """
    out = model(tensor(X, model))
    held = out[:, keep] - tensor(ref, model)
    loss = (_rows(G, out) * out).sum() + lam / 2 * (held ** 2).sum()
    names, params = zip(*model.named_parameters())
    return dict(zip(names, torch.autograd.grad(loss, params)))


def largest_stable_lam(model, X, lr, keep=0):
    """2 / (lr * lambda_max(J1 J1^T)): a penalty weight above this diverges at this lr
    (``mlp_ref.fixes.penalty_limit(net, X) / lr``).

    Gradient descent on lam/2 |out_keep - ref|^2 moves the residual by (1 - lr lam J1 J1^T);
    its largest eigenvalue must stay below 2 in size. lambda_max grows as training moves the
    weights: pick lam well below this.
    """
    J1 = jacobian(model, X, keep)
    return 2.0 / (lr * torch.linalg.eigvalsh(J1 @ J1.T)[-1].item())


def adam(model, lr=1e-3, eps=1e-8):
    """``torch.optim.Adam`` over every parameter (eps added to sqrt(v_hat), as in mlp-ref)."""
    return torch.optim.Adam(model.parameters(), lr=lr, eps=eps)


def adam_projected(model, opt, X, G, keep=0):
    """One step of ``opt`` (say ``torch.optim.Adam``) with its UPDATE projected, in place.

    Adam rescales each coordinate: a projected gradient comes out of it no longer in J1's null
    space. So: let the optimizer step, take its update U = before - after (theta <- theta - U),
    and replace it by U - J1^T (J1 J1^T)^+ J1 U (``mlp_ref.optim.Adam(constraint=...,
    order="update")``). J1 is computed here, at the weights before this step: a J1 from an
    earlier step is stale. ``before`` is a ``snapshot`` (clone), not ``detach()``, which would
    follow the step. Returns the applied update U (float64).
    """
    J1 = jacobian(model, X, keep)
    before = snapshot(model)
    opt.zero_grad()
    out = model(tensor(X, model))
    out.backward(_rows(G, out))                            # p.grad = G . d out / d p
    opt.step()                                             # Adam's step, not yet constrained
    after = snapshot(model)
    update = flat({n: before[n] - after[n] for n in before}).to(torch.float64)
    U = unflat(remove_rows(J1, update), model)
    with torch.no_grad():
        for name, p in model.named_parameters():
            p.copy_(before[name] - U[name].to(p.dtype))
    return U
