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

from ... import data, fixes, jacobian, losses
from ...gradcheck import numerical_gradient, rel_error_map
from ...network import MLP
from ...optim import Adam
from ...setups import G_QUESTION, seed_setup, visible_setup
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


#: Every check asks at least two cases (seeds, shapes): no answer copied from one run passes
CASES_01 = ((1, (5, 4)), (21, (3, 6)))


def check_sigmoid_backward(fn):
    for seed_, shape in CASES_01:
        rng = _rng(seed_)
        z, da = rng.normal(0, 2, shape), rng.normal(size=shape)
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
    for seed_, (n, d, m) in ((2, (6, 3, 4)), (22, (5, 2, 3))):
        _check_affine_backward(fn, _rng(seed_), n, d, m)


def _check_affine_backward(fn, rng, n, d, m):
    a_prev, W, b, dz = (rng.normal(size=(n, d)), rng.normal(size=(d, m)), rng.normal(size=m),
                        rng.normal(size=(n, m)))
    net = MLP([d, m], output="identity")
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
    for seed_ in (3, 23):
        net, X, _ = seed()
        G = _rng(seed_).normal(size=(len(X), 2))          # every column alive: no zero hides a bug
        _check_two_layer_backward(fn, net, X, G)


def _check_two_layer_backward(fn, net, X, G):
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
        D = fn(net, X, G_QUESTION.copy(), [f"W{L}", f"b{L}"])
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
        D = fn(net, X, G_QUESTION.copy())
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
    D = fn(net, X, G_QUESTION.copy())
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
def _off_constraint(lr=0.01):
    """The visible network after one projected step at ``lr``: out1 off by ~2e-2 on the batch
    at lr 0.01."""
    net, X, _ = visible()
    ref = net(X)[:, 0].copy()
    return net.copy().step(fixes.project(net, X, G_QUESTION), lr), X, ref


def check_restore_step(fn):
    for lr in (0.01, 0.004):
        _check_restore_step(fn, *_off_constraint(lr))


def _check_restore_step(fn, net, X, ref):
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


# -- exercise 06: the cross-output tangent kernel ---------------------------------------------
def check_jacobian_rows(fn):
    for name, net, X, _ in _setups_04():
        for k in (0, 1):
            compare(f"J{k + 1} ({name})", fn(net, X, k), jacobian.dense_rows(net, X, keep=[k]),
                    f"row i = jacobian.flatten(net.gradient(X[i:i+1], e_k)), e_k = 1 at column {k}")


def check_cross_kernel(fn):
    for name, net, X, _ in _setups_04():
        J1, J2 = (jacobian.dense_rows(net, X, keep=[k]) for k in (0, 1))
        compare(f"K12 ({name})", fn(net, X), jacobian.tangent_kernel_by_layer(net, X)["total"],
                "K12 = J1 @ J2.T, (n, n)", tol=1e-9, fd=J1 @ J2.T,
                variants=[("J1 @ J1.T, out1's own kernel K11", J1 @ J1.T, "the second factor is J2")])


def check_kernel_by_layer(fn):
    for name, net, X, _ in _setups_04():
        ref = jacobian.tangent_kernel_by_layer(net, X)
        got = fn(net, X)
        if not isinstance(got, dict):
            raise Wrong(f"expected a dict layer -> (n, n) and 'total', got {_kind(got)}",
                        "return {1: share_1, ..., L: share_L, 'total': their sum}")
        missing = [k for k in ref if k not in got]
        if missing:
            raise Wrong(f"missing the key {missing[0]!r} (the dict has {list(got)[:6]})",
                        "one entry per layer l = 1 .. L (ints), and 'total'")
        L = net.depth
        # round-off is relative to the largest share, not to each entry (a share's entries
        # cancel to far below it)
        scale = max(max_abs(ref[key]) for key in ref)
        for key in ref:
            compare(f"share {key!r} ({name})", got[key], ref[key],
                    "(S1_l @ S2_l.T) * (A_l @ A_l.T + 1), elementwise '*'", tol=1e-9, scale=scale)
        out = np.asarray(got[L], dtype=float)
        rule(np.all(out == 0.0), f"the output layer's share must be exactly 0.0 ({name}): max |entry| "
             f"{max_abs(out):.1e}", "out1 and out2 have disjoint output weights: S1_L S2_L^T = 0")


def _slope(lrs, drift):
    return float(np.polyfit(np.log(lrs), np.log(drift), 1)[0]) if min(drift) > 0 else 0.0


@functools.lru_cache(maxsize=None)
def _naive_drift_order():
    net, X, _ = visible()
    lrs = np.logspace(-5, -3, 5)
    g = net.gradient(X, G_QUESTION)
    return _slope(lrs, [max_abs(net.copy().step(g, lr)(X)[:, 0] - net(X)[:, 0]) for lr in lrs])


