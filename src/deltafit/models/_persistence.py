"""Saving and loading fitted deltafit models without pickle.

A model file is a NumPy ``.npz`` archive (a zip of ``.npy`` arrays with CRC-32 checks) holding
the ledger (ids, labels, rows or digests), the exact-update state (for the squared loss the
sufficient statistics and the tracked inverse, so a loaded model goes on updating exactly) and one
JSON document ``__meta__`` with the format version, the estimator's class and parameters.  It is
read with ``allow_pickle=False``: loading never executes code.  A corrupt, truncated or
version-mismatched file raises ValueError.
"""

from __future__ import annotations

import io
import json
import os

import numpy as np

from sklearn.base import clone

from .._validation import check_int, check_real
from ..losses import get_loss
from ._ledger import Ledger
from ._registry import state_class
from ..solvers import HingeResult, SolverResult

__all__ = ["save", "load", "FORMAT_VERSION"]

FORMAT = "deltafit-model"
FORMAT_VERSION = 1

# Feature maps that can be stored: scikit-learn transformers rebuilt from params + arrays.
_FEATURE_MAPS = ("Nystroem", "RBFSampler", "SkewedChi2Sampler", "PolynomialCountSketch")


def _estimator_classes():
    from ._kernel import KernelClassifier, KernelRegressor
    from ._linear import LinearClassifier, LinearRegressor

    return {c.__name__: c for c in (LinearClassifier, LinearRegressor, KernelClassifier,
                                    KernelRegressor)}


def _json_safe(value, name):
    try:
        json.dumps(value)
    except (TypeError, ValueError):
        raise ValueError(
            f"cannot save parameter {name}={value!r}: only JSON-representable values can be "
            "stored without pickle"
        ) from None
    return value


def _dump_feature_map(fmap, arrays):
    if fmap is None:
        return None
    name = type(fmap).__name__
    if name not in _FEATURE_MAPS or not type(fmap).__module__.startswith("sklearn."):
        raise ValueError(
            f"cannot save feature map {name}: supported are {list(_FEATURE_MAPS)} from "
            "sklearn.kernel_approximation"
        )
    params = {k: _json_safe(v, f"feature_map.{k}") for k, v in fmap.get_params().items()}
    fitted = {}
    for key, val in vars(fmap).items():
        if not key.endswith("_") or key.startswith("_"):
            continue
        if isinstance(val, np.ndarray):
            if val.dtype == object:
                raise ValueError(f"cannot save feature map attribute {key} (object array)")
            arrays[f"fmap__{key}"] = val
        elif isinstance(val, (int, float, str, bool, np.integer, np.floating)):
            fitted[key] = val.item() if hasattr(val, "item") else val
        else:
            raise ValueError(f"cannot save feature map attribute {key} of type {type(val)}")
    return {"class": name, "params": params, "scalars": fitted}


def _feature_map_param(fmap):
    """How to rebuild the ``feature_map`` parameter: unfitted (class + params) or the fitted map."""
    if fmap is None:
        return None
    from sklearn.exceptions import NotFittedError
    from sklearn.utils.validation import check_is_fitted

    try:
        check_is_fitted(fmap)
        return {"fitted": True}
    except NotFittedError:
        name = type(fmap).__name__
        if name not in _FEATURE_MAPS:
            raise ValueError(f"cannot save feature map {name}") from None
        return {"fitted": False, "class": name,
                "params": {k: _json_safe(v, f"feature_map.{k}")
                           for k, v in fmap.get_params().items()}}


def _load_feature_map(spec, arrays):
    if spec is None:
        return None
    import sklearn.kernel_approximation as ka

    name = spec.get("class")
    if name not in _FEATURE_MAPS:
        raise ValueError(f"corrupt model file: unknown feature map {name!r}")
    fmap = getattr(ka, name)(**spec["params"])
    for key, val in spec["scalars"].items():
        setattr(fmap, key, val)
    for key in arrays:
        if key.startswith("fmap__"):
            setattr(fmap, key[len("fmap__"):], np.asarray(arrays[key]))
    return fmap


