"""Sphinx configuration of the dlmsvdd documentation.

Build: ``sphinx-build -W docs docs/_build/html`` (the ``docs`` extra installs
what it needs). The API reference is generated from the numpydoc docstrings,
checked by numpydoc's validation and nitpicky cross-references; the gallery's
scripts (``examples/``) run at every build.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

# the gallery runs in this process: one thread per library (set before torch is imported) keeps its
# examples from fighting over the cores of a small CI machine
os.environ.setdefault("OMP_NUM_THREADS", "1")

import dlmsvdd  # noqa: E402

HERE = Path(__file__).resolve().parent

project = "dlmsvdd"
author = "the dlmsvdd authors"
copyright = "the dlmsvdd authors"
release = version = dlmsvdd.__version__

extensions = [
    "myst_parser",
    "sphinx.ext.autodoc",
    "sphinx.ext.autosummary",
    "sphinx.ext.mathjax",
    "numpydoc",
    "sphinx_gallery.gen_gallery",
]

source_suffix = {".rst": "restructuredtext", ".md": "markdown"}
exclude_patterns = ["_build", "_generated", "auto_examples/*.ipynb", "auto_examples/*.py",
                    "auto_examples/*.zip", "auto_examples/*.md5", "auto_examples/*.codeobj.json"]
root_doc = "index"

# every reference must resolve: a broken link or an unknown name is a warning, and -W makes it an error
nitpicky = True
myst_heading_anchors = 3
myst_enable_extensions = ["dollarmath", "colon_fence"]
suppress_warnings: list[str] = []

# ---- API reference: autodoc + autosummary, numpydoc docstrings, validated
autosummary_generate = True
autosummary_imported_members = False
autodoc_typehints = "none"  # the types are in the docstrings (numpydoc), not in the signatures
autodoc_member_order = "bysource"
numpydoc_show_class_members = False
numpydoc_xref_param_type = False
numpydoc_class_members_toctree = False
# one style, checked: every documented object has a docstring with a one-line summary, every
# parameter documented (and none that does not exist) in order, a Returns section where it returns
# something, known sections in numpydoc's order
numpydoc_validation_checks = {"GL06", "GL07", "GL08", "SS01", "PR01", "PR02", "PR03", "PR10", "RT01"}
numpydoc_validation_exclude = {
    r"\.__init__$",  # the class docstring documents the constructor
    r"\.set_\w+_request$",  # scikit-learn's metadata-routing methods, generated
}

# ---- the gallery: every script of examples/ runs at each build, on the CPU, with its figures
sphinx_gallery_conf = {
    "examples_dirs": str(HERE.parent / "examples"),
    "gallery_dirs": "auto_examples",
    "filename_pattern": r"/plot_",
    "abort_on_example_error": True,
    "only_warn_on_example_error": False,
    "download_all_examples": False,
    "remove_config_comments": True,
    "within_subsection_order": "FileNameSortKey",
    "matplotlib_animations": False,
    "image_scrapers": ("matplotlib",),
    "reset_modules": ("matplotlib",),
    "show_memory": False,
    "min_reported_time": 0,
}

# ---- HTML
html_theme = "pydata_sphinx_theme"
html_title = f"dlmsvdd {release}"
html_static_path: list[str] = []
html_theme_options = {
    "navigation_depth": 3,
    "show_toc_level": 2,
    "header_links_before_dropdown": 6,
    "secondary_sidebar_items": ["page-toc"],
}
html_show_sourcelink = False


# ---- the command reference: each command's --help, written at build time
def _write_cli_help() -> None:
    import argparse
    import io

    from dlmsvdd import cli

    out = HERE / "_generated"
    out.mkdir(exist_ok=True)
    parser = cli.build_parser()
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    texts = {"dlmsvdd": parser.format_help()}
    texts.update({f"dlmsvdd-{name}": p.format_help() for name, p in sub.choices.items()})
    for name, text in texts.items():
        path = out / f"{name}.txt"
        if not path.exists() or path.read_text() != text:  # unchanged files keep Sphinx's cache valid
            path.write_text(text)


os.environ.setdefault("COLUMNS", "100")  # argparse wraps the help at this width
_write_cli_help()
templates_path = ["_templates"]
autosummary_ignore_module_all = False
