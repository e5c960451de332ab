"""Symmetric positive definite helpers: Cholesky factor and inverse, Woodbury cores.

What the squared-loss states (Lee et al., "Exact incremental and decremental learning for
LS-SVM", Theorem 1 and Corollaries 1–4) need of dense symmetric matrices:

* :func:`_cholesky`, :func:`_inverse_from_cholesky` and :func:`_spd_inverse` factorise and
  invert ``ΦᵀΦ + ρI`` or ``K + ρI`` (LAPACK potrf / potri), with a ValueError naming the matrix
  when it is not numerically positive definite;
* :func:`_woodbury_core` and :func:`_spd_core` give the small core ``-G⁻¹`` of a
  Sherman–Morrison–Woodbury correction (None when it is numerically unreliable, so that the
  caller refactorises), and :func:`_correction_error` bounds the rounding such a correction
  leaves in a tracked inverse;
* :func:`_symmetric`, :func:`_symmetrized`, :func:`_sym_norm1` and :func:`_sym_matvec` work on
  matrices of which only the lower triangle is maintained, or whose triangles drifted apart by
  rounding; :func:`_mirror_lower` copies a lower triangle onto the upper one.

Nothing here knows about data or models.
"""

from __future__ import annotations

import numpy as np
from scipy import linalg
from scipy.linalg import blas

from deltafit._linalg._compensated import _EPS

__all__ = [
    "_CORE_RTOL",
    "_symmetric",
    "_symmetrized",
    "_sym_norm1",
    "_sym_matvec",
    "_cholesky",
    "_inverse_from_cholesky",
    "_mirror_lower",
    "_spd_inverse",
    "_woodbury_core",
    "_spd_core",
    "_correction_error",
]

# A Woodbury core whose smallest |eigenvalue| falls below this fraction of its largest (for a
# removal: a sample of leverage ≈ 1) is not trusted; the update is then redone by refactorising
# the exact statistics.
_CORE_RTOL = 1e-8


def _symmetric(A):
    """The full symmetric matrix whose lower triangle is ``A``."""
    L = np.tril(A)
    return L + np.tril(L, -1).T


def _symmetrized(H):
    """``(H + Hᵀ) / 2``, exactly symmetric: what a saved tracked inverse becomes.

    The tracked inverse is a sum of symmetric corrections whose products round asymmetrically
    (:meth:`LowRankInverse.fold`), each by ~ε times the size of the inverse *when it was
    made*: after updates that shrink the problem by many orders (every weight to 1e-6, or C
    small) the residue of the earlier, larger inverses is no longer small against the
    current one, and a load-time symmetry test relative to the current matrix cannot tell
    it from damage.  Projecting onto the symmetric matrices removes it and never moves the
    tracked inverse away from the true one (which is symmetric: in the Frobenius norm
    ``‖sym(H) − A⁻¹‖ ≤ ‖H − A⁻¹‖``), so ``save`` writes — and keeps using — the projection,
    and ``load`` can test symmetry to rounding.  β is not touched.

    In place when ``H`` is a writable float64 array (a tracked inverse of n × n: block by
    block, so the extra memory is two blocks, not two copies of H); the mirrored entries are
    bitwise equal (IEEE addition commutes).
    """
    if not (isinstance(H, np.ndarray) and H.dtype == np.float64 and H.flags.writeable):
        H = np.array(H, dtype=np.float64, order="F")
    n = H.shape[0]
    step = 512
    for i in range(0, n, step):
        i2 = min(i + step, n)
        D = H[i:i2, i:i2]
        D[...] = (D + D.T) * 0.5
        for j in range(i2, n, step):
            j2 = min(j + step, n)
            avg = (H[i:i2, j:j2] + H[j:j2, i:i2].T) * 0.5
            H[i:i2, j:j2] = avg
            H[j:j2, i:i2] = avg.T
    return H


