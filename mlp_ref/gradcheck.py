"""Finite-difference gradient check of every backward stage, as a tool students call.

The scalar being differentiated is L = sum(G * O): its derivative with respect to the
output is exactly G, so every stage of ``net.backward(record, G)`` is the derivative of
this L with respect to that stage's variable (a parameter, a z_l, or an a_l). For each
entry we perturb the variable by +-h, run the rest of the network forward, and take
the centred difference

    dL/dx  ~  (L(x + h) - L(x - h)) / (2 h),     error O(h^2),

and compare with CS231n's relative error  |ours - num| / max(1e-8, |ours| + |num|).
The difference is computed in extended precision (np.longdouble), so that its own
round-off stays far below the float64 answer it checks; float32 networks would drown
the comparison in their own round-off, so the checker insists on float64.

    >>> report = check(net, X, G)
    >>> print(report)            # one line per stage, the worst entry of each
    >>> report.ok                # every stage below tol

When a stage fails
------------------
A FAIL is not always a wrong backward: the check has errors of its own. At the worst
entry of each failing stage the report names the likely cause (``StageCheck.cause``),
from estimates of those errors set against the disagreement E = |ours - num|:

    "kink"         a relu pre-activation z changes sign between x - h and x + h (it lies within
                   h |dz/dx| of 0): the difference averages the slopes on both sides of a point
                   where relu has no derivative. Found by running x - h, x, x + h forward.
    "saturated"    a unit on the entry's path has f'(z) < f'(0) / 100 and that explains E: the
                   gradient through it is nearly 0, so its relative error is meaningless. Float64
                   computes f'(z) = a (1 - a) or 1 - a^2 from a rounded a, which puts it off by
                   about eps / f'(z) (eps of float64) of itself, and the centred difference sees
                   L move by only about f'(z) h, a small change beside its round-off (below).
    "h too large"  truncation: the centred difference is off by about h^2 |f'''| / 6. Halving h
                   changes it by 3/4 of that, which is how it is estimated.
    "h too small"  round-off: f(x + h) and f(x - h) are each rounded to about eps_ext |f|, and
                   x +- h to eps_ext |x|, so the difference is off by about
                   eps_ext (|f| + |x| |f'|) / h, eps_ext that of np.longdouble. |f| is the size
                   of what is rounded into the outputs the step reaches: |G| (|O| + |f_L'(z_L)|
                   (|a_{L-1}| |W_L| + |b_L|)), the output layer's terms, not only their sum.
    "backward"     none of these comes near E: the backward itself is likely wrong. (With an h
                   other than the default, the entry is first tried at h = 1e-5: if it agrees
                   there, the cause is h, even where no power of h describes the error.)

An estimate accounts for E when it reaches E / 10: they are orders of magnitude, not bounds.
(A unit counts as saturated two orders below its peak slope, beyond that factor of 10.)
"""
from __future__ import annotations

import textwrap
from dataclasses import dataclass

import numpy as np

from .boundary import checks
from .boundary.checks import BadType, BadValue, check_inputs, check_output_grads, check_positive, checked
from .boundary.model_checks import check_mlp

#: The precision of the numerical side: 80-bit on x86 (eps 1.1e-19); float64 where the
#: platform has nothing wider, and then the check is only as good as float64's differences.
EXT = np.longdouble

#: The step of :func:`check` unless told: for an O(1) function, the round-off eps_ext |f| / h
#: and the truncation h^2 |f'''| / 6 are both far below the tolerance 1e-7 there.
DEFAULT_H = 1e-5

#: What ``StageCheck.cause`` may be, in the order they are tried (see the module's docstring).
CAUSES = ("kink", "saturated", "h too large", "h too small", "backward")

#: Activations with a kink, and where it is: relu(z) = max(z, 0) has no derivative at 0.
KINKS = {"relu": 0.0}

