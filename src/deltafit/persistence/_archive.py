"""The model file as an archive: atomic writing, and reading members without trusting them.

A model file is a NumPy ``.npz`` archive: a zip of uncompressed ``.npy`` members, each with its
CRC-32 (what the members hold: :mod:`deltafit.persistence._schema`).  This module knows the
archive and nothing of models:

* :func:`write_atomically`: the bytes go to a synced temporary file in the target's directory,
  renamed over the target (``os.replace``) with SIGINT held meanwhile (:class:`_HeldInterrupt`),
  so that an existing file is replaced only by a complete new one;
* :func:`read_directory`, :func:`read_header`, :func:`read_member`: the archive's directory
  (known kinds of names, listed once, uncompressed, unencrypted, inside the archive), a member's
  ``.npy`` header checked against the member's size before any data is read, and its data read
  in bounded chunks with the CRC checked; :func:`dtype_ok` and :data:`KIND_NAMES` state the
  dtypes a member may have.
"""

from __future__ import annotations

import math
import os
import re
import secrets
import signal
import threading
import zipfile
from types import FrameType, TracebackType
from typing import Any, Literal

import numpy as np

__all__ = [
    "MEMBER_NAME",
    "KIND_NAMES",
    "write_atomically",
    "read_directory",
    "read_header",
    "read_member",
    "dtype_ok",
]

_MAX_MEMBERS = 64
_MAX_HEADER = 10_000  # bytes of one .npy header (numpy's own default limit)
_CHUNK = 1 << 24  # bytes read or written at a time
MEMBER_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,99}")
KIND_NAMES = {
    "f8": "float64",
    "i8": "int64",
    "u1": "uint8",
    "biufU": "numbers or text",
    "U": "text",
    "biuf": "numbers",
}


# =============================================================================================
# writing
# =============================================================================================
def write_atomically(path: str | os.PathLike[str], data: Any) -> None:
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
                    fh.write(view[start : start + _CHUNK])
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

    def __init__(self) -> None:
        self.pending = False
        self._previous: Any = None

    def _hold(self, signum: int, frame: FrameType | None) -> None:
        self.pending = True

    def check(self) -> None:
        if self.pending:
            self.pending = False
            raise KeyboardInterrupt

    def __enter__(self) -> _HeldInterrupt:
        if threading.current_thread() is threading.main_thread():
            try:
                previous = signal.getsignal(signal.SIGINT)
                if previous is not None:  # None: a handler not installed from Python
                    signal.signal(signal.SIGINT, self._hold)
                    self._previous = previous
            except (ValueError, OSError, AttributeError):
                self._previous = None
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> Literal[False]:
        if self._previous is not None:
            signal.signal(signal.SIGINT, self._previous)
            self._previous = None
        if exc_type is None and self.pending:
            self.pending = False
            raise KeyboardInterrupt
        return False


def _sync_directory(folder: str) -> None:
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
# reading
# =============================================================================================


class _Header:
    """A member's ``.npy`` header: shape, dtype, order and where its data starts."""

    __slots__ = ("shape", "dtype", "fortran", "offset", "info")

    def __init__(
        self,
        shape: tuple[int, ...],
        dtype: np.dtype,
        fortran: bool,
        offset: int,
        info: zipfile.ZipInfo,
    ) -> None:
        self.shape, self.dtype, self.fortran, self.offset, self.info = (
            shape,
            dtype,
            fortran,
            offset,
            info,
        )


def _member_name(info: zipfile.ZipInfo) -> str:
    return info.filename[:-4] if info.filename.endswith(".npy") else info.filename


def read_directory(zf: zipfile.ZipFile, size: int) -> dict[str, zipfile.ZipInfo]:
    """The archive's members by name, checked: known kind of name, listed once, uncompressed,
    unencrypted, inside the archive."""
    infos = zf.infolist()
    if len(infos) > _MAX_MEMBERS:
        raise ValueError(
            f"corrupt model file: {len(infos)} members (a model has at most {_MAX_MEMBERS})"
        )
    members: dict[str, zipfile.ZipInfo] = {}
    total = 0
    for info in infos:
        name = _member_name(info)
        if not info.filename.endswith(".npy") or not MEMBER_NAME.fullmatch(name):
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
            raise ValueError(
                f"corrupt model file: member {name!r} claims {info.file_size} "
                "bytes beyond the end of the archive"
            )
        total += info.compress_size
        members[name] = info
    if total > size:
        raise ValueError("corrupt model file: the members claim more bytes than the archive holds")
    return members


def read_header(zf: zipfile.ZipFile, info: zipfile.ZipInfo) -> _Header:
    """The ``.npy`` header of a member, checked against the member's size; no data is read."""
    name = _member_name(info)
    try:
        with zf.open(info) as fh:
            version = np.lib.format.read_magic(fh)
            if version == (1, 0):
                shape, fortran, dtype = np.lib.format.read_array_header_1_0(
                    fh, max_header_size=_MAX_HEADER
                )
            elif version == (2, 0):
                shape, fortran, dtype = np.lib.format.read_array_header_2_0(
                    fh, max_header_size=_MAX_HEADER
                )
            else:
                raise ValueError(f".npy format version {version} is not read")
            offset = fh.tell()
    except Exception as exc:  # noqa: BLE001 - numpy parses the header text in many ways
        raise ValueError(
            f"corrupt model file: member {name!r} is not a .npy array ({type(exc).__name__}: {exc})"
        ) from None
    if (
        dtype.hasobject
        or dtype.fields is not None
        or dtype.subdtype is not None
        or dtype.kind not in "biufU"
    ):
        raise ValueError(
            f"corrupt model file: member {name!r} has dtype {dtype.str!r} "
            "(object, structured or unsupported data is never read)"
        )
    if not all(isinstance(k, int) and k >= 0 for k in shape):
        raise ValueError(f"corrupt model file: member {name!r} has shape {shape!r}")
    nbytes = math.prod(shape) * dtype.itemsize
    if nbytes != info.file_size - offset:
        raise ValueError(
            f"corrupt model file: member {name!r} declares shape {shape} ({nbytes} bytes) but "
            f"holds {info.file_size - offset} bytes"
        )
    return _Header(tuple(shape), dtype, bool(fortran), offset, info)


def read_member(zf: zipfile.ZipFile, h: _Header) -> np.ndarray:
    """A member's data as a native-byte-order array (its size checked by :func:`read_header`),
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
                raw[pos : pos + len(chunk)] = np.frombuffer(chunk, dtype=np.uint8)
                pos += len(chunk)
            if fh.read(1):
                raise ValueError("data past the declared shape")
    except (ValueError, EOFError, OSError, zipfile.BadZipFile, RuntimeError) as exc:
        raise ValueError(
            f"corrupt model file: member {name!r} cannot be read ({type(exc).__name__}: {exc})"
        ) from None
    out = out.reshape(h.shape, order="F" if h.fortran else "C")
    if not out.dtype.isnative:
        out = out.astype(out.dtype.newbyteorder("="))
    return out


def dtype_ok(dtype: np.dtype, spec: str) -> bool:
    """Whether ``dtype`` is ``spec``: an exact kind and size (``"f8"``) or a set of kinds."""
    if spec[-1].isdigit():
        return dtype.kind == spec[0] and dtype.itemsize == int(spec[1:])
    return dtype.kind in spec
