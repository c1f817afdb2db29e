"""The diagnosis of what went wrong, kept out of the lesson's bodies.

* Which argument is to blame when a pass or a step of the lesson is not finite. Each of these
  functions returns the error (a ``BadValue`` naming the argument in its message and as
  ``exc.argument``) for the caller to raise; callers decide by type and by ``exc.argument``,
  never by a message's text.
  Where a result is checked inside a lesson's body, one line calls a function here that
  raises that error (``finite_gram``, ``finite_kernel``, ``finite_direction``, ...).
* Whether a projection holds J D = 0 to the accuracy ``fixes.nullspace`` states, and the
  PrecisionWarning that says by how much and why when it does not.
* What ``restore`` reports: its tolerance, its residuals, and why it did not converge.
"""
import sys
import warnings
from contextlib import contextmanager
from dataclasses import dataclass, field

import numpy as np

from . import checks
from .checks import BadValue


def step_overflow(net, broken, lr, D):
    """The error for a step whose new values would not be finite (D itself is finite): the
    parameters that already were not, or else lr."""
    already = [f"{k} ({checks.count_nonfinite(net.params[k])})" for k in broken
               if not checks.finite(net.params[k])]
    if already:
        return BadValue(f"net: parameter{'s' if len(already) > 1 else ''} {', '.join(already)} "
                        f"already hold{'' if len(already) > 1 else 's'} NaN/inf, whatever the step; "
                        f"nothing was changed. Rebuild or reload the network (net.copy() before a "
                        f"risky step keeps a good one)", argument="net")
    return BadValue(f"lr: theta - lr * D would make {', '.join(broken)} overflow to inf/NaN "
                    f"(lr = {float(lr):g}, max |D[{broken[0]!r}]| = "
                    f"{np.abs(D[broken[0]]).max():.3g}); nothing was changed. Use a smaller lr",
                    argument="lr")


def forward_overflow(net, record):
    """The error for a non-finite output, naming what is to blame: the parameter that holds
    NaN/inf, X when it is the large factor of z1, else the stage that overflowed."""
    broken = [f"{k} ({checks.count_nonfinite(v)})" for k, v in net.params.items()
              if not checks.finite(v)]
    if broken:
        which = "parameter" if len(broken) == 1 else "parameters"
        return BadValue(f"forward: output is not finite because {which} {', '.join(broken)} "
                        f"{'holds' if len(broken) == 1 else 'hold'} NaN/inf; "
                        f"typically an update with too large a learning rate, or a value set by hand. "
                        f"Rebuild or reload the network (net.copy() before a risky step keeps a good one)",
                        argument="forward")
    stage = next(k for k, v in record.stages.items() if not checks.finite(v))
    l = int(stage[1:])
    big_X, big_W = float(np.abs(record.X).max()), float(np.abs(net.params["W1"]).max())
    if stage == "z1" and big_X > big_W:      # the input, not the weights, is what is huge
        return BadValue(f"X: expected values for which z1 = X @ W1 + b1 stays finite in {net.dtype}, "
                        f"got max |X| = {big_X:.3g} (max |W1| = {big_W:.3g}); scale X down", argument="X")
    if stage[0] == "z":   # z_l = a_{l-1} @ W_l + b_l: name the two factors that blew up
        culprits = f"max |a{l - 1}| = {np.abs(record.a[l - 1]).max():.3g}, " \
                    f"max |W{l}| = {np.abs(net.params[f'W{l}']).max():.3g}"
    else:
        culprits = f"{net.activations[l - 1]} of a finite z{l}"
    return BadValue(f"forward: output is not finite: stage {stage} overflowed {net.dtype} ({culprits}) "
                    f"although every parameter is finite; the parameters are too large, typically "
                    f"after an update with too large a learning rate", argument="forward")