# -- exercise 07: J1 D and J1^T alpha from per-layer factors -----------------------------------
def _random_direction(net, seed_):
    rng = _rng(seed_)
    return {k: rng.normal(size=v.shape) for k, v in net.params.items()}


#: A network and batch on which J1 does not fit in the child's memory: n P float64 numbers are
#: 2.3 GiB, more than the 2 GiB address space a submission runs in (runner.MEMORY_LIMIT), while
#: the per-layer factors A_l and S_l take 6 MiB each. The route exercise 07 asks for takes well
#: under a second there; the dense J1 cannot be built.
NO_DENSE_SIZES, NO_DENSE_ROWS = (3, 384, 384, 2), 2048

#: The relative distance (to the largest entry of a usual mistake) within which an answer that
#: fails is named as that mistake: far above the error of any route to it, even through the seed
#: network's Gram (eps cond(J1 J1^T) = 5e-5), and far below the distance between two mistakes.
NAMED = 1e-3


@functools.lru_cache(maxsize=None)
def _no_dense_setup():
    net = MLP(list(NO_DENSE_SIZES), hidden="sigmoid", output="identity")
    rng = _rng(13)
    for k, v in net.params.items():
        v[...] = rng.normal(0, 1 / np.sqrt(v.shape[0]), v.shape)
    X = rng.normal(size=(NO_DENSE_ROWS, NO_DENSE_SIZES[0]))
    return net, X, _random_direction(net, 14), rng.normal(size=NO_DENSE_ROWS)


def _never_dense(fn, call, what):
    """Run ``call`` on the network where J1 does not fit (``_no_dense_setup``); a failure there
    (a MemoryError, the time limit) gets the hint that J1 is never to be built. Only for a
    function run in the child, under its memory limit (``fn.memory_limited``, set by the grader):
    in the grader's own process (the project's tests of the feedback) no limit is there to exceed.
    Returns None where it does not run."""
    if not getattr(fn, "memory_limited", True):
        return None
    net, X, D, alpha = _no_dense_setup()
    n = len(X)
    hint = (f"on {n} rows of a {'-'.join(map(str, NO_DENSE_SIZES))} network ({net.n_params:,} "
            f"parameters) J1 holds {n * net.n_params:.1e} numbers ({n * net.n_params * 8 / 2 ** 30:.1f} "
            f"GiB), more than your code may use: {what} from the factors A_l and S_l, never J1")
    try:
        return call(net.copy(), X.copy(), {k: v.copy() for k, v in D.items()}, alpha.copy()), net, X, D, alpha
    except Exception as exc:                      # noqa: BLE001 - what the call raised, with a hint
        if hasattr(exc, "hint"):
            exc.hint = hint
        raise


def _as_array(x):
    try:
        return np.asarray(x, dtype=float)
    except (TypeError, ValueError):
        return None


def _name_mistake(stage, theirs, variants):
    """Raise Wrong naming the usual mistake ``theirs`` is, if any: ``variants`` are (what, the
    mistake's answer (an array, or a dict like params), hint), each matched entry by entry within
    NAMED of its largest entry."""
    for what, variant, hint in variants:
        if isinstance(variant, dict):
            same = isinstance(theirs, dict) and set(theirs) == set(variant) and all(
                _close(_as_array(theirs[k]), variant[k]) for k in variant)
        else:
            same = _close(_as_array(theirs), variant)
        if same:
            raise Wrong(f"stage {stage}: yours is {what}", hint)


def _close(theirs, variant):
    variant = np.asarray(variant, dtype=float)
    if theirs is None or theirs.shape != variant.shape or not np.all(np.isfinite(theirs)):
        return False
    with np.errstate(all="ignore"):
        return bool(max_abs(theirs - variant) <= NAMED * max(max_abs(variant), 1e-300)) if variant.size else True


def _gram_inverse(J, v):
    """(J1 J1^T)^-1 v, the Gram's inverse applied where no Gram belongs (the projection's step)."""
    return np.linalg.lstsq(J @ J.T, v, rcond=None)[0]


