"""The ``deltafit loo`` / ``deltafit search`` commands."""

import pytest
from sklearn.datasets import dump_svmlight_file

from deltafit.cli import main
from deltafit.cli._cv import parse_grid


def test_parse_grid():
    assert parse_grid("0.1,1,10") == [0.1, 1.0, 10.0]
    assert parse_grid("2^-2..2^1") == [0.25, 0.5, 1.0, 2.0]
    assert parse_grid("2^-1, 3") == [0.5, 3.0]
    for bad in ("", "2^-1..3^2", "a"):
        with pytest.raises(ValueError):
            parse_grid(bad)


@pytest.fixture
def svm_file(tmp_path, breast_cancer):
    X, y = breast_cancer
    path = tmp_path / "bc.svm"
    dump_svmlight_file(X[:150], y[:150], str(path))
    return str(path)


def test_loo_command_reports_how(svm_file, capsys):
    assert main(["loo", svm_file, "--C", "0.1", "--loss", "logistic"]) == 0
    out = capsys.readouterr().out
    assert "leave-one-out: bounds_early" in out and "exact" in out
    assert "decided by certified bounds" in out


def test_loo_command_matches_library(svm_file, capsys, breast_cancer):
    from sklearn.preprocessing import StandardScaler

    import deltafit as df
    from deltafit.model_selection import loo

    X, y = breast_cancer
    r = loo(
        df.LinearClassifier(loss="logistic", C=0.1),
        StandardScaler().fit_transform(X[:150]),
        y[:150],
        method="refit",
    )
    assert main(["loo", svm_file, "--C", "0.1", "--loss", "logistic", "--method", "refit"]) == 0
    assert f"({r.n_errors}/150)" in capsys.readouterr().out


def test_kfold_and_alo_and_regression(svm_file, capsys):
    assert main(["loo", svm_file, "--cv", "5", "--loss", "squared_hinge"]) == 0
    assert "5-fold" in capsys.readouterr().out
    assert main(["loo", svm_file, "--regression", "--loss", "squared"]) == 0
    assert "closed_form: MSE" in capsys.readouterr().out


def test_search_command(svm_file, capsys):
    assert main(["search", svm_file, "--C", "2^-3..2^2"]) == 0
    out = capsys.readouterr().out
    assert "searched 6 configurations" in out and "best: {'C':" in out
    assert (
        main(
            [
                "search",
                svm_file,
                "--model",
                "kernel",
                "--C",
                "0.5,2",
                "--gamma",
                "0.01,0.1",
                "--loss",
                "squared_hinge",
                "--no-prune",
            ]
        )
        == 0
    )
    assert "searched 4 configurations" in capsys.readouterr().out


def test_bad_arguments_exit_2(svm_file, capsys):
    assert main(["loo", svm_file, "--method", "nope"]) == 2
    assert "method must be one of" in capsys.readouterr().err
    assert main(["search", svm_file, "--C", "x"]) == 2
    assert main(["loo", svm_file, "--regression", "--method", "bounds"]) == 2


def test_missing_file_is_an_error(tmp_path, capsys):
    assert main(["loo", str(tmp_path / "missing.svm")]) == 2
    assert "file not found" in capsys.readouterr().err
