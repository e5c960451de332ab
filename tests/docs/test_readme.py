"""The README's first example runs as printed (in a temporary directory: it writes a file)."""

from pathlib import Path

import numpy as np

README = Path(__file__).resolve().parents[2] / "README.md"


def _first_python_block():
    text = README.read_text(encoding="utf-8")
    start = text.index("```python\n") + len("```python\n")
    return text[start : text.index("```\n", start)]


def test_first_example_runs(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    scope = {}
    exec(compile(_first_python_block(), str(README), "exec"), scope)  # noqa: S102
    m = scope["m"]
    assert (tmp_path / "model.npz").is_file()
    assert scope["lo"].shape == (5, 10) and np.all(scope["lo"] <= scope["hi"])
    assert scope["certain"].mean() == 1.0  # what the comment says (squared loss: exact)
    assert m.n_samples_ == 1797 - 2
    assert set(scope["search"].best_params_) == {"kernelclassifier__C"}
    # what the loo line's comment says the run does is what it does
    r = scope["r"]
    assert int(r.decided_by_bound.sum()) == _loo_claim(_first_python_block())
    assert r.n_samples == 1797 and not r.approximate
    # the attribution lines: shapes as the comments say, one effect equal to a refit
    E, clf, Xs, y = scope["E"], scope["clf"], scope["Xs"], scope["y"]
    assert E.shape == (300, 50, 10) and scope["v"].values.shape == (300,)
    refit = clf.__class__(**clf.get_params()).fit(Xs[1:300], y[1:300])
    change = refit.decision_function(Xs[300:350]) - clf.decision_function(Xs[300:350])
    np.testing.assert_allclose(E[0], change, atol=1e-6 * np.abs(change).max() + 1e-9)
    rob = scope["rob"]
    assert np.all(rob.lower <= rob.upper)


def _loo_claim(block):
    """The number of labels the README's loo comment says the bounds decided."""
    import re

    line = next(ln for ln in block.splitlines() if "= loo(" in ln)
    assert re.search(r"~[\d.]+ s here \(~[\d.]+ s on raw X\)", line), line
    assert "Xs, y)" in line  # on standardised features
    claimed = re.search(r"([\d,]+) of 1,797 labels decided by bounds", block)
    assert claimed, "the loo line's comment says how many labels the bounds decided"
    return int(claimed.group(1).replace(",", ""))


def test_the_loo_line_says_what_it_costs():
    """The first example's leave-one-out says its time, with the raw pixels' beside it."""
    assert _loo_claim(_first_python_block()) > 0