def forward_from_overflow(net, layer, a_prev):
    """The error for a non-finite output of ``forward_from``: a parameter it reads that
    holds NaN/inf, else a_prev or the weights, whichever is the larger factor."""
    used = [f"{kind}{l}" for l in range(layer, net.depth + 1) for kind in "Wb"]
    broken = [k for k in used if not checks.finite(net.params[k])]
    if broken:
        return BadValue(f"forward_from: the output is not finite because {', '.join(broken)} "
                        f"{'holds' if len(broken) == 1 else 'hold'} NaN/inf; rebuild or reload the network",
                        argument="forward_from")
    big_a = float(np.abs(a_prev).max())
    big_W = max(float(np.abs(net.params[f"W{l}"]).max()) for l in range(layer, net.depth + 1))
    if big_a > big_W:
        return BadValue(f"a_prev: expected values for which the output of layers {layer} .. {net.depth} "
                        f"stays finite in {net.dtype}, got max |a_prev| = {big_a:.3g} "
                        f"(max |W| = {big_W:.3g}); scale a_prev down", argument="a_prev")
    return BadValue(f"forward_from: the output of layers {layer} .. {net.depth} overflowed {net.dtype} "
                    f"(max |a_prev| = {big_a:.3g}, max |W| = {big_W:.3g}): the parameters are too large",
                    argument="forward_from")


def backward_overflow(net, stages, G, record):
    """The error for a backward pass that overflowed: name the record when it holds NaN/inf (edited
    by hand: forward's records are finite), G when its values are the large factor (every
    stage is linear in G), else the parameters.

    A NaN or inf in any stage reaches a gradient or da0: one in dz_l makes its column sum
    db_l NaN or inf, and one in da_l (l >= 1) makes dz_l = da_l * f'(z_l) NaN or inf, as
    inf * 0 is NaN. So when the gradients and da0 are finite, every stage is."""
    broken = next(k for k, v in stages.items() if not checks.finite(v))
    torn = next((k for k, v in record.stages.items() if not checks.finite(v)), None)
    if torn is not None:
        return BadValue(f"record: stage {torn} holds NaN/inf "
                        f"({checks.count_nonfinite(record.stages[torn])}), which no record of "
                        f"net.forward(X) does; run forward again", argument="record")
    big_G = float(np.abs(G).max())
    if big_G > 1.0:
        return BadValue(f"G: expected values for which the backward pass stays finite in "
                        f"{net.dtype}, got max |G| = {big_G:.3g}, which makes stage {broken} "
                        f"overflow ({checks.count_nonfinite(stages[broken])}); scale G down", argument="G")
    return BadValue(f"backward: stage {broken} overflowed {net.dtype} "
                    f"({checks.count_nonfinite(stages[broken])}) with max |G| = {big_G:.3g}: "
                    f"the parameters are too large", argument="backward")


# -- the Jacobian, the projection and the penalty -------------------------------------------------
def largest(D):
    """max |D| over every array of a dict like params."""
    return max(float(np.abs(v).max()) for v in D.values())


@checks.overflow_is_reported
def finite_gram(J, keep_X, name="keep_X (X when not given)", short="keep_X"):
    """J J^T, refused when it overflows, naming what is to blame: the inputs ``keep_X`` (the
    argument ``name``, ``short`` in formulas) when their own products a0 a0^T overflow, else the
    parameters (hidden activations or signals too large)."""
    gram = J.gram()
    if checks.finite(gram):
        return gram
    broken = [l for l, A in J.inputs.items() if not checks.finite(A @ A.T)]
    if broken and broken[0] == 1:
        raise BadValue(f"{name}: expected values for which the Gram J J^T (which holds "
                       f"{short} @ {short}.T) stays finite, got max |{short}| = "
                       f"{float(np.abs(keep_X).max()):.3g}; scale {short} down", argument=short)
    what = (f"the inputs of layer {broken[0]}, a{broken[0] - 1}, reach "
            f"{float(np.abs(J.inputs[broken[0]]).max()):.3g}" if broken else
            "its signals (the output side's weights) overflow")
    raise BadValue(f"net: the Gram J J^T overflows {gram.dtype}: {what}, with max |{short}| = "
                   f"{float(np.abs(keep_X).max()):.3g}; the parameters are too large", argument="net")


