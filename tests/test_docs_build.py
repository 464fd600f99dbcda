"""The documentation site builds with zero warnings, and its generated references are whole.

Runs ``python -m sphinx -W --keep-going -b html docs OUT`` — what a local build does too — so
that the README's test command (and CI) builds the docs. The Sphinx packages come with the
``test`` extra (``pip install -e ".[test]"``, which includes ``.[docs]``).
"""

from __future__ import annotations

import importlib.util
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def build(out: Path, *overrides: str) -> Path:
    """``python -m sphinx -W --keep-going -b html docs OUT`` with ``-D`` ``overrides``."""
    if sys.version_info < (3, 11):
        pytest.skip("the docs toolchain (Sphinx 9, MyST-Parser 5) needs Python 3.11")
    missing = [m for m in ("sphinx", "myst_parser", "furo") if importlib.util.find_spec(m) is None]
    if missing:
        pytest.fail(
            f"the docs build needs {', '.join(missing)}: pip install -e '.[docs]' "
            "(the test extra includes it)",
            pytrace=False,
        )
    proc = subprocess.run(
        [sys.executable, "-m", "sphinx", "-W", "--keep-going", "-q", "-b", "html"]
        + [a for o in overrides for a in ("-D", o)]
        + ["-d", str(out / ".doctrees"), str(ROOT / "docs"), str(out)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=900,
    )
    if proc.returncode != 0:
        pytest.fail(f"the docs build failed or warned:\n{proc.stderr[-8000:]}", pytrace=False)
    return out


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The site built with Sphinx's plain theme: every page read, every reference resolved,
    every warning an error, as with the shipped theme — whose navigation costs a third of the
    build (furo lays the whole tree out on each page); the full build is
    :func:`test_the_site_builds_with_its_theme_without_warnings` (slow)."""
    return build(tmp_path_factory.mktemp("docs-html"), "html_theme=basic")


def _text(page: Path) -> str:
    return re.sub(r"<[^>]+>", "", page.read_text(encoding="utf-8"))


def test_docs_build_without_warnings(site: Path) -> None:
    assert (site / "index.html").is_file()
    assert (site / "getting-started.html").is_file()


@pytest.mark.slow
def test_the_site_builds_with_its_theme_without_warnings(tmp_path: Path) -> None:
    """What a local build does: the shipped theme (furo), warnings as errors."""
    site = build(tmp_path)
    assert "furo" in (site / "index.html").read_text(encoding="utf-8")


def test_cli_reference_lists_every_command_and_option(site: Path) -> None:
    import typer.main

    from stablearena.cli import app

    page = _text(site / "reference" / "cli.html")
    root = typer.main.get_command(app)
    ctx = root.context_class(root, info_name="stablearena")
    names = root.list_commands(ctx)
    assert {"rank", "serve", "experiment"} <= set(names)
    for name in names:
        assert f"stablearena {name}" in page
        command = root.get_command(ctx, name)
        sub_ctx = command.context_class(command, info_name=name, parent=ctx)
        for param in command.get_params(sub_ctx):
            for opt in param.opts:
                if opt.startswith("--"):
                    assert opt in page, f"{name} {opt} missing from the CLI reference"


def test_http_reference_lists_every_route(site: Path) -> None:
    from stablearena.service.app import create_app

    page = _text(site / "reference" / "http-api.html")
    spec = create_app().openapi()
    assert spec["paths"]
    for path, methods in spec["paths"].items():
        for method in methods:
            assert f"{method.upper()} {path}" in page, f"{method} {path} missing"


def test_python_reference_documents_the_public_names(site: Path) -> None:
    import stablearena

    index = (site / "reference" / "python-api.html").read_text(encoding="utf-8")
    for name in stablearena.__all__:
        module = "stablearena" + stablearena._LAZY[name]
        page = module.removeprefix("stablearena.") + ".html"
        assert f'href="api/{page}#{module}.{name}"' in index, f"{name}: no link to its docs"


def test_glob_entries_that_match_nothing_new_are_dropped() -> None:
    sys.path.insert(0, str(ROOT / "docs" / "_ext"))
    pytest.importorskip("sphinx")
    from stablearena_docs import drop_empty_globs

    text = "```{toctree}\n:glob:\n\nguides/a\nguides/*\ndatasets*\n```\n"
    assert drop_empty_globs(text, "index", {"index", "guides/a"}) == (
        "```{toctree}\n:glob:\n\nguides/a\n```\n"
    )
    kept = drop_empty_globs(text, "index", {"index", "guides/a", "guides/b", "datasets"})
    assert kept == text
    plain = "```{toctree}\n\nmissing*\n```\n"  # not a :glob: toctree: left alone
    assert drop_empty_globs(plain, "index", {"index"}) == plain
