"""
TreeCV against k refits
=======================

k-fold cross-validation trains ``k`` models, each on ``(k - 1)/k`` of the data.  For a learner
that can *add* samples, TreeCV (Joulani et al., "Fast cross-validation for incremental
learning", Algorithm 1) shares the work: the folds are the leaves of a binary tree, a model
learns the samples of one half of the tree and is copied into the other, so each sample is
learned about ``log2(k)`` times instead of ``k - 1``.  With deltafit's exact estimators every
fold's model is the one a refit gives, so TreeCV's scores equal scikit-learn's
``cross_val_score``.
"""

# %%
# Same scores as k refits
# -----------------------
import time

import matplotlib.pyplot as plt
import numpy as np
from sklearn.datasets import load_digits
from sklearn.model_selection import KFold, cross_val_score
from sklearn.preprocessing import StandardScaler

import deltafit as df
from deltafit.model_selection import treecv

X, y = load_digits(return_X_y=True)
X = StandardScaler().fit_transform(X)
estimator = df.LinearClassifier(C=0.01)

ks = [2, 5, 10, 20, 50]
t_tree, t_refit, updates = [], [], []
for k in ks:
    cv = KFold(k, shuffle=True, random_state=0)
    t0 = time.perf_counter()
    r = treecv(estimator, X, y, cv=cv)
    t_tree.append(time.perf_counter() - t0)
    t0 = time.perf_counter()
    ref = cross_val_score(estimator, X, y, cv=cv)
    t_refit.append(time.perf_counter() - t0)
    assert np.allclose(r.fold_scores, ref), (r.fold_scores, ref)
    updates.append(r.n_sample_updates / len(y))
    print(f"k = {k:2d}: TreeCV {t_tree[-1]:.2f} s, {k} refits {t_refit[-1]:.2f} s; "
          f"accuracy {r.score:.4f} (refits: {ref.mean():.4f}); "
          f"each sample learned {updates[-1]:.1f} times (refits: {k - 1})")

# %%
# The picture
# -----------
# Left: seconds for k-fold CV by TreeCV and by ``k`` refits.  Right: how many times each sample
# is learned — ``k - 1`` for refits, about ``log2(k)`` for TreeCV.
fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(9, 3.6))
ax1.plot(ks, t_refit, "o-", color="C7", label="k refits (cross_val_score)")
ax1.plot(ks, t_tree, "o-", label="TreeCV")
ax1.set_xlabel("k (folds)")
ax1.set_ylabel("seconds")
ax1.legend()
ax2.plot(ks, [k - 1 for k in ks], "o-", color="C7", label="k refits")
ax2.plot(ks, updates, "o-", label="TreeCV")
ax2.set_xlabel("k (folds)")
ax2.set_ylabel("times each sample is learned")
ax2.legend()
fig.tight_layout()
plt.show()
