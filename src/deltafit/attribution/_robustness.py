"""How many training samples must be removed to change a prediction (or the sign of a
coefficient): a certified lower bound and a verified upper bound with its witness set.

The question is Broderick, Giordano & Meager's, "An automatic finite-sample robustness metric:
when can dropping a little data make a big difference?" (answered there by a first-order
approximation); certified lower bounds for least squares are Moitra & Rohatgi's, "Provably
auditing ordinary least squares in low dimensions", and Freund & Hopkins's, "Towards practical
robustness auditing for linear regression".  Here, for every loss with a gradient:

* **lower** — removing a set R changes the gradient at the stored solution β to
  ``g_R = ∇J(β) − C Σ_{i∈R} wᵢ ℓ'ᵢ Φᵢ``; the retrained solution lies in the ball
  ``B(β − g_R/2, ‖g_R‖/2)`` (1-strong convexity; Okumura et al., "Quick sensitivity analysis
  for incremental data modification and its application to leave-one-out CV in linear
  classification problems", Theorem 1), so a decision value moves by at most
  ``½|⟨Φ(x), ∇J⟩| + ½‖Φ(x)‖ ‖∇J‖ + Σ_{i∈R} ½ C wᵢ |ℓ'ᵢ| (|k(x, xᵢ)| + ‖Φ(x)‖ ‖Φᵢ‖)``;
  the k largest terms bound every removal of k samples.
* **upper** — the samples ranked by their exact leave-one-out effects
  (:func:`~deltafit.attribution.loo_effects`) toward the other label; the smallest prefix whose
  summed effects change it is removed from a copy of the model by its exact update, and kept
  (the **witness**) if the prediction does change; else one more sample, up to
  ``max_removals``.
"""

from __future__ import annotations

import numbers
from typing import Any

import numpy as np
from numpy.typing import ArrayLike

from deltafit.attribution._common import Fitted, labels_of
from deltafit.attribution._effects import _View, loo_effects, view_effects

__all__ = ["robustness", "Robustness"]

_SLACK = 1e-9  # relative allowance for rounding in the certified bound


class Robustness:
    """Result of :func:`robustness`, one entry per audited point (or one for ``coef=j``).

    Attributes
    ----------
    lower : ndarray of float
        Certified: removing fewer than ``lower`` training samples cannot change the
        prediction (sign).  ``inf`` when no removal of fewer than all samples can.
    upper : ndarray of float
        Removing the ``upper`` samples of ``witness`` does change it (verified by an exact
        update); ``inf`` when no such set was found within ``max_removals``.
    witness : list of ndarray or None
        The sample ids of each found set (None where ``upper`` is inf).
    prediction : ndarray
        The model's current predictions (labels, or the coefficient).

    Examples
    --------
    >>> import deltafit
    >>> from deltafit.attribution import robustness
    >>> from deltafit.datasets import load_breast_cancer
    >>> X, y = load_breast_cancer()
    >>> m = deltafit.LinearRegressor().fit(X[:50, :3], X[:50, 5])
    >>> r = robustness(m, coef=0, max_removals=3)
    >>> len(r), bool(r.lower[0] <= r.upper[0])
    (1, True)
    """

    def __init__(
        self, lower: ArrayLike, upper: ArrayLike, witness: list, prediction: ArrayLike
    ) -> None:
        self.lower, self.upper = np.asarray(lower, float), np.asarray(upper, float)
        self.witness, self.prediction = witness, np.asarray(prediction)

    def __len__(self):
        return self.lower.size

    def __repr__(self):
        fin = np.isfinite(self.upper)
        return (
            f"Robustness(n={len(self)}, median lower={np.median(self.lower):g}, "
            f"found={int(fin.sum())})"
        )

    def to_frame(self) -> Any:
        """The result as a pandas DataFrame (``prediction``, ``lower``, ``upper``,
        ``witness``), least robust first."""
        import pandas as pd

        df = pd.DataFrame(
            {
                "prediction": self.prediction,
                "lower": self.lower,
                "upper": self.upper,
                "witness": [None if w is None else list(map(int, w)) for w in self.witness],
            }
        )
        return df.sort_values(["upper", "lower"], kind="stable")


def _first_reaching(const, terms, gap):
    """Smallest k ≥ 1 with ``const + (sum of the k largest terms) ≥ gap`` per row (inf when
    none): rows of ``terms`` (r, n), ``const`` and ``gap`` (r,)."""
    srt = -np.sort(-terms, axis=1)
    reach = (const[:, None] + np.cumsum(srt, axis=1)) * (1 + _SLACK) + 1e-300 >= gap[:, None]
    hit = reach.any(axis=1)
    k = np.argmax(reach, axis=1) + 1.0
    return np.where(hit, k, np.inf)


