"""Sparse input (scipy.sparse CSR / CSC matrices and the sparse arrays) for the linear models:
every operation on sparse X equals the same operation on the dense X (squared loss to 1e-10,
Newton to 1e-8), the rows stay sparse in the ledger, and what is not supported yet is refused
with a clear error, leaving the model unchanged."""

from __future__ import annotations

import json

import numpy as np
import pytest
import scipy.sparse as sp
from sklearn.feature_extraction.text import TfidfVectorizer
from sklearn.kernel_approximation import Nystroem

import deltafit
from deltafit import LinearClassifier, LinearRegressor
from deltafit._ledger import Ledger, SparseRows
from deltafit.datasets import load_breast_cancer
from deltafit.model_selection import loo
from deltafit.utils._validation import SparseDataError

FORMATS = [
    pytest.param(sp.csr_matrix, id="csr"),
    pytest.param(sp.csc_matrix, id="csc"),
    pytest.param(sp.csr_array, id="csr_array"),
    pytest.param(sp.coo_array, id="coo"),
]
TOL = {"squared": 1e-10, "logistic": 1e-8, "squared_hinge": 1e-8, "hinge": 1e-8}


@pytest.fixture(scope="module")
def cancer():
    X, y = load_breast_cancer()
    X = X.copy()
    X[np.abs(X) < 0.5] = 0.0  # some zeros, so that the sparse rows are sparse
    return X, y


def _corpus(n_docs=240, seed=0):
    """Generated documents of three topics (their class) and their TF-IDF matrix."""
    rng = np.random.default_rng(seed)
    common = [f"w{i}" for i in range(150)]
    topics = [[f"t{k}_{i}" for i in range(40)] for k in range(3)]
    docs, labels = [], []
    for d in range(n_docs):
        k = d % 3
        words = list(rng.choice(common, rng.integers(8, 20))) + list(
            rng.choice(topics[k], rng.integers(2, 6))
        )
        docs.append(" ".join(words))
        labels.append(k)
    X = TfidfVectorizer().fit_transform(docs)
    return sp.csr_matrix(X), np.asarray(labels)


@pytest.fixture(scope="module")
def tfidf():
    return _corpus()


def _close(a, b, tol):
    a, b = np.asarray(a), np.asarray(b)
    scale = max(1.0, float(np.max(np.abs(a), initial=0.0)))
    assert a.shape == b.shape
    err = float(np.max(np.abs(a - b), initial=0.0))
    assert err <= tol * scale, f"sparse differs from dense by {err:.3e}"


def _same_model(md, ms, X, tol):
    _close(md.coef_, ms.coef_, tol)
    _close(md.intercept_, ms.intercept_, tol)
    assert np.array_equal(md.sample_ids_, ms.sample_ids_)
    Xs = sp.csr_matrix(X)
    if hasattr(md, "decision_function"):
        _close(md.decision_function(X), ms.decision_function(Xs), tol)
    _close(md.predict(X), ms.predict(Xs), tol)


def _updates(md, ms, X, y, fmt, keep_data=True, regressor=False):
    """The same update sequence on the dense and the sparse model."""
    n0 = 300
    for m, conv in ((md, np.asarray), (ms, fmt)):
        m.add(conv(X[n0 : n0 + 40]), y[n0 : n0 + 40], sample_weight=np.linspace(0.5, 2.0, 40))
        if keep_data:
            m.remove([1, 5, 7])
            m.relabel([10, 11], y[[12, 13]])
            m.reweight([20, 21], [2.5, 0.0])
            m.update(
                X_add=conv(X[n0 + 40 : n0 + 45]),
                y_add=y[n0 + 40 : n0 + 45],
                remove_ids=[2, 3],
                relabel_ids=[30],
                y_relabel=y[[31]],
            )
        else:
            m.remove([1, 5], X=conv(X[[1, 5]]), y=y[[1, 5]] if regressor else None)
            m.remove(X=conv(X[[7]]), y=y[[7]])
            m.relabel([10], y[[12]], X=conv(X[[10]]), y_old=y[[10]] if regressor else None)
            m.reweight([20], [2.5], X=conv(X[[20]]), y=y[[20]] if regressor else None)


