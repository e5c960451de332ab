"""
Exact leave-one-out model selection against GridSearchCV
========================================================

Choosing ``C`` by leave-one-out cross-validation takes ``n`` refits per candidate by brute
force.  :class:`deltafit.model_selection.LOOSearchCV` gives the same scores exactly, at a
fraction of the cost: for every left-out sample a certified interval of its left-out decision
value (Okumura et al., "Quick sensitivity analysis for incremental data modification",
Corollary 5) decides most labels without a refit, and a candidate is dropped as soon as its
certified error count cannot beat the best one (Okumura et al., §5.2).  The brute-force twin is
scikit-learn's ``GridSearchCV(cv=LeaveOneOut())``.
"""

# %%
# The same search, two ways
# -------------------------
import time

import matplotlib.pyplot as plt
import numpy as np
from sklearn.datasets import load_breast_cancer
from sklearn.model_selection import GridSearchCV, LeaveOneOut

import deltafit as df
from deltafit.model_selection import LOOSearchCV

X, y = load_breast_cancer(return_X_y=True)
X = (X - X.mean(axis=0)) / X.std(axis=0)
X, y = X[:300], y[:300]  # 300 samples keep the brute force short
grid = {"C": [0.01, 0.1, 1.0, 10.0]}
estimator = df.LinearClassifier(loss="logistic")

t0 = time.perf_counter()
fast = LOOSearchCV(estimator, grid).fit(X, y)
t_fast = time.perf_counter() - t0

t0 = time.perf_counter()
brute = GridSearchCV(estimator, grid, cv=LeaveOneOut()).fit(X, y)
t_brute = time.perf_counter() - t0

print(
    f"LOOSearchCV:   best {fast.best_params_}, LOO accuracy {fast.best_score_:.4f}, {t_fast:.2f} s"
)
print(
    f"GridSearchCV:  best {brute.best_params_}, LOO accuracy {brute.best_score_:.4f}, "
    f"{t_brute:.2f} s"
)
assert fast.best_params_ == brute.best_params_
assert np.isclose(fast.best_score_, brute.best_score_)

# %%
# Every candidate's score
# -----------------------
# A pruned candidate (NaN score) has a certified interval of its LOO accuracy that lies below
# the best one's: it could not have won, so its remaining refits were skipped.
scores = np.asarray(fast.cv_results_["mean_test_score"], dtype=float)
lower = np.asarray(fast.cv_results_["test_score_lower"], dtype=float)
upper = np.asarray(fast.cv_results_["test_score_upper"], dtype=float)
for C, s, a, b, ref in zip(grid["C"], scores, lower, upper, brute.cv_results_["mean_test_score"]):
    print(
        f"C = {C:<5}: LOOSearchCV {s:.4f} (certified in [{a:.4f}, {b:.4f}]), GridSearchCV {ref:.4f}"
    )

# %%
# The picture
# -----------
# Left: the leave-one-out accuracy of each ``C`` — GridSearchCV's (dots), LOOSearchCV's exact
# score (circles) and, for a pruned candidate, its certified interval (bar): the interval's top
# does not exceed the best score, so the candidate could not win.  Right: the time of each
# search.
fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(9, 3.6))
x = np.arange(len(grid["C"]))
ax1.vlines(x, lower, upper, lw=8, alpha=0.4, label="LOOSearchCV, certified interval")
ax1.plot(x, scores, "o", ms=12, mfc="none", label="LOOSearchCV, exact score")
ax1.plot(x, brute.cv_results_["mean_test_score"], "k.", ms=8, label="GridSearchCV")
ax1.set_xticks(x, [str(c) for c in grid["C"]])
ax1.set_xlabel("C")
ax1.set_ylabel("leave-one-out accuracy")
ax1.legend(loc="lower right")
ax2.bar(["LOOSearchCV", "GridSearchCV"], [t_fast, t_brute], color=["C0", "C7"])
ax2.set_ylabel("seconds")
ax2.set_title(f"{t_brute / t_fast:.0f}x faster, same choice")
fig.tight_layout()
plt.show()
