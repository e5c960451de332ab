"""What a model file holds (format version 3; version 2 is read too), and the checks of its
metadata against itself.

A model file (:mod:`deltafit.persistence._archive`) is a NumPy ``.npz`` archive: a zip of
uncompressed ``.npy`` arrays, each with its CRC-32, and one JSON document ``__meta__`` (a uint8
array).

``__meta__``
    The format and its version, the estimator's class and parameters, the parameters it was
    fitted with, the state's name, the fitted loss / C / solver settings and diagnostics, the
    declared sizes (``n_samples``, ``n_features_in``, ``row_width``), what the ledger keeps
    (``keep_rows``, ``keep_digests``), the feature map's class, parameters and
    fitted scalars, and for a classifier that keeps no labels the count of its positive
    samples.  No per-sample value.
``ledger_ids``, ``ledger_next_id``
    The sample ids (increasing) and the next id to hand out.
``ledger_y``, ``ledger_X``
    The encoded labels and the stored rows (Φ, or raw X for kernel models), when kept.
``ledger_digests``, ``ledger_key``
    ``keep_data=False``: per sample a 16-byte keyed digest of (row, label); the 32-byte random
    key.  No labels and no rows.  The digest's scheme is ``__meta__``'s ``digest_scheme``:
    ``"nh-sip"`` (NH then SipHash, :mod:`deltafit._ledger._digest`) in files of version 3;
    files of version 2 have no such field and hold keyed BLAKE2b digests (``"blake2b"``), which
    a model loaded from them keeps using.
``state_*``
    The exact-update state (:meth:`~deltafit._states._protocol.ModelState.to_arrays`).
``classes``, ``feature_names_in``, ``fmap__*``
    ``classes_``, ``feature_names_in_`` and the fitted arrays of the feature map.
``pipe<i>__*`` (an :class:`deltafit.UpdatablePipeline`)
    The fitted arrays of the pipeline's frozen transformer ``i``; ``__meta__`` then has a
    ``pipeline`` field: per step its name, class (one of
    :data:`deltafit.persistence._transformers.SUPPORTED`), parameters, fitted scalars, widths in
    and out and its output on two fixed rows; the final step's name; the pipeline's parameters.
    The rest of the file is the final estimator's, as above.

This module reads ``__meta__`` (:func:`read_meta`) and checks every field: present, of its type
and range, and consistent with the others; from it follow the shape and dtype of every other
member (:func:`expected_members`), against which the members' headers are checked before any
data is read (:mod:`deltafit.persistence._read`).
"""

from __future__ import annotations

import json
import math
import re
import zipfile
from collections.abc import Collection, Mapping
from typing import Any

import numpy as np

from deltafit._ledger import Ledger
from deltafit._ledger._digest import SCHEMES as DIGEST_SCHEMES
from deltafit._states._one_vs_rest import OneVsRestState, one_vs_rest_class
from deltafit.models import (
    KernelClassifier,
    KernelRegressor,
    LinearClassifier,
    LinearRegressor,
    state_class,
    state_for,
)
from deltafit.persistence._archive import MEMBER_NAME, read_header, read_member
from deltafit.persistence._transformers import FEATURE_MAPS, SUPPORTED

__all__ = [
    "FORMAT",
    "FORMAT_VERSION",
    "READ_VERSIONS",
    "FITTED_ATTR",
    "PIPELINE_PARAMS",
    "estimator_classes",
    "json_safe",
    "read_meta",
    "field_error",
    "is_int",
    "int_field",
    "real_field",
    "bool_field",
    "dict_field",
    "state_of",
    "class_records",
    "expected_members",
]

FORMAT = "deltafit-model"
FORMAT_VERSION = 3
READ_VERSIONS = (2, 3)  # 2: keep_data=False digests are keyed BLAKE2b (no digest_scheme field)

