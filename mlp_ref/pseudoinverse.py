"""The pseudo-inverse of a Gram matrix: the one solve of every projection and restoring step.

A projection needs alpha = (J J^T)^+ J D, for a symmetric positive semi-definite Gram J J^T
(``jacobian``) that may be singular or ill-conditioned: redundant constraints, dead units,
more constraints than parameters. ``GramSolver`` is the reference's solve, by eigendecomposition,
and decides the rank (which constraints are held) for both tiers: ``fast.GramSolver``, with the
same interface, reaches the same decision by a certified Cholesky factorisation where it can.

The accuracy a projection through the Gram states, and the PrecisionWarning that says by how
much and why a result falls short of it, are here too (``warn_if_not_held``): both tiers use them.
"""
from __future__ import annotations

import sys
import warnings

import numpy as np

from .boundary.checks import BadValue, check_array, check_rcond, checked, eps, tiny


def check_gram(name, gram, got=None):
    """A finite, square, symmetric float matrix (what eigh assumes without checking)."""
    floats = isinstance(gram, np.ndarray) and gram.dtype.kind == "f"
    gram = check_array(name, gram, gram.dtype if floats else np.float64)
    if gram.ndim != 2 or gram.shape[0] != gram.shape[1] or gram.shape[0] < 1:
        raise BadValue(f"{name}: expected a square (m, m) matrix with m >= 1, got shape {gram.shape}", argument=name)
    scale, asym = float(np.abs(gram).max()), float(np.abs(gram - gram.T).max())
    if asym > 1e3 * eps(gram.dtype) * max(scale, tiny(gram.dtype)):
        raise BadValue(f"{name}: expected a symmetric matrix, got max |gram - gram.T| = {asym:.3g} "
                       f"(max |gram| = {scale:.3g})", argument=name)
    return gram


def check_rhs(name, rhs, got):
    """A right-hand side of an (m, m) system (``got["net"]``, the solver): shape (m,) or (m, k)."""
    rhs, m = np.asarray(rhs), got["net"].gram.shape[0]
    if rhs.ndim not in (1, 2) or rhs.shape[0] != m:
        raise BadValue(f"{name}: expected shape ({m},) or ({m}, k), got {rhs.shape}", argument=name)
    return rhs


#: What a solver takes (``boundary.checks``: checked once, at the door).
GRAM = {"gram": check_gram, "rcond": check_rcond}
RHS = {"rhs": check_rhs}


def default_rcond(m, dtype):
    """m * eps(dtype): the size of the roundoff in the eigenvalues of an (m, m) matrix."""
    return max(m, 1) * eps(dtype)


class GramSolver:
    """alpha = gram^+ rhs for a symmetric positive semi-definite gram: the pseudo-inverse.

    gram = V diag(lam) V^T (eigendecomposition). Eigenvalues above ``rcond * max(lam)`` (and
    above the smallest normal number: ``kept_eigenvalues``) are inverted, the rest are treated
    as exactly zero: this is what makes redundant constraints (duplicate rows, dead ReLU
    units, more constraints than parameters) harmless, since their directions are simply not
    in the row space. Then gram^+ = V diag(1/lam kept) V^T.

    rcond defaults to m * eps(dtype), the size of the roundoff in the eigenvalues of an
    (m, m) matrix; in terms of J that drops singular values below sqrt(rcond) * sigma_max
    (about 4e-8 sigma_max for m = 8 in float64, 1e-3 in float32).

    The interface both tiers share (``fast.GramSolver`` too, which decides the rank as this class
    does): ``GramSolver(gram, rcond=None)``; the call, gram^+ rhs; ``refined(rhs, passes)``;
    ``gram``, ``rcond``; ``rank``, the number of eigenvalues kept; ``cond``, the largest over
    the smallest kept eigenvalue (the condition number of what is inverted); ``cond_exceeds``;
    ``exact``, whether cond was computed from the eigenvalues (always, here).
    """

    exact = True

    def __init__(self, gram, rcond=None):
        self.gram, rcond = checked(GRAM, locals())
        m = self.gram.shape[0]
        self.rcond = default_rcond(m, self.gram.dtype) if rcond is None else rcond
        lam, self.V = np.linalg.eigh(self.gram)               # ascending
        kept = kept_eigenvalues(lam, self.rcond)
        self.rank = int(kept.sum())
        self.cond = float(lam[-1] / lam[kept][0]) if self.rank else 1.0
        self.inv = np.zeros(lam.shape, dtype=lam.dtype)
        self.inv[kept] = 1.0 / lam[kept]

    def __call__(self, rhs):
        """gram^+ rhs, for rhs of shape (m,) or (m, k)."""
        rhs = checked(RHS, locals())
        inv = self.inv if rhs.ndim == 1 else self.inv[:, None]     # one 1/lambda per row
        return self.V @ (inv * (self.V.T @ rhs))

    def refined(self, rhs, passes):
        """gram^+ rhs, then ``passes`` times the residual rhs - gram alpha solved and added
        (iterative refinement on the system)."""
        alpha = self(rhs)
        for _ in range(passes):
            alpha += self(rhs - self.gram @ alpha)
        return alpha

    def cond_exceeds(self, threshold):
        """cond > threshold."""
        return self.cond > threshold


