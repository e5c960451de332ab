"""Load-time checks of a model file's arrays and of the invariants that tie them together.

:func:`check_arrays` checks the members' values (finite floats, labels, classes);
:func:`check_statistics` checks, state by state (class by class for a one-vs-rest state, output
by output for a multi-output one), that the stored state is the state of the stored rows and
labels.  This module checks what is the model's (the intercept column of the stored rows); each
state checks its own saved arrays (``ModelState.check_saved_statistics``,
``check_saved_solution``, ``check_saved_rows`` in ``deltafit._states``): ``ΦᵀΦ + ρI`` against
the counts, the stored solution against the stored problem, every stored row against what the
state keeps of it, the kernel matrix against the kernel of the stored rows.  Tolerances are
rounding bounds of the quantities compared, so they follow the stored problem's scale.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np
import scipy.sparse as sp

from deltafit._states._one_vs_rest import class_codes, column_arrays, column_view
from deltafit.persistence._schema import class_records

__all__ = ["check_arrays", "check_statistics"]


def check_arrays(
    meta: Mapping[str, Any], arrays: Mapping[str, np.ndarray], classifier: bool
) -> None:
    """The values of the members: finite floats, labels ±1 with both classes, the classes."""
    for key, val in arrays.items():
        if val.dtype.kind == "f" and not np.all(np.isfinite(val)):
            raise ValueError(f"corrupt model file: array {key} holds NaN or inf")
    if "classes" in arrays:
        c = arrays["classes"]
        ok = True
        try:
            ok = bool(np.all(c[:-1] < c[1:]))
        except TypeError:
            ok = False
        if not ok:
            raise ValueError(
                f"corrupt model file: classes {c.tolist()!r} are not distinct "
                "labels in increasing order"
            )
    if "ledger_y" in arrays:
        y = arrays["ledger_y"]
        if classifier and meta["one_vs_rest"] is not None:
            K = meta["one_vs_rest"]["n_classes"]
            if not np.all((y >= 0) & (y < K) & (y == np.round(y))):
                raise ValueError(
                    f"corrupt model file: a classifier's labels are not class indices 0..{K - 1}"
                )
            if not meta["classes_given"] and np.all(y == y[0]):
                raise ValueError("corrupt model file: a classifier's labels hold one class")
        elif classifier:
            if not np.all(np.abs(y) == 1.0):
                raise ValueError("corrupt model file: a classifier's labels are not ±1")
            if not meta["classes_given"] and (np.all(y > 0) or np.all(y < 0)):
                raise ValueError("corrupt model file: a classifier's labels hold one class")


def check_statistics(
    model: Any, meta: Mapping[str, Any], arrays: Mapping[str, np.ndarray], st: Any
) -> None:
    """:func:`_check_binary_statistics` for the state, class by class for a one-vs-rest one."""
    if meta["n_outputs"]:  # one column of the K-output state at a time
        y = arrays.get("ledger_y")
        for k in range(meta["n_outputs"]):
            mine = {key: a for key, a in arrays.items() if key != "ledger_y"}
            if y is not None:
                mine["ledger_y"] = y[:, k]
            mine.update(column_arrays(arrays, k))
            _check_binary_statistics(model, meta, mine, column_view(st, k), first=k == 0)
        return
    if not st.n_classes:
        _check_binary_statistics(model, meta, arrays, st)
        return
    y = arrays["ledger_y"]
    for k, (sub, (solver, hinge)) in enumerate(zip(st.states, class_records(meta, st.n_classes))):
        mine = {key: a for key, a in arrays.items() if not key.startswith("state_")}
        mine["ledger_y"] = class_codes(y, k)
        mine.update(st.class_arrays(arrays, k))
        _check_binary_statistics(
            model, dict(meta, solver=solver, hinge=hinge), mine, sub, first=k == 0
        )


def _check_binary_statistics(model, meta, arrays, st, first=True):
    """What ties a binary state to the ledger and to the fitted parameters: the intercept column
    of the stored rows here, then the state's own checks of its saved statistics, solution and
    rows (:meth:`~deltafit._states._protocol.ModelState.check_saved_statistics`,
    ``check_saved_solution``, ``check_saved_rows``)."""
    fitted = model.problem_
    s = fitted.intercept_scaling
    intercept = fitted.fit_intercept
    if not fitted.kernel and meta["keep_rows"] and intercept:
        col = arrays["ledger_X"][:, -1]
        if not np.all((col.toarray().ravel() if sp.issparse(col) else col) == s):
            raise ValueError(
                "corrupt model file: the stored rows' intercept column is not "
                f"intercept_scaling = {s}"
            )
    st.check_saved_statistics(
        arrays,
        n=meta["n_samples"],
        intercept_scaling=s,
        fit_intercept=intercept,
        n_positive=meta["n_positive"],
    )
    st.check_saved_solution(arrays, solver=meta["solver"])
    if meta["keep_rows"]:
        st.check_saved_rows(
            arrays,
            first=first,
            hinge=meta.get("hinge"),
            kernel=fitted.kernel_functions()[0] if fitted.kernel else None,
        )
