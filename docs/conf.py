"""Sphinx configuration of the stablearena documentation (MyST Markdown + autodoc).

Build: ``python -m sphinx -W --keep-going -b html docs docs/_build/html`` (what
``tests/test_docs_build.py`` runs, warnings as errors). The CLI and HTTP API references are
generated at build time by ``docs/_ext/stablearena_docs.py`` from the Typer app and the
service's OpenAPI schema; the Python API reference comes from the docstrings (autodoc).
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE / "_ext"))
# a checkout without an install: document the sources beside this folder
if importlib.util.find_spec("stablearena") is None:  # pragma: no cover - installed in CI
    sys.path.insert(0, str(HERE.parent / "src"))

import stablearena  # noqa: E402

project = "stablearena"
author = "the stablearena authors"
copyright = "the stablearena authors, MIT licence"
version = release = stablearena.__version__

extensions = [
    "myst_parser",
    "sphinx.ext.autodoc",
    "sphinx.ext.autosummary",
    "sphinx.ext.napoleon",
    "sphinx.ext.mathjax",
    "sphinx.ext.viewcode",
    "stablearena_docs",
]

source_suffix = {".md": "markdown"}
root_doc = "index"
exclude_patterns = ["_build", "Thumbs.db", ".DS_Store", "**/.ipynb_checkpoints"]
# curly quotes and ellipses, but no dashes: "--ci" in prose stays two hyphens
smartquotes_action = "qe"

# Pages written separately (the guides, the methods, datasets, architecture, benchmarks) join
# the site through glob entries in index.md's toctrees; stablearena_docs drops a glob entry
# that matches no page yet instead of warning.

# ---------------------------------------------------------------- MyST
myst_enable_extensions = [
    "colon_fence",  # ::: fences for admonitions
    "deflist",
    "dollarmath",  # $…$ and $$…$$ formulas in the methods pages
    "amsmath",
    "fieldlist",
    "attrs_inline",
]
myst_heading_anchors = 3  # [text](page.md#a-heading) links
myst_dmath_double_inline = True

# ---------------------------------------------------------------- autodoc
autodoc_default_options = {
    "members": True,
    "undoc-members": False,
    "show-inheritance": True,
    "member-order": "bysource",
}
autosummary_generate = False  # python-api.md's table only; the module pages are written
autodoc_typehints = "signature"
autodoc_typehints_format = "short"
autodoc_preserve_defaults = True
autodoc_class_signature = "mixed"
napoleon_google_docstring = True
napoleon_numpy_docstring = True
# "Attributes:" sections as fields of the class, not as attribute entries that would describe a
# dataclass field a second time (autodoc documents the fields already)
napoleon_use_ivar = True
# a rater's "Options:" are its constructor's parameters
napoleon_custom_sections = [("Options", "params_style")]

# ---------------------------------------------------------------- HTML
html_theme = "furo"  # the `docs` extra installs it
html_title = f"stablearena {release}"
html_show_sourcelink = False