_MAX_META_BYTES = 1 << 22  # the JSON record: parameters and scalars, never per-sample data
FITTED_ATTR = re.compile(r"[A-Za-z][A-Za-z0-9_]{0,99}_")
_META_KEYS = {
    "format",
    "format_version",
    "estimator",
    "params",
    "state",
    "spec",
    "fitted",
    "n_features_in",
    "n_samples",
    "keep_rows",
    "keep_digests",
    "row_width",
    "feature_map",
    "feature_map_param",
    "solver",
    "hinge",
    "n_samples_fit",
    "classes_given",
    "n_positive",
    "deltafit_version",
}
# fields a file may lack (older files of this format version): their value is then None
_OPTIONAL_META = {
    "one_vs_rest": None,
    "n_outputs": None,
    "sparse_input": False,
    "sparse_rows": False,
    "digest_scheme": None,
}
# the ``pipeline`` field of an UpdatablePipeline's file
_MAX_STEPS = 32
_STEP_NAME = re.compile(r"[A-Za-z][A-Za-z0-9_]{0,63}")
_PIPELINE_KEYS = {"steps", "final", "params"}
_STEP_KEYS = {
    "name",
    "class",
    "params",
    "scalars",
    "arrays",
    "n_features_in",
    "n_features_out",
    "probe",
}
_PASSTHROUGH_KEYS = {"name", "passthrough"}
PIPELINE_PARAMS = {"verbose", "transform_input"}


def is_classifier_estimator(est: type) -> bool:
    """Whether a model file's estimator class is a classifier."""
    return issubclass(est, (LinearClassifier, KernelClassifier))


def is_kernel_estimator(est: type) -> bool:
    """Whether a model file's estimator class is a kernel model."""
    return issubclass(est, (KernelClassifier, KernelRegressor))


def estimator_classes() -> dict[str, Any]:
    """``{class name: class}`` of the estimators a model file may hold."""
    return {
        c.__name__: c
        for c in (LinearClassifier, LinearRegressor, KernelClassifier, KernelRegressor)
    }


def json_safe(value: Any, name: str) -> Any:
    """``value``, when JSON can store it; ValueError naming the parameter ``name`` otherwise."""
    try:
        json.dumps(value)
    except (TypeError, ValueError):
        raise ValueError(
            f"cannot save parameter {name}={value!r}: only JSON-representable values can be "
            "stored without pickle"
        ) from None
    return value


def read_meta(zf: zipfile.ZipFile, info: zipfile.ZipInfo) -> dict[str, Any]:
    """The checked ``__meta__`` record of an archive (``info``: its member)."""
    h = read_header(zf, info)
    if len(h.shape) != 1 or h.dtype != np.uint8:
        raise ValueError(
            f"corrupt model file: the __meta__ record is not a 1-D uint8 array "
            f"(shape {h.shape}, dtype {h.dtype.str!r})"
        )
    if h.shape[0] > _MAX_META_BYTES:
        raise ValueError(
            f"corrupt model file: the __meta__ record has {h.shape[0]} bytes "
            f"(at most {_MAX_META_BYTES})"
        )
    raw = read_member(zf, h)
    try:
        meta = json.loads(raw.tobytes().decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError, RecursionError) as exc:
        raise ValueError(f"corrupt metadata in the __meta__ record ({exc})") from None
    if not isinstance(meta, dict) or meta.get("format") != FORMAT:
        raise ValueError("not a deltafit model file (its __meta__ record names another format)")
    version = meta.get("format_version")
    if version not in READ_VERSIONS or not isinstance(version, int) or isinstance(version, bool):
        older = (
            isinstance(version, int)
            and not isinstance(version, bool)
            and version < min(READ_VERSIONS)
        )
        writer = meta.get("deltafit_version")
        writer = f" (deltafit {writer})" if isinstance(writer, str) and len(writer) < 40 else ""
        hint = (
            f": it was written by an older deltafit{writer}, whose files kept the labels of "
            "keep_data=False models; load it with that version and refit, or refit from "
            "the data"
            if older
            else ""
        )
        raise ValueError(
            f"the file has model format version {version!r}; this deltafit reads "
            f"versions {READ_VERSIONS[0]} to {FORMAT_VERSION}{hint}"
        )
    _check_meta(meta)
    return meta


def field_error(field: str, problem: str) -> ValueError:
    """The ValueError of a metadata field that is not what it must be."""
    return ValueError(f"corrupt model file: metadata field {field!r} {problem}")


def is_int(v: Any) -> bool:
    """Whether ``v`` is a JSON integer (not a bool)."""
    return isinstance(v, int) and not isinstance(v, bool)


def int_field(
    meta: Mapping[str, Any], key: str, low: int = 0, high: int = 2**62, field: str | None = None
) -> int:
    """``meta[key]``, an integer in ``[low, high]``; ValueError naming ``field`` otherwise."""
    v: Any = meta.get(key)
    if not is_int(v) or not low <= v <= high:
        raise field_error(field or key, f"must be an integer in [{low}, {high}], got {v!r}")
    return v


