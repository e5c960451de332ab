"""Saving and loading fitted deltafit models without pickle.

A model file (format version 3; version 2 is read too) is a NumPy ``.npz`` archive: a zip of uncompressed ``.npy``
arrays, each with its CRC-32, and one JSON document ``__meta__`` (a uint8 array).

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
    ``"nh-sip"`` (NH then SipHash, :mod:`._digest`) in files of version 3; files of version 2
    have no such field and hold keyed BLAKE2b digests (``"blake2b"``), which a model loaded
    from them keeps using.
``state_*``
    The exact-update state (:meth:`~deltafit._states._protocol.ModelState.to_arrays`).
``classes``, ``feature_names_in``, ``fmap__*``
    ``classes_``, ``feature_names_in_`` and the fitted arrays of the feature map.
``pipe<i>__*`` (an :class:`deltafit.UpdatablePipeline`)
    The fitted arrays of the pipeline's frozen transformer ``i``; ``__meta__`` then has a
    ``pipeline`` field: per step its name, class (one of
    :data:`._transformer_arrays.SUPPORTED`), parameters, fitted scalars, widths in and out and
    its output on two fixed rows; the final step's name; the pipeline's parameters.  The rest
    of the file is the final estimator's, as above.

Loading trusts nothing in the file.  The archive's directory is read first: every member must
be an uncompressed, unencrypted ``.npy`` of a known name, listed once, and the members must fit
in the archive.  ``__meta__`` is read and checked (every field, its type and its agreement with
the others); from it the shape and type of every other member follow, and each member's
``.npy`` header is checked against them before any data is read.  Memory is then bounded by the
file's size.  The arrays are checked (finite, ids increasing, labels ±1, classes) and so are
the invariants that tie them together (the intercept column, ``ΦᵀΦ + ρI`` against the counts,
the kernel matrix against the kernel of the stored rows, the feature map's output width, and
every stored row against what the state keeps of it: :func:`_check_rows`).  Tolerances are
rounding bounds of the quantities compared, so they follow the stored problem's scale; the
matrices ``save`` writes are exactly symmetric (the rounding residue of earlier updates is
projected away, see ``_exact_squared._symmetrized``).  Any
violation raises ValueError naming the file and the problem; loading never unpickles or
executes anything from the file.
"""

from __future__ import annotations

import copy
import io
import json
import math
import os
import re
import secrets
import warnings
import zipfile

import numpy as np
import scipy.sparse as sp

from sklearn.base import clone

from deltafit.utils._validation import check_int, check_real
from deltafit.losses import get_loss
from deltafit.solvers import HingeResult, SolverResult
from deltafit.persistence import _transformers as ta
from deltafit._ledger._digest import SCHEMES as DIGEST_SCHEMES
from deltafit._ledger import Ledger
from deltafit._states._one_vs_rest import (
    OneVsRestState,
    class_codes,
    column_arrays,
    column_view,
    one_vs_rest_class,
)
from deltafit.models._registry import state_class, state_for

__all__ = ["save", "load", "FORMAT_VERSION"]

FORMAT = "deltafit-model"
FORMAT_VERSION = 3
READ_VERSIONS = (2, 3)  # 2: keep_data=False digests are keyed BLAKE2b (no digest_scheme field)

# Feature maps that can be stored: scikit-learn transformers rebuilt from params + arrays.
_FEATURE_MAPS = ta.FEATURE_MAPS

_MAX_META_BYTES = 1 << 22  # the JSON record: parameters and scalars, never per-sample data
_MAX_MEMBERS = 64
_MAX_HEADER = 10_000  # bytes of one .npy header (numpy's own default limit)
_CHUNK = 1 << 24  # bytes read at a time into an array
_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,99}")
_FITTED_ATTR = re.compile(r"[A-Za-z][A-Za-z0-9_]{0,99}_")
_CLOSED_FORM = ("primal_squared", "dual_squared")
_META_KEYS = {
    "format", "format_version", "estimator", "params", "state", "spec", "fitted",
    "n_features_in", "n_samples", "keep_rows", "keep_digests", "row_width",
    "feature_map", "feature_map_param", "solver", "hinge", "n_samples_fit", "classes_given",
    "n_positive", "deltafit_version",
}
# fields a file may lack (older files of this format version): their value is then None
_OPTIONAL_META = {"one_vs_rest": None, "n_outputs": None, "sparse_input": False,
                  "sparse_rows": False, "digest_scheme": None}


def _estimator_classes():
    from deltafit.models._kernel import KernelClassifier, KernelRegressor
    from deltafit.models._linear import LinearClassifier, LinearRegressor

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


# =============================================================================================
# save
# =============================================================================================
def _dump_feature_map(fmap, arrays, d):
    if fmap is None:
        return None
    name = ta.check_supported(fmap, "feature map", _FEATURE_MAPS)
    params = {k: _json_safe(v, f"feature_map.{k}") for k, v in fmap.get_params().items()}
    fitted, stored = ta.fitted_state(fmap, "feature map")
    for key, val in stored.items():
        arrays[f"fmap__{key}"] = val
    # the map's features of two fixed rows: what a loaded map must reproduce
    probe = [[float(v) for v in row] for row in ta.probe(fmap, d)]
    return {"class": name, "params": params, "scalars": fitted, "arrays": list(stored),
            "probe": probe}


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


