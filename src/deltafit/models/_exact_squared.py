"""Exact incremental / decremental states for the squared loss (LS-SVM, ridge, kernel ridge).

Lee et al. ("Exact incremental and decremental learning for LS-SVM"), Theorem 1 and Corollaries 1–4, update ``w`` and the auxiliary matrix
``C = Φ[ΦᵀΦ + ρI]⁻¹Φᵀ = I − ρ(ΦΦᵀ + ρI)⁻¹`` by the Woodbury identity when samples are added
``(Φ_a, y_a)`` and removed ``(Φ_r, y_r)``.  The states below do the same algebra in a numerically
stabler arrangement:

* the exact sufficient statistics are kept (primal: ``M = ΦᵀΦ + ρI`` and ``b = Φᵀy``;
  dual: the kernel matrix and the labels), so the solution can always be recomputed;
* the inverse ``H = M⁻¹`` (or ``(K + ρI)⁻¹``) is tracked as a base plus pending Woodbury
  corrections (:class:`~deltafit.models._lowrank.LowRankInverse`): one sample costs O(p²) in the
  primal (Cor. 1, 2) and O(n) plus O(n·r) in the dual, a batch of ``k`` costs O(p²k) (Cor. 3, 4);
* every ``max_rank`` corrections the inverse is folded and the solution refined against the exact
  statistics (one step of iterative refinement); if the refinement shows drift the inverse is
  recomputed from scratch.  Large batches go straight to a refactorisation of the updated exact
  statistics (a symmetric rank-k product plus one Cholesky factorisation).

``ρ = 1/(2C)`` maps Lee et al.'s ρ onto the canonical objective of ARCHITECTURE.md, "The problem".
"""

from __future__ import annotations

import numpy as np
from scipy import linalg
from scipy.linalg import blas

from ._gram import GramCache
from ._lowrank import LowRankInverse
from ._state import ModelState, check_symmetric, checked, padded

__all__ = ["PrimalSquaredState", "DualSquaredState"]

# A Woodbury core whose smallest |eigenvalue| falls below this fraction of its largest (for a
# removal: a sample of leverage ≈ 1) is not trusted; the update is then redone by refactorising
# the exact statistics.
_CORE_RTOL = 1e-8
# Iterative-refinement correction (relative) above which the tracked inverse is recomputed.
_DRIFT_RTOL = 1e-9
# A Schur complement of added samples within this factor of its rounding noise has lost too many
# digits to cancellation; the addition is then redone from the exact kernel matrix.
_SCHUR_MARGIN = 1e3
# Above this ratio of the largest kernel value to ρ, the dual state refines α after every update
# (an O(n²) product with the stored kernel matrix) instead of only at folds.
_REFINE_COND = 1e3
# Rows per chunk when streaming a large batch through syrk (bounds the gathered copy's memory).
_CHUNK = 512


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
    iu = np.triu_indices_from(H, 1)
    H[iu] = H.T[iu]
    return H


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


class Rows:
    """Rows ``source[index]`` of a matrix, gathered only when (and as) they are needed.

    Large batches stream through :func:`_gram_update` in chunks, so that the rows of a removal
    are gathered from the ledger's storage once and a bounded amount at a time.
    """

    def __init__(self, source, index=None):
        self.source = source
        self.index = None if index is None else np.asarray(index)

    def __len__(self):
        return self.source.shape[0] if self.index is None else self.index.size

    def array(self):
        return self.source if self.index is None else self.source[self.index]

    def chunks(self, size=None):
        size = size or _CHUNK
        n = len(self)
        for i in range(0, n, size):
            if self.index is None:
                block = self.source[i:i + size]
            else:
                block = self.source[self.index[i:i + size]]
            yield i, np.ascontiguousarray(block)


def as_rows(x):
    """``Rows`` from an array, a ``Rows`` or None (None for no rows)."""
    if x is None:
        return None
    rows = x if isinstance(x, Rows) else Rows(x)
    return rows if len(rows) else None


