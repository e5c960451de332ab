"""Reading a model file back into a fitted model, trusting nothing in the file.

:func:`load` reads the archive's directory first (:mod:`deltafit.persistence._archive`): every
member must be an uncompressed, unencrypted ``.npy`` of a known name, listed once, and the
members must fit in the archive.  ``__meta__`` is read and checked (every field, its type and
its agreement with the others: :mod:`deltafit.persistence._schema`); from it the shape and type
of every other member follow, and each member's ``.npy`` header is checked against them before
any data is read.  Memory is then bounded by the file's size.  The arrays are checked (finite,
ids increasing, labels ±1, classes) and so are the invariants that tie them together
(:mod:`deltafit.persistence._checks`); a pipeline's transformers are rebuilt by
:mod:`deltafit.persistence._pipelines`.  Any violation raises ValueError naming the file and
the problem; loading never unpickles or executes anything from the file.
"""

from __future__ import annotations

import copy
import os
import zipfile
from typing import Any

import numpy as np
import sklearn.kernel_approximation as ka
from sklearn.base import clone

from deltafit._ledger import Ledger
from deltafit._states._one_vs_rest import one_vs_rest_class
from deltafit._states._protocol import SolverOptions
from deltafit.losses import get_loss
from deltafit.persistence import _transformers as ta
from deltafit.persistence._archive import (
    KIND_NAMES,
    dtype_ok,
    read_directory,
    read_header,
    read_member,
)
from deltafit.persistence._checks import check_arrays, check_statistics
from deltafit.persistence._pipelines import load_pipeline
from deltafit.persistence._schema import (
    class_records,
    estimator_classes,
    expected_members,
    is_classifier_estimator,
    is_kernel_estimator,
    read_meta,
    state_of,
)
from deltafit.persistence._transformers import FEATURE_MAPS
from deltafit.solvers import HingeResult, SolverResult
from deltafit.utils._validation import check_int, check_real

__all__ = ["load"]


def _read_archive(path):
    """``(meta, arrays)`` of the model file at ``path``, every member checked against the
    metadata before its data is read."""
    size = os.path.getsize(path)
    try:
        zf = zipfile.ZipFile(path)
    except (
        zipfile.BadZipFile,
        zipfile.LargeZipFile,
        OSError,
        EOFError,
        ValueError,
        NotImplementedError,
        RuntimeError,
    ) as exc:
        raise ValueError(
            f"not a readable deltafit model file ({type(exc).__name__}: {exc})"
        ) from None
    with zf:
        members = read_directory(zf, size)
        if "__meta__" not in members:
            raise ValueError("not a deltafit model file (no __meta__ record)")
        meta = read_meta(zf, members["__meta__"])
        headers = {k: read_header(zf, info) for k, info in members.items() if k != "__meta__"}
        expected = expected_members(meta, headers)
        unknown = sorted(set(headers) - set(expected))
        if unknown:
            raise ValueError(f"corrupt model file: unknown member(s) {unknown}")
        missing = sorted(
            k for k, (_, _, required) in expected.items() if required and k not in headers
        )
        if missing:
            raise ValueError(f"corrupt model file: missing member(s) {missing}")
        for k, h in headers.items():
            shape, kinds, _ = expected[k]
            ok_shape = shape(h.shape) if callable(shape) else h.shape == shape
            if not ok_shape or not dtype_ok(h.dtype, kinds):
                want = "" if callable(shape) else f" shape {shape} of"
                raise ValueError(
                    f"corrupt model file: member {k!r} has shape {h.shape} and dtype "
                    f"{h.dtype.str!r}; the metadata (n_samples={meta['n_samples']}, "
                    f"row_width={meta['row_width']}, n_features_in={meta['n_features_in']}) "
                    f"calls for{want} {KIND_NAMES[kinds]}"
                )
        arrays = {k: read_member(zf, h) for k, h in headers.items()}
    return meta, arrays