def save(model, path):
    """Write a fitted deltafit estimator to ``path`` (``.npz`` + JSON, no pickle).

    Parameters
    ----------
    model : LinearClassifier, LinearRegressor, KernelClassifier or KernelRegressor
        A fitted model.  Pending low-rank corrections are folded first (a no-op on the model).
    path : str or os.PathLike
        Written exactly as given (no extension is appended).

    Raises
    ------
    ValueError
        If the model is not fitted or holds something that cannot be stored without pickle
        (a callable kernel, an unsupported feature map).
    """
    classes = _estimator_classes()
    name = type(model).__name__
    if name not in classes or not hasattr(model, "_ledger"):
        raise ValueError(f"save needs a fitted deltafit estimator, got {name}")
    params = model.get_params(deep=False)
    params.pop("feature_map", None)
    params["callback"] = None  # not part of the model
    if callable(params.get("kernel")):
        raise ValueError("cannot save a model with a callable kernel without pickle")
    params = {k: _json_safe(v, k) for k, v in params.items()}
    arrays = {}
    led, st = model._ledger, model._state
    larrays, keep = led.to_arrays()
    arrays.update(larrays)
    kind = st.kind
    arrays.update(st.to_arrays(keep))
    res = getattr(st, "result", None)
    meta = {
        "format": FORMAT,
        "format_version": FORMAT_VERSION,
        "estimator": name,
        "params": params,
        "state": kind,
        "spec": {k: _json_safe(v, k) for k, v in model._spec.items()},
        # the fitted problem, which set_params after the fit does not change
        "fitted": {"loss": st.loss.name, "C": st.C, "tol": float(st.opts.tol),
                   "max_iter": int(st.opts.max_iter)},
        "n_features_in": int(model.n_features_in_),
        "keep_rows": bool(led.keep_rows),
        "keep_digests": bool(led.keep_digests),
        "row_width": int(led.n_features),
        "feature_map": _dump_feature_map(getattr(model, "feature_map_", None), arrays),
        "feature_map_param": _feature_map_param(getattr(model, "feature_map", None)),
        "solver": None if res is None else {"grad_norm": res.grad_norm, "n_iter": res.n_iter,
                                            "objective": res.objective},
        "hinge": None if not isinstance(res, HingeResult) else {
            "kkt_violation": res.kkt_violation, "duality_gap": res.duality_gap,
            "dual_objective": res.dual_objective, "n_polish": res.n_polish},
        "n_samples_fit": int(getattr(model, "n_samples_fit_", led.n_samples)),
        "classes_given": bool(getattr(model, "_classes_given", False)),
    }
    if hasattr(model, "classes_"):
        c = np.asarray(model.classes_)
        if c.dtype == object:
            c = np.asarray(c.tolist())
            if c.dtype == object:
                raise ValueError("cannot save classes_ of mixed types")
        arrays["classes"] = c
    if hasattr(model, "feature_names_in_"):
        arrays["feature_names_in"] = np.asarray(model.feature_names_in_, dtype=str)
    from .._version import __version__

    meta["deltafit_version"] = __version__
    arrays["__meta__"] = np.frombuffer(json.dumps(meta).encode("utf-8"), dtype=np.uint8)
    buf = io.BytesIO()
    np.savez(buf, **arrays)
    with open(os.fspath(path), "wb") as fh:
        fh.write(buf.getvalue())


