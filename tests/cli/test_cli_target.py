"""``--target`` and text labels on every ``deltafit`` subcommand that reads a data file.

The data: scikit-learn's breast cancer (a stratified sample of 160 rows, as CSV with a header and
'malignant'/'benign' in its first column ``diagnosis``), and the same rows with the labels as
numbers in the last column, where each report must say the same; iris (three species) for the
multiclass runs of every command.
"""

import json

import numpy as np
import pytest
from sklearn.datasets import load_breast_cancer, load_iris

from deltafit.cli import main

COMMANDS = ("demo", "loo", "search", "treecv", "stream", "active")


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    d = tmp_path_factory.mktemp("target")
    bc = load_breast_cancer()
    rng = np.random.default_rng(0)
    rows = np.sort(
        np.concatenate(
            [
                rng.choice(np.flatnonzero(bc.target == c), k, replace=False)
                for c, k in ((0, 60), (1, 100))
            ]
        )
    )
    X = bc.data[rows]
    words = bc.target_names[bc.target[rows]]  # 'malignant' / 'benign'
    names = [n.replace(" ", "_") for n in bc.feature_names]
    text = d / "wdbc.csv"
    text.write_text(
        "\n".join(
            [",".join(["diagnosis"] + names)]
            + [",".join([w] + [repr(float(v)) for v in x]) for w, x in zip(words, X)]
        )
        + "\n"
    )
    # the same rows, labels as numbers in the same sorted order (benign 0 < malignant 1), last
    numeric = d / "wdbc_numeric.csv"
    np.savetxt(numeric, np.column_stack([X, words == "malignant"]), delimiter=",")
    last = d / "wdbc_last.csv"  # text labels in the default (last) column, no header
    last.write_text(
        "\n".join(",".join([repr(float(v)) for v in x] + [w]) for w, x in zip(words, X)) + "\n"
    )
    iris = load_iris()
    three = d / "iris.csv"
    three.write_text(
        "\n".join(
            ["sepal_length,sepal_width,petal_length,petal_width,species"]
            + [
                ",".join([repr(float(v)) for v in x] + [iris.target_names[t]])
                for x, t in zip(iris.data, iris.target)
            ]
        )
        + "\n"
    )
    return {
        "text": str(text),
        "numeric": str(numeric),
        "last": str(last),
        "iris": str(three),
        "n_benign": int(np.sum(words == "benign")),
        "n_malignant": int(np.sum(words == "malignant")),
    }


def _main(capsys, argv):
    rc = main(argv)
    captured = capsys.readouterr()
    return rc, captured.out, captured.err


def _error(capsys, argv):
    """The command fails with exit status 2 and a one-line message; return the message."""
    rc, _, err = _main(capsys, argv)
    command = argv[0]
    assert rc == 2, err
    assert err.startswith(f"deltafit {command}: error: ") and err.count("\n") == 1, err
    return err


def _classes(files):
    return f"benign ({files['n_benign']}), malignant ({files['n_malignant']})"


def _without_times(text):
    """A report without its timings (the numbers followed by ' s' or ' ms') and their ratios."""
    import re

    return re.sub(r"[\d.e+-]+x (faster|SLOWER)", "R", re.sub(r"[\d.e+-]+ m?s\b", "T s", text))


# ---------------------------------------------------------------------------
# each subcommand end to end on text labels: the report of the numeric labels
# ---------------------------------------------------------------------------
@pytest.mark.parametrize(
    "extra",
    [
        [],
        pytest.param(
            ["--model", "kernel", "--loss", "squared_hinge", "--gamma", "1e-6"],
            marks=pytest.mark.slow,
        ),
    ],
)
def test_demo(files, capsys, extra):
    extra = extra + ["--repeat", "1"]
    rc, out, err = _main(
        capsys,
        ["demo", "--dataset", files["text"], "--target", "diagnosis", "--loss", "squared"] + extra,
    )
    assert rc == 0, err
    assert f"classes: {_classes(files)}" in out
    assert out.count("equals the refit") == 3 and "check: every update within" in out
    rc, ref, _ = _main(capsys, ["demo", "--dataset", files["numeric"], "--loss", "squared"] + extra)
    assert rc == 0

    # the same run: only the title, the class names and the timings differ
    def steps(report):
        return _without_times(report).splitlines()[3:]

    assert steps(out) == steps(ref) and "test accuracy" in "\n".join(steps(out))
    assert "classes: 0 (100), 1 (60)" in ref


