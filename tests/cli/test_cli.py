"""The deltafit command: demo runs on bundled real data and checks itself against a fresh fit."""

import io
import shutil
import subprocess
import sys

import numpy as np
import pytest

from deltafit import cli


def _run(argv):
    args = cli.build_parser().parse_args(argv + ["--repeat", "1"])
    out = io.StringIO()
    dev = cli.demo(args, out=out)
    return dev, out.getvalue()


@pytest.mark.parametrize(
    "argv,tol",
    [
        (["demo", "--shift", "0"], 1e-8),
        pytest.param(
            ["demo", "--dataset", "digits"],
            1e-8,  # binary: keep_data=False, rows passed in
            marks=pytest.mark.slow,
        ),
        pytest.param(
            ["demo", "--model", "kernel", "--dataset", "breast_cancer"],
            1e-8,
            marks=pytest.mark.slow,
        ),
        (["demo", "--loss", "logistic", "--dataset", "breast_cancer"], 1e-6),
        pytest.param(
            [
                "demo",
                "--model",
                "kernel",
                "--loss",
                "squared_hinge",
                "--dataset",
                "breast_cancer",
                "--gamma",
                "0.05",
            ],
            1e-6,
            marks=pytest.mark.slow,
        ),
    ],
)
def test_demo_matches_fresh_fit(argv, tol):
    dev, text = _run(argv)
    assert dev < tol
    for step in (
        "0. in service",
        "1. deletion request",
        "2. corrected labels",
        "3. new data",
        "4. what-if, before retraining",
    ):
        assert step in text
    # every update was checked against its refit, and the what-if bounds against the exact one
    assert text.count("equals the refit") == 3
    assert "bounds violated" in text and " 0 of " in text
    assert "check: every update within" in text


def test_demo_on_a_csv_file(tmp_path, breast_cancer):
    X, y = breast_cancer
    path = tmp_path / "data.csv"
    np.savetxt(path, np.column_stack([X[:200], y[:200]]), delimiter=",")
    dev, text = _run(["demo", "--dataset", str(path), "--forget", "2"])
    assert dev < 1e-8 and str(path) in text


def test_main_exit_codes_and_help(capsys):
    assert cli.main(["demo", "--dataset", "breast_cancer", "--repeat", "1"]) == 0
    assert cli.main([]) == 0
    assert "demo" in capsys.readouterr().out
    for argv in (["--help"], ["demo", "--help"]):
        with pytest.raises(SystemExit) as exc:
            cli.main(argv)
        assert exc.value.code == 0
    assert "--dataset" in capsys.readouterr().out


@pytest.mark.parametrize(
    "model,loss",
    [
        pytest.param("linear", "squared", marks=pytest.mark.slow),
        pytest.param("linear", "logistic", marks=pytest.mark.slow),
        ("kernel", "squared_hinge"),
    ],
)
def test_demo_on_multiclass_data(tmp_path, model, loss):
    path = tmp_path / "three.csv"
    rng = np.random.default_rng(0)
    y = np.arange(90) % 3
    X = rng.normal(size=(90, 2)) + 3.0 * np.eye(3)[y, :2]
    np.savetxt(path, np.column_stack([X, y]), delimiter=",")
    dev, out = _run(
        ["demo", "--dataset", str(path), "--model", model, "--loss", loss, "--forget", "2"]
    )
    assert dev < 1e-6
    assert "0 (30), 1 (30), 2 (30)" in out
    assert out.count("equals the refit") == 3
    assert "check: every update within" in out


@pytest.mark.skipif(shutil.which("deltafit") is None, reason="console script not installed")
def test_console_script():
    res = subprocess.run(
        ["deltafit", "demo", "--dataset", "breast_cancer", "--repeat", "1"],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert res.returncode == 0, res.stderr
    assert "check: every update within" in res.stdout


def test_module_entry_point():
    res = subprocess.run(
        [sys.executable, "-m", "deltafit.cli", "--version"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert res.returncode == 0 and "deltafit" in res.stdout
