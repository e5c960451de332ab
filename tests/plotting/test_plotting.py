"""deltafit.plotting: figures are PNG files; bad input is a ValueError."""

import numpy as np
import pytest

pytest.importorskip("matplotlib")

from deltafit.plotting import tightness_cdf  # noqa: E402


def test_tightness_cdf_writes_a_png(tmp_path):
    rng = np.random.default_rng(0)
    path = tmp_path / "cdf.png"
    out = tightness_cdf(
        {"k=n": 1 + rng.exponential(0.1, 200), "k=n/10": 1 + rng.random(20)}, path, title="test"
    )
    assert out == str(path)
    data = path.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n" and len(data) > 1000


@pytest.mark.parametrize("bad", [{}, [1.2, 1.3], {"a": [np.nan, np.inf]}])
def test_tightness_cdf_bad_input(tmp_path, bad):
    with pytest.raises(ValueError):
        tightness_cdf(bad, tmp_path / "x.png")


def _drawn_demo_figure(monkeypatch, tmp_path, intervals):
    """``demo_figure``'s figure, kept open for inspection (it is still written to a PNG)."""
    import deltafit.plotting as plotting

    kept = {}
    save = plotting._save_png

    def keep(plt, fig, path):
        fig.canvas.draw()
        kept["axes"] = fig.axes
        kept["ticks"] = [
            (
                ax.get_xticks(),
                ax.get_xticklabels(),
                ax.get_yticks(),
                ax.get_yticklabels(),
                ax.get_xlim(),
                ax.get_ylim(),
            )
            for ax in fig.axes
        ]
        kept["offsets"] = [[c.get_offsets() for c in ax.collections] for ax in fig.axes]
        kept["legend"] = [
            [t.get_text() for t in ax.get_legend().get_texts()] if ax.get_legend() else []
            for ax in fig.axes
        ]
        kept["scales"] = [(ax.get_xscale(), ax.get_yscale()) for ax in fig.axes]
        return save(plt, fig, path)

    monkeypatch.setattr(plotting, "_save_png", keep)
    path = tmp_path / "demo.png"
    assert plotting.demo_figure(
        [("delete", 0.01, 0.1), ("what-if", 0.02, 0.3)], path, intervals=intervals
    ) == str(path)
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    return kept


def _visible(ticks, labels, lim):
    lo, hi = min(lim), max(lim)
    return [
        lab.get_text()
        for t, lab in zip(ticks, labels)
        if lo * (1 - 1e-9) <= t <= hi * (1 + 1e-9) and lab.get_text()
    ]


def test_demo_figure_shows_widths_of_any_size_against_the_change(monkeypatch, tmp_path):
    # the demo's case: certified intervals 1e-7 wide, true changes ~1e-3, the ball ~1 wide
    rng = np.random.default_rng(0)
    exact = rng.normal(scale=1e-3, size=300)
    intervals = {
        "lower": exact - 5e-8,
        "upper": exact + 5e-8,
        "exact": exact,
        "certified": 1.0,
        "ball_lower": exact - 0.6,
        "ball_upper": exact + 0.7,
        "ball_certified": 0.1,
    }
    kept = _drawn_demo_figure(monkeypatch, tmp_path, intervals)
    right = 1
    assert kept["scales"][right] == ("log", "log")
    xt, xl, yt, yl, xlim, ylim = kept["ticks"][right]
    # readable ticks: at least four labelled decades on each axis, every value inside
    assert len(_visible(xt, xl, xlim)) >= 4 and len(_visible(yt, yl, ylim)) >= 4
    widths = [off[:, 1] for off in kept["offsets"][right]]
    assert len(widths) == 2  # deltafit's interval and the papers' ball, beside each other
    np.testing.assert_allclose(np.sort(widths[0]), 1e-7, rtol=1e-6)
    np.testing.assert_allclose(np.sort(widths[1]), 1.3, rtol=1e-6)
    changes = kept["offsets"][right][0][:, 0]
    np.testing.assert_allclose(np.sort(changes), np.sort(np.abs(exact)), rtol=1e-12)
    for values in (changes, widths[0], widths[1]):
        assert ylim[0] <= values.min() and values.max() <= ylim[1]
        assert xlim[0] <= changes.min() and changes.max() <= xlim[1]
    legend = " ".join(kept["legend"][right])
    assert "deltafit's certified interval: 100.0%" in legend and "ball" in legend
    assert "10.0%" in legend and "width = true change" in legend


def test_demo_figure_without_the_ball_and_with_zero_changes(monkeypatch, tmp_path):
    exact = np.array([0.0, 0.5, -2.0])  # no change at all in one row: drawn on the floor
    kept = _drawn_demo_figure(
        monkeypatch, tmp_path, {"lower": exact - 1.0, "upper": exact + 1.0, "exact": exact}
    )
    xt, xl, yt, yl, xlim, ylim = kept["ticks"][1]
    assert len(kept["offsets"][1]) == 1 and len(_visible(yt, yl, ylim)) >= 4
    assert kept["offsets"][1][0][:, 0].min() == pytest.approx(xlim[0])
    with pytest.raises(ValueError, match="ball"):
        from deltafit.plotting import demo_figure

        demo_figure(
            [("a", 1.0, 2.0)],
            tmp_path / "x.png",
            intervals={"lower": exact, "upper": exact, "exact": exact, "ball_lower": exact},
        )