@pytest.mark.parametrize("target", ["diagnosis", "0", "-31"])
def test_loo(files, capsys, target):
    rc, out, err = _main(
        capsys, ["loo", files["text"], "--target", target, "--C", "0.1", "--loss", "logistic"]
    )
    assert rc == 0, err
    assert out.startswith(
        f"data: {files['text']}, 160 samples x 30 features; classes {_classes(files)}\n"
    )
    assert "leave-one-out: bounds_early: error rate" in out and "exact" in out
    _, ref, _ = _main(capsys, ["loo", files["numeric"], "--C", "0.1", "--loss", "logistic"])
    errors = out.split("error rate ")[1].split(",")[0]
    assert errors == ref.split("error rate ")[1].split(",")[0]


def test_loo_kfold_and_alo(files, capsys):
    for extra, what in ((["--cv", "4"], "4-fold"), (["--method", "alo"], "ALO")):
        rc, out, err = _main(capsys, ["loo", files["text"], "--target", "diagnosis"] + extra)
        assert rc == 0 and what in out, err


def test_search(files, capsys):
    argv = ["--model", "kernel", "--loss", "squared_hinge", "--C", "0.5,2", "--gamma", "0.01,0.1"]
    rc, out, err = _main(capsys, ["search", files["text"], "--target", "diagnosis"] + argv)
    assert rc == 0, err
    assert f"classes {_classes(files)}" in out and "searched 4 configurations" in out
    _, ref, _ = _main(capsys, ["search", files["numeric"]] + argv)
    assert out.split("best: ")[1].splitlines()[0] == ref.split("best: ")[1].splitlines()[0]


@pytest.mark.parametrize("learner", ["pegasos", "linear", "sgd", "perceptron", "gaussian-nb"])
def test_treecv(files, capsys, learner):
    argv = ["--learner", learner, "--cv", "5", "--json"]
    rc, out, err = _main(capsys, ["treecv", files["text"], "--target", "diagnosis"] + argv)
    assert rc == 0, err
    got = json.loads(out)
    assert got["classes"] == _classes(files) and got["n_features"] == 30
    rc, ref, _ = _main(capsys, ["treecv", files["numeric"]] + argv)
    assert rc == 0
    assert got["score"] == pytest.approx(json.loads(ref)["score"], abs=1e-12)


def test_treecv_report_and_positive_class(files, capsys):
    rc, out, err = _main(
        capsys,
        [
            "treecv",
            files["text"],
            "--target",
            "diagnosis",
            "--learner",
            "linear",
            "--cv",
            "4",
            "--positive-class",
            "malignant",
        ],
    )
    assert rc == 0, err
    assert out.startswith(
        f"data: {files['text']}, class malignant vs rest, 160 samples x 30 "
        f"features; classes {_classes(files)}\n"
    )
    err = _error(
        capsys, ["treecv", files["text"], "--target", "diagnosis", "--positive-class", "M"]
    )
    assert "--positive-class 'M' is not a label of the data (labels: benign, malignant)" in err


