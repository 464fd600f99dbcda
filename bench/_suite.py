"""The test suite's helpers for the benchmarks: ``tests/`` on ``sys.path``, so that a benchmark
imports the same server drivers the tests use (``arena_process.ServerProcess``,
``pgserver.PostgresServer``), which are not part of the package."""

from __future__ import annotations

import sys
from pathlib import Path

TESTS = Path(__file__).resolve().parents[1] / "tests"
if str(TESTS) not in sys.path:
    sys.path.insert(0, str(TESTS))
