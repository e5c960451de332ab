"""deltafit's version (a ground-floor module: what reads it need not import the package)."""

__version__ = "0.1.0"