def load(path: str | os.PathLike) -> Any:
    """Read a model written by :func:`save`; the result predicts and keeps updating exactly.

    Nothing in the file is trusted: the sizes the metadata declares are checked against every
    member's header (and the members against the archive) before any array is read, unknown
    members and fields are refused, and every invariant that ties the parts together is checked
    (see :mod:`deltafit.persistence._read`), so that a damaged or contradictory file raises here
    rather than when the model is used.

    Parameters
    ----------
    path : str or os.PathLike

    Returns
    -------
    LinearClassifier, LinearRegressor, KernelClassifier, KernelRegressor or UpdatablePipeline
        A pipeline's transformers are rebuilt from their class (one of
        :data:`deltafit.persistence._transformers.SUPPORTED`), checked parameters and stored
        arrays, and must reproduce their saved output on two fixed rows.

    Raises
    ------
    ValueError
        For a missing, corrupt, truncated, contradictory or version-mismatched file; the
        message names the file and the problem.

    Examples
    --------
    >>> import os, tempfile
    >>> import numpy as np
    >>> import deltafit
    >>> from deltafit.datasets import load_breast_cancer
    >>> X, y = load_breast_cancer()
    >>> path = os.path.join(tempfile.mkdtemp(), "model.npz")
    >>> deltafit.save(deltafit.LinearClassifier().fit(X, y), path)
    >>> m = deltafit.load(path)                       # no pickle; checked before it is read
    >>> _ = m.remove([0, 1])                          # and it goes on updating exactly
    >>> m.n_samples_
    567
    """
    path = os.fspath(path)
    if not os.path.isfile(path):
        raise ValueError(f"no model file at {path!r}")
    try:
        meta, arrays = _read_archive(path)
        return _rebuild(meta, arrays)
    except ValueError as exc:
        raise ValueError(f"{path!r}: {exc}") from None
    except (
        KeyError,
        TypeError,
        AttributeError,
        IndexError,
        ArithmeticError,
        np.linalg.LinAlgError,
    ) as exc:  # a check missed: still a corrupt file
        raise ValueError(f"{path!r}: corrupt model file ({type(exc).__name__}: {exc})") from None


def _fitted_options(fitted):
    """The fitted problem's settings (the loss, C and solver settings saved with the state;
    no callback: a file holds none)."""
    return SolverOptions(
        get_loss(fitted["loss"]),
        check_real(fitted["C"], "fitted C", low=0.0),
        check_real(fitted["tol"], "fitted tol", low=0.0),
        check_int(fitted["max_iter"], "fitted max_iter"),
        None,
    )


def _checked_spec(model, spec):
    """The saved snapshot of the fitted parameters, validated as ``fit`` validates them."""
    keys = {"fit_intercept", "intercept_scaling", *model._SPEC_KERNEL}
    if not isinstance(spec, dict) or set(spec) != keys:
        raise ValueError("corrupt model file: the fitted parameters do not match the estimator")
    probe = clone(model).set_params(
        fit_intercept=spec["fit_intercept"], **{k: spec[k] for k in model._SPEC_KERNEL}
    )
    probe._validate_params()
    if "gamma" in spec:  # resolved at fit: a number
        check_real(spec["gamma"], "the fitted gamma", low=0.0)
    s = check_real(
        spec["intercept_scaling"], "the fitted intercept_scaling", low=0.0, low_inclusive=True
    )
    if (s > 0.0) != bool(spec["fit_intercept"]):
        raise ValueError("corrupt model file: the fitted intercept does not match its scaling")
    return spec


def _solver_result(solver, h):
    """The saved solver diagnostics (None for the closed form); ``coef`` is set by the state."""
    if solver is None:
        return None
    common = (
        None,
        float(solver["grad_norm"]),
        int(solver["n_iter"]),
        True,
        False,
        float(solver["objective"]),
    )
    if h is None:
        return SolverResult(*common)
    return HingeResult(
        *common,
        kkt_violation=float(h["kkt_violation"]),
        duality_gap=float(h["duality_gap"]),
        dual_objective=float(h["dual_objective"]),
        n_polish=int(h["n_polish"]),
    )


def _construct(cls, params, what):
    """``cls(**params)`` with its parameters validated; ValueError naming ``what``."""
    expected = set(cls().get_params(deep=False)) - {"feature_map"}
    if set(params) != expected:
        raise ValueError(
            f"corrupt model file: the {what} are not those of {cls.__name__} "
            f"(unknown: {sorted(set(params) - expected)}, missing: "
            f"{sorted(expected - set(params))})"
        )
    if params.get("callback") is not None:
        raise ValueError(f"corrupt model file: the {what} hold a callback")
    model = cls(**params)
    model._validate_params()
    return model


