"""The site's formulas render without a network: MathJax is bundled into the built site
(sphinx-mathjax-offline), never fetched from a CDN."""

import importlib.util
import re
from pathlib import Path

import pytest

DOCS = Path(__file__).resolve().parents[2] / "docs"
EXTENSION = "sphinx-mathjax-offline"


def _conf():
    scope = {"__file__": str(DOCS / "conf.py")}
    exec(
        compile((DOCS / "conf.py").read_text(encoding="utf-8"), str(DOCS / "conf.py"), "exec"),
        scope,
    )  # noqa: S102
    return scope


def test_the_docs_bundle_mathjax_instead_of_a_cdn():
    conf = _conf()
    assert "sphinx.ext.mathjax" in conf["extensions"]
    assert EXTENSION in conf["extensions"]
    path = conf.get("mathjax_path", "")
    assert not re.match(r"(https?:)?//", path), f"mathjax_path points at a network: {path}"
    text = (DOCS / "conf.py").read_text(encoding="utf-8").lower()
    assert "cdn.jsdelivr" not in text and "cdnjs" not in text
    pyproject = (DOCS.parent / "pyproject.toml").read_text(encoding="utf-8")
    docs_extra = re.search(r"^docs = \[(.*?)\]", pyproject, re.S | re.M).group(1)
    assert EXTENSION in docs_extra


def test_a_built_page_loads_mathjax_from_the_site(tmp_path):
    """A one-page site with a formula, built with the docs' maths extensions: its page loads
    MathJax from ``_static/mathjax`` of the site, and the file is there."""
    pytest.importorskip("sphinx")
    if importlib.util.find_spec(EXTENSION) is None:
        pytest.skip(f"{EXTENSION} is not installed (pip install -e '.[docs]')")
    from sphinx.application import Sphinx

    src = tmp_path / "src"
    src.mkdir()
    (src / "conf.py").write_text(
        f"extensions = ['sphinx.ext.mathjax', '{EXTENSION}']\n", encoding="utf-8"
    )
    (src / "index.rst").write_text(
        "Title\n=====\n\nThe matrix :math:`\\Phi^\\top\\Phi + \\rho I`.\n", encoding="utf-8"
    )
    out = tmp_path / "html"
    app = Sphinx(
        str(src),
        str(src),
        str(out),
        str(tmp_path / "doctrees"),
        "html",
        status=None,
        warning=None,
        freshenv=True,
    )
    app.build()
    page = (out / "index.html").read_text(encoding="utf-8")
    scripts = re.findall(r'<script[^>]*src="([^"]*mathjax[^"]*)"', page, re.I)
    assert scripts, "the page loads no MathJax"
    for src_attr in scripts:
        assert not re.match(r"(https?:)?//", src_attr), src_attr
        assert (out / src_attr.split("?")[0]).is_file(), src_attr
    assert "cdn.jsdelivr" not in page
