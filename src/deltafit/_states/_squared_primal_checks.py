"""Load-time checks of the primal squared-loss state's saved arrays (:class:`PrimalSavedChecks`).

A mixin of :class:`~deltafit._states._squared_primal.PrimalSquaredState`: a model file's
statistics ``M = ΦᵀWΦ + ρI`` and ``b = ΦᵀWt`` (Lee et al., "Exact incremental and decremental
learning for LS-SVM", Theorem 1: the sufficient statistics of the closed form) checked against
the count and labels, the normal equations and the stored rows (see
:meth:`~deltafit._states._protocol.ModelState.check_saved_statistics` and its siblings).
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from deltafit._states._saved_checks import EPS, abs_rows, check_residual, refuse_rows, row_blocks

__all__ = ["PrimalSavedChecks"]


class PrimalSavedChecks:
    """The load-time checks of :class:`~deltafit._states._squared_primal.PrimalSquaredState`
    (``self.rho``: ``ρ = 1/(2C)``)."""

    rho: float

    def check_saved_statistics(
        self,
        arrays: dict,
        *,
        n: int,
        intercept_scaling: float,
        fit_intercept: bool,
        n_positive: int | None = None,
    ) -> None:
        """``ΦᵀWΦ + ρI`` and ``ΦᵀWt`` on the constant feature against the count (the total
        weight, ``s²·Σw + ρ``) and the labels (``s·Σ w_i y_i``); nothing without an
        intercept.  ``n_positive``: a classifier's count of positives, used when the file
        keeps no labels (and no weights: which weights are the positives' is unknown then).
        See :meth:`ModelState.check_saved_statistics`."""
        if not fit_intercept:
            return
        s = float(intercept_scaling)
        M, b = arrays["state_M"], arrays["state_b"]
        w = arrays.get("ledger_w")
        expected = (n if w is None else float(np.sum(w))) * s * s + self.rho
        if abs(M[-1, -1] - expected) > 1e-6 * expected:
            raise ValueError(
                "corrupt model file: ΦᵀΦ + ρI does not count the samples "
                f"(constant feature: {M[-1, -1]:.6g}, expected {expected:.6g})"
            )
        total = None
        if "ledger_y" in arrays:
            y = arrays["ledger_y"]
            wy = y if w is None else w * y
            total, scale = float(wy.sum()), float(np.abs(wy).sum()) + 1.0
        elif n_positive is not None and w is None:
            total, scale = float(2 * n_positive - n), float(n)
        if total is not None and abs(b[-1] - s * total) > 1e-6 * s * scale:
            raise ValueError(
                "corrupt model file: Φᵀy does not match the labels on the constant feature"
            )

    def check_saved_solution(self, arrays: dict, solver: dict | None = None) -> None:
        """The normal equations ``M β = b`` hold to ``1e-6`` of their scale.  See
        :meth:`ModelState.check_saved_solution`."""
        norm = np.linalg.norm
        M, b, beta = arrays["state_M"], arrays["state_b"], arrays["state_beta"]
        check_residual(float(norm(M @ beta - b)), float(norm(M) * norm(beta) + norm(b)))

    def check_saved_rows(
        self,
        arrays: dict,
        *,
        first: bool = True,
        hinge: dict | None = None,
        kernel: Callable | None = None,
    ) -> None:
        """``(ΦᵀWΦ + ρI)v`` from the stored rows for a random ``v`` against ``M v`` (once for
        a matrix shared by K outputs or classes: ``first``), within the rounding bound plus
        the error ``lost`` the state bounds for the digits removals and reweights cancelled
        in ``M`` since it was last computed from the rows (a 2-norm bound, so ``lost·‖v‖``
        per entry); ``ΦᵀWt`` against ``b`` while no cancellation has happened (``lost`` = 0:
        afterwards ``b`` carries the residue of the cancelled samples, which the state does
        not bound).  See :meth:`ModelState.check_saved_rows` and
        :mod:`~deltafit._states._saved_checks`."""
        Phi = arrays.get("ledger_X")
        if Phi is None:
            return
        n, p = Phi.shape
        w = arrays.get("ledger_w")
        w = np.ones(n) if w is None else np.asarray(w, dtype=np.float64)
        y = arrays.get("ledger_y")
        t = np.zeros(n) if y is None else np.asarray(y, dtype=np.float64)
        M = arrays["state_M"]
        limits = arrays.get("state_limits")
        lost = float(limits[2]) if limits is not None else 0.0
        check_b = y is not None and lost == 0.0 and limits is not None
        if not (first or check_b):
            return
        rho = float(self.rho)
        v = np.random.default_rng().standard_normal(p)
        av = np.abs(v)
        Mv, S = rho * v, rho * av + np.abs(M) @ av
        if check_b:
            b = arrays["state_b"]
            bt, Sb = np.zeros(p), np.abs(b)
        for rows in row_blocks(n):  # two passes over a block and its |·|, both sums at once
            B, wb = Phi[rows], w[rows]
            A = abs_rows(B)
            u, au = wb * np.asarray(B @ v).ravel(), wb * np.asarray(A @ av).ravel()
            if check_b:
                u = np.column_stack([u, wb * t[rows]])
                au = np.column_stack([au, wb * np.abs(t[rows])])
            Bu, Au = np.asarray(B.T @ u), np.asarray(A.T @ au)
            if check_b:
                Mv, S = Mv + Bu[:, 0], S + Au[:, 0]
                bt, Sb = bt + Bu[:, 1], Sb + Au[:, 1]
            else:
                Mv, S = Mv + Bu.ravel(), S + Au.ravel()
        if first:
            err = np.abs(M @ v - Mv)
            bad = np.flatnonzero(err > 4.0 * EPS * (n + p + 4) * S + lost * np.linalg.norm(v))
            if bad.size:
                refuse_rows("matrix ΦᵀWΦ + ρI", f"features {bad[:5].tolist()}")
        if check_b:
            bad = np.flatnonzero(np.abs(b - bt) > 4.0 * EPS * (n + 4) * Sb)
            if bad.size:
                refuse_rows("targets' statistics ΦᵀWt", f"features {bad[:5].tolist()}")