def real_field(
    meta: Mapping[str, Any], key: str, low: float | None = None, field: str | None = None
) -> float:
    """``meta[key]`` as a float, finite and at least ``low``; ValueError otherwise."""
    v: Any = meta.get(key)
    if (
        isinstance(v, bool)
        or not isinstance(v, (int, float))
        or not math.isfinite(v)
        or (low is not None and v < low)
    ):
        bound = "" if low is None else f" >= {low}"
        raise field_error(field or key, f"must be a finite number{bound}, got {v!r}")
    return float(v)


def bool_field(meta: Mapping[str, Any], key: str, field: str | None = None) -> bool:
    """``meta[key]``, true or false; ValueError otherwise."""
    v: Any = meta.get(key)
    if not isinstance(v, bool):
        raise field_error(field or key, f"must be true or false, got {v!r}")
    return v


def dict_field(
    meta: Mapping[str, Any], key: str, keys: Collection[str] | None = None, field: str | None = None
) -> dict[str, Any]:
    """``meta[key]``, an object (with exactly the fields ``keys`` when given)."""
    v: Any = meta.get(key)
    if not isinstance(v, dict):
        raise field_error(field or key, f"must be an object, got {type(v).__name__}")
    if keys is not None and set(v) != set(keys):
        raise field_error(field or key, f"must have the fields {sorted(keys)}, has {sorted(v)}")
    return v


