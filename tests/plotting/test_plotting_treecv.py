"""deltafit.plotting.treecv_times (Fig. 2 of Joulani et al.)."""

import pytest

pytest.importorskip("matplotlib")

from deltafit.plotting import treecv_times  # noqa: E402


def test_writes_png(tmp_path):
    n = [1000, 2000, 4000]
    res = {
        "Pegasos": {
            "k-CV, fixed order": {
                "TreeCV k=5": (n, [0.1, 0.2, 0.4]),
                "standard k=5": (n, [0.4, 0.8, 1.6]),
            },
            "LOOCV": {"TreeCV k=n": (n, [0.5, 1.1, 2.3]), "standard k=n": (n[:2], [10.0, 40.0])},
        },
        "LSQSGD": {"k-CV, fixed order": {"TreeCV k=10": (n, [0.1, 0.2, 0.3])}},
    }
    out = treecv_times(res, tmp_path / "fig.png")
    with open(out, "rb") as f:
        assert f.read(8) == b"\x89PNG\r\n\x1a\n"


@pytest.mark.parametrize(
    "bad",
    [
        {},
        {"a": {}},
        {"a": {"p": {}}},
        {"a": {"p": {"c": ([1, 2], [1.0])}}},
        {"a": {"p": {"c": ([1, 2], [1.0, -1.0])}}},
    ],
)
def test_bad_input(tmp_path, bad):
    with pytest.raises(ValueError):
        treecv_times(bad, tmp_path / "x.png")
