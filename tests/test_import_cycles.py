"""No import circles between the modules of ``src/stablearena``.

The import graph is built from the source with the standard library's :mod:`ast` (nothing is
imported), counting every ``import`` statement anywhere in a module — at module level and inside
functions, methods, ``try`` and ``if`` blocks — except under ``if TYPE_CHECKING:``.

- Relative imports are resolved against the importing module's package.
- ``import a.b.c`` is an edge to ``a.b.c``.
- ``from pkg import x`` is an edge to ``pkg.x`` when that is a module; else, when ``x`` is one of
  the package's lazy public names (its ``_LAZY`` table, PEP 562), to the module that defines it
  (the one the lazy import loads); else to ``pkg`` (its ``__init__``).
- An edge from a module inside a package to that package's ``__init__`` counts only when it
  imports something defined in ``__init__`` itself (importing ``pkg.sub`` runs ``pkg/__init__``
  first, but that is not a circle through the package's code).
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from functools import cache
from pathlib import Path

SRC = Path(__file__).resolve().parents[1] / "src"
ROOT = "stablearena"


def _module_files(src: Path = SRC) -> dict[str, Path]:
    out = {}
    for path in sorted((src / ROOT).rglob("*.py")):
        parts = path.relative_to(src).with_suffix("").parts
        if parts[-1] == "__init__":
            parts = parts[:-1]
        out[".".join(parts)] = path
    return out


MODULES = _module_files()


def _is_package(name: str, modules: dict[str, Path] = MODULES) -> bool:
    return modules[name].name == "__init__.py"


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def _imports(tree: ast.AST) -> Iterator[ast.Import | ast.ImportFrom]:
    """Every import node, skipping the bodies of ``if TYPE_CHECKING:`` (not their ``else``)."""
    stack = [tree]
    while stack:
        node = stack.pop()
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            yield node
            continue
        if isinstance(node, ast.If) and _is_type_checking(node.test):
            stack.extend(node.orelse)
            continue
        stack.extend(ast.iter_child_nodes(node))


@cache
def _parse(path: Path, stamp: tuple[int, int]) -> ast.Module:
    return ast.parse(path.read_text(encoding="utf-8"), filename=str(path))


def _tree(name: str, modules: dict[str, Path] = MODULES) -> ast.Module:
    """The module's syntax tree (parsed once per version of the file)."""
    st = modules[name].stat()
    return _parse(modules[name], (st.st_mtime_ns, st.st_size))


