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

from ._exact_squared import DualSquaredState, PrimalSquaredState
from ._gram import GramCache
from ._ledger import Ledger
from ._warm_hinge import KernelHingeState, PrimalHingeState
from ._warm_newton import KernelNewtonState, PrimalNewtonState
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
    if isinstance(st, PrimalSquaredState):
        kind = "primal_squared"
        arrays.update(st.to_arrays())
    elif isinstance(st, DualSquaredState):
        kind = "dual_squared"
        arrays.update(st.to_arrays(keep))
    elif isinstance(st, PrimalNewtonState):
        kind = "primal_newton"
        arrays["state_beta"] = st.beta
    elif isinstance(st, PrimalHingeState):
        kind = "primal_hinge"
        arrays["state_beta"] = st.beta
        arrays["state_dual"] = st.dual[keep]
    elif isinstance(st, KernelHingeState):  # before its base class KernelNewtonState
        kind = "kernel_hinge"
        arrays["state_K"] = st.gram.sub(keep)
        arrays["state_alpha"] = st.alpha[keep]
        arrays["state_dual"] = st.dual[keep]
    elif isinstance(st, KernelNewtonState):
        kind = "kernel_newton"
        arrays["state_K"] = st.gram.sub(keep)
        arrays["state_alpha"] = st.alpha[keep]
    else:  # pragma: no cover - every state is listed above
        raise ValueError(f"unknown state {type(st).__name__}")
    res = getattr(st, "result", None)
    meta = {
        "format": FORMAT,
        "format_version": FORMAT_VERSION,
        "estimator": name,
        "params": params,
        "state": kind,
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


def _dual_arrays(arrays, n):
    """The hinge state's dual variables, checked: n non-negative values (the upper bound is
    the C of the fit, which ``set_params`` may have changed before saving)."""
    dual = np.asarray(arrays["state_dual"], dtype=np.float64)
    if dual.shape != (n,) or dual.min(initial=0.0) < 0.0:
        raise ValueError("corrupt model file: the hinge dual variables do not match the ledger "
                         "or are negative")
    return dual


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
    kind = meta["state"]
    solver = meta.get("solver")
    result = None
    if solver is not None:
        result = SolverResult(None, float(solver["grad_norm"]), int(solver["n_iter"]), True,
                              False, float(solver["objective"]))
    if kind in ("primal_hinge", "kernel_hinge"):
        h = meta["hinge"]
        result = HingeResult(None, result.grad_norm, result.n_iter, True, False,
                             result.objective, kkt_violation=float(h["kkt_violation"]),
                             duality_gap=float(h["duality_gap"]),
                             dual_objective=float(h["dual_objective"]),
                             n_polish=int(h["n_polish"]))
    rho = 1.0 / (2.0 * model.C)
    if kind == "primal_squared":
        model._state = PrimalSquaredState.from_arrays(arrays, rho, model._max_rank)
    elif kind == "dual_squared":
        model._state = DualSquaredState.from_arrays(arrays, y, rho, led.capacity,
                                                    model._max_rank)
    elif kind == "primal_newton":
        st = PrimalNewtonState(model._solver_options())
        st.beta = np.asarray(arrays["state_beta"], dtype=np.float64)
        result.coef = st.beta
        st.result = result
        model._state = st
    elif kind == "primal_hinge":
        st = PrimalHingeState(model._solver_options())
        st.beta = np.asarray(arrays["state_beta"], dtype=np.float64)
        dual = _dual_arrays(arrays, n)
        st.dual = np.zeros(led.capacity)
        st.dual[:n] = dual
        result.coef, result.alpha = st.beta, dual
        st.result = result
        model._state = st
    elif kind == "kernel_hinge":
        st = KernelHingeState(model._solver_options())
        K = np.asarray(arrays["state_K"], dtype=np.float64)
        alpha = np.asarray(arrays["state_alpha"], dtype=np.float64)
        dual = _dual_arrays(arrays, n)
        if K.shape != (n, n) or alpha.shape != (n,) or \
                not np.array_equal(alpha, y * dual + 0.0):
            raise ValueError("corrupt model file: the kernel state has inconsistent shapes or "
                             "dual variables")
        st.gram = GramCache(K, led.capacity)
        st.alpha = np.zeros(led.capacity)
        st.alpha[:n] = alpha
        st.dual = np.zeros(led.capacity)
        st.dual[:n] = dual
        result.coef, result.alpha = alpha, dual
        st.result = result
        model._state = st
    elif kind == "kernel_newton":
        st = KernelNewtonState(model._solver_options())
        K = np.asarray(arrays["state_K"], dtype=np.float64)
        alpha = np.asarray(arrays["state_alpha"], dtype=np.float64)
        if K.shape != (n, n) or alpha.shape != (n,):
            raise ValueError("corrupt model file: the kernel state has inconsistent shapes")
        st.gram = GramCache(K, led.capacity)
        st.alpha = np.zeros(led.capacity)
        st.alpha[:n] = alpha
        result.coef = alpha
        st.result = result
        model._state = st
    else:
        raise ValueError(f"corrupt model file: unknown state {kind!r}")
    expected = meta["row_width"] if kind.startswith("primal") else None
    if expected is not None and model._state.beta.shape != (expected,):
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
    model._classes_given = bool(meta.get("classes_given", False))
    model._ledger = led
    return model