def check_jvp_out1(fn):
    for name, net, X, _ in _setups_04():
        D = _random_direction(net, 7)
        J = jacobian.dense_rows(net, X, keep=[0])
        before = {k: v.copy() for k, v in net.params.items()}
        got = fn(net, X, {k: v.copy() for k, v in D.items()})
        rule(_unchanged(net, before), "net must not change", "read the parameters; do not step")
        ours, n = J @ flat(D), len(X)
        no_bias = J @ flat({k: (v if k.startswith("W") else np.zeros_like(v)) for k, v in D.items()})
        theirs = _as_array(got)
        if theirs is not None and theirs.shape == (n, n):
            raise Wrong(f"stage J1 D ({name}): shape ({n}, {n}), expected ({n},): a matrix product "
                        f"(A_l D_W_l + D_b_l) @ S_l.T pairs every row with every other",
                        "row i needs only its own dot product: np.sum(S_l * (A_l @ D_W_l + D_b_l), axis=1)")
        if theirs is not None and theirs.size == 1 and n > 1:
            raise Wrong(f"stage J1 D ({name}): one number, expected one per row ({n},): the sum "
                        f"ran over the rows too", "np.sum(..., axis=1): a sum over each row's units only")
        _name_mistake(f"J1 D ({name})", got, [
            ("(J1 J1^T)^-1 J1 D: the Gram's inverse belongs to the projection's alpha, not to J1 D",
             _gram_inverse(J, ours), "J1 D is a product, no solve: row i = sum over l of S_l[i] . "
             "(A_l[i] @ D_W_l + D_b_l)"),
            ("J1 D without the biases' part", no_bias, "add D_b_l to A_l @ D_W_l: the bias's "
             "column of J1 is S_l itself")])
        compare(f"J1 D ({name})", got, ours, "row i = sum over l of S_l[i] . (A_l[i] @ D_W_l "
                "+ D_b_l)", tol=1e-9, scale=max_abs(np.abs(J) @ np.abs(flat(D))))
    ran = _never_dense(fn, lambda net, X, D, alpha: fn(net, X, D), "J1 D")
    if ran is None:
        return
    got, net, X, D, _ = ran
    JD, JD_scale, _, _ = _no_dense_answers()
    compare(f"J1 D ({len(X)} rows)", got, JD, "the same route as on the small networks", tol=1e-9,
            scale=JD_scale)


@functools.lru_cache(maxsize=None)
def _no_dense_answers():
    """J1 D and J1^T alpha on ``_no_dense_setup``'s network, each with the scale of its round-off:
    sum_j |J1_ij| |D_j| (and |J1|^T |alpha|), whatever the order of the sums, from the same
    factors with |A_l| and |S_l|."""
    net, X, D, alpha = _no_dense_setup()
    J1 = jacobian.OutputJacobian(net, X, keep=[0])
    JD, JTa = J1.matvec(D), J1.rmatvec(alpha)
    J1.inputs = {l: np.abs(a) for l, a in J1.inputs.items()}
    J1.signals = {l: np.abs(s) for l, s in J1.signals.items()}
    return (JD, max_abs(J1.matvec({k: np.abs(v) for k, v in D.items()})),
            JTa, max_abs(flat(J1.rmatvec(np.abs(alpha)))))


def check_vjp_out1(fn):
    for name, net, X, _ in _setups_04():
        alpha = _rng(8).normal(size=len(X))
        J = jacobian.dense_rows(net, X, keep=[0])
        ref = jacobian.unflatten(J.T @ alpha, net.params)
        got = fn(net, X, alpha.copy())
        swapped = {k: (v.T if k.startswith("W") else v) for k, v in ref.items()}
        _name_mistake(f"J1^T alpha ({name})", got, [
            ("S_l^T (alpha A_l) for W_l: the outer product's factors swapped, W_l's gradient "
             "transposed", swapped, "W_l = A_l.T @ (alpha[:, None] * S_l), shape (n_(l-1), n_l) "
             "like W_l: the layer's input on the left"),
            ("J1^T (J1 J1^T)^-1 alpha: the Gram's inverse belongs to the projection, not to J1^T alpha",
             jacobian.unflatten(J.T @ _gram_inverse(J, alpha), net.params),
             "J1^T alpha is a product, no solve: A_l.T @ (alpha[:, None] * S_l)"),
            ("J1^T 1: alpha left out", jacobian.unflatten(J.T @ np.ones_like(alpha), net.params),
             "weight row i of S_l by alpha[i]: alpha[:, None] * S_l"),
            ("J1^T alpha with the bias's sum left out", {
                k: (v if k.startswith("W") else np.zeros_like(v)) for k, v in ref.items()},
             "b_l is the column sum of alpha[:, None] * S_l")])
        compare_dict(f"J1^T alpha ({name})", got, ref,
                     "W_l: A_l.T @ (alpha[:, None] * S_l); b_l: (alpha[:, None] * S_l).sum(axis=0)",
                     tol=1e-9, scale=max_abs(np.abs(J.T) @ np.abs(alpha)))
    ran = _never_dense(fn, lambda net, X, D, alpha: fn(net, X, alpha), "J1^T alpha")
    if ran is None:
        return
    got, net, X, _, alpha = ran
    _, _, JTa, JTa_scale = _no_dense_answers()
    compare_dict(f"J1^T alpha ({len(X)} rows)", got, JTa, "the same route as on the small networks",
                 tol=1e-9, scale=JTa_scale)


# -- exercise 08: span projection --------------------------------------------------------------
def _span_setup():
    """The visible network; new inputs (64 unseen rows) and a memory of 4 of its batch's rows."""
    net, X, _ = visible()
    return net, data.probe_inputs()[:64], X[:4]


