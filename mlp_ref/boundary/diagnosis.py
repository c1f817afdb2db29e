"""After a failure only: who is to blame. Each function is handed the arrays of a result that is not finite, or
of a loop that stopped, and returns the error (a ``BadValue`` naming the argument to blame, ``exc.argument``) or
the reason, for the caller to raise or report; none computes the algorithm's quantities or changes a parameter."""
import numpy as np

from .checks import BadValue, count_nonfinite, finite


_top = lambda a: float(np.abs(a).max())       # the largest magnitude in a
REBUILD = "Rebuild or reload the network (net.copy() before a risky step keeps a good one)"


def _holding(net, keys, already=""):
    """'parameter b2 (1 NaN) holds' (or 'parameters ... hold') for those of ``keys`` not finite; empty if none."""
    broken = [f"{k} ({count_nonfinite(net.params[k])})" for k in keys if not finite(net.params[k])]
    return broken and f"parameter{'s' * (len(broken) > 1)} {', '.join(broken)} {already}hold{'s' * (len(broken) == 1)}"


def step_overflow(net, broken, lr, D):
    """A step whose new values would not be finite: the parameters that already were not, or lr."""
    if held := _holding(net, broken, "already "):
        return BadValue(f"net: {held} NaN/inf, whatever the step; nothing was changed. {REBUILD}", argument="net")
    return BadValue(f"lr: theta - lr * D would make {', '.join(broken)} overflow to inf/NaN (lr = {float(lr):g}, "
                    f"max |D[{broken[0]!r}]| = {_top(D[broken[0]]):.3g}); nothing was changed. Use a smaller lr",
                    argument="lr")


def forward_overflow(net, record):
    """A non-finite output: the parameter that holds NaN/inf, X when it is the large factor of z1,
    else the stage that overflowed."""
    if held := _holding(net, net.params):
        return BadValue(f"net: forward's output is not finite because {held} NaN/inf; typically an update with too "
                        f"large a learning rate, or a value set by hand. {REBUILD}", argument="net")
    stage = next(k for k, v in record.stages.items() if not finite(v))
    l, big_X, big_W = int(stage[1:]), _top(record.X), _top(net.params["W1"])
    if stage == "z1" and big_X > big_W:      # the input, not the weights, is what is huge
        return BadValue(f"X: expected values for which z1 = X @ W1 + b1 stays finite in {net.dtype}, got max |X| = "
                        f"{big_X:.3g} (max |W1| = {big_W:.3g}); scale X down", argument="X")
    culprits = (f"max |a{l - 1}| = {_top(record.a[l - 1]):.3g}, max |W{l}| = {_top(net.params[f'W{l}']):.3g}"
                if stage[0] == "z" else f"{net.activations[l - 1]} of a finite z{l}")
    return BadValue(f"net: forward's output is not finite: stage {stage} overflowed {net.dtype} ({culprits}) "
                    f"although every parameter is finite; the parameters are too large, typically after an update "
                    f"with too large a learning rate", argument="net")


def forward_from_overflow(net, layer, a_prev):
    """A non-finite output of ``forward_from``: a parameter it reads that holds NaN/inf, else a_prev
    or the weights, whichever is the larger factor."""
    if held := _holding(net, [f"{p}{l}" for l in range(layer, net.depth + 1) for p in "Wb"]):
        return BadValue(f"net: forward_from's output is not finite because {held} NaN/inf. {REBUILD}", argument="net")
    big_a, big_W = _top(a_prev), max(_top(net.params[f"W{l}"]) for l in range(layer, net.depth + 1))
    if big_a > big_W:
        return BadValue(f"a_prev: expected values for which the output of layers {layer} .. {net.depth} stays finite "
                        f"in {net.dtype}, got max |a_prev| = {big_a:.3g} (max |W| = {big_W:.3g}); scale a_prev down",
                        argument="a_prev")
    return BadValue(f"net: the output of layers {layer} .. {net.depth} overflowed {net.dtype} (max |a_prev| = "
                    f"{big_a:.3g}, max |W| = {big_W:.3g}): the parameters are too large", argument="net")


def backward_overflow(net, stages, G, record):
    """A backward pass that overflowed: the record when it holds NaN/inf (forward's are finite), G when
    its values are the large factor (every stage is linear in G), else the parameters."""
    broken = next(k for k, v in stages.items() if not finite(v))
    if (torn := next((k for k, v in record.stages.items() if not finite(v)), None)) is not None:
        return BadValue(f"record: stage {torn} holds NaN/inf ({count_nonfinite(record.stages[torn])}), which no "
                        f"record of net.forward(X) does; run forward again", argument="record")
    big_G, what = _top(G), f"stage {broken} overflow ({count_nonfinite(stages[broken])})"
    if big_G > 1.0:
        return BadValue(f"G: expected values for which the backward pass stays finite in {net.dtype}, got max |G| = "
                        f"{big_G:.3g}, which makes {what}; scale G down", argument="G")
    return BadValue(f"net: backward's stage {broken} overflowed {net.dtype} ({count_nonfinite(stages[broken])}) "
                    f"with max |G| = {big_G:.3g}: the parameters are too large", argument="net")


