"""The ledger at scale: the NH+SipHash digest against a scalar reference written from the
papers, range ledgers (the Dask fit's: implicit ids, weights and labels, sorted digests)
against the explicit ledger under random operation sequences, and files of format 2 (keyed
BLAKE2b digests) loading and working.

The tests/data/v2_*.npz files were written by deltafit at format 2 (main branch before the
digest change): ``LinearClassifier(C=0.5, keep_data=False).fit(X[:80], y[:80])`` on breast
cancer and ``LinearRegressor(C=2.0, keep_data=False).fit(X[:60], y[:60])`` on diabetes.
"""

import hashlib
import json
import os

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from sklearn.datasets import load_breast_cancer, load_diabetes

import deltafit as df
from deltafit._ledger import Ledger, SortedDigests, digest_array
from deltafit._ledger._digest import nh_sip_digests
from hypothesis_profiles import examples

DATA = os.path.join(os.path.dirname(os.path.dirname(__file__)), "data")
M64 = (1 << 64) - 1


# ------------------------------------------------------------- the digest, from the papers
def _rotl(x, r):
    return ((x << r) | (x >> (64 - r))) & M64


def siphash24(key16, msg):
    """SipHash-2-4 (Aumasson & Bernstein, "SipHash: a fast short-input PRF", §2), scalar."""
    k0, k1 = int.from_bytes(key16[:8], "little"), int.from_bytes(key16[8:], "little")
    v = [
        k0 ^ 0x736F6D6570736575,
        k1 ^ 0x646F72616E646F6D,
        k0 ^ 0x6C7967656E657261,
        k1 ^ 0x7465646279746573,
    ]

    def rnd():
        v[0] = (v[0] + v[1]) & M64
        v[1] = _rotl(v[1], 13) ^ v[0]
        v[0] = _rotl(v[0], 32)
        v[2] = (v[2] + v[3]) & M64
        v[3] = _rotl(v[3], 16) ^ v[2]
        v[0] = (v[0] + v[3]) & M64
        v[3] = _rotl(v[3], 21) ^ v[0]
        v[2] = (v[2] + v[1]) & M64
        v[1] = _rotl(v[1], 17) ^ v[2]
        v[2] = _rotl(v[2], 32)

    full = len(msg) // 8 * 8
    last = msg[full:] + bytes(7 - len(msg) % 8) + bytes([len(msg) & 0xFF])
    for i in range(0, full + 8, 8):
        m = int.from_bytes((msg[i : i + 8] if i < full else last), "little")
        v[3] ^= m
        rnd()
        rnd()
        v[0] ^= m
    v[2] ^= 0xFF
    for _ in range(4):
        rnd()
    return v[0] ^ v[1] ^ v[2] ^ v[3]


