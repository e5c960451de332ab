"""Opt-in progress bars (tqdm, imported lazily)."""

from __future__ import annotations

__all__ = ["progress_bar"]


class _Silent:
    def update(self, n=1):
        pass

    def set_postfix_str(self, s):
        pass

    def close(self):
        pass

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


def progress_bar(total, enabled, desc=None):
    """A tqdm bar when ``enabled`` (ImportError with an install hint without tqdm), else a
    bar that does nothing."""
    if not enabled:
        return _Silent()
    try:
        from tqdm.auto import tqdm
    except ImportError as exc:  # pragma: no cover - depends on the environment
        raise ImportError(
            "progress=True needs tqdm: pip install 'deltafit[progress]' (or pip install tqdm)"
        ) from exc
    return tqdm(total=total, desc=desc, leave=False)