def _read(path):
    path = os.fspath(path)
    if not os.path.isfile(path):
        raise ValueError(f"no model file at {path!r}")
    try:
        with np.load(path, allow_pickle=False) as z:
            arrays = {k: z[k] for k in z.files}
    except Exception as exc:  # noqa: BLE001 - numpy/zipfile raise many kinds on corrupt input
        raise ValueError(
            f"{path!r} is not a readable deltafit model file ({type(exc).__name__}: {exc})"
        ) from exc
    if "__meta__" not in arrays:
        raise ValueError(f"{path!r} is not a deltafit model file (no __meta__ record)")
    try:
        meta = json.loads(arrays.pop("__meta__").tobytes().decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ValueError(f"{path!r}: corrupt metadata ({exc})") from exc
    if not isinstance(meta, dict) or meta.get("format") != FORMAT:
        raise ValueError(f"{path!r} is not a deltafit model file")
    if meta.get("format_version") != FORMAT_VERSION:
        raise ValueError(
            f"{path!r} has model format version {meta.get('format_version')!r}; this deltafit "
            f"reads version {FORMAT_VERSION}"
        )
    return meta, arrays


def load(path):
    """Read a model written by :func:`save`; the result predicts and keeps updating exactly.

    Raises
    ------
    ValueError
        For a missing, corrupt, truncated or version-mismatched file.
    """
    meta, arrays = _read(path)
    try:
        return _rebuild(meta, arrays)
    except (KeyError, TypeError, AttributeError, IndexError) as exc:
        raise ValueError(f"{os.fspath(path)!r}: corrupt model file ({exc!r})") from exc


def _fitted_options(model, fitted):
    """The fitted problem's settings: those saved with the state, else the parameters."""
    opts = model._solver_options()
    if fitted is not None:
        if fitted["loss"] not in model._losses:
            raise ValueError(f"corrupt model file: unknown loss {fitted['loss']!r}")
        opts.loss = get_loss(fitted["loss"])
        opts.C = check_real(fitted["C"], "fitted C", low=0.0)
        opts.tol = check_real(fitted["tol"], "fitted tol", low=0.0)
        opts.max_iter = check_int(fitted["max_iter"], "fitted max_iter")
    return opts


def _checked_spec(model, spec):
    """The saved snapshot of the fitted parameters, validated as ``fit`` validates them."""
    keys = {"fit_intercept", "intercept_scaling", *model._SPEC_KERNEL}
    if not isinstance(spec, dict) or set(spec) != keys:
        raise ValueError("corrupt model file: the fitted parameters do not match the estimator")
    probe = clone(model).set_params(fit_intercept=spec["fit_intercept"],
                                    **{k: spec[k] for k in model._SPEC_KERNEL})
    probe._validate_params()
    if "gamma" in spec:  # resolved at fit: a number
        check_real(spec["gamma"], "the fitted gamma", low=0.0)
    s = check_real(spec["intercept_scaling"], "the fitted intercept_scaling", low=0.0,
                   low_inclusive=True)
    if (s > 0.0) != bool(spec["fit_intercept"]):
        raise ValueError("corrupt model file: the fitted intercept does not match its scaling")
    return spec


def _solver_result(meta):
    """The saved solver diagnostics (None for the closed form); ``coef`` is set by the state."""
    solver, h = meta.get("solver"), meta.get("hinge")
    if solver is None:
        return None
    common = (None, float(solver["grad_norm"]), int(solver["n_iter"]), True, False,
              float(solver["objective"]))
    if h is None:
        return SolverResult(*common)
    return HingeResult(*common, kkt_violation=float(h["kkt_violation"]),
                       duality_gap=float(h["duality_gap"]),
                       dual_objective=float(h["dual_objective"]), n_polish=int(h["n_polish"]))


def _rebuild(meta, arrays):
    classes = _estimator_classes()
    name = meta["estimator"]
    if name not in classes:
        raise ValueError(f"corrupt model file: unknown estimator {name!r}")
    model = classes[name](**meta["params"])
    model._validate_params()
    for key, val in arrays.items():
        if np.issubdtype(val.dtype, np.floating) and not np.all(np.isfinite(val)):
            raise ValueError(f"corrupt model file: array {key} holds NaN or inf")
    led = Ledger.from_arrays(arrays, meta["row_width"], meta["keep_rows"], meta["keep_digests"])
    if name.startswith("Kernel"):
        led.growth = 1.25  # as in _KernelModel._build: the state is O(capacity²)
    n = led.n_samples
    if meta["keep_rows"] and arrays["ledger_X"].shape != (n, meta["row_width"]):
        raise ValueError("corrupt model file: stored rows do not match the ledger")
    model.n_features_in_ = int(meta["n_features_in"])
    if "classes" in arrays:
        model.classes_ = arrays["classes"]
    if "feature_names_in" in arrays:
        model.feature_names_in_ = arrays["feature_names_in"].astype(object)
    y = led.y[:n].copy()
    cls = state_class(meta["state"])
    if cls.kernel != name.startswith("Kernel"):
        raise ValueError(f"corrupt model file: state {cls.kind!r} does not fit {name}")
    opts = _fitted_options(model, meta.get("fitted"))
    if opts.loss.name not in cls.loss_names:
        raise ValueError(f"corrupt model file: state {cls.kind!r} does not solve "
                         f"loss={opts.loss.name!r}")
    model._state = cls.from_arrays(arrays, opts, y=y, capacity=led.capacity,
                                   max_rank=model._max_rank, result=_solver_result(meta))
    if not cls.kernel and model._state.beta.shape != (meta["row_width"],):
        raise ValueError("corrupt model file: coefficients do not match the feature width")
    if name.startswith("Kernel"):
        model.n_samples_fit_ = int(meta["n_samples_fit"])
    else:
        model.feature_map_ = _load_feature_map(meta["feature_map"], arrays)
        param = meta.get("feature_map_param")
        if param is not None:
            if param["fitted"]:
                import copy

                model.feature_map = copy.deepcopy(model.feature_map_)
            else:
                import sklearn.kernel_approximation as ka

                if param["class"] not in _FEATURE_MAPS:
                    raise ValueError(f"corrupt model file: unknown feature map {param['class']!r}")
                model.feature_map = getattr(ka, param["class"])(**param["params"])
    spec = meta.get("spec")
    if spec is None:  # a file from before the snapshot: its parameters are the fitted ones
        model._take_spec()
    else:
        model._spec = _checked_spec(model, spec)
    model._classes_given = bool(meta.get("classes_given", False))
    model._ledger = led
    return model
