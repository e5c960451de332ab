"""
Certificates against the exact answer
=====================================

*What if* 5% of the training samples were removed?  :func:`deltafit.sensitivity` answers
without retraining: it returns, for each test point, an interval that is guaranteed to contain
the decision value of the model a retrain would give (a ball in model space around the current
model: Okumura et al., "Quick sensitivity analysis for incremental data modification", Theorem
1; Sivan et al., "Incremental sensitivity analysis for kernelized models", Theorem 1).  A label
is *certified* when its whole interval lies on one side of zero.  Here the intervals are drawn
next to the exact answer, which we compute by retraining.
"""

# %%
# A model and a hypothetical removal
# ----------------------------------
import matplotlib.pyplot as plt
import numpy as np
from sklearn.datasets import load_breast_cancer
from sklearn.model_selection import train_test_split
from sklearn.preprocessing import StandardScaler

import deltafit as df

X, y = load_breast_cancer(return_X_y=True)
X = StandardScaler().fit_transform(X)
X_train, X_test, y_train, y_test = train_test_split(X, y, test_size=0.3, random_state=0)
model = df.LinearClassifier(loss="logistic", C=0.1).fit(X_train, y_train)

rng = np.random.default_rng(0)
gone = rng.choice(len(y_train), size=len(y_train) // 20, replace=False)
s = df.sensitivity(model)  # the what-if object; nothing is retrained
s.remove(gone)
lo, hi = s.decision_bounds(X_test)
labels, certain = s.predict_certain(X_test)
print(
    f"removing {len(gone)} of {len(y_train)} samples: "
    f"{certain.mean():.0%} of the test labels certified without retraining"
)

# %%
# The exact answer, by retraining
# -------------------------------
# The brute-force twin: every interval must contain the retrained model's decision value, and
# every certified label must be the retrained model's label.
keep = np.setdiff1d(np.arange(len(y_train)), gone)
retrained = df.LinearClassifier(loss="logistic", C=0.1).fit(X_train[keep], y_train[keep])
exact = retrained.decision_function(X_test)
# The retrain is itself solved to a tolerance: its decision values are within
# ‖Φ(x)‖ · grad_norm_ of the exact optimum's (Φ(x) = [x, 1], the constant feature last).
tol = np.sqrt(np.sum(X_test**2, axis=1) + 1.0) * retrained.grad_norm_
inside = (lo <= exact + tol) & (exact <= hi + tol)
print(f"intervals containing the exact answer: {inside.sum()} of {len(exact)}")
assert inside.all()
assert np.array_equal(labels[certain], retrained.predict(X_test)[certain])
print(
    f"mean interval width {np.mean(hi - lo):.3f}; "
    f"mean |decision value| {np.mean(np.abs(exact)):.2f}"
)

# %%
# The picture
# -----------
# 40 test points (every undecided one, and others evenly spread), sorted by the current
# model's decision value.  Each bar is a certified interval; the dot is the decision value after
# retraining, always inside its bar.  Blue bars do not cross zero: their label is decided
# without retraining.  Orange bars cross zero: only a retrain can tell.
order = np.argsort(model.decision_function(X_test))
undecided = order[~certain[order]]
spread = np.setdiff1d(order[:: len(order) // (40 - len(undecided))], undecided)
idx = order[np.isin(order, np.concatenate([undecided, spread]))][:40]
x = np.arange(len(idx))
fig, ax = plt.subplots(figsize=(9, 3.8))
for mask, color, name in [
    (certain[idx], "C0", "certified interval, label decided"),
    (~certain[idx], "C1", "certified interval, label undecided"),
]:
    ax.vlines(x[mask], lo[idx][mask], hi[idx][mask], colors=color, lw=5, alpha=0.6, label=name)
ax.plot(x, exact[idx], "k.", label="retrained model (exact)")
ax.axhline(0, color="k", lw=0.8)
ax.set_xlabel("test point (sorted by the current decision value)")
ax.set_ylabel("decision value")
ax.set_title("certified intervals after removing 5% of the data, and the exact answer")
ax.legend(loc="upper left")
fig.tight_layout()
plt.show()
