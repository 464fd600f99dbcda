"""The live arena's layout holds (docs/architecture.md): every SQL statement under
``service/store``, and no test helper shipped in, or imported by, the package."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import stablearena.service

SERVICE = Path(stablearena.service.__file__).resolve().parent


def test_sql_is_executed_only_under_the_store():
    outside = [
        f"{path.relative_to(SERVICE)}:{n}: {line.strip()}"
        for path in sorted(SERVICE.rglob("*.py"))
        if "store" not in path.relative_to(SERVICE).parts
        for n, line in enumerate(path.read_text().splitlines(), 1)
        if re.search(r"\bexecute(many)?\(|exec_driver_sql\(", line)
    ]
    assert outside == []


def test_the_package_holds_no_test_helpers_and_the_server_imports_none():
    assert not (SERVICE / "testing.py").exists() and not (SERVICE / "pgserver.py").exists()
    code = (
        "import sys, stablearena.service.app, stablearena.service.worker;"
        "print(sorted(m for m in sys.modules if m.split('.')[0] in "
        "('pytest', 'arena_process', 'pgserver', 'hypothesis')))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=120
    )
    assert out.stdout.strip() == "[]"
