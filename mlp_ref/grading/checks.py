"""The checks of each exercise, run in the grader's process: the reference answers live here.

Each check calls the student's function ``fn`` (a remote call into the submission's child
process, see ``runner``) on small seeded inputs and compares what comes back with the
reference tier: ``MLP.forward``/``backward``, ``fixes``, ``jacobian``, with finite differences
(``gradcheck.numerical_gradient``) for gradients and exact identities or fitted log-log slopes
for the fixes. A wrong answer raises ``Wrong``: the stage or the rule, the worst entry, yours
and ours, and a hint; an answer equal to one of the usual mistakes (``variants``) is named.
"""
from __future__ import annotations

import functools
from dataclasses import dataclass

import numpy as np

from .. import data, fixes, jacobian, losses
from ..gradcheck import numerical_gradient, rel_error_map
from ..network import MLP
from ..setups import G_QUESTION, seed_setup, visible_setup
from .wire import Other

#: The relative error (CS231n's) under which an array counts as right: the project's own
#: gradient-check tolerance, far above float64 round-off and far below any real mistake.
TOL = 1e-7


class Wrong(Exception):
    """What is wrong with one function's answer: the stage or rule, and a hint."""

    def __init__(self, what, hint=""):
        super().__init__(what)
        self.what, self.hint = what, hint


@dataclass
class Verdict:
    function: str
    status: str             # "PASS", "FAIL", "TODO" (not implemented yet) or "ERROR" (raised)
    what: str = ""
    hint: str = ""


# -- comparing ---------------------------------------------------------------------------------
def _number(x):
    return f"{x:+.6e}"


def _matches(theirs, ours, tol, scale):
    errors = rel_error_map(theirs, ours) if scale is None else np.abs(theirs - ours) / scale
    return errors


def compare(stage, theirs, ours, hint="", tol=TOL, fd=None, scale=None, variants=()):
    """Raise Wrong unless ``theirs`` equals ``ours`` (the reference) to ``tol`` in relative error
    (entry by entry, CS231n's), or, given ``scale``, to ``tol * scale`` in absolute error.

    The message names the stage, the worst entry, yours and ours, and, when ``fd`` (finite
    differences) is given, its value there too: the reference is not taken on faith.
    ``variants``: (what, array, hint) of the usual mistakes; an answer equal to one of them (to
    the same tolerance) is told which mistake it is.
    """
    ours = np.asarray(ours, dtype=float)
    if theirs is None:
        raise Wrong(f"stage {stage}: your function returned None (a missing return?)", hint)
    if isinstance(theirs, Other):
        raise Wrong(f"stage {stage}: not an array of the expected shape {ours.shape}: got "
                    f"{theirs.type_name}", hint)
    try:
        theirs = np.asarray(theirs, dtype=float)
    except (TypeError, ValueError):
        raise Wrong(f"stage {stage}: not an array of the expected shape {ours.shape}: got "
                    f"{type(theirs).__name__}", hint) from None
    if theirs.shape != ours.shape:
        transposed = " (transposed?)" if theirs.shape == ours.shape[::-1] else ""
        raise Wrong(f"stage {stage}: shape {theirs.shape}, expected {ours.shape}{transposed}", hint)
    if not np.all(np.isfinite(theirs)):
        index = tuple(int(i) for i in np.argwhere(~np.isfinite(theirs))[0])
        raise Wrong(f"stage {stage}: not finite at {index}: yours {theirs[index]}", hint)
    with np.errstate(all="ignore"):
        errors = _matches(theirs, ours, tol, scale)
    if errors.size and errors.max() > tol:
        for what, variant, variant_hint in variants:
            variant = np.asarray(variant, dtype=float)
            if variant.shape == ours.shape and not np.allclose(variant, ours, rtol=0, atol=0):
                with np.errstate(all="ignore"):
                    if _matches(theirs, variant, tol, scale).max() <= tol:
                        raise Wrong(f"stage {stage}: yours is {what}", variant_hint or hint)
        index = tuple(int(i) for i in np.unravel_index(int(np.argmax(errors)), errors.shape))
        extra = "" if fd is None else f", finite differences {_number(np.asarray(fd)[index])}"
        kind = "relative error" if scale is None else f"error / {scale:.2g}"
        raise Wrong(f"stage {stage}: worst entry {index}: yours {_number(theirs[index])}, "
                    f"ours {_number(ours[index])}{extra} ({kind} {errors[index]:.1e})", hint)


