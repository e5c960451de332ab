"""A stateful property test of the update contract: hypothesis drives random sequences of fit /
add / remove / relabel / reweight / mixed ``update`` / save-and-load / what-if / invalid steps
over the configurations a model can have, and after every step checks that

* the model equals a fresh fit of the data it should hold (tracked here by id: row, label,
  weight) — 1e-8 relative on the decision values for the squared loss; for the iterative losses
  the certificate ``|f_upd(x) − f_fresh(x)| ≤ ‖φ(x)‖ (grad_norm_upd + grad_norm_fresh)`` (both
  are within ``grad_norm_`` of the one optimum, J being 1-strongly convex), plus rounding;
* its ids are the tracked ones;
* a refused step (ValueError) changed nothing, bitwise (ids, weights, coefficients, decision
  values on probe rows); an update is expected to be refused exactly when ``fit`` refuses the
  data it would leave (one class, no sample, ...), or when it is invalid (unknown or repeated
  id, NaN or wrongly sized row, unknown class, negative weight);
* a what-if's bounds (``deltafit.sensitivity`` with its default method) contain the decision
  values (and, for linear models, the coefficients) of the refit on the hypothetical data, and
  asking them changes nothing.

Configurations: the four losses; linear and kernel models; two classes, three classes (one-vs-
rest) and the regressors (squared loss); dense and CSR rows; with and without sample weights;
``keep_data`` True and False (the linear squared loss, two classes or regression); the bare
model or ``deltafit.make_pipeline(StandardScaler(), model)``; integer or string labels.  Data:
scikit-learn's wine (178 samples, 3 classes), six standardised features with the small entries
zeroed (so the CSR rows are sparse), the first 30–60 rows of a shuffled order fitted and the
rest a pool of rows to add.

A short derandomised profile (25 examples of up to 12 steps) runs by default; a long one (120
examples of up to 25 steps, about a minute on two shared cores) is marked slow.  A bug it finds
is fixed, not stepped around: the machine has no exceptions for known bugs.
"""

from __future__ import annotations

import os
import tempfile

import numpy as np
import pandas as pd
import pytest
import scipy.sparse as sp
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, rule
from sklearn.base import clone
from sklearn.datasets import load_wine
from sklearn.preprocessing import StandardScaler

import deltafit as df
from hypothesis_profiles import examples

SQ_TOL = 1e-8  # relative, of the decision scale (README, "Guarantees": Exact)
ROUND = 1e-11  # rounding slack of a certificate check, relative to the decision scale
LOSSES = ("squared", "logistic", "squared_hinge", "hinge")
FEATURES = [0, 1, 4, 6, 9, 11]
STR_CLASSES = np.array(["barolo", "grignolino", "barbera"])
COLUMNS = ["alcohol", "malic_acid", "magnesium", "flavanoids", "color_intensity", "od280"]


def _wine():
    X, y = load_wine(return_X_y=True)
    Z = StandardScaler().fit_transform(X)
    F = Z[:, FEATURES].copy()
    F[np.abs(F) < 0.5] = 0.0  # about 40% zeros: the CSR rows are sparse
    scales = X[:, FEATURES].std(axis=0)  # raw-looking columns for the pipeline's scaler
    return F, y, Z[:, 12], scales


WINE = _wine()


# ---------------------------------------------------------------------------------- helpers


def _decision(est, X):
    return est.decision_function(X) if hasattr(est, "decision_function") else est.predict(X)


def _phi_norm(final, Xt):
    """‖φ(x)‖ in the model's space: the row with the intercept feature (linear) or
    sqrt(k(x, x) + s²) (kernel)."""
    s = final.intercept_scaling if final.fit_intercept else 0.0
    Xt = Xt.to_numpy() if hasattr(Xt, "to_numpy") else Xt
    if isinstance(final, (df.KernelClassifier, df.KernelRegressor)):
        kxx = np.diag(
            df.kernels.kernel_matrix(
                Xt,
                Xt,
                kernel=final.kernel,
                gamma=final.gamma_,
                degree=final.degree,
                coef0=final.coef0,
            )
        )
        return np.sqrt(np.maximum(kxx, 0.0) + s * s)
    sq = (
        np.asarray(Xt.multiply(Xt).sum(axis=1)).ravel()
        if sp.issparse(Xt)
        else np.einsum("ij,ij->i", Xt, Xt)
    )
    return np.sqrt(sq + s * s)