def save(model, path):
    """Write a fitted deltafit estimator to ``path`` (``.npz`` + JSON, no pickle).

    The file is written whole to a temporary file in the same directory, flushed and synced,
    and then renamed over ``path`` (``os.replace``): an existing file at ``path`` is replaced
    only by a complete new one, and survives a failed write, a full disk or an interruption.
    An existing file's permission bits are kept.

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
    from deltafit._pipeline import UpdatablePipeline

    pipe = None
    if isinstance(model, UpdatablePipeline):
        pipe, model = model, model._fitted_final()
    classes = _estimator_classes()
    name = type(model).__name__
    if name not in classes or not hasattr(model, "_ledger"):
        what = "the final step of a pipeline" if pipe is not None else "save"
        raise ValueError(f"{what} needs a fitted deltafit estimator, got {name}")
    if model.__dict__.get("_dask_rows") is not None:
        # its rows live on a Dask cluster: a file without them would load as a model that says
        # keep_data=True and cannot remove by id
        raise ValueError("a model whose training rows live on a Dask cluster (keep_data=True "
                         "on dask input) is not saved: its rows are not in the file; fit it "
                         "with keep_data=False (the p × p state is saved) or on NumPy arrays")
    if "_class_counts" in model.__dict__:  # K ≥ 3 classes on dask input, keeping no labels
        raise ValueError(f"a model of {model.classes_.size} classes fitted on dask input with "
                         "keep_data=False is not saved: a file of a model that keeps no labels "
                         "counts two classes; fit it on NumPy arrays to save it")
    params = model.get_params(deep=False)
    params.pop("feature_map", None)
    params["callback"] = None  # not part of the model
    if callable(params.get("kernel")) or callable(model._spec.get("kernel")):
        raise ValueError("cannot save a model with a callable kernel without pickle")
    params = {k: _json_safe(v, k) for k, v in params.items()}
    arrays = {}
    led, st = model._ledger, model._state
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
        "spec": {k: _json_safe(v, k) for k, v in model._spec.items()},
        # the fitted problem, which set_params after the fit does not change
        "fitted": {"loss": st.loss.name, "C": st.C, "tol": float(st.opts.tol),
                   "max_iter": int(st.opts.max_iter)},
        "n_features_in": int(model.n_features_in_),
        "n_samples": int(keep.size),
        "keep_rows": bool(led.keep_rows),
        "keep_digests": bool(led.keep_digests),
        "row_width": int(led.n_features),
        "feature_map": _dump_feature_map(getattr(model, "feature_map_", None), arrays,
                                         int(model.n_features_in_)),
        "feature_map_param": _feature_map_param(getattr(model, "feature_map", None)),
        "solver": _per_class(ovr, None if res is None else [
            {"grad_norm": float(r.grad_norm), "n_iter": int(r.n_iter),
             "objective": float(r.objective)} for r in results]),
        "hinge": _per_class(ovr, None if not isinstance(results[0], HingeResult) else [
            {"kkt_violation": float(r.kkt_violation), "duality_gap": float(r.duality_gap),
             "dual_objective": float(r.dual_objective), "n_polish": int(r.n_polish)}
            for r in results]),
        # K ≥ 3 classes: the K binary states of one kind (None for one binary problem)
        "one_vs_rest": ({"base": st.base.kind, "n_classes": st.n_classes} if ovr else None),
        # K ≥ 2 outputs of a multi-output regressor (None: one)
        "n_outputs": (int(model._n_outputs_fitted) or None) if not model._classifier else None,
        "n_samples_fit": int(getattr(model, "n_samples_fit_", led.n_samples)),
        "classes_given": bool(getattr(model, "_classes_given", False)),
        "n_positive": (int(model._n_positive) if "_n_positive" in model.__dict__ else None),
        # fitted on sparse X (updates take its rows as CSR), and whether the ledger's rows
        # are sparse (stored as CSR components)
        "sparse_input": bool(model.__dict__.get("_sparse_input", False)),
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
    from deltafit._version import __version__

    meta["deltafit_version"] = __version__
    if pipe is not None:
        meta["pipeline"] = _dump_pipeline(pipe, arrays, int(model.n_features_in_))
    arrays["__meta__"] = np.frombuffer(json.dumps(meta).encode("utf-8"), dtype=np.uint8)
    buf = io.BytesIO()
    np.savez(buf, **arrays)  # uncompressed members: a file never expands beyond its size
    _write_atomically(os.fspath(path), buf.getbuffer())


def _per_class(ovr, records):
    """The solver records of a state: one record, or a list of one per class (one-vs-rest)."""
    if records is None:
        return None
    return records if ovr else records[0]


def _write_atomically(path, data):
    """Write ``data`` to ``path`` through a synced temporary file in the same directory and an
    atomic rename; on any failure (an interruption included) the temporary file is removed and
    ``path`` is left as it was.

    In the main thread, SIGINT (Ctrl-C) is held from the creation of the temporary file to
    its rename or removal: an interrupt that arrives meanwhile stops the write at the next
    chunk (or, once the file is renamed, after it) and is raised as KeyboardInterrupt only
    when no temporary file is left — a second Ctrl-C during the clean-up cannot strand it.
    """
    target = os.path.realpath(path)
    folder = os.path.dirname(target)
    tmp = os.path.join(folder, f".{os.path.basename(target)}.{secrets.token_hex(8)}.tmp")
    view = memoryview(data).cast("B")
    with _HeldInterrupt() as held:
        try:
            with open(tmp, "xb") as fh:
                for start in range(0, len(view), _CHUNK):
                    fh.write(view[start:start + _CHUNK])
                    held.check()
                fh.flush()
                os.fsync(fh.fileno())
            held.check()
            try:
                mode = os.stat(target).st_mode & 0o7777
            except FileNotFoundError:
                pass  # a new file: the mode open() gave it (the umask applies)
            else:
                os.chmod(tmp, mode)
            held.check()
            os.replace(tmp, target)
        except BaseException:
            try:
                os.unlink(tmp)
            except OSError:
                pass
            raise
        _sync_directory(folder)


class _HeldInterrupt:
    """Hold SIGINT while a model file is written (main thread only; elsewhere a no-op): the
    handler records the interrupt, :meth:`check` raises it where the writer can clean up, and
    leaving the block restores the previous handler and raises an interrupt still pending."""

    def __init__(self):
        self.pending = False
        self._previous = None

    def _hold(self, signum, frame):
        self.pending = True

    def check(self):
        if self.pending:
            self.pending = False
            raise KeyboardInterrupt

    def __enter__(self):
        import signal
        import threading

        if threading.current_thread() is threading.main_thread():
            try:
                previous = signal.getsignal(signal.SIGINT)
                if previous is not None:  # None: a handler not installed from Python
                    signal.signal(signal.SIGINT, self._hold)
                    self._previous = previous
            except (ValueError, OSError, AttributeError):
                self._previous = None
        return self

    def __exit__(self, exc_type, exc, tb):
        if self._previous is not None:
            import signal

            signal.signal(signal.SIGINT, self._previous)
            self._previous = None
        if exc_type is None and self.pending:
            self.pending = False
            raise KeyboardInterrupt
        return False


def _sync_directory(folder):
    """Make the rename durable (POSIX); best effort where a directory cannot be synced."""
    try:
        fd = os.open(folder, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


# =============================================================================================
# load: the archive
# =============================================================================================
class _Header:
    """A member's ``.npy`` header: shape, dtype, order and where its data starts."""

    __slots__ = ("shape", "dtype", "fortran", "offset", "info")

    def __init__(self, shape, dtype, fortran, offset, info):
        self.shape, self.dtype, self.fortran, self.offset, self.info = \
            shape, dtype, fortran, offset, info


def _member_name(info):
    return info.filename[:-4] if info.filename.endswith(".npy") else info.filename


def _directory(zf, size):
    """The archive's members by name, checked: known kind of name, listed once, uncompressed,
    unencrypted, inside the archive."""
    infos = zf.infolist()
    if len(infos) > _MAX_MEMBERS:
        raise ValueError(f"corrupt model file: {len(infos)} members (a model has at most "
                         f"{_MAX_MEMBERS})")
    members, total = {}, 0
    for info in infos:
        name = _member_name(info)
        if not info.filename.endswith(".npy") or not _NAME.fullmatch(name):
            raise ValueError(f"corrupt model file: unexpected member {info.filename!r}")
        if name in members:
            raise ValueError(f"corrupt model file: member {name!r} appears twice")
        if info.flag_bits & 0x1:
            raise ValueError(f"corrupt model file: member {name!r} is encrypted")
        if info.compress_type != zipfile.ZIP_STORED or info.compress_size != info.file_size:
            raise ValueError(
                f"corrupt model file: member {name!r} is compressed ({info.compress_size} "
                f"bytes expanding to {info.file_size}); model files hold uncompressed arrays"
            )
        if info.header_offset + info.compress_size > size:
            raise ValueError(f"corrupt model file: member {name!r} claims {info.file_size} "
                             "bytes beyond the end of the archive")
        total += info.compress_size
        members[name] = info
    if total > size:
        raise ValueError("corrupt model file: the members claim more bytes than the archive "
                         "holds")
    return members


