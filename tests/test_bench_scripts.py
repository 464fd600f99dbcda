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


@pytest.mark.parametrize(
    "args",
    [
        pytest.param(["--target", "floor", "--battles", "3", "--rounds", "2"], id="floor-burst"),
        pytest.param(  # the steady mode's servers and warm-up, the floor then the arena
            ["--steady", "6", "--warmup", "1", "--battles", "4", "--slow", "0.05", "--rounds", "1"]
            + ["--target", "both"],
            id="both-steady",
            marks=pytest.mark.slow,
        ),
    ],
)
def test_bench_arena_runs_small(args):
    """bench_arena's floor relay (bench/floor_relay.py) and its steady mode run end to end on a
    few battles, nothing lost."""
    script = Path(__file__).resolve().parents[1] / "bench" / "bench_arena.py"
    out = subprocess.run(
        [sys.executable, str(script), *args], capture_output=True, text=True, timeout=300
    )
    assert out.returncode == 0, out.stderr[-2000:]
    assert "added time to first token" in out.stdout
    if "floor" in args or "both" in args:
        assert "relayed by the floor" in out.stdout
    if "both" in args:
        assert "arena / floor with 4 battles in flight: extra CPU per battle" in out.stdout
    if "floor" not in args:
        assert " 0 lost" in out.stdout and "with 4 battles in flight" in out.stdout