def check_span_project(fn):
    net, X, memory = _span_setup()
    for G in (G_QUESTION, losses.mse(net(X), np.zeros((len(X), 2)))[1]):
        ref = fixes.span_project(net, X, G, keep=[0], keep_X=memory)
        g = net.gradient(X, G)
        D = fn(net, X, np.array(G, copy=True), memory.copy())
        compare_dict("D", D, ref, "per layer U - pinv(A~) @ (A~ @ U); in the output layer column 0 "
                     "only", tol=1e-9, scale=max_abs(flat(g)),
                     variants=[("every output column projected in the output layer", {
                         **ref, f"W{net.depth}": _project_cols(net, g, memory)[0],
                         f"b{net.depth}": _project_cols(net, g, memory)[1]},
                                "out2's own weights (column 1 of W_L, b_L) keep their gradient")])
        step = net.copy().step(D, 1.0)
        drift = max_abs(step(memory)[:, 0] - net(memory)[:, 0])
        rule(drift <= 1e-9 * max(1.0, max_abs(net(memory)[:, 0])), f"out1 on the memory must not "
             f"move at lr 1.0: it moved {drift:.1e}", "A~_l @ U = 0 in every layer")


def _project_cols(net, g, memory):
    record = net.forward(memory)
    L = net.depth
    A = np.hstack([record.a[L - 1], np.ones((len(memory), 1))])
    U = np.vstack([g[f"W{L}"], g[f"b{L}"][None, :]])
    U = U - np.linalg.pinv(A) @ (A @ U)
    return U[:-1], U[-1]


def frozen_layers_memories():
    """The memories check_frozen_layers asks about: the answer is the ranks', never a function of
    the number of rows (two memories of 32 rows: 3 distinct rows repeated, and 32 rows on a
    plane of the input space, whose first layer keeps a free direction)."""
    net, X_visible, _ = visible()
    probe = data.probe_inputs()
    rng = _rng(15)
    plane = probe[0] + rng.normal(size=(32, 2)) @ rng.normal(size=(2, 3))
    return net, [X_visible[:2], X_visible, probe[:32], np.repeat(probe[:3], [11, 11, 10], axis=0), plane]


def check_frozen_layers(fn):
    net, memories = frozen_layers_memories()
    for memory in memories:
        record = net.forward(memory)
        ref = [l for l in range(1, net.depth) if np.linalg.matrix_rank(np.hstack(
            [record.a[l - 1], np.ones((len(memory), 1))])) == net.sizes[l - 1] + 1]
        got = fn(net, memory.copy())
        try:
            got = [int(x) for x in got]
        except (TypeError, ValueError):
            raise Wrong(f"expected a list of layer numbers, got {_kind(got)}", "return [1], [1, 2] or []") \
                from None
        rule(sorted(got) == ref, f"with a memory of {len(memory)} rows the frozen hidden layers are "
             f"{ref}, yours {sorted(got)}", "a layer freezes when rank(A~_l) = n_(l-1) + 1; the output "
             "layer never counts")


@functools.lru_cache(maxsize=None)
def _span_on_the_batch():
    """"freeze" when span projection with the batch as memory equals the output-layer freeze."""
    net, X, _ = visible()
    D = fixes.span_project(net, X, G_QUESTION, keep=[0], keep_X=X)
    F = fixes.freeze(net, X, G_QUESTION, trainable=net.output_keys)
    same = all(max_abs(D[k] - F[k]) <= 1e-9 * max(max_abs(flat(F)), 1e-300) for k in D)
    return "freeze" if same else "project"


@functools.lru_cache(maxsize=None)
def _span_drift_at_lr_1():
    net, X, memory = _span_setup()
    D = fixes.span_project(net, X, G_QUESTION, keep=[0], keep_X=memory)
    return max_abs(net.copy().step(D, 1.0)(memory)[:, 0] - net(memory)[:, 0])


# -- exercise 09: Adam's update, projected ------------------------------------------------------
def check_adam_update(fn):
    net, X, Y = visible()
    rng = _rng(9)
    opt = Adam(lr=1e-3)
    m = {k: np.zeros_like(v) for k, v in net.params.items()}
    v = {k: np.zeros_like(v) for k, v in net.params.items()}
    for t in (1, 2, 3):
        D = {k: rng.normal(size=p.shape) * 10.0 ** (t - 2) for k, p in net.params.items()}
        ref = opt.update(D)
        got = fn({k: x.copy() for k, x in D.items()}, m, v, t, 1e-3)
        if not isinstance(got, tuple) or len(got) != 3:
            raise Wrong(f"expected a tuple (U, m, v), got {_kind(got)}", "return U, m, v")
        compare_dict(f"U (step {t})", got[0], ref, "U = lr m_hat / (sqrt(v_hat) + eps), bias-corrected "
                     "with 1 - beta^t", tol=1e-10,
                     variants=[("U without the bias corrections", _adam_uncorrected(opt, D, m, v), "m_hat = "
                                "m / (1 - beta1^t), v_hat = v / (1 - beta2^t)")])
        compare_dict(f"m (step {t})", got[1], opt.m, "m = beta1 m + (1 - beta1) D", tol=1e-12)
        compare_dict(f"v (step {t})", got[2], opt.v, "v = beta2 v + (1 - beta2) D^2", tol=1e-12)
        m, v = got[1], got[2]


