"""
Answering a deletion request
============================

A user asks to be forgotten: every sample they contributed must leave the model, and the model
must be the one we would have trained had they never been there.  Here the model is updated in
place with :meth:`~deltafit.LinearClassifier.remove` (an exact update: no retraining), checked
against a fresh fit on the remaining samples, and saved to a file that holds no trace of the
removed rows.
"""

# %%
# A model trained on the samples of 60 users
# -------------------------------------------
# The digits data set (1797 images of 8x8 pixels, 10 classes); each sample is attributed to one
# of 60 users.  ``fit`` gives the samples the ids ``0..n-1``; the ids are what a deletion
# request names.
import tempfile
import time
from pathlib import Path

import matplotlib.pyplot as plt
import numpy as np
from sklearn.datasets import load_digits
from sklearn.preprocessing import StandardScaler

import deltafit as df

X, y = load_digits(return_X_y=True)
user = np.random.default_rng(0).integers(0, 60, size=len(y))  # who contributed each sample

model = df.make_pipeline(StandardScaler(), df.LinearClassifier(C=0.01)).fit(X, y)
print(f"trained on {len(model.sample_ids_)} samples of {len(np.unique(user))} users")

# %%
# The request: forget user 7
# --------------------------
# ``remove`` takes the ids of the user's samples.  The update is exact: the model afterwards is
# the one a fit without these samples gives (the scaler, fitted once, stays frozen).
ids = np.flatnonzero(user == 7)
t0 = time.perf_counter()
model.remove(ids)
t_update = time.perf_counter() - t0
print(f"removed {len(ids)} samples of user 7 in {t_update * 1e3:.1f} ms")

# %%
# Verify against a refit
# ----------------------
# The brute-force twin: the same scaler (fitted on all the data, as the model's), a fresh
# estimator fitted on the samples that remain.
keep = np.setdiff1d(np.arange(len(y)), ids)
scaler = model.steps[0][1]
t0 = time.perf_counter()
refit = df.LinearClassifier(C=0.01).fit(scaler.transform(X[keep]), y[keep])
t_refit = time.perf_counter() - t0
d_update = model.decision_function(X)
d_refit = refit.decision_function(scaler.transform(X))
gap = np.max(np.abs(d_update - d_refit))
print(f"largest difference of decision values: {gap:.1e} (refit took {t_refit * 1e3:.1f} ms)")
assert gap < 1e-8
assert not np.isin(ids, model.sample_ids_).any()

# %%
# Save: what the file holds
# -------------------------
# ``deltafit.save`` writes an ``.npz`` archive (arrays plus JSON metadata, never a pickle).  It
# keeps the training rows of the samples still in the model, so that the model can be updated
# again after loading, and nothing of the removed ones.
path = Path(tempfile.mkdtemp()) / "model.npz"
df.save(model, path)
loaded = df.load(path)
assert np.array_equal(loaded.predict(X), model.predict(X))
with np.load(path) as archive:
    print(sorted(archive.files))
    stored_ids = archive["ledger_ids"]
print(f"{len(stored_ids)} ids in the file, none of user 7: {not np.isin(ids, stored_ids).any()}")

# %%
# The picture
# -----------
# Left: every decision value of the updated model (x) against the refit's (y); they lie on the
# diagonal because they are equal to rounding.  Right: the time the exact update took against
# the time of the refit.
fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(9, 3.8))
ax1.plot(d_refit.ravel(), d_update.ravel(), ".", ms=2, alpha=0.4)
lim = [d_refit.min(), d_refit.max()]
ax1.plot(lim, lim, "k--", lw=0.8)
ax1.set_xlabel("decision value, fresh fit without user 7")
ax1.set_ylabel("decision value, updated model")
ax1.set_title(f"equal to rounding (max gap {gap:.0e})")
ax2.bar(["remove (exact update)", "fresh fit"], [t_update * 1e3, t_refit * 1e3], color=["C0", "C7"])
ax2.set_ylabel("milliseconds")
ax2.set_title("time")
fig.tight_layout()
plt.show()