def _header(zf, info):
    """The ``.npy`` header of a member, checked against the member's size; no data is read."""
    name = _member_name(info)
    try:
        with zf.open(info) as fh:
            version = np.lib.format.read_magic(fh)
            if version == (1, 0):
                shape, fortran, dtype = np.lib.format.read_array_header_1_0(
                    fh, max_header_size=_MAX_HEADER)
            elif version == (2, 0):
                shape, fortran, dtype = np.lib.format.read_array_header_2_0(
                    fh, max_header_size=_MAX_HEADER)
            else:
                raise ValueError(f".npy format version {version} is not read")
            offset = fh.tell()
    except Exception as exc:  # noqa: BLE001 - numpy parses the header text in many ways
        raise ValueError(f"corrupt model file: member {name!r} is not a .npy array "
                         f"({type(exc).__name__}: {exc})") from None
    if dtype.hasobject or dtype.fields is not None or dtype.subdtype is not None or \
            dtype.kind not in "biufU":
        raise ValueError(f"corrupt model file: member {name!r} has dtype {dtype.str!r} "
                         "(object, structured or unsupported data is never read)")
    if not all(isinstance(k, int) and k >= 0 for k in shape):
        raise ValueError(f"corrupt model file: member {name!r} has shape {shape!r}")
    nbytes = math.prod(shape) * dtype.itemsize
    if nbytes != info.file_size - offset:
        raise ValueError(
            f"corrupt model file: member {name!r} declares shape {shape} ({nbytes} bytes) but "
            f"holds {info.file_size - offset} bytes"
        )
    return _Header(tuple(shape), dtype, bool(fortran), offset, info)


def _read_member(zf, h):
    """A member's data as a native-byte-order array (its size checked by :func:`_header`),
    read in bounded chunks; the CRC is checked at the end."""
    name = _member_name(h.info)
    count = math.prod(h.shape)
    out = np.empty(count, dtype=h.dtype)
    raw = out.view(np.uint8) if count else np.zeros(0, dtype=np.uint8)
    try:
        with zf.open(h.info) as fh:
            fh.read(h.offset)
            pos, nbytes = 0, raw.size
            while pos < nbytes:
                chunk = fh.read(min(_CHUNK, nbytes - pos))
                if not chunk:
                    raise EOFError("the data ends early")
                raw[pos:pos + len(chunk)] = np.frombuffer(chunk, dtype=np.uint8)
                pos += len(chunk)
            if fh.read(1):
                raise ValueError("data past the declared shape")
    except (ValueError, EOFError, OSError, zipfile.BadZipFile, RuntimeError) as exc:
        raise ValueError(f"corrupt model file: member {name!r} cannot be read "
                         f"({type(exc).__name__}: {exc})") from None
    out = out.reshape(h.shape, order="F" if h.fortran else "C")
    if not out.dtype.isnative:
        out = out.astype(out.dtype.newbyteorder("="))
    return out


def _read(path):
    """``(meta, arrays)`` of the model file at ``path``, every member checked against the
    metadata before its data is read."""
    size = os.path.getsize(path)
    try:
        zf = zipfile.ZipFile(path)
    except (zipfile.BadZipFile, zipfile.LargeZipFile, OSError, EOFError, ValueError,
            NotImplementedError, RuntimeError) as exc:
        raise ValueError(f"not a readable deltafit model file ({type(exc).__name__}: "
                         f"{exc})") from None
    with zf:
        members = _directory(zf, size)
        if "__meta__" not in members:
            raise ValueError("not a deltafit model file (no __meta__ record)")
        meta = _read_meta(zf, members["__meta__"])
        headers = {k: _header(zf, info) for k, info in members.items() if k != "__meta__"}
        expected = _expected_members(meta, headers)
        unknown = sorted(set(headers) - set(expected))
        if unknown:
            raise ValueError(f"corrupt model file: unknown member(s) {unknown}")
        missing = sorted(k for k, (_, _, required) in expected.items()
                         if required and k not in headers)
        if missing:
            raise ValueError(f"corrupt model file: missing member(s) {missing}")
        for k, h in headers.items():
            shape, kinds, _ = expected[k]
            ok_shape = shape(h.shape) if callable(shape) else h.shape == shape
            if not ok_shape or not _dtype_ok(h.dtype, kinds):
                want = "" if callable(shape) else f" shape {shape} of"
                raise ValueError(
                    f"corrupt model file: member {k!r} has shape {h.shape} and dtype "
                    f"{h.dtype.str!r}; the metadata (n_samples={meta['n_samples']}, "
                    f"row_width={meta['row_width']}, n_features_in={meta['n_features_in']}) "
                    f"calls for{want} {_KIND_NAMES[kinds]}"
                )
        arrays = {k: _read_member(zf, h) for k, h in headers.items()}
    return meta, arrays


_KIND_NAMES = {"f8": "float64", "i8": "int64", "u1": "uint8", "biufU": "numbers or text",
               "U": "text", "biuf": "numbers"}


def _dtype_ok(dtype, spec):
    """Whether ``dtype`` is ``spec``: an exact kind and size (``"f8"``) or a set of kinds."""
    if spec[-1].isdigit():
        return dtype.kind == spec[0] and dtype.itemsize == int(spec[1:])
    return dtype.kind in spec


def _read_meta(zf, info):
    h = _header(zf, info)
    if len(h.shape) != 1 or h.dtype != np.uint8:
        raise ValueError(f"corrupt model file: the __meta__ record is not a 1-D uint8 array "
                         f"(shape {h.shape}, dtype {h.dtype.str!r})")
    if h.shape[0] > _MAX_META_BYTES:
        raise ValueError(f"corrupt model file: the __meta__ record has {h.shape[0]} bytes "
                         f"(at most {_MAX_META_BYTES})")
    raw = _read_member(zf, h)
    try:
        meta = json.loads(raw.tobytes().decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError, RecursionError) as exc:
        raise ValueError(f"corrupt metadata in the __meta__ record ({exc})") from None
    if not isinstance(meta, dict) or meta.get("format") != FORMAT:
        raise ValueError("not a deltafit model file (its __meta__ record names another format)")
    version = meta.get("format_version")
    if version not in READ_VERSIONS or not isinstance(version, int) or \
            isinstance(version, bool):
        older = isinstance(version, int) and not isinstance(version, bool) and \
            version < min(READ_VERSIONS)
        writer = meta.get("deltafit_version")
        writer = f" (deltafit {writer})" if isinstance(writer, str) and len(writer) < 40 else ""
        hint = (f": it was written by an older deltafit{writer}, whose files kept the labels of "
                "keep_data=False models; load it with that version and refit, or refit from "
                "the data" if older else "")
        raise ValueError(f"the file has model format version {version!r}; this deltafit reads "
                         f"versions {READ_VERSIONS[0]} to {FORMAT_VERSION}{hint}")
    _check_meta(meta)
    return meta


# =============================================================================================
# load: the metadata
# =============================================================================================
def _bad(field, problem):
    return ValueError(f"corrupt model file: metadata field {field!r} {problem}")


def _is_int(v):
    return isinstance(v, int) and not isinstance(v, bool)


def _int(meta, key, low=0, high=2**62, field=None):
    v = meta.get(key)
    if not _is_int(v) or not low <= v <= high:
        raise _bad(field or key, f"must be an integer in [{low}, {high}], got {v!r}")
    return v


def _real(meta, key, low=None, field=None):
    v = meta.get(key)
    if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v) or \
            (low is not None and v < low):
        bound = "" if low is None else f" >= {low}"
        raise _bad(field or key, f"must be a finite number{bound}, got {v!r}")
    return float(v)


def _bool(meta, key, field=None):
    v = meta.get(key)
    if not isinstance(v, bool):
        raise _bad(field or key, f"must be true or false, got {v!r}")
    return v


def _dict(meta, key, keys=None, field=None):
    v = meta.get(key)
    if not isinstance(v, dict):
        raise _bad(field or key, f"must be an object, got {type(v).__name__}")
    if keys is not None and set(v) != set(keys):
        raise _bad(field or key, f"must have the fields {sorted(keys)}, has {sorted(v)}")
    return v