def compare_dict(name, theirs, ours, hint="", tol=TOL, scale=None, variants=()):
    """Compare a dict like params key by key (a direction D), after checking its keys; an
    answer equal, on every key, to one of the ``variants`` (what, dict, hint) is named."""
    if theirs is None:
        raise Wrong(f"{name}: your function returned None (a missing return?)", hint)
    if not isinstance(theirs, dict):
        raise Wrong(f"{name}: expected a dict with keys {list(ours)}, got {type(theirs).__name__}",
                    hint)
    if set(theirs) != set(ours):                          # in any order, as net.step takes them
        missing = [k for k in ours if k not in theirs]
        raise Wrong(f"{name}: expected the keys {list(ours)}, got {list(theirs)}"
                    + (f" (missing {missing})" if missing else ""), hint)
    try:
        for key in ours:
            compare(f"{name}[{key!r}]", theirs[key], ours[key], hint, tol, scale=scale)
    except Wrong as wrong:
        for what, variant, variant_hint in variants:
            try:
                for key in ours:
                    compare(key, theirs[key], variant[key], tol=tol, scale=scale)
            except Wrong:
                continue
            raise Wrong(f"{name}: yours is {what}", variant_hint or hint) from None
        raise wrong


def rule(ok, what, hint=""):
    """Raise Wrong(rule: ...) unless ``ok``."""
    if not ok:
        raise Wrong(f"rule: {what}", hint)


def flat(D):
    return jacobian.flatten(D)


def max_abs(x):
    return float(np.max(np.abs(x)))


def _rng(seed):
    return np.random.default_rng(seed)


@functools.lru_cache(maxsize=None)
def _setup(name):
    return {"seed": seed_setup, "visible": visible_setup}[name]()      # the visible one trains


def seed():
    """The question's small network and data, fresh copies (a student's code may change them)."""
    net, X, Y = _setup("seed")
    return net.copy(), X.copy(), Y.copy()


def visible():
    """The visible setup (a trained 3-16-16-2 network), fresh copies, trained only once."""
    net, X, Y = _setup("visible")
    return net.copy(), X.copy(), Y.copy()


# -- exercise 01: the backward stages of one layer ----------------------------------------------
STAGE_HINTS = {
    "dout": "dout = G: the loss gradient arrives unchanged",
    "dz2": "the output layer is the identity, so dz2 = dout",
    "dW2": "dW2 = a1.T @ dz2, shape (h, K) like W2: a sum over samples of outer(a1[i], dz2[i])",
    "db2": "db2 = dz2.sum(axis=0): b2 is added to every row, so its gradient sums the rows",
    "da1": "da1 = dz2 @ W2.T, shape (n, h) like a1",
    "dz1": "dz1 = da1 * s * (1 - s) with s = sigmoid(z1): the derivative at z1, not at a1",
    "dW1": "dW1 = X.T @ dz1 (a0 = X is the first layer's input)",
    "db1": "db1 = dz1.sum(axis=0)",
    "da0": "da0 = dz1 @ W1.T",
}


def check_sigmoid_backward(fn):
    rng = _rng(1)
    z, da = rng.normal(0, 2, (5, 4)), rng.normal(size=(5, 4))
    s = 1.0 / (1.0 + np.exp(-z))
    x = z.copy()
    fd = numerical_gradient(lambda: da / (1.0 + np.exp(-x)), x)    # d/dz of sum(da * sigmoid(z))
    compare("dz", fn(da.copy(), z.copy()), da * s * (1 - s),
            "dz = da * s * (1 - s) with s = sigmoid(z): the derivative at z, not at a", fd=fd,
            variants=sigmoid_variants(da, z, s))


def sigmoid_variants(da, z, s):
    """The usual wrong sigmoid derivatives, each with what it is and the fix."""
    return [("da * s * (s - 1): the derivative negated", da * s * (s - 1),
             "sigmoid'(z) = s (1 - s), positive everywhere: (1 - s), not (s - 1)"),
            ("da * z * (1 - z): s (1 - s) with z in place of s = sigmoid(z)", da * z * (1 - z),
             "the formula s (1 - s) takes the activation s = sigmoid(z), not z"),
            ("s * (1 - s) without da", s * (1 - s) + 0 * da,
             "the chain rule multiplies by the gradient arriving from above: da * s * (1 - s)")]