def _terms(pv, fitted, M, mnorm):
    """Per-view pieces of the removal bound: ``const`` (m,) and ``terms`` (m, n)."""
    c = pv.C * np.abs(pv.d1())
    if pv.kernel:
        g = pv.alpha + pv.C * pv.d1()  # ∇J coefficients over the live samples
        gn = np.sqrt(max(float(g @ pv.K @ g), 0.0))
        gx = M @ g
        norms = np.sqrt(np.maximum(np.diag(pv.K), 0.0))
        kx = M  # k(x, x_i)
    else:
        g = pv.beta + pv.C * (pv.Phi.T @ pv.d1())
        gn = float(np.linalg.norm(g))
        gx = M @ g
        norms = np.linalg.norm(pv.Phi, axis=1)
        kx = M @ pv.Phi.T  # ⟨Φ(x), Φ_i⟩
    const = 0.5 * np.abs(gx) + 0.5 * mnorm * gn
    terms = 0.5 * c[None, :] * (np.abs(kx) + mnorm[:, None] * norms[None, :])
    return const, terms


def _coef_terms(pv, j):
    c = pv.C * np.abs(pv.d1())
    g = pv.beta + pv.C * (pv.Phi.T @ pv.d1())
    const = np.array([0.5 * abs(g[j]) + 0.5 * np.linalg.norm(g)])
    terms = (0.5 * c * (np.abs(pv.Phi[:, j]) + np.linalg.norm(pv.Phi, axis=1)))[None, :]
    return const, terms


def _check(max_removals, max_checks):
    for name, v in (("max_removals", max_removals), ("max_checks", max_checks)):
        if isinstance(v, bool) or not isinstance(v, numbers.Integral) or v < 1:
            raise ValueError(f"{name} must be a positive integer, got {v!r}")


def robustness(
    model: Any,
    X: ArrayLike | None = None,
    *,
    coef: int | None = None,
    max_removals: int = 10,
    max_checks: int = 3,
    chunk_size: int = 256,
) -> Robustness:
    """Fewest training samples whose removal changes each prediction on X (or the sign of
    coefficient ``coef``): certified lower bound, verified upper bound and witness.

    Parameters
    ----------
    model : fitted deltafit estimator with a differentiable loss (``keep_data=True``)
        A classifier for predictions; a linear classifier or regressor for ``coef``.
    X : array-like of shape (m, n_features), optional
        Points whose predicted labels are audited (not with ``coef``).
    coef : int, optional
        Audit the sign of the weight of feature ``coef`` of Φ (``model.coef_[coef]`` of a
        linear model without ``feature_map``) instead: Broderick, Giordano & Meager's question
        for a regression.  Binary or regression models.
    max_removals : int, default=10
        Largest witness set searched for.
    max_checks : int, default=3
        Exact updates tried per point (set sizes from the effects' prediction up).
    chunk_size : int, default=256
        As in :func:`~deltafit.attribution.loo_effects`.

    Returns
    -------
    Robustness
        ``lower <= (fewest removals that change it) <= upper`` at every point.

    Raises
    ------
    ValueError
        For the hinge loss, a regressor without ``coef``, both or neither of X and ``coef``,
        a kernel or multiclass model with ``coef``, a coefficient index out of range, or the
        input errors of :func:`~deltafit.attribution.loo_effects`.

    References
    ----------
    Broderick, Giordano & Meager, "An automatic finite-sample robustness metric: when can
    dropping a little data make a big difference?"; Okumura et al., "Quick sensitivity analysis
    for incremental data modification and its application to leave-one-out CV in linear
    classification problems" (the removal balls).

    Examples
    --------
    >>> import numpy as np
    >>> import deltafit
    >>> from deltafit.attribution import robustness
    >>> from deltafit.datasets import load_breast_cancer
    >>> X, y = load_breast_cancer()
    >>> m = deltafit.LinearClassifier(loss="logistic").fit(X[:100], y[:100])
    >>> r = robustness(m, X[100:110], max_removals=5)
    >>> bool(np.all(r.lower <= r.upper))
    True
    """
    _check(max_removals, max_checks)
    if (X is None) == (coef is None):
        raise ValueError(
            "give either X (audit predictions) or coef=j (audit a coefficient's "
            "sign), not both or neither"
        )
    fitted = Fitted(model, "robustness")
    if fitted.loss == "hinge":
        raise ValueError(
            "robustness needs a differentiable loss (squared, logistic, "
            "squared_hinge); the hinge loss has no gradient to bound removals by"
        )
    if coef is not None:
        return _coef_robustness(fitted, coef, max_removals, max_checks, chunk_size)
    if not fitted.classifier:
        raise ValueError(
            "robustness of predictions needs a classifier (a label to change); "
            "for a regressor audit a coefficient's sign with coef=j"
        )
    base = fitted.decision(X)
    Xv = fitted.rows_of(X)
    M = fitted.mapped(Xv)
    if fitted.kernel:
        from deltafit.kernels import kernel_diagonal

        Xd = Xv.toarray() if hasattr(Xv, "toarray") else Xv
        mnorm = np.sqrt(np.maximum(kernel_diagonal(Xd, **fitted.problem.kernel_params), 0.0))
    else:
        mnorm = np.linalg.norm(M, axis=1)
    views = [_View(fitted, v) for v in fitted.views]
    parts = [_terms(pv, fitted, M, mnorm) for pv in views]
    E = loo_effects(model, X, chunk_size=chunk_size)  # type: ignore[arg-type]               # (n, m[, K])
    classes = model.classes_
    pred = labels_of(classes, base)
    m = base.shape[0]
    lower = np.empty(m)
    plans: list[Any] = []  # per point: ranked ids, predicted k
    if not fitted.multiclass:
        const, terms = parts[0]
        lower[:] = _first_reaching(const, terms, np.abs(base))
        s = np.where(base > 0, 1.0, -1.0)
        for q in range(m):
            e = s[q] * E[:, q]
            order = np.argsort(e, kind="stable")
            plans.append((order, _predicted_k(s[q] * base[q], e[order])))
    else:
        top = np.argmax(base, axis=1)
        K = base.shape[1]
        lower[:] = np.inf
        best: list[Any] = [None] * m
        for k in range(K):
            others = top != k
            if not others.any():
                continue
            rows = np.flatnonzero(others)
            ct, tt = parts[k]
            const = np.array([parts[top[q]][0][q] + ct[q] for q in rows])
            terms = np.stack([parts[top[q]][1][q] + tt[q] for q in rows])
            gap = base[rows, top[rows]] - base[rows, k]
            lower[rows] = np.minimum(lower[rows], _first_reaching(const, terms, gap))
            for i, q in enumerate(rows.tolist()):
                e = E[:, q, top[q]] - E[:, q, k]
                order = np.argsort(e, kind="stable")
                kp = _predicted_k(gap[i], e[order])
                if best[q] is None or kp < best[q][1]:
                    best[q] = (order, kp)
        plans = best
    upper, witness = _verify(
        fitted, X, pred, plans, lower, max_removals, max_checks, lambda mm, Xq: mm.predict(Xq)
    )
    return Robustness(lower, upper, witness, pred)


