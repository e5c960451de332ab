"""The user guide's code runs as written: each page of ``docs/user_guide`` is self-contained, its
Python blocks (``.. code-block:: python``, ``::`` literal blocks of Python, ``>>>`` examples)
run in order in one namespace, in a temporary directory (the blocks write files)."""

import re
import textwrap
from pathlib import Path

import pytest

GUIDE = Path(__file__).resolve().parents[2] / "docs" / "user_guide"
PAGES = sorted(p.name for p in GUIDE.glob("*.rst"))

# pages that take more than ~10 s (a local Dask cluster)
SLOW = {"scale_out.rst"}
# blocks that fail today because of a library bug: each must still fail as described (so that
# the fix shows here), and the page's other blocks run.  (page, block number from 1) -> bug
KNOWN_BUGS: dict = {}
# pages whose blocks need an optional package
NEEDS = {"scale_out.rst": ("dask", "distributed", "pyarrow")}


def _unprompt(code):
    """The code of a doctest: the ``>>>`` / ``...`` lines without their prompts (the expected
    output is left out)."""
    return "\n".join(
        ln[4:] if len(ln) > 3 else ""
        for ln in code.splitlines()
        if ln.startswith((">>> ", "... ")) or ln in (">>>", "...")
    )


def python_blocks(text):
    """The Python code of an rst page, block by block, dedented, ``>>>`` prompts removed.

    A block is the indented body of ``.. code-block:: python`` (or ``python3``/``pycon``), or
    of a paragraph ending in ``::`` whose body is Python (starts with ``>>>`` or compiles).
    """
    lines = text.splitlines()
    blocks, i = [], 0
    while i < len(lines):
        line = lines[i]
        if line.startswith(">>>"):  # a doctest paragraph in the text
            body = []
            while i < len(lines) and lines[i].strip():
                body.append(lines[i])
                i += 1
            blocks.append(_unprompt("\n".join(body)))
            continue
        directive = re.match(r"\s*\.\. code-block::\s*(\S+)", line)
        literal = line.rstrip().endswith("::") and not line.lstrip().startswith("..")
        if not (directive or literal):
            i += 1
            continue
        i += 1
        while i < len(lines) and lines[i].lstrip().startswith(":"):  # directive options
            i += 1
        body = []
        while i < len(lines) and (not lines[i].strip() or lines[i][:1] in (" ", "\t")):
            body.append(lines[i])
            i += 1
        code = textwrap.dedent("\n".join(body)).strip("\n")
        if not code:
            continue
        if directive and directive.group(1) not in ("python", "python3", "pycon"):
            continue
        if code.startswith(">>>"):
            code = _unprompt(code)
        elif literal:
            try:
                compile(code, "<block>", "exec")
            except SyntaxError:
                continue  # a literal block of text, not code
        blocks.append(code)
    return blocks


def test_the_extractor_finds_every_kind_of_block():
    page = textwrap.dedent("""\
        Title
        =====

        .. code-block:: python

           a = 1

        A literal block::

           b = a + 1

        .. code-block:: bash

           pip install deltafit

        Text::

           not python at all, just text

        >>> c = b + 1
        >>> c
        3

        .. code-block:: pycon

           >>> d = c * 2
        """)
    assert python_blocks(page) == ["a = 1", "b = a + 1", "c = b + 1\nc", "d = c * 2"]


def _params():
    for name in PAGES:
        marks = [pytest.mark.slow] if name in SLOW else []
        yield pytest.param(name, marks=marks, id=name)


@pytest.mark.parametrize("name", list(_params()))
def test_user_guide_page_runs_as_written(name, tmp_path, monkeypatch):
    for module in NEEDS.get(name, ()):
        pytest.importorskip(module)
    path = GUIDE / name
    text = path.read_text(encoding="utf-8")
    blocks = python_blocks(text)
    if name == "index.rst":
        assert not blocks
        return
    assert blocks, f"{name} has no Python block"
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("MPLBACKEND", "agg")
    scope = {"__name__": "__main__"}  # a block guarded by `if __name__ == "__main__"` runs
    for k, code in enumerate(blocks):
        run = compile(code, f"{path}:block {k + 1}", "exec")
        if (name, k + 1) in KNOWN_BUGS:
            message, _ = KNOWN_BUGS[name, k + 1]
            with pytest.raises(ValueError, match=re.escape(message)):
                exec(run, scope)  # noqa: S102
            continue
        exec(run, scope)  # noqa: S102