@pytest.mark.parametrize("fmt", FORMATS)
@pytest.mark.parametrize("loss", ["squared", "logistic", "squared_hinge", "hinge"])
def test_classifier_fit_and_updates_equal_dense(cancer, fmt, loss):
    X, y = cancer
    md = LinearClassifier(loss=loss, C=0.3).fit(X[:300], y[:300])
    ms = LinearClassifier(loss=loss, C=0.3).fit(fmt(X[:300]), y[:300])
    assert isinstance(ms._ledger.X, SparseRows)
    assert ms.__sklearn_tags__().input_tags.sparse
    _same_model(md, ms, X, TOL[loss])
    _updates(md, ms, X, y, fmt)
    _same_model(md, ms, X, TOL[loss])
    # the rows are kept sparse: O(nnz), not O(n p)
    led = ms._ledger
    stored = led.X[led.active_slots()]
    dense_rows = md._ledger.X[md._ledger.active_slots()]
    assert sp.issparse(stored) and stored.nnz == np.count_nonzero(dense_rows)
    assert np.array_equal(stored.toarray(), dense_rows)


@pytest.mark.parametrize("weighted", [False, True])
def test_regressor_and_multi_output_equal_dense(cancer, weighted):
    X, y = cancer
    yr = X[:, 0] * 0.05 + y
    Y = np.column_stack([yr, 1.0 - 2.0 * yr])
    w = np.linspace(0.2, 3.0, 300) if weighted else None
    for target in (yr, Y):
        md = LinearRegressor(C=2.0).fit(X[:300], target[:300], sample_weight=w)
        ms = LinearRegressor(C=2.0).fit(sp.csr_matrix(X[:300]), target[:300], sample_weight=w)
        _same_model(md, ms, X, 1e-10)
        _updates(md, ms, X, target, sp.csr_matrix)
        _same_model(md, ms, X, 1e-10)


@pytest.mark.parametrize("loss", ["squared", "logistic", "hinge"])
def test_multiclass_tfidf_equals_dense(tfidf, loss):
    """A real TF-IDF matrix (generated documents of three topics), one-vs-rest."""
    Xs, y = tfidf
    Xd = Xs.toarray()
    w = np.linspace(0.5, 1.5, 200)
    md = LinearClassifier(loss=loss, C=5.0).fit(Xd[:200], y[:200], sample_weight=w)
    ms = LinearClassifier(loss=loss, C=5.0).fit(Xs[:200], y[:200], sample_weight=w)
    _same_model(md, ms, Xd, TOL[loss])
    for m, X in ((md, Xd), (ms, Xs)):
        m.add(X[200:230], y[200:230])
        m.remove([0, 4, 9])
        m.relabel([11], [(y[11] + 1) % 3])
    _same_model(md, ms, Xd, TOL[loss])
    assert ms._ledger.X[ms._ledger.active_slots()].nnz < 0.5 * Xd.size


@pytest.mark.parametrize("regressor", [False, True])
def test_keep_data_false_takes_sparse_rows(cancer, regressor):
    X, y = cancer
    t = X[:, 0] * 0.05 + y if regressor else y
    make = LinearRegressor if regressor else LinearClassifier
    md = make(keep_data=False).fit(X[:300], t[:300])
    ms = make(keep_data=False).fit(sp.csr_matrix(X[:300]), t[:300])
    _updates(md, ms, X, t, sp.csr_matrix, keep_data=False, regressor=regressor)
    _same_model(md, ms, X, 1e-10)
    # dense rows given to a model fitted on sparse X are recognised too
    ms.remove([40], X=X[[40]], y=t[[40]] if regressor else None)
    md.remove([40], X=X[[40]], y=t[[40]] if regressor else None)
    _same_model(md, ms, X, 1e-10)
    with pytest.raises(ValueError, match="not"):
        ms.remove([41], X=sp.csr_matrix(X[[42]]), y=t[[41]] if regressor else None)


def test_dense_model_takes_sparse_updates_and_sparse_model_dense_ones(cancer):
    X, y = cancer
    a = LinearClassifier(loss="logistic").fit(X[:300], y[:300])
    b = LinearClassifier(loss="logistic").fit(sp.csr_matrix(X[:300]), y[:300])
    a.add(sp.csr_matrix(X[300:320]), y[300:320])
    b.add(X[300:320], y[300:320])
    assert isinstance(a._ledger.X, np.ndarray) and isinstance(b._ledger.X, SparseRows)
    _same_model(a, b, X, 1e-8)
    _close(a.predict_proba(sp.csc_matrix(X)), b.predict_proba(X), 1e-8)