def check_affine_backward(fn):
    rng = _rng(2)
    a_prev, W, b, dz = (rng.normal(size=(6, 3)), rng.normal(size=(3, 4)), rng.normal(size=4),
                        rng.normal(size=(6, 4)))
    net = MLP([3, 4], output="identity")
    net.params["W1"][...], net.params["b1"][...] = W, b
    ref = net.backward(net.forward(a_prev), dz).stages
    got = fn(dz.copy(), a_prev.copy(), W.copy())
    if not isinstance(got, tuple) or len(got) != 3:
        raise Wrong(f"expected a tuple (dW, db, da_prev), got {type(got).__name__}"
                    + (f" of {len(got)}" if isinstance(got, tuple) else ""),
                    "return dW, db, da_prev")
    Wx, bx, ax = W.copy(), b.copy(), a_prev.copy()          # L = sum(dz * (a_prev @ W + b))
    loss = lambda: dz * (ax @ Wx + bx)
    hints = {"dW": "dW = a_prev.T @ dz, shape (d, m) like W", "db": "db = dz.sum(axis=0), shape (m,)",
             "da_prev": "da_prev = dz @ W.T, shape (n, d) like a_prev"}
    for name, theirs, ours, x in [("dW", got[0], ref["dW1"], Wx), ("db", got[1], ref["db1"], bx),
                                  ("da_prev", got[2], ref["da0"], ax)]:
        n = len(a_prev)
        variants = {"dW": [("a_prev.T @ dz / n: a mean, not a sum over the rows", ref["dW1"] / n, "")],
                    "db": [("dz.mean(axis=0): a mean, not a sum over the rows", ref["db1"] / n, "")],
                    "da_prev": [("-(dz @ W.T): the sign flipped", -ref["da0"], "")]}[name]
        compare(name, theirs, ours, hints[name], fd=numerical_gradient(loss, x), variants=variants)


def check_two_layer_backward(fn):
    net, X, _ = seed()
    G = _rng(3).normal(size=(len(X), 2))                  # every column alive: no zero hides a bug
    ref = net.backward(net.forward(X), G).stages
    got = fn(X.copy(), {k: v.copy() for k, v in net.params.items()}, G.copy())
    if not isinstance(got, dict):
        raise Wrong(f"expected a dict of stages, got {type(got).__name__}",
                    f"return {{'dout': ..., 'dz2': ..., ...}} with the keys {list(ref)}")
    missing = [k for k in ref if k not in got]
    if missing:
        raise Wrong(f"stage {missing[0]}: missing (the dict has {list(got)})",
                    f"return every stage: {list(ref)}")
    record = net.forward(X)
    z1, s = record.z[1], record.a[1]
    variants = {"dz1": sigmoid_variants(ref["da1"], z1, s)}
    for name in ref:                                      # in backward order: the first wrong one
        compare(name, got[name], ref[name], STAGE_HINTS[name], variants=variants.get(name, ()))


# -- exercise 02: the masked loss and its G -----------------------------------------------------
def check_masked_mse(fn):
    rng = _rng(4)
    out, y = rng.normal(size=(6, 2)), rng.normal(size=(6, 2))
    for mask in (np.array([0.0, 1.0]), (rng.random((6, 2)) < 0.6).astype(float)):
        got = fn(out.copy(), y.copy(), mask.copy())
        if not isinstance(got, tuple) or len(got) != 2:
            raise Wrong(f"expected a tuple (loss, G), got {type(got).__name__}", "return loss, G")
        loss_ref, G_ref = losses.masked_mse(out, y, mask)
        n, K = out.shape
        m = np.broadcast_to(mask, out.shape)
        r, r_twice = m * out - y, m * (out - y)
        twice = ("the mask applied twice, to out and to y: the answer's loss2 masks the output "
                 "only, mean((mask * out - y)^2)")
        compare("loss", got[0], loss_ref, "the mean of (mask * out - y)**2 over all n K entries "
                "(the target is not masked)", tol=1e-12,
                variants=[("the sum over n, not the mean over n K", np.sum(r ** 2) / n,
                           "np.mean over all n K entries"),
                          ("mean((mask * (out - y))^2)", np.mean(r_twice ** 2), twice)])
        x = out.copy()
        fd = numerical_gradient(lambda: np.mean((mask * x - y) ** 2), x)
        G = np.asarray(got[1], dtype=float)
        compare("G", G, G_ref, "G = 2 mask (mask * out - y) / (n K): the chain rule through "
                "mask * out brings a second factor mask", fd=fd,
                variants=[("2 mask (mask * out - y) / n: divided by n, not n K", G_ref * K,
                           "the loss is a mean over all n K entries: divide by n K (out.size)"),
                          ("2 (mask * out - y) / (n K), without the mask's factor", 2 * r / r.size,
                           "the chain rule through mask * out brings a second factor mask"),
                          ("-2 mask (mask * out - y) / (n K): the derivative negated", -G_ref,
                           "d/dout of (mask out - y)^2 is + 2 mask (mask out - y)"),
                          ("2 mask (mask * (out - y)) / (n K)", 2 * m * r_twice / r.size, twice)])
        zero = np.broadcast_to(mask, out.shape) == 0
        rule(np.all(G[zero] == 0.0), "where the mask is 0, G must be exactly 0.0",
             "multiply by the mask, do not rely on round-off")