def _predicted_k(gap, sorted_effects):
    """Smallest k whose k most negative effects bring ``gap`` (> 0) to ≤ 0 (inf if none)."""
    cs = gap + np.cumsum(sorted_effects)
    hit = np.flatnonzero(cs <= 0)
    return float(hit[0] + 1) if hit.size else np.inf


def _verify(fitted, X, pred, plans, lower, max_removals, max_checks, outcome):
    """Exact updates of copies of the model for the ranked removal sets."""
    cache = {}
    upper = np.full(len(plans), np.inf)
    witness = [None] * len(plans)
    for q, (order, kp) in enumerate(plans):
        start = int(max(lower[q], kp if np.isfinite(kp) else max_removals, 1))
        start = min(start, max_removals) if np.isfinite(kp) else max_removals
        if start < lower[q]:
            continue  # certified: no set that small changes it
        for k in range(start, min(start + max_checks, max_removals + 1)):
            key = tuple(sorted(order[:k].tolist()))
            if key not in cache:
                mm = fitted.removed(list(key))
                cache[key] = outcome(mm, X)
            if _changed(cache[key], pred, q):
                upper[q] = k
                witness[q] = np.sort(fitted.ids[list(key)])
                break
    return upper, witness


def _changed(new, pred, q):
    if np.ndim(pred) == 0:
        return np.sign(new) != np.sign(pred)
    return new[q] != pred[q]


def _coef_robustness(fitted, coef, max_removals, max_checks, chunk_size):
    if fitted.kernel or fitted.multiclass:
        raise ValueError(
            "robustness(coef=j) needs a linear model with one problem (binary "
            "classifier or regressor)"
        )
    pv = _View(fitted, fitted.views[0])
    p = pv.beta.size - (1 if fitted.problem.fit_intercept else 0)
    if isinstance(coef, bool) or not isinstance(coef, numbers.Integral) or not 0 <= coef < p:
        raise ValueError(f"coef must be a feature index in [0, {p}), got {coef!r}")
    const, terms = _coef_terms(pv, coef)
    bj = float(pv.beta[coef])
    lower = _first_reaching(const, terms, np.array([abs(bj)]))
    unit = np.zeros((1, pv.beta.size))
    unit[0, coef] = 1.0  # ⟨e_j, Δβ⟩ = Δβ_j
    fitted.cache = {}
    e = np.empty(fitted.n)
    pos = np.arange(fitted.n)
    for s0 in range(0, fitted.n, chunk_size):
        part = pos[s0 : s0 + chunk_size]
        E, left, _ = view_effects(fitted, pv, unit, part, None, 50)
        e[part] = E[:, 0]
        for j in left:
            e[part[j]] = np.asarray(fitted.removed([part[j]]).problem_.coef)[coef] - bj
    s = 1.0 if bj > 0 else -1.0
    order = np.argsort(s * e, kind="stable")
    kp = _predicted_k(abs(bj), (s * e)[order])

    def outcome(mm, _):
        return np.asarray(mm.problem_.coef)[coef]

    upper, witness = _verify(
        fitted, None, np.float64(bj), [(order, kp)], lower, max_removals, max_checks, outcome
    )
    return Robustness(lower, upper, witness, np.array([bj]))