def test_feature_map_on_sparse_input(cancer):
    """A map whose output is dense (Nystroem) makes dense features: the ledger is dense."""
    X, y = cancer
    fm = Nystroem(n_components=20, random_state=0)
    md = LinearClassifier(feature_map=fm).fit(X[:300], y[:300])
    ms = LinearClassifier(feature_map=fm).fit(sp.csr_matrix(X[:300]), y[:300])
    assert isinstance(ms._ledger.X, np.ndarray)
    for m, conv in ((md, np.asarray), (ms, sp.csr_matrix)):
        m.add(conv(X[300:310]), y[300:310])
        m.remove([0, 1])
    _same_model(md, ms, X, 1e-10)


def test_hessian_free_newton_equals_dense(cancer, monkeypatch):
    """Beyond HESSIAN_FREE_FEATURES features sparse Newton steps are conjugate gradients on
    Hessian-vector products: the same solution."""
    from deltafit.solvers import _newton as solvers  # newton_primal reads the threshold there

    X, y = cancer
    md = LinearClassifier(loss="logistic", C=2.0).fit(X[:300], y[:300])
    monkeypatch.setattr(solvers, "HESSIAN_FREE_FEATURES", 5)
    for loss in ("logistic", "squared_hinge"):
        md = LinearClassifier(loss=loss, C=2.0).fit(X[:300], y[:300])
        ms = LinearClassifier(loss=loss, C=2.0).fit(sp.csr_matrix(X[:300]), y[:300])
        _same_model(md, ms, X, 1e-8)
        assert ms.grad_norm_ <= 1e-10 * 1e3  # the same stopping rule on ‖∇J‖
        for m, conv in ((md, np.asarray), (ms, sp.csr_matrix)):
            m.add(conv(X[300:320]), y[300:320])
            m.remove([3, 4])
        _same_model(md, ms, X, 1e-8)


def test_cg_step_solves_the_newton_system():
    from deltafit.solvers._newton import _cg_step

    rng = np.random.default_rng(3)
    Xa = sp.random(60, 30, density=0.2, random_state=4, format="csr")
    D = rng.uniform(0.1, 2.0, 60)
    g = rng.normal(size=30)
    H = np.eye(30) + (Xa.T @ sp.diags(D) @ Xa).toarray()
    step = _cg_step(Xa, D, g)
    exact = -np.linalg.solve(H, g)
    # a truncated step: residual within min(0.1, √‖g‖)·‖g‖, and a descent direction
    assert np.linalg.norm(H @ step + g) <= min(0.1, np.sqrt(np.linalg.norm(g))) * np.linalg.norm(
        g
    ) * (1 + 1e-12)
    assert step @ g < 0
    assert np.linalg.norm(step - exact) < 0.2 * np.linalg.norm(exact)


def test_bad_sparse_input_is_refused_and_leaves_the_model_unchanged(cancer):
    X, y = cancer
    m = LinearClassifier(loss="logistic").fit(sp.csr_matrix(X[:300]), y[:300])
    before = (m.coef_.copy(), m.sample_ids_.copy())
    bad = sp.csr_matrix(X[300:302])
    bad.data[0] = np.nan
    with pytest.raises(ValueError, match="NaN"):
        m.add(bad, y[300:302])
    with pytest.raises(ValueError, match="features"):
        m.add(sp.csr_matrix(X[300:302, :5]), y[300:302])
    with pytest.raises(ValueError, match="(?i)complex"):
        m.add(sp.csr_matrix(X[300:302] + 1j), y[300:302])
    with pytest.raises(ValueError, match="(?i)complex"):
        LinearClassifier().fit(sp.csr_matrix(X[:30] + 0j), y[:30])
    with pytest.raises(ValueError, match="empty"):
        m.add(sp.csr_matrix((0, X.shape[1])), y[:0])
    with pytest.raises(ValueError, match="NaN|infinity"):
        m.predict(bad)
    assert np.array_equal(before[0], m.coef_) and np.array_equal(before[1], m.sample_ids_)