def check_masked_direction(fn):
    for make in (seed, visible):
        net, X, Y = make()
        G = losses.mse(net(X), Y)[1]                      # out1's column is not zero here
        rows = (_rng(2).random(G.shape) < 0.5).astype(float)     # a mask per entry, (n, K)
        for mask in (np.array([0.0, 1.0]), np.array([1.0, 0.0]), rows):
            expected = fixes.masked(net, X, G, mask)
            before = {k: v.copy() for k, v in net.params.items()}
            G_given, mask_given = G.copy(), mask.copy()
            D = fn(net, X, G_given, mask_given)
            rule(_unchanged(net, before), "net must not change", "return D; do not step")
            rule(np.array_equal(G_given, G) and np.array_equal(mask_given, mask),
                 "G and mask must not change", "make a new array: mask * G")
            which = f"{mask.tolist()}" if mask.ndim == 1 else f"one 0/1 per entry, shape {mask.shape}"
            compare_dict("D", D, expected, f"D = net.gradient(X, mask * G); here mask = {which}",
                         variants=[("the gradient of (1 - mask) * G: the mask inverted",
                                    net.gradient(X, (1 - mask) * G), "0 hides an entry, 1 keeps it"),
                                   ("the gradient of G: the mask not applied", net.gradient(X, G),
                                    "multiply G by the mask before the backward pass")])
        naive = net.gradient(X, G_QUESTION)
        D = fn(net, X, G_QUESTION.copy(), np.array([0.0, 1.0]))
        rule(all(np.array_equal(D[k], naive[k]) for k in naive),
             "with G = [0, -1] the masked direction must equal the naive one, bit for bit",
             "G's out1 column is already 0: mask * G is G")


# -- exercise 03: freeze -----------------------------------------------------------------------
def _unchanged(net, before):
    return all(np.array_equal(net.params[k], before[k]) for k in before)


def check_freeze(fn):
    probe = data.probe_inputs()
    for make in (seed, visible):
        net, X, Y = make()
        L = net.depth
        before = {k: v.copy() for k, v in net.params.items()}
        G = losses.mse(net(X), Y)[1]
        g = net.gradient(X, G)
        for trainable in ([f"W{L}", f"b{L}"], ["W1", f"b{L}"]):
            G_given = G.copy()
            D = fn(net, X, G_given, list(trainable))
            rule(_unchanged(net, before), "net must not change", "return a new dict; do not step")
            rule(np.array_equal(G_given, G), "G must not change", "leave the caller's G as it came")
            compare_dict("D", D, {k: (v if k in trainable else np.zeros_like(v)) for k, v in g.items()},
                         f"D[k] = the gradient for k in trainable ({trainable}), 0.0 for the others")
            frozen = [k for k in g if k not in trainable]
            rule(all(np.all(np.asarray(D[k]) == 0.0) for k in frozen),
                 "a frozen parameter's direction must be exactly 0.0", "np.zeros_like(g[k])")
        D = fn(net, X, G_QUESTION, [f"W{L}", f"b{L}"])
        stepped = net.copy().step(D, 10.0)
        rule(np.array_equal(stepped(probe)[:, 0], net(probe)[:, 0]),
             f"with trainable = [W{L}, b{L}] and G = [0, -1], out1 must not change at all on "
             f"unseen inputs, even at lr 10", "zero every parameter that is not trainable")


