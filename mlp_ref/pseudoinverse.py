"""The pseudo-inverse of a Gram matrix: the one solve of every projection and restoring step.

A projection needs alpha = (J J^T)^+ J D, for a symmetric positive semi-definite Gram J J^T
(``jacobian``) that may be singular or ill-conditioned: redundant constraints, dead units,
more constraints than parameters. ``GramSolver`` is the reference's solve, by eigendecomposition,
and decides the rank (which constraints are held) for both tiers: ``fast.GramSolver``, with the
same interface, reaches the same decision by a certified Cholesky factorisation where it can.
"""
from __future__ import annotations

import numpy as np

from .boundary import checks
from .boundary.checks import check_gram, check_rcond, check_rhs


def default_rcond(m, dtype):
    """m * eps(dtype): the size of the roundoff in the eigenvalues of an (m, m) matrix."""
    return max(m, 1) * checks.eps(dtype)


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
        self.gram = check_gram("gram", gram)
        m = self.gram.shape[0]
        self.rcond = default_rcond(m, self.gram.dtype) if rcond is None else check_rcond(rcond)
        lam, self.V = np.linalg.eigh(self.gram)               # ascending
        kept = kept_eigenvalues(lam, self.rcond)
        self.rank = int(kept.sum())
        self.cond = float(lam[-1] / lam[kept][0]) if self.rank else 1.0
        self.inv = np.zeros_like(lam)
        self.inv[kept] = 1.0 / lam[kept]

    def __call__(self, rhs):
        """gram^+ rhs, for rhs of shape (m,) or (m, k)."""
        rhs = check_rhs(rhs, len(self.inv))
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
    return lam > max(rcond * lam[-1], checks.tiny(lam.dtype))