@pytest.mark.parametrize("C", [0.01, 1.0, 100.0])
def test_hinge_dual_qp_on_sparse_rows_equals_dense(cancer, C):
    """The L1-SVM's dual QP over sparse rows (coordinate steps on sparse row products, face
    solves on the densified free rows): the dense model's solution and dual variables, and
    its approximate LOO."""
    X, y = cancer
    w = np.linspace(0.5, 1.5, 300)
    md = LinearClassifier(loss="hinge", C=C).fit(X[:300], y[:300], sample_weight=w)
    ms = LinearClassifier(loss="hinge", C=C).fit(sp.csr_matrix(X[:300]), y[:300], sample_weight=w)
    assert ms._state.result.kkt_violation <= 1e-10
    _updates(md, ms, X, y, sp.csr_matrix)
    _same_model(md, ms, X, 1e-8)
    _close(md.dual_coef_, ms.dual_coef_, 1e-8)
    from deltafit.model_selection import alo

    a = alo(LinearClassifier(loss="hinge", C=C), X[:200], y[:200])
    b = alo(LinearClassifier(loss="hinge", C=C), sp.csr_matrix(X[:200]), y[:200])
    assert np.array_equal(a.y_pred, b.y_pred)


def test_an_interrupted_update_restores_the_sparse_model(cancer, monkeypatch):
    """An exception inside the numerical work: the ledger's sparse rows are rolled back and
    the state rebuilt from them; the model is as before."""
    X, y = cancer
    m = LinearClassifier(loss="logistic").fit(sp.csr_matrix(X[:300]), y[:300])
    m.remove([0, 1, 2])
    coef, ids = m.coef_.copy(), m.sample_ids_.copy()
    st = type(m._state)

    def boom(self, change):
        raise KeyboardInterrupt

    monkeypatch.setattr(st, "apply_change", boom)
    with pytest.raises(KeyboardInterrupt):
        m.update(X_add=sp.csr_matrix(X[300:310]), y_add=y[300:310], remove_ids=[5, 6])
    monkeypatch.undo()
    assert np.array_equal(ids, m.sample_ids_)
    _close(coef, m.coef_, 1e-8)
    fresh = LinearClassifier(loss="logistic").fit(
        np.delete(X[:300], [0, 1, 2], axis=0), np.delete(y[:300], [0, 1, 2])
    )
    _close(fresh.coef_, m.coef_, 1e-8)


def test_sparse_rows_store_journal_grow_and_compact():
    rng = np.random.default_rng(0)
    R = sp.random(40, 12, density=0.3, random_state=1, format="csr")
    led = Ledger(12, capacity=4, growth=1.5, sparse_rows=True)
    led.insert(led.allocate(30), R[:30], rng.normal(size=30))
    assert np.array_equal(led.X[led.active_slots()].toarray(), R[:30].toarray())
    led.begin()
    led.delete(np.array([1, 2, 3]))
    led.insert(led.allocate(10), R[30:], rng.normal(size=10))  # grows
    keep = led.compact()
    assert keep.size == 37
    led.rollback()
    assert np.array_equal(led.X[led.active_slots()].toarray(), R[:30].toarray())
    assert led.X.nnz == R[:30].nnz  # O(nnz): nothing stored for empty slots
    led.begin()
    led.delete(np.array([0]))
    led.commit()
    assert np.array_equal(led.X[led.active_slots()].toarray(), R[1:30].toarray())
    with pytest.raises(ValueError, match="width"):
        led.X[np.array([0])] = sp.csr_matrix((1, 5))


# ---------------------------------------------------------------------------- persistence
SAVED = [
    pytest.param(lambda: LinearClassifier(loss="squared", C=0.5), id="squared"),
    pytest.param(lambda: LinearClassifier(loss="logistic"), id="logistic"),
    pytest.param(lambda: LinearClassifier(loss="squared_hinge"), id="squared_hinge"),
    pytest.param(lambda: LinearRegressor(keep_data=False), id="regressor-nodata"),
    pytest.param(lambda: LinearRegressor(), id="regressor"),
]


