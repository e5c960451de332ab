"""The ledger of training samples: ids, stored rows, digests and the update journal.

One module per concern: :mod:`._ledger` (the :class:`Ledger` facade), :mod:`._ids` (id ->
slot), :mod:`._rows` (the sparse row store), :mod:`._columns` (the lazy columns of a range
ledger), :mod:`._records` (the samples' keyed digests, per slot), :mod:`._sorted` (the digests
of a range ledger, sorted by value), :mod:`._digest` (the ``"nh-sip"`` digest scheme) and
:mod:`._journal` (undo records).  The names the rest of the package uses are re-exported here.
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

__all__ = ["DEFAULT_SCHEME", "DIGEST_BYTES", "KEY_BYTES", "SCHEMES", "SEGMENT_BITS",
           "DigestStore", "IdIndex", "LazyColumn", "Ledger", "RangeIdIndex", "SortedDigests",
           "SparseRows", "canonical_csr", "digest_array", "digest_keys", "nh_sip_digests",
           "row_digests", "sorted_segment"]
