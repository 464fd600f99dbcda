"""Shared fixtures: paths to the real data beside the checkout (tests skip when absent), the
in-process CLI, and a throwaway PostgreSQL server for the live arena's tests."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

DATA_DIR = Path(
    os.environ.get(
        "STABLEARENA_SHARED_DATA", Path(__file__).resolve().parents[2] / "shared" / "data"
    )
)
LLMFAO = DATA_DIR / "llmfao.csv"
CHATBOT_ARENA = DATA_DIR / "chatbot_arena_20240814_pairs.json"


def _need(path: Path) -> Path:
    if not path.exists():
        pytest.skip(
            f"real data not available: {path} is absent (it lives in ../shared/data beside the checkout)"
        )
    return path


@pytest.fixture
def llmfao_path() -> Path:
    return _need(LLMFAO)


@pytest.fixture
def chatbot_arena_path() -> Path:
    return _need(CHATBOT_ARENA)


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