@pytest.mark.parametrize("make", SAVED)
def test_sparse_model_round_trip_is_bitwise(cancer, tfidf, make, tmp_path):
    X, y = cancer
    m = make()
    t = X[:, 0] * 0.05 + y if isinstance(m, LinearRegressor) else y
    m.fit(sp.csr_matrix(X[:300]), t[:300], sample_weight=np.linspace(0.5, 1.5, 300))
    nodata = not m.keep_data
    if nodata:
        m.remove([3], X=sp.csr_matrix(X[[3]]), y=t[[3]])
    else:
        m.remove([3, 4])
    path = tmp_path / "m.npz"
    deltafit.save(m, path)
    with np.load(path, allow_pickle=False) as z:
        assert ("ledger_X_data" in z.files) == (not nodata) and "ledger_X" not in z.files
    m2 = deltafit.load(path)
    assert np.array_equal(m.coef_, m2.coef_) and np.array_equal(m.intercept_, m2.intercept_)
    assert np.array_equal(m.sample_ids_, m2.sample_ids_)
    if not nodata:
        a, b = m._ledger, m2._ledger
        ra, rb = a.X[a.active_slots()], b.X[b.active_slots()]
        assert isinstance(b.X, SparseRows)
        for part in ("indptr", "indices", "data"):
            assert np.array_equal(getattr(ra, part), getattr(rb, part))
    # the loaded model keeps updating exactly as the original
    for mm in (m, m2):
        mm.add(sp.csr_matrix(X[300:310]), t[300:310])
        if nodata:
            mm.remove([5], X=X[[5]], y=t[[5]])
        else:
            mm.remove([5])
    _close(m.coef_, m2.coef_, 1e-10)  # (as for dense models: the saved state is folded)


@pytest.fixture(scope="module")
def saved_sparse(tmp_path_factory, cancer):
    X, y = cancer
    m = LinearClassifier(loss="logistic").fit(sp.csr_matrix(X[:60]), y[:60])
    path = tmp_path_factory.mktemp("saved") / "model.npz"
    deltafit.save(m, path)
    with np.load(path, allow_pickle=False) as z:
        return {k: z[k] for k in z.files}


def _corrupted(tmp_path, arrays, change):
    arrays = {k: v.copy() for k, v in arrays.items()}
    change(arrays)
    out = tmp_path / "bad.npz"
    np.savez(out, **arrays)
    return out


def _set_meta(key, value):
    def change(arrays):
        meta = json.loads(arrays["__meta__"].tobytes().decode("utf-8"))
        meta[key] = value
        arrays["__meta__"] = np.frombuffer(json.dumps(meta).encode("utf-8"), dtype=np.uint8)

    return change


def _swap_first_two_indices(arrays):
    ind, ptr = arrays["ledger_X_indices"], arrays["ledger_X_indptr"]
    a = int(ptr[0])
    ind[a], ind[a + 1] = ind[a + 1], ind[a]


def _shift_indptr(arrays):
    arrays["ledger_X_indptr"][3] = arrays["ledger_X_indptr"][5] + 1


CORRUPTIONS = {
    "index out of range": (lambda a: a["ledger_X_indices"].__setitem__(0, 10_000), "out of range"),
    "negative index": (lambda a: a["ledger_X_indices"].__setitem__(0, -1), "out of range"),
    "unsorted indices": (_swap_first_two_indices, "sorted"),
    "indptr decreasing": (_shift_indptr, "index pointer"),
    "indptr end": (lambda a: a["ledger_X_indptr"].__setitem__(-1, 3), "index pointer"),
    "nan value": (lambda a: a["ledger_X_data"].__setitem__(0, np.nan), "NaN"),
    "stored zero": (lambda a: a["ledger_X_data"].__setitem__(0, 0.0), "zeros|solve"),
    "changed value": (lambda a: a["ledger_X_data"].__setitem__(0, 7.0), "solve"),
    "data too long": (lambda a: a.__setitem__("ledger_X_data", np.ones(10**6)), "shape"),
    "indices float": (
        lambda a: a.__setitem__("ledger_X_indices", a["ledger_X_indices"].astype(float)),
        "int64",
    ),
    "missing data": (lambda a: a.pop("ledger_X_data"), "missing"),
    "dense member too": (lambda a: a.__setitem__("ledger_X", np.zeros((60, 31))), "unknown"),
    "flag off": (_set_meta("sparse_rows", False), "sparse_input"),
    "flag not bool": (_set_meta("sparse_rows", 1), "sparse_rows"),
    "flag without input": (_set_meta("sparse_input", False), "sparse_rows"),
}


