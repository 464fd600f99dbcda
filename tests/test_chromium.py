"""Browser tests without Chromium: skipped with one line saying what to install on a developer's
machine, failed in CI (``CI=true``) — run on a PATH that has no browser (tests/chromium.py)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

TESTS = Path(__file__).resolve().parent
INSTALL = "apt-get install chromium chromium-driver"


def run_browser_test(
    tmp_path: Path, path_dirs: list[Path], **env: str
) -> subprocess.CompletedProcess:
    """pytest on one test that needs the browser, with PATH = ``path_dirs`` only."""
    (tmp_path / "test_page.py").write_text(
        "from chromium import start_browser\n\n"
        "def test_page(tmp_path):\n"
        "    start_browser(tmp_path).quit()\n"
    )
    base = {k: v for k, v in os.environ.items() if k not in ("CI", "STABLEARENA_SKIP_BROWSER")}
    return subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "chromium", "-p", "no:cacheprovider", "-q"],
        cwd=tmp_path,
        env={
            **base,
            "PATH": os.pathsep.join(map(str, path_dirs)),
            "PYTHONPATH": os.pathsep.join([str(TESTS), base.get("PYTHONPATH", "")]),
            **env,
        },
        capture_output=True,
        text=True,
        timeout=120,
    )


@pytest.fixture
def no_browser_path(tmp_path: Path) -> list[Path]:
    """A PATH with a chromium but no chromedriver (a half install)."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    fake = bin_dir / "chromium"
    fake.write_text("#!/bin/sh\nexit 1\n")
    fake.chmod(0o755)
    return [bin_dir]


def test_without_chromium_a_developer_run_skips_and_says_what_to_install(tmp_path, no_browser_path):
    out = run_browser_test(tmp_path, no_browser_path)
    assert out.returncode == 0, out.stdout + out.stderr
    assert "1 skipped" in out.stdout
    lines = [line for line in out.stdout.splitlines() if INSTALL in line]
    assert len(lines) == 1, out.stdout  # one line, at the end of the run
    assert "browser test(s) skipped" in lines[0] and "CI=true" in lines[0]


def test_without_chromium_ci_fails_and_names_what_is_missing(tmp_path, no_browser_path):
    out = run_browser_test(tmp_path, no_browser_path, CI="true")
    assert out.returncode == 1, out.stdout + out.stderr
    assert "1 failed" in out.stdout and "skipped" not in out.stdout
    assert "chromedriver not on PATH" in out.stdout and INSTALL in out.stdout
    assert "CI=true: the browser tests must run there" in out.stdout


def test_an_explicit_skip_is_honoured_even_in_ci(tmp_path, no_browser_path):
    out = run_browser_test(tmp_path, no_browser_path, CI="true", STABLEARENA_SKIP_BROWSER="1")
    assert out.returncode == 0 and "1 skipped" in out.stdout, out.stdout
