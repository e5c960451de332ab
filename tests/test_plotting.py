"""deltafit.plotting: figures are PNG files; bad input is a ValueError."""

import numpy as np
import pytest

pytest.importorskip("matplotlib")

from deltafit.plotting import tightness_cdf  # noqa: E402


def test_tightness_cdf_writes_a_png(tmp_path):
    rng = np.random.default_rng(0)
    path = tmp_path / "cdf.png"
    out = tightness_cdf({"k=n": 1 + rng.exponential(0.1, 200), "k=n/10": 1 + rng.random(20)},
                        path, title="test")
    assert out == str(path)
    data = path.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n" and len(data) > 1000


@pytest.mark.parametrize("bad", [{}, [1.2, 1.3], {"a": [np.nan, np.inf]}])
def test_tightness_cdf_bad_input(tmp_path, bad):
    with pytest.raises(ValueError):
        tightness_cdf(bad, tmp_path / "x.png")
