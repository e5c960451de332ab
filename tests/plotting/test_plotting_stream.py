"""deltafit.plotting.tradeoff_curves (Sivan et al. Fig. 3) and active_learning_curves (Fig. 2)."""

import numpy as np
import pytest

pytest.importorskip("matplotlib")

import matplotlib.image  # noqa: E402
import matplotlib.pyplot as plt  # noqa: E402

from deltafit import plotting  # noqa: E402
from deltafit.plotting import active_learning_curves, tradeoff_curves  # noqa: E402

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def assert_png(path):
    with open(path, "rb") as f:
        assert f.read(8) == PNG_MAGIC
    img = matplotlib.image.imread(path)
    assert img.ndim == 3 and img.shape[2] in (3, 4)
    h, w = img.shape[:2]
    assert 300 <= h <= 2000 and 400 <= w <= 3000
    assert img.std() > 0  # not a blank canvas


@pytest.fixture
def figures(monkeypatch):
    """The figures the plotting functions close, kept for inspection."""
    kept = []
    real_close = plt.close

    def close(fig=None):
        if fig is not None and hasattr(fig, "axes"):
            kept.append(fig)
        return real_close(fig)

    monkeypatch.setattr(plt, "close", close)
    return kept


def fig3_results():
    rows = []
    for t, comp, acc in [(0.5, 2400, 0.81), (0.05, 900, 0.84), (0.1, 1500, 0.86)]:
        rows.append(
            {
                "algorithm": "KDR",
                "n_model_computations": comp,
                "accuracy": acc,
                "accuracy_std": 0.004,
                "label": f"T={t}",
            }
        )
    for k, comp, acc in [(1, 40000, 0.87), (10, 4000, 0.85), (50, 800, 0.80)]:
        rows.append(
            {
                "algorithm": "SW",
                "n_model_computations": comp,
                "accuracy": acc,
                "accuracy_std": 0.003,
                "label": f"every {k}",
            }
        )
    rows.append(
        {"algorithm": "DDM", "n_model_computations": 12, "accuracy": 0.70, "label": "alpha=3"}
    )
    rows.append({"algorithm": "DDM", "n_model_computations": 30, "accuracy": 0.72})
    for lr in (0.1, 0.5):
        rows.append(
            {
                "algorithm": "NORMA",
                "n_model_computations": 0,
                "accuracy": 0.6 + lr / 10,
                "label": f"eta={lr}",
            }
        )
    return rows


def test_tradeoff_writes_png(tmp_path, figures):
    out = tradeoff_curves(fig3_results(), tmp_path / "fig3.png", title="Rotating checkerboard")
    assert out == str(tmp_path / "fig3.png")
    assert_png(out)
    (fig,) = figures
    (ax,) = fig.axes
    assert ax.get_xscale() == "log"
    assert ax.get_xlabel() == "model computations"
    assert ax.get_ylabel() == "prequential accuracy"
    assert ax.get_title() == "Rotating checkerboard"
    legend = [t.get_text() for t in ax.get_legend().get_texts()]
    assert any(t.startswith("KDR") for t in legend) and any(t.startswith("SW") for t in legend)
    assert any(t.startswith("DDM") for t in legend) and any(t.startswith("NORMA") for t in legend)


def test_tradeoff_points_sorted_and_error_bars(tmp_path, figures):
    tradeoff_curves(fig3_results(), tmp_path / "f.png")
    (ax,) = figures[0].axes
    containers = {c.get_label(): c for c in ax.containers}
    kdr = containers["KDR"]
    x, y = kdr.lines[0].get_data()
    np.testing.assert_array_equal(x, [900, 1500, 2400])
    np.testing.assert_allclose(y, [0.84, 0.86, 0.81])
    assert kdr.has_yerr
    assert not containers["DDM"].has_yerr  # no std given


def test_tradeoff_horizontal_line_for_no_computations(tmp_path, figures):
    tradeoff_curves(fig3_results(), tmp_path / "f.png")
    (ax,) = figures[0].axes
    norma = [ln for ln in ax.get_lines() if ln.get_label().startswith("NORMA")]
    assert len(norma) == 1
    line = norma[0]
    assert line.get_linestyle() == "--"
    ys = np.unique(line.get_ydata())
    assert ys.size == 1 and ys[0] == pytest.approx(np.mean([0.61, 0.65]))
    # horizontal: spans the axis in axes coordinates
    np.testing.assert_allclose(line.get_xdata(), [0, 1])
    # a NORMA line does not prevent the log axis
    assert ax.get_xscale() == "log"


def test_tradeoff_only_horizontal_lines(tmp_path, figures):
    rows = [
        {"algorithm": "NORMA", "n_model_computations": 0, "accuracy": 0.7},
        {"algorithm": "ISGD", "n_model_computations": 0.0, "accuracy": 0.65},
    ]
    assert_png(tradeoff_curves(rows, tmp_path / "h.png"))


