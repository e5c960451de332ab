"""The README's first example runs as printed (in a temporary directory: it writes a file)."""

from pathlib import Path

import numpy as np

README = Path(__file__).resolve().parents[1] / "README.md"


def _first_python_block():
    text = README.read_text(encoding="utf-8")
    start = text.index("```python\n") + len("```python\n")
    return text[start:text.index("```\n", start)]


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