#: A unit is saturated when f'(z) < SATURATED * f'(0): two orders of magnitude below its peak
#: slope, more than the factor of 10 within which the error estimates are trusted.
SATURATED = 1e-2


def rel_error_map(ours, theirs):
    """|a - b| / max(1e-8, |a| + |b|), elementwise (CS231n's relative error)."""
    ours, theirs = np.asarray(ours, dtype=float), np.asarray(theirs, dtype=float)
    return np.abs(ours - theirs) / np.maximum(1e-8, np.abs(ours) + np.abs(theirs))


def rel_error(ours, theirs):
    """The worst entry of :func:`rel_error_map`."""
    return float(np.max(rel_error_map(ours, theirs)))


def numerical_gradient(f, x, h=1e-5):
    """Centred-difference gradient of the scalar sum(f()) with respect to the array x.

    ``x`` is perturbed in place, one entry at a time, and restored exactly afterwards;
    ``f`` takes no argument, reads ``x`` and returns an array. We subtract f(x + h) and
    f(x - h) entry by entry *before* summing: entries that the perturbation does not
    reach cancel exactly, so the roundoff is that of the entries that moved, not that of
    the whole sum (which would cost ~1e-11 absolute and fail small gradients).

    A step for which f(x +- h) overflows is refused by a ValueError naming h (the
    arithmetic runs with NumPy's overflow warnings off: the error is the whole report).
    """
    if isinstance(x, np.ma.MaskedArray) or not isinstance(x, np.ndarray):
        got = "a masked array" if isinstance(x, np.ma.MaskedArray) else checks.describe(x)
        raise BadType(f"x: expected a NumPy float array (perturbed in place), got {got}", argument="x")
    if x.dtype.kind != "f":
        # x + h would be truncated back into an integer array: refuse rather than guess
        raise BadType(f"x: expected a float array (x[i] +- h must be stored), got dtype {x.dtype}; "
                      f"pass x.astype(float) and let f read that array", argument="x")
    if not x.flags.writeable:
        raise BadValue("x: expected a writeable array (perturbed in place), got a read-only one", argument="x")
    if not callable(f):
        raise BadType(f"f: expected a function of no arguments that returns an array, got "
                      f"{checks.describe(f)}", argument="f")
    h = check_positive("h", h)
    grad = np.zeros_like(x, dtype=float)
    values_finite = True
    with np.errstate(over="ignore", invalid="ignore"):
        for idx in np.ndindex(*x.shape):
            old = x[idx]
            try:
                x[idx] = old + h
                f_plus = _numbers(f())
                x[idx] = old - h
                f_minus = _numbers(f())
            finally:
                x[idx] = old                  # restored exactly, even when f raises
            values_finite = values_finite and checks.finite(f_plus) and checks.finite(f_minus)
            grad[idx] = np.sum(f_plus - f_minus) / (2.0 * h)
        if checks.finite(grad):
            return grad
        at_x = _numbers(f())
    if not checks.finite(at_x):                       # at x itself: f's own values
        raise BadValue("f: expected a function whose values are finite, got NaN/inf at x itself",
                       argument="f")
    if values_finite:                   # finite values whose quotient overflows: no h can help
        raise BadValue(f"f: expected a function whose slope fits in {grad.dtype}, got one for which "
                       f"(f(x + h) - f(x - h)) / 2h overflows at h = {h:g}", argument="f")
    raise BadValue(f"h: expected a step for which f(x +- h) stays finite, got h = {h:g} "
                   f"(x up to {float(np.abs(x).max()):.3g})", argument="h")


def _numbers(value):
    """What f returned, as an array of numbers in its own dtype (extended precision stays so);
    None, strings and objects are refused."""
    try:
        out = np.asarray(value)
    except (TypeError, ValueError):
        out = None
    if out is None or out.dtype.kind not in "biuf":
        raise BadType(f"f: expected a function that returns an array of numbers, got "
                      f"{checks.describe(value)}", argument="f")
    return out


