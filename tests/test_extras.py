"""The install fits the user (issue 43 item 5): the library and the command line — ranking,
intervals, plots, reports, ``auto`` — work without the live arena's stack, and a command that
needs it names the extra (stablearena.extras). Each case runs in a fresh interpreter in which
the serve extra's modules cannot be imported."""

from __future__ import annotations

import subprocess
import sys

BLOCKED = "fastapi sqlalchemy alembic prometheus_client fastapi_offline uvloop httptools psycopg"
RUN = (
    "import sys\n"
    f"for m in {BLOCKED.split()!r}: sys.modules[m] = None\n"
    "from stablearena.cli import main\n"
    "main(sys.argv[1:])\n"
)


def _run(*args: str, code: str = RUN) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-c", code, *args], capture_output=True, text=True, timeout=600
    )


def test_rank_and_reports_need_no_serve_extra(tmp_path):
    got = _run("rank", "llmfao", "--ci", "fisher", "--format", "csv")
    assert got.returncode == 0, got.stderr
    assert got.stdout.startswith("rank,") and "GPT 4" in got.stdout
    got = _run("rank", "llmfao", "--method", "arena", "--format", "json")
    assert got.returncode == 0, got.stderr
    got = _run("report", "llmfao", "-o", str(tmp_path / "r.html"))
    assert got.returncode == 0, got.stderr


def test_serve_and_auto_db_name_the_extra(tmp_path):
    for args in (
        ["serve", "--port", "0"],
        ["auto", "--demo", "--db", f"sqlite:///{tmp_path}/a.db"],
    ):
        got = _run(*args)
        assert got.returncode == 2, (args, got.stderr)
        assert "pip install 'stablearena[serve]'" in got.stderr, got.stderr
        assert "Traceback" not in got.stderr


def test_importing_the_live_arena_without_it_says_what_to_install():
    code = (
        "import sys\n"
        f"for m in {BLOCKED.split()!r}: sys.modules[m] = None\n"
        "try:\n"
        "    import stablearena.service\n"
        "except ImportError as e:\n"
        "    print(type(e).__name__, e)\n"
    )
    got = _run(code=code)
    assert "MissingExtra" in got.stdout and "stablearena[serve]" in got.stdout, got
