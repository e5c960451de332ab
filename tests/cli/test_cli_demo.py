"""``deltafit demo`` is a check: its exit status, the check failing on a corrupted update or a
violated bound, its figure, its saved model, its options, its default data set.

The fast options (``--shift 0``: the 1,797 digit images; ``--repeat 1``) keep each run short.
"""

import io

import numpy as np
import pytest
from sklearn.datasets import load_digits

import deltafit
from deltafit import LinearClassifier, cli
from deltafit.cli._demo import CERTIFIED_MEANS, _warm_time, load_shifted_digits

FAST = ["demo", "--shift", "0", "--repeat", "1"]


def _run(argv):
    args = cli.build_parser().parse_args(argv)
    out = io.StringIO()
    return cli.demo(args, out=out), out.getvalue()


def test_default_story_exits_0_and_says_what_each_figure_means(capsys):
    assert cli.main(FAST) == 0
    text = capsys.readouterr().out
    assert "scikit-learn's handwritten digits" in text and "1,797 x 500" in text
    lines = text.splitlines()
    steps = [line for line in lines if line[:2] in ("0.", "1.", "2.", "3.", "4.")]
    assert len(steps) == 5
    for line in steps[1:]:  # each update and the what-if: its time and the refit's, the ratio
        assert " vs refit " in line and ("x faster" in line or "x SLOWER" in line)
    assert sum("equals the refit" in line for line in steps) == 3
    assert f"   ({CERTIFIED_MEANS})" in lines
    assert "test labels certified" in steps[4]
    assert any("times the mean true change" in line and " 0 of " in line for line in lines)
    assert any(line.startswith("ratio: ") for line in lines)
    assert lines[-1].startswith("check: every update within 1e-08 of its refit")


def test_a_corrupted_update_makes_it_exit_1(monkeypatch, capsys):
    relabel = LinearClassifier.relabel

    def wrong(self, ids, y, **kw):  # forgets the last relabel: a consistent, wrong model
        return relabel(self, ids[:-1], y[:-1], **kw)

    monkeypatch.setattr(LinearClassifier, "relabel", wrong)
    assert cli.main(FAST) == 1
    text = capsys.readouterr().out
    assert "DIFFERS from the refit" in text and "CHECK FAILED" in text


class _TooTight:
    """A what-if object whose bounds are its midpoint, moved: the exact answer is outside."""

    def __init__(self, s):
        self.s = s

    def __getattr__(self, name):
        return getattr(self.s, name)

    def decision_bounds(self, X):
        lo, hi = self.s.decision_bounds(X)
        mid = 0.5 * (lo + hi) + 1e-3
        return mid, mid


def test_a_violated_bound_makes_it_exit_1(monkeypatch, capsys):
    real = deltafit.sensitivity
    monkeypatch.setattr(
        deltafit, "sensitivity", lambda model, *a, **kw: _TooTight(real(model, *a, **kw))
    )
    assert cli.main(FAST) == 1
    text = capsys.readouterr().out
    assert "CHECK FAILED: a what-if bound was violated" in text
    assert " 0 of " not in text.split("bounds on the new decision values")[1].splitlines()[0]


def test_plot_writes_one_png(tmp_path):
    pytest.importorskip("matplotlib")
    path = tmp_path / "demo.png"
    dev, text = _run(FAST + ["--plot", str(path)])
    assert dev < 1e-8 and f"figure: {path}" in text
    # the papers' ball answers the same what-if, beside deltafit's intervals
    assert "the papers' ball (Okumura et al. Thm 1, method='sphere')" in text
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_the_saved_model_is_the_refit_without_the_user(tmp_path):
    path = tmp_path / "model.npz"
    dev, text = _run(FAST + ["--save", str(path), "--dataset", "breast_cancer"])
    assert dev < 1e-8 and f"to {path}" in text
    m = deltafit.load(path)
    # breast cancer: 569 rows, 113 test, 56 arriving later, 400 to train, 5 forgotten
    assert m.sample_ids_.size == 569 - 113 - 56 - 5
    ids = np.setdiff1d(np.arange(400), m.sample_ids_)
    assert ids.size == 5  # the ids of the user, as the demo removed them


@pytest.mark.parametrize(
    "argv,message",
    [
        (["--forget", "0"], "--forget must be at least 1"),
        (["--repeat", "0"], "--repeat must be at least 1"),
        (["--shift", "9"], "--shift must be an integer in 0..3"),
        (["--mislabeled", "0.9"], "--mislabeled must be in [0.0, 0.5]"),
        (["--threads", "-1"], "--threads must be 0"),
        (["--forget", "300", "--dataset", "breast_cancer"], "too few samples for the story"),
        (["--target", "0"], "a target column applies to CSV/TSV files only"),
    ],
)
def test_bad_options_exit_2_naming_the_problem(capsys, argv, message):
    assert cli.main(["demo"] + argv) == 2
    err = capsys.readouterr().err
    assert err.startswith("deltafit demo: error: ") and message in err


def test_shifted_digits_are_the_digits_moved():
    X, y, image = load_shifted_digits(1, n_features=0)
    d = load_digits()
    assert X.shape == (9 * 1797, 64) and np.array_equal(y, np.tile(d.target, 9))
    assert np.array_equal(image, np.tile(np.arange(1797), 9))
    img = d.images / 16.0
    # copy 0 is the shift (dy, dx) = (-1, -1): pixel (r, c) comes from (r + 1, c + 1)
    moved = X[:1797].reshape(-1, 8, 8)
    assert np.array_equal(moved[:, :7, :7], img[:, 1:, 1:])
    assert not moved[:, 7, :].any() and not moved[:, :, 7].any()
    assert np.array_equal(X[4 * 1797 : 5 * 1797], img.reshape(-1, 64))  # copy 4: no shift
    Z, _, _ = load_shifted_digits(0)
    from sklearn.kernel_approximation import RBFSampler

    ref = RBFSampler(gamma=0.05, n_components=500, random_state=0).fit_transform(
        img.reshape(-1, 64)
    )
    np.testing.assert_allclose(Z, ref, rtol=0, atol=1e-12)


def test_warm_time_runs_one_untimed_call_first():
    calls = []
    t, out = _warm_time(lambda a: calls.append(a) or len(calls), lambda: len(calls), repeat=3)
    assert calls == [0, 1, 2, 3] and out == 4 and t >= 0
    calls.clear()
    _warm_time(lambda a: calls.append(a), lambda: 0, repeat=2, warmup=False)
    assert len(calls) == 2


def test_demo_figure_bad_input(tmp_path):
    pytest.importorskip("matplotlib")
    from deltafit.plotting import demo_figure

    path = tmp_path / "f.png"
    assert demo_figure([("remove", 0.001, 0.1)], path) == str(path)
    for bad, kw in (
        ([], {}),
        ([("a", 0.0, 1.0)], {}),
        ([("a", 1.0)], {}),
        ([("a", 1.0, 2.0)], {"intervals": {"lower": [0.0]}}),
        ([("a", 1.0, 2.0)], {"intervals": {"lower": [0.0], "upper": [1.0], "exact": [0.5, 0.6]}}),
    ):
        with pytest.raises(ValueError):
            demo_figure(bad, tmp_path / "x.png", **kw)
