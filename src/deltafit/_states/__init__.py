"""Exact-update states: the ModelState protocol and one module per state (NumPy backend)."""