def _check_meta(meta):
    """Every metadata field: present, of its type and range, and consistent with the others
    (what the members are checked against next)."""
    for key, default in _OPTIONAL_META.items():
        meta.setdefault(key, default)
    keys = set(meta) - set(_OPTIONAL_META) - {"pipeline"}  # a pipeline's own field
    if keys != _META_KEYS:
        unknown, missing = sorted(keys - _META_KEYS), sorted(_META_KEYS - keys)
        raise ValueError(
            "corrupt model file: metadata fields "
            + (f"unknown: {unknown} " if unknown else "")
            + (f"missing: {missing}" if missing else "")
        )
    classes = estimator_classes()
    name = meta["estimator"]
    if not isinstance(name, str) or name not in classes:
        raise ValueError(f"corrupt model file: unknown estimator {name!r}")
    est = classes[name]
    kernel, classifier = is_kernel_estimator(est), is_classifier_estimator(est)
    cls, n_classes = state_of(meta, classifier)
    if meta["n_outputs"] is not None:
        int_field(meta, "n_outputs", low=2, high=100_000)
        if classifier or not cls.closed_form:
            raise field_error("n_outputs", "is set only for a regressor's closed-form state")
    fitted = dict_field(meta, "fitted", ("loss", "C", "tol", "max_iter"))
    if fitted["loss"] not in est._losses:
        raise ValueError(f"corrupt model file: unknown loss {fitted['loss']!r} for {name}")
    real_field(fitted, "C", field="fitted.C")
    real_field(fitted, "tol", field="fitted.tol")
    int_field(fitted, "max_iter", low=1, field="fitted.max_iter")
    if fitted["C"] <= 0 or fitted["tol"] <= 0:
        raise field_error("fitted", "must have C > 0 and tol > 0")
    expected_state = state_for(kernel, fitted["loss"])
    if cls is not expected_state:
        raise ValueError(
            f"corrupt model file: state {cls.kind!r} does not fit a {name} "
            f"with loss={fitted['loss']!r} (that is {expected_state.kind!r})"
        )
    d = int_field(meta, "n_features_in", low=1)
    n = int_field(meta, "n_samples", low=1)
    width = int_field(meta, "row_width", low=1, field="row_width")
    keep_rows = bool_field(meta, "keep_rows")
    keep_digests = bool_field(meta, "keep_digests")
    sparse_input = bool_field(meta, "sparse_input")
    sparse_rows = bool_field(meta, "sparse_rows")
    if sparse_rows and (not keep_rows or not sparse_input):
        raise field_error(
            "sparse_rows", "is set only for a model fitted on sparse X that keeps its rows"
        )
    if keep_rows and meta["feature_map"] is None and sparse_input != sparse_rows:
        # without a feature map the stored rows are X's own: sparse exactly when X was
        raise field_error(
            "sparse_input", "must match sparse_rows for rows stored without a feature map"
        )
    given = bool_field(meta, "classes_given")
    int_field(meta, "n_samples_fit", low=1)
    if not isinstance(meta["deltafit_version"], str) or len(meta["deltafit_version"]) > 100:
        raise field_error("deltafit_version", "must be a short string")
    if kernel:
        if not keep_rows or keep_digests:
            raise ValueError(
                "corrupt model file: a kernel model keeps its rows and labels "
                "(keep_rows true, keep_digests false)"
            )
        if width != d:
            raise ValueError(
                f"corrupt model file: the row width {width} of a kernel model "
                f"differs from n_features_in {d}"
            )
        if meta["feature_map"] is not None or meta["feature_map_param"] is not None:
            raise ValueError("corrupt model file: a kernel model has no feature map")
    else:
        if keep_rows == keep_digests:
            raise ValueError(
                "corrupt model file: a linear model keeps either its rows "
                "(keep_rows) or digests of them (keep_digests), one of the two"
            )
        if keep_digests and not cls.keeps_no_rows:
            raise ValueError(
                "corrupt model file: only the squared loss keeps no rows "
                f"(keep_digests with state {cls.kind!r})"
            )
        fit_intercept = (
            meta["spec"].get("fit_intercept") if isinstance(meta["spec"], dict) else None
        )
        if (
            meta["feature_map"] is None
            and isinstance(fit_intercept, bool)
            and width != d + fit_intercept
        ):
            raise ValueError(
                f"corrupt model file: the row width {width} does not match "
                f"n_features_in {d} (+1 for the intercept)"
            )
    if not classifier and given:
        raise ValueError("corrupt model file: classes_given is set on a regressor")
    scheme = meta["digest_scheme"]
    if not keep_digests or meta["format_version"] == 2:
        if scheme is not None:
            raise field_error(
                "digest_scheme",
                "is set only in files of version 3 or later whose model keeps digests",
            )
        if keep_digests:
            meta["digest_scheme"] = "blake2b"
    elif scheme not in DIGEST_SCHEMES:
        raise field_error("digest_scheme", f"must be one of {list(DIGEST_SCHEMES)}, got {scheme!r}")
    npos = meta["n_positive"]
    if classifier and keep_digests:
        low, high = (0, n) if given else (1, n - 1)
        if not is_int(npos) or not low <= npos <= high:
            raise field_error(
                "n_positive",
                f"must count the positive samples, in [{low}, "
                f"{high}] for {n} samples, got {npos!r}",
            )
    elif npos is not None:
        raise field_error("n_positive", "is kept only by a classifier that keeps no labels")
    # the solver's diagnostics: none for the closed form, always for an iterative state
    solver, hinge = meta["solver"], meta["hinge"]
    if cls.closed_form:
        if solver is not None or hinge is not None:
            raise field_error("solver", "must be null for the closed-form state")
    else:
        if (hinge is None) == ("hinge" in cls.loss_names):
            raise field_error("hinge", "must be given exactly for a hinge-loss state")
        for solver, hinge in class_records(meta, n_classes):
            dict_field({"solver": solver}, "solver", ("grad_norm", "n_iter", "objective"))
            real_field(solver, "grad_norm", low=0.0, field="solver.grad_norm")
            int_field(solver, "n_iter", field="solver.n_iter")
            real_field(solver, "objective", field="solver.objective")
            if hinge is not None:
                dict_field(
                    {"hinge": hinge},
                    "hinge",
                    ("kkt_violation", "duality_gap", "dual_objective", "n_polish"),
                )
                for k in ("kkt_violation", "duality_gap", "dual_objective"):
                    real_field(hinge, k, field=f"hinge.{k}")
                int_field(hinge, "n_polish", field="hinge.n_polish")
    dict_field(meta, "params")
    dict_field(meta, "spec")
    fm = meta["feature_map"]
    if fm is not None:
        dict_field(meta, "feature_map", ("class", "params", "scalars", "arrays", "probe"))
        if fm["class"] not in FEATURE_MAPS:
            raise ValueError(f"corrupt model file: unknown feature map {fm['class']!r}")
        dict_field(fm, "params", field="feature_map.params")
        dict_field(fm, "scalars", field="feature_map.scalars")
        arrays = fm["arrays"]
        if (
            not isinstance(arrays, list)
            or not all(isinstance(a, str) for a in arrays)
            or len(set(arrays)) != len(arrays)
            or len(arrays) > 16
        ):
            raise field_error("feature_map.arrays", "must list distinct attribute names")
        for attr in list(arrays) + list(fm["scalars"]):
            if (
                not FITTED_ATTR.fullmatch(attr)
                or attr.startswith("_")
                or not MEMBER_NAME.fullmatch("fmap__" + attr)
            ):
                raise field_error("feature_map", f"names {attr!r}, which is not a fitted attribute")
        if set(arrays) & set(fm["scalars"]):
            raise field_error("feature_map", "names an attribute both as array and as scalar")
    if "pipeline" in meta:
        check_pipeline_meta(meta)
    fp = meta["feature_map_param"]
    if fp is not None:
        bool_field(fp if isinstance(fp, dict) else {}, "fitted", field="feature_map_param.fitted")
        if fp["fitted"]:
            dict_field(meta, "feature_map_param", ("fitted",))
            if fm is None:
                raise ValueError(
                    "corrupt model file: the feature_map parameter is the fitted "
                    "map, but no fitted map is stored"
                )
        else:
            dict_field(meta, "feature_map_param", ("fitted", "class", "params"))
            if fp["class"] not in FEATURE_MAPS:
                raise ValueError(f"corrupt model file: unknown feature map {fp['class']!r}")
            dict_field(fp, "params", field="feature_map_param.params")


