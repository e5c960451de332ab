"""deltafit.plotting.attribution_figure: a PNG of the samples that matter; bad input raises."""

import numpy as np
import pytest

pytest.importorskip("matplotlib")

from deltafit.plotting import attribution_figure  # noqa: E402


def test_writes_a_png(tmp_path):
    rng = np.random.default_rng(0)
    e = rng.normal(size=30)
    imgs = rng.random((30, 16))
    for kw in (
        {"estimate": e * 0.9},
        {"images": imgs, "query": imgs[0], "labels": np.arange(30)},
        {"estimate": e, "images": imgs},
        {},
    ):
        path = attribution_figure(e, tmp_path / "a.png", title="t", k=3, **kw)
        data = open(path, "rb").read()
        assert data[:8] == b"\x89PNG\r\n\x1a\n" and len(data) > 1000


@pytest.mark.parametrize(
    "kw",
    [
        {"effects": []},
        {"effects": [np.nan, 1.0]},
        {"estimate": [1.0]},
        {"images": np.ones((3, 5))},
        {"images": np.ones((2, 4))},
        {"k": 0},
    ],
)
def test_bad_input(tmp_path, kw):
    args = {"effects": [0.1, -0.2, 0.3], **kw}
    with pytest.raises(ValueError):
        attribution_figure(args.pop("effects"), tmp_path / "x.png", **args)
