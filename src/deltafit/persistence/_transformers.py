"""Fitted scikit-learn transformers as JSON parameters + arrays, and back, without pickle.

Used by :mod:`deltafit.persistence` for a linear model's ``feature_map_`` and for the frozen
transformers of a :class:`deltafit.UpdatablePipeline`.  A transformer is stored as its class
name (from a fixed list of scikit-learn classes, :data:`SUPPORTED`), its parameters (JSON; a
tuple is written as ``{"__tuple__": [...]}``), its fitted scalars (JSON) and its fitted arrays
(``.npy`` members, numbers or text only), plus its output on two fixed rows (a fingerprint).

Rebuilding trusts nothing: the class is looked up in :data:`SUPPORTED` only (exact class, no
subclass), its parameters are validated by scikit-learn, a fitted attribute may not replace a
method, property, parameter or anything the constructor set, every value is a plain number,
string or array, and the rebuilt transformer must reproduce its fingerprint.
"""

from __future__ import annotations

import importlib
import math
import re
import warnings
from collections.abc import Iterable, Mapping
from typing import Any

import numpy as np

__all__ = [
    "SUPPORTED",
    "FEATURE_MAPS",
    "FIT_ON_WIDTH",
    "check_supported",
    "encode_params",
    "decode_params",
    "fitted_state",
    "build",
    "refit_on_width",
    "restore_fitted",
    "probe_rows",
    "probe",
    "check_probe",
]

# class name -> scikit-learn module that defines it: every transformer that can be stored
SUPPORTED = {
    "StandardScaler": "sklearn.preprocessing",
    "MinMaxScaler": "sklearn.preprocessing",
    "MaxAbsScaler": "sklearn.preprocessing",
    "Normalizer": "sklearn.preprocessing",
    "PolynomialFeatures": "sklearn.preprocessing",
    "Nystroem": "sklearn.kernel_approximation",
    "RBFSampler": "sklearn.kernel_approximation",
    "SkewedChi2Sampler": "sklearn.kernel_approximation",
    "PolynomialCountSketch": "sklearn.kernel_approximation",
    "TfidfTransformer": "sklearn.feature_extraction.text",
}
# those a linear model takes as ``feature_map``
FEATURE_MAPS = ("Nystroem", "RBFSampler", "SkewedChi2Sampler", "PolynomialCountSketch")
# those whose fit reads only the number of features: rebuilt by fitting them on a row of zeros
# (``PolynomialFeatures`` keeps private state that ``transform`` trusts to fill an
# ``np.empty`` output, so a stored value could never be checked by its output alone)
FIT_ON_WIDTH = ("PolynomialFeatures", "Normalizer")

_NUMPY_SCALAR = "__numpy_scalar__"  # {_NUMPY_SCALAR: dtype.str, "value": v}: a NumPy scalar
_PUBLIC_ATTR = re.compile(r"[A-Za-z][A-Za-z0-9_]{0,99}_")
_SCALAR_TYPES = (bool, int, float, str, np.integer, np.floating, np.bool_)


def _class(name: str) -> type:
    return getattr(importlib.import_module(SUPPORTED[name]), name)


def check_supported(obj: Any, what: str, allowed: Iterable[str] | None = None) -> str:
    """The class name of ``obj`` if it is one of ``allowed`` (default: every supported class)
    exactly; else ValueError naming the class and the supported list."""
    allowed = tuple(SUPPORTED) if allowed is None else tuple(allowed)
    name = type(obj).__name__
    if name not in allowed or type(obj) is not _class(name):
        raise ValueError(
            f"cannot save {what} {type(obj).__module__}.{name} without pickle: "
            f"supported are {list(allowed)} from scikit-learn"
        )
    return name


def encode_params(params: Mapping[str, Any], what: str) -> dict[str, Any]:
    """``get_params(deep=False)`` as JSON: numbers, strings, None, lists, dicts; a tuple as
    ``{"__tuple__": [...]}``.  ValueError for anything else (a callable, a RandomState)."""

    def enc(v: Any, name: str) -> Any:
        if v is None or isinstance(v, (bool, str)):
            return v
        if isinstance(v, (int, np.integer)):
            return int(v)
        if isinstance(v, (float, np.floating)):
            if not math.isfinite(float(v)):
                raise ValueError(f"cannot save {name}={v!r}: not a finite number")
            return float(v)
        if isinstance(v, tuple):
            return {"__tuple__": [enc(x, name) for x in v]}
        if isinstance(v, list):
            return [enc(x, name) for x in v]
        if isinstance(v, dict) and all(isinstance(k, str) and k != "__tuple__" for k in v):
            return {k: enc(x, f"{name}.{k}") for k, x in v.items()}
        raise ValueError(
            f"cannot save {name}={v!r}: only numbers, strings, None, lists, tuples "
            "and dicts of them can be stored without pickle"
        )

    return {k: enc(v, f"{what}.{k}") for k, v in params.items()}