@dataclass
class StageCheck:
    """The comparison for one stage: its worst entry, ours against the numerical value, and
    for a failing stage the likely cause (one of ``CAUSES``) with a sentence that says why."""
    stage: str
    shape: tuple
    rel_error: float
    index: tuple
    ours: float
    numerical: float
    cause: str | None = None
    hint: str | None = None

    def __str__(self):
        return (f"{self.stage:>6} {str(self.shape):>10}  rel_error {self.rel_error:9.2e}  "
                f"worst at {self.index}: ours {self.ours:+.10e}, numerical {self.numerical:+.10e}")


@dataclass
class Report:
    """The result of :func:`check`: one :class:`StageCheck` per backward stage."""
    stages: list
    tol: float

    @property
    def max_rel_error(self):
        return max(s.rel_error for s in self.stages)

    @property
    def ok(self):
        return self.max_rel_error < self.tol

    @property
    def worst(self):
        return max(self.stages, key=lambda s: s.rel_error)

    @property
    def causes(self):
        """Stage -> likely cause, for every failing stage."""
        return {s.stage: s.cause for s in self.stages if s.cause is not None}

    def __str__(self):
        lines = []
        for s in self.stages:
            lines.append(str(s))
            if s.hint is not None:
                lines += textwrap.wrap(f"likely cause ({s.cause}): {s.hint}", width=100,
                                       initial_indent=" " * 8, subsequent_indent=" " * 10,
                                       break_on_hyphens=False)
        verdict = "PASS"
        if not self.ok:
            worst = self.worst
            verdict = f"FAIL: worst stage {worst.stage}" + (f", likely cause: {worst.cause}" if worst.cause else "")
        lines.append(f"max rel_error {self.max_rel_error:.2e} (tol {self.tol:.0e}): {verdict}")
        return "\n".join(lines)


def check_float64_mlp(name, net, got=None):
    """An MLP of dtype float64: float32 roundoff swamps a centred difference."""
    if check_mlp(name, net).dtype != np.float64:
        raise BadValue(f"{name}: gradient checking needs a float64 network, got dtype {net.dtype} "
                       f"(float32 roundoff swamps a centred difference)", argument=name)
    return net


#: What ``check`` takes (``boundary.checks``: checked once, at the door).
CHECK = {"net": check_float64_mlp, "X": check_inputs, "G": check_output_grads, "h": check_positive,
         "tol": check_positive}


def check(net, X, G, h=DEFAULT_H, tol=1e-7):
    """Check every stage of ``net.backward(net.forward(X), G)`` against finite differences.

    Parameters
    ----------
    net : MLP with dtype float64
    X : array_like, shape (n, d)
    G : array_like, shape (n, K) or (K,)
    h : float          step of the centred difference
    tol : float        a stage passes when its rel_error is below tol

    Returns
    -------
    Report, listing for each stage (in backward order) the worst relative error, where
    it is, and both values there; for a failing stage, the likely cause (see the module's
    docstring). The network itself is left untouched.
    """
    net, X, G, h, tol = checked(CHECK, locals())
    record = net.forward(X)
    G = np.array(G)
    back = net.backward(record, G)

    # The numerical side runs in extended precision on a copy, so that its round-off,
    # ~eps_ext * |O| / h, is far below the float64 answer we test.
    ext = net.copy()                      # we perturb its parameters in place
    ext.params = {k: v.astype(EXT) for k, v in ext.params.items()}
    G_ext = G.astype(EXT)
    sizes = _rounded_sizes(net, record)   # for the round-off estimate of a failing stage
    results = []
    for name, ours in back.stages.items():
        x, run = _variable(name, ext, record)
        num = numerical_gradient(lambda: G_ext * run()[1], x, h)     # L = sum(G * O)
        errs = rel_error_map(ours, num)
        worst = tuple(int(i) for i in np.unravel_index(int(np.argmax(errs)), errs.shape))
        stage = StageCheck(stage=name, shape=tuple(ours.shape), rel_error=float(errs[worst]),
                           index=worst, ours=float(ours[worst]), numerical=float(num[worst]))
        if stage.rel_error >= tol:
            stage.cause, stage.hint = _diagnose(name, ext, x, run, worst, stage.ours, stage.numerical,
                                                G_ext, sizes, h, tol, float(np.finfo(net.dtype).eps))
        results.append(stage)
    return Report(stages=results, tol=tol)


