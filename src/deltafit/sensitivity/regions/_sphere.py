"""The sphere: "the new optimum lies in the ball (m, R)", and bounds of linear scores over it.

Every certificate of deltafit is a ball in model space (ARCHITECTURE.md, "Floors").  For a ball with
center m and radius R, any linear score of a point β of the ball satisfies
``⟨η, m⟩ − ‖η‖ R ≤ ⟨η, β⟩ ≤ ⟨η, m⟩ + ‖η‖ R`` (Theorem 1 of Okumura et al. (2015); Sivan et al.,
Lemma 1), with equality reached on the sphere.  Two forms share one interface:

* :class:`PrimalSphere` — m is a vector over explicit features Φ(x) (linear models, the
  constant feature last when there is an intercept);
* :class:`KernelSphere` — m = Σ_j c_j Φ(p_j) is a kernel expansion over points p_j (Sivan
  et al. eq. 3), evaluated with the kernel trick.

:class:`BallIntersection` gives the exact minimum and maximum of a linear score over the
intersection of two balls (closed form), never looser than either ball alone.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

import numpy as np
from numpy.typing import ArrayLike

from deltafit._linalg._features import features
from deltafit.kernels import kernel_diagonal
from deltafit.utils._validation import check_real, check_rows

__all__ = ["Sphere", "PrimalSphere", "KernelSphere", "BallIntersection", "two_ball_bounds"]


def _as_float_rows(a, what, width=None):
    a = np.asarray(a, dtype=np.float64)
    if a.ndim == 1:
        a = a.reshape(1, -1)
    if a.ndim != 2:
        raise ValueError(f"{what} must be a 1-D or 2-D array, got {a.ndim} dimensions")
    if width is not None and a.shape[1] != width:
        raise ValueError(f"{what} has {a.shape[1]} columns, expected {width}")
    if not np.all(np.isfinite(a)):
        raise ValueError(f"{what} contains NaN or infinity")
    return a


class Sphere:
    """A ball ``{β : ‖β − m‖ ≤ radius}`` of model space that contains an unknown optimum.

    Subclasses say how the center is represented; this base class turns center scores
    ``⟨η, m⟩`` and norms ``‖η‖`` into bounds.

    Examples
    --------
    Every ball of :mod:`deltafit.sensitivity` is a Sphere; :class:`PrimalSphere` is the
    simplest one.

    >>> import numpy as np
    >>> from deltafit.sensitivity import PrimalSphere, Sphere
    >>> ball = PrimalSphere(center=np.array([1.0, 0.0]), radius=0.5)
    >>> isinstance(ball, Sphere)
    True
    >>> lo, hi = ball.score_bounds(np.array([[1.0, 0.0], [0.0, 2.0]]))   # ⟨η, m⟩ ∓ ‖η‖ r
    >>> lo.tolist(), hi.tolist()
    ([0.5, -1.0], [1.5, 1.0])
    >>> ball.contains(np.array([1.3, 0.3])), ball.contains(np.array([2.0, 0.0]))
    (True, False)
    """

    radius: float
    _scores: Callable[..., tuple[np.ndarray, np.ndarray]]
    _decision_eta: Callable[[Any], tuple[Any, ...]]
    _compatible: Callable[[Any], None]
    _center_gap: Callable[[Any], float]

    # subclasses implement: _scores(eta) -> (⟨η_i, m⟩, ‖η_i‖); _decision_eta(X) -> eta spec;
    # _center_inner(other) -> (‖m‖², ⟨m, m_other⟩, ‖m_other‖²); _compatible(other)

    def score_bounds(self, *eta: ArrayLike) -> tuple[np.ndarray, np.ndarray]:
        """Lower and upper bounds of ``⟨η, β⟩`` over the ball, for each row of η.

        Returns
        -------
        lo, hi : ndarray of shape (k,)
            ``⟨η, m⟩ ∓ ‖η‖ · radius`` (Okumura et al. eq. 10; Sivan et al. eq. 7).
        """
        s, e = self._scores(*eta)
        return s - e * self.radius, s + e * self.radius

    def decision_bounds(self, X: ArrayLike) -> tuple[np.ndarray, np.ndarray]:
        """Bounds of the decision function ``⟨Φ(x), β⟩`` for the rows of X, over the ball.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
            Raw samples; the sphere's feature map (or kernel) is applied.

        Returns
        -------
        lo, hi : ndarray of shape (n_samples,)
        """
        return self.score_bounds(*self._decision_eta(X))

    def tightness(self, X: ArrayLike) -> np.ndarray:
        """``hi − lo`` of :meth:`decision_bounds`: ``2 ‖Φ(x)‖ · radius``."""
        lo, hi = self.decision_bounds(X)
        return hi - lo

    def intersect(self, other: Sphere) -> BallIntersection:
        """The intersection of this ball and ``other`` (same model space); see
        :class:`BallIntersection`."""
        return BallIntersection(self, other)

    __and__ = intersect

    def center_distance(self, *beta: ArrayLike) -> float:
        """``‖β − m‖`` for a point β of model space (``β`` as the center is given)."""
        raise NotImplementedError

    def contains(self, *beta: ArrayLike, atol: float = 0.0) -> bool:
        """Whether β lies in the ball (up to ``atol``)."""
        return bool(self.center_distance(*beta) <= self.radius + atol)


class PrimalSphere(Sphere):
    """A ball in an explicit feature space R^p.

    Parameters
    ----------
    center : ndarray of shape (p,)
    radius : float
    features : callable or None
        ``features(X) -> Φ(X)`` of shape (n, p), used by :meth:`decision_bounds`; None means
        the rows given are already features.

    Examples
    --------
    >>> import numpy as np
    >>> from deltafit.sensitivity import PrimalSphere
    >>> ball = PrimalSphere(np.array([1.0, -1.0, 0.5]), radius=0.1)
    >>> ball.n_features
    3
    >>> lo, hi = ball.decision_bounds(np.array([[1.0, 0.0, 0.0], [2.0, 2.0, 1.0]]))
    >>> np.round(lo, 3).tolist(), np.round(hi, 3).tolist()
    ([0.9, 0.2], [1.1, 0.8])
    >>> lo, hi = ball.coef_bounds()              # every coefficient within ± radius
    >>> np.round(hi - lo, 3).tolist()
    [0.2, 0.2, 0.2]
    """

    def __init__(
        self, center: ArrayLike, radius: float, features: Callable[[Any], Any] | None = None
    ) -> None:
        self.center = _as_float_rows(center, "center")[0].copy()
        self.radius = check_real(float(radius), "radius", low=0.0, low_inclusive=True)
        self.features = features

    @property
    def n_features(self) -> int:
        return self.center.shape[0]

    def _scores(self, eta):
        eta = _as_float_rows(eta, "eta", self.n_features)
        return eta @ self.center, np.linalg.norm(eta, axis=1)

    def _decision_eta(self, X):
        if self.features is None:
            return (X,)
        return (self.features(X),)

    def coef_bounds(self) -> tuple[np.ndarray, np.ndarray]:
        """Bounds of every coordinate of β over the ball (Corollary 2 of Okumura et al. (2015))."""
        return self.center - self.radius, self.center + self.radius

    def center_distance(self, beta: ArrayLike) -> float:  # type: ignore[override]  # one vector
        beta = _as_float_rows(beta, "beta", self.n_features)[0]
        return float(np.linalg.norm(beta - self.center))

    def _compatible(self, other):
        if not isinstance(other, PrimalSphere) or other.n_features != self.n_features:
            raise ValueError("the two balls must live in the same explicit feature space")
        if (
            self.features is not None
            and other.features is not None
            and not (self.features is other.features or self.features == other.features)
        ):
            raise ValueError(
                "the two balls use different feature maps (or intercept scalings); build both "
                "from the same model"
            )

    def _center_gap(self, other):
        return float(np.linalg.norm(self.center - other.center))


class KernelSphere(Sphere):
    """A ball in the RKHS of a kernel, its center a kernel expansion ``Σ_j c_j Φ(p_j)``.

    Parameters
    ----------
    coef : ndarray of shape (m,)
        Expansion coefficients of the center (Sivan et al. eq. 3).
    points : ndarray of shape (m, n_features)
    radius : float
    kernel : callable
        ``kernel(A, B) -> k(A, B)`` (the regularised intercept term included).
    diagonal : callable, optional
        ``diagonal(A) -> k(a, a)`` for every row; computed from ``kernel`` row by row if omitted.

    Examples
    --------
    >>> import numpy as np
    >>> from sklearn.metrics.pairwise import rbf_kernel
    >>> from deltafit.sensitivity import KernelSphere
    >>> P = np.array([[0.0, 0.0], [1.0, 1.0]])
    >>> ball = KernelSphere(np.array([1.0, -1.0]), P, radius=0.1, kernel=rbf_kernel)
    >>> lo, hi = ball.decision_bounds(P)         # k(x, x) = 1: width 2 r
    >>> np.round(lo, 4).tolist(), np.round(hi, 4).tolist()
    ([0.5321, -0.7321], [0.7321, -0.5321])
    """

    def __init__(
        self,
        coef: ArrayLike,
        points: ArrayLike,
        radius: float,
        kernel: Callable[[Any, Any], Any],
        diagonal: Callable[[Any], Any] | None = None,
    ) -> None:
        self.coef = np.asarray(coef, dtype=np.float64).ravel().copy()
        self.points = _as_float_rows(points, "points")
        if self.points.shape[0] != self.coef.shape[0]:
            raise ValueError(f"{self.coef.shape[0]} coefficients but {self.points.shape[0]} points")
        self.radius = check_real(float(radius), "radius", low=0.0, low_inclusive=True)
        if not callable(kernel):
            raise ValueError("kernel must be a callable kernel(A, B)")
        self.kernel = kernel
        self.diagonal = diagonal
        self._sq: float | None = None

    def _diag(self, A):
        if self.diagonal is not None:
            return np.asarray(self.diagonal(A), dtype=np.float64)
        return kernel_diagonal(A, kernel=self.kernel)

    def _scores(self, weights, points=None):
        """Scores of ``η_i = Σ_j W_ij Φ(q_j)`` (``points`` q); with one argument the rows are
        the points themselves (η_i = Φ(x_i))."""
        if points is None:
            X = _as_float_rows(weights, "X", self.points.shape[1])
            s = self.kernel(X, self.points) @ self.coef if self.coef.size else np.zeros(len(X))
            return s, np.sqrt(np.maximum(self._diag(X), 0.0))
        Q = _as_float_rows(points, "points", self.points.shape[1])
        W = _as_float_rows(weights, "weights", Q.shape[0])
        s = W @ (self.kernel(Q, self.points) @ self.coef)
        KQ = self.kernel(Q, Q)
        return s, np.sqrt(np.maximum(np.einsum("ij,jk,ik->i", W, KQ, W), 0.0))

    def _decision_eta(self, X):
        return (X,)

    @property
    def center_sq_norm(self) -> float:
        """``‖m‖² = cᵀ K(P, P) c``."""
        if self._sq is None:
            self._sq = (
                float(self.coef @ self.kernel(self.points, self.points) @ self.coef)
                if self.coef.size
                else 0.0
            )
        return self._sq

    def center_distance(  # type: ignore[override]  # an expansion: coefficients and points
        self, coef: ArrayLike, points: ArrayLike
    ) -> float:
        """``‖β − m‖`` for ``β = Σ_j coef_j Φ(points_j)``, by the kernel trick.

        The coefficients of identical points are merged first, so that a β close to the center
        and expanded over the same points does not lose its digits to cancellation.
        """
        coef = np.asarray(coef, dtype=np.float64).ravel()
        P = _as_float_rows(points, "points", self.points.shape[1])
        if coef.shape[0] != P.shape[0]:
            raise ValueError(f"{coef.shape[0]} coefficients but {P.shape[0]} points")
        return _expansion_norm(
            np.concatenate([coef, -self.coef]), np.vstack([P, self.points]), self.kernel
        )

    def _compatible(self, other):
        if not isinstance(other, KernelSphere) or other.points.shape[1] != self.points.shape[1]:
            raise ValueError("the two balls must live in the same kernel space")
        if not _same_kernel(self.kernel, other.kernel):
            raise ValueError(
                "the two balls use different kernels (or kernel parameters); build both from "
                "the same model (gradient_sphere(..., kernel=model)) or the same callable"
            )

    def _center_gap(self, other):
        return _expansion_norm(
            np.concatenate([self.coef, -other.coef]),
            np.vstack([self.points, other.points]),
            self.kernel,
        )


def _expansion_norm(w, P, kernel):
    """``‖Σ_j w_j Φ(p_j)‖`` with the weights of identical points merged first."""
    if w.size == 0:
        return 0.0
    U, inverse = np.unique(P, axis=0, return_inverse=True)
    u = np.bincount(inverse.ravel(), weights=w, minlength=U.shape[0])
    keep = u != 0
    if not keep.any():
        return 0.0
    U, u = U[keep], u[keep]
    return float(np.sqrt(max(u @ kernel(U, U) @ u, 0.0)))


def _same_kernel(k1, k2):
    """Whether two kernel callables are the same function with the same parameters."""
    if k1 is k2:
        return True
    if isinstance(k1, functools.partial) and isinstance(k2, functools.partial):
        return k1.func is k2.func and k1.args == k2.args and k1.keywords == k2.keywords
    return False


def two_ball_bounds(
    s1: np.ndarray, s2: np.ndarray, e: np.ndarray, r1: float, r2: float, gap: float
) -> tuple[np.ndarray, np.ndarray]:
    """Exact minimum and maximum of ``⟨η, β⟩`` over ``‖β − m1‖ ≤ r1, ‖β − m2‖ ≤ r2``.

    Parameters
    ----------
    s1, s2 : ndarray of shape (k,)
        ``⟨η, m1⟩`` and ``⟨η, m2⟩``.
    e : ndarray of shape (k,)
        ``‖η‖``.
    r1, r2 : float
        Radii.
    gap : float
        ``D = ‖m1 − m2‖``.

    Returns
    -------
    lo, hi : ndarray of shape (k,)
        Never looser than either ball alone.

    Notes
    -----
    The problem lives in the span of η and m2 − m1.  By the KKT conditions the minimiser is
    the minimiser of one ball alone, ``m1 − r1 η/‖η‖`` (if it lies in the other ball:
    ``D² + 2 r1 (s2 − s1)/‖η‖ + r1² ≤ r2²``) or ``m2 − r2 η/‖η‖`` symmetrically, or else a
    point of the (p−2)-sphere where both boundaries meet: center
    ``m1 + t (m2 − m1)/D`` with ``t = (D² + r1² − r2²)/(2D)``, radius ``sqrt(r1² − t²)``, in
    the hyperplane orthogonal to ``m2 − m1``, over which the minimum of ⟨η, ·⟩ is
    ``s1 + t (s2 − s1)/D − sqrt(r1² − t²) · sqrt(‖η‖² − (s2 − s1)²/D²)``.

    Examples
    --------
    The first coordinate over the balls of radius 1 around (0, 0) and (1.5, 0):

    >>> import numpy as np
    >>> from deltafit.sensitivity import two_ball_bounds
    >>> lo, hi = two_ball_bounds(np.array([0.0]), np.array([1.5]), np.array([1.0]),
    ...                          1.0, 1.0, 1.5)
    >>> float(lo[0]), float(hi[0])
    (0.5, 1.0)
    """
    s1, s2, e = (np.atleast_1d(np.asarray(a, dtype=np.float64)) for a in (s1, s2, e))
    if not (s1.shape == s2.shape == e.shape) or s1.ndim != 1:
        raise ValueError(
            f"s1, s2 and e must be 1-D of one length, got shapes {s1.shape}, {s2.shape}, {e.shape}"
        )
    for name, v in (("r1", r1), ("r2", r2), ("gap", gap)):
        if not np.isfinite(v) or v < 0:
            raise ValueError(f"{name} must be a finite number >= 0, got {v!r}")
    if np.any(e < 0) or not (
        np.all(np.isfinite(s1)) and np.all(np.isfinite(s2)) and np.all(np.isfinite(e))
    ):
        raise ValueError("scores must be finite and norms e non-negative")
    if gap > (r1 + r2) * (1.0 + 1e-9) + 1e-12 * (1.0 + abs(gap)):
        raise ValueError(
            f"the two balls do not intersect (center gap {gap:.6g} > r1 + r2 = {r1 + r2:.6g}): "
            "they cannot contain the same optimum; were they built for the same problem?"
        )

    def lower(a1, a2):
        lo1, lo2 = a1 - r1 * e, a2 - r2 * e
        lo = np.maximum(lo1, lo2)  # valid whatever the case; the exact value can only be higher
        with np.errstate(divide="ignore", invalid="ignore"):
            q = np.where(e > 0, (a2 - a1) / np.where(e > 0, e, 1.0), 0.0)  # ⟨η̂, m2 − m1⟩
            in2 = gap * gap + 2.0 * r1 * q + r1 * r1 <= r2 * r2  # m1 − r1 η̂ lies in ball 2
            in1 = gap * gap - 2.0 * r2 * q + r2 * r2 <= r1 * r1  # m2 − r2 η̂ lies in ball 1
            both = ~(in1 | in2) & (e > 0)
            if np.any(both) and gap > 0:
                t = (gap * gap + r1 * r1 - r2 * r2) / (2.0 * gap)
                rc = np.sqrt(max(r1 * r1 - t * t, 0.0))
                dd = (a2 - a1)[both]
                perp = np.sqrt(np.maximum(e[both] ** 2 - (dd / gap) ** 2, 0.0))
                lo[both] = np.maximum(lo[both], a1[both] + t * dd / gap - rc * perp)
        return lo

    lo = lower(s1, s2)
    hi = -lower(-s1, -s2)
    # rounding may cross the two when the intersection is (nearly) a single point
    mid = 0.5 * (lo + hi)
    cross = lo > hi
    lo[cross] = hi[cross] = mid[cross]
    return lo, hi


class BallIntersection:
    """The intersection of two balls that both contain the same unknown optimum.

    Typical use: the data-change ball of :func:`deltafit.sensitivity` and the gradient ball
    (Theorem 6 of Okumura et al. (2015)) of an iterate of the re-solve,
    ``s.sphere() & gradient_sphere(...)``.  Its bounds are the exact extremes of the score over
    the intersection (:func:`two_ball_bounds`), never looser than either ball alone.

    Parameters
    ----------
    a, b : Sphere
        Of the same form and space.

    Examples
    --------
    >>> import numpy as np
    >>> from deltafit.sensitivity import PrimalSphere
    >>> a = PrimalSphere(np.array([0.0, 0.0]), radius=1.0)
    >>> b = PrimalSphere(np.array([1.5, 0.0]), radius=1.0)
    >>> both = a & b                             # a BallIntersection
    >>> lo, hi = both.score_bounds(np.array([[1.0, 0.0]]))
    >>> float(lo[0]), float(hi[0])               # a alone: [-1, 1]; b alone: [0.5, 2.5]
    (0.5, 1.0)
    """

    def __init__(self, a: Sphere, b: Sphere) -> None:
        if not isinstance(a, Sphere) or not isinstance(b, Sphere):
            raise ValueError("BallIntersection needs two Sphere objects")
        a._compatible(b)
        self.a, self.b = a, b
        self.gap = a._center_gap(b)
        # raises when the balls are disjoint
        two_ball_bounds(np.zeros(1), np.zeros(1), np.zeros(1), a.radius, b.radius, self.gap)

    def score_bounds(self, *eta: ArrayLike) -> tuple[np.ndarray, np.ndarray]:
        """Exact lower and upper bounds of ``⟨η, β⟩`` over the intersection."""
        s1, e1 = self.a._scores(*eta)
        s2, _ = self.b._scores(*eta)
        return two_ball_bounds(s1, s2, e1, self.a.radius, self.b.radius, self.gap)

    def decision_bounds(self, X: ArrayLike) -> tuple[np.ndarray, np.ndarray]:
        """Bounds of ``⟨Φ(x), β⟩`` over the intersection (the first ball's feature map)."""
        return self.score_bounds(*self.a._decision_eta(X))

    def tightness(self, X: ArrayLike) -> np.ndarray:
        """``hi − lo`` of :meth:`decision_bounds`."""
        lo, hi = self.decision_bounds(X)
        return hi - lo


class _Features:
    """Φ(X) of a linear model as it is now (feature map, constant feature), with input
    validation: the feature map of the model's primal spheres."""

    def __init__(self, problem: Any) -> None:
        self._map = problem.feature_map
        self._const = problem.intercept_scaling if problem.fit_intercept else None
        self._width = problem.n_features_in

    def __eq__(self, other):
        return (
            isinstance(other, _Features)
            and self._map is other._map
            and self._const == other._const
            and self._width == other._width
        )

    __hash__ = None  # type: ignore[assignment]  # equal maps, unhashable

    def __call__(self, X):
        return features(check_rows(X, self._width, "X", sparse="dense"), self._map, self._const)
