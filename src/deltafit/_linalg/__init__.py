"""Numerical building blocks below the states: low-rank (Woodbury / Cholesky) updates and Gram
matrices."""
