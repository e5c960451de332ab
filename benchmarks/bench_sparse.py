#!/usr/bin/env python
"""Sparse input: exact updates on a TF-IDF matrix vs a scikit-learn refit (not run in CI).

Claim measured (see benchmarks/README.md, "Sparse input"): on the TF-IDF matrix of generated
text (``--docs`` documents, a Zipf vocabulary of ``--vocab`` words, two topics that set the
label), a deltafit model fitted on the sparse matrix removes one sample and adds one sample
exactly, faster than scikit-learn refits its twin on the sparse data that result, and the rows
stay sparse in the model (the ledger holds O(nnz)).  Three problems:

* ``logistic, primal``: ``LinearClassifier(loss="logistic", C)`` on all the features (Newton
  with sparse products; beyond 500 features its steps are Hessian-free conjugate gradients)
  ↔ ``LogisticRegression(C, fit_intercept=False)`` on ``[X, 1]`` (sparse);
* ``squared, primal``: ``LinearClassifier(C)`` on the ``--primal-features`` most frequent
  words (its state is the dense p × p matrix ``ΦᵀΦ + ρI``: p must stay in the thousands) ↔
  ``Ridge(alpha=1/(2C), fit_intercept=False)`` on ``[X, 1]``;
* ``squared, dual``: ``KernelClassifier(kernel="linear", C)`` on all the features and the first
  ``--dual-docs`` documents (its state is n × n: the form for p ≫ n) ↔ the same ``Ridge``.

The deviation ``max|z_deltafit − z_sklearn| / max(1, max|z_sklearn|)`` of the decision values
on the training rows is printed with each row (scikit-learn's solvers run with tol=1e-10).

Timing protocol: every array is prepared beforehand (the sparse matrices in CSR, as both sides
take them); ``time.perf_counter`` around the update or the ``fit`` call only, garbage
collector off; an update is the median over ``--reps`` successive updates (each on the state
the previous one left), the refit the minimum over ``--repeats`` fits on the data after the
first update.

Usage::

    python benchmarks/bench_sparse.py            # 20,000 docs x 50,000 words
    python benchmarks/bench_sparse.py --quick    # 2,000 docs x 5,000 words, seconds

Prints one JSON document and then a markdown table (one row per scenario).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import time

import numpy as np
import scipy
import scipy.sparse as sp
from _timing import log, timed  # benchmarks/_timing.py (the scripts run from this folder)


def corpus(n_docs, vocab, seed=0):
    """Generated documents: Zipf-distributed common words plus a few words of the document's
    topic (its label); returns the documents and the labels."""
    rng = np.random.default_rng(seed)
    words = np.array([f"w{i}" for i in range(vocab)])
    p = 1.0 / np.arange(1, vocab + 1) ** 1.05
    p /= p.sum()
    topic = [words[rng.choice(vocab, 300, replace=False)] for _ in range(2)]
    lengths = rng.integers(60, 200, n_docs)
    y = rng.integers(0, 2, n_docs)
    docs = []
    for i in range(n_docs):
        common = words[rng.choice(vocab, lengths[i], p=p)]
        own = rng.choice(topic[y[i]], max(2, lengths[i] // 20))
        docs.append(" ".join(np.concatenate([common, own]).tolist()))
    return docs, y


def tfidf(docs, max_features):
    from sklearn.feature_extraction.text import TfidfVectorizer

    return sp.csr_matrix(
        TfidfVectorizer(max_features=max_features, dtype=np.float64).fit_transform(docs)
    )


def deviation(a, b):
    return float(np.abs(a - b).max() / max(1.0, np.abs(b).max()))


def with_ones(X):
    return sp.hstack([X, sp.csr_matrix(np.ones((X.shape[0], 1)))], format="csr")


def scenario(name, make, twin, X, y, args):
    n = X.shape[0]
    t, m = timed(lambda: make().fit(X[: n - args.reps], y[: n - args.reps]))
    log(f"{name}: deltafit fit {t:.2f} s")
    fit_s = t
    removes, adds = [], []
    for i in range(args.reps):
        removes.append(timed(lambda i=i: m.remove([i]))[0])
        j = n - args.reps + i
        adds.append(timed(lambda j=j: m.add(X[j : j + 1], y[j : j + 1]))[0])
    keep = np.arange(args.reps, n)  # the data after the updates
    Ok, yk = with_ones(X[keep]), y[keep]
    refits, ref = [], None
    for _ in range(args.repeats):
        dt, ref = timed(
            lambda: twin().fit(Ok, np.where(yk > 0, 1.0, -1.0) if "squared" in name else yk)
        )
        refits.append(dt)
    dev = deviation(
        m.decision_function(X[keep]),
        np.asarray(
            ref.decision_function(Ok) if hasattr(ref, "decision_function") else ref.predict(Ok)
        ),
    )
    led = m._ledger
    stored = led.X[led.active_slots()]
    row = {
        "scenario": name,
        "n": int(n),
        "p": int(X.shape[1]),
        "nnz": int(X.nnz),
        "deltafit_fit_s": fit_s,
        "remove1_median_s": float(np.median(removes)),
        "add1_median_s": float(np.median(adds)),
        "refit_min_s": float(min(refits)),
        "ratio_remove1": float(min(refits) / np.median(removes)),
        "ratio_add1": float(min(refits) / np.median(adds)),
        "deviation": dev,
        "rows_stored_sparse": bool(sp.issparse(stored)),
        "stored_nnz": int(stored.nnz) if sp.issparse(stored) else None,
        "refit_all_s": refits,
        "remove_all_s": removes,
        "add_all_s": adds,
    }
    log(
        f"{name}: remove 1 {row['remove1_median_s'] * 1e3:.1f} ms, add 1 "
        f"{row['add1_median_s'] * 1e3:.1f} ms, refit {row['refit_min_s']:.2f} s, "
        f"ratio {row['ratio_remove1']:.1f}x / {row['ratio_add1']:.1f}x, deviation {dev:.1e}"
    )
    return row


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[1])
    p.add_argument("--quick", action="store_true")
    p.add_argument("--docs", type=int, default=20_000)
    p.add_argument("--vocab", type=int, default=50_000)
    p.add_argument("--primal-features", type=int, default=2_000)
    p.add_argument("--dual-docs", type=int, default=4_000)
    p.add_argument("--C", type=float, default=1.0)
    p.add_argument("--reps", type=int, default=5, help="single updates timed (median)")
    p.add_argument("--repeats", type=int, default=1, help="refits timed (minimum)")
    p.add_argument("--out", default=None)
    args = p.parse_args(argv)
    if args.quick:
        args.docs, args.vocab, args.primal_features, args.dual_docs = 2_000, 5_000, 500, 800
    import sklearn
    from sklearn.linear_model import LogisticRegression, Ridge

    import deltafit

    t0 = time.perf_counter()
    docs, y = corpus(args.docs, args.vocab)
    X = tfidf(docs, args.vocab)
    Xp = tfidf(docs, args.primal_features)
    log(
        f"corpus: {X.shape[0]} docs x {X.shape[1]} words, nnz {X.nnz} "
        f"({time.perf_counter() - t0:.1f} s)"
    )
    C = args.C
    ridge = lambda: Ridge(alpha=1 / (2 * C), fit_intercept=False, tol=1e-10)  # noqa: E731
    rows = [
        scenario(
            "logistic, primal",
            lambda: deltafit.LinearClassifier(loss="logistic", C=C),
            lambda: LogisticRegression(
                C=C, fit_intercept=False, tol=1e-10, solver="newton-cg", max_iter=10_000
            ),
            X,
            y,
            args,
        ),
        scenario("squared, primal", lambda: deltafit.LinearClassifier(C=C), ridge, Xp, y, args),
        scenario(
            "squared, dual (kernel='linear')",
            lambda: deltafit.KernelClassifier(kernel="linear", C=C),
            ridge,
            X[: args.dual_docs],
            y[: args.dual_docs],
            args,
        ),
    ]
    doc = {
        "benchmark": "sparse",
        "data": "generated text, TF-IDF",
        "C": C,
        "quick": bool(args.quick),
        "python": platform.python_version(),
        "numpy": np.__version__,
        "scipy": scipy.__version__,
        "scikit-learn": sklearn.__version__,
        "cores": os.cpu_count(),
        "rows": rows,
    }
    text = json.dumps(doc, indent=1)
    print(text)
    lines = [
        "| scenario | n × p (nnz) | deltafit remove 1 | deltafit add 1 | sklearn refit | "
        "ratio remove / add | deviation |",
        "|---|---|---:|---:|---:|---:|---:|",
    ]
    for r in rows:
        lines.append(
            f"| {r['scenario']} | {r['n']} × {r['p']} ({r['nnz']}) | "
            f"{r['remove1_median_s'] * 1e3:.1f} ms | {r['add1_median_s'] * 1e3:.1f} ms"
            f" | {r['refit_min_s']:.2f} s | {r['ratio_remove1']:.0f}x / "
            f"{r['ratio_add1']:.0f}x | {r['deviation']:.1e} |"
        )
    print()
    print("\n".join(lines))
    if args.out:
        with open(args.out, "w") as f:
            f.write(text)
        with open(os.path.splitext(args.out)[0] + ".md", "w") as f:
            f.write("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