def state_of(meta: Mapping[str, Any], classifier: bool) -> tuple[Any, int]:
    """The binary state class the file names and its number of one-vs-rest classes (0 for one
    binary problem)."""
    ovr = meta["one_vs_rest"]
    if meta["state"] != OneVsRestState.kind:
        if ovr is not None:
            raise field_error("one_vs_rest", f"is set, but the state is {meta['state']!r}")
        return state_class(meta["state"]), 0
    dict_field(meta, "one_vs_rest", ("base", "n_classes"))
    if not classifier:
        raise ValueError("corrupt model file: a one-vs-rest state in a regressor")
    k = int_field(ovr, "n_classes", low=3, high=100_000, field="one_vs_rest.n_classes")
    return state_class(ovr["base"]), k


def class_records(meta: Mapping[str, Any], n_classes: int) -> list[tuple[Any, Any]]:
    """``(solver, hinge)`` records, one pair per class (one pair for a binary state)."""
    solver, hinge = meta["solver"], meta["hinge"]
    if not n_classes:
        return [(solver, hinge)]
    for field, rec in (("solver", solver), ("hinge", hinge)):
        if rec is not None and (not isinstance(rec, list) or len(rec) != n_classes):
            raise field_error(field, f"must hold one record per class ({n_classes})")
    none = [None] * n_classes
    return list(zip(solver if solver is not None else none, hinge if hinge is not None else none))


def expected_members(meta: Mapping[str, Any], headers: Any) -> dict[str, tuple[Any, str, bool]]:
    """``{member: (shape or shape test, dtype kinds, required)}`` that the metadata calls for."""
    n, d, width = meta["n_samples"], meta["n_features_in"], meta["row_width"]
    est = estimator_classes()[meta["estimator"]]
    out: dict[str, tuple[Any, str, bool]] = {}
    n_out = meta["n_outputs"] or 0
    shapes = Ledger.saved_shapes(
        n, width, meta["keep_rows"], meta["keep_digests"], n_out, meta["sparse_rows"]
    )
    for k, (shape, kinds) in shapes.items():
        out[k] = (shape, kinds, True)
    for k, (shape, kinds) in Ledger.optional_shapes(n).items():
        out[k] = (shape, kinds, False)
    classifier = is_classifier_estimator(est)
    state, n_classes = state_of(meta, classifier)
    if n_classes:
        ovr = one_vs_rest_class(state)
        saved = ovr.shapes(state, n_classes, n, width)
        optional = ovr.shapes(state, n_classes, n, width, optional=True)
    elif n_out:
        saved = state.saved_shapes(n, width, n_outputs=n_out)
        optional = state.optional_shapes(n, width, n_outputs=n_out)
    else:
        saved, optional = state.saved_shapes(n, width), state.optional_shapes(n, width)
    for k, shape in saved.items():
        out[k] = (shape, "f8", True)
    for k, shape in optional.items():
        out[k] = (shape, "f8", False)
    if classifier:
        out["classes"] = ((n_classes or 2,), "biufU", True)
    out["feature_names_in"] = ((d,), "U", False)
    fm = meta["feature_map"]
    if fm is not None:
        # a fitted map's arrays: at most two axes, no longer than the features in and out
        bound = max(d, width) + 1

        def fits(shape):
            return len(shape) <= 2 and all(k <= bound for k in shape)

        for attr in fm["arrays"]:
            out["fmap__" + attr] = (fits, "U" if attr == "feature_names_in_" else "biuf", True)
    if "pipeline" in meta:
        out.update(pipeline_members(meta["pipeline"]))
    return out