def finite_kernel(net, jac, kernels, total):
    """Refuse a tangent kernel that overflowed: X's own products a0 a0^T, or the parameters."""
    if checks.finite(total):
        return
    big_X = float(np.abs(jac.inputs[1]).max())
    if not checks.finite(kernels[1]):
        raise BadValue(f"X: expected values for which the kernel (which holds X @ X.T) stays "
                       f"finite, got max |X| = {big_X:.3g}; scale X down", argument="X")
    raise BadValue(f"net: the kernel overflows {net.dtype} with max |X| = {big_X:.3g}: the "
                   f"parameters are too large", argument="net")


def finite_direction(D, given, dtype):
    """Refuse a projected direction that overflowed, naming D (its size is to blame)."""
    if not all(checks.finite(v) for v in D.values()):
        raise BadValue(f"D: expected values for which D - J^T (J J^T)^+ J D stays finite in "
                       f"{dtype}, got max |D| = {largest(given):.3g}; scale D down", argument="D")


def projection_overflow(net, G, detail=""):
    """The error for a projected direction that overflows: D is made from G, so G is named."""
    return BadValue(f"G: expected values for which the projected direction stays finite in "
                    f"{net.dtype}, got max |G| = {float(np.abs(G).max()):.3g}{detail}", argument="G")


def finite_projection(net, G, D):
    """Refuse ``project_dense``'s flat direction when it overflowed, naming G."""
    if not checks.finite(D):
        raise projection_overflow(net, G)


@contextmanager
def made_from_G(net, G, g):
    """Inside the block, an overflow of the direction (blamed on ``D``) is G's: the direction was
    made from G's gradient g, so the error names G."""
    try:
        yield
    except ValueError as exc:
        if getattr(exc, "argument", None) != "D":
            raise
        raise projection_overflow(net, G, f" (a gradient of max |g| = {largest(g):.3g})") from None


@contextmanager
def pulled(G, G_total, residual, ref, lam):
    """The penalty's pull lam * (O_keep - ref) checked before the block (its residual, then
    G + the pull), and an overflow of the block's backward pass blamed on lam or ref when the
    pull, not the caller's G, is what is large."""
    dtype = G.dtype
    if not checks.finite(residual):
        raise BadValue(f"ref: expected values whose distance to the outputs stays finite in "
                       f"{dtype}, got max |ref| = {float(np.abs(ref).max()):.3g}", argument="ref")
    if not checks.finite(G_total):
        raise BadValue(f"lam: expected a weight for which G + lam * (O_keep - ref) stays finite "
                       f"in {dtype}, got lam = {lam:.3g} (max |O_keep - ref| = "
                       f"{float(np.abs(residual).max()):.3g})", argument="lam")
    try:
        yield
    except ValueError as exc:           # G_total overflowed the backward pass: whose part is large?
        big_G, far = float(np.abs(G).max()), float(np.abs(residual).max())
        if getattr(exc, "argument", None) != "G" or lam * far <= big_G:
            raise                       # the caller's G: its own message says so
        blamed = "lam" if lam >= far else "ref"
        raise BadValue(f"{blamed}: expected values for which the pull lam * (O_keep - ref) keeps the "
                       f"backward pass finite in {dtype}, got max |lam * (O_keep - ref)| = "
                       f"{lam * far:.3g} (lam = {lam:.3g}, max |O_keep - ref| = {far:.3g}, "
                       f"max |G| = {big_G:.3g})", argument=blamed) from None


def finite_dots(g_r, r_r, g):
    """Refuse A-GEM's dot products g.r and r.r when one overflowed: G's when g.g does too, else
    the memory's keep_G."""
    if np.isfinite(g_r) and np.isfinite(r_r):
        return
    g_g = sum(float(np.vdot(v, v)) for v in g.values())
    blamed = "G" if not np.isfinite(g_g) else "keep_G"
    raise BadValue(f"{blamed}: expected values for which the dot products g.r and r.r stay "
                   f"finite, got g.r = {g_r}, r.r = {r_r}", argument=blamed)


def finite_ewc_pull(D, lam, dtype):
    """Refuse EWC's direction when g + lam * fisher * (theta - anchor) overflowed: lam's."""
    if not all(checks.finite(v) for v in D.values()):
        raise BadValue(f"lam: expected a weight for which lam * fisher * (theta - anchor) stays "
                       f"finite in {dtype}, got lam = {lam:.3g}", argument="lam")