def _rounded_sizes(net, record):
    """(n, K): the size of the numbers rounded into each output, |O| + |f_L'(z_L)| (|a_{L-1}|
    |W_L| + |b_L|): the output itself and the terms of the output layer's sum, as f_L' carries
    them to O. An output that cancels, as w a - w, is rounded at the size of w, not of its sum."""
    L, last = net.depth, net.act(net.depth)
    with np.errstate(over="ignore", invalid="ignore", under="ignore"):
        terms = np.abs(record.a[L - 1]) @ np.abs(net.params[f"W{L}"]) + np.abs(net.params[f"b{L}"])
        return np.abs(record.output) + np.abs(last.df(record.z[L], record.output)) * terms


def _variable(name, net, record):
    """(x, run) for stage ``name`` of a network with extended-precision parameters: the array x
    (extended precision) that the stage is the derivative of L by, perturbed in place by the
    caller; and run() -> (z, out), every pre-activation z_l that depends on x (l -> array; a z
    stage's own x among them) and the output, computed from x as it is now."""
    L = net.depth
    if name == "dout":
        x = record.a[L].astype(EXT)
        return x, lambda: ({}, x)
    kind, l = name[:2], int(name[2:])
    if kind in ("dW", "db"):
        X = record.X.astype(EXT)
        return net.params[name[1:]], lambda: _forward(net, 1, X)
    if kind == "dz":
        x = record.z[l].astype(EXT)

        def run():
            z, out = _forward(net, l + 1, net.act(l).f(x))
            return {l: x.copy(), **z}, out
        return x, run
    x = record.a[l].astype(EXT)           # da_l
    return x, lambda: _forward(net, l + 1, x)


def _forward(net, layer, a):
    """Layers ``layer`` .. L from their input a = a_{layer-1}: (z, out), z: l -> z_l.

    In the precision of a and of the parameters: ``MLP.forward_from`` would round its input
    to the network's dtype, float64, and with it the perturbation h of a z or an a stage."""
    z = {}
    for l in range(layer, net.depth + 1):
        z[l] = a @ net.params[f"W{l}"] + net.params[f"b{l}"]
        a = net.act(l).f(z[l])
    return z, a