def _adam_uncorrected(opt, D, m, v):
    b1, b2 = opt.beta1, opt.beta2
    return {k: opt.lr * (b1 * m[k] + (1 - b1) * D[k]) / (np.sqrt(b2 * v[k] + (1 - b2) * D[k] ** 2)
                                                          + opt.eps) for k in D}


def check_project_out1(fn):
    for name, net, X, _ in _setups_04():
        D = _random_direction(net, 10)
        ref = fixes.nullspace(net, D, keep_X=X)
        J = jacobian.dense_rows(net, X, keep=[0])
        tol = 100 * EPS * np.linalg.cond(J)
        got = fn(net, X, {k: v.copy() for k, v in D.items()})
        compare_dict(f"P D ({name})", got, ref, "D - pinv(J1) @ (J1 @ D)", tol=max(tol, 1e-12),
                     scale=max_abs(flat(D)), variants=[("D + J1^+ J1 D: the sign flipped", {
                         k: 2 * D[k] - ref[k] for k in D}, "subtract the part that moves out1")])


@functools.lru_cache(maxsize=None)
def _gradient_order_holds():
    """Whether Adam's update of a projected gradient keeps J1 U = 0 (to 1e-9 of J1 g)."""
    net, X, _ = visible()
    opt = Adam(lr=1e-3)
    g = net.gradient(X, G_QUESTION)
    U = opt.update(fixes.nullspace(net, g, keep_X=X))
    J = jacobian.dense_rows(net, X, keep=[0])
    return bool(max_abs(J @ flat(U)) <= 1e-9 * max_abs(J @ flat(g)) * 1e-3)


@functools.lru_cache(maxsize=None)
def _first_step_size():
    net, X, _ = visible()
    return max_abs(flat(Adam(lr=1e-3).update(net.gradient(X, G_QUESTION)))) / 1e-3


# -- exercise 10: holding out1 on a memory, a small project --------------------------------------
LR_10, STEPS_10 = 0.01, 20


def _setup_10():
    net, X, _ = visible()
    return net, data.probe_inputs()[:64], X                  # new task's inputs; the memory


@functools.lru_cache(maxsize=None)
def _naive_gain_10():
    net, X, _ = _setup_10()
    before = net(X)[:, 1].mean()
    for _ in range(STEPS_10):
        net.step(net.gradient(X, G_QUESTION), LR_10)
    return float(net(X)[:, 1].mean() - before)


def check_hold_on_memory(fn):
    _check_hold_on_memory(fn)
    net, X, memory = _setup_10()                  # a second run, shorter and faster: no answer
    steps, lr = SECOND_RUN_10                     # copied from the first one passes
    history = _history(fn(net, X, G_QUESTION.copy(), memory.copy(), steps, lr))
    rule(len(history) == steps, f"with steps={steps}: {steps} residuals expected, got {len(history)}",
         "one residual per step, as many steps as asked")
    final, bound = _reference_run_10(steps, lr)
    for key in net.params:
        compare(f"net.params[{key!r}] after {steps} steps at lr {lr:g}", net.params[key], final[key],
                "the docstring's recipe, with the steps and lr given", tol=bound, scale=1.0)


#: The second run of check_hold_on_memory: (steps, lr)
SECOND_RUN_10 = (7, 0.005)


def _check_hold_on_memory(fn):
    net, X, memory = _setup_10()
    start = net.copy()
    ref = net(memory)[:, 0].copy()
    history = _history(fn(net, X, G_QUESTION.copy(), memory.copy(), STEPS_10, LR_10))
    rule(len(history) == STEPS_10, f"one residual per step: {STEPS_10} expected, got {len(history)}",
         "append max |out1(memory) - ref| after each step")
    held = max_abs(net(memory)[:, 0] - ref)
    rule(held <= 1e-10, f"target 1: out1 held on the memory to 1e-10 after {STEPS_10} steps: it is "
         f"off by {held:.1e}", "after each projected step, restoring steps while max |r| > 1e-12")
    compare("history[-1]", history[-1], held, "the last entry is the residual after the last step",
            tol=1e-6, scale=max(held, 1e-12))
    gain = float(net(X)[:, 1].mean() - start(X)[:, 1].mean())
    naive = _naive_gain_10()
    rule(gain >= 0.5 * naive, f"target 2: out2 raised on X by at least half the naive gain "
         f"({0.5 * naive:.4g}): yours {gain:.4g}", "step along the projected gradient, lr as given")
    # the recipe fixes the parameters it ends at: the reference run's, to round-off (no target
    # can then be met by editing the network another way, out2's bias say)
    final, bound = _reference_run_10(STEPS_10, LR_10)
    for key in net.params:
        compare(f"net.params[{key!r}] after {STEPS_10} steps", net.params[key], final[key],
                "the docstring's recipe: a projected step along g, then restoring steps; nothing else "
                "changes net", tol=bound, scale=1.0)


