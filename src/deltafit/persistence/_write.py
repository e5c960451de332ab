"""Writing a fitted model (or an UpdatablePipeline ending in one) to a model file.

:func:`save` turns a fitted estimator into the arrays and the ``__meta__`` record that
:mod:`deltafit.persistence._schema` describes (the ledger's and the state's own ``to_arrays``,
the feature map through :mod:`deltafit.persistence._transformers`, a pipeline's transformers
through :mod:`deltafit.persistence._pipelines`) and writes them atomically
(:func:`deltafit.persistence._archive.write_atomically`).
"""

from __future__ import annotations

import io
import json
import os
from typing import Any

import numpy as np
from sklearn.exceptions import NotFittedError
from sklearn.utils.validation import check_is_fitted

from deltafit._pipeline import UpdatablePipeline
from deltafit._version import __version__
from deltafit.persistence import _transformers as ta
from deltafit.persistence._archive import write_atomically
from deltafit.persistence._pipelines import dump_pipeline
from deltafit.persistence._schema import FORMAT, FORMAT_VERSION, estimator_classes, json_safe
from deltafit.persistence._transformers import FEATURE_MAPS
from deltafit.solvers import HingeResult

__all__ = ["save"]


def _dump_feature_map(fmap, arrays, d):
    if fmap is None:
        return None
    name = ta.check_supported(fmap, "feature map", FEATURE_MAPS)
    params = {k: json_safe(v, f"feature_map.{k}") for k, v in fmap.get_params().items()}
    fitted, stored = ta.fitted_state(fmap, "feature map")
    for key, val in stored.items():
        arrays[f"fmap__{key}"] = val
    # the map's features of two fixed rows: what a loaded map must reproduce
    probe = [[float(v) for v in row] for row in ta.probe(fmap, d)]
    return {
        "class": name,
        "params": params,
        "scalars": fitted,
        "arrays": list(stored),
        "probe": probe,
    }


def _feature_map_param(fmap):
    """How to rebuild the ``feature_map`` parameter: unfitted (class + params) or the fitted map."""
    if fmap is None:
        return None
    try:
        check_is_fitted(fmap)
        return {"fitted": True}
    except NotFittedError:
        name = type(fmap).__name__
        if name not in FEATURE_MAPS:
            raise ValueError(f"cannot save feature map {name}") from None
        return {
            "fitted": False,
            "class": name,
            "params": {k: json_safe(v, f"feature_map.{k}") for k, v in fmap.get_params().items()},
        }


def save(model: Any, path: str | os.PathLike) -> None:
    """Write a fitted deltafit estimator to ``path`` (``.npz`` + JSON, no pickle).

    The file is written whole to a temporary file in the same directory, flushed and synced,
    and then renamed over ``path`` (``os.replace``): an existing file at ``path`` is replaced
    only by a complete new one, and survives a failed write, a full disk or an interruption.
    An existing file's permission bits are kept.  The model is read under its lock: a
    concurrent update is either in the file whole or not at all.

    Parameters
    ----------
    model : LinearClassifier, LinearRegressor, KernelClassifier, KernelRegressor or \
UpdatablePipeline
        A fitted model.  Pending low-rank corrections are folded first (a no-op on the model).
        A fitted :class:`deltafit.UpdatablePipeline` is stored as its final estimator plus its
        frozen transformers as arrays (supported: ``StandardScaler``, ``MinMaxScaler``,
        ``MaxAbsScaler``, ``Normalizer``, ``PolynomialFeatures``, ``Nystroem``,
        ``RBFSampler``, ``SkewedChi2Sampler``, ``PolynomialCountSketch``,
        ``TfidfTransformer``, and ``"passthrough"``); its ``memory`` is not stored (a loaded
        pipeline caches nothing).
    path : str or os.PathLike
        Written exactly as given (no extension is appended); a symbolic link is followed.

    Raises
    ------
    ValueError
        If the model is not fitted or holds something that cannot be stored without pickle
        (a callable kernel, an unsupported feature map or pipeline step: the message names the
        class and the supported ones), or whose training rows live on a Dask cluster
        (``keep_data=True`` on dask input).
    OSError
        If the file cannot be written (``path`` is then as it was).

    Examples
    --------
    >>> import os, tempfile
    >>> import numpy as np
    >>> import deltafit
    >>> from deltafit.datasets import load_breast_cancer
    >>> X, y = load_breast_cancer()
    >>> m = deltafit.LinearClassifier().fit(X, y)
    >>> path = os.path.join(tempfile.mkdtemp(), "model.npz")
    >>> deltafit.save(m, path)
    >>> sorted(np.load(path).files)[:4]
    ['__meta__', 'classes', 'ledger_X', 'ledger_ids']
    """
    pipe = None
    if isinstance(model, UpdatablePipeline):
        pipe, model = model, model._fitted_final()
    name = type(model).__name__
    fitted = name in estimator_classes()
    if fitted:
        try:
            check_is_fitted(model)
        except NotFittedError:
            fitted = False
    if not fitted:
        what = "the final step of a pipeline" if pipe is not None else "save"
        raise ValueError(f"{what} needs a fitted deltafit estimator, got {name}")
    if model.problem_.dask_rows is not None:
        # its rows live on a Dask cluster: a file without them would load as a model that says
        # keep_data=True and cannot remove by id
        raise ValueError(
            "a model whose training rows live on a Dask cluster (keep_data=True "
            "on dask input) is not saved: its rows are not in the file; fit it "
            "with keep_data=False (the p × p state is saved) or on NumPy arrays"
        )
    if "_class_counts" in model.__dict__:  # K ≥ 3 classes on dask input, keeping no labels
        raise ValueError(
            f"a model of {model.classes_.size} classes fitted on dask input with "
            "keep_data=False is not saved: a file of a model that keeps no labels "
            "counts two classes; fit it on NumPy arrays to save it"
        )
    # under the lock (after an update in progress: the file holds a committed model); one
    # line, as in the models' ``_locked``
    with model._lock(): _write_model(model, pipe, path)  # noqa: E701  # fmt: skip