def _check_meta(meta):
    """Every metadata field: present, of its type and range, and consistent with the others
    (what the members are checked against next)."""
    for key, default in _OPTIONAL_META.items():
        meta.setdefault(key, default)
    keys = set(meta) - set(_OPTIONAL_META) - {"pipeline"}  # a pipeline's own field
    if keys != _META_KEYS:
        unknown, missing = sorted(keys - _META_KEYS), sorted(_META_KEYS - keys)
        raise ValueError("corrupt model file: metadata fields "
                         + (f"unknown: {unknown} " if unknown else "")
                         + (f"missing: {missing}" if missing else ""))
    classes = _estimator_classes()
    name = meta["estimator"]
    if not isinstance(name, str) or name not in classes:
        raise ValueError(f"corrupt model file: unknown estimator {name!r}")
    est = classes[name]
    kernel, classifier = est._kernel, est._classifier
    cls, n_classes = _state_of(meta, classifier)
    if meta["n_outputs"] is not None:
        _int(meta, "n_outputs", low=2, high=100_000)
        if classifier or cls.kind not in _CLOSED_FORM:
            raise _bad("n_outputs", "is set only for a regressor's closed-form state")
    fitted = _dict(meta, "fitted", ("loss", "C", "tol", "max_iter"))
    if fitted["loss"] not in est._losses:
        raise ValueError(f"corrupt model file: unknown loss {fitted['loss']!r} for {name}")
    _real(fitted, "C", field="fitted.C")
    _real(fitted, "tol", field="fitted.tol")
    _int(fitted, "max_iter", low=1, field="fitted.max_iter")
    if fitted["C"] <= 0 or fitted["tol"] <= 0:
        raise _bad("fitted", "must have C > 0 and tol > 0")
    expected_state = state_for(kernel, fitted["loss"])
    if cls is not expected_state:
        raise ValueError(f"corrupt model file: state {cls.kind!r} does not fit a {name} "
                         f"with loss={fitted['loss']!r} (that is {expected_state.kind!r})")
    d = _int(meta, "n_features_in", low=1)
    n = _int(meta, "n_samples", low=1)
    width = _int(meta, "row_width", low=1, field="row_width")
    keep_rows = _bool(meta, "keep_rows")
    keep_digests = _bool(meta, "keep_digests")
    sparse_input = _bool(meta, "sparse_input")
    sparse_rows = _bool(meta, "sparse_rows")
    if sparse_rows and (not keep_rows or not sparse_input):
        raise _bad("sparse_rows", "is set only for a model fitted on sparse X that keeps its "
                                  "rows")
    if keep_rows and meta["feature_map"] is None and sparse_input != sparse_rows:
        # without a feature map the stored rows are X's own: sparse exactly when X was
        raise _bad("sparse_input", "must match sparse_rows for rows stored without a "
                                   "feature map")
    given = _bool(meta, "classes_given")
    _int(meta, "n_samples_fit", low=1)
    if not isinstance(meta["deltafit_version"], str) or len(meta["deltafit_version"]) > 100:
        raise _bad("deltafit_version", "must be a short string")
    if kernel:
        if not keep_rows or keep_digests:
            raise ValueError("corrupt model file: a kernel model keeps its rows and labels "
                             "(keep_rows true, keep_digests false)")
        if width != d:
            raise ValueError(f"corrupt model file: the row width {width} of a kernel model "
                             f"differs from n_features_in {d}")
        if meta["feature_map"] is not None or meta["feature_map_param"] is not None:
            raise ValueError("corrupt model file: a kernel model has no feature map")
    else:
        if keep_rows == keep_digests:
            raise ValueError("corrupt model file: a linear model keeps either its rows "
                             "(keep_rows) or digests of them (keep_digests), one of the two")
        if keep_digests and cls.kind != "primal_squared":
            raise ValueError("corrupt model file: only the squared loss keeps no rows "
                             f"(keep_digests with state {cls.kind!r})")
        fit_intercept = meta["spec"].get("fit_intercept") if isinstance(meta["spec"], dict) \
            else None
        if meta["feature_map"] is None and isinstance(fit_intercept, bool) and \
                width != d + fit_intercept:
            raise ValueError(f"corrupt model file: the row width {width} does not match "
                             f"n_features_in {d} (+1 for the intercept)")
    if not classifier and given:
        raise ValueError("corrupt model file: classes_given is set on a regressor")
    scheme = meta["digest_scheme"]
    if not keep_digests or meta["format_version"] == 2:
        if scheme is not None:
            raise _bad("digest_scheme", "is set only in files of version 3 or later whose "
                                        "model keeps digests")
        if keep_digests:
            meta["digest_scheme"] = "blake2b"
    elif scheme not in DIGEST_SCHEMES:
        raise _bad("digest_scheme", f"must be one of {list(DIGEST_SCHEMES)}, got {scheme!r}")
    npos = meta["n_positive"]
    if classifier and keep_digests:
        low, high = (0, n) if given else (1, n - 1)
        if not _is_int(npos) or not low <= npos <= high:
            raise _bad("n_positive", f"must count the positive samples, in [{low}, {high}] "
                                     f"for {n} samples, got {npos!r}")
    elif npos is not None:
        raise _bad("n_positive", "is kept only by a classifier that keeps no labels")
    # the solver's diagnostics: none for the closed form, always for an iterative state
    solver, hinge = meta["solver"], meta["hinge"]
    if cls.kind in _CLOSED_FORM:
        if solver is not None or hinge is not None:
            raise _bad("solver", "must be null for the closed-form state")
    else:
        if (hinge is None) == ("hinge" in cls.loss_names):
            raise _bad("hinge", "must be given exactly for a hinge-loss state")
        for solver, hinge in _class_records(meta, n_classes):
            _dict({"solver": solver}, "solver", ("grad_norm", "n_iter", "objective"))
            _real(solver, "grad_norm", low=0.0, field="solver.grad_norm")
            _int(solver, "n_iter", field="solver.n_iter")
            _real(solver, "objective", field="solver.objective")
            if hinge is not None:
                _dict({"hinge": hinge}, "hinge",
                      ("kkt_violation", "duality_gap", "dual_objective", "n_polish"))
                for k in ("kkt_violation", "duality_gap", "dual_objective"):
                    _real(hinge, k, field=f"hinge.{k}")
                _int(hinge, "n_polish", field="hinge.n_polish")
    _dict(meta, "params")
    _dict(meta, "spec")
    fm = meta["feature_map"]
    if fm is not None:
        _dict(meta, "feature_map", ("class", "params", "scalars", "arrays", "probe"))
        if fm["class"] not in _FEATURE_MAPS:
            raise ValueError(f"corrupt model file: unknown feature map {fm['class']!r}")
        _dict(fm, "params", field="feature_map.params")
        _dict(fm, "scalars", field="feature_map.scalars")
        arrays = fm["arrays"]
        if not isinstance(arrays, list) or not all(isinstance(a, str) for a in arrays) or \
                len(set(arrays)) != len(arrays) or len(arrays) > 16:
            raise _bad("feature_map.arrays", "must list distinct attribute names")
        for attr in list(arrays) + list(fm["scalars"]):
            if not _FITTED_ATTR.fullmatch(attr) or attr.startswith("_") or \
                    not _NAME.fullmatch("fmap__" + attr):
                raise _bad("feature_map", f"names {attr!r}, which is not a fitted attribute")
        if set(arrays) & set(fm["scalars"]):
            raise _bad("feature_map", "names an attribute both as array and as scalar")
    if "pipeline" in meta:
        _check_pipeline_meta(meta)
    fp = meta["feature_map_param"]
    if fp is not None:
        _bool(fp if isinstance(fp, dict) else {}, "fitted", field="feature_map_param.fitted")
        if fp["fitted"]:
            _dict(meta, "feature_map_param", ("fitted",))
            if fm is None:
                raise ValueError("corrupt model file: the feature_map parameter is the fitted "
                                 "map, but no fitted map is stored")
        else:
            _dict(meta, "feature_map_param", ("fitted", "class", "params"))
            if fp["class"] not in _FEATURE_MAPS:
                raise ValueError(f"corrupt model file: unknown feature map {fp['class']!r}")
            _dict(fp, "params", field="feature_map_param.params")


