"""The import structure of deltafit: floors, no upward arrows, no circles.

Every module of ``src/deltafit`` is parsed with :mod:`ast`; every ``import`` and ``from ... import``
counts, including those inside functions (lazy imports) and relative ones.  Each top-level module
and each subpackage is one *node* (``deltafit.model_selection._treecv`` belongs to the node
``model_selection``); the public modules of ``utils`` (the conformance suite) are nodes of their
own, above the private helpers of ``utils`` on the ground floor.  The package's own ``__init__``
is the node ``deltafit``.

Rules, for an import from node A of node B (A != B):

* B's floor is lower than A's, or
* B is on A's floor and is a private module or package (its name starts with ``_``), or
* both are on the ground floor (a flat set of leaves, which may use one another);

and no circle runs through several modules, whatever their packages: the graph of *modules*
(function-level imports included) has no cycle.  No module outside ``deltafit.models`` imports a
private module of ``deltafit.models``: other packages see the estimators through the public
``deltafit.models`` and a fitted model through ``model.problem_``.
"""

from __future__ import annotations

import ast
import re
from collections import defaultdict
from pathlib import Path

SRC = Path(__file__).resolve().parent.parent / "src" / "deltafit"
PACKAGE = "deltafit"

# Floors, lowest first.  A node may import nodes of lower floors and the private helpers of its
# own floor (see the module docstring).  A new module or subpackage must be given a floor here;
# ARCHITECTURE.md shows the same table.
FLOORS = {
    # 0: the ground floor -- validation and plumbing (utils' private modules), losses, kernels, data
    "utils": 0,
    "_version": 0,
    "losses": 0,
    "kernels": 0,
    "datasets": 0,
    # 1: numerics -- compensated arithmetic, low-rank updates, Gram matrices; the solvers
    "_linalg": 1,
    "solvers": 1,
    # 2: the ledger of training samples (ids, rows, digests, journal)
    "_ledger": 2,
    # 3: the exact-update states (NumPy)
    "_states": 3,
    # 4: everything that runs on a Dask cluster, the Dask states included
    "_dask": 4,
    # 5: the estimators, their state registry and the FittedProblem view; the pipeline of frozen
    # transformers ending in one
    "models": 5,
    "_pipeline": 5,
    # 6: saving and loading models and pipelines
    "persistence": 6,
    # 7: certified bounds on what a data change does to a model
    "sensitivity": 7,
    # 8: model selection and learning on streams (independent of each other)
    "model_selection": 8,
    "stream": 8,
    # 9: what reads all of the above: active learning, data attribution, the conformance suite
    "active": 9,
    "attribution": 9,
    "utils.estimator_checks": 9,
    # 10: figures
    "plotting": 10,
    # 11: the command line
    "cli": 11,
    # 12: the package itself (``deltafit/__init__.py``): re-exports; nothing inside imports it
    PACKAGE: 12,
}
GROUND = 0


