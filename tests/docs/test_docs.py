"""The package speaks for itself: every public name is in the API reference and has a numpydoc
docstring with an Examples section; no internal references in the shipped text; the
documentation's files exist (the site itself is built, warnings as errors, by ``.ci/run``)."""

import importlib
import inspect
import re
from pathlib import Path

import pytest

import deltafit

ROOT = Path(__file__).resolve().parents[2]
API = ROOT / "docs" / "api"
PUBLIC_MODULES = [
    "deltafit",
    "deltafit.models",
    "deltafit.sensitivity",
    "deltafit.model_selection",
    "deltafit.stream",
    "deltafit.active",
    "deltafit.attribution",
    "deltafit.datasets",
    "deltafit.persistence",
    "deltafit.plotting",
    "deltafit.losses",
    "deltafit.kernels",
    "deltafit.solvers",
    "deltafit.utils.estimator_checks",
    "deltafit.sensitivity.regions",
]

# Public names whose docstrings still lack an Examples section.  A new public name must come
# with its Examples; this set only shrinks (the last test below).  Empty: every public class and
# function has its Examples.
NO_EXAMPLES_YET: set[str] = set()


def _public_callables():
    for name in PUBLIC_MODULES:
        module = importlib.import_module(name)
        for attr in module.__all__:
            obj = getattr(module, attr)
            if inspect.isclass(obj) or inspect.isfunction(obj):
                yield f"{name}.{attr}", obj


def _documented_names():
    """Qualified names listed under an autosummary in docs/api/*.rst."""
    names, module = set(), None
    lines = [
        line
        for page in sorted(API.glob("*.rst"))
        for line in page.read_text(encoding="utf-8").splitlines()
    ]
    for line in lines:
        m = re.match(r"\.\. currentmodule:: (\S+)", line)
        if m:
            module = m.group(1)
        elif re.match(r"   [A-Za-z_]\w*$", line):
            names.add(f"{module}.{line.strip()}")
    return names


def test_every_public_name_is_in_the_api_reference():
    documented = _documented_names()
    missing = []
    for name in PUBLIC_MODULES:
        module = importlib.import_module(name)
        for attr in module.__all__:
            obj = getattr(module, attr)
            if inspect.ismodule(obj):
                continue
            # a name re-exported from the package root is documented once, there
            if f"{name}.{attr}" in documented or f"deltafit.{attr}" in documented:
                continue
            missing.append(f"{name}.{attr}")
    assert not missing, f"public names missing from docs/api/: {missing}"
    assert len(documented) > 80


def test_public_classes_and_functions_have_examples():
    lacking = sorted(
        name
        for name, obj in _public_callables()
        if "\nExamples\n--------\n" not in (inspect.getdoc(obj) or "")
        and f"deltafit.{name.rsplit('.', 1)[1]}" not in NO_EXAMPLES_YET
        and name not in NO_EXAMPLES_YET
    )
    assert not lacking, f"public names without an Examples section: {lacking}"


def test_the_list_of_names_without_examples_only_shrinks():
    names = dict(_public_callables())
    stale = sorted(
        n
        for n in NO_EXAMPLES_YET
        if n not in names or "\nExamples\n--------\n" in (inspect.getdoc(names[n]) or "")
    )
    assert not stale, f"remove from NO_EXAMPLES_YET (now documented or gone): {stale}"


@pytest.mark.parametrize("needle", ["shared" + "/", "DESIGN" + ".md", "seed" + " 0"])
def test_no_internal_references(needle):
    hits = []
    files = [ROOT / "README.md"] + [
        p
        for d in ("src", "tests", "benchmarks")
        for p in (ROOT / d).rglob("*")
        if p.suffix in (".py", ".md", ".txt", ".rst", ".json")
    ]
    for path in files:
        if path.resolve() == Path(__file__).resolve():
            continue
        if needle in path.read_text(encoding="utf-8", errors="replace"):
            hits.append(str(path.relative_to(ROOT)))
    assert not hits, f"{needle!r} found in {hits}"


def test_package_files():
    assert re.fullmatch(r"\d+\.\d+\.\d+(\S*)", deltafit.__version__)
    assert "BSD 3-Clause" in (ROOT / "LICENSE").read_text(encoding="utf-8")
    changelog = (ROOT / "CHANGELOG.md").read_text(encoding="utf-8")
    assert deltafit.__version__ in changelog
    examples = sorted((ROOT / "examples").glob("plot_*.py"))
    assert len(examples) >= 8
    for path in examples:  # a gallery script starts with its title and explanation
        text = path.read_text(encoding="utf-8")
        assert text.startswith('"""\n') and "\n====" in text.split('"""')[1], path.name
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    first_screen = "\n".join(readme.splitlines()[:45])
    assert "docs/_static/readme_certificates.png" in first_screen
    assert (ROOT / "docs" / "_static" / "readme_certificates.png").is_file()
    assert "sphinx-build -W" in readme
