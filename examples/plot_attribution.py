"""
Which training samples matter
=============================

For every training sample at once, :mod:`deltafit.attribution` answers "what would the model
say without it?" exactly, without refitting: :func:`~deltafit.attribution.loo_effects` gives the
change of the decision values, :func:`~deltafit.attribution.data_values` the leave-one-out data
value (the ``LOOValuation`` of pyDVL, without its n refits), and
:func:`~deltafit.attribution.influence` the first-order estimate of Koh & Liang,
"Understanding black-box predictions via influence functions", whose gap to the exact answer
the picture shows.  Here a tenth of the digits' training labels are flipped, and the most
harmful samples by exact data value turn out to be mostly the flipped ones.
"""

# %%
# A model trained on partly wrong labels
# --------------------------------------
import numpy as np
from sklearn.datasets import load_digits
from sklearn.model_selection import train_test_split

import deltafit as df
from deltafit.attribution import data_values, influence, loo_effects, robustness
from deltafit.plotting import attribution_figure

X, y = load_digits(return_X_y=True)
X = X / 16.0
X_train, X_val, y_train, y_val = train_test_split(
    X, y, train_size=600, test_size=400, stratify=y, random_state=0
)
rng = np.random.default_rng(0)
flipped = rng.choice(len(y_train), size=60, replace=False)
y_noisy = y_train.copy()
y_noisy[flipped] = (y_train[flipped] + rng.integers(1, 10, size=60)) % 10
model = df.LinearClassifier(loss="logistic", C=0.5).fit(X_train, y_noisy)
print(f"validation accuracy {model.score(X_val, y_val):.3f}")

# %%
# Exact data values find the flipped labels
# -----------------------------------------
# Valued by the validation log-loss (finer than accuracy's steps); the brute-force twin of a
# few values is a fresh fit without the sample.
v = data_values(model, X_val, y_val, scoring="neg_log_loss")
harmful = v.most_harmful(60)
print(
    f"flipped among the 60 most harmful: {np.isin(harmful, flipped).sum()} "
    f"(a random 60 would hold about 6)"
)
from sklearn.metrics import get_scorer

score = get_scorer("neg_log_loss")
for i in harmful[:3]:
    keep = np.arange(len(X_train)) != i
    refit = df.LinearClassifier(loss="logistic", C=0.5).fit(X_train[keep], y_noisy[keep])
    brute = score(model, X_val, y_val) - score(refit, X_val, y_val)
    assert abs(brute - v.values[i]) < 1e-8, (brute, v.values[i])
print(v.to_frame().tail(3))

# %%
# One prediction: the exact effects and the influence estimate
# ------------------------------------------------------------
# The validation digit with the smallest margin; each training sample's exact effect on the
# score of its predicted class, against the influence-function estimate.
z = model.decision_function(X_val)
top2 = np.sort(z, axis=1)[:, -2:]
q = int(np.argmin(top2[:, 1] - top2[:, 0]))
k = int(np.argmax(z[q]))
E = loo_effects(model, X_val[q : q + 1])[:, 0, k]
inf = influence(model, X_val[q : q + 1])[:, 0, k]
print(
    f"largest gap between estimate and exact effect: {np.abs(E - inf).max():.2e} "
    f"(largest effect {np.abs(E).max():.2e})"
)
r = robustness(model, X_val[q : q + 1], max_removals=5)
print(
    f"fewest removals that change this prediction: at least {r.lower[0]:g} (certified), "
    f"at most {r.upper[0]:g}: removing samples {r.witness[0]} does (an exact update)"
)

# %%
# The picture
# -----------
# Left: estimate against exact effect for every training sample.  Right: the query digit and
# the training digits whose removal lowers (top) or raises (bottom) its score most, with their
# (possibly flipped) training labels.
import os  # noqa: E402
import tempfile  # noqa: E402

path = attribution_figure(
    E,
    os.path.join(tempfile.mkdtemp(), "attribution.png"),
    estimate=inf,
    images=X_train,
    query=X_val[q],
    labels=y_noisy,
    k=5,
    title=f"validation digit predicted {model.classes_[k]}",
)

import matplotlib.image as mpimg  # noqa: E402
import matplotlib.pyplot as plt  # noqa: E402

plt.figure(figsize=(11, 4.4))
plt.imshow(mpimg.imread(path))
plt.axis("off")
plt.show()