def reference_digest(row, label, key):
    """The "nh-sip" digest of one record, by the definitions (module docstring of
    deltafit._ledger._digest): NH (UMAC, Black et al. 1999) under two keys, then two SipHashes."""
    rec = np.concatenate(
        [np.asarray(row, dtype="<f8").ravel(), np.atleast_1d(np.asarray(label, dtype="<f8"))]
    ).tobytes()
    m = [int.from_bytes(rec[i : i + 4], "little") for i in range(0, len(rec), 4)]
    w = len(m)
    raw = hashlib.shake_256(b"deltafit.nh-sip|" + key).digest(8 * w + 32)
    K = [int.from_bytes(raw[i : i + 4], "little") for i in range(0, 8 * w, 4)]
    K1, K2 = K[:w], K[w:]
    nh = [
        sum(
            ((m[2 * i] + Kx[2 * i]) % 2**32) * ((m[2 * i + 1] + Kx[2 * i + 1]) % 2**32)
            for i in range(w // 2)
        )
        % 2**64
        for Kx in (K1, K2)
    ]
    msg = nh[0].to_bytes(8, "little") + nh[1].to_bytes(8, "little") + w.to_bytes(8, "little")
    s = raw[8 * w :]
    return siphash24(s[:16], msg).to_bytes(8, "little") + siphash24(s[16:], msg).to_bytes(
        8, "little"
    )


def test_siphash_reference_matches_the_published_vectors():
    # the reference implementation's vectors (key 00..0f, message 00..len-1)
    key = bytes(range(16))
    for length, want in (
        (0, 0x726FDB47DD0E0E31),
        (8, 0x93F5F5799A932462),
        (15, 0xA129CA6149BE45E5),
        (16, 0x3F2ACC7F57C29BDB),
        (24, 0xB8AD50C6F649AF94),
    ):
        assert siphash24(key, bytes(range(length))) == want


@pytest.mark.parametrize("use_numba", [False, True])
def test_digests_equal_the_scalar_reference(breast_cancer, digits, use_numba):
    if use_numba:
        pytest.importorskip("numba")
    key = bytes(range(32))
    X, y = breast_cancer
    t = np.where(y == 1, 1.0, -1.0)
    rows = np.r_[0:40, 300:310]
    D = nh_sip_digests(X[rows], t[rows], key, use_numba=use_numba)
    for j, i in enumerate(rows):
        assert D[j].tobytes() == reference_digest(X[i], t[i], key)
    Xd, yd = digits  # multi-column labels: the record is the row then every label
    Y = np.column_stack([yd, -yd]).astype(float)
    D = nh_sip_digests(Xd[:20], Y[:20], key, use_numba=use_numba)
    for i in range(20):
        assert D[i].tobytes() == reference_digest(Xd[i], Y[i], key)


def test_numba_and_numpy_routes_agree_and_the_key_matters(digits):
    pytest.importorskip("numba")
    X, y = digits
    t = np.where(y == 1, 1.0, -1.0)
    a = nh_sip_digests(X, t, b"k" * 32, use_numba=True)
    np.testing.assert_array_equal(a, nh_sip_digests(X, t, b"k" * 32, use_numba=False))
    b = nh_sip_digests(X, t, b"j" * 32)
    assert not np.any(np.all(a == b, axis=1))
    # distinct records, distinct digests; a flipped label or a sign bit changes it
    uniq = {r.tobytes() for r in np.unique(np.column_stack([X, t]), axis=0)}
    assert len({d.tobytes() for d in a}) == len(uniq)
    Xs = X[:50].copy()
    Xs[:, 20] = -Xs[:, 20] + 0.0  # the sign bit of one pixel (0 stays +0.0)
    changed = ~np.all(nh_sip_digests(Xs, t[:50], b"k" * 32) == a[:50], axis=1)
    np.testing.assert_array_equal(changed, X[:50, 20] != 0)
    assert changed.any() and not changed.all()
    assert not np.any(np.all(nh_sip_digests(X, -t, b"k" * 32) == a, axis=1))


# -------------------------------------------------------- range ledger vs explicit ledger
def _pair(n, K=0, seed=0):
    """A range ledger and the explicit ledger of the same n samples (same key)."""
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, 3))
    t = rng.normal(size=(n, K) if K else n)
    exp = Ledger(0, keep_rows=False, keep_digests=True, capacity=n + 4, growth=1.5, n_outputs=K)
    key = exp.digest_key
    D = exp.records(X, t)
    exp.insert(exp.allocate(n), None, np.zeros(t.shape), D)
    rl = Ledger.from_range(0, n, SortedDigests.of_digests(D, 0), n + 4, n_outputs=K, key=key)
    return exp, rl, X, t


def _same(exp, rl, X, t, rng):
    np.testing.assert_array_equal(rl.sample_ids(), exp.sample_ids())
    assert rl.n_samples == exp.n_samples and rl.next_id == exp.next_id
    s_e, s_r = exp.active_slots(), rl.active_slots()
    np.testing.assert_array_equal(rl.ids[s_r], exp.ids[s_e])
    np.testing.assert_array_equal(rl.w[s_r], exp.w[s_e])
    np.testing.assert_array_equal(rl.y[s_r], exp.y[s_e])
    assert rl.weighted == exp.weighted
    probe = np.concatenate([rng.choice(max(exp.next_id, 1), size=5), [exp.next_id + 3]])
    np.testing.assert_array_equal(rl.lookup(probe) >= 0, exp.lookup(probe) >= 0)
    a, b = exp.to_arrays()[0], rl.to_arrays()[0]
    assert a.keys() == b.keys()
    for k in a:
        np.testing.assert_array_equal(a[k], b[k])
    # every live sample is found by value and checked at its slot, in both
    ids = exp.sample_ids()
    pick = rng.choice(ids, size=min(4, ids.size), replace=False)
    for led in (exp, rl):
        slots = led.slots_of(pick)
        rows, lab = _sample(X, t, pick)
        led.check_rows(slots, rows, lab)
        np.testing.assert_array_equal(np.sort(led.find(rows, lab)), np.sort(slots))


def _sample(X, t, ids):
    """The rows and labels of samples ``ids``: the fit's, then distinct multiples of them."""
    ids = np.asarray(ids, dtype=np.int64)
    n = len(X)
    scale = np.where(ids < n, 1.0, 3.0 + ids)
    lab = t[ids % n]
    return X[ids % n] * scale[:, None], lab