# ---------------------------------------------------------------------------
# the import graph
# ---------------------------------------------------------------------------
def _module_name(path):
    parts = list(path.relative_to(SRC.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _modules():
    """``{dotted name: path}`` of every module of the package."""
    return {_module_name(p): p for p in sorted(SRC.rglob("*.py"))}


def _node(module):
    """The node a dotted module name belongs to."""
    parts = module.split(".")
    if len(parts) > 2 and parts[1] == "utils" and not parts[2].startswith("_"):
        return f"utils.{parts[2]}"
    return parts[1] if len(parts) > 1 else PACKAGE


def _imported_modules(module, path, known):
    """``[(imported module, line)]`` of every deltafit import in ``path``, lazy ones included."""
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out += [(a.name, node.lineno) for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                if node.level > 1:
                    base = base[: len(base) - (node.level - 1)]
                base = ".".join(base + ([node.module] if node.module else []))
            else:
                base = node.module or ""
            for a in node.names:
                sub = f"{base}.{a.name}"
                # ``from pkg import submodule`` imports the submodule, else a name of ``base``
                out.append((sub if sub in known else base, node.lineno))
    return [(m, line) for m, line in out if m == PACKAGE or m.startswith(PACKAGE + ".")]


def _module_edges():
    """``{(module A, module B): ["file:line", ...]}`` for every import of B from A (A != B)."""
    known = _modules()
    edges = defaultdict(list)
    for module, path in known.items():
        for target, line in _imported_modules(module, path, known):
            if target != module and target in known:
                edges[module, target].append(f"{path.relative_to(SRC.parent)}:{line}")
    return edges


def _edges():
    """``{(node A, node B): ["file:line", ...]}`` for every import of B from A (A != B)."""
    known = _modules()
    edges = defaultdict(list)
    for module, path in known.items():
        a = _node(module)
        for target, line in _imported_modules(module, path, known):
            b = _node(target)
            if a != b:
                edges[a, b].append(f"{path.relative_to(SRC.parent)}:{line}")
    return edges


def _cycles(edges):
    """The strongly connected components of more than one node (Tarjan), each sorted."""
    graph = defaultdict(set)
    for a, b in edges:
        graph[a].add(b)
    index, low, stack, on_stack, out = {}, {}, [], set(), []

    def visit(v):
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    for v in sorted(set(graph) | {b for targets in graph.values() for b in targets}):
        if v not in index:
            visit(v)
    return out


def _allowed(a, b):
    fa, fb = FLOORS[a], FLOORS[b]
    return fb < fa or (fb == fa and (b.startswith("_") or fa == GROUND))


# ---------------------------------------------------------------------------
# tests
# ---------------------------------------------------------------------------
def test_the_graph_sees_lazy_and_relative_imports():
    edges = _edges()
    assert ("deltafit", "models") in edges
    assert ("cli", "model_selection") in edges
    modules = _module_edges()
    # ``from deltafit.cli import main`` in cli/__main__.py
    assert ("deltafit.cli.__main__", "deltafit.cli") in modules


def test_every_node_has_a_floor():
    nodes = {_node(m) for m in _modules()}
    missing = sorted(nodes - set(FLOORS))
    assert not missing, f"give these modules / subpackages a floor in FLOORS: {missing}"


def test_no_import_of_a_higher_floor():
    bad = []
    for (a, b), where in sorted(_edges().items()):
        if a not in FLOORS or b not in FLOORS:
            continue
        if not _allowed(a, b):
            bad.append(
                f"{a} (floor {FLOORS[a]}) imports {b} (floor {FLOORS[b]}) at " + ", ".join(where)
            )
    assert not bad, "imports against the floors:\n" + "\n".join(bad)


def _circles_report(edges):
    """The circles of ``edges`` with the imports that make each, for an assertion message."""
    lines = []
    for comp in _cycles(edges):
        lines.append(" <-> ".join(comp) + ":")
        lines += [
            f"  {a} -> {b} at {', '.join(w)}"
            for (a, b), w in sorted(edges.items())
            if a in comp and b in comp
        ]
    return lines


def test_no_import_circles_between_packages():
    report = _circles_report(_edges())
    assert not report, "import circles between packages:\n" + "\n".join(report)


def test_no_import_circles_between_modules():
    report = _circles_report(_module_edges())
    assert not report, "import circles between modules:\n" + "\n".join(report)


def test_no_private_module_of_models_imported_from_outside():
    bad = []
    for (a, b), where in sorted(_module_edges().items()):
        inside = a == "deltafit.models" or a.startswith("deltafit.models.")
        if not inside and b.startswith("deltafit.models._"):
            bad.append(f"{a} imports {b} at {', '.join(where)}")
    assert not bad, "private modules of deltafit.models imported elsewhere:\n" + "\n".join(bad)


def test_no_module_over_1000_lines():
    long = {
        str(p.relative_to(SRC.parent)): n
        for p in sorted(SRC.rglob("*.py"))
        if (n := len(p.read_text(encoding="utf-8").splitlines())) > 1000
    }
    assert not long, f"modules over 1,000 lines: {long}"


# ---------------------------------------------------------------------------
# reads of the models' private state outside deltafit/models
# ---------------------------------------------------------------------------
# Outside deltafit/models, code should see a fitted model through its public interface, not through
# its private attributes: ``model.problem_`` (deltafit.models.FittedProblem) is the seam.
# deltafit.persistence writes a model from ``model._saved_parts()`` and restores one by
# ``model._restore(...)``: the two calls of the file protocol, not reads of the members.
_PRIVATE_READ = re.compile(
    r"\b([A-Za-z_][A-Za-z0-9_]*)\._(state|ledger|kernel|features|encode_y|s|slot_of|k|spec"
    r"|solver_options|featurizer|labels|dask_rows|dask_passes|n_classes|n_outputs_fitted"
    r"|max_rank|is_fitted|classifier|fitted)\b"
)
_IMPORT_LINE = re.compile(r"^\s*(from|import)\s")  # ``from .models._ledger import`` is no read


def test_no_private_model_reads_outside_models():
    hits = []
    for path in sorted(SRC.rglob("*.py")):
        if (SRC / "models") in path.parents:
            continue
        for lineno, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
            if _IMPORT_LINE.match(line):
                continue
            for m in _PRIVATE_READ.finditer(line):
                if m.group(1) in ("self", "cls", "deltafit"):
                    continue
                hits.append(f"{path.relative_to(SRC.parent)}:{lineno}: {m.group(0)}")
    assert not hits, (
        f"{len(hits)} reads of the models' private attributes outside "
        "deltafit/models:\n" + "\n".join(hits)
    )


# ---------------------------------------------------------------------------
# optional packages stay lazy
# ---------------------------------------------------------------------------
def test_import_deltafit_loads_no_optional_package():
    """``import deltafit`` loads none of the optional packages ARCHITECTURE.md says are
    imported lazily (numba cost ~170 ms here when ``_ledger._digest`` imported it at module
    level)."""
    import os
    import subprocess
    import sys

    lazy = ("numba", "dask", "matplotlib", "river", "tqdm")
    code = f"import sys, deltafit\nprint(sorted(m for m in {lazy!r} if m in sys.modules))\n"
    out = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)},
        check=True,
    )
    assert out.stdout.strip() == "[]", out.stdout
