"""The library's layers (docs/architecture.md): each imports only the layers below it.

Every import statement in ``src/stablearena`` counts — at module level and inside functions
(late imports for start-up speed are still dependencies); only those under ``if TYPE_CHECKING:``
do not (they never run). The graph is test_import_cycles's. The test fails on an upward import
naming both modules and their layers; ``test_a_planted_upward_import_fails`` shows it would.
"""

from __future__ import annotations

import ast
import re
import shutil
from pathlib import Path

import pytest
from test_import_cycles import import_graph

SRC = Path(__file__).resolve().parents[1] / "src"

#: the layers, lowest first; "" is the foundation: the modules at the package root
#: (errors, choices, inputs, atomic, extras and the private helpers)
LAYERS: list[str] = [
    "",
    "data",
    "raters",
    "crowd",
    "analysis",
    "design",
    "judging",
    "simulation",
    "figures",
    "service",
    "cli",
]
#: the modules at the root that are not the foundation: the package's front doors
FRONT = {"__init__", "__main__", "_moved"}


def layer_of(module: str) -> str | None:
    """The layer of ``stablearena.x.y`` (None for the front doors and outside modules)."""
    parts = module.split(".")
    if parts[0] != "stablearena":
        return None
    if len(parts) == 1:
        return None  # the package itself: its lazy public names
    head = parts[1]
    if head in LAYERS:
        return head
    return None if head in FRONT else ""


def upward(src: Path = SRC) -> list[str]:
    """Every import from a layer into a higher one, as 'a (layer) imports b (layer)', on the
    import graph of test_import_cycles (every import statement, late ones too; not those under
    ``if TYPE_CHECKING:``, which never run)."""
    rank = {name: i for i, name in enumerate(LAYERS)}
    bad = []
    for module, targets in sorted(import_graph(src).items()):
        for target in sorted(targets):
            mine, theirs = layer_of(module), layer_of(target)
            if mine is None or theirs is None or mine == theirs:
                continue
            if rank[theirs] > rank[mine]:
                bad.append(
                    f"{module} (layer {mine or 'foundation'}) imports {target} "
                    f"(layer {theirs or 'foundation'}, above it)"
                )
    return bad


def test_each_layer_imports_only_the_layers_below_it() -> None:
    bad = upward(SRC)
    assert not bad, "upward imports:\n" + "\n".join(bad)


def test_every_package_states_what_it_holds_and_may_import() -> None:
    for name in LAYERS[1:]:
        init = SRC / "stablearena" / name / "__init__.py"
        doc = ast.get_docstring(ast.parse(init.read_text())) or ""
        assert "import" in doc.lower() and len(doc) > 200, f"{init}: its docstring"


def test_a_planted_upward_import_fails(tmp_path: Path) -> None:
    copy = tmp_path / "src"
    shutil.copytree(SRC / "stablearena", copy / "stablearena")
    assert upward(copy) == []
    victim = copy / "stablearena" / "data" / "graph.py"
    victim.write_text(victim.read_text() + "\n\ndef _late():\n    from ..service import app\n")
    bad = upward(copy)
    assert len(bad) == 1 and "stablearena.data.graph (layer data)" in bad[0], bad
    assert "stablearena.service.app (layer service" in bad[0], bad
    # a foundation module importing a layer is upward too
    errors = copy / "stablearena" / "errors.py"
    errors.write_text(errors.read_text() + "\nfrom .data import battles  # noqa\n")
    assert len(upward(copy)) == 2
    # an old flat path is found too (it would hide the edge from the rule)
    assert old_paths(copy) == []
    victim.write_text(
        victim.read_text() + "\n\ndef _old():\n    from ..judges import JudgeClient\n"
    )
    found = old_paths(copy)
    assert any(
        b.startswith("stablearena.data.graph:") and b.endswith(": stablearena.judges")
        for b in found
    ), found


@pytest.mark.parametrize("layer", LAYERS[1:])
def test_the_architecture_page_names_every_layer(layer: str) -> None:
    page = (SRC.parent / "docs" / "architecture.md").read_text()
    assert re.search(rf"^{layer}/\s", page, re.M), f"the layer diagram has no line for {layer}/"
    assert f"`{layer}/`" in page or f"stablearena.{layer}" in page, f"no paragraph on {layer}/"


def old_paths(src: Path = SRC) -> list[str]:
    """Imports in the library of a module path of the flat layout (stablearena._moved): they
    work through the deprecation finder, but hide the edge from the layer rule."""
    from test_import_cycles import _absolute, _imports, _module_files

    from stablearena._moved import new_name

    bad = []
    for name, path in _module_files(src).items():
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        for node in _imports(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            else:
                base = (
                    _absolute(node.module, package, node.level - 1) if node.level else node.module
                )
                targets = [base or ""] + [f"{base}.{a.name}" for a in node.names]
            bad += [f"{name}:{node.lineno}: {t}" for t in targets if new_name(t) is not None]
    return bad


def test_the_library_imports_no_old_path() -> None:
    bad = old_paths()
    assert not bad, "old module paths (use the new ones):\n" + "\n".join(bad)