# =============================================================================================
# the pipeline field
# =============================================================================================
def check_pipeline_meta(meta: Mapping[str, Any]) -> None:
    """The ``pipeline`` field: its steps' names, classes, declared widths (chained, ending in
    the final estimator's ``n_features_in``) and fitted attribute names."""
    spec = dict_field(meta, "pipeline", _PIPELINE_KEYS)
    entries = spec["steps"]
    if not isinstance(entries, list) or len(entries) > _MAX_STEPS:
        raise field_error("pipeline.steps", f"must be a list of at most {_MAX_STEPS} steps")
    names = []
    width = None
    for i, entry in enumerate(entries):
        field = f"pipeline.steps.{i}"
        if not isinstance(entry, dict) or set(entry) not in (_STEP_KEYS, _PASSTHROUGH_KEYS):
            raise field_error(field, "must be a transformer or a passthrough step")
        names.append(entry["name"])
        if "passthrough" in entry:
            if entry["passthrough"] not in (None, "passthrough"):
                raise field_error(field, "must be null or 'passthrough'")
            continue
        if not isinstance(entry["class"], str) or entry["class"] not in SUPPORTED:
            raise ValueError(f"corrupt model file: unknown pipeline step class {entry['class']!r}")
        dict_field(entry, "params", field=f"{field}.params")
        dict_field(entry, "scalars", field=f"{field}.scalars")
        d = int_field(entry, "n_features_in", low=1, high=2**31, field=f"{field}.n_features_in")
        int_field(entry, "n_features_out", low=1, high=2**31, field=f"{field}.n_features_out")
        if width is not None and d != width:
            raise field_error(field, f"takes {d} features, the step before it gives {width}")
        width = entry["n_features_out"]
        attrs = entry["arrays"]
        if (
            not isinstance(attrs, list)
            or not all(isinstance(a, str) for a in attrs)
            or len(set(attrs)) != len(attrs)
            or len(attrs) > 16
        ):
            raise field_error(f"{field}.arrays", "must list distinct attribute names")
        for attr in list(attrs) + list(entry["scalars"]):
            if not FITTED_ATTR.fullmatch(attr) or not MEMBER_NAME.fullmatch(f"pipe{i}__{attr}"):
                raise field_error(field, f"names {attr!r}, which is not a fitted attribute")
        if set(attrs) & set(entry["scalars"]):
            raise field_error(field, "names an attribute both as array and as scalar")
        if not isinstance(entry["probe"], list):
            raise field_error(f"{field}.probe", "must be a list")
    names.append(spec["final"])
    if not all(
        isinstance(n, str) and _STEP_NAME.fullmatch(n) and "__" not in n for n in names
    ) or len(set(names)) != len(names):
        raise field_error("pipeline", f"step names {names!r} are not distinct names without '__'")
    if width is not None and width != meta["n_features_in"]:
        raise field_error(
            "pipeline",
            f"its transformers give {width} features, the final step takes {meta['n_features_in']}",
        )
    dict_field(spec, "params", field="pipeline.params")
    if set(spec["params"]) - PIPELINE_PARAMS:
        raise field_error("pipeline.params", f"may hold only {sorted(PIPELINE_PARAMS)}")


def pipeline_members(spec: Mapping[str, Any]) -> dict[str, tuple[Any, str, bool]]:
    """``{member: (shape test, dtype kinds, required)}`` of the transformers' fitted arrays:
    at most two axes, none longer than the step's widths in and out (+16)."""
    out: dict[str, tuple[Any, str, bool]] = {}
    for i, entry in enumerate(spec["steps"]):
        if "passthrough" in entry:
            continue
        bound = max(entry["n_features_in"], entry["n_features_out"]) + 16

        def fits(shape, bound=bound):
            return len(shape) <= 2 and all(k <= bound for k in shape)

        for attr in entry["arrays"]:
            out[f"pipe{i}__{attr}"] = (fits, "U" if attr == "feature_names_in_" else "biuf", True)
    return out
