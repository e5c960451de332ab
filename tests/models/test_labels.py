"""The shared binary label encoder of the classifiers."""

import numpy as np
import pytest

from deltafit.utils._labels import BinaryLabels, LabelMessages


# ------------------------------------------------------------------------------ BinaryLabels
def test_labels_fit_encode_decode_strings():
    y = np.array(["spam", "ham", "spam"])
    labels = BinaryLabels().fit(y)
    assert labels.classes_.tolist() == ["ham", "spam"]
    t = labels.encode(y)
    np.testing.assert_array_equal(t, [1.0, -1.0, 1.0])
    assert t.dtype == np.float64
    np.testing.assert_array_equal(labels.decode([0.5, -2.0, 0.0]), ["spam", "ham", "ham"])


def test_labels_classes_given_allow_one_label():
    labels = BinaryLabels().fit(np.array([3, 3]), classes=[7, 3])
    assert labels.classes_.tolist() == [3, 7]
    np.testing.assert_array_equal(labels.encode([3, 7]), [-1.0, 1.0])


@pytest.mark.parametrize(
    "y, classes, match",
    [
        (np.array([1, 1]), None, "y has one class: the learner needs two"),
        (np.array([0, 1, 2]), None, "y has 3 classes"),
        (
            np.array([0.5, 1.5]),
            None,
            "Unknown label type: y must hold class labels, got continuous",
        ),
        (np.array([0, 1]), [0, 1, 2], "classes has 3 classes"),
        (np.array([0, 0]), [0], "y has one class"),
        (np.array([0, 5]), [0, 1], r"y has labels outside classes=\[0, 1\]"),
    ],
)
def test_labels_fit_errors(y, classes, match):
    with pytest.raises(ValueError, match=match):
        BinaryLabels().fit(y, classes)


def test_labels_wording_and_type_check():
    words = LabelMessages(
        name="Box",
        label_type=None,
        classes_size="two please, not {given}",
        outside_classes="unseen {unseen}",
        unknown="{what}: {first10}",
    )
    with pytest.raises(ValueError, match="Unknown label type: continuous"):  # scikit-learn's
        BinaryLabels(messages=words).fit(np.array([0.5, 1.5]))
    with pytest.raises(ValueError, match=r"two please, not \[1, 2, 3\]"):
        BinaryLabels(messages=words).fit(np.array([1, 2]), classes=[1, 2, 3])
    with pytest.raises(ValueError, match=r"unseen \[5\]"):
        BinaryLabels(messages=words).fit(np.array([1, 5]), classes=[1, 2])
    with pytest.raises(ValueError, match=r"z: \[9\]"):
        BinaryLabels(np.array([1, 2]), words).encode([1, 9], what="z")
    # without the check, labels given by classes= may be any two values
    labels = BinaryLabels(messages=words).fit(np.array([0.5]), classes=[0.5, 1.5], check_type=False)
    assert labels.classes_.tolist() == [0.5, 1.5]


def test_labels_partial_fit_convention():
    labels = BinaryLabels().partial_fit(np.array(["a"]), classes=["b", "a"])
    assert labels.classes_.tolist() == ["a", "b"]
    assert labels.partial_fit(np.array(["b"])) is labels
    assert labels.partial_fit(np.array(["b"]), classes=["a", "b"]).classes_.tolist() == ["a", "b"]
    with pytest.raises(ValueError, match=r"classes=\['a', 'c'\] differ from the model's"):
        labels.partial_fit(np.array(["a"]), classes=["a", "c"])
    with pytest.raises(ValueError, match=r"y has labels \['c'\] that are not in classes_"):
        labels.encode(["a", "c"])
