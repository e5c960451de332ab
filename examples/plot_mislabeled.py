"""
Correcting mislabeled data
==========================

A tenth of the training labels are wrong.  As reviewers find them, each correction is applied
to the trained model with :meth:`~deltafit.LinearClassifier.relabel`, an exact update in closed form
for the squared loss used here (the LS-SVM of Lee et al., "Exact incremental and decremental
learning for LS-SVM"; other losses re-solve warm-started).  After every batch the model equals
a fresh fit on the corrected labels, to rounding, at a fraction of its cost.  (The first update
also builds the inverse the later ones reuse, so it costs more.)
"""

# %%
# Corrupt 10% of the labels
# -------------------------
import time

import matplotlib.pyplot as plt
import numpy as np
from sklearn.datasets import load_digits
from sklearn.model_selection import train_test_split
from sklearn.preprocessing import StandardScaler

import deltafit as df

X, y = load_digits(return_X_y=True)
X = StandardScaler().fit_transform(X)
X_train, X_test, y_train, y_test = train_test_split(X, y, test_size=0.3, random_state=0)
rng = np.random.default_rng(0)
wrong = rng.choice(len(y_train), size=len(y_train) // 10, replace=False)
y_noisy = y_train.copy()
y_noisy[wrong] = (y_train[wrong] + rng.integers(1, 10, size=len(wrong))) % 10  # another digit

model = df.LinearClassifier(C=0.01).fit(X_train, y_noisy)
print(f"{len(wrong)} wrong labels; test accuracy {model.score(X_test, y_test):.3f}")

# %%
# Fix them in five batches
# ------------------------
# After each batch, the brute-force twin (a fresh fit on the labels as corrected so far) must
# give the same decision values.
fixed, acc, t_relabel, t_refit = [0], [model.score(X_test, y_test)], [], []
y_current = y_noisy.copy()
for batch in np.array_split(wrong, 5):
    t0 = time.perf_counter()
    model.relabel(batch, y_train[batch])  # the ids of fit are the row numbers
    t_relabel.append(time.perf_counter() - t0)
    y_current[batch] = y_train[batch]
    t0 = time.perf_counter()
    fresh = df.LinearClassifier(C=0.01).fit(X_train, y_current)
    t_refit.append(time.perf_counter() - t0)
    gap = np.max(np.abs(model.decision_function(X_test) - fresh.decision_function(X_test)))
    assert gap < 1e-8, gap
    fixed.append(fixed[-1] + len(batch))
    acc.append(model.score(X_test, y_test))
    print(
        f"{fixed[-1]:3d} labels fixed: accuracy {acc[-1]:.3f}, "
        f"relabel {t_relabel[-1] * 1e3:.1f} ms vs refit {t_refit[-1] * 1e3:.1f} ms, "
        f"max gap {gap:.0e}"
    )

# %%
# The picture
# -----------
# Test accuracy as the wrong labels are corrected (left), and what each batch cost as an
# exact update against a fresh fit (right).
fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(9, 3.6))
ax1.plot(fixed, acc, "o-")
ax1.set_xlabel("wrong labels corrected")
ax1.set_ylabel("test accuracy")
ax1.set_title("accuracy as labels are fixed")
x = np.arange(1, 6)
ax2.bar(x - 0.2, np.array(t_relabel) * 1e3, 0.4, label="relabel (exact update)")
ax2.bar(x + 0.2, np.array(t_refit) * 1e3, 0.4, label="fresh fit", color="C7")
ax2.set_xlabel("batch")
ax2.set_ylabel("milliseconds")
ax2.legend()
ax2.set_title("cost per batch")
fig.tight_layout()
plt.show()