def check_own_head(fn):
    probe = data.probe_inputs()
    for make in (seed, visible):
        net, X, Y = make()
        L = net.depth
        G = losses.mse(net(X), Y)[1]                      # out1's column is NOT zero
        g = net.gradient(X, G)
        for hold in (0, 1):
            ref = {k: np.zeros_like(v) for k, v in g.items()}
            keep = [c for c in range(net.sizes[-1]) if c != hold]
            ref[f"W{L}"][:, keep], ref[f"b{L}"][keep] = g[f"W{L}"][:, keep], g[f"b{L}"][keep]
            D = fn(net, X, G, hold)
            compare_dict("D", D, ref, f"the gradient of W{L} and b{L} with column {hold} zeroed, "
                         f"0.0 for every other parameter")
            stepped = net.copy().step(D, 1.0)
            rule(np.array_equal(stepped(probe)[:, hold], net(probe)[:, hold]),
                 f"output {hold} must not change at all, on any input, whatever G is",
                 f"zero W{L}[:, {hold}] and b{L}[{hold}] as well as the hidden layers")


# -- exercise 04: null-space projection --------------------------------------------------------
def _setups_04():
    """The small network (26 parameters) and the visible one, each with G = [0, -1]."""
    return [("seed", *seed()[:2], 1e-5), ("visible", *visible()[:2], 1e-9)]


def check_jacobian_out1(fn):
    for name, net, X, _ in _setups_04():
        ref = jacobian.dense_rows(net, X, keep=[0])
        params = {k: v.copy() for k, v in net.params.items()}
        got = fn(net, X)
        rule(_unchanged(net, params), "net must not change", "read the parameters; do not step")
        if name == "seed":                              # finite differences, one parameter at a time
            fd = np.empty_like(ref)
            col = 0
            for key in net.params:
                for idx in np.ndindex(net.params[key].shape):
                    x = net.params[key]
                    old = x[idx]
                    x[idx] = old + 1e-5
                    plus = net(X)[:, 0]
                    x[idx] = old - 1e-5
                    minus = net(X)[:, 0]
                    x[idx] = old
                    fd[:, col] = (plus - minus) / 2e-5
                    col += 1
        compare(f"J1 ({name})", got, ref, "row i = jacobian.flatten(net.gradient(X[i:i+1], "
                "[1, 0])): one backward pass per sample", tol=1e-7,
                fd=fd if name == "seed" else None)


EPS = np.finfo(float).eps


def _projection_variants(net, X, g):
    """The usual wrong projections: the sign, and pinv of J1 J1^T (tutorial 05's warning)."""
    J = jacobian.dense_rows(net, X, keep=[0])
    gf = flat(g)
    square = jacobian.unflatten(gf - J.T @ np.linalg.pinv(J @ J.T) @ (J @ gf), g)
    cond = np.linalg.cond(J @ J.T)
    return [("g + J1^+ J1 g: the projection's sign flipped",
             jacobian.unflatten(gf + np.linalg.pinv(J) @ (J @ gf), g),
             "D = g - J1^T alpha: subtract the part of g that moves out1"),
            (f"g - J1^T pinv(J1 J1^T) J1 g: pinv of J1 J1^T squares J1's condition number "
             f"(cond(J1 J1^T) = {cond:.1e} here), so it agrees only to about 1e-7", square,
             "use np.linalg.pinv(J1) (J1^+ = J1^T (J1 J1^T)^+ from J1's SVD), as tutorial 05 warns")]


