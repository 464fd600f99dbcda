"""The public API survives the move into layers (issue 43): every name of release 0.1.

``tests/data/public_api_0.1.json`` is every module of release 0.1 (the flat layout) with its
``__all__``, written from that tree before the move. Each old path must still import — moved
ones with a DeprecationWarning naming the new path — and give the very objects of the new
module; the package's own public names are the same list; every import the README and the docs
show runs.
"""

from __future__ import annotations

import importlib
import json
import re
import warnings
from pathlib import Path

import pytest

import stablearena
from stablearena._moved import MOVED, new_name

ROOT = Path(__file__).resolve().parents[1]
BEFORE: dict[str, list[str]] = json.loads((ROOT / "tests/data/public_api_0.1.json").read_text())


def test_the_package_public_names_are_those_of_0_1() -> None:
    assert sorted(stablearena.__all__) == BEFORE["stablearena"]
    for name in stablearena.__all__:
        assert getattr(stablearena, name) is not None


@pytest.mark.parametrize("module", sorted(m for m in BEFORE if m != "stablearena"))
def test_every_module_path_of_0_1_still_gives_its_names(module: str) -> None:
    new = new_name(module)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        old = importlib.import_module(module)
    if new is not None:
        assert (
            any(
                issubclass(w.category, DeprecationWarning) and new in str(w.message) for w in caught
            )
            or module in _ALREADY_IMPORTED
        ), module
        assert old is importlib.import_module(new)
    for name in BEFORE[module]:
        assert hasattr(old, name), f"{module}.{name} is gone"


#: old paths a previous test of this session may already have imported (a module imports once:
#: its warning is given the first time only)
_ALREADY_IMPORTED: set[str] = set()


@pytest.fixture(autouse=True)
def _note_imported():
    import sys

    _ALREADY_IMPORTED.update(m for m in sys.modules if new_name(m) is not None)
    yield


def test_an_old_path_is_the_same_module_object_so_patching_either_patches_both(monkeypatch):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        old = importlib.import_module("stablearena.uncertainty")
    new = importlib.import_module("stablearena.raters.uncertainty")
    monkeypatch.setattr(old, "_probe_attribute", 1, raising=False)
    assert new._probe_attribute == 1
    assert new.__spec__.name == "stablearena.raters.uncertainty"


def test_every_moved_path_names_a_module_that_exists() -> None:
    for old, new in MOVED.items():
        assert importlib.util.find_spec("stablearena." + new) is not None, (old, new)


_IMPORT = re.compile(
    r"^[ \t]*(from (stablearena[\w.]*) import (\([^)]*\)|[^\n#]+)|import (stablearena[\w.]*))",
    re.M,
)


def documented_imports() -> list[tuple[str, str]]:
    """(file, statement) for every ``from stablearena… import …`` in the README and docs."""
    out = []
    for page in [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]:
        for m in _IMPORT.finditer(page.read_text()):
            stmt = " ".join(m.group(1).split()).replace("( ", "(").replace(", )", ")")
            out.append((str(page.relative_to(ROOT)), stmt))
    return out


def test_the_docs_show_imports() -> None:
    assert len(documented_imports()) >= 30


@pytest.mark.parametrize("page,statement", documented_imports())
def test_every_documented_import_runs(page: str, statement: str) -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("error", DeprecationWarning)  # the docs show the new paths
        exec(statement, {})
