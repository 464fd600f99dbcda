"""Every example in README.md and docs/**/*.md runs as printed.

The rule for authors (docs/getting-started.md repeats it): a fenced block's language says
whether it runs.

* ```` ```console ````: each line starting with ``$ `` is a shell command (a line ending in
  ``\\`` continues on the next); the lines after it, up to the next ``$ ``, are its expected
  output (standard output and standard error together). Commands run with the project's
  environment (the Python running the tests first on ``PATH``, ``COLUMNS=80`` unless the
  command line sets its own) in a scratch directory that mirrors the repository root (its top-level
  entries are linked there, so ``docs/…`` paths work and written files do not land in the
  checkout); the blocks of one page share that directory, in order. Output is compared after
  removing trailing whitespace and leading/trailing blank lines; in the expected output a line
  ``...`` stands for any number of lines and ``...`` inside a line for any text on that line.
  A command must exit 0, unless its expected output starts with ``error:`` (an error example);
  a command with no expected output has only its exit status checked.
* ```` ```python ````: executed; the blocks of one page share one namespace, in order (a block
  run alone first replays the page's earlier blocks). A block with ``>>> `` lines is run as a
  doctest (``ELLIPSIS`` and ``NORMALIZE_WHITESPACE`` on).
* Any other language (``bash``, ``text``, ``toml``, ``json``, …) is not run: commands that need
  a running server, a browser or minutes of work go there.

Each block is its own test, named ``FILE:LINE`` (the line of its opening fence).
"""

from __future__ import annotations

import difflib
import doctest
import os
import re
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
RUN_LANGUAGES = ("console", "python")
COMMAND_TIMEOUT = 300  # seconds; examples are meant to take a few


@dataclass(frozen=True)
class Block:
    """One fenced code block of a Markdown page."""

    path: Path
    line: int  # 1-based line of the opening fence
    language: str
    text: str
    index: int  # position among the page's blocks of the same language

    @property
    def name(self) -> str:
        return f"{self.path.relative_to(ROOT).as_posix()}:{self.line}"


_FENCE = re.compile(r"^(?P<indent>[ \t]*)(?P<fence>`{3,}|~{3,})[ \t]*(?P<info>[^`\n]*)$")


def fenced_blocks(path: Path) -> list[Block]:
    """The fenced code blocks of a Markdown file whose language is one that runs (CommonMark
    fences of backticks or tildes, at any indentation: blocks inside list items count)."""
    lines = path.read_text(encoding="utf-8").splitlines()
    blocks: list[Block] = []
    counts: dict[str, int] = {}
    i = 0
    while i < len(lines):
        match = _FENCE.match(lines[i])
        if not match:
            i += 1
            continue
        indent, fence = match["indent"], match["fence"]
        info = match["info"].strip()
        language = info.split()[0] if info else ""
        body: list[str] = []
        j = i + 1
        while j < len(lines):
            stripped = lines[j].strip()
            if stripped.startswith(fence[0] * len(fence)) and set(stripped) == {fence[0]}:
                break
            body.append(lines[j][len(indent) :] if lines[j].startswith(indent) else lines[j])
            j += 1
        if language in RUN_LANGUAGES:
            index = counts.get(language, 0)
            counts[language] = index + 1
            blocks.append(Block(path, i + 1, language, "\n".join(body), index))
        i = j + 1
    return blocks


def doc_files() -> list[Path]:
    docs = ROOT / "docs"
    pages = sorted(
        p
        for p in docs.rglob("*.md")
        if not any(part.startswith("_") for part in p.relative_to(docs).parts)
    )
    return [ROOT / "README.md", *pages]


ALL_BLOCKS = [block for path in doc_files() for block in fenced_blocks(path)]


# ------------------------------------------------------------------------ output matching
def normalise(text: str) -> str:
    """Trailing whitespace removed from every line, leading/trailing blank lines dropped."""
    return "\n".join(line.rstrip() for line in text.strip("\n").splitlines()).strip("\n")


def output_pattern(expected: str) -> re.Pattern[str]:
    """A regex for ``expected`` in which a line ``...`` matches any lines (none too) and
    ``...`` inside a line any text on that line."""
    parts = []
    for line in normalise(expected).splitlines():
        if line.strip() == "...":
            parts.append(r"(?:[^\n]*\n)*?")
        else:
            parts.append(r"[^\n]*?".join(re.escape(seg) for seg in line.split("...")) + r"\n")
    return re.compile("".join(parts))


def output_matches(expected: str, actual: str) -> bool:
    text = normalise(actual)
    return output_pattern(expected).fullmatch(text + "\n" if text else "") is not None


@pytest.mark.parametrize(
    ("expected", "actual", "ok"),
    [
        ("a  \nb", "a\nb   \n\n", True),
        ("a\n...\nd", "a\nb\nc\nd", True),
        ("a\n...\nd", "a\nd", True),
        ("took ... s", "took 0.31 s", True),
        ("took ... s", "took 0.31 s\nmore", False),
        ("a\nb", "a\nc", False),
        ("x.y", "xzy", False),  # the expected text is literal, not a regex
        ("", "", True),
    ],
)
def test_output_matching(expected: str, actual: str, ok: bool) -> None:
    assert output_matches(expected, actual) is ok


# ------------------------------------------------------------------------- console blocks
def console_commands(text: str) -> list[tuple[str, str]]:
    """(command, expected output) pairs of a console block."""
    pairs: list[tuple[str, list[str]]] = []
    lines = text.splitlines()
    i = 0
    while i < len(lines):
        line = lines[i]
        if line.startswith("$ ") or line == "$":
            command = line[2:]
            while command.endswith("\\") and i + 1 < len(lines):
                i += 1
                command = command[:-1] + "\n" + lines[i]
            pairs.append((command, []))
        elif pairs:
            pairs[-1][1].append(line)
        elif line.strip():
            raise AssertionError(f"console block text before its first '$ ' command: {line!r}")
        i += 1
    return [(command, "\n".join(out)) for command, out in pairs]


