"""Type hints on the public API: every public function, and every public method of a public
class (``__init__`` included), annotates its parameters and its return value.

"Public" is what a user reaches: the names in ``__all__`` of deltafit's public modules, and the
methods and properties (not starting with ``_``) those classes define or inherit from deltafit.
mypy (configured in ``pyproject.toml``) checks the annotated bodies; this test checks that the
annotations are there.
"""

from __future__ import annotations

import importlib
import inspect

import pytest

PUBLIC_MODULES = [
    "deltafit",
    "deltafit.models",
    "deltafit.sensitivity",
    "deltafit.sensitivity.regions",
    "deltafit.model_selection",
    "deltafit.stream",
    "deltafit.active",
    "deltafit.datasets",
    "deltafit.kernels",
    "deltafit.losses",
    "deltafit.solvers",
    "deltafit.persistence",
    "deltafit.plotting",
    "deltafit.attribution",
    "deltafit.utils.estimator_checks",
    "deltafit.cli",
]


def _public_modules():
    out = []
    for name in PUBLIC_MODULES:
        try:
            out.append(importlib.import_module(name))
        except ModuleNotFoundError as exc:  # a subpackage not yet written
            if exc.name != name:
                raise
    return out


def _missing(func, qualname):
    """The unannotated parts of ``func``'s signature."""
    try:
        sig = inspect.signature(func)
    except (TypeError, ValueError):
        return []
    missing = [
        f"{qualname}({p.name})"
        for p in sig.parameters.values()
        if p.name not in ("self", "cls") and p.annotation is inspect.Parameter.empty
    ]
    if func.__name__ != "__init__" and sig.return_annotation is inspect.Signature.empty:
        missing.append(f"{qualname} -> ?")
    return missing


def _own(obj):
    return getattr(obj, "__module__", "").startswith("deltafit")


def _public_callables():
    seen = set()
    for mod in _public_modules():
        for name in getattr(mod, "__all__", []):
            obj = getattr(mod, name, None)
            if obj is None or id(obj) in seen or not _own(obj):
                continue
            seen.add(id(obj))
            if inspect.isclass(obj):
                for klass in obj.__mro__:
                    if not klass.__module__.startswith("deltafit"):
                        continue
                    for attr, value in vars(klass).items():
                        if attr.startswith("_") and attr != "__init__":
                            continue
                        if isinstance(value, property):
                            value = value.fget
                        elif isinstance(value, (classmethod, staticmethod)):
                            value = value.__func__
                        if inspect.isfunction(value) and id(value) not in seen:
                            seen.add(id(value))
                            yield value, f"{klass.__module__}.{klass.__qualname__}.{attr}"
            elif inspect.isfunction(obj):
                yield obj, f"{obj.__module__}.{obj.__qualname__}"


def test_public_api_is_annotated():
    missing = []
    for func, qualname in _public_callables():
        missing += _missing(func, qualname)
    assert not missing, f"{len(missing)} unannotated parts of the public API:\n" + "\n".join(
        sorted(missing)
    )


@pytest.mark.parametrize("module", PUBLIC_MODULES)
def test_public_module_has_all(module):
    try:
        mod = importlib.import_module(module)
    except ModuleNotFoundError:
        pytest.skip(f"{module} not present")
    assert isinstance(getattr(mod, "__all__", None), list)