@functools.lru_cache(maxsize=None)
def _reference_run_10(steps, lr):
    """The parameters after the recipe of hold_on_memory (fixes.project with J1 on the memory,
    then fixes.restore), and how far another correct route may end from them: per step the
    projection's round-off, 100 eps cond(J1) |g| lr (pinv is backward stable), plus what a
    restore that stops at max |r| <= 1e-12 leaves, 1e-12 / sigma_min(J1); times the steps."""
    net, X, memory = _setup_10()
    s = np.linalg.svd(jacobian.dense_rows(net, memory, keep=[0]), compute_uv=False)
    g = net.gradient(X, G_QUESTION)
    bound = steps * (100 * EPS * (s[0] / s[-1]) * max_abs(flat(g)) * lr + 1e-12 / s[-1])
    ref = net(memory)[:, 0].copy()
    for _ in range(steps):
        net.step(fixes.project(net, X, G_QUESTION, keep_X=memory), lr)
        fixes.restore(net, memory, ref)
    return {k: v.copy() for k, v in net.params.items()}, float(bound)


@functools.lru_cache(maxsize=None)
def _held_off_memory():
    net, X, memory = _setup_10()
    off = data.probe_inputs()[64:]
    start = net.copy()
    ref = net(memory)[:, 0].copy()
    for _ in range(STEPS_10):
        net.step(fixes.project(net, X, G_QUESTION, keep_X=memory), LR_10)
        fixes.restore(net, memory, ref)
    return bool(max_abs(net(off)[:, 0] - start(off)[:, 0]) <= 1e-6)


@functools.lru_cache(maxsize=None)
def _gain_fraction():
    net, X, memory = _setup_10()
    before = net(X)[:, 1].mean()
    ref = net(memory)[:, 0].copy()
    for _ in range(STEPS_10):
        net.step(fixes.project(net, X, G_QUESTION, keep_X=memory), LR_10)
        fixes.restore(net, memory, ref)
    return float(net(X)[:, 1].mean() - before) / _naive_gain_10()


def _kind(x):
    return x.type_name if isinstance(x, Other) else type(x).__name__


# -- "predict, then run" -----------------------------------------------------------------------
# The runs the predictions are checked against (the functions with an lru_cache in this module)
# are deterministic: each is made once per grader, however many files it grades.
def predicted_number(measure, tol, what):
    """A check of a predicted number: within ``tol`` of what ``measure()`` gives."""
    def check(value):
        if type(value) not in (int, float) or isinstance(value, bool):
            raise Wrong(f"expected a number, got {_kind(value)}", "write a number, e.g. 0.0 or 2")
        run = measure()
        if not abs(value - run) <= tol:
            raise Wrong(f"you predicted {value:g}; the run says {run:.3g}", what)
    return check


def predicted_choice(measure, choices, what):
    """A check of a predicted choice (True/False or one of a few strings)."""
    def check(value):
        if value not in choices or type(value) is not type(choices[0]):
            raise Wrong(f"expected one of {choices}, got {value!r}", "write one of the choices")
        run = measure()
        if value != run:
            raise Wrong(f"you predicted {value!r}; the run says {run!r}", what)
    return check


@functools.lru_cache(maxsize=None)
def _dw2_column0():
    net, X, _ = seed()
    return max_abs(net.gradient(X, G_QUESTION)["W2"][:, 0])


@functools.lru_cache(maxsize=None)
def _dw1_is_zero():
    net, X, _ = seed()
    return bool(max_abs(net.gradient(X, G_QUESTION)["W1"]) == 0.0)


@functools.lru_cache(maxsize=None)
def _mask_changes_direction():
    net, X, _ = seed()
    g, D = net.gradient(X, G_QUESTION), fixes.masked(net, X, G_QUESTION, np.array([0.0, 1.0]))
    return not all(np.array_equal(g[k], D[k]) for k in g)


@functools.lru_cache(maxsize=None)
def _masked_drift_order():
    net, X, _ = visible()
    lrs = np.logspace(-5, -3, 5)
    D = fixes.masked(net, X, G_QUESTION, np.array([0.0, 1.0]))
    return _slope(lrs, [max_abs(net.copy().step(D, lr)(X)[:, 0] - net(X)[:, 0]) for lr in lrs])


@functools.lru_cache(maxsize=None)
def _freeze_drift_unseen():
    net, X, _ = seed()
    probe = data.probe_inputs()
    D = fixes.freeze(net, X, G_QUESTION, trainable=net.output_keys)
    return max_abs(net.copy().step(D, 10.0)(probe)[:, 0] - net(probe)[:, 0])


@functools.lru_cache(maxsize=None)
def _freeze_trainable_count():
    net, _, _ = seed()
    return sum(net.params[k].size for k in net.output_keys)


