"""The benchmark scripts under bench/ at least import and parse their options (they are not run
by the test suite: they take minutes and need the peers of the ``bench`` extra)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

BENCH = sorted((Path(__file__).resolve().parents[1] / "bench").glob("bench_*.py"))


@pytest.mark.parametrize("script", BENCH, ids=[p.name for p in BENCH])
def test_bench_script_starts(script):
    out = subprocess.run(
        [sys.executable, str(script), "--help"], capture_output=True, text=True, timeout=120
    )
    if out.returncode != 0 and "is not installed" in out.stderr:
        pytest.skip(f"{script.name} needs its peer: {out.stderr.strip()[-200:]}")
    assert out.returncode == 0, out.stderr[-2000:]
    assert "usage" in out.stdout.lower()


def test_there_are_bench_scripts():
    assert len(BENCH) >= 5
