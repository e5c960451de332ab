"""A dask DataFrame read from a Parquet table of small files: dask fuses the partitions of a
one-column selection (the target) but not of the features, so the partition counts of X and y
differ from the blocks their arrays compute.  The fit must equal the NumPy fit of the table."""

import numpy as np
import pytest

dd = pytest.importorskip("dask.dataframe")
pd = pytest.importorskip("pandas")
pytest.importorskip("pyarrow")

import dask  # noqa: E402
from deltafit import LinearClassifier  # noqa: E402


def test_fit_on_a_parquet_table_of_small_files_equals_the_numpy_fit(tmp_path):
    rng = np.random.default_rng(0)
    t = pd.DataFrame(rng.normal(size=(8000, 20)), columns=[f"x{j}" for j in range(20)])
    t["target"] = np.where(t.x0 + 0.5 * rng.normal(size=8000) > 0, "yes", "no")
    dd.from_pandas(t, npartitions=4).to_parquet(tmp_path / "table")
    f = dd.read_parquet(tmp_path / "table")
    feats = [c for c in f.columns if c != "target"]
    with dask.config.set(scheduler="threads"):
        m = LinearClassifier(loss="logistic").fit(f[feats], f["target"])
        ref = LinearClassifier(loss="logistic").fit(t[feats], t["target"].to_numpy())
        assert m.n_samples_ == 8000
        np.testing.assert_allclose(m.coef_, ref.coef_, rtol=0, atol=1e-6)
        np.testing.assert_array_equal(m.predict(f[feats]).compute(), ref.predict(t[feats]))