def finite_fisher(F, keep_G, dtype):
    """Refuse a Fisher whose squared per-row gradients overflowed: keep_G's."""
    if not all(checks.finite(v) for v in F.values()):
        raise BadValue(f"keep_G: expected values whose squared per-row gradients stay finite in "
                       f"{dtype}, got max |keep_G| = {float(np.abs(keep_G).max()):.3g}",
                       argument="keep_G")


# -- the accuracy of a projection -------------------------------------------------------------
class PrecisionWarning(UserWarning):
    """A result short of the accuracy its docstring states, in the network's dtype; the message
    says by how much and why."""


#: The accuracy of ``nullspace`` (and ``project``), for m constraints:
#: |J D| <= (HELD_EPS + m) * eps * ||J| (|D| + |D_given|)||, the 2-norm of a product of absolute
#: values (``magnitude``). Rounding J . D_given and D to the dtype leaves about eps times it, and
#: J^T alpha sums m terms an entry. Where the dtype resolves every constraint and cond(J J^T)
#: is within ``assured_cond`` both tiers stay below a quarter of it (0.21 at most: the question's
#: setups, 80 random networks and wider ones, float64 and float32, five CPU kernels); past it,
#: the passes' own error can exceed it (twice, on OpenBLAS's SkylakeX kernel, in the table's
#: 100 steps at cond 3.3e11: still below what the passes may leave, ``passes_leave``).
HELD_EPS = 32


def assured_cond(dtype, refine):
    """The cond(J J^T) up to which 1 + refine passes assure the accuracy: each leaves about
    eps * cond of the error before it, so (eps * cond)^(1 + refine) <= HELD_EPS * eps
    (3.8e8 in float64 and 1.6e4 in float32 with one refinement pass)."""
    eps = checks.eps(dtype)
    return (HELD_EPS * eps) ** (1.0 / (1 + refine)) / eps


def held_unassured(solve, m, dtype, refine):
    """Whether the accuracy of ``nullspace`` must be measured: some of the m constraints were
    dropped (rank < m), or cond exceeds ``assured_cond``. refine = 0 is the formula alone: no
    accuracy is stated for it, nothing is measured."""
    return refine > 0 and (solve.rank < m or solve.cond_exceeds(assured_cond(dtype, refine)))


@checks.overflow_is_reported
def passes_leave(cond, dtype, refine):
    """(eps * cond)^(1 + refine): the part of |J D_given| that 1 + refine passes leave at most
    when the Gram's condition number is ``cond`` (each multiplies the error by eps * cond)."""
    return (checks.eps(dtype) * cond) ** (1 + refine)


def warn_if_not_held(J, gram, solve, given, D, refine):
    """A PrecisionWarning when ``nullspace``'s D falls short of its stated accuracy.

    With refine >= 1 and m constraints it states |J D| <= (HELD_EPS + m) eps ||J| (|D| + |given|)||
    (eps of the network's dtype; |J| |x| the product of absolute values, ``magnitude``). Where
    that is not assured (``held_unassured``: constraints dropped, or cond(J J^T) above
    ``assured_cond``) it is measured here (J D and one magnitude: two products like J . D), and a
    warning says by how much it falls short and why: constraints the dtype cannot resolve
    (float32 drops each whose eigenvalue of J J^T is below m * 1.2e-7 times the largest: on the
    seed network 4 of 8, and |J D| stays at 7e-4 |J g|, where 3e-8 is float32's own rounding),
    or a condition number too large for the passes. Above ``assured_cond``, with every constraint
    resolved, falling short by no more than the passes leave at that condition number
    (``passes_leave`` |J given|) is no shortfall: it is all they can do."""
    m, dtype = gram.shape[0], gram.dtype
    if not held_unassured(solve, m, dtype, refine):
        return
    eps = checks.eps(dtype)
    left = length(J.matvec(D))
    size = length(J.magnitude({k: abs(D[k]) + abs(v) for k, v in given.items()}))
    bound = (HELD_EPS + m) * eps * size
    if not left > bound:                     # held (an overflowing bound holds nothing to account)
        return
    moved = length(J.matvec(given)) or float("nan")       # 0: |J D| is roundoff alone
    if solve.rank == m and not left > passes_leave(solve.cond, dtype, refine) * moved:
        return                               # as near as 1 + refine passes come at this cond
    if solve.rank < m:
        why = (f"{m - solve.rank} of the {m} constraints have eigenvalues of J J^T at most rcond = "
               f"{solve.rcond:.2g} times the largest, too small to resolve in {dtype}: they were "
               f"dropped, and D still moves them")
    else:
        why = (f"cond(J J^T) = {solve.cond:.2g}: each of the {1 + refine} passes leaves about "
               f"eps * cond = {eps * solve.cond:.2g} of the error before it; refine more")
    if dtype == np.float32:
        why += "; float64 resolves them"
    warnings.warn(f"J D = 0 is held only to |J D| = {left / moved:.2g} |J D_given| in {dtype}, above "
                  f"the accuracy stated ({HELD_EPS + m} eps ||J| (|D| + |D_given|)|| = "
                  f"{bound / moved:.2g} |J D_given|): {why}", PrecisionWarning, stacklevel=callers_level())


