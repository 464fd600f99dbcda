"""Shared fixtures: paths to the real data sets bundled with the package
(:mod:`stablearena.data.datasets`: LLMFAO and the Chatbot Arena 2024 pair counts), the in-process CLI,
and a throwaway PostgreSQL server for the live arena's tests."""

from __future__ import annotations

from pathlib import Path

import pytest
from chromium import pytest_terminal_summary  # noqa: F401  (one line when browser tests skip)

#: What makes a test module part of the live stack (marked ``live``; the README's quick subset,
#: ``-m "not slow and not live"``, leaves them out): it starts the live arena, a browser, a
#: PostgreSQL server, a server process, or builds the documentation.
_LIVE_SIGNS = (
    "stablearena.service",
    "create_app",
    "browser",
    "postgres",
    "pgserver",
    "arena_process",
    "demo_server",
    "subprocess",
    "sphinx",
)
_live_modules: dict[str, bool] = {}


def _is_live(item: pytest.Item) -> bool:
    path = str(getattr(item, "path", "") or "")
    if path not in _live_modules:
        try:
            text = Path(path).read_text(encoding="utf-8")
        except OSError:
            text = ""
        _live_modules[path] = any(sign in text for sign in _LIVE_SIGNS)
    return _live_modules[path]


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """``@pytest.mark.slow_on("sqlite")``: the test's runs whose parameters include that value
    are slow (the default run keeps the other backend's; ``-m slow`` runs them). Every test of
    a module that starts the live stack is marked ``live`` (:data:`_LIVE_SIGNS`)."""
    for item in items:
        if _is_live(item):
            item.add_marker(pytest.mark.live)
        mark = item.get_closest_marker("slow_on")
        spec = getattr(item, "callspec", None)
        if mark is not None and spec is not None:
            if set(mark.args) & {str(v) for v in spec.params.values()}:
                item.add_marker(pytest.mark.slow)


@pytest.fixture
def llmfao_path() -> Path:
    """The bundled LLMFAO battle log (``stablearena.data.datasets.path("llmfao")``)."""
    from stablearena.data.datasets import path

    return path("llmfao")


@pytest.fixture
def chatbot_arena_path() -> Path:
    """The bundled Chatbot Arena 2024 pair counts (``path("chatbot-arena-2024")``)."""
    from stablearena.data.datasets import path

    return path("chatbot-arena-2024")


@pytest.fixture
def cli(capsys):
    """Run the ``stablearena`` CLI in-process: ``cli(*args) -> (exit code, stdout, stderr)``
    (errors exit 2 through ``main`` as they do for a user)."""
    from stablearena.cli import main

    def run(*args: str) -> tuple[int, str, str]:
        code = 0
        try:
            main([str(a) for a in args])
        except SystemExit as exc:
            code = int(exc.code or 0)
        out = capsys.readouterr()
        return code, out.out, out.err

    return run


@pytest.fixture(scope="module")
def postgres():
    """A throwaway PostgreSQL server (tests/pgserver.py) for the module's tests; each test
    creates its own database on it."""
    from pgserver import PostgresServer, find_bin_dir

    if find_bin_dir() is None:  # pragma: no cover - .ci/run installs it
        pytest.fail("PostgreSQL is not installed: .ci/run installs Debian's 'postgresql' package")
    with PostgresServer() as pg:
        yield pg


@pytest.fixture(scope="module")
def browser(tmp_path_factory):
    """A headless Chromium (tests/chromium.py) shared by a module's page tests."""
    from chromium import start_browser

    driver = start_browser(tmp_path_factory.mktemp("chromium-profile"))
    yield driver
    driver.quit()
