"""The fitted problem of an updatable estimator, as one public read-only view.

Every deltafit estimator solves

    min_β  J(β) = C Σ_i w_i ℓ(t_i, ⟨Φ(x_i), β⟩) + ½ ‖β‖²

over its live training samples, with ``w_i ≥ 0`` the sample weights (:attr:`FittedProblem.weights`,
1 unless given), ``t_i`` the encoded targets (±1 for classifiers), ``Φ``
the explicit features (linear models: ``feature_map`` plus a regularised constant column of
value ``intercept_scaling``) or the feature space of a kernel (kernel models:
``β = Σ α_i Φ(x_i)``, the constant ``intercept_scaling²`` added to the kernel).  The layers
above the models (sensitivity bounds, fast cross-validation, stream and active learners,
persistence of derived objects, the command line and the benchmarks) read a fitted model only
through :class:`FittedProblem` and the estimators' public API; :class:`ProblemMixin` gives
every estimator its ``problem_`` (this view).

Handles
-------
Per-sample arrays of the view (:attr:`FittedProblem.targets`, :attr:`~FittedProblem.weights`,
:attr:`~FittedProblem.rows`,
:attr:`~FittedProblem.alpha`, :attr:`~FittedProblem.dual`, :meth:`~FittedProblem.gram`) are
indexed by *handles*: the storage positions of the samples, which stay valid until the model's
next update (``problem.version`` changes).  :attr:`FittedProblem.live` lists the handles of the
live samples in the order of ``sample_ids_``; :meth:`FittedProblem.handles` maps sample ids to
handles.  Using storage positions keeps every query O(what it touches): bounding one sample of a
kernel model reads one row of the stored kernel matrix, not a copy of all of it.

Every array the view returns is read-only (``writeable=False``): the view cannot change the
model.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

import numpy as np
import scipy.sparse as sp
from scipy import linalg
from scipy.linalg.blas import get_blas_funcs
from sklearn.exceptions import NotFittedError

from deltafit._states._one_vs_rest import CodedLedger, class_codes
from deltafit.kernels import kernel_diagonal, kernel_matrix, kernel_rows
from deltafit.models._guard import guarded_read

__all__ = ["FittedProblem", "ProblemMixin", "ScoreFunction"]


def _take_rows(X: Any, handles: np.ndarray) -> Any:
    """``X[handles]``: a view, not a copy, when the handles are a run of consecutive rows of a
    dense store (a model never changed, or changed by additions only), else a copy."""
    h = np.asarray(handles)
    if (
        isinstance(X, np.ndarray)
        and h.size
        and int(h[-1]) - int(h[0]) == h.size - 1
        and (h.size < 2 or bool(np.all(np.diff(h) == 1)))
    ):
        return X[int(h[0]) : int(h[-1]) + 1]
    return X[h]


def _gram(Phi: np.ndarray, w: np.ndarray) -> np.ndarray:
    """``Φᵀ diag(w) Φ`` for ``w ≥ 0`` by one symmetric rank-k update of ``diag(√w) Φ``
    (half the flops of a general product; the matrix comes back exactly symmetric)."""
    if (
        Phi.dtype != np.float64
        or not Phi.flags.c_contiguous
        or not Phi.shape[0]
        or not bool(np.all(w >= 0))
    ):
        return (Phi.T * w) @ Phi
    Xs = Phi * np.sqrt(w)[:, None]
    (syrk,) = get_blas_funcs(("syrk",), (Xs,))
    U = syrk(1.0, Xs.T, trans=0, lower=0)  # upper triangle of Xsᵀ Xs (Xs.T: Fortran order)
    H = np.triu(U)
    H += np.triu(U, 1).T
    return H


def _frozen(a):
    """A read-only view of ``a`` (no copy)."""
    if a is None:
        return None
    v = a.view()
    v.flags.writeable = False
    return v


class FittedProblem:
    """Read-only view of the problem a fitted deltafit estimator solves, and of its solution.

    Get it as ``model.problem_`` or ``FittedProblem.of(model)``.  A view is cheap to make (it
    copies nothing) and describes the model as it is when the view is made; after an update
    of the model, make a new one (:attr:`version` tells them apart).

    Parameters
    ----------
    model : LinearClassifier, LinearRegressor, KernelClassifier or KernelRegressor
        A fitted estimator.

    Attributes
    ----------
    kernel : bool
        Kernel model (solution ``alpha`` over training samples) or linear model (``coef``).
    classifier : bool
        Targets are ±1 (``classes_[1]`` is +1) or real values.
    loss : deltafit.losses.Loss
        The loss the stored solution minimises (the fitted one: ``set_params`` may have changed
        the ``loss`` parameter since).
    C : float
        The fitted data-term weight.
    fit_intercept : bool
        Whether Φ carries the regularised constant feature.
    intercept_scaling : float
        Value of the regularised constant feature (0.0 without intercept).
    n_features_in : int
        Width of the raw rows the model takes.
    feature_map : transformer or None
        The fitted explicit feature map of a linear model (``feature_map_``).
    keeps_rows : bool
        Whether the training rows (:attr:`rows`) are stored; ``keep_data=False`` linear models
        keep only sufficient statistics.
    rows_on_cluster : bool
        Whether the training rows live on a Dask cluster (a Dask-fitted ``keep_data=True``
        logistic / squared-hinge model): :meth:`hessian` and :meth:`select_rows` then run
        passes over them that return p × p or a few rows; :attr:`rows` is None.
    keeps_labels : bool
        Whether the model stores its samples' targets; ``keep_data=False`` models do not (see
        :attr:`targets`).
    n_samples : int
    version : int
        Counts the fits and updates of the model.
    tol, max_iter : float, int
        The fitted solver settings.

    Notes
    -----
    The problem is the canonical one of Lee et al., "Incremental and decremental LS-SVM", and
    of the sensitivity bounds of Okumura et al., "Quick sensitivity analysis for incremental
    data modification and its application to leave-one-out CV in linear classification
    problems", and Sivan et al., "Sensitivity analysis for kernel models": squared, logistic,
    squared-hinge and hinge losses with an L2 penalty and a penalised intercept.

    Examples
    --------
    >>> import numpy as np
    >>> import deltafit
    >>> from deltafit.datasets import load_breast_cancer
    >>> X, y = load_breast_cancer()
    >>> m = deltafit.LinearClassifier(loss="logistic").fit(X[:200], y[:200])
    >>> p = m.problem_
    >>> p.loss.name, p.C
    ('logistic', 1.0)
    >>> bool(np.linalg.norm(p.gradient()) <= 1e-6)     # the stored solution is optimal
    True
    """

    def __init__(self, model: Any, klass: int | None = None) -> None:
        self._model = model
        self._led = model._ledger
        self._st = model._state
        #: K ≥ 3 for a multiclass model (one-vs-rest), else 0
        self.n_classes = int(model._n_classes) if model._classifier else 0
        #: K ≥ 2 outputs of a multi-output regressor, else 0
        self.n_outputs = 0 if model._classifier else int(model._n_outputs_fitted)
        #: the class whose one-vs-rest problem this view shows (None: the whole model)
        self.klass = None
        if self.n_classes and klass is not None:
            k = int(klass)
            if not 0 <= k < self.n_classes:
                raise ValueError(f"class index {klass!r} is not in [0, {self.n_classes})")
            self.klass = k
            self._led = CodedLedger(self._led, k)
            self._st = self._st.states[k]
        st = self._st
        self.loss, self.C = st.loss, st.C
        self.tol, self.max_iter = float(st.opts.tol), int(st.opts.max_iter)
        self.kernel = bool(model._kernel)
        self.classifier = bool(model._classifier)
        self.fit_intercept = bool(model._fitted("fit_intercept"))
        self.intercept_scaling = float(model._s)
        self.n_features_in = int(model.n_features_in_)
        self.feature_map = getattr(model, "feature_map_", None)
        self.keeps_rows = bool(self._led.keep_rows)
        self.rows_on_cluster = (
            getattr(st, "kind", None) == "dask_newton"
            and model.__dict__.get("_dask_rows") is not None
        )
        self.keeps_labels = bool(self._led.keeps_labels)
        # targets verified by locate / find (a model keeping no labels)
        self._verified: np.ndarray | None = None
        self.n_samples = int(self._led.n_samples)
        #: whether some sample's weight is not 1 (``sample_weight``)
        self.weighted = bool(self._led.weighted)
        self.version = int(getattr(model, "_version", 0))

    @classmethod
    def of(cls, model: Any, what: str = "this operation") -> FittedProblem:
        """The view of ``model``, with errors that name ``what`` needs it.

        Raises
        ------
        ValueError
            If ``model`` is not a deltafit estimator.
        sklearn.exceptions.NotFittedError
            If it is not fitted.
        """
        if not isinstance(model, ProblemMixin):  # the four estimators
            raise ValueError(
                f"{what} need a fitted deltafit estimator (LinearClassifier, LinearRegressor, "
                f"KernelClassifier, KernelRegressor), got {type(model).__name__}"
            )
        if not model._is_fitted():
            raise NotFittedError(
                f"this {type(model).__name__} is not fitted yet; call fit before asking for {what}"
            )
        view = cls(model)
        if view.n_outputs:
            raise ValueError(
                f"{what} of a regressor with {view.n_outputs} outputs are not available yet; "
                "fit one regressor per output to use them"
            )
        if view.n_classes:
            raise ValueError(
                f"{what} of a model with {view.n_classes} classes is not available yet; "
                "model.problem_.for_class(k) gives the binary one-vs-rest problem of class k"
            )
        return view

    def for_class(self, k: int) -> FittedProblem:
        """The binary problem of class ``k`` (index into ``classes_``) of a multiclass model:
        targets ±1 (+1 for class k), that class's solution, certificate and solver state,
        over the same samples, rows and kernel matrix.  Every binary accessor of the view
        then applies.

        Raises
        ------
        ValueError
            For a model with two classes or a regressor, or ``k`` out of range.
        """
        if not self.n_classes:
            raise ValueError("for_class needs a model with three or more classes")
        return type(self)(self._model, k)

    @property
    def binary(self) -> bool:
        """Whether the view is one binary (or regression) problem: False for the whole of a
        multiclass model, whose problems are ``for_class(k)``."""
        return not self.n_classes or self.klass is not None

    def __repr__(self):
        kind = "kernel" if self.kernel else "linear"
        return (
            f"FittedProblem({type(self._model).__name__}, {kind}, loss={self.loss.name!r}, "
            f"C={self.C:g}, n_samples={self.n_samples}, version={self.version})"
        )

    # ------------------------------------------------------------- samples
    @property
    def live(self) -> np.ndarray:
        """Handles of the live samples, in the order of ``sample_ids_``."""
        return _frozen(self._led.active_slots())

    @property
    def sample_ids(self) -> np.ndarray:
        """Ids of the live samples, increasing (``model.sample_ids_``)."""
        return self._led.sample_ids()

    @property
    def next_id(self) -> int:
        """The id the model's next added sample will get."""
        return int(self._led.next_id)

    @property
    def capacity(self) -> int:
        """Number of storage positions: every handle is below it."""
        return int(self._led.capacity)

    def handles(self, ids: Any, what: str = "ids") -> np.ndarray:
        """Handles of sample ``ids``.

        Raises
        ------
        ValueError
            For unknown, repeated or non-integer ids (the message names ``what``).
        """
        return self._led.slots_of(ids, what)

    def handles_unchecked(self, ids: Any) -> np.ndarray:
        """Handles of ids already checked to be integer and distinct; unknown ids still raise
        ValueError (fast path of the per-sample loops)."""
        led = self._led
        slots = led.lookup(ids)
        if slots.size and slots.min() >= 0:
            return slots
        return led.slots_of(ids, "ids")

    def ids_of(self, handles: Any) -> np.ndarray:
        """Sample ids at ``handles``."""
        return self._led.ids[np.asarray(handles, dtype=np.intp)].copy()

    def is_current(self) -> bool:
        """Whether the model is still as it was when this view was made (no fit or update
        since)."""
        return int(getattr(self._model, "_version", 0)) == self.version

    def locate(self, ids: Any = None, X: Any = None, y: Any = None) -> tuple[np.ndarray, Any]:
        """Handles of samples named by ``ids`` or, for ``keep_data=False`` models, by value,
        with the model's own checks, and their validated rows (None when not given).

        A model that keeps no rows needs the rows ``X`` of the samples it is asked about (they
        are checked against the stored digests); a model that keeps them takes ids only.  A
        model that keeps no labels recognises them from the rows (or takes ``y``, checked
        too); :attr:`targets` then holds them at the returned handles.

        Returns
        -------
        handles : ndarray of int
        rows : ndarray of shape (k, n_features_in) or None

        Raises
        ------
        ValueError
            As the model's ``remove`` would, for unknown ids, rows that are not the samples,
            or mismatched shapes.
        """
        handles, rows, t = self._model._plan_remove(ids, X, y)
        self._remember(handles, t)
        if rows is not None and sp.issparse(rows):  # (a model fitted on sparse X, rows kept
            rows = rows.toarray()  # as digests): the bounds read dense rows
        return handles, rows

    def _remember(self, handles, t):
        """Keep the targets the model verified for ``handles`` (a model keeping no labels)."""
        if t is None or self.keeps_labels:
            return
        if self._verified is None or self._verified.shape[0] != self._led.capacity:
            self._verified = np.full(self._led.capacity, np.nan)
        # a class view of a multiclass model: the class indices coded ±1 for its class
        self._verified[handles] = t if self.klass is None else class_codes(t, self.klass)

    def find(self, X: Any, y: Any) -> np.ndarray:
        """Handles of the live samples equal to the rows of ``(X, y)`` (``keep_data=False``
        models, matched by their stored digests; ``y`` as given to ``fit``).

        Raises
        ------
        ValueError
            If a row is not a training sample, the shapes do not match, or the model keeps its
            rows (it is then addressed by id).
        """
        handles, _, t = self._model._plan_remove(None, X, y)
        self._remember(handles, t)
        return handles

    @property
    def targets(self) -> np.ndarray:
        """Encoded targets by handle (±1 for classifiers); stale values at free handles.

        A model that keeps no labels (``keep_data=False``) has none to give: its targets are
        those that :meth:`locate` and :meth:`find` of this view have verified against the
        stored digests (given by the caller, or recognised from the rows), NaN elsewhere.
        """
        if self.keeps_labels:
            if self.klass is not None:
                return _frozen(class_codes(self._led._ledger.y, self.klass))
            return _frozen(self._led.y)
        if self._verified is None:
            self._verified = np.full(self._led.capacity, np.nan)
        return _frozen(self._verified)

    @property
    def weights(self) -> np.ndarray:
        """Sample weights ``w_i`` by handle (1.0 for every live sample of an unweighted model;
        0.0 at free handles).  Every per-sample coefficient of the bounds is ``C w_i ℓ'`` (or
        ``C w_i ℓ''``): a sample of weight 2 counts as two copies, one of weight 0 as absent."""
        return _frozen(self._led.w)

    def sample_weights(self, handles: Any) -> np.ndarray | None:
        """``w`` at ``handles`` as a new array, or None when every weight is 1 (the unweighted
        arithmetic is then used unchanged)."""
        if not self.weighted:
            return None
        return self._led.w[np.asarray(handles, dtype=np.intp)].copy()

    @property
    def rows(self) -> Any:
        """Stored rows by handle: Φ(x) with the constant column (linear models) or the raw x
        (kernel models); None when the model keeps no rows.

        A model fitted on sparse X keeps its rows sparse; this view gives the rows it is
        indexed by as read-only dense arrays (``rows[handles]``: O(k·p) for k handles), so
        that every certificate computes on exactly the rows a dense model would hold."""
        if not self.keeps_rows:
            return None
        X = self._led.X
        return DenseRows(X) if getattr(self._led, "sparse_rows", False) else _frozen(X)

    # ------------------------------------------------------------ solution
    @property
    def coef(self) -> np.ndarray:
        """β over Φ(x) (linear models; the constant feature's weight last)."""
        if self.kernel:
            raise AttributeError("a kernel model's solution is alpha, over its samples")
        return _frozen(self._st.beta)

    @property
    def alpha(self) -> np.ndarray:
        """Expansion coefficients by handle, ``β = Σ alpha[h] Φ(x_h)`` (kernel models)."""
        if not self.kernel:
            raise AttributeError("a linear model's solution is coef")
        return _frozen(self._st.alpha)

    @property
    def dual(self) -> np.ndarray | None:
        """Hinge loss: the SVM dual variables α ∈ [0, C] by handle; None for other losses."""
        return _frozen(getattr(self._st, "dual", None))

    @property
    def solver_result(self) -> Any:
        """The last solve's :class:`~deltafit.solvers.SolverResult` (or ``HingeResult``); None
        for the closed form."""
        return self._st.result

    @property
    def solver_options(self) -> Any:
        """The fitted problem's settings (``loss``, ``C``, ``rho``, ``tol``, ``max_iter``) as
        the state keeps them (:class:`~deltafit._states._protocol.SolverOptions`; read only)."""
        return self._st.opts

    @property
    def max_rank(self) -> int:
        """Pending low-rank corrections a closed-form state keeps before it folds them."""
        return int(self._model._max_rank)

    def featurizer(self) -> Callable[[np.ndarray], Any]:
        """``Φ`` as a picklable function of a NumPy block of rows, for Dask tasks (linear
        models)."""
        if self.kernel:
            raise ValueError("featurizer needs a linear model; kernel models offer gram")
        return self._model._featurizer()

    def label_encoder(self) -> Any:
        """The label encoder of a classifier (``encode`` / ``decode``: ±1 for two classes,
        class indices for more); None for a regressor."""
        return self._model._labels() if self.classifier else None

    @property
    def dask_rows(self) -> Any:
        """The row store on the cluster of a Dask fit with ``keep_data=True`` (else None)."""
        return self._model.__dict__.get("_dask_rows")

    @property
    def dask_passes(self) -> int | None:
        """Passes over the rows the last Dask fit or update made (None for a NumPy fit): the
        Dask state's count where it keeps one (the smooth losses and the hinge, per class for
        :meth:`for_class`), else the fit's."""
        passes = getattr(self._st, "passes", None)  # only the Dask states count passes
        if passes is None:
            passes = self._model.__dict__.get("_dask_passes")
        return None if passes is None else int(passes)

    def solver_counters(self) -> dict:
        """Diagnostics of the closed-form states: ``n_refactor`` (factorisations from the exact
        statistics), ``n_folds`` (folds of pending Woodbury corrections) and ``pending_rank``
        (corrections not yet folded); -1 where a state keeps no such count."""
        return self._st.counters()

    @property
    def certified_residual(self) -> float:
        """A certified bound of ‖β − β*‖ for the stored solution (``model.grad_norm_``; of
        one class's problem for a class view)."""
        if self.klass is not None:
            res = self._st.result
            return float(res.grad_norm) if res is not None else float(self._st.gradient_norm())
        return self._model._certified_residual()

    # --------------------------------------------------------- feature map
    def features(self, X: Any) -> Any:
        """Φ(X) of validated float rows, constant column included (linear models)."""
        if self.kernel:
            raise AttributeError("a kernel model has no explicit features; use kernel_params")
        return self._model._features(X)

    @property
    def kernel_params(self) -> dict:
        """Keyword arguments of :func:`deltafit.kernels.kernel_matrix` / ``kernel_rows`` that
        reproduce the model's kernel, intercept term included (kernel models)."""
        if not self.kernel:
            raise AttributeError("a linear model has no kernel; use features")
        return self._model._kernel_spec()

    def kernel_functions(self) -> tuple:
        """``(k(A, B), diag(A))`` of the kernel model, frozen at its fitted parameters."""
        kw = self.kernel_params
        return functools.partial(kernel_matrix, **kw), functools.partial(kernel_diagonal, **kw)

    def gram(self, rows: Any, cols: Any = None) -> np.ndarray:
        """Stored kernel values ``k(x_r, x_c)`` (intercept term included) between handles
        (kernel models; nothing is evaluated)."""
        if not self.kernel:
            raise AttributeError("a linear model stores no kernel matrix")
        return self._st.gram.sub(
            np.asarray(rows, dtype=np.intp),
            None if cols is None else np.asarray(cols, dtype=np.intp),
        )

    def gram_entries(self, handles: Any) -> np.ndarray:
        """``k(x_h, x_h)`` of stored samples (kernel models)."""
        h = np.asarray(handles, dtype=np.intp)
        return self._st.gram.K[h, h].copy()

    # -------------------------------------------------------------- values
    def encode_targets(self, y: Any, what: str = "y") -> np.ndarray:
        """Encoded targets of labels ``y`` (±1 for classifiers, float for regressors).

        Raises
        ------
        ValueError
            For labels outside ``classes_``, non-numeric or non-finite regression targets.
        """
        t = self._model._encode_y(y, what=what)
        return t if self.klass is None else class_codes(t, self.klass)

    def decode_targets(self, t: Any) -> Any:
        """Labels of encoded targets: ``classes_`` by sign for classifiers, the values for
        regressors."""
        if not self.classifier:
            return np.asarray(t, dtype=np.float64)
        if self.klass is not None:  # class k where positive, else "not k" (None)
            t = np.asarray(t)
            return np.where(t > 0, self._model.classes_[self.klass], None)
        return self._model._decode_y(t)

    def decision(self, X: Any) -> np.ndarray:
        """``⟨Φ(x), β⟩`` of validated float rows (no input checks); of every class
        (columns) for the whole of a multiclass model."""
        z = self._model._decision_checked(X)
        return z if self.klass is None else z[:, self.klass]

    def scores(self, handles: Any) -> tuple:
        """``z = ⟨Φ(x_h), β⟩`` and ``‖Φ(x_h)‖²`` of stored samples.

        Linear models use the stored feature rows, kernel models the stored kernel matrix
        (O(n) per sample, no kernel evaluation).

        Raises
        ------
        ValueError
            For a linear model that keeps no rows.
        """
        h = np.asarray(handles, dtype=np.intp)
        if self.kernel:
            A = np.flatnonzero(self._led.active)
            K = self._st.gram.K
            return K[np.ix_(h, A)] @ self._st.alpha[A], K[h, h].copy()
        if not self.keeps_rows:
            raise ValueError(
                "this model keeps no training rows (keep_data=False); these bounds need them"
            )
        rows = _take_rows(self._led.X, h)
        if sp.issparse(rows):
            return rows @ self._st.beta, np.asarray(rows.multiply(rows).sum(axis=1)).ravel()
        return rows @ self._st.beta, np.einsum("ij,ij->i", rows, rows)

    def solution_sq_norm(self) -> float:
        """``‖β‖²`` of the solution (RKHS norm for kernel models)."""
        if not self.kernel:
            b = self._st.beta
            return float(b @ b)
        A = np.flatnonzero(self._led.active)
        a = self._st.alpha[A]
        return float(a @ (self._st.gram.sub(A) @ a))

    def gradient(self) -> np.ndarray:
        """The exact gradient of J at the stored solution.

        Linear models: ∇J ∈ R^p.  Kernel models: the coefficients ``g`` over :attr:`live` of
        ``∇J = Σ g_i Φ(x_i)``.  Its norm is the solver residual the certificates allow for.
        For the hinge loss this is a subgradient (the ``d1`` of
        :class:`deltafit.losses.Hinge`).
        """
        A = self._led.active_slots()
        t = self._led.y[A]
        w = self.sample_weights(A)
        if self.kernel:
            a = self._st.alpha[A]
            z = self._st.gram.sub(A) @ a
            d1 = self.loss.d1(t, z)
            return a + self.C * (d1 if w is None else w * d1)
        if not self.keeps_rows:  # closed form: ∇J = 2C (M β − b), from the exact statistics
            return (self._exact_M() @ self._st.beta - self._st.b) / self._st.rho
        Phi = self._led.X[A]
        d1 = self.loss.d1(t, Phi @ self._st.beta)
        return self._st.beta + self.C * (Phi.T @ (d1 if w is None else w * d1))

    def _exact_M(self):
        """``ΦᵀΦ + ρI`` of the closed-form primal state, pending rows included (no fold)."""
        return self._st.exact_matrix()

    def hessian(self) -> np.ndarray:
        """∇²J at the stored solution, ``I + C Φᵀ diag(w ℓ''(t, z)) Φ`` (linear models, p × p).

        For the squared loss this is ``2C (ΦᵀΦ + ρI)`` from the exact statistics the
        closed-form state keeps (no rows needed); otherwise it is formed from the stored rows
        (rows on a Dask cluster: the state's matrix M when it is exact at the solution, else
        one Hessian pass over them).  For the hinge loss ℓ'' is 0 (its generalised Hessian off
        the kink).
        """
        if self.kernel:
            raise AttributeError(
                "hessian is defined for linear models; kernel models offer gram and solve_hessian"
            )
        st = self._st
        if st.kind == "primal_squared":
            return self._exact_M() / st.rho
        if self.rows_on_cluster:  # M when exact at β, else one Hessian pass (p × p back)
            return st.hessian_at_solution(self._model._dask_rows, self._model._featurizer())
        if not self.keeps_rows:
            raise ValueError("the Hessian needs the training rows (keep_data=True)")
        A = self._led.active_slots()
        Phi = _take_rows(self._led.X, A)
        w = self.C * self.loss.d2(self._led.y[A], Phi @ st.beta)
        sw = self.sample_weights(A)
        if sw is not None:
            w = w * sw
        H = (Phi.T @ sp.diags(w) @ Phi).toarray() if sp.issparse(Phi) else _gram(Phi, w)
        H.flat[:: H.shape[0] + 1] += 1.0
        return H

    def select_rows(self, key: Any, k: int) -> dict:
        """The ``k`` live samples of smallest ``key`` in every row block of a model whose rows
        live on a Dask cluster (:attr:`rows_on_cluster`): one pass, a few rows back.

        Parameters
        ----------
        key : callable
            ``key(Φ, t, w, z) -> (m, 2)`` array (order key, a value kept with it) of a chunk
            of live rows: feature rows, targets, weights, scores under the solution; it
            travels to the workers (picklable).
        k : int

        Returns
        -------
        dict
            ``handles``, ``rows`` (Φ), ``targets``, ``weights``, ``z``, ``key`` (the ``(m, 2)``
            values) of the chosen samples, and ``cut``: the smallest key of a sample not
            chosen (inf when every live sample was chosen).
        """
        if not self.rows_on_cluster:
            raise ValueError(
                "select_rows reads rows on a Dask cluster; this model's rows "
                "are on the client (rows)"
            )
        ids, Phi, t, w, z, kv, cut = self._st.select_rows(
            self._model._dask_rows, self._model._featurizer(), key, k
        )
        return {
            "handles": self._led.slots_of(ids),
            "rows": Phi,
            "targets": t,
            "weights": w,
            "z": z,
            "key": kv,
            "cut": cut,
        }

    def solve_hessian(self, V: Any) -> np.ndarray:
        """``(∇²J)⁻¹ V`` at the stored solution, by a Cholesky factorisation of the exact
        Hessian (O(p³), kernel O(n³)).

        Linear models: ``V`` of shape (p,) or (p, k).  Kernel models (squared loss): the
        coefficients over :attr:`live` of ``(∇²J)⁻¹ Σ_i V_i Φ(x_i)``, which by the push-through
        identity are ``ρ (K + ρI)⁻¹ V`` with ρ = 1/(2C) (``ρ (W K + ρI)⁻¹ V`` with
        weights).  For the inverse the closed-form states track between factorisations, see
        :meth:`tracked_inverse`.
        """
        V = np.asarray(V, dtype=np.float64)
        if self.kernel:
            if self.loss.name != "squared":
                raise ValueError("solve_hessian of a kernel model needs loss='squared'")
            rho = 1.0 / (2.0 * self.C)
            G = self.gram(self.live)
            w = self.sample_weights(self.live)
            if w is not None:  # (I + 2C Σ w_i Φ_i Φ_iᵀ)⁻¹ Φᵀ V = Φᵀ ρ (W K + ρI)⁻¹ V
                G *= w[:, None]
                G.flat[:: G.shape[0] + 1] += rho
                return rho * linalg.lu_solve(linalg.lu_factor(G), V)
            G.flat[:: G.shape[0] + 1] += rho
            return rho * linalg.cho_solve(linalg.cho_factor(G, lower=True), V)
        return linalg.cho_solve(linalg.cho_factor(self.hessian(), lower=True), V)

    def tracked_inverse(self) -> Callable[[np.ndarray], np.ndarray]:
        """The closed-form state's tracked inverse as a function ``v -> H v``.

        Primal squared loss: ``H ≈ (ΦᵀΦ + ρI)⁻¹`` over the features.  Kernel squared loss:
        ``H ≈ (K + ρI)⁻¹`` by handle (vectors of length :attr:`capacity`, zero at free handles
        once folded).  It is the base inverse plus the pending Woodbury corrections (Lee et
        al., "Exact incremental and decremental learning for LS-SVM", Theorem 1 and
        Corollaries 1–4); refinement against the exact statistics keeps its relative drift
        below 1e-9.  None for the other losses, which keep no inverse.
        """
        return self._st.tracked_inverse()

    def _closed_form(self, what):
        st = self._st
        inner = getattr(st, "inner", None)  # K ≥ 3 squared classes: one K-output state
        if self.klass is None and inner is not None:
            st = inner
        if getattr(st, "kind", None) not in ("primal_squared", "dual_squared"):
            raise ValueError(f"{what} needs a closed-form (loss='squared') model")
        return st

    def normal_matrix(self) -> np.ndarray:
        """``ΦᵀWΦ + ρI`` (ρ = 1/(2C)) from the exact statistics of the closed-form primal
        state, pending rows included (a new p × p array; linear squared-loss models)."""
        st = self._closed_form("normal_matrix")
        if st.kind != "primal_squared":
            raise ValueError("normal_matrix needs a linear model; kernel models offer gram")
        return st.exact_matrix()

    def newton_point(self) -> dict:
        """Where a binary Newton state (logistic, squared hinge; linear, NumPy or Dask) stands:
        ``coef`` β, ``gradient`` ∇J(β), ``gradient_at_zero`` ∇J(0), ``objective`` J(β) and
        ``curvature`` (the matrix ``M = I + Σ d_s φ_s φ_sᵀ`` of its last Newton step, which
        chord steps reuse): new arrays, for warm re-solves elsewhere (the Dask folds).  A
        one-vs-rest model answers per class: ``problem_.for_class(k).newton_point()``."""
        st = self._st
        if getattr(st, "kind", None) not in ("primal_newton", "dask_newton"):
            raise ValueError(
                "newton_point needs a linear logistic or squared-hinge problem "
                "(for K ≥ 3 classes: problem_.for_class(k))"
            )
        f, grad, g0 = st.point
        return {
            "coef": np.array(st.beta, dtype=np.float64),
            "gradient": np.array(grad, dtype=np.float64),
            "gradient_at_zero": np.array(g0, dtype=np.float64),
            "objective": float(f),
            "curvature": np.array(st.curv.folded().H, dtype=np.float64),
        }

    def chord_matrix(self) -> dict | None:
        """The NumPy Newton state's chord matrix with its weights, without reading a row:
        ``matrix`` ``M = I + Σ_s d_s φ_s φ_sᵀ`` (the Hessian of its last Newton step, with
        the corrections of later chord solves folded in), ``weights`` ``d`` by handle and
        ``scores`` ``z = ⟨Φ(x_h), β⟩`` by handle at the stored solution (computed by its last
        solve); read-only views.  None when the state keeps no such matrix (other losses,
        Dask or kernel states, Hessian-free sparse rows, a model file without them) or it has
        pending corrections.  ``M`` is *not* ∇²J(β): its weights were formed at earlier
        iterates (compare ``d`` with ``C w ℓ''(t, z)``)."""
        st = self._st
        if getattr(st, "kind", None) != "primal_newton":
            return None
        curv, point = getattr(st, "curv", None), getattr(st, "point", None)
        if curv is None or point is None or curv.rank:
            return None
        return {"matrix": _frozen(curv.H), "weights": _frozen(curv.d), "scores": _frozen(point.z)}

    def apply_inverse(self, V: Any) -> np.ndarray:
        """``H V`` with the closed-form state's current inverse, never changing the model.

        Primal: ``H ≈ (ΦᵀWΦ + ρI)⁻¹`` over the features (the tracked inverse, or a solve with
        the held Cholesky factor when the explicit inverse has not been formed, which
        :meth:`tracked_inverse` would form and keep).  Kernel: ``H ≈ (K + ρW⁻¹)⁻¹`` by handle
        over the samples of positive weight (``V`` of :attr:`capacity` rows; rows and columns
        of other handles are not meaningful).  Accurate to the tracked inverse's drift (below
        1e-9 relative): refine against the exact statistics where more is needed.
        """
        st = self._closed_form("apply_inverse")
        V = np.asarray(V, dtype=np.float64)
        if st.kind == "primal_squared" and not st._inv_ready:
            return linalg.cho_solve(st._chol, V, check_finite=False)
        return st.inv.matvec(V)

    def inverse_columns(self, handles: Any) -> np.ndarray:
        """Columns ``H[:, handles]`` of the kernel closed-form state's current inverse
        ``H ≈ (K + ρW⁻¹)⁻¹`` (shape (capacity, k)), O(capacity · (k + pending rank))."""
        st = self._closed_form("inverse_columns")
        if st.kind != "dual_squared":
            raise ValueError("inverse_columns needs a kernel model")
        return st.inv.columns(np.asarray(handles, dtype=np.intp))

    def score_function(self) -> ScoreFunction:
        """A :class:`ScoreFunction`: the current solution's scores, frozen, without checks."""
        return ScoreFunction(self)

    def cached(self, key: Any, compute: Callable[[], Any]) -> Any:
        """``compute()``, computed once per model version and key and kept with the solver
        state (for derived quantities of the stored solution that many queries reuse, such as
        the curvature-aware sensitivity regions' Hessian eigendecomposition).  The cache is
        dropped at the model's next fit or update; the returned object must not be changed."""
        # kept with the model's own state, by class: a class view's state may be made anew
        # at each access (the shared squared state's per-class views)
        st = self._model._state
        memo = st.__dict__.get("_derived_cache")
        if memo is None or memo[0] != self.version:
            memo = (self.version, {})
            st.__dict__["_derived_cache"] = memo
        table = memo[1]
        key = (self.klass, key)
        if key not in table:
            table[key] = compute()
        return table[key]