def magnitude(J, D):
    """|J| |D| (absolute values, entry by entry), shape (m,), for an MLP's Jacobian J of either
    tier (its ``signals``, ``inputs`` and ``outputs``): the scale of the roundoff of J . D, and of
    J . fl(D) against J . D, each at most a few eps times it."""
    out = np.zeros(J.outputs.shape, dtype=J.outputs.dtype)
    for l, S in J.signals.items():
        dz = np.abs(J.inputs[l]) @ np.abs(D[f"W{l}"]) + np.abs(D[f"b{l}"])
        out += (np.abs(S) @ dz[:, :, None])[:, :, 0]          # |S_l[i, j]| . dz_i
    return out.reshape(-1)


def length(v):
    """The 2-norm of a vector as a float, scaled by its largest entry so that no square
    overflows (``np.linalg.norm`` takes the same in some twenty lines of Python)."""
    top = float(np.abs(v).max()) if v.size else 0.0
    if not 0.0 < top < np.inf:
        return top
    v = v / top
    return top * float(np.sqrt(v @ v))


def callers_level():
    """The ``stacklevel`` of the first frame outside mlp_ref, for a warning raised inside it: the
    line of the caller's code that asked for the result, whichever path of ours led there."""
    frame, level = sys._getframe(1), 1
    while frame is not None and _ours(frame.f_globals.get("__name__", "")):
        frame, level = frame.f_back, level + 1
    return level


#: the modules of the errstate wrapper around the lesson's functions (``checks.overflow_is_reported``)
_WRAPPERS = ("numpy._core._ufunc_config", "numpy.core._ufunc_config", "contextlib")


def _ours(module):
    """Whether a frame of ``module`` is mlp_ref's own, or the errstate wrapper around it."""
    return module.startswith("mlp_ref") or module in _WRAPPERS


# -- what restore reports -----------------------------------------------------------------------
@dataclass
class RestoreReport:
    """What ``restore`` did: it never loops forever and never pretends it converged.

    converged  : max |O_keep(keep_X) - ref| <= tol at the end
    iterations : Gauss-Newton steps taken
    residual   : the final max |O_keep(keep_X) - ref|
    history    : the residual before each step, and after the last one
    tol        : the tolerance it stopped at: the caller's tol, or the dtype's resolution at the
                 size of ref where tol asks for less (``restore_tolerance``)
    note       : "" when there is nothing to add; else why tol was raised to the floor, or why
                 the loop did not converge
    """
    converged: bool
    iterations: int
    residual: float
    history: list = field(default_factory=list)
    tol: float = 0.0
    note: str = ""

    def __str__(self):
        state = "converged" if self.converged else "NOT converged"
        return (f"restore: {state} after {self.iterations} iteration(s), "
                f"max |O - ref| = {self.residual:.3e}" + (f" ({self.note})" if self.note else ""))


#: restore aims no closer to ref than this many eps of the dtype times max(1, max |ref|): where
#: the dtype resolves every constraint it comes within 2 eps * max(1, max |ref|) of ref (measured
#: on 200 random networks in float64 and float32), while an absolute 1e-12 is less than one ulp
#: of 1e100 (1.9e84), and a millionth of float32's eps.
RESTORE_FLOOR_EPS = 16