def _check_projection(fn, name_of_route, dense):
    for name, net, X, scale_tol in _setups_04():
        g = net.gradient(X, G_QUESTION)
        ref = fixes.project(net, X, G_QUESTION)
        D = fn(net, X, G_QUESTION)
        J1 = jacobian.OutputJacobian(net, X, keep=[0])
        variants = _projection_variants(net, X, g) if name == "seed" else []
        if dense:
            # pinv(J1) is backward stable: its error is about eps cond(J1) relative to |g|
            # (1e-10 on the seed network, cond(J1) = 5e5); 100 times that is the bound, far
            # below the 1e-7 of the route that squares cond(J1) through J1 J1^T
            scale_tol = 100 * EPS * np.linalg.cond(jacobian.dense_rows(net, X, keep=[0]))
        for what, variant, hint in variants if dense else variants[:1]:
            try:                                  # a usual mistake is named before any rule
                compare_dict("D", D, variant, tol=scale_tol, scale=max_abs(flat(g)))
            except Wrong:
                continue
            raise Wrong(f"D ({name}): yours is {what}", hint)
        if isinstance(D, dict) and list(D) == list(ref):
            J1D, J1g = J1.matvec({k: np.asarray(v, dtype=float) for k, v in D.items()}), J1.matvec(g)
            rule(max_abs(J1D) <= 1e3 * scale_tol * max_abs(J1g),
                 f"J1 D must be 0 ({name} network): max |J1 D| = {max_abs(J1D):.1e}, "
                 f"max |J1 g| = {max_abs(J1g):.1e}",
                 "D = g - J1^T alpha with alpha solving (J1 J1^T) alpha = J1 g")
        compare_dict(f"D ({name})", D, ref, f"the {name_of_route}", tol=scale_tol,
                     scale=max_abs(flat(g)))
    net, X, _ = visible()                                 # the order of the drift: O(lr^2)
    lrs = np.logspace(-5, -3, 5)
    D = fn(net, X, G_QUESTION)
    drift = [max_abs(net.copy().step(D, lr)(X)[:, 0] - net(X)[:, 0]) for lr in lrs]
    slope = np.polyfit(np.log(lrs), np.log(drift), 1)[0] if min(drift) > 0 else 0.0
    rule(abs(slope - 2.0) < 0.1, f"the drift of out1 must be O(lr^2): fitted log-log slope "
         f"{slope:.2f}, expected 2.00", "a projected step moves out1 only to second order")


def check_project_dense(fn):
    _check_projection(fn, "dense projection, g - pinv(J1) @ (J1 @ g)", dense=True)


def check_gram_out1(fn):
    for name, net, X, _ in _setups_04():
        J = jacobian.dense_rows(net, X, keep=[0])
        record = net.forward(X)
        A = {l: record.a[l - 1] for l in range(1, net.depth + 1)}
        S = {l: J[:, _columns(net, f"b{l}")] for l in A}        # d out1 / d b_l = the signal
        no_one = sum((S[l] @ S[l].T) * (A[l] @ A[l].T) for l in A)
        compare(f"gram ({name})", fn(net, X), jacobian.OutputJacobian(net, X, keep=[0]).gram(),
                "sum over layers of (S @ S.T) * (A @ A.T + 1), elementwise '*'", tol=1e-9,
                fd=J @ J.T, variants=[("sum over layers of (S S^T) * (A A^T): the bias's 1 is "
                                       "missing", no_one, "each layer's share is (S S^T) * (A A^T + 1)")])


def _columns(net, key):
    """The columns of jacobian.flatten's order that hold the parameter ``key``."""
    start = 0
    for k, v in net.params.items():
        if k == key:
            return slice(start, start + v.size)
        start += v.size
    raise KeyError(key)


def check_project_gram(fn):
    _check_projection(fn, "Gram route: J1 g from the signals, alpha from the Gram, "
                          "J1^T alpha = net.gradient(X, [alpha, 0])", dense=False)


# -- exercise 05: the restoring step -----------------------------------------------------------
def _off_constraint():
    """The visible network after one projected step at lr 0.01: out1 off by ~2e-2 on the batch."""
    net, X, _ = visible()
    ref = net(X)[:, 0].copy()
    return net.copy().step(fixes.project(net, X, G_QUESTION), 0.01), X, ref


def check_restore_step(fn):
    net, X, ref = _off_constraint()
    start, r0 = net.copy(), max_abs(net(X)[:, 0] - ref)
    expected = net.copy()
    fixes.restore(expected, X, ref, max_iter=1)
    got = fn(net, X, ref.copy())
    rule(not _unchanged(net, start.params), "restore_step must change net in place",
         "net.step(D, 1.0) changes net; a copy would not")
    compare("residual returned", got if got is not None else np.nan, r0,
            "return max |out1(X) - ref| measured before the step", tol=1e-12)
    uphill = {k: 2 * start.params[k] - expected.params[k] for k in net.params}
    for key in net.params:
        compare(key, net.params[key], expected.params[key],
                "theta <- theta - J1^T (J1 J1^T)^+ (out1 - ref): mind the sign and the transpose",
                tol=1e-7, variants=[("theta + J1^T (J1 J1^T)^+ (out1 - ref): a step uphill, the "
                                     "residual's sign flipped", uphill[key],
                                     "r = out1(X) - ref, and net.step(D, 1.0) subtracts D")])
    r1 = max_abs(net(X)[:, 0] - ref)
    rule(r1 <= 10 * r0 ** 2, f"the residual must square (Gauss-Newton): {r0:.1e} -> {r1:.1e}", "")