def kept_eigenvalues(lam, rcond):
    """Which eigenvalues (ascending) count as nonzero: those above rcond * the largest, and
    above the dtype's smallest normal number. Below that the Gram's products have underflowed
    (a saturated output: a sigmoid at 1e-22 in float32 has Jacobian rows of 1e-22, and their
    products, 1e-44, are subnormal), so such a constraint is numerically zero, and its 1/lambda
    would overflow."""
    m = len(lam)
    if not (m and lam[-1] > 0):
        return np.zeros(m, dtype=bool)
    return lam > max(rcond * lam[-1], tiny(lam.dtype))


# -- the accuracy of a projection ---------------------------------------------------------------
class PrecisionWarning(UserWarning):
    """A result short of the accuracy its docstring states, in the network's dtype; the message
    says by how much and why."""


#: The accuracy of ``nullspace`` (and ``project``), for m constraints:
#: |J D| <= (HELD_EPS + m) * eps * ||J| (|D| + |D_given|)||, the 2-norm of a product of absolute
#: values (``jacobian.magnitude``). Rounding J . D_given and D to the dtype leaves about eps times
#: it, and J^T alpha sums m terms an entry. Where the dtype resolves every constraint and
#: cond(J J^T) is within ``assured_cond`` both tiers stay below a quarter of it (0.21 at most: the
#: question's setups, 80 random networks and wider ones, float64 and float32, five CPU kernels);
#: past it, the passes' own error can exceed it (twice, on OpenBLAS's SkylakeX kernel, in the
#: table's 100 steps at cond 3.3e11: still below what the passes may leave, ``passes_leave``).
HELD_EPS = 32


def assured_cond(dtype, refine):
    """The cond(J J^T) up to which 1 + refine passes assure the accuracy: each leaves about
    eps * cond of the error before it, so (eps * cond)^(1 + refine) <= HELD_EPS * eps
    (3.8e8 in float64 and 1.6e4 in float32 with one refinement pass)."""
    return (HELD_EPS * eps(dtype)) ** (1.0 / (1 + refine)) / eps(dtype)


def held_unassured(solve, m, dtype, refine):
    """Whether the accuracy of ``nullspace`` must be measured: some of the m constraints were
    dropped (rank < m), or cond exceeds ``assured_cond``. refine = 0 is the formula alone: no
    accuracy is stated for it, nothing is measured."""
    return refine > 0 and (solve.rank < m or solve.cond_exceeds(assured_cond(dtype, refine)))


def passes_leave(cond, dtype, refine):
    """(eps * cond)^(1 + refine): the part of |J D_given| that 1 + refine passes leave at most
    when the Gram's condition number is ``cond`` (each multiplies the error by eps * cond)."""
    with np.errstate(over="ignore"):                    # inf: the passes may leave anything
        return (eps(dtype) * cond) ** (1 + refine)


def warn_if_not_held(J, gram, solve, given, D, refine):
    """A PrecisionWarning when ``nullspace``'s D falls short of its stated accuracy.

    With refine >= 1 and m constraints it states |J D| <= (HELD_EPS + m) eps ||J| (|D| + |given|)||
    (eps of the network's dtype; |J| |x| the product of absolute values, ``jacobian.magnitude``).
    Where that is not assured (``held_unassured``: constraints dropped, or cond(J J^T) above
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
    left = length(J.matvec(D))
    size = length(J.magnitude({k: abs(D[k]) + abs(v) for k, v in given.items()}))
    bound = (HELD_EPS + m) * eps(dtype) * size
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
               f"eps * cond = {eps(dtype) * solve.cond:.2g} of the error before it; refine more")
    if dtype == np.float32:
        why += "; float64 resolves them"
    warnings.warn(f"J D = 0 is held only to |J D| = {left / moved:.2g} |J D_given| in {dtype}, above "
                  f"the accuracy stated ({HELD_EPS + m} eps ||J| (|D| + |D_given|)|| = "
                  f"{bound / moved:.2g} |J D_given|): {why}", PrecisionWarning, stacklevel=callers_level())


def callers_level():
    """The ``stacklevel`` of the first frame outside mlp_ref, for a warning raised inside it: the
    line of the caller's code that asked for the result, whichever path of ours led there."""
    frame, level = sys._getframe(1), 1
    while frame is not None and frame.f_globals.get("__name__", "").startswith("mlp_ref"):
        frame, level = frame.f_back, level + 1
    return level


def length(v):
    """The 2-norm of a vector as a float, scaled by its largest entry so that no square
    overflows (``np.linalg.norm`` takes the same in some twenty lines of Python)."""
    top = float(np.abs(v).max()) if v.size else 0.0
    if not 0.0 < top < np.inf:
        return top
    v = v / top
    return top * float(np.sqrt(v @ v))