def _diagnose(name, net, x, run, idx, ours, num, G, sizes, h, tol, eps):
    """(cause, hint) for the worst entry ``idx`` of a failing stage, from the estimates of the
    module's docstring. ``eps`` is that of the network's dtype (float64); ``net``, ``G``, ``x``
    and ``run`` (from ``_variable``) are in extended precision; ``sizes`` (n, K) is the size of
    the numbers rounded into each output."""
    old = x[idx]

    def at(step):                         # (z, out) with x[idx] moved by step, then put back
        x[idx] = old + step
        try:
            z, out = run()
            return {l: np.array(v) for l, v in z.items()}, np.array(out)
        finally:
            x[idx] = old

    with np.errstate(over="ignore", invalid="ignore", under="ignore"):
        (z0, _), (zp, outp), (zm, outm) = at(0.0), at(h), at(-h)
        full = np.sum(G * (outp - outm)) / (2 * h)                       # the centred difference
        half = np.sum(G * (at(h / 2)[1] - at(-h / 2)[1])) / h            # the same at h / 2
        E = abs(ours - num)                                              # the disagreement
        allowed = tol * max(1e-8, abs(ours) + abs(num))                  # what tol lets through
        eps_ext = float(np.finfo(EXT).eps)
        if name == "dout":                   # f = G * O itself: one product
            F = float(abs(G[idx] * x[idx]))
        else:                                # the rows the step reaches: its own, or all for a parameter
            rows = slice(None) if name[:2] in ("dW", "db") else idx[0]
            F = float(np.sum(np.abs(G[rows]) * sizes[rows]))            # |f|, the size rounded
        roundoff = eps_ext * (F + abs(float(old)) * max(abs(ours), abs(num))) / h
        truncation = 4.0 / 3.0 * abs(float(full - half))                 # h^2 |f'''| / 6
        kink = _kink(net, z0, zp, zm)
        saturated = _saturated(name, net, idx, z0)

    if kink is not None:
        l, unit, z, move = kink
        where = f"z{l}{list(unit)} = {z:.3g} ({net.act(l).name})"
        if z == KINKS[net.act(l).name]:
            return "kink", (f"{where} is exactly at its kink, where it has no derivative: backward takes "
                            f"the slope on one side, the centred difference the mean of both; check at "
                            f"another input")
        return "kink", (f"{where} lies within h |dz/dx| = {move:.2g} of its kink at 0: it changes sign "
                        f"between x - h and x + h, so the centred difference mixes the slopes on both "
                        f"sides. Keep pre-activations farther from 0 (another input), or take h below "
                        f"{h * abs(z) / move:.1g}")
    if saturated is not None:
        l, unit, z, d, peak = saturated
        ours_roundoff = eps * (abs(ours) + abs(num)) / d                 # float64's f'(z): eps / f'(z)
        # round-off accounts for E, and would not if the unit had its unsaturated slope f'(0)
        if ours_roundoff >= E / 10 or (roundoff >= E / 10 and roundoff * d / peak < E / 10):
            return "saturated", (
                f"z{l}{list(unit)} = {z:.3g} ({net.act(l).name}) is saturated, f'(z) = {d:.2g} against "
                f"f'(0) = {peak:.2g}: the gradient through it is nearly 0 and its relative error "
                f"meaningless. Float64 computes f'(z) from a rounded a, a relative error of about eps / "
                f"f'(z) = {eps / d:.2g}, and the centred difference sees L move by only about f'(z) h, "
                f"so its round-off, eps_ext (|f| + |x| |f'|) / h = {roundoff:.2g}, is large beside "
                f"|ours - num| = {E:.2g}. Check with units out of saturation (smaller weights or inputs)")
    if truncation >= E / 10 and truncation >= 10 * roundoff:
        best = ""
        if F > 0:                           # where round-off eps F / h and truncation h^2 f''' / 6 meet
            f3 = 6 * truncation / h ** 2
            best = (f" (round-off and truncation balance near h = (3 eps_ext |f| / |f'''|)^(1/3) = "
                    f"{(3 * eps_ext * F / f3) ** (1 / 3):.1g})")
        return "h too large", (f"truncation: the centred difference is off by about h^2 |f'''| / 6 = "
                               f"{truncation:.2g} (estimated by halving h), more than tol allows here, tol "
                               f"max(1e-8, |ours| + |num|) = {allowed:.2g}. Take a smaller h, as the "
                               f"default {DEFAULT_H:g}{best}")
    if roundoff >= E / 10:
        return "h too small", (f"round-off: f(x +- h) and x +- h are rounded in extended precision "
                               f"(eps_ext = {eps_ext:.2g}), which puts the centred difference off by about "
                               f"eps_ext (|f| + |x| |f'|) / h = {roundoff:.2g}, more than tol allows here, "
                               f"tol max(1e-8, |ours| + |num|) = {allowed:.2g}. Take a larger h, as the "
                               f"default {DEFAULT_H:g}")
    if h != DEFAULT_H:                      # the estimates miss it: does the default step agree?
        with np.errstate(over="ignore", invalid="ignore", under="ignore"):
            at_default = np.sum(G * (at(DEFAULT_H)[1] - at(-DEFAULT_H)[1])) / (2 * DEFAULT_H)
        agrees = rel_error(ours, float(at_default))
        if agrees < tol and h > DEFAULT_H:
            return "h too large", (f"at h = {DEFAULT_H:g} this entry agrees with backward (rel_error "
                                   f"{agrees:.1e}), at h = {h:g} not: the step reaches beyond where f is "
                                   f"smooth, and no power of h describes the error any more (halving h "
                                   f"changed it by {truncation:.2g}). Take a smaller h, as the default "
                                   f"{DEFAULT_H:g}")
        if agrees < tol:
            return "h too small", (f"at h = {DEFAULT_H:g} this entry agrees with backward (rel_error "
                                   f"{agrees:.1e}), at h = {h:g} not: round-off swamps so small a step. "
                                   f"Take a larger h, as the default {DEFAULT_H:g}")
    also = "" if h == DEFAULT_H else f", and at h = {DEFAULT_H:g} it disagrees too"
    return "backward", (f"the check's own errors are far below |ours - num| = {E:.2g} (round-off "
                        f"{roundoff:.2g}, truncation {truncation:.2g}, no kink within h, no saturation "
                        f"that explains it{also}): the backward of this stage, or of a stage it reads, "
                        f"is likely wrong")