@functools.lru_cache(maxsize=None)
def _projected_order(on_batch):
    net, X, _ = visible()
    probe = data.probe_inputs()
    where = X if on_batch else probe
    lrs = np.logspace(-5, -3, 5)
    D = fixes.project(net, X, G_QUESTION)
    return _slope(lrs, [max_abs(net.copy().step(D, lr)(where)[:, 0] - net(where)[:, 0]) for lr in lrs])


@functools.lru_cache(maxsize=None)
def _restore_steps():
    net, X, ref = _off_constraint()
    return len(fixes.restore(net, X, ref).history) - 1


@functools.lru_cache(maxsize=None)
def _larger_for_visible():
    net, X, _ = visible()
    return "dense" if len(X) * net.n_params > len(X) ** 2 else "gram"


@functools.lru_cache(maxsize=None)
def _adjoint_gap():
    net, X, _ = visible()
    D, alpha = _random_direction(net, 11), _rng(12).normal(size=len(X))
    J = jacobian.dense_rows(net, X, keep=[0])
    a = alpha @ (J @ flat(D))
    return abs(a - flat(jacobian.unflatten(J.T @ alpha, net.params)) @ flat(D)) / abs(a)


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
    "06_tangent_kernel": ("the cross-output tangent kernel, by layer", {
        "jacobian_rows": check_jacobian_rows, "cross_kernel": check_cross_kernel,
        "kernel_by_layer": check_kernel_by_layer}),
    "07_gram_trick": ("J1 D and J1^T alpha from per-layer factors, never J1", {
        "jvp_out1": check_jvp_out1, "vjp_out1": check_vjp_out1}),
    "08_span_projection": ("span projection, layer by layer", {
        "span_project": check_span_project, "frozen_layers": check_frozen_layers}),
    "09_adam_projection": ("project Adam's update, not its gradient", {
        "adam_update": check_adam_update, "project_out1": check_project_out1}),
    "10_memory_project": ("a project: learn a new task, hold out1 on a memory", {
        "hold_on_memory": check_hold_on_memory}),
}


# -- the grader's own answers, standing in for a student's function that another one calls ----
def _sigmoid_backward(da, z):
    s = 1.0 / (1.0 + np.exp(-np.asarray(z, dtype=float)))
    return np.asarray(da, dtype=float) * s * (1 - s)


def _affine_backward(dz, a_prev, W):
    dz, a_prev, W = (np.asarray(x, dtype=float) for x in (dz, a_prev, W))
    return a_prev.T @ dz, dz.sum(axis=0), dz @ W.T


def _restore_step(net, X, ref):
    residual = max_abs(net(X)[:, 0] - ref)
    fixes.restore(net, X, ref, max_iter=1)
    return residual


#: Per function that another function of its exercise calls: the reference, run in the grader
#: when a failing caller is graded again with its failing callee answered right (``grade_file``).
REFERENCES = {
    "sigmoid_backward": _sigmoid_backward,
    "affine_backward": _affine_backward,
    "freeze": lambda net, X, G, trainable: fixes.freeze(net, X, G, trainable=list(trainable)),
    "jacobian_out1": lambda net, X: jacobian.dense_rows(net, X, keep=[0]),
    "gram_out1": lambda net, X: jacobian.OutputJacobian(net, X, keep=[0]).gram(),
    "restore_step": _restore_step,
    "jacobian_rows": lambda net, X, k: jacobian.dense_rows(net, X, keep=[int(k)]),
}


#: What a student may call from mlp_ref in each exercise: the template's imports and the network
#: it is handed (a class brings its bases and methods). Every other public function of the
#: package is a tripwire in the child: calling it from the student's code is reported.
_NET = ["network.MLP", "network.Forward", "network.Backward"]
_FLAT = ["jacobian.flatten", "jacobian.unflatten"]
ALLOWED = {
    "01_layer_backward": [],
    "02_masked_loss": _NET,
    "03_freeze": _NET,
    "04_projection": _NET + _FLAT,
    "05_restore": _NET + _FLAT + ["jacobian.dense_rows"],
    "06_tangent_kernel": _NET + _FLAT,
    "07_gram_trick": _NET,
    "08_span_projection": _NET,
    "09_adam_projection": _NET + _FLAT + ["jacobian.dense_rows"],
    "10_memory_project": _NET + _FLAT + ["jacobian.dense_rows"],
}

