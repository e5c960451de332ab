"""The persistence package and the models import in one direction only.

``deltafit.persistence`` reads the estimators' classes from the public package
``deltafit.models``; no module of ``deltafit.models`` imports persistence (not even inside a
function: the deprecated ``model.save`` reaches :func:`deltafit.save` through the hook slot
``UpdatableMixin._save_file`` that persistence fills), and persistence imports no private
module of ``deltafit.models``.  Every import counts, lazy ones included.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

import deltafit
from deltafit.models import UpdatableMixin

SRC = Path(deltafit.__file__).resolve().parent


def _imports(path):
    """The dotted names every ``import`` / ``from ... import`` of ``path`` reads."""
    out = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            out += [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module:
            assert node.level == 0, f"{path.name}: a relative import"
            out += [node.module] + [f"{node.module}.{a.name}" for a in node.names]
    return out


@pytest.mark.parametrize("path", sorted((SRC / "models").glob("*.py")), ids=lambda p: p.name)
def test_models_do_not_import_persistence(path):
    assert not [m for m in _imports(path) if m.startswith("deltafit.persistence")]


@pytest.mark.parametrize("path", sorted((SRC / "persistence").glob("*.py")), ids=lambda p: p.name)
def test_persistence_imports_no_private_module_of_models(path):
    assert not [m for m in _imports(path) if m.startswith("deltafit.models._")]


def test_persistence_fills_the_save_hook():
    assert UpdatableMixin._save_file is deltafit.save


@pytest.mark.parametrize("path", sorted((SRC / "persistence").glob("*.py")), ids=lambda p: p.name)
def test_persistence_modules_are_small(path):
    assert len(path.read_text(encoding="utf-8").splitlines()) <= 1000