class DenseRows:
    """Read-only dense rows of a sparse row store: ``rows[handles]`` is a dense array (not
    writeable) of the rows at those handles; ``shape`` the store's."""

    def __init__(self, store):
        self._store = store

    @property
    def shape(self):
        return self._store.shape

    def __len__(self):
        return self._store.shape[0]

    def __getitem__(self, key):
        if isinstance(key, tuple):
            rows, cols = key[0], key[1:]
            return self[rows][(slice(None),) + cols]
        single = np.ndim(key) == 0 and not isinstance(key, slice)
        out = self._store[[key] if single else key].toarray()
        out = out[0] if single else out
        out.flags.writeable = False
        return out


class ScoreFunction:
    """``⟨Φ(x), β⟩`` of a fitted model's solution for validated float rows, without per-call
    checks: the kernel expansion over the live training rows (``kernel_rows``), or the linear
    score.  A snapshot: later updates of the model do not change it.  Used by the per-sample
    loops of the stream and active learners.

    Attributes
    ----------
    kernel : bool
    kw : dict
        The model's :attr:`FittedProblem.kernel_params` (kernel models).

    Examples
    --------
    >>> import numpy as np
    >>> import deltafit
    >>> from deltafit.datasets import load_breast_cancer
    >>> from deltafit.models import ScoreFunction
    >>> X, y = load_breast_cancer()
    >>> m = deltafit.LinearClassifier().fit(X, y)
    >>> f = ScoreFunction(m.problem_)
    >>> bool(np.allclose(f(X[:5]), m.decision_function(X[:5])))
    True
    """

    def __init__(self, problem: FittedProblem) -> None:
        if not isinstance(problem, FittedProblem):
            problem = FittedProblem.of(problem, "a score function")
        self.kernel = problem.kernel
        if self.kernel:
            A = problem.live
            self.points = problem.rows[A]
            self.alpha = np.array(problem.alpha[A])
            self.kw = problem.kernel_params
        else:
            self.beta = np.array(problem.coef)
            self.features = problem.features

    def mapped(self, P: Any) -> np.ndarray:
        """Scores of points already mapped (raw rows for kernels, Φ rows for linear models)."""
        if self.kernel:
            return kernel_rows(P, self.points, **self.kw) @ self.alpha
        return P @ self.beta

    def __call__(self, X: Any) -> np.ndarray:
        """Scores of raw rows."""
        return self.mapped(X if self.kernel else self.features(X))


class ProblemMixin:
    """Gives an estimator its :attr:`problem_` (scikit-learn style mixin; a base of
    :class:`~deltafit.models.UpdatableMixin`, hence of every deltafit estimator)."""

    _is_fitted: Callable[[], bool]  # the estimator's (UpdatableMixin._is_fitted)

    @property
    @guarded_read
    def problem_(self) -> FittedProblem:
        """:class:`~deltafit.models.FittedProblem`: read-only view of the fitted problem
        (features or kernel, targets, loss, C, solution, gradient, Hessian) for code that
        builds on the model; made anew at each access, it copies nothing."""
        if not self._is_fitted():
            raise AttributeError("problem_ is set by fit")
        return FittedProblem(self)
