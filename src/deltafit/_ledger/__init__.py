"""The ledger of training samples: ids, stored rows, digests and the update journal."""