def _kink(net, z0, zp, zm):
    """(l, unit, z, move) for the pre-activation of a kinked activation that crosses its kink
    between x - h and x + h (the one nearest to it), or None. ``move`` = |z(x+h) - z(x-h)| / 2,
    about h |dz/dx|."""
    best = None
    for l, z in z0.items():
        name = net.act(l).name
        if name not in KINKS:
            continue
        at = KINKS[name]
        s0, sp, sm = np.sign(z - at), np.sign(zp[l] - at), np.sign(zm[l] - at)
        crossed = (s0 != sp) | (s0 != sm)
        if crossed.any():
            dist = np.where(crossed, np.abs(z - at), np.inf)
            unit = np.unravel_index(int(np.argmin(dist)), z.shape)
            if best is None or dist[unit] < abs(best[2] - at):
                move = float(abs(zp[l][unit] - zm[l][unit])) / 2
                best = (l, tuple(int(i) for i in unit), float(z[unit]), move)
    return best


def _saturated(name, net, idx, z0):
    """(l, unit, z, f'(z), f'(0)) for the most saturated unit that the worst entry's gradient
    flows through (the smallest f'(z) / f'(0), below SATURATED), or None.

    The path: for dz_l at (r, j) the unit (r, j) and row r of the layers above; for da_l at
    (r, i) row r of the layers above l; for dW_l or db_l of column j, column j of layer l and
    every unit above. f'(0) is the unsaturated slope (sigmoid 1/4, tanh 1); units with
    f'(z) = 0, as a relu's below 0, pass no gradient at all and are on no path."""
    if name == "dout":
        return None
    kind, own = name[:2], int(name[2:])
    rows = slice(None) if kind in ("dW", "db") else idx[0]
    best = None
    for l, z in z0.items():
        if l < own or (kind == "da" and l == own):
            continue
        on_path = np.zeros(z.shape, dtype=bool)
        if l == own:
            on_path[rows, idx[0] if kind == "db" else idx[1]] = True
        else:
            on_path[rows] = True
        act = net.act(l)
        zero = np.zeros(1, dtype=z.dtype)
        peak = float(np.abs(act.df(zero, act.f(zero)))[0])
        d = np.abs(act.df(z, act.f(z)))
        d = np.where(on_path & (d > 0) & (d < SATURATED * peak), d, np.inf)
        unit = np.unravel_index(int(np.argmin(d)), z.shape)
        if np.isfinite(d[unit]) and (best is None or d[unit] / peak < best[3] / best[4]):
            best = (l, tuple(int(i) for i in unit), float(z[unit]), float(d[unit]), peak)
    return best
