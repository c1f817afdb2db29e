"""The diagnosis of what went wrong, kept out of the lesson's bodies.

* Which argument is to blame when a pass or a step of the lesson is not finite. Each of these
  functions returns the error (a ``BadValue`` naming the argument in its message and as
  ``exc.argument``) for the caller to raise; callers decide by type and by ``exc.argument``,
  never by a message's text.
* Whether a projection holds J D = 0 to the accuracy ``fixes.nullspace`` states, and the
  PrecisionWarning that says by how much and why when it does not.
"""
import sys
import warnings

import numpy as np

from . import _checks
from ._checks import BadValue


def step_overflow(net, broken, lr, D):
    """The error for a step whose new values would not be finite (D itself is finite): the
    parameters that already were not, or else lr."""
    already = [f"{k} ({_checks.count_nonfinite(net.params[k])})" for k in broken
               if not _checks.finite(net.params[k])]
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
    broken = [f"{k} ({_checks.count_nonfinite(v)})" for k, v in net.params.items()
              if not _checks.finite(v)]
    if broken:
        which = "parameter" if len(broken) == 1 else "parameters"
        return BadValue(f"forward: output is not finite because {which} {', '.join(broken)} "
                        f"{'holds' if len(broken) == 1 else 'hold'} NaN/inf; "
                        f"typically an update with too large a learning rate, or a value set by hand. "
                        f"Rebuild or reload the network (net.copy() before a risky step keeps a good one)",
                        argument="forward")
    stage = next(k for k, v in record.stages.items() if not _checks.finite(v))
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
    broken = [k for k in used if not _checks.finite(net.params[k])]
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
    broken = next(k for k, v in stages.items() if not _checks.finite(v))
    torn = next((k for k, v in record.stages.items() if not _checks.finite(v)), None)
    if torn is not None:
        return BadValue(f"record: stage {torn} holds NaN/inf "
                        f"({_checks.count_nonfinite(record.stages[torn])}), which no record of "
                        f"net.forward(X) does; run forward again", argument="record")
    big_G = float(np.abs(G).max())
    if big_G > 1.0:
        return BadValue(f"G: expected values for which the backward pass stays finite in "
                        f"{net.dtype}, got max |G| = {big_G:.3g}, which makes stage {broken} "
                        f"overflow ({_checks.count_nonfinite(stages[broken])}); scale G down", argument="G")
    return BadValue(f"backward: stage {broken} overflowed {net.dtype} "
                    f"({_checks.count_nonfinite(stages[broken])}) with max |G| = {big_G:.3g}: "
                    f"the parameters are too large", argument="backward")


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
    eps = _checks.eps(dtype)
    return (HELD_EPS * eps) ** (1.0 / (1 + refine)) / eps


def held_unassured(solve, m, dtype, refine):
    """Whether the accuracy of ``nullspace`` must be measured: some of the m constraints were
    dropped (rank < m), or cond exceeds ``assured_cond``. refine = 0 is the formula alone: no
    accuracy is stated for it, nothing is measured."""
    return refine > 0 and (solve.rank < m or solve.cond_exceeds(assured_cond(dtype, refine)))


@_checks.overflow_is_reported
def passes_leave(cond, dtype, refine):
    """(eps * cond)^(1 + refine): the part of |J D_given| that 1 + refine passes leave at most
    when the Gram's condition number is ``cond`` (each multiplies the error by eps * cond)."""
    return (_checks.eps(dtype) * cond) ** (1 + refine)


def warn_if_not_held(J, gram, solve, given, D, refine):
    """A PrecisionWarning when |J D| exceeds (HELD_EPS + m) * eps * ||J| (|D| + |given|)|| and,
    with every constraint resolved, also what the passes leave (``passes_leave`` |J given|):
    measured (J D and one magnitude: two products like J . D) only where ``held_unassured``;
    the message says by how much and why."""
    m, dtype = gram.shape[0], gram.dtype
    if not held_unassured(solve, m, dtype, refine):
        return
    eps = _checks.eps(dtype)
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


#: the modules of the errstate wrapper around the lesson's functions (``_checks.overflow_is_reported``)
_WRAPPERS = ("numpy._core._ufunc_config", "numpy.core._ufunc_config", "contextlib")


def _ours(module):
    """Whether a frame of ``module`` is mlp_ref's own, or the errstate wrapper around it."""
    return module.startswith("mlp_ref") or module in _WRAPPERS
