"""Hypothesis profiles of the test suite and the example budget of the property tests.

``ci`` (``CI=true`` or ``pytest --run-slow``) draws every property test's full count of
examples; ``dev``, the daily run, a fifth of it (at least 5). ``tests/conftest.py`` loads the
profile before the test modules are imported; a property test states its full count as
``@settings(max_examples=examples(N))``.
"""

from hypothesis import settings

settings.register_profile("ci", max_examples=100)
settings.register_profile("dev", max_examples=20)


def examples(n):
    """The ``max_examples`` of a property test that draws ``n`` examples in CI.

    Parameters
    ----------
    n : int
        The full count, drawn under the ``ci`` profile.

    Returns
    -------
    int
        ``n`` under ``ci``; ``max(5, n // 5)`` under ``dev`` (the daily run).
    """
    if settings.get_current_profile_name() == "dev":
        return max(5, n // 5)
    return n