@pytest.mark.parametrize("name", list(CORRUPTIONS))
def test_corrupt_sparse_rows_are_refused(tmp_path, saved_sparse, name):
    change, message = CORRUPTIONS[name]
    with pytest.raises(ValueError, match=message):
        deltafit.load(_corrupted(tmp_path, saved_sparse, change))


def test_unmodified_sparse_file_loads(tmp_path, saved_sparse):
    m = deltafit.load(_corrupted(tmp_path, saved_sparse, lambda a: None))
    assert isinstance(m._ledger.X, SparseRows)


# ---------------------------------------------------------------------------- kernel models
KERNELS = ["rbf", "linear", "poly", "sigmoid", "cosine", "laplacian"]


@pytest.mark.parametrize("kernel", KERNELS)
@pytest.mark.parametrize("loss", ["squared", "logistic", "hinge"])
def test_kernel_classifier_on_sparse_rows_equals_dense(cancer, kernel, loss):
    X, y = cancer
    kw = dict(kernel=kernel, loss=loss, C=0.5, gamma=0.01 if kernel == "sigmoid" else "scale")
    w = np.linspace(0.5, 1.5, 200)
    md = deltafit.KernelClassifier(**kw).fit(X[:200], y[:200], sample_weight=w)
    ms = deltafit.KernelClassifier(**kw).fit(sp.csc_matrix(X[:200]), y[:200], sample_weight=w)
    assert isinstance(ms._ledger.X, SparseRows) and ms.__sklearn_tags__().input_tags.sparse
    _close(md.gamma_, ms.gamma_, 1e-14)
    for m, conv in ((md, np.asarray), (ms, sp.csr_matrix)):
        m.add(conv(X[200:220]), y[200:220])
        m.remove([1, 2, 30])
        m.relabel([5], [1 - y[5]])
    tol = 1e-10 if loss == "squared" else 1e-8
    _close(md.dual_coef_, ms.dual_coef_, tol)
    _close(md.decision_function(X), ms.decision_function(sp.csr_matrix(X)), tol)
    assert np.array_equal(md.X_fit_, ms.X_fit_.toarray())


def test_kernel_regressor_multi_output_and_persistence(cancer, tmp_path):
    X, y = cancer
    Y = np.column_stack([X[:, 0] * 0.1 + y, y - 0.5])
    md = deltafit.KernelRegressor(C=3.0).fit(X[:200], Y[:200])
    ms = deltafit.KernelRegressor(C=3.0).fit(sp.csr_array(X[:200]), Y[:200])
    for m, conv in ((md, np.asarray), (ms, sp.csr_matrix)):
        m.add(conv(X[200:210]), Y[200:210])
        m.remove([0, 7])
    _close(md.dual_coef_, ms.dual_coef_, 1e-10)
    deltafit.save(ms, tmp_path / "k.npz")
    m2 = deltafit.load(tmp_path / "k.npz")
    assert np.array_equal(m2.dual_coef_, ms.dual_coef_)
    assert np.array_equal(m2.predict(X), ms.predict(X))
    for m in (ms, m2):
        m.add(sp.csr_matrix(X[210:215]), Y[210:215])
    _close(ms.dual_coef_, m2.dual_coef_, 1e-10)


def test_kernel_without_sparse_support_is_refused(cancer):
    X, y = cancer

    def k(A, B):
        return np.asarray(A) @ np.asarray(B).T

    m = deltafit.KernelClassifier(kernel=k)
    assert not m.__sklearn_tags__().input_tags.sparse
    with pytest.raises(SparseDataError, match="callable kernel"):
        m.fit(sp.csr_matrix(X[:50]), y[:50])


def test_sensitivity_of_a_model_that_keeps_no_rows_fitted_on_sparse_x(cancer):
    """Without stored rows the fitted-problem view holds no sparse matrix: the bounds of a
    keep_data=False model fitted on sparse X are those of the dense twin (rows given dense
    or sparse-recognised by their digests)."""
    X, y = cancer
    t = X[:, 0] * 0.05 + y
    md = LinearRegressor(keep_data=False).fit(X[:300], t[:300])
    ms = LinearRegressor(keep_data=False).fit(sp.csr_matrix(X[:300]), t[:300])
    sd, ss = deltafit.sensitivity(md), deltafit.sensitivity(ms)
    sd.remove([3, 4], X=X[[3, 4]], y=t[[3, 4]])
    ss.remove([3, 4], X=X[[3, 4]], y=t[[3, 4]])
    for a, b in zip(sd.decision_bounds(X[300:]), ss.decision_bounds(X[300:])):
        _close(a, b, 1e-10)


