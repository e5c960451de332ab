"""Test-side twins for the stream and active learners: the incremental ball from its
definition (Sivan et al. eqs. 4, 9, 10), written with scikit-learn's kernels and the models'
public decision functions only."""

import numpy as np
from sklearn.metrics.pairwise import rbf_kernel

import deltafit as df


def d1(loss, y, z):
    """ℓ'(y, z) with respect to z, written from the losses' definitions."""
    if loss == "squared_hinge":
        return -2.0 * y * np.maximum(0.0, 1.0 - y * z)
    if loss == "logistic":
        return -y / (1.0 + np.exp(y * z))
    return 2.0 * (z - y)  # squared


def kernel_of(model):
    if isinstance(model, (df.KernelClassifier, df.KernelRegressor)):
        s2 = model.intercept_scaling**2 if model.fit_intercept else 0.0
        return lambda A, B: rbf_kernel(A, B, gamma=model.gamma) + s2
    s2 = model.intercept_scaling**2 if model.fit_intercept else 0.0
    return lambda A, B: A @ B.T + s2


def scratch_ball(model, X_add, y_add, X_rem, y_rem, X_query, klass=None):
    """‖r‖ and the centre scores of X_query from the definitions, O((|A|+|R|)²).

    ``klass``: of a multiclass model, the ball of class ``klass``'s one-vs-rest problem
    (targets +1 for that class, −1 for the others; its column of ``decision_function``)."""
    k = kernel_of(model)
    if klass is not None:

        def enc(t):
            return np.where(t == model.classes_[klass], 1.0, -1.0)

        def dec(X):
            return model.decision_function(X)[:, klass]
    else:
        enc = (
            (lambda t: np.where(t == model.classes_[1], 1.0, -1.0))
            if hasattr(model, "classes_")
            else (lambda t: t.astype(float))
        )
        dec = getattr(model, "decision_function", model.predict)
    pts, gam = [], []
    if len(X_add):
        pts.append(X_add)
        gam.append(d1(model.loss, enc(y_add), dec(X_add)))
    if len(X_rem):
        pts.append(X_rem)
        gam.append(-d1(model.loss, enc(y_rem), dec(X_rem)))
    if not pts:
        return 0.0, dec(X_query)
    P, g = np.vstack(pts), np.concatenate(gam)
    C = model.C
    r = 0.5 * C * np.sqrt(max(g @ k(P, P) @ g, 0.0))
    center = dec(X_query) - 0.5 * C * (k(X_query, P) @ g)
    return r, center


def small_drift_stream(seed=0, n=900, change=450):
    """A 2-d stream whose labels rotate by 0.6 rad at ``change`` (a small checkerboard)."""
    rng = np.random.default_rng(seed)
    X = rng.random((n, 2))
    theta = np.where(np.arange(n) < change, 0.0, 0.6)
    u = X - 0.5
    c, s = np.cos(-theta), np.sin(-theta)
    u1, u2 = c * u[:, 0] - s * u[:, 1] + 0.5, s * u[:, 0] + c * u[:, 1] + 0.5
    return X, ((np.floor(3 * u1) + np.floor(3 * u2)) % 2).astype(np.int64)


def kdr_twin(make, X, y, window, threshold, initial):
    """KDR written from §4.4 with the ball recomputed from scratch at every step: W₁ and the
    window as index sets, A = W ∖ W₁, R = W₁ ∖ W.  Returns (computation steps, ‖r‖ per step,
    predictions made before learning each sample)."""
    comps, rs, preds = [], [], []
    model, W1, total, k = None, None, 0.0, 0
    for t in range(X.shape[0]):
        preds.append(None if model is None else model.predict(X[t : t + 1])[0])
        win = np.arange(max(0, t + 1 - window), t + 1)
        if model is None:
            rs.append(np.nan)
            if t + 1 >= initial:
                model, W1 = make().fit(X[win], y[win]), win
                comps.append(t)
            continue
        A, R = np.setdiff1d(win, W1), np.setdiff1d(W1, win)
        r, _ = scratch_ball(model, X[A], y[A], X[R], y[R], X[:1])
        rs.append(r)
        total, k = total + r, k + 1
        if total / k > threshold:
            model, W1 = make().fit(X[win], y[win]), win
            comps.append(t)
            total, k = 0.0, 0
    return comps, np.array(rs), preds