def _sym_norm1(M, step=128):
    """1-norm of the symmetric matrix whose lower triangle is ``M`` (≥ its 2-norm).

    One pass over the lower triangle, ``step`` columns at a time: column ``j`` of the
    symmetric matrix sums ``|M[j:, j]|`` (the lower triangle's column) and ``|M[j, :j]|`` (its
    row), so each block of the lower triangle adds its column sums to its columns and its row
    sums to its rows (no p × p temporary, half the memory traffic of a full ``tril`` copy).
    """
    p = M.shape[0]
    col = np.zeros(p)
    row = np.zeros(p)
    upper = np.triu(np.ones((step, step), dtype=bool), 1)
    for j in range(0, p, step):
        j2 = min(j + step, p)
        B = np.abs(M[j:, j:j2])  # the block column from the diagonal down
        m = j2 - j
        B[:m][upper[:m, :m]] = 0.0  # the diagonal block's strict upper triangle is not kept
        col[j:j2] += B.sum(axis=0)
        row[j:] += B.sum(axis=1)
    return float(np.max(col + row - np.abs(np.diagonal(M))))


def _cholesky(A, what):
    """Lower Cholesky factor of the SPD matrix whose lower triangle is ``A``."""
    try:
        return linalg.cho_factor(A, lower=True, check_finite=False)
    except linalg.LinAlgError as exc:
        raise ValueError(
            f"ill-conditioned update: {what} is not numerically positive definite ({exc})"
        ) from exc


def _inverse_from_cholesky(c, what):
    """Full symmetric inverse from a lower Cholesky factor (LAPACK potri)."""
    H, info = linalg.lapack.dpotri(c[0], lower=1)
    if info != 0:
        raise ValueError(f"ill-conditioned update: inverting {what} failed (info={info})")
    H = np.asfortranarray(H)
    _mirror_lower(H)
    return H


def _mirror_lower(H, step=256):
    """Copy the strict lower triangle of the square ``H`` onto its upper one, in place, by
    blocks of ``step`` columns (no index arrays: ``triu_indices`` of a p × p matrix costs two
    p²/2 integer arrays and a gather, several times potri's own memory traffic)."""
    n = H.shape[0]
    upper = np.triu(np.ones((step, step), dtype=bool), 1)
    for j in range(0, n, step):
        j2 = min(j + step, n)
        H[:j, j:j2] = H[j:j2, :j].T  # the blocks above the diagonal block, from those left of it
        D = H[j:j2, j:j2]
        m = j2 - j
        np.copyto(D, D.T, where=upper[:m, :m])


def _spd_inverse(A, what):
    """Inverse of an SPD matrix by Cholesky (ValueError naming ``what`` if not SPD)."""
    c = _cholesky(A, what)
    return _inverse_from_cholesky(c, what), c


def _woodbury_core(G):
    """``-G⁻¹`` for a small symmetric (possibly indefinite) ``G``, or None if near singular."""
    if G.shape == (1, 1):
        g = float(G[0, 0])
        if not np.isfinite(g) or abs(g) < _CORE_RTOL * max(1.0, abs(g)):
            return None
        return np.array([[-1.0 / g]])
    lam, Q = np.linalg.eigh(0.5 * (G + G.T))
    if not np.all(np.isfinite(lam)):
        return None
    scale = max(1.0, float(np.max(np.abs(lam))))
    if np.min(np.abs(lam)) < _CORE_RTOL * scale:
        return None
    return -(Q / lam) @ Q.T


def _spd_core(A):
    """``-A⁻¹`` for a small SPD ``A`` (by Cholesky), or None if it is not numerically SPD."""
    try:
        c = linalg.cho_factor(A, lower=True, check_finite=False)
    except linalg.LinAlgError:
        return None
    return -linalg.cho_solve(c, np.eye(A.shape[0]), check_finite=False)


def _sym_matvec(M, x):
    """``M x`` for a symmetric ``M`` of which only the lower triangle is maintained (``x`` a
    vector, or a matrix of K columns)."""
    if x.ndim == 1:
        return blas.dsymv(1.0, M, x, lower=1)
    return blas.dsymm(1.0, M, x, side=0, lower=1)


def _correction_error(U, core):
    """Rounding error (a 2-norm bound, up to a small constant) that forming and applying the
    Woodbury correction ``U core Uᵀ`` adds to a tracked inverse: ``ε ‖U‖_F² ‖core‖_F``."""
    return _EPS * float(np.sum(U * U)) * float(np.linalg.norm(core))