@settings(max_examples=examples(80), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    n=st.integers(3, 40),
    K=st.sampled_from([0, 2]),
    seed=st.integers(0, 10**6),
    ops=st.lists(
        st.sampled_from(["delete", "insert", "reweight", "rollback", "compact", "release"]),
        min_size=1,
        max_size=8,
    ),
)
def test_range_ledger_behaves_as_the_explicit_ledger(n, K, seed, ops):
    exp, rl, X, t = _pair(n, K, seed)
    rng = np.random.default_rng(seed)
    _same(exp, rl, X, t, rng)
    for op in ops:
        ids = exp.sample_ids()
        roll = op == "rollback"
        if roll:
            op = rng.choice(["delete", "insert", "reweight"])
        for led in (exp, rl):
            led.begin()
        if op == "delete" and ids.size > 1:
            gone = rng.choice(ids, size=rng.integers(1, ids.size), replace=False)
            for led in (exp, rl):
                led.delete(led.slots_of(gone))
        elif op == "insert":
            k = int(rng.integers(1, 6))
            new_ids = np.arange(exp.next_id, exp.next_id + k)
            rows, lab = _sample(X, t, new_ids)  # added samples: rows distinct from the fit's
            for led in (exp, rl):
                got = led.insert(led.allocate(k), None, np.zeros(lab.shape), led.records(rows, lab))
                np.testing.assert_array_equal(got, new_ids)
        elif op == "reweight" and ids.size:
            some = rng.choice(ids, size=min(3, ids.size), replace=False)
            w = rng.choice([0.0, 0.5, 1.0, 2.0], size=some.size)
            for led in (exp, rl):
                led.reweight(led.slots_of(some), w)
        elif op == "release":
            for led in (exp, rl):
                led.release()
        elif op == "compact":
            for led in (exp, rl):
                led.compact()
        for led in (exp, rl):
            led.rollback() if roll else led.commit()
        _same(exp, rl, X, t, rng)


def test_range_ledger_refuses_foreign_rows_and_keeps_n_sized_arrays_out():
    n = 5000
    exp, rl, X, t = _pair(n, seed=3)
    with pytest.raises(ValueError, match="not sample id 7"):
        rl.check_rows(rl.slots_of([7]), X[[8]], t[[8]])
    with pytest.raises(ValueError, match="not a training sample"):
        rl.find(X[[8, 8]], t[[8, 8]])  # one sample, given twice
    with pytest.raises(ValueError, match="not a training sample"):
        rl.find(np.nextafter(X[[8]], np.inf), t[[8]])  # one bit away
    # per sample: the sorted digests (20 bytes) and the active flag; nothing else is n-sized
    assert rl.digests.nbytes <= 20 * n + 16 * 4
    assert rl.ids.nbytes + rl.w.nbytes + rl.y.nbytes + rl._index.nbytes < 10_000
    rl.begin()
    rl.delete(rl.slots_of(np.arange(0, n, 2)))  # a large deletion leaves no patch
    rl.commit()
    assert not rl.ids.patches and not rl.w.patches and not rl.digests.overlay


def test_dask_fit_keeps_a_range_ledger(breast_cancer):
    da = pytest.importorskip("dask.array")
    import dask

    X, y = breast_cancer
    with dask.config.set(scheduler="sync"):
        m = df.LinearClassifier(keep_data=False).fit(
            da.from_array(X, chunks=(100, -1)), da.from_array(y, chunks=100)
        )
    led = m._ledger
    assert isinstance(led.digests, SortedDigests) and led.digests.n0 == X.shape[0]
    t = np.where(y == 1, 1.0, -1.0)
    np.testing.assert_array_equal(
        led.digests.dense(np.arange(X.shape[0])), digest_array(X, t, led.digest_key, "nh-sip")
    )
    np.testing.assert_array_equal(m.sample_ids_, np.arange(X.shape[0]))
    np.testing.assert_array_equal(m.sample_weight_, np.ones(X.shape[0]))
    # the seam reads it as it reads the NumPy-fitted model's explicit ledger
    from deltafit.sensitivity import Sensitivity

    ref = df.LinearClassifier(keep_data=False).fit(X, y)
    for model in (m, ref):
        model.remove([3], X=X[[3]])
    pm, pr = m.problem_, ref.problem_  # per-handle arrays: capacities differ, handles not
    np.testing.assert_array_equal(pm.live, pr.live)
    np.testing.assert_array_equal(pm.sample_ids, pr.sample_ids)
    np.testing.assert_array_equal(pm.weights[pm.live], pr.weights[pr.live])
    s, r = Sensitivity(m), Sensitivity(ref)
    for obj in (s, r):
        obj.remove([5, 400], X=X[[5, 400]])
    for a, b in zip(s.decision_bounds(X[:50]), r.decision_bounds(X[:50])):
        np.testing.assert_allclose(a, b, rtol=1e-9, atol=1e-12)