def restore_tolerance(tol, ref):
    """(the tolerance ``restore`` stops at, a note): tol, or where tol asks for less than the dtype
    resolves at the size of what is held, its resolution there, RESTORE_FLOOR_EPS * eps *
    max(1, max |ref|) (at least 1: an output near 0 is still a sum of terms that need not be
    small), and then the note says so. So ref = 1e-3 and ref = 1e100 both converge on every CPU
    (an absolute 1e-12 at 1e100 asks for less than one unit in the last place, 1.9e84), and
    float32 (eps 1.2e-7) aims at what it can reach."""
    floor = RESTORE_FLOOR_EPS * float(np.finfo(ref.dtype).eps) * max(1.0, float(np.abs(ref).max()))
    if tol >= floor:
        return tol, ""
    return floor, (f"tol = {tol:.3g} is finer than {ref.dtype} resolves at max |ref| = "
                   f"{float(np.abs(ref).max()):.3g}: held to {RESTORE_FLOOR_EPS} eps * max(1, max |ref|) "
                   f"= {floor:.3g}")


def largest_residual(r, ref):
    """max |r| for the residual r = O_keep - ref, refused naming ref when it is not finite (the
    outputs are: the forward pass checks them)."""
    top = float(np.max(np.abs(r)))
    if not np.isfinite(top):
        raise BadValue(f"ref: expected values whose distance to the outputs stays finite in "
                       f"{r.dtype}, got max |ref| = {float(np.abs(ref).max()):.3g}", argument="ref")
    return top


def restore_report(history, tol, note, solve, m):
    """The RestoreReport of a finished loop: ``solve``, the last step's GramSolver (None: no
    step), m the number of constraints. When it did not converge, the note says why."""
    converged = history[-1] <= tol
    if not converged:
        note = why_not_converged(history, solve, m)
    return RestoreReport(converged=converged, iterations=len(history) - 1, residual=history[-1],
                         history=history, tol=tol, note=note)


def why_not_converged(history, solve, m):
    """The reason a restore stopped short of its tolerance, from its residuals and last solve."""
    if solve is not None and solve.rank < m:
        return (f"{m - solve.rank} of the {m} constraints have eigenvalues of J J^T at most rcond = "
                f"{solve.rcond:.2g} times the largest (zero or dependent rows, or beyond the dtype's "
                f"resolution), and no Gauss-Newton step moves the residual along them")
    if len(history) > 1 and history[-1] > 0.5 * min(history[:-1]):
        return (f"the residual stopped falling (at {history[-1]:.3g}, its least {min(history):.3g}): "
                f"ref may be too far for Gauss-Newton's linear model, or its steps no more exact "
                f"than eps * cond(J J^T) allows, cond = {solve.cond:.3g}")
    return "the residual was still falling: a larger max_iter may reach tol"


def restoring_step(net, D, residual, step=None):
    """theta <- theta - D (``step`` is net.step or fast.step), the error blaming ``ref`` when the
    step, built from ref, does not fit the parameters."""
    try:
        (step or type(net).step)(net, D, 1.0)
    except ValueError as exc:
        if getattr(exc, "argument", None) not in ("D", "lr"):   # the network's own (read-only, ...)
            raise
        raise BadValue(f"ref: expected values the network can reach, got max |O - ref| = "
                       f"{residual:.3g}, whose Gauss-Newton step does not fit the "
                       f"parameters ({exc})", argument="ref") from None


@contextmanager
def blamed_on_ref(history):
    """A forward pass of ``restore`` that overflows after its first steps: the steps that ref
    asked for did it, so ref is named (``history``: the residuals so far; none: the network
    was broken before any step, and says so itself). The residual's own overflow is silent
    here: ``largest_residual`` names it."""
    try:
        with np.errstate(over="ignore", invalid="ignore"):
            yield
    except ValueError as exc:
        if not history or getattr(exc, "argument", None) != "forward":
            raise
        raise BadValue(f"ref: expected values the network can reach: {len(history)} restoring "
                       f"step(s) toward max |O - ref| = {history[0]:.3g} made its output "
                       f"overflow ({exc})", argument="ref") from None