def _state_of(meta, classifier):
    """The binary state class the file names and its number of one-vs-rest classes (0 for one
    binary problem)."""
    ovr = meta["one_vs_rest"]
    if meta["state"] != OneVsRestState.kind:
        if ovr is not None:
            raise _bad("one_vs_rest", f"is set, but the state is {meta['state']!r}")
        return state_class(meta["state"]), 0
    _dict(meta, "one_vs_rest", ("base", "n_classes"))
    if not classifier:
        raise ValueError("corrupt model file: a one-vs-rest state in a regressor")
    k = _int(ovr, "n_classes", low=3, high=100_000, field="one_vs_rest.n_classes")
    return state_class(ovr["base"]), k


def _class_records(meta, n_classes):
    """``(solver, hinge)`` records, one pair per class (one pair for a binary state)."""
    solver, hinge = meta["solver"], meta["hinge"]
    if not n_classes:
        return [(solver, hinge)]
    for field, rec in (("solver", solver), ("hinge", hinge)):
        if rec is not None and (not isinstance(rec, list) or len(rec) != n_classes):
            raise _bad(field, f"must hold one record per class ({n_classes})")
    none = [None] * n_classes
    return list(zip(solver if solver is not None else none,
                    hinge if hinge is not None else none))


def _expected_members(meta, headers):
    """``{member: (shape or shape test, dtype kinds, required)}`` that the metadata calls for."""
    n, d, width = meta["n_samples"], meta["n_features_in"], meta["row_width"]
    est = _estimator_classes()[meta["estimator"]]
    out = {}
    n_out = meta["n_outputs"] or 0
    shapes = Ledger.saved_shapes(n, width, meta["keep_rows"], meta["keep_digests"], n_out,
                                 meta["sparse_rows"])
    for k, (shape, kinds) in shapes.items():
        out[k] = (shape, kinds, True)
    for k, (shape, kinds) in Ledger.optional_shapes(n).items():
        out[k] = (shape, kinds, False)
    state, n_classes = _state_of(meta, est._classifier)
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
    if est._classifier:
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
        out.update(_pipeline_members(meta["pipeline"]))
    return out


# =============================================================================================
# load: the model
# =============================================================================================
def load(path):
    """Read a model written by :func:`save`; the result predicts and keeps updating exactly.

    Nothing in the file is trusted: the sizes the metadata declares are checked against every
    member's header (and the members against the archive) before any array is read, unknown
    members and fields are refused, and every invariant that ties the parts together is checked
    (see the module's documentation), so that a damaged or contradictory file raises here
    rather than when the model is used.

    Parameters
    ----------
    path : str or os.PathLike

    Returns
    -------
    LinearClassifier, LinearRegressor, KernelClassifier, KernelRegressor or UpdatablePipeline
        A pipeline's transformers are rebuilt from their class (one of
        :data:`._transformer_arrays.SUPPORTED`), checked parameters and stored arrays, and
        must reproduce their saved output on two fixed rows.

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
        meta, arrays = _read(path)
        return _rebuild(meta, arrays)
    except ValueError as exc:
        raise ValueError(f"{path!r}: {exc}") from None
    except (KeyError, TypeError, AttributeError, IndexError, ArithmeticError,
            np.linalg.LinAlgError) as exc:  # a check missed: still a corrupt file
        raise ValueError(f"{path!r}: corrupt model file ({type(exc).__name__}: {exc})") \
            from None


def _fitted_options(model, fitted):
    """The fitted problem's settings (the loss, C and solver settings saved with the state)."""
    opts = model._solver_options()
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


def _solver_result(solver, h):
    """The saved solver diagnostics (None for the closed form); ``coef`` is set by the state."""
    if solver is None:
        return None
    common = (None, float(solver["grad_norm"]), int(solver["n_iter"]), True, False,
              float(solver["objective"]))
    if h is None:
        return SolverResult(*common)
    return HingeResult(*common, kkt_violation=float(h["kkt_violation"]),
                       duality_gap=float(h["duality_gap"]),
                       dual_objective=float(h["dual_objective"]), n_polish=int(h["n_polish"]))


def _construct(cls, params, what):
    """``cls(**params)`` with its parameters validated; ValueError naming ``what``."""
    expected = set(cls().get_params(deep=False)) - {"feature_map"}
    if set(params) != expected:
        raise ValueError(f"corrupt model file: the {what} are not those of {cls.__name__} "
                         f"(unknown: {sorted(set(params) - expected)}, missing: "
                         f"{sorted(expected - set(params))})")
    if params.get("callback") is not None:
        raise ValueError(f"corrupt model file: the {what} hold a callback")
    model = cls(**params)
    model._validate_params()
    return model


def _check_arrays(meta, arrays, classifier):
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
            raise ValueError(f"corrupt model file: classes {c.tolist()!r} are not distinct "
                             "labels in increasing order")
    if "ledger_y" in arrays:
        y = arrays["ledger_y"]
        if classifier and meta["one_vs_rest"] is not None:
            K = meta["one_vs_rest"]["n_classes"]
            if not np.all((y >= 0) & (y < K) & (y == np.round(y))):
                raise ValueError(f"corrupt model file: a classifier's labels are not class "
                                 f"indices 0..{K - 1}")
            if not meta["classes_given"] and np.all(y == y[0]):
                raise ValueError("corrupt model file: a classifier's labels hold one class")
        elif classifier:
            if not np.all(np.abs(y) == 1.0):
                raise ValueError("corrupt model file: a classifier's labels are not ±1")
            if not meta["classes_given"] and (np.all(y > 0) or np.all(y < 0)):
                raise ValueError("corrupt model file: a classifier's labels hold one class")


def _check_statistics(model, meta, arrays, st):
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
    for k, (sub, (solver, hinge)) in enumerate(zip(st.states,
                                                   _class_records(meta, st.n_classes))):
        mine = {key: a for key, a in arrays.items() if not key.startswith("state_")}
        mine["ledger_y"] = class_codes(y, k)
        mine.update(st.class_arrays(arrays, k))
        _check_binary_statistics(model, dict(meta, solver=solver, hinge=hinge), mine, sub,
                                 first=k == 0)