def _load_feature_map(spec, arrays, d, width_out):
    """The fitted feature map, rebuilt from its class, parameters and fitted attributes, and
    checked to map ``d`` features to ``width_out``."""
    fmap = ta.build(spec["class"], spec["params"], "feature map", FEATURE_MAPS)
    ta.restore_fitted(
        fmap,
        dict(spec["scalars"]),
        {k: arrays["fmap__" + k] for k in spec["arrays"]},
        "feature map",
    )
    return ta.check_probe(fmap, d, spec["probe"], width_out, "feature map")


def _rebuild(meta, arrays):
    classes = estimator_classes()
    name = meta["estimator"]
    est = classes[name]
    model = _construct(est, meta["params"], "parameters")
    # the parameters the model was fitted with: valid parameters of the same estimator
    spec = _checked_spec(model, meta["spec"])
    kernel, classifier = is_kernel_estimator(est), is_classifier_estimator(est)
    fit_intercept = spec["fit_intercept"]
    n, d, width = meta["n_samples"], meta["n_features_in"], meta["row_width"]
    if not kernel and meta["feature_map"] is None and width != d + int(fit_intercept):
        raise ValueError(
            f"corrupt model file: the row width {width} does not match "
            f"n_features_in {d} (+1 for the intercept)"
        )
    check_arrays(meta, arrays, classifier)
    led = Ledger.from_arrays(
        arrays,
        width,
        meta["keep_rows"],
        meta["keep_digests"],
        meta["n_outputs"] or 0,
        meta["sparse_rows"],
        meta["digest_scheme"],
    )
    if meta["sparse_rows"]:  # the checks below read the rows as one (sparse) matrix
        arrays["ledger_X"] = led.X[:n]
    if meta["n_samples_fit"] > led.next_id:
        raise ValueError(
            f"corrupt model file: n_samples_fit {meta['n_samples_fit']} exceeds "
            f"the ids handed out ({led.next_id})"
        )
    model.n_features_in_ = d
    if "classes" in arrays:
        model.classes_ = arrays["classes"]
    if "feature_names_in" in arrays:
        model.feature_names_in_ = arrays["feature_names_in"].astype(object)
    cls, n_classes = state_of(meta, classifier)
    opts = _fitted_options(meta["fitted"])
    if n_classes:
        if model.classes_.size != n_classes:
            raise ValueError("corrupt model file: the one-vs-rest classes do not match classes")
        results = (
            None
            if meta["solver"] is None
            else [_solver_result(s, h) for s, h in class_records(meta, n_classes)]
        )

        def make_state(max_rank):
            return one_vs_rest_class(cls).from_arrays_of(
                arrays,
                opts,
                base=cls,
                n_classes=n_classes,
                y=led.y[:n].copy(),
                capacity=led.capacity,
                max_rank=max_rank,
                results=results,
            )
    else:

        def make_state(max_rank):
            return cls.from_arrays(
                arrays,
                opts,
                y=led.y[:n].copy(),
                capacity=led.capacity,
                max_rank=max_rank,
                result=_solver_result(meta["solver"], meta["hinge"]),
            )

    if kernel:
        model.n_samples_fit_ = meta["n_samples_fit"]
    else:
        fm = meta["feature_map"]
        model.feature_map_ = (
            None if fm is None else _load_feature_map(fm, arrays, d, width - int(fit_intercept))
        )
        param = meta["feature_map_param"]
        if param is not None:
            if param["fitted"]:
                model.feature_map = copy.deepcopy(model.feature_map_)
            else:
                try:
                    model.feature_map = getattr(ka, param["class"])(**param["params"])
                    model.feature_map.get_params()
                    check = getattr(model.feature_map, "_validate_params", None)
                    if check is not None:
                        check()
                except Exception as exc:  # noqa: BLE001
                    raise ValueError(
                        f"corrupt model file: feature_map parameter ({type(exc).__name__}: {exc})"
                    ) from None
    state = model._restore(
        spec=spec,
        ledger=led,
        make_state=make_state,
        n_outputs=meta["n_outputs"] or 0,
        n_positive=meta["n_positive"],
        classes_given=meta["classes_given"],
        sparse_input=meta["sparse_input"],
    )
    check_statistics(model, meta, arrays, state)
    if "pipeline" in meta:
        return load_pipeline(meta["pipeline"], arrays, model)
    return model