def _gram_update(M, rows, sign, y=None):
    """``M += sign · VᵀV`` on the lower triangle of the Fortran-ordered ``M`` (BLAS syrk, in
    chunks) and, if ``y`` is given, also return ``Vᵀy``; ``V`` are the rows (``Rows``)."""
    rhs = None if y is None else np.zeros(M.shape[0])
    if rows is None:
        return M, rhs
    for i, block in rows.chunks():
        # block.T is a Fortran-ordered (p, k) view: C += sign · A Aᵀ, no transposed copy
        M = blas.dsyrk(float(sign), block.T, beta=1.0, c=M, trans=0, lower=1, overwrite_c=1)
        if y is not None:
            rhs += block.T @ y[i:i + block.shape[0]]
    return M, rhs


def _sym_matvec(M, x):
    """``M x`` for a symmetric ``M`` of which only the lower triangle is maintained."""
    return blas.dsymv(1.0, M, x, lower=1)


class PrimalSquaredState(ModelState):
    """Exact state of ``(ΦᵀΦ + ρI) β = Φᵀy`` under row additions, removals and relabels.

    ``M = ΦᵀΦ + ρI`` is kept exactly (lower triangle, updated by BLAS syrk), together with its
    Cholesky factor from the last refactorisation; the explicit inverse that the one-sample
    Woodbury updates need is formed from that factor only when an update first asks for it.

    Parameters
    ----------
    opts : SolverOptions
        The fitted problem; ``ρ = 1/(2C)``.
    max_rank : int
        Pending Woodbury rank before a fold; batches larger than this refactorise instead.
    """

    kind, kernel, loss_names = "primal_squared", False, ("squared",)
    warm_per_sample = False

    def __init__(self, opts, max_rank=64):
        super().__init__(opts, max_rank)
        self.rho = float(opts.rho)

    # ------------------------------------------------------------------ build
    def fit(self, Phi, y, capacity=None, coef0=None):
        p = Phi.shape[1]
        M, self.b = _gram_update(np.zeros((p, p), order="F"), Rows(Phi), 1.0, y)
        M.flat[:: p + 1] += self.rho
        self.M0 = M
        self._init_buffers(p)
        self._refactor()
        return self

    def _init_buffers(self, p):
        self._P = np.zeros((self.max_rank, p))
        self._s = np.zeros(self.max_rank)
        self._np = 0  # pending rows not yet written into M0
        self.inv = LowRankInverse(np.zeros((p, p)), self.max_rank)
        self._chol = None      # Cholesky factor of M0 at the last refactorisation
        self._inv_ready = True  # whether inv.H0 is the inverse (else: form it from _chol)
        self.n_refactor = 0

    @property
    def p(self):
        return self.M0.shape[0]

    def _fold_rows(self):
        r = self._np
        if r:
            P, sg = self._P[:r], self._s[:r]
            self.M0, _ = _gram_update(self.M0, as_rows(P[sg > 0]), 1.0)
            self.M0, _ = _gram_update(self.M0, as_rows(P[sg < 0]), -1.0)
            self._np = 0

    def _refactor(self):
        """Recompute the factor and β from the exact statistics (O(p³)); the explicit inverse
        is formed later, on demand."""
        self._fold_rows()
        c = _cholesky(self.M0, "ΦᵀΦ + ρI")
        self.beta = linalg.cho_solve(c, self.b, check_finite=False)
        self._chol = c
        self._inv_ready = False
        self.inv.rank = 0
        self.n_refactor += 1

    def _ensure_inverse(self):
        if not self._inv_ready:
            self.inv.reset(_inverse_from_cholesky(self._chol, "ΦᵀΦ + ρI"))
            self._inv_ready = True

    def fold(self, refine=True):
        """Write pending corrections into the base; with ``refine``, refine β against ``M β = b``.

        Without ``refine`` the model (β) is untouched: only its representation changes.
        """
        if self.inv.rank == 0 and self._np == 0:
            return
        self._fold_rows()
        self.inv.fold()
        if not refine:
            return
        r = self.b - _sym_matvec(self.M0, self.beta)
        d = self.inv.matvec(r)
        self.beta = self.beta + d
        if np.linalg.norm(d) > _DRIFT_RTOL * max(np.linalg.norm(self.beta), 1e-300):
            self._refactor()

    def gradient_norm(self):
        """‖∇J(β)‖ = ‖2C (M β − b)‖ of the stored β, from the exact statistics (the pending rows
        included), O(p²): it certifies ‖β − β*‖ and covers rounding and the drift of the
        tracked inverse between refinements."""
        Mb = _sym_matvec(self.M0, self.beta)
        r = self._np
        if r:
            P = self._P[:r]
            Mb = Mb + P.T @ (self._s[:r] * (P @ self.beta))
        return float(np.linalg.norm(Mb - self.b)) / self.rho  # 2C = 1/ρ

    # ---------------------------------------------------------------- update
    def apply(self, Pa=None, ya=None, Pr=None, yr=None, Pl=None, dy=None):
        """Add rows ``(Pa, ya)``, remove rows ``(Pr, yr)``, change labels of rows ``Pl`` by ``dy``.

        On ValueError β and b are exactly as before (a fold done on the way only changed the
        representation of the same matrices).
        """
        beta0, b0 = self.beta, self.b
        try:
            return self._apply(Pa, ya, Pr, yr, Pl, dy)
        except ValueError:
            self.beta, self.b = beta0, b0
            raise

    def _apply(self, Pa, ya, Pr, yr, Pl, dy):
        p = self.p
        Pa, Pr = as_rows(Pa), as_rows(Pr)
        rel = None
        if Pl is not None and len(Pl):
            rel = as_rows(Pl).array().T @ dy
        k = (0 if Pa is None else len(Pa)) + (0 if Pr is None else len(Pr))
        if k > self.max_rank:
            return self._apply_refactor(Pa, ya, Pr, yr, rel)
        Pa = None if Pa is None else Pa.array()
        Pr = None if Pr is None else Pr.array()
        db = np.zeros(p) if rel is None else rel.copy()
        if Pa is not None:
            db += Pa.T @ ya
        if Pr is not None:
            db -= Pr.T @ yr
        if not self.inv.room(k):
            self.fold()
        self._ensure_inverse()  # after the fold, which may have refactorised
        t = self.beta + (self.inv.matvec(rel) if rel is not None else 0.0)
        if k == 0:
            self.beta = t
            self.b = self.b + db
            return
        parts = [(B, yy, sg) for B, yy, sg in ((Pa, ya, 1.0), (Pr, yr, -1.0)) if B is not None]
        V = parts[0][0] if len(parts) == 1 else np.vstack([B for B, _, _ in parts])
        s = np.concatenate([np.full(B.shape[0], sg) for B, _, sg in parts])
        yv = np.concatenate([yy for _, yy, _ in parts])
        W = self.inv.matvec(np.ascontiguousarray(V.T)) if k > 1 else \
            self.inv.matvec(V[0])[:, None]
        G = V @ W
        G.flat[:: k + 1] += s
        core = _woodbury_core(G)
        if core is None:  # leverage ≈ 1: Woodbury is unreliable, use the exact statistics
            return self._apply_refactor(as_rows(Pa), ya, as_rows(Pr), yr, rel)
        t = t + W @ (s * yv)
        beta = t + W @ (core @ (V @ t))
        r = self._np
        self._P[r:r + k] = V
        self._s[r:r + k] = s
        self._np = r + k
        self.inv.add(W, core)
        self.beta = beta
        self.b = self.b + db

    def _apply_refactor(self, Pa, ya, Pr, yr, rel):
        """Large batch: ``M ± ΦᵀΦ`` by streamed syrk products (rows read once), then one
        Cholesky factorisation.  ``Pa``, ``Pr``: ``Rows`` or None; ``rel``: Φ_lᵀ Δy or None."""
        saved = (self.M0.copy(), self.b, self.beta, self.inv.H0, self.inv.rank, self._np,
                 self._chol, self._inv_ready)
        try:
            self._fold_rows()
            self.M0, ba = _gram_update(self.M0, Pa, 1.0, ya)
            self.M0, br = _gram_update(self.M0, Pr, -1.0, yr)
            b = self.b.copy()
            for part, sg in ((ba, 1.0), (br, -1.0), (rel, 1.0)):
                if part is not None:
                    b += sg * part
            self.b = b
            self._refactor()
        except ValueError:
            (self.M0, self.b, self.beta, H0, rank, self._np, self._chol,
             self._inv_ready) = saved
            self.inv.H0 = H0
            self.inv.rank = rank
            raise

    def tracked_inverse(self):
        self._ensure_inverse()  # forms the explicit inverse from the held factor: β is untouched
        return self.inv.matvec

    def counters(self):
        return {"n_refactor": int(self.n_refactor), "n_folds": -1,  # folds are not counted
                "pending_rank": int(self.inv.rank)}

    def exact_matrix(self):
        """``ΦᵀΦ + ρI`` from the exact statistics, pending rows included (no fold), full."""
        M = np.tril(self.M0) + np.tril(self.M0, -1).T
        r = self._np
        if r:
            P = self._P[:r]
            M = M + (P.T * self._s[:r]) @ P
        return M

    def apply_change(self, change):
        self.apply(change.rows_add, change.t_add, change.rows_remove, change.removed_targets,
                   change.rows_relabel, change.target_shift)

    def warm_coef(self, slots):
        return self.beta.copy()

    # ------------------------------------------------------------ persistence
    def to_arrays(self, keep=None):
        self._ensure_inverse()
        self.fold(refine=False)
        M = np.tril(self.M0)
        M = M + np.tril(M, -1).T
        return {"state_M": M, "state_b": self.b,
                "state_beta": self.beta, "state_H": np.ascontiguousarray(self.inv.H0)}

    @classmethod
    def saved_shapes(cls, n, p):
        return {"state_M": (p, p), "state_b": (p,), "state_beta": (p,), "state_H": (p, p)}

    @classmethod
    def from_arrays(cls, arrays, opts, *, y=None, capacity=None, max_rank=64, result=None):
        st = cls(opts, max_rank)
        p = np.shape(arrays["state_b"])[0] if np.ndim(arrays["state_b"]) == 1 else -1
        M, b, beta, H = checked(arrays, cls.saved_shapes(None, p), "squared-loss state")
        check_symmetric(M, "matrix ΦᵀΦ + ρI")
        check_symmetric(H, "tracked inverse")
        d = np.diag(M)
        if d.size and float(d.min()) < st.rho - 1e-8 * float(np.max(np.abs(d))):
            raise ValueError("corrupt model file: the diagonal of ΦᵀΦ + ρI is below ρ = 1/(2C)")
        st._init_buffers(p)
        st.M0 = np.asfortranarray(M)
        st.b = b
        st.beta = beta
        st.inv = LowRankInverse(H, st.max_rank)
        return st