def decode_params(params: Any, what: str) -> dict[str, Any]:
    """Inverse of :func:`encode_params` (the values' types checked)."""

    def dec(v: Any) -> Any:
        if v is None or isinstance(v, (bool, int, float, str)):
            return v
        if isinstance(v, list):
            return [dec(x) for x in v]
        if isinstance(v, dict):
            if set(v) == {"__tuple__"} and isinstance(v["__tuple__"], list):
                return tuple(dec(x) for x in v["__tuple__"])
            return {k: dec(x) for k, x in v.items()}
        raise ValueError(f"corrupt model file: {what} holds a value of type {type(v).__name__}")

    if not isinstance(params, dict):
        raise ValueError(f"corrupt model file: {what} is not an object")
    return {k: dec(v) for k, v in params.items()}


def fitted_state(obj: Any, what: str) -> tuple[dict[str, Any], dict[str, np.ndarray]]:
    """``(scalars, arrays)``: the public fitted attributes of ``obj`` (names ending in ``_``).

    Raises ValueError for a fitted attribute that is neither a plain scalar nor an array of
    numbers or text (it could not be stored without pickle)."""
    params = set(obj.get_params(deep=False))
    scalars: dict[str, Any] = {}
    arrays: dict[str, np.ndarray] = {}
    for key, val in vars(obj).items():
        if key in params:
            continue
        if not _PUBLIC_ATTR.fullmatch(key):
            continue
        if isinstance(val, np.ndarray):
            if val.dtype == object and all(isinstance(v, str) for v in val.flat):
                val = np.asarray(val.tolist(), dtype=str)  # feature names: text, not objects
            if val.dtype.kind not in "biufU" or val.dtype.fields is not None:
                raise ValueError(f"cannot save {what} attribute {key} (dtype {val.dtype})")
            arrays[key] = val
        elif val is None:  # e.g. StandardScaler(with_std=False).var_
            scalars[key] = None
        elif isinstance(val, _SCALAR_TYPES):
            item = val.item() if isinstance(val, np.generic) else val
            if isinstance(item, float) and not math.isfinite(item):
                raise ValueError(f"cannot save {what} attribute {key}={val!r}")
            # a NumPy scalar keeps its dtype (a float32 count computes in float32): JSON
            # holds its exact value (float32 and int64 values are exact in JSON's float64 /
            # integers) with the dtype beside it
            scalars[key] = (
                {_NUMPY_SCALAR: val.dtype.str, "value": item}
                if isinstance(val, np.generic)
                else item
            )
        else:
            raise ValueError(
                f"cannot save {what} attribute {key} of type {type(val).__name__} without pickle"
            )
    return scalars, arrays


def build(
    name: Any, params: Mapping[str, Any], what: str, allowed: Iterable[str] | None = None
) -> Any:
    """An unfitted transformer of the supported class ``name`` with ``params``, validated by
    scikit-learn; ValueError naming ``what`` otherwise."""
    allowed = tuple(SUPPORTED) if allowed is None else tuple(allowed)
    if not isinstance(name, str) or name not in allowed:
        raise ValueError(f"corrupt model file: unknown {what} class {name!r}")
    cls = _class(name)
    try:
        obj = cls(**params)
        obj.get_params()
        check = getattr(obj, "_validate_params", None)  # scikit-learn's parameter checks
        if check is not None:
            check()
    except Exception as exc:  # noqa: BLE001 - scikit-learn validates in many ways
        raise ValueError(
            f"corrupt model file: {what} {name} parameters ({type(exc).__name__}: {exc})"
        ) from None
    return obj


def refit_on_width(
    obj: Any, d: int, scalars: Mapping[str, Any], arrays: Mapping[str, Any], what: str
) -> Any:
    """A :data:`FIT_ON_WIDTH` transformer fitted on one row of ``d`` zeros; the stored fitted
    values must be exactly those of this fit (no arrays; the scalars equal)."""
    try:
        obj.fit(np.zeros((1, d)))
    except Exception as exc:  # noqa: BLE001 - scikit-learn validates in many ways
        raise ValueError(
            f"corrupt model file: the {what} cannot be fitted to {d} features "
            f"({type(exc).__name__}: {exc})"
        ) from None
    expected, _ = fitted_state(obj, what)

    def same(saved: Any, v: Any) -> bool:
        if not isinstance(saved, dict) and isinstance(v, dict):  # a file of before the dtype
            v = v["value"]  # was kept: the plain value
        return type(saved) is type(v) and saved == v

    if (
        arrays
        or set(scalars) != set(expected)
        or not all(same(scalars[k], v) for k, v in expected.items())
    ):
        raise ValueError(
            f"corrupt model file: the {what}'s fitted values {scalars} are not "
            f"those of its parameters on {d} features ({expected})"
        )
    return obj