def _check_binary_statistics(model, meta, arrays, st, first=True):
    """What ties the state to the ledger and to the fitted parameters: the intercept column of
    the stored rows, ``ΦᵀΦ + ρI`` and ``Φᵀt`` on the constant feature, the stored kernel matrix
    against the kernel of the stored rows."""
    n = meta["n_samples"]
    s = float(model._s)
    intercept = bool(model._spec["fit_intercept"])
    if not model._kernel and meta["keep_rows"] and intercept:
        col = arrays["ledger_X"][:, -1]
        if not np.all((col.toarray().ravel() if sp.issparse(col) else col) == s):
            raise ValueError("corrupt model file: the stored rows' intercept column is not "
                             f"intercept_scaling = {s}")
    if st.kind == "primal_squared" and intercept:
        # with sample weights the statistics are ΦᵀWΦ + ρI and ΦᵀWy: the constant feature
        # counts the total weight, s²·Σw + ρ, and sums s·Σ w_i y_i
        M, b = arrays["state_M"], arrays["state_b"]
        w = arrays.get("ledger_w")
        expected = (n if w is None else float(np.sum(w))) * s * s + st.rho
        if abs(M[-1, -1] - expected) > 1e-6 * expected:
            raise ValueError("corrupt model file: ΦᵀΦ + ρI does not count the samples "
                             f"(constant feature: {M[-1, -1]:.6g}, expected {expected:.6g})")
        total = None
        if "ledger_y" in arrays:
            y = arrays["ledger_y"]
            wy = y if w is None else w * y
            total, scale = float(wy.sum()), float(np.abs(wy).sum()) + 1.0
        elif meta["n_positive"] is not None and w is None:
            # (weighted and without labels: which weights are the positives' is unknown)
            total, scale = float(2 * meta["n_positive"] - n), float(n)
        if total is not None and abs(b[-1] - s * total) > 1e-6 * s * scale:
            raise ValueError("corrupt model file: Φᵀy does not match the labels on the "
                             "constant feature")
    _check_solution(meta, arrays, st)
    if meta["keep_rows"]:
        _check_rows(model, meta, arrays, st, first)
    if model._kernel:
        m = min(n, 8)
        X = arrays["ledger_X"][:m]
        K = arrays["state_K"][:m, :m]
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                Kx = np.asarray(model._k(X, X), dtype=np.float64)
        except Exception as exc:  # noqa: BLE001 - scikit-learn's kernels raise many kinds
            raise ValueError(f"corrupt model file: the fitted kernel cannot be evaluated "
                             f"({type(exc).__name__}: {exc})") from None
        scale = float(np.max(np.abs(Kx), initial=0.0)) + 1e-300
        if Kx.shape != K.shape or not np.all(np.abs(Kx - K) <= 1e-8 * scale):
            raise ValueError("corrupt model file: the stored kernel matrix is not the fitted "
                             "kernel of the stored rows")


_EPS = float(np.finfo(np.float64).eps)


_ROW_BLOCK = 1 << 16  # rows per block of the load-time products (bounded extra memory)


def _blocks(n):
    return (slice(i, min(i + _ROW_BLOCK, n)) for i in range(0, max(n, 1), _ROW_BLOCK))


def _abs_rows(B):
    return abs(B) if sp.issparse(B) else np.abs(B)


def _refuse_rows(what, where):
    raise ValueError(f"corrupt model file: the stored rows do not give the stored {what} "
                     f"({where}): a stored row was changed, or the state was")


def _check_rows(model, meta, arrays, st, first=True):
    """The stored rows (``ledger_X``) against what the state keeps of them, so that a file
    whose rows were changed is refused (its model would predict from the old state while
    updates read the changed rows).

    Each test compares a product computed from the rows with the stored one, entry by entry,
    against a rounding bound of that entry: ``4ε·(terms summed)`` times the sum of the
    products' absolute values — the most rounding can move it, whatever the scale of the
    problem (tiny weights, huge or tiny C).

    * squared loss (linear): ``(ΦᵀWΦ + ρI)v`` for a random ``v`` against ``M v`` (once for a
      matrix shared by K outputs or classes: ``first``), plus the error ``lost`` that the
      state itself bounds for the digits removals and reweights cancelled in ``M`` since it
      was last computed from the rows (a 2-norm bound, so ``lost·‖v‖`` per entry); ``ΦᵀWt``
      against ``b`` while no cancellation has happened (``lost`` = 0: afterwards ``b``
      carries the residue of the cancelled samples, which the state does not bound);
    * logistic / squared hinge (linear): the stored scores ``z_i`` against ``φ_iᵀβ``;
    * hinge (linear): ``β`` against ``Φᵀ(α∘t)`` (the dual's primal point), and the KKT
      conditions at the margins ``t_i φ_iᵀβ`` against the saved certificate
      ``kkt_violation`` (which already includes the solve's rounding bound): a changed row
      whose dual variable is 0 and which stays outside the margin leaves β the exact fit of
      the changed rows, and is not told apart;
    * kernel models: every row's kernel values against 8 random stored rows, against the
      stored kernel matrix (``1e-8`` of its largest value, as for its leading block).

    The products run over blocks of rows: the extra memory is a block, not a copy of Φ.
    """
    Phi = arrays.get("ledger_X")
    if Phi is None:
        return
    n, p = Phi.shape
    rng = np.random.default_rng()
    kind = st.kind
    w = arrays.get("ledger_w")
    w = np.ones(n) if w is None else np.asarray(w, dtype=np.float64)
    t = arrays.get("ledger_y")
    if kind == "primal_squared":
        M = arrays["state_M"]
        limits = arrays.get("state_limits")
        lost = float(limits[2]) if limits is not None else 0.0
        check_b = t is not None and lost == 0.0 and limits is not None
        if not (first or check_b):
            return
        rho = float(st.rho)
        v = rng.standard_normal(p)
        av = np.abs(v)
        Mv, S = rho * v, rho * av + np.abs(M) @ av
        if check_b:
            t = np.asarray(t, dtype=np.float64)
            b = arrays["state_b"]
            bt, Sb = np.zeros(p), np.abs(b)
        for rows in _blocks(n):  # two passes over a block and its |·|, both sums at once
            B, wb = Phi[rows], w[rows]
            A = _abs_rows(B)
            u, au = wb * np.asarray(B @ v).ravel(), wb * np.asarray(A @ av).ravel()
            if check_b:
                u = np.column_stack([u, wb * t[rows]])
                au = np.column_stack([au, wb * np.abs(t[rows])])
            Bu, Au = np.asarray(B.T @ u), np.asarray(A.T @ au)
            if check_b:
                Mv, S = Mv + Bu[:, 0], S + Au[:, 0]
                bt, Sb = bt + Bu[:, 1], Sb + Au[:, 1]
            else:
                Mv, S = Mv + Bu.ravel(), S + Au.ravel()
        if first:
            err = np.abs(M @ v - Mv)
            bad = np.flatnonzero(err > 4.0 * _EPS * (n + p + 4) * S +
                                 lost * np.linalg.norm(v))
            if bad.size:
                _refuse_rows("matrix ΦᵀWΦ + ρI", f"features {bad[:5].tolist()}")
        if check_b:
            bad = np.flatnonzero(np.abs(b - bt) > 4.0 * _EPS * (n + 4) * Sb)
            if bad.size:
                _refuse_rows("targets' statistics ΦᵀWt", f"features {bad[:5].tolist()}")
    elif kind == "primal_newton":
        zd = arrays.get("state_scores")
        if zd is None:
            return
        beta = arrays["state_beta"]
        ab = np.abs(beta)
        for rows in _blocks(n):
            B, z = Phi[rows], zd[rows, 0]
            S = np.asarray(_abs_rows(B) @ ab).ravel() + np.abs(z)
            bad = np.flatnonzero(np.abs(z - np.asarray(B @ beta).ravel()) >
                                 4.0 * _EPS * (p + 4) * S)
            if bad.size:
                _refuse_rows("scores Φβ", f"rows {(bad[:5] + rows.start).tolist()}")
    elif kind == "primal_hinge":
        beta, dual = arrays["state_beta"], arrays["state_dual"]
        hinge = meta.get("hinge")
        kkt = None if hinge is None else float(hinge["kkt_violation"]) * (1.0 + 1e-9)
        bt, S, ab, box = np.zeros(p), np.abs(beta), np.abs(beta), float(st.C) * w
        for rows in _blocks(n):
            B, a, tb = Phi[rows], dual[rows], t[rows]
            A = _abs_rows(B)
            bt = bt + np.asarray(B.T @ (a * tb)).ravel()
            S = S + np.asarray(A.T @ a).ravel()
            if kkt is None:
                continue
            g = tb * np.asarray(B @ beta).ravel() - 1.0  # the dual gradient ∇_i, projected
            P = np.where(a <= 0.0, np.minimum(g, 0.0),  # as the certificate projects it
                         np.where(a >= box[rows], np.maximum(g, 0.0), g))
            P[w[rows] <= 0.0] = 0.0  # samples of weight 0 are out of the problem
            slack = 4.0 * _EPS * (p + 4) * (np.asarray(A @ ab).ravel() + 1.0)
            bad = np.flatnonzero(np.abs(P) > kkt + slack)
            if bad.size:
                _refuse_rows("margins of the dual solution (KKT conditions beyond the saved "
                             "kkt_violation)", f"rows {(bad[:5] + rows.start).tolist()}")
        bad = np.flatnonzero(np.abs(beta - bt) > 4.0 * _EPS * (n + 4) * S)
        if bad.size:
            _refuse_rows("coefficients Φᵀ(α∘t) of the dual solution",
                         f"features {bad[:5].tolist()}")
    elif model._kernel and n > 8 and first:
        K = arrays["state_K"]
        cols = np.sort(rng.choice(n, size=8, replace=False))
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                Kx = np.asarray(model._k(Phi, Phi[cols]), dtype=np.float64)
        except Exception as exc:  # noqa: BLE001 - scikit-learn's kernels raise many kinds
            raise ValueError(f"corrupt model file: the fitted kernel cannot be evaluated "
                             f"({type(exc).__name__}: {exc})") from None
        scale = float(np.max(np.abs(Kx), initial=0.0)) + 1e-300
        bad = np.flatnonzero(np.any(np.abs(Kx - K[:, cols]) > 1e-8 * scale, axis=1))
        if bad.size:
            _refuse_rows("kernel matrix", f"rows {bad[:5].tolist()}")