#: "Predict, then run": per exercise, the constants a student fills in and their checks, each
#: against a run made here (None in the file: not answered yet).
PREDICTIONS = {
    "01_layer_backward": {
        "PREDICT_DW2_COLUMN0": predicted_number(_dw2_column0, 0.0, "with G = [0, -1], dz2[:, 0] = 0, "
                                                "so dW2[:, 0] = a1.T @ dz2[:, 0] is exactly 0.0"),
        "PREDICT_DW1_IS_ZERO": predicted_choice(_dw1_is_zero, [True, False], "dW1 collects da1 = dz2 @ "
                                                "W2.T, which out2's column feeds: the shared layer moves")},
    "02_masked_loss": {
        "PREDICT_MASK_CHANGES_DIRECTION": predicted_choice(_mask_changes_direction, [True, False],
                                                           "G's out1 column is already 0: mask * G is G"),
        "PREDICT_MASKED_DRIFT_ORDER": predicted_number(_masked_drift_order, 0.1, "the masked step is "
                                                       "the naive one: out1 drifts to first order")},
    "03_freeze": {
        "PREDICT_FREEZE_DRIFT": predicted_number(_freeze_drift_unseen, 0.0, "out1 reads neither W2[:, 1] "
                                                 "nor b2[1]; W2[:, 0] gets dz2[:, 0] = 0: nothing out1 "
                                                 "reads moves, on any input, at any lr"),
        "PREDICT_TRAINABLE_COUNT": predicted_number(_freeze_trainable_count, 0.0, "W2 is 4 x 2 and b2 "
                                                    "has 2 entries")},
    "04_projection": {
        "PREDICT_DRIFT_ORDER_ON_BATCH": predicted_number(lambda: _projected_order(True), 0.1,
                                                         "J1 D = 0 removes the first-order term"),
        "PREDICT_DRIFT_ORDER_OFF_BATCH": predicted_number(lambda: _projected_order(False), 0.1,
                                                          "the constraint holds on the batch only")},
    "05_restore": {
        "PREDICT_RESTORE_STEPS": predicted_number(_restore_steps, 1.0, "Gauss-Newton squares the "
                                                  "residual each step: 2e-2, 4e-4, 2e-7, ... to 1e-12")},
    "06_tangent_kernel": {
        "PREDICT_OUTPUT_LAYER_SHARE": predicted_number(
            lambda: max_abs(jacobian.tangent_kernel_by_layer(*seed()[:2])[seed()[0].depth]), 0.0,
            "out1 and out2 have disjoint output weights: that share is exactly 0.0"),
        "PREDICT_NAIVE_DRIFT_ORDER": predicted_number(_naive_drift_order, 0.1,
                                                      "-lr K12 G2: first order in lr")},
    "07_gram_trick": {
        "PREDICT_LARGER": predicted_choice(_larger_for_visible, ["dense", "gram"],
                                           "J1 holds n P numbers, the Gram n^2: P > n here"),
        "PREDICT_ADJOINT_GAP": predicted_number(_adjoint_gap, 1e-12, "J1^T is J1's adjoint: "
                                                "alpha . (J1 D) = (J1^T alpha) . D, to round-off")},
    "08_span_projection": {
        "PREDICT_ON_THE_BATCH": predicted_choice(_span_on_the_batch, ["freeze", "project"],
                                                 "the batch's gradient lies in the span of its own "
                                                 "layer inputs: every hidden layer freezes"),
        "PREDICT_DRIFT_AT_LR_1": predicted_number(_span_drift_at_lr_1, 1e-9, "no layer's input on "
                                                  "the memory moves: out1 there holds at any lr")},
    "09_adam_projection": {
        "PREDICT_GRADIENT_ORDER_HOLDS": predicted_choice(_gradient_order_holds, [True, False],
                                                         "Adam rescales each coordinate differently"),
        "PREDICT_FIRST_STEP_SIZE": predicted_number(_first_step_size, 0.01, "m_hat = D and v_hat = "
                                                    "D^2 on step 1: U = lr D / (|D| + eps)")},
    "10_memory_project": {
        "PREDICT_HELD_OFF_MEMORY": predicted_choice(_held_off_memory, [True, False], "the constraint "
                                                    "is on the memory's rows only"),
        "PREDICT_GAIN_FRACTION": predicted_number(_gain_fraction, 0.1, "out2's column of W2 and b2 "
                                                  "are free, and most of the hidden layers' freedom too")},
}

#: Points of a graded item in the gradebook's score: a function is worth more than a prediction
#: (it is the work; a prediction is a sentence of thought). ``POINTS`` gives an exercise's own,
#: where one item is worth more (exercise 10's project is one function); a teacher changes any of
#: them with ``check --points NAME=N`` (a function or prediction's name, or ``function`` /
#: ``prediction`` for every one).
FUNCTION_POINTS, PREDICTION_POINTS = 2.0, 1.0
POINTS = {"10_memory_project": {"hold_on_memory": 6.0}}


def points(exercise, item, overrides=None):
    """The points ``item`` (a function or a prediction of ``exercise``) is worth: ``overrides``
    (name -> points: an item's name, or "function" / "prediction") first, then POINTS, then the
    default of its kind."""
    overrides = overrides or {}
    kind = "prediction" if item in PREDICTIONS.get(exercise, {}) else "function"
    if item in overrides:
        return float(overrides[item])
    if item in POINTS.get(exercise, {}):
        return POINTS[exercise][item]
    if kind in overrides:
        return float(overrides[kind])
    return PREDICTION_POINTS if kind == "prediction" else FUNCTION_POINTS