def restore_fitted(
    obj: Any, scalars: Mapping[str, Any], arrays: Mapping[str, Any], what: str
) -> Any:
    """Set the fitted attributes on ``obj`` (made by :func:`build`): only public names that
    are not part of the class, its parameters or what its constructor set; plain values only."""
    cls = type(obj)
    params = set(obj.get_params(deep=False))
    for key, val in list(scalars.items()) + list(arrays.items()):
        if not isinstance(key, str) or not _PUBLIC_ATTR.fullmatch(key):
            raise ValueError(
                f"corrupt model file: {what} attribute {key!r} is not a fitted attribute"
            )
        if hasattr(cls, key) or key in params or key in vars(obj):
            raise ValueError(
                f"corrupt model file: {what} attribute {key!r} would replace part of the class"
            )
        if isinstance(val, dict):
            val = _numpy_scalar(val, f"{what} attribute {key!r}")
        if val is not None and not isinstance(val, (bool, int, float, str, np.ndarray, np.generic)):
            raise ValueError(
                f"corrupt model file: {what} attribute {key!r} has type {type(val).__name__}"
            )
        setattr(obj, key, val)
    return obj


def _numpy_scalar(spec, what):
    """The NumPy scalar ``{_NUMPY_SCALAR: dtype, "value": v}`` written by
    :func:`fitted_state`: a boolean, integer or float dtype and a value it holds exactly;
    ValueError naming ``what`` otherwise."""
    if set(spec) != {_NUMPY_SCALAR, "value"} or not isinstance(spec[_NUMPY_SCALAR], str):
        raise ValueError(f"corrupt model file: {what} is not a number")
    try:
        dtype = np.dtype(spec[_NUMPY_SCALAR])
    except (TypeError, ValueError):
        dtype = None
    value = spec["value"]
    kinds = {"b": (bool,), "i": (int,), "u": (int,), "f": (int, float)}
    if (
        dtype is None
        or dtype.kind not in kinds
        or dtype.str != spec[_NUMPY_SCALAR]
        or type(value) not in kinds[dtype.kind]
        or (dtype.kind in "iu" and not np.iinfo(dtype).min <= value <= np.iinfo(dtype).max)
        or (dtype.kind == "f" and not math.isfinite(value))
    ):
        raise ValueError(
            f"corrupt model file: {what} is not a number of a plain NumPy dtype "
            f"({spec[_NUMPY_SCALAR]!r}, {value!r})"
        )
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        out = dtype.type(value)
    if out.item() != value or (dtype.kind == "f" and not np.isfinite(out)):
        raise ValueError(
            f"corrupt model file: {what} = {value!r} is not a {dtype.name} value (it was changed)"
        )
    return out


def probe_rows(d: int) -> np.ndarray:
    """Two fixed rows whose features fingerprint a fitted transformer (non-negative, as some
    transformers need)."""
    return np.vstack([np.zeros(d), np.linspace(0.1, 1.0, d)])


def probe(obj: Any, d: int) -> np.ndarray:
    """The fitted transformer's output on :func:`probe_rows` (dense float64, shape (2, out))."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # e.g. fitted on a DataFrame: no feature names here
        Z = obj.transform(probe_rows(d))
    if hasattr(Z, "toarray"):
        Z = Z.toarray()
    return np.asarray(Z, dtype=np.float64)


def check_probe(obj: Any, d: int, saved: Any, width_out: int, what: str) -> Any:
    """The rebuilt transformer maps ``d`` features to ``width_out`` and reproduces ``saved``
    (its output on the probe rows when it was saved); ValueError otherwise."""
    try:
        Z = probe(obj, d)
    except Exception as exc:  # noqa: BLE001 - whatever a damaged transformer raises
        raise ValueError(
            f"corrupt model file: the {what} cannot transform {d} features "
            f"({type(exc).__name__}: {exc})"
        ) from None
    if Z.ndim != 2 or Z.shape != (2, width_out) or not np.all(np.isfinite(Z)):
        raise ValueError(
            f"corrupt model file: the {what} gives {Z.shape[-1]} features, "
            f"the next step takes {width_out}"
        )
    try:
        saved = np.array(saved, dtype=np.float64)
    except (TypeError, ValueError):
        saved = None
    if (
        saved is None
        or saved.shape != Z.shape
        or not np.all(np.isfinite(saved))
        or not np.all(np.abs(saved - Z) <= 1e-8 * (np.max(np.abs(saved), initial=0.0) + 1.0))
    ):
        raise ValueError(
            f"corrupt model file: the {what} does not give the features it was "
            "saved with (its parameters or fitted arrays were changed)"
        )
    if getattr(obj, "n_features_in_", d) != d:
        raise ValueError(f"corrupt model file: the {what}'s n_features_in_ is not {d}")
    return obj