def _check_solution(meta, arrays, st):
    """The stored solution solves the stored problem: the closed form's normal equations hold
    to rounding, and Newton's gradient is the one its saved certificate ``grad_norm`` states
    (the sensitivity bounds rely on it).  The hinge's dual solution is checked by its state."""
    norm = np.linalg.norm
    kind = st.kind
    if kind == "primal_squared":
        M, b, beta = arrays["state_M"], arrays["state_b"], arrays["state_beta"]
        residual, scale = norm(M @ beta - b), norm(M) * norm(beta) + norm(b)
    elif kind == "dual_squared":
        K, alpha, y = arrays["state_K"], arrays["state_alpha"], arrays["ledger_y"]
        w = arrays.get("ledger_w")
        if w is None:
            residual = norm(K @ alpha + st.rho * alpha - y)
            scale = (norm(K) + st.rho) * norm(alpha) + norm(y)
        else:
            # (K + ρW⁻¹)α = y over the samples of positive weight and α_i = 0 where w_i = 0:
            # W(Kα − y) + ρα = 0 states both
            w = np.asarray(w, dtype=np.float64)
            wmax = float(np.max(w, initial=0.0))
            if np.ndim(alpha) == 2:
                w = w[:, None]
            residual = norm(w * (K @ alpha - y) + st.rho * alpha)
            scale = (wmax * norm(K) + st.rho) * norm(alpha) + wmax * norm(y)
    elif kind in ("primal_newton", "kernel_newton"):
        y, C, saved = arrays["ledger_y"], st.C, float(meta["solver"]["grad_norm"])
        w = arrays.get("ledger_w", 1.0)  # C·w_i per sample
        if kind == "primal_newton":
            Phi, beta = arrays["ledger_X"], arrays["state_beta"]
            g = beta + C * (Phi.T @ (w * st.loss.d1(y, Phi @ beta)))
            size, gnorm = norm(beta), norm(g)
        else:
            K, alpha = arrays["state_K"], arrays["state_alpha"]
            g = alpha + C * w * st.loss.d1(y, K @ alpha)
            size = math.sqrt(max(float(alpha @ K @ alpha), 0.0))
            gnorm = math.sqrt(max(float(g @ K @ g), 0.0))
        residual, scale = max(gnorm - saved, 0.0), size + saved
    else:
        return
    if not residual <= 1e-6 * scale + 1e-300:
        raise ValueError(f"corrupt model file: the stored solution does not solve the stored "
                         f"problem (residual {residual:.3g} at scale {scale:.3g})")


def _load_feature_map(spec, arrays, d, width_out):
    """The fitted feature map, rebuilt from its class, parameters and fitted attributes, and
    checked to map ``d`` features to ``width_out``."""
    fmap = ta.build(spec["class"], spec["params"], "feature map", _FEATURE_MAPS)
    ta.restore_fitted(fmap, dict(spec["scalars"]),
                      {k: arrays["fmap__" + k] for k in spec["arrays"]}, "feature map")
    return ta.check_probe(fmap, d, spec["probe"], width_out, "feature map")


def _rebuild(meta, arrays):
    classes = _estimator_classes()
    name = meta["estimator"]
    est = classes[name]
    model = _construct(est, meta["params"], "parameters")
    # the parameters the model was fitted with: valid parameters of the same estimator
    spec = model._spec = _checked_spec(model, meta["spec"])
    fit_intercept = spec["fit_intercept"]
    n, d, width = meta["n_samples"], meta["n_features_in"], meta["row_width"]
    if not model._kernel and meta["feature_map"] is None and width != d + int(fit_intercept):
        raise ValueError(f"corrupt model file: the row width {width} does not match "
                         f"n_features_in {d} (+1 for the intercept)")
    _check_arrays(meta, arrays, est._classifier)
    led = Ledger.from_arrays(arrays, width, meta["keep_rows"], meta["keep_digests"],
                             meta["n_outputs"] or 0, meta["sparse_rows"],
                             meta["digest_scheme"])
    if meta["sparse_rows"]:  # the checks below read the rows as one (sparse) matrix
        arrays["ledger_X"] = led.X[:n]
    model._sparse_input = meta["sparse_input"]
    led.growth = 1.25 if model._kernel else 1.5  # as in the estimators' _build
    if meta["n_samples_fit"] > led.next_id:
        raise ValueError(f"corrupt model file: n_samples_fit {meta['n_samples_fit']} exceeds "
                         f"the ids handed out ({led.next_id})")
    model.n_features_in_ = d
    if meta["n_outputs"]:
        model._n_outputs = meta["n_outputs"]
    if "classes" in arrays:
        model.classes_ = arrays["classes"]
    if "feature_names_in" in arrays:
        model.feature_names_in_ = arrays["feature_names_in"].astype(object)
    cls, n_classes = _state_of(meta, est._classifier)
    opts = _fitted_options(model, meta["fitted"])
    if n_classes:
        if model.classes_.size != n_classes:
            raise ValueError("corrupt model file: the one-vs-rest classes do not match classes")
        results = None if meta["solver"] is None else [
            _solver_result(s, h) for s, h in _class_records(meta, n_classes)]
        model._state = one_vs_rest_class(cls).from_arrays_of(
            arrays, opts, base=cls, n_classes=n_classes, y=led.y[:n].copy(),
            capacity=led.capacity, max_rank=model._max_rank, results=results)
    else:
        model._state = cls.from_arrays(arrays, opts, y=led.y[:n].copy(), capacity=led.capacity,
                                       max_rank=model._max_rank,
                                       result=_solver_result(meta["solver"], meta["hinge"]))
    if model._kernel:
        model.n_samples_fit_ = meta["n_samples_fit"]
    else:
        fm = meta["feature_map"]
        model.feature_map_ = (None if fm is None else
                              _load_feature_map(fm, arrays, d, width - int(fit_intercept)))
        param = meta["feature_map_param"]
        if param is not None:
            if param["fitted"]:
                model.feature_map = copy.deepcopy(model.feature_map_)
            else:
                import sklearn.kernel_approximation as ka

                try:
                    model.feature_map = getattr(ka, param["class"])(**param["params"])
                    model.feature_map.get_params()
                    check = getattr(model.feature_map, "_validate_params", None)
                    if check is not None:
                        check()
                except Exception as exc:  # noqa: BLE001
                    raise ValueError(f"corrupt model file: feature_map parameter "
                                     f"({type(exc).__name__}: {exc})") from None
    model._classes_given = meta["classes_given"]
    if meta["n_positive"] is not None:
        model._n_positive = meta["n_positive"]
    model._ledger = led
    _check_statistics(model, meta, arrays, model._state)
    if "pipeline" in meta:
        return _load_pipeline(meta["pipeline"], arrays, model)
    return model



