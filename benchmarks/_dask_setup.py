"""The set-up shared by the Dask scale-out benchmarks (``bench_scale*.py``): where the Dask
work runs (the threaded scheduler in this process, or a ``LocalCluster`` of worker processes),
the synthetic data, the dask collections of it, the warm-up fit that compiles the digest
kernel before anything is timed, the JSON header every result starts from, and its output.

Nothing here is timed or claimed: each script still measures its own ratios against a
baseline measured in the same run.
"""

from __future__ import annotations

import json
import os
from contextlib import contextmanager

import numpy as np
from _timing import timed
from bench_updates import machine_info, source_info

__all__ = [
    "header",
    "threads",
    "process_cluster",
    "class_blobs",
    "logistic_rows",
    "hinge_rows",
    "linear_rows",
    "dask_rows",
    "warm_up",
    "emit",
]


def header(name, quick, workers, scheduler, **fields):
    """The first fields of a benchmark's JSON: its name, size flag, where the Dask work ran,
    ``OMP_NUM_THREADS``, the machine, the source revision and the load average at the
    start; ``fields`` (n, p, C, chunk_rows, ...) follow."""
    res = {
        "benchmark": name,
        "quick": bool(quick),
        "workers": workers,
        "scheduler": scheduler,
        "omp_num_threads": os.environ.get("OMP_NUM_THREADS"),
        "machine": machine_info(),
        "source": source_info(),
        "load_start": os.getloadavg(),
    }
    res.update(fields)
    return res


@contextmanager
def threads(workers):
    """Dask's threaded scheduler in this process with ``workers`` threads (the rows stay in
    memory as persisted blocks: a ratio against the NumPy path is the method's cost, not
    transfers)."""
    import dask

    with dask.config.set(scheduler="threads", num_workers=workers):
        yield


@contextmanager
def process_cluster(workers, as_default=False):
    """A ``LocalCluster`` of ``workers`` worker processes of one thread each; yields its
    client (the default client, and Dask's scheduler, only with ``as_default``: scripts
    otherwise pass ``scheduler=client.get``)."""
    import distributed

    with (
        distributed.LocalCluster(
            n_workers=workers,
            threads_per_worker=1,
            processes=True,
            dashboard_address=None,
            silence_logs=40,
        ) as cluster,
        distributed.Client(cluster, set_as_default=as_default) as client,
    ):
        yield client


def class_blobs(n, p, classes, rng):
    """A digits-like set: ``classes`` centres ``μ_k ~ N(0, I/2)`` in p dimensions, rows
    ``μ_{y_i} + N(0, I)``, classes uniform; ``(X, y)`` with labels 0..classes-1 (two
    classes: a binary problem), drawn from ``rng`` (a ``numpy.random.Generator`` the caller
    goes on drawing from, e.g. the ids to remove)."""
    centres = rng.normal(scale=np.sqrt(0.5), size=(classes, p))
    y = rng.integers(0, classes, n)
    return centres[y] + rng.standard_normal((n, p)), y


def logistic_rows(n, p, rng):
    """A logistic rule: ``X ~ N(0, I)`` (n × p), ``β* ~ N(0, I/p)``, labels
    ``1[X β* + 0.5 + Logistic(0, 1) > 0]``, drawn from ``rng`` in that order
    (``bench_scale_logistic.py``, ``bench_scale_cv.py``)."""
    X = rng.standard_normal((n, p))
    beta_star = rng.normal(scale=1.0 / np.sqrt(p), size=p)
    return X, (X @ beta_star + 0.5 + rng.logistic(size=n) > 0).astype(np.int64)


def hinge_rows(n, p, rng):
    """A noisy linear rule for the hinge loss: ``X ~ N(0, I)``, ``β* ~ N(0, I)``, labels
    ``1[X β* + 0.5 √p N(0, 1) > 0]`` (a third of the rows inside the margin or on the wrong
    side), drawn from ``rng`` in that order (``bench_scale_hinge.py``)."""
    X = rng.standard_normal((n, p))
    beta_star = rng.normal(size=p)
    return X, (X @ beta_star + 0.5 * np.sqrt(p) * rng.standard_normal(n) > 0).astype(np.int64)


def linear_rows(n, p, chunk_rows, seed=2, noise=0.1):
    """A lazy regression problem made by the workers: ``X ~ N(0, 1)`` (n × p, ``chunk_rows``
    rows a block), ``y = X β + 0.5 + noise·N(0, 1)`` with β evenly spaced in [-1, 1]."""
    import dask.array as da

    rs = da.random.RandomState(seed)
    X = rs.normal(size=(n, p), chunks=(chunk_rows, p))
    y = X @ np.linspace(-1.0, 1.0, p) + 0.5 + noise * rs.normal(size=n, chunks=chunk_rows)
    return X, y


def dask_rows(X, y, rows, client=None):
    """``(X, y)`` as dask arrays of ``rows`` rows a block, persisted on ``client``'s workers
    when given (otherwise left as graphs over the in-memory arrays)."""
    import dask.array as da

    Xd, yd = da.from_array(X, chunks=(rows, -1)), da.from_array(y, chunks=rows)
    if client is not None:
        Xd, yd = client.persist(Xd), client.persist(yd)
    return Xd, yd


def warm_up(X, y, small, parts=4, **params):
    """The seconds of one small fit (``LinearClassifier(**params)`` on the first ``small``
    rows in ``parts`` blocks) under the current scheduler: numba compiles the digest kernel
    once, before any timed fit."""
    import dask.array as da

    import deltafit as df

    small = min(small, X.shape[0])
    rows = max(1, small // parts)
    t, _ = timed(
        lambda: df.LinearClassifier(**params).fit(
            da.from_array(X[:small], chunks=(rows, -1)), da.from_array(y[:small], chunks=rows)
        )
    )
    return t


def _plain(v):
    """JSON for what ``json`` does not know: NumPy numbers as numbers, the rest as text."""
    return v.item() if isinstance(v, np.generic) else str(v)


def emit(res, out=None, table=()):
    """Print the JSON document, then the markdown rows; with ``out`` also write the JSON
    there and the rows next to it (``.md``)."""
    text = json.dumps(res, indent=1, default=_plain)
    print(text)
    table = "\n".join(table)
    if table:
        print(table)
    if out:
        os.makedirs(os.path.dirname(os.path.abspath(out)), exist_ok=True)
        with open(out, "w") as fh:
            fh.write(text)
        if table:
            with open(os.path.splitext(out)[0] + ".md", "w") as fh:
                fh.write(table + "\n")
