"""The ``deltafit stream`` and ``deltafit active`` commands, and the experiments behind them."""

import json

import numpy as np
import pytest

import deltafit as df
from deltafit.active import FGAL, compare_strategies, run_active_learning
from deltafit.cli import main
from deltafit.stream import KDR, SlidingWindow, prequential, tradeoff_experiment
from stream_reference import small_drift_stream

pytest.importorskip("matplotlib")


def test_tradeoff_experiment_rows_are_the_learners_runs():
    X, y = small_drift_stream(n=600, change=300)
    params = {
        "gamma": 8.0,
        "C": 5.0,
        "r0": 10.0,
        "norma_gamma": 8.0,
        "norma_eta": 0.5,
        "norma_lam": 1e-3,
    }
    rows, out = tradeoff_experiment(
        X, y, window=60, periods=[50], thresholds=[2.0], ddm_levels=[3.0], params=params
    )
    assert out is params
    by = {r["algorithm"]: r for r in rows}
    assert set(by) == {"SW", "KDR", "DDM(SW)", "DDM(NORMA)", "NORMA"}
    est = df.KernelClassifier(loss="squared_hinge", kernel="rbf", gamma=8.0, C=5.0)
    kdr = prequential(KDR(est, window=60, threshold=20.0), (X, y))
    assert by["KDR"]["accuracy"] == kdr.accuracy
    assert by["KDR"]["computation_at"] == kdr.computation_at.tolist()
    sw = prequential(SlidingWindow(est, window=60, period=50), (X, y))
    assert by["SW"]["n_model_computations"] == sw.n_model_computations == 11
    assert by["NORMA"]["n_model_computations"] == 0
    with pytest.raises(ValueError, match="unknown algorithms"):
        tradeoff_experiment(X, y, algorithms=["SVM"], params=params)


@pytest.mark.slow  # 1,300 samples; a short run of the command: test_cli_target.py::test_stream
def test_stream_command(tmp_path, capsys):
    rc = main(
        [
            "stream",
            "checkerboard",
            "--n",
            "1300",
            "--window",
            "100",
            "--periods",
            "200",
            "--thresholds",
            "0.5",
            "--ddm-levels",
            "3",
            "--algorithms",
            "SW,KDR,NORMA",
            "--out",
            str(tmp_path),
            "--json",
        ]
    )
    assert rc == 0
    out = json.loads(capsys.readouterr().out)
    assert [r["algorithm"] for r in out["rows"]] == ["SW", "KDR", "NORMA"]
    assert out["rows"][0]["n_model_computations"] == 7  # at samples 100, 300, ..., 1300
    assert (tmp_path / "stream_fig3_checkerboard.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert out["params"]["r0"] > 0 and 0.5 < out["rows"][1]["accuracy"] <= 1


def test_stream_command_bad_input(capsys, tmp_path):
    assert main(["stream", "checkerboard", "--n", "1", "--out", str(tmp_path)]) == 2
    assert "--n" in capsys.readouterr().err
    assert (
        main(["stream", "checkerboard", "--periods", "a,b", "--n", "1200", "--out", str(tmp_path)])
        == 2
    )
    assert "--periods" in capsys.readouterr().err


def test_active_command(tmp_path, capsys):
    rc = main(
        [
            "active",
            "breast_cancer",
            "--seeds",
            "2",
            "--n-test",
            "150",
            "--m",
            "50",
            "--p",
            "10",
            "--out",
            str(tmp_path),
        ]
    )
    assert rc == 0
    text = capsys.readouterr().out
    assert "FGAL(m=50, p=10)" in text and "AL(m=10)" in text
    assert (tmp_path / "active_fig2_breast_cancer.png").is_file()


def test_compare_strategies_runs_each_strategy_per_seed(breast_cancer):
    X, y = breast_cancer
    est = df.KernelClassifier(loss="squared_hinge", kernel="rbf", gamma=0.05, fit_intercept=False)
    curves = compare_strategies(est, X, y, m=60, p=20, seeds=2, n_test=150, n_pool=200)
    assert list(curves) == ["FGAL(m=60, p=20)", "AL(m=60)", "AL(m=20)"]
    f = curves["FGAL(m=60, p=20)"]
    np.testing.assert_array_equal(f["n_labeled"], [50, 110, 170, 200])
    assert f["accuracy"].shape == (2, 4) and f["n_model_computations"] == 4
    # seed 1's FGAL curve is a plain run_active_learning on that seed's split
    perm = np.random.default_rng(1).permutation(len(y))
    te, po = perm[:150], perm[150:350]
    r = run_active_learning(FGAL(est, m=60, p=20), X[po], y[po], X[te], y[te], random_state=1)
    np.testing.assert_array_equal(f["accuracy"][1], r.accuracy)
    with pytest.raises(ValueError, match="exceeds"):
        compare_strategies(est, X, y, n_test=500, n_pool=200)
