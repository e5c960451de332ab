"""
TreeCV against k refits
=======================

k-fold cross-validation trains ``k`` models, each on ``(k - 1)/k`` of the data: every sample is
learned ``k - 1`` times.  For a learner that can *add* samples, TreeCV (Joulani et al., "Fast
cross-validation for incremental learning", Algorithm 1) shares the work: the folds are the
leaves of a binary tree, a model learns the samples of one half of the tree and is copied into
the other, so each sample is learned about ``log2(k)`` times instead of ``k - 1``.
"""

# %%
# Exact learners: the same scores as k refits
# -------------------------------------------
# With deltafit's exact estimators (``fit``, then ``add``) every fold's model is the one a refit
# gives, so TreeCV's fold scores equal scikit-learn's ``cross_val_score``.
import time

import matplotlib.pyplot as plt
import numpy as np
from sklearn.model_selection import KFold, cross_val_score

import deltafit as df
from deltafit.datasets import load_digits_even_odd
from deltafit.model_selection import treecv
from deltafit.stream import Pegasos

X, y = load_digits_even_odd()  # 1797 digits: odd or even?
cv = KFold(10, shuffle=True, random_state=0)
r = treecv(df.LinearClassifier(C=0.01), X, y, cv=cv)
ref = cross_val_score(df.LinearClassifier(C=0.01), X, y, cv=cv)
print(
    f"TreeCV {r.score:.4f}, 10 refits {ref.mean():.4f}, "
    f"largest fold difference {np.max(np.abs(r.fold_scores - ref)):.1e}"
)
assert np.allclose(r.fold_scores, ref)

# %%
# An online learner: the speed
# ----------------------------
# PEGASOS (a stochastic subgradient SVM, the learner of Joulani et al.'s experiments) learns a
# sample in O(p), so training cost is proportional to the samples learned, and TreeCV's saving
# shows in full.  deltafit runs its per-sample loop and TreeCV's recursion compiled with numba
# (``pip install "deltafit[fast]"``); the first call compiles them, once.  The brute-force twin
# trains a fresh learner on the other ``k - 1`` folds for each fold.  An online learner's model
# depends on the order it sees the samples in, so both learn in random orders (TreeCV's
# ``shuffle=True``, its randomized variant).
treecv(Pegasos(lam=1e-4), X[:100], y[:100], cv=5)  # compile TreeCV's loops (once; cached)
Pegasos(lam=1e-4).fit(X[:100], y[:100]).score(X, y)  # and the refits' loops

ks = [5, 10, 20, 50, 100]
t_tree, t_refit, s_tree, s_refit, learned = [], [], [], [], []
for k in ks:
    folds = KFold(k, shuffle=True, random_state=0)
    t0 = time.perf_counter()
    r = treecv(Pegasos(lam=1e-4), X, y, cv=folds, shuffle=True, random_state=0)
    t_tree.append(time.perf_counter() - t0)
    t0 = time.perf_counter()
    rng = np.random.default_rng(0)
    scores = []
    for tr, te in folds.split(X):
        order = rng.permutation(tr)
        scores.append(Pegasos(lam=1e-4).fit(X[order], y[order]).score(X[te], y[te]))
    t_refit.append(time.perf_counter() - t0)
    s_tree.append(r.score)
    s_refit.append(np.mean(scores))
    learned.append(r.n_sample_updates / len(y))
    print(
        f"k = {k:3d}: TreeCV {t_tree[-1] * 1e3:6.1f} ms, {k} refits {t_refit[-1] * 1e3:6.1f} ms; "
        f"accuracy {r.score:.3f} (refits {s_refit[-1]:.3f}); each sample learned "
        f"{learned[-1]:.1f} times (refits: {k - 1})"
    )

# %%
# The two estimates differ by about as much as two refits in different random orders do (up
# to a few points for one pass of PEGASOS, a noisy learner): TreeCV estimates the same quantity
# (Joulani et al. bound the difference for stable learners).  On 1797 samples the refits' time
# is largely the fixed cost of each fit; ``benchmarks/bench_treecv.py`` measures larger sets.
# Leave-one-out, ``cv=n``, costs TreeCV about ``log2(n)`` passes:
t0 = time.perf_counter()
r = treecv(Pegasos(lam=1e-4), X, y, cv=len(y), shuffle=True, random_state=0)
print(
    f"leave-one-out over {len(y)} samples: {time.perf_counter() - t0:.3f} s, "
    f"accuracy {r.score:.3f}, each sample learned {r.n_sample_updates / len(y):.1f} times"
)

# %%
# The picture
# -----------
# Left: seconds for k-fold CV by TreeCV and by ``k`` refits.  Middle: how many times each sample
# is learned — ``k - 1`` by refits, about ``log2(k)`` by TreeCV.  Right: the two estimates of
# the accuracy.
fig, (ax1, ax2, ax3) = plt.subplots(1, 3, figsize=(11, 3.6))
ax1.plot(ks, t_refit, "o-", color="C7", label="k refits")
ax1.plot(ks, t_tree, "o-", label="TreeCV")
ax1.set_xlabel("k (folds)")
ax1.set_ylabel("seconds")
ax1.legend()
ax2.plot(ks, [k - 1 for k in ks], "o-", color="C7", label="k refits")
ax2.plot(ks, learned, "o-", label="TreeCV")
ax2.set_xlabel("k (folds)")
ax2.set_ylabel("times each sample is learned")
ax3.plot(ks, s_refit, "o-", color="C7", label="k refits")
ax3.plot(ks, s_tree, "o-", label="TreeCV")
ax3.set_xlabel("k (folds)")
ax3.set_ylabel("CV accuracy (PEGASOS)")
fig.tight_layout()
plt.show()
