"""Terminal manners: nothing printed on import, progress bars on standard error only and one
per long task, and the first numba compilation announced once instead of a wrong ETA."""

import os
import subprocess
import sys
from pathlib import Path

import pytest

from deltafit.utils._progress import open_bar, paused_for, progress_bar

SRC = str(Path(__file__).resolve().parents[2] / "src")
PUBLIC = [
    "deltafit",
    "deltafit.models",
    "deltafit.sensitivity",
    "deltafit.model_selection",
    "deltafit.stream",
    "deltafit.active",
    "deltafit.datasets",
    "deltafit.plotting",
    "deltafit.persistence",
    "deltafit.kernels",
    "deltafit.losses",
    "deltafit.solvers",
    "deltafit.utils.estimator_checks",
]


def _python(code, **env):
    full = dict(os.environ, PYTHONPATH=SRC + os.pathsep + os.environ.get("PYTHONPATH", ""), **env)
    return subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env=full, timeout=600
    )


def test_import_prints_nothing():
    r = _python(f"import importlib\nfor m in {PUBLIC!r}: importlib.import_module(m)")
    assert r.returncode == 0, r.stderr
    assert r.stdout == "" and r.stderr == ""


def test_bars_go_to_stderr_and_one_per_task(capfd):
    pytest.importorskip("tqdm")
    with progress_bar(3, True, desc="outer") as outer:
        assert open_bar() is outer
        inner = progress_bar(5, True, desc="inner")  # the work inside: silent
        assert inner is not outer and open_bar() is outer
        inner.update(5)
        inner.close()
        outer.update(3)
    assert open_bar() is None
    out, err = capfd.readouterr()
    assert out == ""
    assert "outer" in err and "inner" not in err
    with progress_bar(2, True, desc="next") as again:  # a closed bar frees the slot
        assert open_bar() is again


def test_a_pause_is_labelled_and_left_out_of_the_rate():
    pytest.importorskip("tqdm")
    with progress_bar(10, True, desc="task") as bar:
        start = bar.start_t
        with paused_for("compiling, once"):
            assert "compiling, once" in bar.postfix
        assert bar.start_t > start  # the pause is not the task's time
        assert not bar.postfix
    with paused_for("nothing open"):  # no bar: nothing to do
        pass


def test_disabled_bar_is_silent(capfd):
    with progress_bar(3, False) as bar:
        bar.update(3)
        bar.set_postfix_str("x")
    assert capfd.readouterr() == ("", "")


_FIT = """
import numpy as np
from deltafit.stream import Pegasos
rng = np.random.default_rng(0)
X = rng.normal(size=(50, 3)); y = np.where(X[:, 0] > 0, 1, -1)
Pegasos(lam=1e-2).fit(X, y)
print("fitted")
"""


def test_first_compilation_says_so_once(tmp_path):
    pytest.importorskip("numba")
    cache = str(tmp_path / "numba-cache")
    first = _python(_FIT, NUMBA_CACHE_DIR=cache)
    assert first.returncode == 0, first.stderr
    assert first.stdout == "fitted\n"  # the notice is not on stdout
    assert first.stderr.count("compiling the per-sample loops with numba, once") == 1
    assert "deltafit: compiled in" in first.stderr
    second = _python(_FIT, NUMBA_CACHE_DIR=cache)  # numba's cache: nothing to say
    assert second.returncode == 0, second.stderr
    assert second.stdout == "fitted\n" and "compiling" not in second.stderr


def test_no_notice_without_compilation():
    r = _python(_FIT, NUMBA_DISABLE_JIT="1")
    assert r.returncode == 0, r.stderr
    assert "compiling" not in r.stderr