class _Unreliable(Exception):
    """A block Woodbury core was numerically unreliable; refactorise from the exact data."""


class DualSquaredState(ModelState):
    """Exact state of ``(K + ρI) α = y`` over the ledger's slots (kernel ridge / LS-SVM dual).

    Adding samples borders the system (Schur complement), removing samples deletes rows and
    columns (the rank-k downdate ``H − H[:, R] H[R, R]⁻¹ H[R, :]``), relabelling changes only
    ``y`` and costs ``O(n k)``.  Inactive slots have zero rows and columns in ``H`` once folded.
    """

    kind, kernel, loss_names = "dual_squared", True, ("squared",)
    warm_per_sample = True

    def __init__(self, opts, max_rank=64):
        super().__init__(opts, max_rank)
        self.rho = float(opts.rho)

    def fit(self, K, y, capacity, coef0=None):
        n = K.shape[0]
        self.gram = GramCache(K, capacity)
        self.y = np.zeros(capacity)
        self.y[:n] = y
        self.active = np.zeros(capacity, dtype=bool)
        self.active[:n] = True
        self.alpha = np.zeros(capacity)
        self.inv = LowRankInverse(np.zeros((capacity, capacity)), self.max_rank)
        self.n_refactor = 0
        self.n_folds = 0
        self._dirty, self._clean = [], []  # removed slots before / after exact zeroing
        self._refactor()
        return self

    @property
    def capacity(self):
        return self.y.shape[0]

    @property
    def refine_each(self):
        """Whether the system is ill-conditioned enough to refine α after every update."""
        return float(np.max(np.diagonal(self.gram.K))) > _REFINE_COND * self.rho

    def _refactor(self):
        A = np.flatnonzero(self.active)
        n = A.size
        dense = n == 0 or A[-1] == n - 1  # the active slots are 0..n-1: slices, no gathers
        G = np.array(self.gram.K[:n, :n], order="F") if dense else self.gram.sub(A)
        G.flat[:: n + 1] += self.rho
        HA, c = _spd_inverse(G, "K + ρI")
        if dense and n == self.capacity:
            H0 = HA
        else:
            H0 = np.zeros((self.capacity, self.capacity), order="F")
            if dense:
                H0[:n, :n] = HA
            else:
                H0[np.ix_(A, A)] = HA
        self.inv.reset(H0)
        alpha = np.zeros(self.capacity)
        alpha[A] = linalg.cho_solve(c, self.y[A], check_finite=False)
        self.alpha = alpha
        self._clean.extend(getattr(self, "_dirty", []))
        self._dirty = []
        self.n_refactor += 1

    def residual(self):
        """``y − (K + ρI) α`` on the active slots (zero elsewhere), without copying K."""
        a = self.alpha * self.active
        return (self.y - (self.gram.K @ a + self.rho * a)) * self.active

    def gradient_norm(self):
        """RKHS norm of ∇J at the stored α, ``2C sqrt(rᵀ K r)`` with r = y − (K + ρI)α the
        residual on the active slots (∇J = Σ g_i Φ(x_i), g = −2C r), O(n²)."""
        A = np.flatnonzero(self.active)
        r = self.residual()[A]
        return float(np.sqrt(max(r @ (self.gram.K[np.ix_(A, A)] @ r), 0.0))) / self.rho

    def fold(self, refine=True):
        """Fold corrections, zero inactive rows/columns exactly; with ``refine``, refine α
        (and re-invert if that shows drift).  Without ``refine`` α is untouched."""
        self.n_folds += 1
        if self.inv.rank == 0:
            return
        self.inv.fold()
        self._zero_dirty()
        if not refine:
            return
        d = self.inv.H0 @ self.residual()
        self.alpha = self.alpha + d
        if np.linalg.norm(d) > _DRIFT_RTOL * max(np.linalg.norm(self.alpha), 1e-300):
            self._refactor()

    def _zero_dirty(self):
        """Zero, exactly, the rows and columns of the slots removed since the last fold."""
        dead = np.array(sorted(set(self._dirty)), dtype=np.intp)
        if dead.size:
            self.inv.H0[dead, :] = 0.0
            self.inv.H0[:, dead] = 0.0
        self._clean.extend(dead.tolist())
        self._dirty = []

    def tracked_inverse(self):
        return self.inv.matvec

    def counters(self):
        return {"n_refactor": int(self.n_refactor), "n_folds": int(self.n_folds),
                "pending_rank": int(self.inv.rank)}

    def reusable_slots(self):
        """Removed slots whose rows and columns are now exactly zero: safe to reuse."""
        clean, self._clean = self._clean, []
        return clean

    def apply_change(self, change):
        self.apply(rem=change.remove_slots, add=change.add_slots, K_cross=change.K_cross,
                   K_new=change.K_new, y_add=change.t_add, rel=change.relabel_slots,
                   dy=change.target_shift, capacity=change.ledger.capacity)

    def warm_coef(self, slots):
        return self.alpha[slots].copy()

    def ensure_capacity(self, cap):
        if cap <= self.capacity:
            return
        self.fold()
        old = self.capacity
        self.gram.ensure_capacity(cap)
        for name in ("y", "alpha", "active"):
            a = getattr(self, name)
            b = np.zeros(cap, dtype=a.dtype)
            b[:old] = a
            setattr(self, name, b)
        self.inv.resize(cap)

    def take(self, keep, capacity):
        self.fold()
        self._dirty, self._clean = [], []
        n = len(keep)
        self.gram.take(keep, capacity)
        for name in ("y", "alpha", "active"):
            a = getattr(self, name)
            b = np.zeros(capacity, dtype=a.dtype)
            b[:n] = a[keep]
            setattr(self, name, b)
        self.inv.take(keep)
        self.inv.resize(capacity)

    def apply(self, rem=None, add=None, K_cross=None, K_new=None, y_add=None,
              rel=None, dy=None, capacity=None):
        """Relabel ``rel`` by ``dy``, remove slots ``rem``, add slots ``add``; all or nothing.

        ``capacity``: the ledger's capacity, which the state grows to first.  On ValueError α is
        exactly as before (padded to the new capacity).
        """
        alpha0 = self.alpha
        try:
            if capacity is not None:
                self.ensure_capacity(capacity)
            return self._apply(rem, add, K_cross, K_new, y_add, rel, dy)
        except ValueError:
            alpha = np.zeros(self.capacity)
            alpha[: alpha0.size] = alpha0
            self.alpha = alpha
            raise

    def _apply(self, rem, add, K_cross, K_new, y_add, rel, dy):
        k_rem = 0 if rem is None else len(rem)
        k_add = 0 if add is None else len(add)
        if k_rem + k_add > self.max_rank:
            # a large block: Woodbury applied to the base at once (BLAS-3, O(n² k)).  The base
            # cannot be rolled back, so on any failure it is rebuilt exactly: for the new data
            # when the block formula was merely unreliable, for the unchanged model otherwise.
            before = (self.y.copy(), self.active.copy(), list(self._dirty))
            try:
                return self._woodbury(None, rem, add, K_cross, K_new, y_add, rel, dy, k_rem,
                                      k_add)
            except _Unreliable:
                self.y, self.active, self._dirty = before[0].copy(), before[1].copy(), \
                    list(before[2])
                try:
                    return self._apply_refactor(rem, add, K_cross, K_new, y_add, rel, dy)
                except ValueError:
                    self._rebuild(before)
                    raise
            except ValueError:
                self._rebuild(before)
                raise
        if not self.inv.room(k_rem + k_add):
            self.fold()
        mark = self.inv.mark()
        dirty0 = list(self._dirty)
        try:
            return self._woodbury(mark, rem, add, K_cross, K_new, y_add, rel, dy, k_rem, k_add)
        except ValueError:
            self.inv.rollback(mark)
            self._dirty = dirty0
            raise

    def _rebuild(self, before):
        """Restore labels / active set and recompute the inverse exactly for them."""
        self.y, self.active, self._dirty = before
        self._refactor()

    def _woodbury(self, mark, rem, add, K_cross, K_new, y_add, rel, dy, k_rem, k_add):
        """Sherman–Morrison–Woodbury for a relabel, a removal block and an addition block.

        ``mark`` is the rollback token for pending corrections, or None to apply the blocks to
        the base at once (large batches).
        """
        direct = mark is None
        put = self.inv.apply_now if direct else self.inv.add
        alpha = self.alpha.copy()
        y = self.y.copy()
        active = self.active.copy()
        if rel is not None and len(rel):
            alpha += self.inv.columns(rel) @ dy
            y[rel] += dy
        if k_rem:
            HR = self.inv.columns(rem)
            core = _spd_core(HR[rem])  # = -H_RR⁻¹; H_RR is SPD
            if core is None:
                if direct:
                    raise _Unreliable()
                self.inv.rollback(mark)
                return self._apply_refactor(rem, add, K_cross, K_new, y_add, rel, dy)
            alpha += HR @ (core @ alpha[rem])
            put(HR, core)
            self._dirty.extend(np.asarray(rem).tolist())
            alpha[rem] = 0.0
            y[rem] = 0.0
            active[rem] = False
        if k_add:
            self.gram.write(add, K_cross, K_new)
            B = K_cross * active[:, None]
            HB = self.inv.matvec(B)
            S = K_new - B.T @ HB
            S.flat[:: k_add + 1] += self.rho
            # S ⪰ ρI in exact arithmetic; far below that, the tracked inverse has drifted.  And
            # S = K_new + ρ − BᵀHB cancels: H is accurate to about ε·cond(K + ρI) (cond bounded
            # by trace(K)/ρ), so BᵀHB carries an error of that size times the kernel values;
            # an S within _SCHUR_MARGIN of it is unreliable and the addition is redone exactly.
            lam = np.linalg.eigvalsh(0.5 * (S + S.T))[0]
            trace = float(np.sum(np.diagonal(self.gram.K)[active]))
            noise = np.finfo(float).eps * (trace / self.rho + 1.0) * float(np.max(np.diag(K_new)))
            ok = lam > 0.5 * self.rho and lam > _SCHUR_MARGIN * noise
            core = _spd_core(S) if ok else None  # = -S⁻¹
            if core is not None:
                core = -core  # = S⁻¹
            else:
                if direct:
                    raise _Unreliable()
                self.inv.rollback(mark)
                return self._apply_refactor(rem, add, K_cross, K_new, y_add, rel, dy)
            U = -HB
            U[add] = np.eye(k_add)
            y[add] = y_add
            active[add] = True
            alpha += U @ (core @ (y_add - B.T @ alpha))
            put(U, core)
        if self.refine_each and not direct:
            # ill-conditioned system (ρ small next to the kernel values): one step of
            # iterative refinement against the exact kernel matrix after every update
            a = alpha * active
            r = (y - (self.gram.K @ a + self.rho * a)) * active
            alpha = alpha + self.inv.matvec(r) * active
        self.alpha, self.y, self.active = alpha, y, active
        if direct:  # one refinement step against the exact kernel matrix, as in a fold
            self._zero_dirty()
            d = self.inv.H0 @ self.residual()
            self.alpha = self.alpha + d
            if np.linalg.norm(d) > _DRIFT_RTOL * max(np.linalg.norm(self.alpha), 1e-300):
                self._refactor()

    def _apply_refactor(self, rem, add, K_cross, K_new, y_add, rel, dy):
        saved = (self.y.copy(), self.active.copy(), self.alpha, self.inv.H0, self.inv.rank)
        dirty0 = list(self._dirty)
        try:
            if rel is not None and len(rel):
                self.y[rel] += dy
            if rem is not None and len(rem):
                self.y[rem] = 0.0
                self.active[rem] = False
            if add is not None and len(add):
                self.gram.write(add, K_cross, K_new)
                self.y[add] = y_add
                self.active[add] = True
            if rem is not None and len(rem):
                self._dirty.extend(np.asarray(rem).tolist())  # zero after the refactorisation
            self._refactor()
            self.n_folds += 1
        except ValueError:
            self.y, self.active, self.alpha, H0, rank = saved
            self._dirty = dirty0
            self.inv.H0 = H0
            self.inv.rank = rank
            raise

    # ------------------------------------------------------------ persistence
    def to_arrays(self, keep):
        self.fold(refine=False)
        return {"state_K": self.gram.sub(keep), "state_alpha": self.alpha[keep],
                "state_H": self.inv.H0[np.ix_(keep, keep)]}

    @classmethod
    def saved_shapes(cls, n, p):
        return {"state_K": (n, n), "state_alpha": (n,), "state_H": (n, n)}

    @classmethod
    def from_arrays(cls, arrays, opts, *, y, capacity, max_rank=64, result=None):
        st = cls(opts, max_rank)
        n = y.shape[0]
        K, alpha, H = checked(arrays, cls.saved_shapes(n, None), "kernel state")
        check_symmetric(K, "kernel matrix")
        check_symmetric(H, "tracked inverse")
        st.gram = GramCache(K, capacity)
        st.y = padded(y, capacity)
        st.active = np.zeros(capacity, dtype=bool)
        st.active[:n] = True
        st.alpha = padded(alpha, capacity)
        H0 = np.zeros((capacity, capacity), order="F")
        H0[:n, :n] = H
        st.inv = LowRankInverse(H0, max_rank)
        st._dirty, st._clean = [], []
        st.n_refactor = 0
        st.n_folds = 0
        return st