def _within(f_upd, f_ref, radius, phi, what):
    """Assert |f_upd − f_ref| ≤ φ·radius (+ rounding), column-wise for K classes."""
    f_upd, f_ref = np.asarray(f_upd, float), np.asarray(f_ref, float)
    scale = max(1.0, float(np.max(np.abs(f_ref))))
    bound = phi * radius * (1 + 1e-9)
    if f_ref.ndim == 2:
        bound = bound[:, None]
    gap = np.abs(f_upd - f_ref)
    bad = gap > bound + ROUND * scale
    assert not bad.any(), (what, float(gap.max()), float(np.max(bound)), radius)


class UpdateMachine(RuleBasedStateMachine):
    """One model under random updates, against the data it should hold."""

    # ------------------------------------------------------------------ configuration
    @initialize(
        loss=st.sampled_from(LOSSES),
        kernel=st.booleans(),
        task=st.sampled_from(["binary", "k3", "regression"]),
        sparse=st.booleans(),
        weighted=st.booleans(),
        keep_data=st.booleans(),
        pipeline=st.booleans(),
        str_labels=st.booleans(),
        scale_gamma=st.booleans(),
        raw=st.booleans(),
        frame=st.booleans(),
        C=st.sampled_from([1.0, 0.3, 3.0]),
        n0=st.integers(10, 60),
        seed=st.integers(0, 2**16),
    )
    def fit(
        self,
        loss,
        kernel,
        task,
        sparse,
        weighted,
        keep_data,
        pipeline,
        str_labels,
        scale_gamma,
        raw,
        frame,
        C,
        n0,
        seed,
    ):
        if task == "regression" and loss != "squared":
            task = "binary"  # the regressors have the squared loss only
        if kernel or loss != "squared" or task == "k3":
            keep_data = True  # keep_data=False: linear squared, <= 2 classes
        self.loss, self.kernel, self.task, self.sparse = loss, kernel, task, sparse
        self.weighted, self.keep_data, self.pipeline = weighted, keep_data, pipeline
        self.frame = frame and not sparse  # a pandas DataFrame with column names
        self.rng = np.random.default_rng(seed)
        F, y, target, scales = WINE
        rows = np.arange(F.shape[0]) if task != "binary" else np.flatnonzero(y < 2)
        rows = self.rng.permutation(rows)
        if task != "regression":  # two classes among the first rows
            j = 1 + int(np.argmax(y[rows[1:]] != y[rows[0]]))
            rows[[1, j]] = rows[[j, 1]]
        # raw columns (wine's own scales, up to ~300): the pipeline's scaler undoes them; a
        # bare model may also get them
        self.X_all = F * scales if (pipeline or raw) else F
        if task == "regression":
            self.y_all = target
        else:
            self.y_all = STR_CLASSES[y] if str_labels else y
        self.classes = None if task == "regression" else np.unique(self.y_all[rows])
        self.pool = [int(r) for r in rows[n0:]]
        self.probe = np.concatenate([rows[n0 : n0 + 8], rows[:4]])  # rows to compare decisions on

        kw = {"C": C}
        if kernel:
            kw["gamma"] = "scale" if scale_gamma else 0.2
            cls = df.KernelRegressor if task == "regression" else df.KernelClassifier
        else:
            kw["keep_data"] = keep_data
            cls = df.LinearRegressor if task == "regression" else df.LinearClassifier
        if task != "regression":
            kw["loss"] = loss
        est = cls(**kw)
        self.model = (
            df.make_pipeline(StandardScaler(with_mean=not sparse), est) if pipeline else est
        )

        start = rows[:n0]
        w = self.rng.uniform(0.3, 3.0, size=n0) if weighted else None
        fit_kw = {}
        if w is not None:
            fit_kw[
                (self.model.steps[-1][0] + "__sample_weight") if pipeline else "sample_weight"
            ] = w
        self.model.fit(self._X(start), self.y_all[start], **fit_kw)
        w = np.ones(n0) if w is None else w
        # id -> (row of X_all, label, weight)
        self.data = {
            i: (int(r), self.y_all[r], float(wi)) for i, (r, wi) in enumerate(zip(start, w))
        }
        self.next_id = n0
        self._fresh = None
        self.heavy = False  # has a sample been given a large weight (x1e4)?

    # ------------------------------------------------------------------ views
    def _X(self, rows):
        X = self.X_all[np.asarray(rows, dtype=int)]
        if self.frame:
            return pd.DataFrame(X, columns=COLUMNS)
        return sp.csr_matrix(X) if self.sparse else X

    @property
    def final(self):
        return self.model.steps[-1][1] if self.pipeline else self.model

    def _transform(self, X):
        return self.model[:-1].transform(X) if self.pipeline else X

    def _arrays(self, data):
        ids = np.array(sorted(data), dtype=np.int64)
        rows = np.array([data[i][0] for i in ids], dtype=int)
        y = np.array([data[i][1] for i in ids], dtype=self.y_all.dtype)
        w = np.array([data[i][2] for i in ids], dtype=float)
        return ids, rows, y, w

    def _fit_fresh(self, data):
        """The final estimator fitted from scratch on ``data`` (transformed rows; the K-class
        model with its classes declared, as an update keeps them), or the ValueError that
        ``fit`` raises on it."""
        _, rows, y, w = self._arrays(data)
        est = clone(self.final)
        if getattr(est, "gamma", None) == "scale":
            est.set_params(gamma=self.final.gamma_)  # README: kept as gamma_ by updates
        try:
            Xt = self._transform(self._X(rows))  # no row left: the scaler refuses too
            if self.task == "k3":
                # fit's rule (two classes, two among the positive weights), which an update
                # keeps; partial_fit(classes=) itself would take a single class
                if np.unique(y).size < 2:
                    raise ValueError("a single class")
                if np.unique(y[w > 0]).size < 2:
                    raise ValueError("the samples with a positive sample_weight show one class")
                return est.partial_fit(Xt, y, classes=self.classes, sample_weight=w)
            return est.fit(Xt, y, sample_weight=w)
        except ValueError as e:
            return e

    def _snapshot(self):
        f = self.final
        snap = {
            "ids": f.sample_ids_.copy(),
            "dec": _decision(self.model, self._X(self.probe)),
            "n": f.n_samples_,
        }
        for name in ("coef_", "intercept_", "dual_coef_", "sample_weight_"):
            v = getattr(f, name, None)
            if v is not None:
                snap[name] = np.array(v, copy=True)
        return snap

    def _assert_unchanged(self, before, what):
        after = self._snapshot()
        assert before.keys() == after.keys(), what
        for k in before:
            assert np.array_equal(before[k], after[k]), (what, k)

    # ------------------------------------------------------------------ updates
    def _apply(self, new_data, call, what, invalid=False):
        """Run the update ``call``; it must succeed exactly when ``fit`` accepts ``new_data``
        (and the step is not ``invalid``), and a refusal must change nothing."""
        fresh = None if invalid else self._fit_fresh(new_data)
        before = self._snapshot()
        if invalid or isinstance(fresh, ValueError):
            with pytest.raises(ValueError):
                call()
            self._assert_unchanged(before, what)
            return None
        out = call()
        self.data = new_data
        self._fresh = fresh
        return out

    def _rows_of(self, ids):
        return self._X([self.data[int(i)][0] for i in ids])

    def _labels_of(self, ids):
        return np.array([self.data[int(i)][1] for i in ids], dtype=self.y_all.dtype)

    def _pick(self, k):
        ids = sorted(self.data)
        k = min(k, len(ids))
        return np.array(self.rng.choice(ids, size=k, replace=False), dtype=np.int64)

    def _new_labels(self, k):
        if self.task == "regression":
            return self.rng.normal(size=k)
        return self.rng.choice(self.classes, size=k)

    def _take_pool(self, k):
        if len(self.pool) < k:  # a re-added row is a new sample (a new id)
            self.pool.extend(int(r) for r in self.rng.permutation(self.probe))
        return [self.pool.pop() for _ in range(k)]

    @rule(k=st.integers(1, 4), weighted=st.booleans(), relabelled=st.booleans())
    def add(self, k, weighted, relabelled):
        rows = self._take_pool(k)
        y = self._new_labels(k) if relabelled else self.y_all[rows]
        w = self.rng.uniform(0.3, 3.0, size=k) if weighted else None
        new = dict(self.data)
        for j, (r, t) in enumerate(zip(rows, y)):
            new[self.next_id + j] = (r, t, 1.0 if w is None else float(w[j]))
        ids = self._apply(new, lambda: self.model.add(self._X(rows), y, sample_weight=w), "add")
        if ids is not None:
            np.testing.assert_array_equal(ids, np.arange(self.next_id, self.next_id + k))
            self.next_id += k

    @rule(k=st.integers(1, 5), by_value=st.booleans())
    def remove(self, k, by_value):
        ids = self._pick(k)
        new = {i: v for i, v in self.data.items() if i not in set(ids.tolist())}
        if self.keep_data:
            call = lambda: self.model.remove(ids)  # noqa: E731
        elif by_value:  # keep_data=False: by value, no ids
            call = lambda: self.model.remove(X=self._rows_of(ids), y=self._labels_of(ids))  # noqa
        else:  # by id, the rows checked (and labels)
            y = self._labels_of(ids) if self.task == "regression" else None
            call = lambda: self.model.remove(ids, X=self._rows_of(ids), y=y)  # noqa: E731
        self._apply(new, call, "remove")

    @rule(k=st.integers(1, 4))
    def relabel(self, k):
        ids = self._pick(k)
        y = self._new_labels(ids.size)
        new = dict(self.data)
        for i, t in zip(ids.tolist(), y):
            new[i] = (new[i][0], t, new[i][2])
        kw = {}
        if not self.keep_data:
            kw["X"] = self._rows_of(ids)
            if self.task == "regression":
                kw["y_old"] = self._labels_of(ids)
        self._apply(new, lambda: self.model.relabel(ids, y, **kw), "relabel")

    @rule(k=st.integers(1, 4), zero=st.booleans(), scale=st.sampled_from([1.0, 1e-4, 1e4]))
    def reweight(self, k, zero, scale):
        ids = self._pick(k)
        w = self.rng.uniform(0.2, 4.0, size=ids.size) * scale
        self.heavy = self.heavy or scale > 1
        if zero:
            w[0] = 0.0  # weight 0 silences a sample and keeps its id
        new = dict(self.data)
        for i, wi in zip(ids.tolist(), w):
            new[i] = (new[i][0], new[i][1], float(wi))
        kw = {}
        if not self.keep_data:
            kw["X"] = self._rows_of(ids)
            if self.task == "regression":
                kw["y"] = self._labels_of(ids)
        self._apply(new, lambda: self.model.reweight(ids, w, **kw), "reweight")

    @rule(keep=st.integers(0, 1))
    def drop_class(self, keep):
        """Remove every sample of one class but ``keep`` (regression: every sample but
        ``keep``): two classes must remain (and one sample)."""
        ids, _, y, _ = self._arrays(self.data)
        if self.task != "regression":
            ids = ids[y == self.rng.choice(np.unique(y))]
        gone = ids[keep:]
        new = {i: v for i, v in self.data.items() if i not in set(gone.tolist())}
        kw = {}
        if not self.keep_data:
            kw["X"] = self._rows_of(gone)
            if self.task == "regression":
                kw["y"] = self._labels_of(gone)
        self._apply(
            new, lambda: self.model.remove(gone, **kw), "drop class", invalid=gone.size == 0
        )  # no id: refused

    @rule()
    def silence_class(self):
        """Weight 0 for every sample of one class (regression: every sample)."""
        ids, _, y, _ = self._arrays(self.data)
        if self.task != "regression":
            ids = ids[y == self.rng.choice(np.unique(y))]
        new = dict(self.data)
        for i in ids.tolist():
            new[i] = (new[i][0], new[i][1], 0.0)
        kw = {}
        if not self.keep_data:
            kw["X"] = self._rows_of(ids)
            if self.task == "regression":
                kw["y"] = self._labels_of(ids)
        self._apply(new, lambda: self.model.reweight(ids, 0.0, **kw), "silence class")

    @rule(
        n_add=st.integers(0, 3),
        n_rem=st.integers(0, 3),
        n_rel=st.integers(0, 2),
        n_rw=st.integers(0, 2),
    )
    def mixed_update(self, n_add, n_rem, n_rel, n_rw):
        """One ``update`` transaction mixing the four changes (distinct samples)."""
        touched = self._pick(n_rem + n_rel + n_rw)
        rem, rel, rw = np.split(
            touched, [min(n_rem, touched.size), min(n_rem + n_rel, touched.size)]
        )
        rows = self._take_pool(n_add)
        y_add = self.y_all[rows]
        y_rel = self._new_labels(rel.size)
        w_rw = self.rng.uniform(0.2, 4.0, size=rw.size)
        new = {i: v for i, v in self.data.items() if i not in set(rem.tolist())}
        for i, t in zip(rel.tolist(), y_rel):
            new[i] = (new[i][0], t, new[i][2])
        for i, wi in zip(rw.tolist(), w_rw):
            new[i] = (new[i][0], new[i][1], float(wi))
        for j, r in enumerate(rows):
            new[self.next_id + j] = (r, self.y_all[r], 1.0)
        if not (n_add or touched.size):  # an empty update is refused
            self._apply(self.data, lambda: self.model.update(), "empty update", invalid=True)
            return
        kw = dict(
            X_add=self._X(rows) if rows else None,
            y_add=y_add if rows else None,
            remove_ids=rem if rem.size else None,
            relabel_ids=rel if rel.size else None,
            y_relabel=y_rel if rel.size else None,
            reweight_ids=rw if rw.size else None,
            reweight_weight=w_rw if rw.size else None,
        )
        if not self.keep_data:
            reg = self.task == "regression"
            if rem.size:
                kw.update(
                    X_remove=self._rows_of(rem), y_remove=self._labels_of(rem) if reg else None
                )
            if rel.size:
                kw.update(
                    X_relabel=self._rows_of(rel),
                    y_relabel_old=self._labels_of(rel) if reg else None,
                )
            if rw.size:
                kw.update(
                    X_reweight=self._rows_of(rw), y_reweight=self._labels_of(rw) if reg else None
                )
        ids = self._apply(new, lambda: self.model.update(**kw), "update")
        if ids is not None:
            np.testing.assert_array_equal(ids, np.arange(self.next_id, self.next_id + len(rows)))
            self.next_id += len(rows)

    # ------------------------------------------------------------------ invalid steps
    @rule(
        kind=st.sampled_from(
            [
                "unknown_id",
                "repeated_id",
                "nan_row",
                "wrong_width",
                "unknown_class",
                "negative_weight",
                "nan_weight",
                "length_mismatch",
                "remove_all",
                "none_label",
                "renamed_columns",
            ]
        )
    )
    def invalid(self, kind):
        ids = self._pick(2)
        i = int(ids[0])
        m = self.model
        reg = self.task == "regression"
        row_kw = lambda sel: {} if self.keep_data else {"X": self._rows_of(sel)}  # noqa: E731
        if kind == "unknown_id":
            bad = np.array([self.next_id + 1000])
            call = lambda: m.remove(bad)  # noqa: E731
            if not self.keep_data:
                call = lambda: m.remove(bad, X=self._rows_of([i]))  # noqa: E731
        elif kind == "repeated_id":
            call = lambda: m.relabel([i, i], self._labels_of([i, i]), **row_kw([i, i]))  # noqa
        elif kind in ("nan_row", "wrong_width"):
            X = self.X_all[self.pool[-1:] or self.probe[:1]].copy()
            if kind == "nan_row":
                X[0, 1] = np.nan
            else:
                X = np.hstack([X, X[:, :1]])
            if self.frame:
                X = pd.DataFrame(X, columns=COLUMNS + ["extra"] * (X.shape[1] - len(COLUMNS)))
            X = sp.csr_matrix(X) if self.sparse else X
            call = lambda: m.add(X, self.y_all[:1])  # noqa: E731
        elif kind == "unknown_class":
            if reg:
                bad_y = np.array([np.nan])  # a regressor's target must be finite
            else:
                bad_y = np.array(["merlot"] if self.y_all.dtype.kind == "U" else [7])
            call = lambda: m.relabel([i], bad_y, **row_kw([i]))  # noqa: E731
        elif kind in ("negative_weight", "nan_weight"):
            w = -1.0 if kind == "negative_weight" else np.nan
            kw = row_kw([i])
            if not self.keep_data and reg:
                kw["y"] = self._labels_of([i])
            call = lambda: m.reweight([i], [w], **kw)  # noqa: E731
        elif kind == "none_label":
            rows = self.pool[-2:] if len(self.pool) >= 2 else list(self.probe[:2])
            call = lambda: m.add(self._X(rows), [None] * len(rows))  # noqa: E731
        elif kind == "renamed_columns":
            if not self.frame:
                return
            rows = self.pool[-2:] if len(self.pool) >= 2 else list(self.probe[:2])
            X = pd.DataFrame(self.X_all[rows], columns=COLUMNS[::-1])
            call = lambda: m.add(X, self.y_all[rows])  # noqa: E731
        elif kind == "length_mismatch":
            rows = self.pool[-2:] if len(self.pool) >= 2 else list(self.probe[:2])
            call = lambda: m.add(self._X(rows), self.y_all[rows][:1])  # noqa: E731
        else:  # remove every sample: a model needs at least one
            every = np.array(sorted(self.data))
            if self.keep_data:
                call = lambda: m.remove(every)  # noqa: E731
            else:
                y = self._labels_of(every) if reg else None
                call = lambda: m.remove(every, X=self._rows_of(every), y=y)  # noqa: E731
        self._apply(self.data, call, kind, invalid=True)

    # ------------------------------------------------------------------ save and load
    @rule()
    def save_and_load(self):
        before = self._snapshot()
        with tempfile.TemporaryDirectory() as tmp:
            path = os.path.join(tmp, "model.npz")
            df.save(self.model, path)
            loaded = df.load(path)
        self.model = loaded
        self._assert_unchanged(before, "save/load")

    # ------------------------------------------------------------------ what-if
    @rule(
        op=st.sampled_from(["remove", "add", "relabel", "reweight", "remove_add"]),
        k=st.integers(1, 3),
    )
    def what_if(self, op, k):
        before = self._snapshot()
        if self.loss == "hinge" and self.task != "regression":
            with pytest.raises(ValueError):  # the bounds need a differentiable loss
                df.sensitivity(self.model)
            self._assert_unchanged(before, "what-if refused")
            return
        s = df.sensitivity(self.model)
        new = dict(self.data)
        reg = self.task == "regression"
        kw = lambda sel: {} if self.keep_data else {"X": self._rows_of(sel)}  # noqa: E731
        try:
            if op in ("remove", "remove_add"):
                ids = self._pick(k)
                for i in ids.tolist():
                    del new[i]
                extra = {"y": self._labels_of(ids)} if reg and not self.keep_data else {}
                s.remove(ids, **kw(ids), **extra)
            if op in ("add", "remove_add"):
                rows = self._take_pool(k)
                w = self.rng.uniform(0.3, 3.0, size=k) if self.weighted else None
                hyp = (
                    s.add(self._X(rows), self.y_all[rows])
                    if w is None
                    else s.add(self._X(rows), self.y_all[rows], sample_weight=w)
                )
                for j, (h, r) in enumerate(zip(np.asarray(hyp).tolist(), rows)):
                    new[h] = (r, self.y_all[r], 1.0 if w is None else float(w[j]))
            if op == "relabel":
                ids = self._pick(k)
                y = self._new_labels(ids.size)
                for i, t in zip(ids.tolist(), y):
                    new[i] = (new[i][0], t, new[i][2])
                extra = {"y_old": self._labels_of(ids)} if reg and not self.keep_data else {}
                s.relabel(ids, y, **kw(ids), **extra)
            if op == "reweight":
                ids = self._pick(k)
                w = self.rng.uniform(0.2, 4.0, size=ids.size)
                for i, wi in zip(ids.tolist(), w):
                    new[i] = (new[i][0], new[i][1], float(wi))
                extra = {"y": self._labels_of(ids)} if reg and not self.keep_data else {}
                s.reweight(ids, w, **kw(ids), **extra)
        except ValueError:
            # a what-if may refuse a change that fit refuses (e.g. no sample left); a change
            # fit accepts must be accepted
            assert isinstance(self._fit_fresh(new), ValueError), ("what-if refused", op)
            self._assert_unchanged(before, "what-if refused")
            return
        fresh = self._fit_fresh(new)
        if isinstance(fresh, ValueError):
            self._assert_unchanged(before, "what-if")
            return
        Q = self._X(self.probe)
        Qt = self._transform(Q)
        lo, hi = s.decision_bounds(Q)
        f = _decision(fresh, Qt)
        # the bounds hold for the exact optimum; the refit is within ‖φ‖·grad_norm_ of it
        slack = _phi_norm(self.final, Qt) * fresh.grad_norm_ * (1 + 1e-9)
        if f.ndim == 2:
            slack = slack[:, None]
        slack = slack + ROUND * max(1.0, float(np.max(np.abs(f))))
        assert np.all(lo - slack <= f) and np.all(f <= hi + slack), (
            "decision bounds",
            op,
            float(np.max(lo - f)),
            float(np.max(f - hi)),
        )
        if not self.kernel and not self.pipeline:
            clo, chi = s.coef_bounds()
            cs = fresh.grad_norm_ * (1 + 1e-9) + ROUND * max(1.0, np.abs(fresh.coef_).max())
            assert np.all(clo - cs <= fresh.coef_) and np.all(fresh.coef_ <= chi + cs), (
                "coef bounds",
                op,
            )
        self._assert_unchanged(before, "what-if")

    # ------------------------------------------------------------------ the invariant
    @invariant()
    def equals_fresh_fit(self):
        if not hasattr(self, "data"):
            return
        ids, rows, _, w = self._arrays(self.data)
        np.testing.assert_array_equal(self.final.sample_ids_, ids)
        sw = getattr(self.final, "sample_weight_", None)
        if sw is not None:
            np.testing.assert_array_equal(np.broadcast_to(sw, w.shape), w)
        fresh = self._fresh if self._fresh is not None else self._fit_fresh(self.data)
        self._fresh = None
        assert not isinstance(fresh, ValueError), fresh  # the model holds data fit accepts
        X = self._X(np.concatenate([rows, self.probe]))
        Xt = self._transform(X)
        f_upd, f_new = _decision(self.model, X), _decision(fresh, Xt)
        if self.loss == "squared" or self.task == "regression":
            scale = max(1.0, float(np.max(np.abs(f_new))))
            err = float(np.max(np.abs(f_upd - f_new))) / scale
            assert err < SQ_TOL, err
        else:
            radius = self.final.grad_norm_ + fresh.grad_norm_
            phi = _phi_norm(self.final, Xt)
            _within(f_upd, f_new, radius, phi, "fresh fit")
            if self.loss != "hinge":  # converged: ‖∇J‖ ≤ tol ‖∇J(0)‖, ‖∇J(0)‖ ≤ 2 C Σ w ‖φ‖
                f = self.final
                grad0 = 2.0 * f.C * float(w @ phi[: w.size])
                assert f.grad_norm_ <= 10 * f.tol * grad0, (f.grad_norm_, f.tol * grad0)


_COMMON = dict(deadline=None, suppress_health_check=list(HealthCheck), database=None)

TestShort = UpdateMachine.TestCase
TestShort.settings = settings(
    max_examples=examples(25), stateful_step_count=12, derandomize=True, **_COMMON
)


class _Long(UpdateMachine):
    pass


@pytest.mark.slow
class TestLong(_Long.TestCase):
    settings = settings(max_examples=120, stateful_step_count=25, derandomize=True, **_COMMON)
