"""Linear updatable estimators: identity features or an explicit feature map, primal state."""

from __future__ import annotations

import secrets
from collections.abc import Callable
from functools import partial
from typing import Any

import numpy as np
import scipy.sparse as sp
from sklearn.base import BaseEstimator, ClassifierMixin, RegressorMixin
from sklearn.utils.validation import check_is_fitted

from deltafit._ledger import DEFAULT_SCHEME, KEY_BYTES, Ledger, SortedDigests
from deltafit._linalg._features import features
from deltafit._states._one_vs_rest import one_vs_rest_state
from deltafit._states._protocol import DataChange
from deltafit._states._squared_stats import Rows
from deltafit.kernels import resolve_feature_map
from deltafit.models._base import UpdatableMixin
from deltafit.models._guard import guarded_read
from deltafit.models._params import LINEAR, constraints
from deltafit.models._predict import ClassifierOutputMixin, RegressorTags
from deltafit.models._registry import DASK_STATES, state_for
from deltafit.utils._transaction import atomic
from deltafit.utils._validation import feature_names_of

__all__ = ["LinearClassifier", "LinearRegressor"]


def _scores(x, feature_map, s, beta):
    """``Φ(x) β`` of a block of rows (a Dask task: module level, picklable)."""
    return features(x, feature_map, s) @ beta