def _defined_in_init(package: str, modules: dict[str, Path] = MODULES) -> frozenset[str]:
    """Names bound at the top level of ``package/__init__.py`` (outside ``if TYPE_CHECKING``)."""
    names: set[str] = set()
    stack: list[ast.AST] = list(_tree(package, modules).body)
    while stack:
        node = stack.pop()
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, (ast.Assign, ast.AnnAssign, ast.AugAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            for t in targets:
                names.update(n.id for n in ast.walk(t) if isinstance(n, ast.Name))
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            names.update((a.asname or a.name).split(".")[0] for a in node.names)
        elif isinstance(node, ast.If) and _is_type_checking(node.test):
            stack.extend(node.orelse)
        elif isinstance(node, (ast.If, ast.Try, ast.With)):
            for field in ("body", "orelse", "finalbody", "handlers"):
                stack.extend(getattr(node, field, []))
        elif isinstance(node, ast.ExceptHandler):
            stack.extend(node.body)
    return frozenset(names)


def _lazy_table(package: str, modules: dict[str, Path] = MODULES) -> dict[str, str]:
    """The package's ``_LAZY`` mapping (public name → module, resolved), if it has one."""
    for node in _tree(package, modules).body:
        target = node.target if isinstance(node, ast.AnnAssign) else None
        if isinstance(node, ast.Assign) and len(node.targets) == 1:
            target = node.targets[0]
        if isinstance(target, ast.Name) and target.id == "_LAZY" and node.value is not None:
            table = ast.literal_eval(node.value)
            return {
                k: _absolute(v.lstrip("."), package, v.count(".") - 1) for k, v in table.items()
            }
    return {}


def _absolute(module: str | None, package: str, up: int) -> str:
    base = package.split(".")
    if up:
        base = base[:-up]
    return ".".join([*base, module] if module else base)


def _edge_to_package(
    importer: str, package: str, names: list[str], modules: dict[str, Path] = MODULES
) -> bool:
    """An edge ``importer`` → ``package/__init__``: only if ``importer`` lies outside the package
    or imports a name that ``__init__`` itself defines."""
    inside = importer.startswith(package + ".")
    return not inside or bool(set(names) & _defined_in_init(package, modules))


def import_graph(src: Path = SRC) -> dict[str, set[str]]:
    """Module → the project modules it imports (see the module docstring for the rules), for
    the tree under ``src`` (this checkout's by default)."""
    modules = MODULES if src == SRC else _module_files(src)
    graph: dict[str, set[str]] = {name: set() for name in modules}
    for name in modules:
        package = name if _is_package(name, modules) else name.rpartition(".")[0]
        for node in _imports(_tree(name, modules)):
            if isinstance(node, ast.Import):
                for alias in node.names:
                    if alias.name in modules:
                        graph[name].add(alias.name)
                continue
            base = _absolute(node.module, package, node.level - 1) if node.level else node.module
            if base is None or not (base == ROOT or base.startswith(ROOT + ".")):
                continue
            rest: list[str] = []
            for alias in node.names:
                sub = f"{base}.{alias.name}"
                if sub in modules:
                    graph[name].add(sub)
                elif alias.name in _lazy_table(base, modules) if base in modules else False:
                    graph[name].add(_lazy_table(base, modules)[alias.name])
                else:
                    rest.append(alias.name)
            if rest and base in modules and _edge_to_package(name, base, rest, modules):
                graph[name].add(base)
        graph[name].discard(name)
    return graph


def find_cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """One shortest circle per strongly connected component with more than one module, each as
    a chain ``a → b → … → a`` (Tarjan's algorithm, then a breadth-first search in the component)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    on_stack: set[str] = set()
    stack: list[str] = []
    components: list[list[str]] = []
    counter = 0

    def visit(v: str) -> None:
        nonlocal counter
        index[v] = low[v] = counter
        counter += 1
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                components.append(sorted(comp))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    cycles = []
    for comp in components:
        members = set(comp)
        start = comp[0]
        prev: dict[str, str] = {}
        frontier = [start]
        found = None
        while frontier and found is None:
            nxt = []
            for v in frontier:
                for w in sorted(graph[v] & members):
                    if w == start:
                        found = v
                        break
                    if w not in prev:
                        prev[w] = v
                        nxt.append(w)
                if found is not None:
                    break
            frontier = nxt
        chain = [found]
        while chain[-1] != start:
            chain.append(prev[chain[-1]])
        cycles.append([*reversed(chain), start])
    return cycles


CYCLES = find_cycles(import_graph())


def test_no_import_cycles():
    """No module reaches itself through its imports — in the library, the command line
    (``cli/__init__`` registers the commands, which import their shared pieces from
    ``cli/common``) and the service alike."""
    assert not CYCLES, "import circles:\n" + "\n".join(" → ".join(c) for c in CYCLES)


# ------------------------------------------------------------------------ the checker itself
def test_the_graph_follows_the_rules():
    graph = import_graph()
    # imports inside functions count: boards.py imports the rater flags inside fit_board
    assert f"{ROOT}.cli.rater_flags" in graph[f"{ROOT}.cli.boards"]
    # relative imports resolve; `from .. import choices` is the module stablearena.choices
    assert f"{ROOT}.data.battles" in graph[f"{ROOT}.raters.annotator"]
    assert f"{ROOT}.choices" in graph[f"{ROOT}.cli.rater_flags"]
    # `from .common import app` is an edge to the module cli.common, not to the package cli
    assert f"{ROOT}.cli.common" in graph[f"{ROOT}.cli.rank"]
    assert f"{ROOT}.cli" not in graph[f"{ROOT}.cli.rank"]
    # a name defined in a package's __init__ (stablearena.data.datasets.listing) is an edge to it
    assert f"{ROOT}.data.datasets" in graph[f"{ROOT}.cli.data_sets"]
    # importing a submodule of one's own package is no edge to its __init__
    assert f"{ROOT}" not in graph[f"{ROOT}.raters.annotator"]
    assert f"{ROOT}.raters" not in graph[f"{ROOT}.raters.annotator"]


def test_find_cycles_reports_chains():
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}, "e": {"f"}, "f": {"e"}}
    assert find_cycles(graph) == [["a", "b", "c", "a"], ["e", "f", "e"]]
    assert find_cycles({"a": {"b"}, "b": set()}) == []


def test_type_checking_imports_are_skipped():
    src = (
        "from typing import TYPE_CHECKING\n"
        "if TYPE_CHECKING:\n    import x\nelse:\n    import y\n"
        "def f():\n    import z\n"
    )
    names = [a.name for node in _imports(ast.parse(src)) for a in node.names]
    assert sorted(names) == ["TYPE_CHECKING", "y", "z"]