# ----------------------------------------------------------------------- format 2 files
def _v2(name):
    return os.path.join(DATA, name)


def test_format_2_classifier_file_loads_and_recognises_its_rows(tmp_path):
    X, y = load_breast_cancer(return_X_y=True)
    m = df.load(_v2("v2_classifier_keep_data_false.npz"))
    assert m._ledger.digest_scheme == "blake2b"
    ref = df.LinearClassifier(C=0.5, keep_data=False).fit(X[:80], y[:80])
    np.testing.assert_allclose(m.coef_, ref.coef_, rtol=1e-10, atol=1e-13)
    with pytest.raises(ValueError, match="not sample id"):
        m.remove([3], X=X[[4]])
    m.remove([3, 10], X=X[[3, 10]])  # by id, checked against the BLAKE2b digests
    m.remove(X=X[[20]], y=y[[20]])  # by value
    m.relabel([30], 1 - y[[30]], X=X[[30]])  # labels recognised from the digests
    keep = np.setdiff1d(np.arange(80), [3, 10, 20])
    yy = y[:80].copy()
    yy[30] = 1 - yy[30]
    fresh = df.LinearClassifier(C=0.5, keep_data=False).fit(X[keep], yy[keep])
    np.testing.assert_allclose(m.coef_, fresh.coef_, rtol=1e-9, atol=1e-12)
    # saved again: format 3 with the scheme named, loaded back, still BLAKE2b
    df.save(m, tmp_path / "again.npz")
    with np.load(tmp_path / "again.npz") as z:
        meta = json.loads(z["__meta__"].tobytes())
    assert meta["format_version"] == 3 and meta["digest_scheme"] == "blake2b"
    c = df.load(tmp_path / "again.npz")
    c.remove([40], X=X[[40]])
    m.remove([40], X=X[[40]])
    np.testing.assert_array_equal(c.coef_, m.coef_)
    assert c.add(X[[41]] * 2, y[[41]])[0] == 80  # new samples digested by the same scheme
    c.remove(X=X[[41]] * 2, y=y[[41]])


def test_format_2_regressor_file_loads_and_updates():
    X, y = load_diabetes(return_X_y=True)
    m = df.load(_v2("v2_regressor_keep_data_false.npz"))
    m.remove([5], X=X[[5]], y=y[[5]])
    with pytest.raises(ValueError, match="not sample id"):
        m.remove([6], X=X[[6]], y=y[[6]] + 1.0)
    keep = np.setdiff1d(np.arange(60), [5])
    fresh = df.LinearRegressor(C=2.0, keep_data=False).fit(X[keep], y[keep])
    np.testing.assert_allclose(m.coef_, fresh.coef_, rtol=1e-9, atol=1e-9)


@pytest.mark.parametrize(
    "version, scheme, match",
    [
        (2, "nh-sip", "digest_scheme"),
        (3, "md5", "digest_scheme"),
    ],
)
def test_a_scheme_that_does_not_fit_the_version_is_refused(tmp_path, version, scheme, match):
    with np.load(_v2("v2_classifier_keep_data_false.npz")) as z:
        arrays = {k: z[k] for k in z.files}
    meta = json.loads(arrays["__meta__"].tobytes())
    meta.update(format_version=version, digest_scheme=scheme)
    arrays["__meta__"] = np.frombuffer(json.dumps(meta).encode(), dtype=np.uint8)
    np.savez(tmp_path / "bad.npz", **arrays)
    with pytest.raises(ValueError, match=match):
        df.load(tmp_path / "bad.npz")


def test_new_files_carry_the_new_scheme(breast_cancer, tmp_path):
    X, y = breast_cancer
    m = df.LinearClassifier(keep_data=False).fit(X, y)
    df.save(m, tmp_path / "m.npz")
    with np.load(tmp_path / "m.npz") as z:
        meta = json.loads(z["__meta__"].tobytes())
        D = z["ledger_digests"]
    assert meta["format_version"] == 3 and meta["digest_scheme"] == "nh-sip"
    t = np.where(y == 1, 1.0, -1.0)
    np.testing.assert_array_equal(D, digest_array(X, t, m._ledger.digest_key, "nh-sip"))