# ----------------------------------------------------------------- sensitivity and LOO
@pytest.mark.parametrize("loss", ["squared", "logistic", "squared_hinge"])
def test_sensitivity_bounds_of_sparse_rows_equal_dense(cancer, loss):
    X, y = cancer
    md = LinearClassifier(loss=loss, C=0.1).fit(X[:400], y[:400])
    ms = LinearClassifier(loss=loss, C=0.1).fit(sp.csr_matrix(X[:400]), y[:400])
    sd, ss = deltafit.sensitivity(md), deltafit.sensitivity(ms)
    sd.remove([1, 2, 3])
    ss.remove([1, 2, 3])
    sd.relabel([7], [1 - y[7]])
    ss.relabel([7], [1 - y[7]])
    sd.add(X[400:410], y[400:410])
    ss.add(sp.csr_matrix(X[400:410]), y[400:410])
    for a, b in zip(sd.decision_bounds(X[410:]), ss.decision_bounds(sp.csc_matrix(X[410:]))):
        _close(a, b, 1e-10)
    prob = ms.problem_
    rows = prob.rows[prob.live[:5]]
    assert isinstance(rows, np.ndarray) and not rows.flags.writeable
    assert np.array_equal(rows, md.problem_.rows[md.problem_.live[:5]])
    _close(prob.gradient(), md.problem_.gradient(), 1e-8)
    _close(prob.hessian(), md.problem_.hessian(), 1e-10)
    for a, b in zip(prob.scores(prob.live), md.problem_.scores(md.problem_.live)):
        _close(a, b, 1e-8)


def test_multiclass_and_kernel_sensitivity_of_sparse_rows(tfidf, cancer):
    Xs, y = tfidf
    Xd = Xs.toarray()
    md = LinearClassifier(C=2.0).fit(Xd[:200], y[:200])
    ms = LinearClassifier(C=2.0).fit(Xs[:200], y[:200])
    sd, ss = deltafit.sensitivity(md), deltafit.sensitivity(ms)
    sd.remove([0, 5])
    ss.remove([0, 5])
    for a, b in zip(sd.decision_bounds(Xd[200:]), ss.decision_bounds(Xs[200:])):
        _close(a, b, 1e-10)
    X, yb = cancer
    kd = deltafit.KernelClassifier(loss="logistic", C=0.5).fit(X[:200], yb[:200])
    ks = deltafit.KernelClassifier(loss="logistic", C=0.5).fit(sp.csr_matrix(X[:200]), yb[:200])
    sd, ss = deltafit.sensitivity(kd), deltafit.sensitivity(ks)
    sd.remove([3])
    ss.remove([3])
    sd.add(X[200:205], yb[200:205])
    ss.add(sp.csr_matrix(X[200:205]), yb[200:205])
    for a, b in zip(sd.decision_bounds(X[205:]), ss.decision_bounds(X[205:])):
        _close(a, b, 1e-8)


@pytest.mark.parametrize(
    "make",
    [
        pytest.param(lambda: LinearClassifier(C=0.1), id="squared"),
        pytest.param(lambda: LinearClassifier(loss="logistic", C=0.1), id="logistic"),
        pytest.param(lambda: LinearRegressor(C=0.5), id="regressor"),
        pytest.param(lambda: deltafit.KernelClassifier(C=0.5), id="kernel"),
    ],
)
def test_loo_of_sparse_x_equals_dense(cancer, make):
    X, y = cancer
    t = X[:, 0] * 0.05 + y if isinstance(make(), LinearRegressor) else y
    rd = loo(make(), X[:250], t[:250])
    rs = loo(make(), sp.csr_matrix(X[:250]), t[:250])
    assert rd.method == rs.method
    _close(rd.y_pred, rs.y_pred, 1e-10)
    if rd.lower is not None and np.all(np.isfinite(rd.lower)):
        _close(rd.lower, rs.lower, 1e-8)
        _close(rd.upper, rs.upper, 1e-8)