# =============================================================================================
# pipelines: the frozen transformers of an UpdatablePipeline
# =============================================================================================
_MAX_STEPS = 32
_STEP_NAME = re.compile(r"[A-Za-z][A-Za-z0-9_]{0,63}")
_PIPELINE_KEYS = {"steps", "final", "params"}
_STEP_KEYS = {"name", "class", "params", "scalars", "arrays", "n_features_in",
              "n_features_out", "probe"}
_PASSTHROUGH_KEYS = {"name", "passthrough"}
_PIPELINE_PARAMS = {"verbose", "transform_input"}


def _dump_pipeline(pipe, arrays, width_final):
    """The ``pipeline`` metadata field; the transformers' fitted arrays go into ``arrays`` as
    ``pipe<i>__<attribute>``.  ValueError naming a step that cannot be stored."""
    from deltafit._pipeline import is_passthrough

    steps, width = [], None
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
            raise ValueError(f"cannot save: {what} takes {d} features, the step before it "
                             f"gives {width}")
        Z = ta.probe(step, d)
        width = int(Z.shape[1])
        for key, val in fitted.items():
            arrays[f"pipe{i}__{key}"] = val
        steps.append({"name": name, "class": cls, "params": params, "scalars": scalars,
                      "arrays": list(fitted), "n_features_in": d, "n_features_out": width,
                      "probe": [[float(v) for v in row] for row in Z]})
    if width is not None and width != width_final:
        raise ValueError(f"cannot save: the transformers give {width} features, the final "
                         f"step takes {width_final}")
    params = pipe.get_params(deep=False)
    params = {k: params[k] for k in _PIPELINE_PARAMS if k in params}
    return {"steps": steps, "final": pipe.steps[-1][0],
            "params": ta.encode_params(params, "pipeline")}


def _check_pipeline_meta(meta):
    """The ``pipeline`` field: its steps' names, classes, declared widths (chained, ending in
    the final estimator's ``n_features_in``) and fitted attribute names."""
    spec = _dict(meta, "pipeline", _PIPELINE_KEYS)
    entries = spec["steps"]
    if not isinstance(entries, list) or len(entries) > _MAX_STEPS:
        raise _bad("pipeline.steps", f"must be a list of at most {_MAX_STEPS} steps")
    names = []
    width = None
    for i, entry in enumerate(entries):
        field = f"pipeline.steps.{i}"
        if not isinstance(entry, dict) or set(entry) not in (_STEP_KEYS, _PASSTHROUGH_KEYS):
            raise _bad(field, "must be a transformer or a passthrough step")
        names.append(entry["name"])
        if "passthrough" in entry:
            if entry["passthrough"] not in (None, "passthrough"):
                raise _bad(field, "must be null or 'passthrough'")
            continue
        if not isinstance(entry["class"], str) or entry["class"] not in ta.SUPPORTED:
            raise ValueError(f"corrupt model file: unknown pipeline step class "
                             f"{entry['class']!r}")
        _dict(entry, "params", field=f"{field}.params")
        _dict(entry, "scalars", field=f"{field}.scalars")
        d = _int(entry, "n_features_in", low=1, high=2**31, field=f"{field}.n_features_in")
        _int(entry, "n_features_out", low=1, high=2**31, field=f"{field}.n_features_out")
        if width is not None and d != width:
            raise _bad(field, f"takes {d} features, the step before it gives {width}")
        width = entry["n_features_out"]
        attrs = entry["arrays"]
        if not isinstance(attrs, list) or not all(isinstance(a, str) for a in attrs) or \
                len(set(attrs)) != len(attrs) or len(attrs) > 16:
            raise _bad(f"{field}.arrays", "must list distinct attribute names")
        for attr in list(attrs) + list(entry["scalars"]):
            if not _FITTED_ATTR.fullmatch(attr) or not _NAME.fullmatch(f"pipe{i}__{attr}"):
                raise _bad(field, f"names {attr!r}, which is not a fitted attribute")
        if set(attrs) & set(entry["scalars"]):
            raise _bad(field, "names an attribute both as array and as scalar")
        if not isinstance(entry["probe"], list):
            raise _bad(f"{field}.probe", "must be a list")
    names.append(spec["final"])
    if not all(isinstance(n, str) and _STEP_NAME.fullmatch(n) and "__" not in n
               for n in names) or len(set(names)) != len(names):
        raise _bad("pipeline", f"step names {names!r} are not distinct names without '__'")
    if width is not None and width != meta["n_features_in"]:
        raise _bad("pipeline", f"its transformers give {width} features, the final step "
                               f"takes {meta['n_features_in']}")
    _dict(spec, "params", field="pipeline.params")
    if set(spec["params"]) - _PIPELINE_PARAMS:
        raise _bad("pipeline.params", f"may hold only {sorted(_PIPELINE_PARAMS)}")


def _pipeline_members(spec):
    """``{member: (shape test, dtype kinds, required)}`` of the transformers' fitted arrays:
    at most two axes, none longer than the step's widths in and out (+16)."""
    out = {}
    for i, entry in enumerate(spec["steps"]):
        if "passthrough" in entry:
            continue
        bound = max(entry["n_features_in"], entry["n_features_out"]) + 16

        def fits(shape, bound=bound):
            return len(shape) <= 2 and all(k <= bound for k in shape)

        for attr in entry["arrays"]:
            out[f"pipe{i}__{attr}"] = (fits, "U" if attr == "feature_names_in_" else "biuf",
                                       True)
    return out


def _load_pipeline(spec, arrays, model):
    """The :class:`deltafit.UpdatablePipeline` of the stored transformers and ``model``, each
    transformer rebuilt and checked to reproduce its saved output on the probe rows."""
    from deltafit._pipeline import UpdatablePipeline

    steps = []
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
                raise ValueError(f"corrupt model file: the {what} cannot map "
                                 f"{entry['n_features_in']} features to fewer")
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
        raise ValueError("corrupt model file: the pipeline's transform_input is not a list of "
                         "names")
    pipe = UpdatablePipeline(steps + [(spec["final"], model)], **params)
    pipe._check_final()
    return pipe
