"""The ledger of training samples: ids, stored rows, digests and the update journal.

One module per concern: :mod:`._ledger` (the :class:`Ledger` facade), :mod:`._ids` (id -> slot),
:mod:`._rows` (the sparse row store), :mod:`._columns` (the lazy columns of a range ledger),
:mod:`._records` (the samples' keyed digests, per slot), :mod:`._sorted` (the digests of a range
ledger, sorted by value), :mod:`._digest` (the ``"nh-sip"`` digest scheme) and :mod:`._journal`
(undo records).  The names the rest of the package uses are re-exported here.

Sparse rows
-----------
A model fitted on sparse X (the model's `_sparse_input`) converts every later X to CSR
(`models/_inputs` /
`_model_format`; a dense model densifies sparse X).  Sparse Φ lives in the ledger's
`_rows.SparseRows` (one CSR row per slot; reads `X[slots]` give a `csr_matrix`;
writes replace per-slot arrays, so the undo journal, growth and compaction work as for dense
rows); keyed digests of sparse rows hash their canonical CSR form.  The states see sparse Φ:
`PrimalSquaredState` densifies it a chunk at a time (`Rows.chunks`) and the few rows of an
update, `newton_primal` uses sparse products (Hessian-free CG steps beyond
`solvers.HESSIAN_FREE_FEATURES`), `hinge_primal` its dual QP over `_SparseFeatureQP`
(sparse row products), kernel models pass CSR to `pairwise_kernels`.  Files hold
the CSR components (`ledger_X_indptr/indices/data`).  `FittedProblem.rows` of a sparse
model is a `DenseRows` view (`rows[handles]`: dense read-only rows), and `scores` /
`gradient` / `hessian` use sparse products: the layers above compute on dense rows, exactly
those a dense model holds (LOO / CV / ALO read all of them: O(n·p)); the sensitivity
layer's own X inputs are densified on entry (`check_rows(..., sparse="dense")`).
"""

from deltafit._ledger._columns import LazyColumn
from deltafit._ledger._digest import SCHEMES, nh_sip_digests
from deltafit._ledger._ids import IdIndex, RangeIdIndex
from deltafit._ledger._ledger import Ledger
from deltafit._ledger._records import (
    DEFAULT_SCHEME,
    DIGEST_BYTES,
    KEY_BYTES,
    DigestStore,
    digest_array,
    digest_keys,
    row_digests,
)
from deltafit._ledger._rows import SparseRows, canonical_csr
from deltafit._ledger._sorted import SEGMENT_BITS, SortedDigests, sorted_segment

__all__ = [
    "DEFAULT_SCHEME",
    "DIGEST_BYTES",
    "KEY_BYTES",
    "SCHEMES",
    "SEGMENT_BITS",
    "DigestStore",
    "IdIndex",
    "LazyColumn",
    "Ledger",
    "RangeIdIndex",
    "SortedDigests",
    "SparseRows",
    "canonical_csr",
    "digest_array",
    "digest_keys",
    "nh_sip_digests",
    "row_digests",
    "sorted_segment",
]