def _write_model(model, pipe, path):
    """:func:`save` of a checked, locked model (``pipe``: the pipeline it ends, or None)."""
    name = type(model).__name__
    parts = model._saved_parts()
    params = model.get_params(deep=False)
    params.pop("feature_map", None)
    params["callback"] = None  # not part of the model
    if callable(params.get("kernel")) or callable(parts["spec"].get("kernel")):
        raise ValueError("cannot save a model with a callable kernel without pickle")
    params = {k: json_safe(v, k) for k, v in params.items()}
    arrays = {}
    led, st = parts["ledger"], parts["state"]
    larrays, keep = led.to_arrays()
    arrays.update(larrays)
    arrays.update(st.to_arrays(keep))
    res = getattr(st, "result", None)
    ovr = st.n_classes > 0
    results = res.results if ovr and res is not None else [res]
    meta = {
        "format": FORMAT,
        "format_version": FORMAT_VERSION,
        "estimator": name,
        "params": params,
        "state": st.kind,
        "spec": {k: json_safe(v, k) for k, v in parts["spec"].items()},
        # the fitted problem, which set_params after the fit does not change
        "fitted": {
            "loss": st.loss.name,
            "C": st.C,
            "tol": float(st.opts.tol),
            "max_iter": int(st.opts.max_iter),
        },
        "n_features_in": int(model.n_features_in_),
        "n_samples": int(keep.size),
        "keep_rows": bool(led.keep_rows),
        "keep_digests": bool(led.keep_digests),
        "row_width": int(led.n_features),
        "feature_map": _dump_feature_map(
            getattr(model, "feature_map_", None), arrays, int(model.n_features_in_)
        ),
        "feature_map_param": _feature_map_param(getattr(model, "feature_map", None)),
        "solver": _per_class(
            ovr,
            None
            if res is None
            else [
                {
                    "grad_norm": float(r.grad_norm),
                    "n_iter": int(r.n_iter),
                    "objective": float(r.objective),
                }
                for r in results
            ],
        ),
        "hinge": _per_class(
            ovr,
            None
            if not isinstance(results[0], HingeResult)
            else [
                {
                    "kkt_violation": float(r.kkt_violation),
                    "duality_gap": float(r.duality_gap),
                    "dual_objective": float(r.dual_objective),
                    "n_polish": int(r.n_polish),
                }
                for r in results
            ],
        ),
        # K ≥ 3 classes: the K binary states of one kind (None for one binary problem)
        "one_vs_rest": ({"base": st.base.kind, "n_classes": st.n_classes} if ovr else None),
        # K ≥ 2 outputs of a multi-output regressor (None: one)
        "n_outputs": parts["n_outputs"] or None,
        "n_samples_fit": int(getattr(model, "n_samples_fit_", led.n_samples)),
        "classes_given": parts["classes_given"],
        "n_positive": None if parts["n_positive"] is None else int(parts["n_positive"]),
        # fitted on sparse X (updates take its rows as CSR), and whether the ledger's rows
        # are sparse (stored as CSR components)
        "sparse_input": parts["sparse_input"],
        "sparse_rows": bool(getattr(led, "sparse_rows", False)),
        "digest_scheme": led.digest_scheme if led.keep_digests else None,
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
    meta["deltafit_version"] = __version__
    if pipe is not None:
        meta["pipeline"] = dump_pipeline(pipe, arrays, int(model.n_features_in_))
    arrays["__meta__"] = np.frombuffer(json.dumps(meta).encode("utf-8"), dtype=np.uint8)
    buf = io.BytesIO()
    np.savez(buf, **arrays)  # uncompressed members: a file never expands beyond its size
    write_atomically(os.fspath(path), buf.getbuffer())


def _per_class(ovr, records):
    """The solver records of a state: one record, or a list of one per class (one-vs-rest)."""
    if records is None:
        return None
    return records if ovr else records[0]