def test_tradeoff_linear_axis(tmp_path, figures):
    tradeoff_curves(fig3_results(), tmp_path / "a.png", logx=False)
    assert figures[-1].axes[0].get_xscale() == "linear"
    # a zero among an algorithm's positive points: no log axis either
    rows = fig3_results() + [{"algorithm": "KDR", "n_model_computations": 0, "accuracy": 0.5}]
    tradeoff_curves(rows, tmp_path / "b.png")
    assert figures[-1].axes[0].get_xscale() == "linear"


def test_tradeoff_single_point(tmp_path):
    rows = [{"algorithm": "SW", "n_model_computations": 10, "accuracy": 1.0}]
    assert_png(tradeoff_curves(rows, tmp_path / "s.png"))


@pytest.mark.parametrize(
    "bad",
    [
        [],
        None,
        {"algorithm": "KDR", "n_model_computations": 1, "accuracy": 0.5},
        ["KDR"],
        [{"n_model_computations": 1, "accuracy": 0.5}],
        [{"algorithm": "KDR", "accuracy": 0.5}],
        [{"algorithm": "KDR", "n_model_computations": 1}],
        [{"algorithm": "KDR", "n_model_computations": -1, "accuracy": 0.5}],
        [{"algorithm": "KDR", "n_model_computations": np.nan, "accuracy": 0.5}],
        [{"algorithm": "KDR", "n_model_computations": 1, "accuracy": 1.5}],
        [{"algorithm": "KDR", "n_model_computations": 1, "accuracy": -0.1}],
        [{"algorithm": "KDR", "n_model_computations": 1, "accuracy": np.inf}],
    ],
)
def test_tradeoff_bad_input(tmp_path, bad):
    with pytest.raises(ValueError):
        tradeoff_curves(bad, tmp_path / "x.png")
    assert not (tmp_path / "x.png").exists()


def fig2_curves():
    n = np.arange(10, 210, 10)
    base = 1 - 0.4 * np.exp(-n / 60)
    return {
        "FGAL (m=100, p=10)": {
            "n_labeled": n,
            "accuracy_mean": base,
            "accuracy_std": np.full(n.size, 0.01),
            "n_model_computations": 20,
        },
        "AL (m=100)": {
            "n_labeled": n,
            "accuracy_mean": base - 0.03,
            "accuracy_std": np.full(n.size, 0.02),
            "n_model_computations": 2,
        },
        "random": {"n_labeled": list(n), "accuracy_mean": list(base - 0.08)},
    }


def test_active_learning_writes_png(tmp_path, figures):
    out = active_learning_curves(fig2_curves(), tmp_path / "fig2.png", title="splice")
    assert out == str(tmp_path / "fig2.png")
    assert_png(out)
    (ax,) = figures[0].axes
    assert ax.get_xlabel() == "labeled samples"
    assert ax.get_ylabel() == "test accuracy"
    assert ax.get_title() == "splice"
    legend = [t.get_text() for t in ax.get_legend().get_texts()]
    assert "FGAL (m=100, p=10) (20 computations)" in legend
    assert "AL (m=100) (2 computations)" in legend
    assert "random" in legend
    containers = {c.get_label(): c for c in ax.containers}
    assert containers["FGAL (m=100, p=10) (20 computations)"].has_yerr
    assert not containers["random"].has_yerr
    x, y = containers["random"].lines[0].get_data()
    np.testing.assert_array_equal(x, np.arange(10, 210, 10))


def test_active_learning_long_curve(tmp_path):
    n = np.arange(1, 501)
    curves = {
        "FGAL": {
            "n_labeled": n,
            "accuracy_mean": np.linspace(0.5, 0.9, n.size),
            "accuracy_std": np.zeros(n.size),
        }
    }
    assert_png(active_learning_curves(curves, tmp_path / "long.png"))


@pytest.mark.parametrize(
    "bad",
    [
        {},
        [],
        None,
        {"FGAL": [1, 2, 3]},
        {"FGAL": {"n_labeled": [1, 2]}},
        {"FGAL": {"accuracy_mean": [0.5, 0.6]}},
        {"FGAL": {"n_labeled": [], "accuracy_mean": []}},
        {"FGAL": {"n_labeled": [1, 2, 3], "accuracy_mean": [0.5, 0.6]}},
        {"FGAL": {"n_labeled": [1, 2], "accuracy_mean": [0.5, 0.6], "accuracy_std": [0.1]}},
        {"FGAL": {"n_labeled": [[1, 2]], "accuracy_mean": [[0.5, 0.6]]}},
        {"FGAL": {"n_labeled": [1, 2], "accuracy_mean": [0.5, np.nan]}},
        {
            "ok": {"n_labeled": [1, 2], "accuracy_mean": [0.5, 0.6]},
            "FGAL": {"n_labeled": [1, 2], "accuracy_mean": [0.5]},
        },
    ],
)
def test_active_learning_bad_input(tmp_path, bad):
    with pytest.raises(ValueError):
        active_learning_curves(bad, tmp_path / "x.png")
    assert not (tmp_path / "x.png").exists()


def test_exported():
    assert {"tradeoff_curves", "active_learning_curves"} <= set(plotting.__all__)