def test_pipeline_with_a_sparse_transformer_keeps_sparse_rows(tmp_path):
    """TfidfTransformer's sparse output goes to the final model as it is: sparse rows in the
    ledger, the same model as the dense twin, saved and loaded with the pipeline."""
    from sklearn.feature_extraction.text import TfidfTransformer

    rng = np.random.default_rng(0)
    counts = rng.poisson(0.3, size=(120, 40)).astype(float)
    y = (counts[:, 0] + counts[:, 1] > counts[:, 2] + counts[:, 3]).astype(int)
    p = deltafit.UpdatablePipeline(
        [("tfidf", TfidfTransformer()), ("clf", LinearClassifier(loss="logistic"))]
    )
    p.fit(counts[:100], y[:100])
    p.add(counts[100:], y[100:])
    p.remove([0, 1])
    assert isinstance(p[-1]._ledger.X, SparseRows)
    Z = TfidfTransformer().fit(counts[:100]).transform(counts[2:]).toarray()
    twin = LinearClassifier(loss="logistic").fit(Z, y[2:])
    _close(p[-1].coef_, twin.coef_, 1e-8)
    deltafit.save(p, tmp_path / "p.npz")
    loaded = deltafit.load(tmp_path / "p.npz")
    assert np.array_equal(loaded.decision_function(counts), p.decision_function(counts))


def test_non_canonical_sparse_input(cancer):
    """Duplicates, stored zeros, unsorted and int64 indices, empty rows: the same model as
    the dense rows they stand for; keep_data=False recognises the rows in any of these forms."""
    X, y = cancer
    X = X[:120].copy()
    X[5] = 0.0  # an empty row
    coo = sp.coo_matrix(X)
    n = coo.nnz
    # every value split in two duplicates, plus stored zeros, in reverse order
    rows = np.concatenate([coo.row, coo.row, [0, 1]])[::-1]
    cols = np.concatenate([coo.col, coo.col, [0, 1]])[::-1]
    vals = np.concatenate([coo.data * 0.25, coo.data * 0.75, [0.0, 0.0]])[::-1]
    messy = sp.csr_matrix((vals, (rows.astype(np.int64), cols.astype(np.int64))), shape=X.shape)
    messy.has_canonical_format = False
    assert messy.nnz >= n
    Xc = sp.csr_matrix(X)
    for make in (lambda: LinearClassifier(loss="logistic"), lambda: LinearClassifier()):
        a, b = make().fit(X, y[:120]), make().fit(messy, y[:120])
        _close(a.coef_, b.coef_, 1e-8)
    m = LinearClassifier(keep_data=False).fit(Xc, y[:120])
    m.remove([5, 7], X=sp.coo_matrix(X[[5, 7]]))  # other format, recognised
    assert m.n_samples_ == 118


def test_sparse_text_parity_with_scikit_learn(tfidf):
    # the sparse TF-IDF matrix straight into scikit-learn's twins, with the intercept as a
    # regularised constant column (their fit_intercept=False on [X, 1]): Ridge (one-hot ±1
    # targets, RidgeClassifier's encoding), one-vs-rest LogisticRegression, LinearSVC
    from sklearn.linear_model import LogisticRegression, RidgeClassifier
    from sklearn.multiclass import OneVsRestClassifier
    from sklearn.svm import LinearSVC

    X, y = tfidf
    Xs = sp.hstack([X, np.ones((X.shape[0], 1))], format="csr")
    C = 2.0
    m = LinearClassifier(C=C).fit(X, y)
    ref = RidgeClassifier(
        alpha=1 / (2 * C), fit_intercept=False, solver="sparse_cg", tol=1e-14, max_iter=100_000
    ).fit(Xs, y)
    _close(m.decision_function(X), ref.decision_function(Xs), 1e-8)
    m = LinearClassifier(loss="logistic", C=C, tol=1e-12).fit(X, y)
    ref = OneVsRestClassifier(
        LogisticRegression(C=C, fit_intercept=False, tol=1e-12, solver="newton-cg", max_iter=1000)
    ).fit(Xs, y)
    _close(m.decision_function(X), ref.decision_function(Xs), 1e-6)
    _close(m.predict_proba(X), ref.predict_proba(Xs), 1e-6)
    m = LinearClassifier(loss="squared_hinge", C=C).fit(X, y)
    ref = OneVsRestClassifier(LinearSVC(C=C, fit_intercept=False, tol=1e-10, max_iter=100_000)).fit(
        Xs, y
    )
    _close(m.decision_function(X), ref.decision_function(Xs), 1e-5)
