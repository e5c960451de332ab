"""The rollback helper of the updating objects: a failed update changes nothing."""

import numpy as np
import pytest

from deltafit.utils._transaction import atomic


# ------------------------------------------------------------------------------------ atomic
class _Box:
    pass


def _box():
    box = _Box()
    box.a = 1
    box.arr = np.zeros(3)
    return box


def test_atomic_keeps_success_and_restores_failure():
    box = _box()
    with atomic(box):
        box.a, box.b = 2, 3
    assert (box.a, box.b) == (2, 3)
    arr = box.arr
    with pytest.raises(KeyboardInterrupt):  # interruptions too
        with atomic(box):
            box.a = 5
            del box.b
            box.c = 4
            raise KeyboardInterrupt
    assert sorted(vars(box)) == ["a", "arr", "b"] and (box.a, box.b) == (2, 3)
    assert box.arr is arr


def test_atomic_attrs_only():
    box = _box()
    with pytest.raises(ValueError):
        with atomic(box, attrs=("a", "keys")):
            box.a, box.keys, box.other = 9, "set", "kept"
            raise ValueError
    assert box.a == 1 and not hasattr(box, "keys") and box.other == "kept"


def test_atomic_copies_arrays_changed_in_place():
    box = _box()
    with pytest.raises(ValueError):
        with atomic(box, copies=("arr", "absent")):
            box.arr[:] = 7.0
            raise ValueError
    np.testing.assert_array_equal(box.arr, 0.0)
    assert not hasattr(box, "absent")
    with atomic(box, copies=("arr",)):
        box.arr[:] = 7.0
    np.testing.assert_array_equal(box.arr, 7.0)