def _history(got):
    """The residuals a ``restore`` returned, as a list of floats, or Wrong."""
    try:
        return [float(h) for h in got]
    except TypeError:
        raise Wrong(f"expected a list of residuals, got {type(got).__name__}",
                    "return the residual before each step and after the last") from None


def check_restore(fn):
    net, X, ref = _off_constraint()
    history = _history(fn(net, X, ref.copy()))
    r0 = max_abs(_off_constraint()[0](X)[:, 0] - ref)
    compare("history[0]", history[0] if history else np.nan, r0,
            "history[0] is the residual before the first step", tol=1e-12)
    final = max_abs(net(X)[:, 0] - ref)
    rule(final <= 1e-12, f"the residual must reach the tolerance 1e-12: it is {final:.1e} "
         f"after {len(history) - 1} step(s)", "repeat restore_step while the residual > tol")
    compare("history[-1]", history[-1], final, "the last entry is the residual after the last step",
            tol=1e-6)
    rule(len(history) <= 6, f"Gauss-Newton converges in a few steps here; took {len(history) - 1}",
         "stop as soon as the residual <= tol")
    net, X, ref = _off_constraint()
    short = _history(fn(net, X, ref.copy(), tol=1e-12, max_iter=1))
    rule(len(short) == 2, f"with max_iter=1: one step, two residuals; got {len(short)}",
         "never take more than max_iter steps, and end with the residual after the last")
    net, X, ref = _off_constraint()
    loose = _history(fn(net, X, ref.copy(), tol=1e-6))
    rule(bool(loose) and loose[-1] <= 1e-6 and all(h > 1e-6 for h in loose[:-1]),
         f"with tol=1e-6: stop at the first residual <= 1e-6; got {loose}",
         "compare the residual with tol, the argument, not a fixed number")
    net, X, _ = visible()
    held = {k: v.copy() for k, v in net.params.items()}
    done = _history(fn(net, X, net(X)[:, 0].copy()))
    rule(len(done) == 1 and _unchanged(net, held),
         f"where out1 is already at ref: no step, one residual; got {len(done)} residual(s)"
         + ("" if _unchanged(net, held) else " and a changed net"),
         "measure the residual first; step only while it is > tol")


# -- the exercises -----------------------------------------------------------------------------
EXERCISES = {
    "01_layer_backward": ("the backward stages of one layer", {
        "sigmoid_backward": check_sigmoid_backward, "affine_backward": check_affine_backward,
        "two_layer_backward": check_two_layer_backward}),
    "02_masked_loss": ("the masked loss and its G", {
        "masked_mse": check_masked_mse, "masked_direction": check_masked_direction}),
    "03_freeze": ("freeze (var_list) and a head of out2's own", {
        "freeze": check_freeze, "own_head": check_own_head}),
    "04_projection": ("null-space projection, dense and then with the Gram matrix", {
        "jacobian_out1": check_jacobian_out1, "project_dense": check_project_dense,
        "gram_out1": check_gram_out1, "project_gram": check_project_gram}),
    "05_restore": ("the restoring step", {
        "restore_step": check_restore_step, "restore": check_restore}),
}


#: What a student may call from mlp_ref in each exercise: the template's imports and the network
#: it is handed (a class brings its bases and methods). Every other public function of the
#: package is a tripwire in the child: calling it from the student's code is reported.
_NET = ["network.MLP", "network.Forward", "network.Backward"]
ALLOWED = {
    "01_layer_backward": [],
    "02_masked_loss": _NET,
    "03_freeze": _NET,
    "04_projection": _NET + ["jacobian.flatten", "jacobian.unflatten"],
    "05_restore": _NET + ["jacobian.flatten", "jacobian.unflatten", "jacobian.dense_rows"],
}

#: "Predict, then run": per exercise, the constants a student fills in and their checks.
PREDICTIONS = {}
