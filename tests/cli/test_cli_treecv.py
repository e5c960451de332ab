"""The ``deltafit treecv`` command."""

import json

import numpy as np
import pytest
from sklearn.datasets import dump_svmlight_file
from sklearn.model_selection import KFold, cross_val_score
from sklearn.preprocessing import StandardScaler

import deltafit as df
from deltafit.cli import main


@pytest.fixture
def svm_file(tmp_path, breast_cancer):
    X, y = breast_cancer
    path = tmp_path / "bc.svm"
    dump_svmlight_file(X[:200], y[:200], str(path))
    return str(path)


@pytest.fixture
def csv_regression(tmp_path, digits):
    X, _ = digits
    rng = np.random.default_rng(0)
    y = X[:300] @ rng.standard_normal(X.shape[1]) + rng.standard_normal(300)
    path = tmp_path / "reg.csv"
    np.savetxt(path, np.column_stack([X[:300], y]), delimiter=",")
    return str(path)


def _json(capsys):
    return json.loads(capsys.readouterr().out.strip().splitlines()[-1])


def test_exact_learner_matches_k_refits(svm_file, capsys, breast_cancer):
    X, y = breast_cancer
    Xs = StandardScaler().fit_transform(X[:200])
    ref = cross_val_score(df.LinearClassifier(loss="logistic", C=1.0), Xs, y[:200], cv=KFold(5))
    assert (
        main(
            ["treecv", svm_file, "--learner", "linear", "--loss", "logistic", "--cv", "5", "--json"]
        )
        == 0
    )
    out = _json(capsys)
    assert out["n_folds"] == 5 and out["cv"] == "5-fold"
    assert out["score"] == pytest.approx(ref.mean(), abs=1e-12)


def test_pegasos_loo_with_progress(svm_file, capsys):
    assert (
        main(
            [
                "treecv",
                svm_file,
                "--learner",
                "pegasos",
                "--lam",
                "1e-3",
                "--cv",
                "loo",
                "--progress",
                "--shuffle",
            ]
        )
        == 0
    )
    captured = capsys.readouterr()
    assert "leave-one-out CV of 200 samples (randomized order" in captured.out
    assert "TreeCV folds" in captured.err  # the tqdm bar
    acc = float(captured.out.split("accuracy = ")[1].split()[0])
    assert 0.8 < acc <= 1.0


def test_lsqsgd_regression_csv(csv_regression, capsys):
    assert (
        main(
            [
                "treecv",
                csv_regression,
                "--learner",
                "lsqsgd",
                "--cv",
                "10",
                "--scale-target",
                "--scoring",
                "neg_mean_squared_error",
                "--json",
                "--strategy",
                "revert",
            ]
        )
        == 0
    )
    out = _json(capsys)
    assert out["scoring"] == "neg_mean_squared_error" and out["strategy"] == "revert"
    assert -1.0 < out["score"] < 0.0  # targets in [0, 1]
    assert out["passes"] == pytest.approx(out["n_sample_updates"] / 300)


def test_positive_class_and_permute(tmp_path, digits, capsys):
    X, y = digits  # even/odd labels 0/1 here; use the raw digit labels instead
    from sklearn.datasets import load_digits

    Xd, yd = load_digits(return_X_y=True)
    path = tmp_path / "digits.svm"
    dump_svmlight_file(Xd[:400], yd[:400], str(path))
    assert (
        main(
            [
                "treecv",
                str(path),
                "--learner",
                "sgd",
                "--positive-class",
                "3",
                "--cv",
                "4",
                "--permute",
                "--json",
            ]
        )
        == 0
    )
    out = _json(capsys)
    assert "class 3 vs rest" in out["data"] and out["score"] > 0.8


@pytest.mark.parametrize(
    "argv, message",
    [
        (["--cv", "1"], "--cv must be between 2"),
        (["--cv", "abc"], "--cv must be a number of folds"),
        (["--positive-class", "7"], "is not a label"),
        (["--learner", "lsqsgd", "--alpha", "fast"], "--alpha must be a number"),
    ],
)
def test_bad_arguments_exit_2(svm_file, capsys, argv, message):
    assert main(["treecv", svm_file] + argv) == 2
    assert message in capsys.readouterr().err
