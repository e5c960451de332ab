"""Saving and loading the frozen transformers of an :class:`deltafit.UpdatablePipeline`.

A pipeline is stored as its final estimator (:mod:`deltafit.persistence._write`) plus, per
transformer, its class, parameters and fitted scalars in the ``pipeline`` field of ``__meta__``
and its fitted arrays as ``pipe<i>__<attribute>`` members (the field is checked by
:func:`deltafit.persistence._schema.check_pipeline_meta`).  :func:`dump_pipeline` writes them,
:func:`load_pipeline` rebuilds each transformer (:mod:`deltafit.persistence._transformers`)
and checks that it reproduces its saved output on two fixed rows.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from deltafit._pipeline import UpdatablePipeline, is_passthrough
from deltafit.persistence import _transformers as ta
from deltafit.persistence._schema import PIPELINE_PARAMS

__all__ = ["dump_pipeline", "load_pipeline"]


def dump_pipeline(
    pipe: UpdatablePipeline, arrays: dict[str, np.ndarray], width_final: int
) -> dict[str, Any]:
    """The ``pipeline`` metadata field; the transformers' fitted arrays go into ``arrays`` as
    ``pipe<i>__<attribute>``.  ValueError naming a step that cannot be stored."""
    steps: list[dict[str, Any]] = []
    width: int | None = None
    for i, (name, step) in enumerate(pipe.steps[:-1]):
        if is_passthrough(step):
            steps.append({"name": name, "passthrough": step})
            continue
        what = f"pipeline step {name!r}"
        cls = ta.check_supported(step, what)
        params = ta.encode_params(step.get_params(deep=False), what)
        scalars, fitted = ta.fitted_state(step, what)
        d = int(step.n_features_in_)
        if width is not None and d != width:
            raise ValueError(
                f"cannot save: {what} takes {d} features, the step before it gives {width}"
            )
        Z = ta.probe(step, d)
        width = int(Z.shape[1])
        for key, val in fitted.items():
            arrays[f"pipe{i}__{key}"] = val
        steps.append(
            {
                "name": name,
                "class": cls,
                "params": params,
                "scalars": scalars,
                "arrays": list(fitted),
                "n_features_in": d,
                "n_features_out": width,
                "probe": [[float(v) for v in row] for row in Z],
            }
        )
    if width is not None and width != width_final:
        raise ValueError(
            f"cannot save: the transformers give {width} features, the final "
            f"step takes {width_final}"
        )
    params = pipe.get_params(deep=False)
    params = {k: params[k] for k in PIPELINE_PARAMS if k in params}
    return {
        "steps": steps,
        "final": pipe.steps[-1][0],
        "params": ta.encode_params(params, "pipeline"),
    }


def load_pipeline(
    spec: Mapping[str, Any], arrays: Mapping[str, np.ndarray], model: Any
) -> UpdatablePipeline:
    """The :class:`deltafit.UpdatablePipeline` of the stored transformers and ``model``, each
    transformer rebuilt and checked to reproduce its saved output on the probe rows."""
    steps: list[tuple[str, Any]] = []
    for i, entry in enumerate(spec["steps"]):
        if "passthrough" in entry:
            steps.append((entry["name"], entry["passthrough"]))
            continue
        what = f"pipeline step {entry['name']!r}"
        step = ta.build(entry["class"], ta.decode_params(entry["params"], what), what)
        fitted = {k: arrays[f"pipe{i}__{k}"] for k in entry["arrays"]}
        if "feature_names_in_" in fitted:
            fitted["feature_names_in_"] = fitted["feature_names_in_"].astype(object)
        scalars = ta.decode_params(entry["scalars"], what)
        if entry["class"] in ta.FIT_ON_WIDTH:
            if entry["n_features_in"] > entry["n_features_out"]:  # bounds the fit's memory
                raise ValueError(
                    f"corrupt model file: the {what} cannot map "
                    f"{entry['n_features_in']} features to fewer"
                )
            ta.refit_on_width(step, entry["n_features_in"], scalars, fitted, what)
        else:
            ta.restore_fitted(step, scalars, fitted, what)
        ta.check_probe(step, entry["n_features_in"], entry["probe"], entry["n_features_out"], what)
        steps.append((entry["name"], step))
    params = ta.decode_params(spec["params"], "the pipeline parameters")
    if not isinstance(params.get("verbose", False), bool):
        raise ValueError("corrupt model file: the pipeline's verbose is not true or false")
    ti = params.get("transform_input")
    if ti is not None and not (isinstance(ti, list) and all(isinstance(t, str) for t in ti)):
        raise ValueError(
            "corrupt model file: the pipeline's transform_input is not a list of names"
        )
    pipe = UpdatablePipeline(steps + [(spec["final"], model)], **params)
    pipe._check_final()
    return pipe