class _LinearModel(UpdatableMixin, BaseEstimator):
    """Primal models: β over the features Φ(x) (plus the constant feature)."""

    def __init__(
        self,
        loss: str = "squared",
        C: float = 1.0,
        *,
        fit_intercept: bool = True,
        intercept_scaling: float = 1.0,
        feature_map: Any = None,
        keep_data: bool = True,
        tol: float = 1e-10,
        max_iter: int = 100,
        warm_start: bool = False,
        callback: Callable[..., Any] | None = None,
    ) -> None:
        self.loss = loss
        self.C = C
        self.fit_intercept = fit_intercept
        self.intercept_scaling = intercept_scaling
        self.feature_map = feature_map
        self.keep_data = keep_data
        self.tol = tol
        self.max_iter = max_iter
        self.warm_start = warm_start
        self.callback = callback

    _parameter_constraints: dict = constraints(UpdatableMixin._losses, LINEAR)

    def _check_param_rules(self):
        """The base rules, and: ``keep_data=False`` needs the squared loss."""
        super()._check_param_rules()
        if not self.keep_data and self.loss != "squared":
            raise ValueError(
                f"keep_data=False needs loss='squared' (closed-form updates); loss={self.loss!r} "
                "re-solves on the stored rows"
            )

    def _sparse_refusal(self, fitting=True):
        return None  # every loss takes sparse X

    def _features(self, X):
        """Φ(X) with the constant column ``intercept_scaling`` appended when fitting an
        intercept."""
        return features(X, self.feature_map_, self._s if self._fitted("fit_intercept") else None)

    def _build(self, X, t, previous, w=None):
        self.__dict__.pop("_dask_rows", None)  # a NumPy fit keeps its rows in the ledger
        if self._classifier and not self.keep_data and self._n_classes:
            raise ValueError(
                f"keep_data=False supports two classes; y has {self._n_classes} (a multiclass "
                "model keeps each sample's class: use keep_data=True)"
            )
        self.feature_map_ = resolve_feature_map(self.feature_map, X)
        Phi = self._features(X)
        n = X.shape[0]
        # headroom for a batch of additions without re-copying the stored rows
        capacity = Ledger.fit_capacity(n)
        self._state = self._new_state(Phi, t, capacity, previous, w)
        # keep_data=False keeps neither rows nor labels: one keyed digest per sample recognises
        # it by its row and label (a classifier's label is one of two; a regression target
        # comes from the caller)
        led = Ledger(
            Phi.shape[1],
            keep_rows=self.keep_data,
            keep_digests=not self.keep_data,
            capacity=capacity,
            growth=1.5,
            n_outputs=self._n_outputs_fitted,
            sparse_rows=sp.issparse(Phi),
        )
        digests = None if self.keep_data else led.records(X, t)
        led.insert(
            led.allocate(X.shape[0]),
            Phi if self.keep_data else None,
            led.stored_labels(t),
            digests,
            w,
        )
        self._ledger = led
        self.__dict__.pop("_class_counts", None)
        if self._classifier and not self.keep_data:  # the positives of positive weight
            pos = t > 0 if w is None else (t > 0) & (w > 0)
            self._n_positive = int(np.count_nonzero(pos))
        else:
            self.__dict__.pop("_n_positive", None)

    def _stored_rows(self, X):
        return self._features(X) if self._ledger.keep_rows else None

    def _check_outcome(self, plan, rem_slots):
        """As the base class's; a Dask-fitted classifier of K ≥ 3 classes, whose ledger keeps
        no labels, counts the samples of each class instead."""
        counts = self.__dict__.get("_class_counts")
        if counts is None:
            return super()._check_outcome(plan, rem_slots)
        led = self._ledger
        n_after = led.n_samples - rem_slots.size + (plan.X_add.shape[0] if plan.adds else 0)
        if n_after < 1:
            raise ValueError("the update would remove every sample; a model needs at least one")
        shown = None if self._classes_given else int(np.count_nonzero(self._counts_after(plan)))
        if self._weights_change(plan):  # fit's weight rule, on the samples left
            self._check_weight_rule(self._n_weighted_after(plan, rem_slots), shown, update=True)
        elif shown is not None and shown < 2:
            raise ValueError(
                "the update would leave a single class in the training data; a classifier "
                "needs two classes"
            )

    def _counts_after(self, plan):
        """The samples of positive weight of each class after ``plan`` (K ≥ 3 classes,
        Dask-fitted)."""
        counts = self._class_counts.copy()
        K = counts.size
        before, after = self._samples_changed(plan)
        for parts, sign in ((before, -1), (after, 1)):
            for t, w in parts:
                t = np.asarray(t, dtype=np.intp)[np.asarray(w) > 0]
                if t.size:
                    counts[:] += sign * np.bincount(t, minlength=K)
        return counts

    def _apply(self, plan):
        if "_class_counts" in self.__dict__:  # inside the transaction: rolled back with it
            self._class_counts = self._counts_after(plan)
        led = self._ledger
        change = DataChange(
            led,
            remove_slots=plan.remove_slots,
            relabel_slots=plan.relabel_slots,
            relabel_t=plan.relabel_t,
            remove_t=plan.remove_t,
            relabel_t_old=plan.relabel_t_old,
            w_add=plan.w_add,
            reweight_slots=plan.reweight_slots,
            reweight_w=plan.reweight_w,
            reweight_t=plan.reweight_t,
        )
        if plan.reweight_rows is not None:
            change.rows_reweight = self._features(plan.reweight_rows)
        if plan.adds:
            change.add_slots = led.allocate(plan.X_add.shape[0])
            change.rows_add, change.t_add = self._features(plan.X_add), plan.t_add
        if plan.removes:
            slots = plan.remove_slots
            change.rows_remove = (
                Rows(led.X, slots)
                if led.keep_rows
                else Rows(plan.remove_rows, transform=self._features)
            )
        if plan.relabels:
            slots = plan.relabel_slots
            change.rows_relabel = (
                led.X[slots] if led.keep_rows else self._features(plan.relabel_rows)
            )
        store = self.__dict__.get("_dask_rows")
        if store is not None:
            self._dask_change(change, plan, store)
        self._apply_change(change)
        return change.add_slots

    def _decision_checked(self, X):
        return self._features(X) @ self._state.beta

    # ------------------------------------------------------------------- dask
    def _featurizer(self):
        """``Φ`` as a picklable function of a NumPy block of rows (for Dask tasks)."""
        return partial(
            features,
            feature_map=self.feature_map_,
            s=self._s if self._fitted("fit_intercept") else None,
        )

    def _decision_dask(self, X):
        """``Φ(X) β`` of a dask X, lazily: a dask array mapped over the row blocks (the
        model's p-sized β travels with each task)."""
        from deltafit._dask._input import map_decision

        beta = np.array(self._state.beta, copy=True)
        score = partial(
            _scores,
            feature_map=self.feature_map_,
            s=self._s if self._fitted("fit_intercept") else None,
            beta=beta,
        )
        return map_decision(X, score, beta.shape[1] if beta.ndim == 2 else 0, self.n_features_in_)

    def _fit_dask(self, X, y, sample_weight=None, fold=None, n_folds=0):
        """``fit`` on dask collections (a transaction under the model's lock, as ``fit``).
        With ``fold`` (each row's fold, 0..n_folds-1) the same pass also sums each fold's
        statistics (kept in ``_dask_folds`` for the closed-form cross-validation)."""
        return self._locked(self._fit_dask_atomic, X, y, sample_weight, fold, n_folds)

    def _fit_dask_atomic(self, X, y, sample_weight, fold, n_folds):
        with atomic(self):
            self._fit_dask_locked(X, y, sample_weight, fold, n_folds)
            self._bump_version()
        return self

    def _fit_dask_locked(self, X, y, sample_weight, fold=None, n_folds=0):
        """The squared loss's statistics reduced on the cluster, the p × p state solved on the
        client, the ledger filled with the ids and digests of the samples (see
        :mod:`~deltafit._dask._stats`)."""
        from deltafit._dask._input import row_blocks
        from deltafit._dask._stats import BlockProblem, reduce_statistics

        self._validate_params()
        if self.loss == "hinge" and self.callback is not None:
            raise ValueError(
                "dask input with loss='hinge' takes no callback (its solve is a "
                "sequence of cluster passes, see deltafit._dask._hinge); "
                "use callback=None"
            )
        if self.loss != "squared" and not self.keep_data:
            raise ValueError(
                f"dask input with loss={self.loss!r} needs keep_data=True (the rows stay "
                "persisted on the cluster for the re-solves); keep_data=False needs "
                "loss='squared'"
            )
        if y is None:
            raise ValueError("fit needs y")
        if self.feature_map is not None:
            try:
                check_is_fitted(self.feature_map)
            except Exception as exc:
                raise ValueError(
                    "a dask fit takes a fitted feature_map (fit it on a sample "
                    "of the rows first); an unfitted one would need the rows "
                    "on the client"
                ) from exc
        blocks = row_blocks(X, y, sample_weight, fold)
        self._classes_given = False
        self._sparse_input = False
        self.n_features_in_ = blocks.n_features
        names = feature_names_of(X)  # a dask DataFrame's string columns, as a pandas fit's
        if names is None:
            self.__dict__.pop("feature_names_in_", None)
        else:
            self.feature_names_in_ = names
        if self._classifier:
            import dask.array as da

            yv = blocks.y.ravel() if blocks.y.ndim == 2 and blocks.y.shape[1] == 1 else blocks.y
            if yv.ndim != 1:
                raise ValueError(f"y must be 1-D for a classifier, got shape {blocks.y.shape}")
            found, found_n = (np.asarray(a) for a in da.compute(*da.unique(yv, return_counts=True)))
            self._encode_y(found, fitting=True)
            labels = self._labels()
            n_classes = self._n_classes
            if n_classes:  # one-vs-rest: the samples of positive weight of each class
                if blocks.w is not None:  # (one more pass, for weighted fits only)
                    wpos = blocks.w.ravel() > 0
                    found_n = np.asarray(
                        da.compute(*[((yv == c) & wpos).sum() for c in found]), dtype=np.int64
                    )
                class_counts = np.zeros(n_classes, dtype=np.int64)
                class_counts[labels.encode(found).astype(np.intp)] = found_n
        else:
            multi = blocks.y.ndim == 2 and blocks.y.shape[1] >= 2
            self._n_outputs = int(blocks.y.shape[1]) if multi else 0
            labels, n_classes, yv = None, 0, None
        self._take_spec()
        self.feature_map_ = resolve_feature_map(self.feature_map, None)
        featurize = self._featurizer()
        p = featurize(np.zeros((1, blocks.n_features))).shape[1]
        n = blocks.n
        key = secrets.token_bytes(KEY_BYTES)
        opts = self._solver_options()
        problem = BlockProblem(
            featurize,
            blocks.n_features,
            labels,
            self._n_outputs_fitted,
            opts.C,
            key,
            DEFAULT_SCHEME,
            n_classes=n_classes,
        )
        store = None
        if self.keep_data:  # the rows persisted on the cluster (the range ledger's ids)
            from deltafit._dask._fit import persist_rows

            smooth = self.loss != "squared"
            spec = beta0 = None
            if smooth:
                from deltafit._dask._hinge import start_loss
                from deltafit._dask._newton import PassSpec

                # the hinge's fit starts from a smoothed hinge's solution (_dask_hinge)
                loss = opts.loss if self.loss != "hinge" else start_loss()
                spec, beta0 = PassSpec(featurize, loss, opts.C), self._dask_start(p)
            if smooth and n_classes:  # one-vs-rest: the rows persisted with class indices,
                from deltafit._dask._ovr import prepare_ovr_block  # every class's start evaluated

                store, blocks, _, share, segments = persist_rows(
                    blocks, problem, spec, beta0, digests=True, prepare=prepare_ovr_block
                )
                return self._fit_ovr_dask(
                    blocks, yv, store, class_counts, share, segments, key, p, spec, beta0, opts
                )
            store, blocks, counts, share, segments = persist_rows(
                blocks, problem, spec, beta0, digests=smooth
            )
            if smooth:
                return self._fit_smooth_dask(
                    blocks, store, counts, share, segments, key, p, beta0, opts
                )
            # the statistics from the persisted rows (targets encoded there)
            problem = BlockProblem(
                featurize,
                blocks.n_features,
                None,
                self._n_outputs_fitted,
                opts.C,
                key,
                DEFAULT_SCHEME,
                n_classes=n_classes,
            )
        total, segments, self._dask_passes = reduce_statistics(blocks, problem, opts.rho, n_folds)
        w = None
        if not total.all_ones:
            w = np.asarray(blocks.w.compute(), dtype=np.float64).reshape(-1)
            if total.n_weighted == 0:
                raise ValueError(
                    "sample_weight: every weight is zero; at least one sample "
                    "needs a positive weight"
                )
            if self._classifier and (
                self._weighted_classes(yv, blocks.w) < 2
                if n_classes
                else total.n_weighted_positive in (0, total.n_weighted)
            ):
                raise ValueError(
                    "the samples with a positive sample_weight show a single "
                    "class; a classifier needs two classes"
                )
        base = state_for(False, "squared", backend="dask")
        st = base(opts, self._max_rank).fit_statistics(total.stats)
        if n_classes:  # the K one-vs-rest problems as one state with K right-hand sides
            inner, st = st, one_vs_rest_state(opts, self._max_rank, base, n_classes)
            st.inner = inner
        self._check_solution(st)
        K = self._n_outputs_fitted
        # the range ledger: ids, weights and (absent) labels implicit, digests sorted
        led = Ledger.from_range(
            p, n, SortedDigests(n, segments, 0), n + max(16, n // 64), n_outputs=K, key=key
        )
        if w is not None:  # weights given: stored per slot
            led.w = np.zeros(len(led.w))
            led.w[:n] = w
            led.weighted = bool(np.any(w != 1.0))
        self._state, self._ledger, self._dask_rows = st, led, store
        self._dask_folds = total if n_folds else None
        self._take_counts(total.n_weighted_positive, class_counts if n_classes else None)

    def _dask_start(self, p):
        """The start of a Dask fit's Newton solve: the previous β (``warm_start``) or 0
        (K ≥ 3 classes: one column per class)."""
        st = self.__dict__.get("_state")
        shape = (p, self._n_classes) if self._n_classes else (p,)
        if self.warm_start and st is not None and np.shape(st.solution) == shape:
            return np.array(st.solution, dtype=np.float64, copy=True)
        return np.zeros(shape)

    def _take_counts(self, n_positive, class_counts=None):
        """What refuses an update that leaves a single class, for a Dask-fitted classifier
        whose ledger keeps no labels: the positive samples of positive weight (two classes)
        or the samples of positive weight of each class (``class_counts``, K ≥ 3)."""
        self.__dict__.pop("_n_positive", None)
        self.__dict__.pop("_class_counts", None)
        if class_counts is not None:
            self._class_counts = np.asarray(class_counts, dtype=np.int64)
        elif self._classifier:
            self._n_positive = int(n_positive)

    @staticmethod
    def _weighted_classes(yv, w):
        """How many classes the samples of positive weight show (``yv``, ``w``: the dask
        labels and weights; a pass over them)."""
        import dask.array as da

        return int(da.unique(yv[w.ravel() > 0]).compute().size)

    def _fit_ovr_dask(
        self, blocks, yv, store, class_counts, share, segments, key, p, spec, beta0, opts
    ):
        """A logistic / squared-hinge / hinge fit of K ≥ 3 classes on rows persisted on the
        cluster: the K one-vs-rest solves made jointly, one pass serving every class (see
        :mod:`._dask_ovr`)."""
        from deltafit._dask._ovr import DaskOneVsRestState, OvrPasses

        n = int(store.starts[-1])
        w = None
        if blocks.w is not None:
            w = np.asarray(blocks.w.compute(), dtype=np.float64).reshape(-1)
            if not np.any(w > 0):
                raise ValueError(
                    "sample_weight: every weight is zero; at least one sample "
                    "needs a positive weight"
                )
            if self._weighted_classes(yv, blocks.w) < 2:
                raise ValueError(
                    "the samples with a positive sample_weight show a single "
                    "class; a classifier needs two classes"
                )
            if np.all(w == 1.0):
                w = None
        passes = OvrPasses(store, spec)
        passes.count = 1  # the pass that persisted the rows evaluated every class's start
        base = state_for(False, self.loss, backend="dask")
        st = DaskOneVsRestState(
            opts, self._max_rank, base=base, n_classes=self._n_classes
        ).fit_passes(passes, beta0, share)
        self._check_solution(st)
        led = Ledger.from_range(p, n, SortedDigests(n, segments, 0), n + max(16, n // 64), key=key)
        if w is not None:
            led.w = np.zeros(len(led.w))
            led.w[:n] = w
            led.weighted = True
        self._state, self._ledger, self._dask_rows = st, led, store
        self._dask_folds, self._dask_passes = None, passes.count
        self._take_counts(0, class_counts)

    def _fit_smooth_dask(self, blocks, store, counts, share, segments, key, p, beta0, opts):
        """A logistic / squared-hinge fit on rows persisted on the cluster: Newton with the
        gradient and Hessian as cluster reductions (see :mod:`._dask_newton`)."""
        from deltafit._dask._newton import DaskPasses, PassSpec

        n, n_pos, n_w, n_wp, ones = (int(v) for v in counts)
        w = None
        if not ones:
            w = np.asarray(blocks.w.compute(), dtype=np.float64).reshape(-1)
        if n_w == 0:
            raise ValueError(
                "sample_weight: every weight is zero; at least one sample needs a positive weight"
            )
        if n_wp in (0, n_w):
            raise ValueError(
                "the samples with a positive sample_weight show a single class; "
                "a classifier needs two classes"
            )
        cls = state_for(False, self.loss, backend="dask")
        if cls.kind == "dask_hinge":  # a distributed decomposition method (see _dask._hinge)
            st = cls(opts, self._max_rank).fit_passes(store, self._featurizer(), p, n, share, beta0)
            n_passes = st.passes
        else:
            passes = DaskPasses(store, PassSpec(self._featurizer(), opts.loss, opts.C))
            passes.count = 1  # the pass that persisted the rows evaluated the start
            st = cls(opts, self._max_rank).fit_passes(passes, beta0, share)
            n_passes = passes.count
        self._check_solution(st)
        led = Ledger.from_range(p, n, SortedDigests(n, segments, 0), n + max(16, n // 64), key=key)
        if w is not None:
            led.w = np.zeros(len(led.w))
            led.w[:n] = w
            led.weighted = bool(np.any(w != 1.0))
        self._state, self._ledger, self._dask_rows = st, led, store
        self._dask_folds, self._dask_passes = None, n_passes
        self._take_counts(n_wp)

    def _stored_samples(self, slots):
        """Rows and targets of the samples at ``slots`` gathered from the Dask row store (a
        few rows: one small task per block they lie in); None without a store."""
        store = self.__dict__.get("_dask_rows")
        if store is None:
            return None
        X, T, _ = store.gather(self._ledger.ids[np.asarray(slots, dtype=np.intp)])
        return X, T

    def _dask_change(self, change, plan, store):
        """The row store after ``plan`` (removals masked, relabels and reweights patched,
        additions appended as one block under the ids they will receive), put on ``change``
        with, for the smooth losses, Φ and the targets and ``C w`` before and after of every
        changed row (gathered from the store: a few)."""
        led, C = self._ledger, float(self._state.C)

        def ids(slots):
            return None if slots is None else led.ids[np.asarray(slots, dtype=np.intp)]

        add = (int(led.next_id), plan.X_add, plan.t_add, plan.w_add) if plan.adds else None
        rem = ids(plan.remove_slots) if plan.removes else None
        rel = ids(plan.relabel_slots) if plan.relabels else None
        rw = ids(plan.reweight_slots) if plan.reweights else None
        new = store.changed(
            remove_ids=rem,
            relabel_ids=rel,
            relabel_t=plan.relabel_t,
            reweight_ids=rw,
            reweight_w=plan.reweight_w,
            add=add,
        )
        change.dask_rows = new
        st = self._state
        if (
            st.kind in DASK_STATES
            or getattr(st, "base", None) is not None
            and st.base.kind in DASK_STATES
        ):  # K ≥ 3: one-vs-rest
            change.dask_featurize = self._featurizer()
            # the changed rows as the plan holds them (gathered from the store by the plan,
            # or given), their weights from the ledger, one vectorised read per group: a
            # sample in several groups keeps its first (removal, relabel, reweight) row
            groups = [
                (np.asarray(slots, dtype=np.intp).reshape(-1), X, t)
                for slots, X, t in (
                    (plan.remove_slots, plan.remove_rows, plan.remove_t),
                    (plan.relabel_slots, plan.relabel_rows, plan.relabel_t_old),
                    (plan.reweight_slots, plan.reweight_rows, plan.reweight_t),
                )
                if slots is not None and X is not None and len(slots)
            ]
            p = self._state.beta.shape[0]
            Phi = np.zeros((0, p))
            tb, cb, ta, ca = (np.zeros(0) for _ in range(4))
            touched = np.zeros(0, dtype=np.int64)
            if groups:
                slots = np.concatenate([g[0] for g in groups])
                touched, first = np.unique(
                    np.asarray(led.ids[slots], dtype=np.int64), return_index=True
                )
                Xg = np.vstack([np.asarray(g[1]) for g in groups])[first]
                tb = np.concatenate(
                    [np.asarray(g[2], dtype=np.float64).reshape(-1) for g in groups]
                )[first]
                W = np.asarray(led.w[slots[first]], dtype=np.float64)
                if rel is not None:  # a relabelled and reweighted sample: its label before
                    tb[np.searchsorted(touched, rel)] = plan.relabel_t_old
                Phi = self._features(Xg)
                cb = C * W
                ta, wa = tb.copy(), W.copy()
                if rel is not None:
                    ta[np.searchsorted(touched, rel)] = plan.relabel_t
                if rw is not None:
                    wa[np.searchsorted(touched, rw)] = plan.reweight_w
                if rem is not None:
                    wa[np.searchsorted(touched, rem)] = 0.0
                ca = C * wa
            if plan.adds:
                k = plan.X_add.shape[0]
                wadd = np.ones(k) if plan.w_add is None else np.asarray(plan.w_add, float)
                Phi = np.vstack([Phi, np.asarray(change.rows_add, dtype=np.float64)])
                tb = np.concatenate([tb, plan.t_add])
                ta = np.concatenate([ta, plan.t_add])
                cb = np.concatenate([cb, np.zeros(k)])
                ca = np.concatenate([ca, C * wadd])
            change.dask_changed = (Phi, tb, cb, ta, ca)
            change.dask_changed_ids = np.concatenate(
                [
                    touched,
                    np.arange(
                        int(led.next_id),
                        int(led.next_id) + (plan.X_add.shape[0] if plan.adds else 0),
                        dtype=np.int64,
                    ),
                ]
            )
        self._dask_rows = new

    # -------------------------------------------------------------- attributes
    @property
    def _coef_vector(self):
        beta = self._state.beta
        return beta[:-1] if self._fitted("fit_intercept") else beta

    @property
    def _intercept_value(self):
        """The intercept: a float, or one per class (K ≥ 3 classes)."""
        beta = self._state.beta
        if not self._fitted("fit_intercept"):
            return np.zeros(beta.shape[1]) if beta.ndim == 2 else 0.0
        return beta[-1] * self._s if beta.ndim == 2 else float(beta[-1] * self._s)


_LINEAR_DOC_PARAMS = """
    C : float, default=1.0
        Weight of the data term in ``C Σ ℓ(y_i, z_i) + ½‖β‖²``.
    fit_intercept : bool, default=True
        Append a regularised constant feature of value ``intercept_scaling`` (LIBLINEAR's
        convention; the intercept is penalised, which the sensitivity bounds require).
    intercept_scaling : float, default=1.0
    feature_map : scikit-learn transformer or None, default=None
        Explicit feature map Φ, e.g. :class:`sklearn.kernel_approximation.Nystroem` or
        :class:`~sklearn.kernel_approximation.RBFSampler`.  An unfitted map is cloned and fitted
        on the training X in :meth:`fit`; a fitted one is used as it is.  Updates reuse the map
        fitted in :meth:`fit` (``feature_map_``).
    keep_data : bool, default=True
        Keep the training rows and labels (required by every loss but the squared one, whose
        updates are closed form).  With ``keep_data=False`` (squared loss only) the model
        stores its sufficient statistics ``ΦᵀΦ + ρI`` and ``Φᵀy`` and, per sample, only what
        recognises it given its row and label: a 16-byte keyed digest of (row, label).  No
        feature vector and no label is kept: :meth:`remove` and :meth:`relabel` take the
        samples' rows as ``X`` and, for a regressor, their current targets (``y`` of
        ``remove``, ``y_old`` of ``relabel``), which the exact update needs.  A dask X with
        ``keep_data=True`` keeps its rows persisted on the cluster (updates by id gather the
        few rows they change; logistic and squared-hinge re-solves are cluster reductions).
    tol : float, default=1e-10
        Newton stops when ``‖∇J(β)‖₂ ≤ tol · ‖∇J(0)‖₂`` (unused by the closed form); the hinge
        QP when its KKT violation (margin units) is at most ``tol`` (or at the rounding floor).
    max_iter : int, default=100
        Maximum Newton iterations per solve (hinge: coordinate-descent sweeps plus proximal
        active-set steps).
    warm_start : bool, default=False
        Start :meth:`fit` from the previous solution (updates always warm-start).
    callback : callable or None, default=None
        ``callback(iteration, coef, grad_norm, objective, grad)`` after every Newton iteration,
        ``coef`` and ``grad`` over Φ(x) with the constant feature last (for the hinge ``grad``
        is a subgradient, see :func:`deltafit.solvers.hinge_primal`); returning True stops
        the solver (see :class:`deltafit.sensitivity.CertainSigns`).
"""


class LinearClassifier(ClassifierOutputMixin, ClassifierMixin, _LinearModel):
    __doc__ = (
        """Linear classifier with exact add / remove / relabel (LS-SVM, logistic, L2-SVM,
    L1-SVM), for two classes or more.

    Solves ``min_β C Σ ℓ(y_i, ⟨Φ(x_i), β⟩) + ½‖β‖²`` with y in {-1, +1} (any two labels are
    accepted; ``classes_[1]`` is the positive one).  With K ≥ 3 classes it solves the K
    one-vs-rest problems (class k against the rest, same C), as scikit-learn's
    ``OneVsRestClassifier`` does, over one ledger and one row store: every update changes
    every class's problem exactly, and the predicted class is that of the largest score.

    Parameters
    ----------
    loss : {"squared", "logistic", "squared_hinge", "hinge"}, default="squared"
        ``"squared"`` is the LS-SVM of Lee et al. ("Exact incremental and decremental
        learning for LS-SVM") with ``ρ = 1/(2C)``; its updates are closed form (their
        Theorem 1 and Corollaries 1–4).  ``"logistic"`` and ``"squared_hinge"`` update by a
        warm-started Newton re-solve (chord steps on the stored factorised Hessian).
        ``"hinge"`` is the L1-SVM, solved exactly through its
        dual box QP (:func:`deltafit.solvers.hinge_primal`) and updated by a warm-started
        re-solve; it offers no ``predict_proba``.
    """
        + _LINEAR_DOC_PARAMS
        + """
    Attributes
    ----------
    classes_ : ndarray of shape (n_classes,)
    coef_ : ndarray of shape (1, n_map_features) or (n_classes, n_map_features)
        One row for two classes, one per class (its one-vs-rest problem) for more.
    intercept_ : ndarray of shape (1,) or (n_classes,)
    dual_coef_ : ndarray of shape (n_samples,) or (n_classes, n_samples)
        ``loss="hinge"`` only: ``y_i α_i`` with α_i ∈ [0, C] the dual variables
        (``β = Σ y_i α_i Φ(x_i)``, y_i = ±1 in the class's one-vs-rest problem), in the order
        of ``sample_ids_``.
    sample_ids_ : ndarray of int
        Stable ids of the training samples (``0..n-1`` after :meth:`fit`).
    feature_map_ : transformer or None
    n_features_in_ : int

    Notes
    -----
    Equivalences used by the test-suite (ARCHITECTURE.md, "The problem"): ``loss="logistic"`` is
    ``LogisticRegression(C=C, fit_intercept=False)`` on ``[X, s]``; ``"squared_hinge"`` is
    ``LinearSVC(C=C, loss="squared_hinge", fit_intercept=False)`` on ``[X, s]``; ``"hinge"`` is
    ``LinearSVC(C=C, loss="hinge", fit_intercept=False)`` on ``[X, s]``; ``"squared"`` is
    ``Ridge(alpha=1/(2C), fit_intercept=False)`` on ``[X, s]`` with targets ±1.

    Examples
    --------
    >>> import deltafit
    >>> from deltafit.datasets import load_breast_cancer
    >>> X, y = load_breast_cancer()
    >>> m = deltafit.LinearClassifier(C=1.0).fit(X[:500], y[:500])
    >>> ids = m.add(X[500:], y[500:])
    >>> _ = m.remove([0, 1, 2])
    """
    )

    _classifier = True
    _losses = ("squared", "logistic", "squared_hinge", "hinge")
    _parameter_constraints: dict = constraints(_losses, LINEAR)

    @property
    @guarded_read
    def coef_(self) -> np.ndarray:
        check_is_fitted(self, "_state")
        c = self._coef_vector
        return c.T.copy() if c.ndim == 2 else c[None, :].copy()

    @property
    @guarded_read
    def dual_coef_(self) -> np.ndarray:
        """``y_i α_i`` of the training samples, in the order of ``sample_ids_`` (``loss="hinge"``
        only): α_i ∈ [0, C] are the SVM dual variables, 0 outside the margin, C for margin
        violators, in between for free support vectors; ``β = Σ_i dual_coef_i Φ(x_i)``
        (constant feature included).  Kept by the model's state (``_state.dual``, by ledger
        slot) for exact warm-started updates and for approximate leave-one-out."""
        check_is_fitted(self, "_state")
        st = self._state
        if st.kind == "dask_hinge":
            raise AttributeError(
                "dual_coef_ is not kept for a hinge model whose rows live on "
                "a Dask cluster (its dual variables are implicit there: n "
                "values); coef_ and intercept_ are"
            )
        if not hasattr(st, "dual"):
            raise AttributeError(
                f"dual_coef_ is kept for loss='hinge' only; this model was fitted with "
                f"loss={st.loss.name!r}"
            )
        slots = self._ledger.active_slots()
        t = self._ledger.y[slots]
        if self._n_classes:
            codes = np.where(t[None, :] == np.arange(self._n_classes)[:, None], 1.0, -1.0)
            return codes * st.dual[slots].T + 0.0
        return t * st.dual[slots] + 0.0  # no negative zeros

    @property
    @guarded_read
    def intercept_(self) -> np.ndarray:
        check_is_fitted(self, "_state")
        return np.atleast_1d(np.array(self._intercept_value, dtype=np.float64))


class LinearRegressor(RegressorTags, RegressorMixin, _LinearModel):
    __doc__ = (
        """Ridge regression with exact add / remove / relabel and optional data-free state.

    Solves ``min_β C Σ (y_i − ⟨Φ(x_i), β⟩)² + ½‖β‖²``, i.e. ``Ridge(alpha=1/(2C))`` with a
    regularised intercept feature.  A 2-D ``y`` of K outputs solves the K problems with one
    factorisation (one tracked inverse, K right-hand sides): an update costs about what a
    single-output one does.  Updates are closed form (Theorem 1 and Corollaries 1–4 of Lee
    et al., "Exact incremental and decremental learning for LS-SVM", through Woodbury
    corrections of a tracked inverse).

    Parameters
    ----------
    loss : {"squared"}, default="squared"
    """
        + _LINEAR_DOC_PARAMS
        + """
    Attributes
    ----------
    coef_ : ndarray of shape (n_map_features,) or (n_outputs, n_map_features)
    intercept_ : float or ndarray of shape (n_outputs,)
    sample_ids_ : ndarray of int
    feature_map_ : transformer or None
    n_features_in_ : int

    Examples
    --------
    >>> import numpy as np
    >>> from sklearn.linear_model import Ridge
    >>> from deltafit import LinearRegressor
    >>> rng = np.random.default_rng(0)
    >>> X, y = rng.normal(size=(100, 3)), rng.normal(size=100)
    >>> reg = LinearRegressor(C=0.5).fit(X[:80], y[:80])
    >>> new_ids = reg.add(X[80:], y[80:])        # exact: a refit on all 100 samples
    >>> _ = reg.remove([0, 1])
    >>> keep = np.r_[2:100]
    >>> X1 = np.c_[X, np.ones(100)]             # Ridge(alpha=1/(2C)), constant feature last
    >>> ridge = Ridge(alpha=1.0, fit_intercept=False).fit(X1[keep], y[keep])
    >>> bool(np.allclose(reg.coef_, ridge.coef_[:3]))
    True
    >>> bool(np.isclose(reg.intercept_, ridge.coef_[3]))     # the regularised intercept
    True
    """
    )

    @property
    @guarded_read
    def coef_(self) -> np.ndarray:
        check_is_fitted(self, "_state")
        c = self._coef_vector
        return c.T.copy() if c.ndim == 2 else c.copy()

    @property
    @guarded_read
    def intercept_(self) -> float | np.ndarray:
        check_is_fitted(self, "_state")
        return self._intercept_value
