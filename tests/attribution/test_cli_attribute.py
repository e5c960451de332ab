"""The ``deltafit attribute`` command on a CSV file with a named target column."""

import numpy as np
import pytest

from deltafit.cli import main


@pytest.fixture
def csv_file(tmp_path, cancer):
    X, y = cancer
    X, y = X[:160, :6], y[:160]
    path = tmp_path / "bc.csv"
    cols = [f"f{j}" for j in range(6)]
    with open(path, "w") as fh:
        fh.write(",".join(cols[:3] + ["diagnosis"] + cols[3:]) + "\n")
        for row, t in zip(X, y):
            vals = [f"{v:.6f}" for v in row]
            fh.write(",".join(vals[:3] + [str(t)] + vals[3:]) + "\n")
    return str(path)


def test_attribute_lists_samples_and_audits(csv_file, capsys):
    assert (
        main(
            [
                "attribute",
                csv_file,
                "--target",
                "diagnosis",
                "--C",
                "0.5",
                "--top",
                "3",
                "--audit",
                "2",
                "--max-removals",
                "3",
            ]
        )
        == 0
    )
    out = capsys.readouterr().out
    assert "most valuable:" in out and "most harmful:" in out
    assert out.count("  value ") == 6
    assert "least robust held-out predictions" in out
    assert out.count("predicted") == 2


def test_values_are_the_library_s(csv_file, capsys):
    """The listed top value is data_values' largest on the same split."""
    from sklearn.model_selection import train_test_split
    from sklearn.preprocessing import StandardScaler

    import deltafit
    from deltafit.attribution import data_values

    assert (
        main(
            [
                "attribute",
                csv_file,
                "--target",
                "diagnosis",
                "--scoring",
                "neg_log_loss",
                "--audit",
                "0",
                "--top",
                "1",
            ]
        )
        == 0
    )
    out = capsys.readouterr().out
    data = np.loadtxt(csv_file, delimiter=",", skiprows=1)
    y = data[:, 3].astype(int)
    X = StandardScaler().fit_transform(np.delete(data, 3, axis=1))
    Xtr, Xte, ytr, yte = train_test_split(X, y, test_size=0.2, random_state=0, stratify=y)
    v = data_values(
        deltafit.LinearClassifier(loss="logistic").fit(Xtr, ytr), Xte, yte, scoring="neg_log_loss"
    )
    assert f"value {v.values.max():+.5f}" in out


def test_regression_and_bad_options(csv_file, capsys):
    assert main(["attribute", csv_file, "--target", "f0", "--regression", "--top", "2"]) == 0
    assert "r2" in capsys.readouterr().out
    assert main(["attribute", csv_file, "--target", "diagnosis", "--test-size", "2"]) == 2
    assert "--test-size" in capsys.readouterr().err
    assert main(["attribute", csv_file, "--target", "nope"]) == 2
