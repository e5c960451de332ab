"""Numerical building blocks below the states: low-rank (Woodbury) updates of an inverse
(``_lowrank``), Gram matrices (``_gram``), SPD factorisations and Woodbury cores (``_spd``) and
error-free, compensated arithmetic (``_compensated``) and explicit feature maps (``_features``)."""
