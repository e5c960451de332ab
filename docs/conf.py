"""Sphinx configuration of deltafit's documentation.

Build it (warnings are errors, the gallery in ``examples/`` is executed) with::

    pip install -e ".[docs]"
    sphinx-build -W -b html docs docs/_build/html
"""

import os
import sys
import warnings

# The package sources, so that the docs build from a clone without an install as well.
sys.path.insert(0, os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "src")))

import deltafit  # noqa: E402

project = "deltafit"
author = "deltafit developers"
copyright = "deltafit developers, BSD-3-Clause"
release = deltafit.__version__
version = release

extensions = [
    "sphinx.ext.autodoc",
    "sphinx.ext.autosummary",
    "sphinx.ext.mathjax",
    # MathJax 3 bundled into _static/mathjax: the formulas render offline, no CDN
    "sphinx-mathjax-offline",
    "sphinx.ext.viewcode",
    "numpydoc",
    "sphinx_gallery.gen_gallery",
]

templates_path = ["_templates"]
exclude_patterns = [
    "_build",
    "auto_examples/*.ipynb",
    "auto_examples/*.py",
    "auto_examples/*.zip",
    "auto_examples/*.md5",
    "auto_examples/*.json",
]
default_role = "literal"

# API reference: one page per public name, generated from the docstrings.
autosummary_generate = True
autosummary_imported_members = True
autodoc_typehints = "none"
autodoc_default_options = {"member-order": "groupwise"}
numpydoc_show_class_members = False
numpydoc_class_members_toctree = False
numpydoc_xref_param_type = False
numpydoc_validation_checks = set()

# The gallery: every example runs at build time; a failing example fails the build.
os.environ.setdefault("MPLBACKEND", "agg")
warnings.filterwarnings("ignore", category=UserWarning, message="Matplotlib is currently using agg")
sphinx_gallery_conf = {
    "examples_dirs": os.path.join("..", "examples"),
    "gallery_dirs": "auto_examples",
    "filename_pattern": r"/plot_",
    "abort_on_example_error": True,
    "only_warn_on_example_error": False,
    "download_all_examples": False,
    "remove_config_comments": True,
    "within_subsection_order": "FileNameSortKey",
    "image_scrapers": ("matplotlib",),
    "show_memory": False,
    "min_reported_time": 1,
}

# Maths: MathJax 3 is served from the site itself (``_static/mathjax``, copied there by
# sphinx-mathjax-offline), so that the formulas render without a network.

html_theme = "pydata_sphinx_theme"
html_title = f"deltafit {release}"
html_static_path = ["_static"]
html_css_files = ["custom.css"]
html_theme_options = {
    "navbar_align": "left",
    "show_toc_level": 2,
    "navigation_with_keys": False,
    "footer_start": ["copyright"],
    "footer_end": ["sphinx-version"],
    "secondary_sidebar_items": ["page-toc"],
}
html_show_sourcelink = False
html_sidebars = {"index": [], "getting_started": [], "references": [], "changelog": []}


def _skip_inherited_sklearn_machinery(app, what, name, obj, skip, options):
    """Leave scikit-learn's metadata-routing methods out of deltafit's class pages (they are
    scikit-learn's, documented there)."""
    if name == "get_metadata_routing" or (name.startswith("set_") and name.endswith("_request")):
        return True
    return None


def setup(app):
    app.connect("autodoc-skip-member", _skip_inherited_sklearn_machinery)