def test_stream(files, capsys, tmp_path):
    argv = [
        "--window",
        "40",
        "--periods",
        "40",
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
    rc, out, err = _main(capsys, ["stream", files["text"], "--target", "diagnosis"] + argv)
    assert rc == 0, err
    got = json.loads(out)
    assert got["classes"] == _classes(files)
    assert [r["algorithm"] for r in got["rows"]] == ["SW", "KDR", "NORMA"]
    rc, ref, _ = _main(capsys, ["stream", files["numeric"]] + argv)
    ref = json.loads(ref)
    for r, r0 in zip(got["rows"], ref["rows"]):
        assert r["accuracy"] == pytest.approx(r0["accuracy"], abs=1e-12)
        assert r["computation_at"] == r0["computation_at"]
    rc, out, err = _main(capsys, ["stream", files["text"], "--target", "diagnosis"] + argv[:-1])
    assert rc == 0, err
    assert f"window 40; classes {_classes(files)}" in out and "| KDR |" in out


def test_active(files, capsys, tmp_path):
    argv = [
        "--seeds",
        "1",
        "--n-test",
        "60",
        "--m",
        "30",
        "--p",
        "10",
        "--initial",
        "20",
        "--out",
        str(tmp_path),
    ]
    rc, out, err = _main(capsys, ["active", files["text"], "--target", "diagnosis"] + argv)
    assert rc == 0, err
    assert f"(classes {_classes(files)}): mean test accuracy" in out and "FGAL(m=30, p=10)" in out
    rc, ref, _ = _main(capsys, ["active", files["text"], "--target", "diagnosis", "--json"] + argv)
    rc0, ref0, _ = _main(capsys, ["active", files["numeric"], "--json"] + argv)
    got, ref0 = json.loads(ref), json.loads(ref0)
    assert rc == rc0 == 0 and got["classes"] == _classes(files)
    for k, curve in got["curves"].items():
        np.testing.assert_allclose(
            curve["accuracy_mean"], ref0["curves"][k]["accuracy_mean"], atol=1e-12
        )


def test_text_labels_in_the_default_last_column(files, capsys):
    rc, out, err = _main(capsys, ["loo", files["last"], "--C", "0.1"])
    assert rc == 0, err
    assert f"classes {_classes(files)}" in out


# ---------------------------------------------------------------------------
# what cannot work says so
# ---------------------------------------------------------------------------
@pytest.mark.parametrize(
    "argv, what",
    [
        (["loo", "--regression", "--loss", "squared"], "--regression"),
        (["search", "--regression", "--loss", "squared", "--C", "1"], "--regression"),
        (["treecv", "--learner", "ridge"], "--learner ridge (a regressor)"),
        (["treecv", "--learner", "lsqsgd"], "--learner lsqsgd (a regressor)"),
        (["treecv", "--learner", "sgd-regressor"], "--learner sgd-regressor (a regressor)"),
        (["treecv", "--learner", "sgd", "--scale-target"], "--scale-target"),
    ],
)
def test_regression_refuses_text_labels(files, capsys, argv, what):
    err = _error(capsys, argv[:1] + [files["text"], "--target", "diagnosis"] + argv[1:])
    assert (
        f"{what} needs a numeric target, but the target column holds text labels (benign, "
        f"malignant)"
    ) in err


def test_regression_takes_a_numeric_column_by_name(files, capsys):
    rc, out, err = _main(
        capsys,
        ["loo", files["text"], "--target", "mean_radius", "--regression", "--loss", "squared"],
    )
    assert rc == 2  # the text labels are then a feature column, named in the message
    assert "non-numeric value 'malignant' at line 2, column 1 ('diagnosis')" in err


def test_stream_active_and_pegasos_take_a_multiclass_file(files, capsys, tmp_path):
    """The commands whose learners are binary by their papers run one-vs-rest on iris."""
    iris = [files["iris"], "--target", "species"]
    species = "setosa (50), versicolor (50), virginica (50)"
    rc, out, err = _main(
        capsys,
        ["stream"]
        + iris
        + [
            "--window",
            "40",
            "--periods",
            "20",
            "--thresholds",
            "1",
            "--ddm-levels",
            "3",
            "--out",
            str(tmp_path),
            "--json",
        ],
    )
    assert rc == 0, err
    got = json.loads(out)
    assert got["classes"] == species
    assert [r["algorithm"] for r in got["rows"]] == ["SW", "KDR", "DDM(SW)", "DDM(NORMA)", "NORMA"]
    assert all(0.3 < r["accuracy"] <= 1 for r in got["rows"])
    rc, out, err = _main(
        capsys,
        ["active"]
        + iris
        + [
            "--seeds",
            "1",
            "--n-test",
            "50",
            "--m",
            "30",
            "--p",
            "10",
            "--initial",
            "20",
            "--out",
            str(tmp_path),
        ],
    )
    assert rc == 0, err
    assert f"(classes {species}): mean test accuracy" in out and "FGAL(m=30, p=10)" in out
    rc, out, err = _main(
        capsys,
        ["active"]
        + iris
        + [
            "--seeds",
            "1",
            "--n-test",
            "50",
            "--m",
            "30",
            "--p",
            "10",
            "--initial",
            "20",
            "--center",
            "newton",
            "--out",
            str(tmp_path),
        ],
    )
    assert rc == 0, err
    assert "FGAL(m=30, p=10, newton)" in out
    rc, out, err = _main(
        capsys, ["treecv"] + iris + ["--learner", "pegasos", "--cv", "5", "--permute", "--json"]
    )
    assert rc == 0, err
    got = json.loads(out)
    assert got["classes"] == species and got["learner"].startswith("OneVsRest(")
    # the same CV through the library: one-vs-rest Pegasos on the standardised rows
    from sklearn.datasets import load_iris
    from sklearn.model_selection import KFold
    from sklearn.preprocessing import StandardScaler

    from deltafit.model_selection import treecv
    from deltafit.stream import OneVsRest, Pegasos

    d = load_iris()
    r = treecv(
        OneVsRest(Pegasos(lam=1e-4)),
        StandardScaler().fit_transform(d.data),
        d.target_names[d.target],
        cv=KFold(5, shuffle=True, random_state=0),
    )
    assert got["score"] == pytest.approx(r.score, abs=1e-12)
    rc, out, err = _main(
        capsys,
        ["treecv"] + iris + ["--learner", "pegasos", "--cv", "5", "--positive-class", "setosa"],
    )
    assert rc == 0, err
    assert "learner: Pegasos()" in out and "class setosa vs rest" in out


def test_multiclass_learners_and_positive_class_on_a_multiclass_file(files, capsys):
    rc, out, err = _main(
        capsys, ["treecv", files["iris"], "--learner", "gaussian-nb", "--cv", "5", "--permute"]
    )
    assert rc == 0, err
    assert "classes setosa (50), versicolor (50), virginica (50)" in out
    rc, out, err = _main(
        capsys,
        [
            "treecv",
            files["iris"],
            "--learner",
            "linear",
            "--cv",
            "5",
            "--permute",
            "--positive-class",
            "setosa",
        ],
    )
    assert rc == 0, err
    assert "class setosa vs rest" in out and "accuracy = 1" in out  # setosa is separable


@pytest.mark.parametrize(
    "argv",
    [
        pytest.param(["demo", "--dataset"], marks=pytest.mark.slow),
        ["loo"],
        ["search", "--C", "0.1,1"],
        ["treecv", "--learner", "linear"],
    ],
)
def test_multiclass_models_take_a_multiclass_file(files, capsys, argv):
    rc, out, err = _main(capsys, argv + [files["iris"], "--target", "species"])
    assert rc == 0, err
    assert "setosa (50), versicolor (50), virginica (50)" in out


def test_a_single_class_is_refused(files, capsys, tmp_path):
    path = tmp_path / "one.csv"
    path.write_text("a,b,label\n1,2,x\n3,4,x\n5,6,x\n")
    for argv in (
        ["loo", str(path)],
        ["demo", "--dataset", str(path)],
        ["treecv", str(path), "--learner", "linear"],
    ):
        err = _error(capsys, argv + ["--target", "label"])
        assert "needs at least two classes, but the target holds only x" in err


@pytest.mark.parametrize("command", COMMANDS)
def test_target_errors(files, capsys, command, tmp_path):
    data = ["--dataset"] if command == "demo" else []
    err = _error(capsys, [command] + data + [files["text"], "--target", "Diagnosis"])
    assert "no column named 'Diagnosis'; the columns are 'diagnosis', 'mean_radius'" in err
    err = _error(capsys, [command] + data + [files["numeric"], "--target", "diagnosis"])
    assert "target 'diagnosis' is a column name, but the file has no header line" in err
    err = _error(capsys, [command] + data + [files["text"], "--target", "40"])
    assert "target column 40 out of range for 31 columns" in err
    bundled = "checkerboard" if command == "stream" else "breast_cancer"
    err = _error(capsys, [command] + data + [bundled, "--target", "0"])
    assert "a target column applies to CSV/TSV files only" in err


def test_target_with_a_libsvm_file(capsys, tmp_path):
    from sklearn.datasets import dump_svmlight_file

    path = tmp_path / "d.svm"
    dump_svmlight_file(np.eye(4), [0, 1, 0, 1], str(path))
    err = _error(capsys, ["loo", str(path), "--target", "0"])
    assert "d.svm: a target column applies to CSV/TSV files only" in err


@pytest.mark.parametrize("command", COMMANDS)
def test_help_mentions_target(capsys, command):
    with pytest.raises(SystemExit) as exc:
        main([command, "--help"])
    assert exc.value.code == 0
    out = capsys.readouterr().out
    assert "--target COLUMN" in out and "text" in out