def gram_overflow(J, X, name="keep_X (X when not given)", short="keep_X"):
    """A Gram J J^T (or a tangent kernel, a block of one) that overflowed: the inputs X (the argument
    ``name``, ``short`` in formulas) when their own products a0 a0^T overflow, else the parameters."""
    with np.errstate(over="ignore", invalid="ignore"):
        broken = [l for l, A in J.inputs.items() if not finite(A @ A.T)]
    if broken and broken[0] == 1:
        return BadValue(f"{name}: expected values for which the Gram J J^T (which holds {short} @ {short}.T) stays "
                        f"finite, got max |{short}| = {_top(X):.3g}; scale {short} down", argument=short)
    what = (f"the inputs of layer {broken[0]}, a{broken[0] - 1}, reach {_top(J.inputs[broken[0]]):.3g}" if broken
            else "its signals (the output side's weights) overflow")
    return BadValue(f"net: the Gram J J^T overflows {X.dtype}: {what}, with max |{short}| = {_top(X):.3g}; the "
                    f"parameters are too large", argument="net")


def too_large(name, what, dtype, size):
    """``what``, made from ``name`` (whose size is ``size``), not finite in ``dtype``: ``name`` is named."""
    return BadValue(f"{name}: expected values for which {what} stays finite in {dtype}, got {size}", argument=name)


def distance_overflow(ref, dtype):
    """O_keep - ref not finite (the outputs are: the forward pass checks them): ref is too far."""
    return too_large("ref", "their distance to the outputs", dtype, f"max |ref| = {_top(ref):.3g}")


def pull_overflow(G, residual, lam, exc=None):
    """The penalty's G + lam * (O_keep - ref) not finite (``exc`` None), or its backward pass overflowed
    (``exc``): lam or ref when the pull, not the caller's G, is what is large, else ``exc`` itself."""
    big_G, far = _top(G), _top(residual)
    if exc is None:
        return BadValue(f"lam: expected a weight for which G + lam * (O_keep - ref) stays finite in {G.dtype}, got "
                        f"lam = {lam:.3g} (max |O_keep - ref| = {far:.3g})", argument="lam")
    if exc.argument != "G" or lam * far <= big_G:
        return exc                       # the caller's G, or the network: its own message says so
    blamed = "lam" if lam >= far else "ref"
    return BadValue(f"{blamed}: expected values for which the pull lam * (O_keep - ref) keeps the backward pass "
                    f"finite in {G.dtype}, got max |lam * (O_keep - ref)| = {lam * far:.3g} (lam = {lam:.3g}, "
                    f"max |O_keep - ref| = {far:.3g}, max |G| = {big_G:.3g})", argument=blamed)


def unreachable(history, exc, stepping):
    """``restore``'s step (``stepping``) or forward pass that failed with ``exc``: made from ref, by a step
    that does not fit (D or lr named) or after steps, so ref is named; else (a read-only net, no step yet) exc."""
    if stepping and exc.argument in ("D", "lr"):
        return BadValue(f"ref: expected values the network can reach, got max |O - ref| = {history[-1]:.3g}, whose "
                        f"Gauss-Newton step does not fit the parameters ({exc})", argument="ref")
    if stepping or not history:
        return exc
    return BadValue(f"ref: expected values the network can reach: {len(history)} restoring step(s) toward max "
                    f"|O - ref| = {history[0]:.3g} made its output overflow ({exc})", argument="ref")


def why_not_converged(history, solve, m):
    """The reason ``restore`` stopped short of its tolerance, from its residuals and last solve."""
    if solve is not None and solve.rank < m:
        return (f"{m - solve.rank} of the {m} constraints have eigenvalues of J J^T at most rcond = {solve.rcond:.2g} "
                f"times the largest (zero or dependent rows, or beyond the dtype's resolution), and no "
                f"Gauss-Newton step moves the residual along them")
    if len(history) > 1 and history[-1] > 0.5 * min(history[:-1]):
        return (f"the residual stopped falling (at {history[-1]:.3g}, its least {min(history):.3g}): ref may be too "
                f"far for Gauss-Newton's linear model, or its steps no more exact than eps * cond(J J^T) allows, "
                f"cond = {solve.cond:.3g}")
    return "the residual was still falling: a larger max_iter may reach tol"