def _scratch(tmp_path_factory: pytest.TempPathFactory, page: Path) -> Path:
    """The page's scratch directory: the repository's top-level entries linked in."""
    key = page.relative_to(ROOT).as_posix()
    if key not in _SCRATCH:
        where = tmp_path_factory.mktemp("doc-example")
        for entry in ROOT.iterdir():
            if entry.name not in (".git",):
                (where / entry.name).symlink_to(entry)
        _SCRATCH[key] = where
    return _SCRATCH[key]


_SCRATCH: dict[str, Path] = {}


def command_env() -> dict[str, str]:
    env = dict(os.environ)
    env["PATH"] = os.pathsep.join([str(Path(sys.executable).parent), env.get("PATH", "")])
    env["COLUMNS"] = "80"  # what the pages show; a command may set its own (COLUMNS=120 …)
    env["MPLBACKEND"] = "Agg"
    for name in ("STABLEARENA_DEBUG", "FORCE_COLOR", "CLICOLOR_FORCE"):
        env.pop(name, None)
    env["NO_COLOR"] = "1"
    return env


def run_console(block: Block, cwd: Path) -> None:
    commands = console_commands(block.text)
    assert commands, f"{block.name}: a console block without a '$ ' command"
    env = command_env()
    for command, expected in commands:
        proc = subprocess.run(
            ["bash", "-c", command],
            cwd=cwd,
            env=env,
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            timeout=COMMAND_TIMEOUT,
        )
        # what a page shows is the command's standard output; an error example (or a command
        # whose page shows its messages) is matched against both streams as a terminal has them
        both = proc.stdout + proc.stderr
        error_example = normalise(expected).startswith("error:")
        if proc.returncode != 0 and not error_example:
            pytest.fail(
                f"{block.name}: `{command}` exited {proc.returncode}:\n{both}",
                pytrace=False,
            )
        if error_example and proc.returncode == 0:
            pytest.fail(f"{block.name}: `{command}` succeeded; the page shows an error")
        if (
            expected.strip()
            and not output_matches(expected, proc.stdout)
            and not output_matches(expected, both)
        ):
            diff = "\n".join(
                difflib.unified_diff(
                    normalise(expected).splitlines(),
                    normalise(both).splitlines(),
                    "printed in the page",
                    "printed by the command",
                    lineterm="",
                )
            )
            pytest.fail(f"{block.name}: `{command}` printed something else:\n{diff}", pytrace=False)


# -------------------------------------------------------------------------- python blocks
_NAMESPACES: dict[Path, tuple[dict, int]] = {}  # page -> (namespace, blocks run so far)


def run_python_text(block: Block, namespace: dict) -> None:
    if re.search(r"^\s*>>> ", block.text, re.MULTILINE):
        parser = doctest.DocTestParser()
        test = parser.get_doctest(block.text, namespace, block.name, str(block.path), block.line)
        flags = doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE
        runner = doctest.DocTestRunner(optionflags=flags)
        report: list[str] = []
        runner.run(test, out=report.append, clear_globs=False)
        namespace.update(test.globs)  # DocTest runs on a copy: later blocks see its names
        if runner.failures:
            pytest.fail(f"{block.name}:\n{''.join(report)}", pytrace=False)
    else:
        # pad with blank lines so that tracebacks give the line numbers of the page
        source = "\n" * block.line + block.text
        exec(compile(source, str(block.path), "exec"), namespace)


def _page_python(block: Block) -> list[Block]:
    return [b for b in ALL_BLOCKS if b.path == block.path and b.language == "python"]


def run_python(block: Block) -> None:
    page_blocks = _page_python(block)
    namespace, done = _NAMESPACES.get(block.path, ({"__name__": "__doc_example__"}, 0))
    if done > block.index:  # run again (e.g. pytest --count): start the page over
        namespace, done = {"__name__": "__doc_example__"}, 0
    for earlier in page_blocks[done : block.index]:
        try:
            run_python_text(earlier, namespace)
        except BaseException as exc:  # noqa: BLE001 - reported as this block's failure
            pytest.fail(
                f"{block.name}: an earlier block of the page failed ({earlier.name}): {exc!r}",
                pytrace=False,
            )
    _NAMESPACES[block.path] = (namespace, block.index)
    run_python_text(block, namespace)
    _NAMESPACES[block.path] = (namespace, block.index + 1)


# ------------------------------------------------------------------------------- the test
@pytest.mark.parametrize("block", [pytest.param(b, id=b.name) for b in ALL_BLOCKS])
def test_doc_example(
    block: Block, tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    cwd = _scratch(tmp_path_factory, block.path)
    if block.language == "console":
        run_console(block, cwd)
    else:
        monkeypatch.chdir(cwd)
        monkeypatch.setenv("MPLBACKEND", "Agg")
        run_python(block)


def test_blocks_are_found() -> None:
    """The collector sees the README's examples (a broken fence parser would pass silently)."""
    readme = [b for b in ALL_BLOCKS if b.path.name == "README.md"]
    assert any(b.language == "console" for b in readme)


def test_readme_is_short_and_self_contained() -> None:
    """The README stays a front page (≤ 250 lines), and no page points outside the repository
    (a ``shared/data`` folder beside the checkout) or to a design document it does not have."""
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    assert len(readme.splitlines()) <= 250
    for path in doc_files():
        text = path.read_text(encoding="utf-8")
        for needle in ("shared/data", "SPEC §"):
            assert needle not in text, f"{path.relative_to(ROOT)} mentions {needle!r}"
