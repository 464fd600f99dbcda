"""The CLI's tables fit 80- and 120-column terminals without cutting a number or a name: every
word of the table as a very wide terminal shows it appears whole, every name and number of the
JSON result appears as shown, and no "…" appears (docs/guides/terminal-output.md)."""

from __future__ import annotations

import json
import re

import pytest
from rich.cells import cell_len

import stablearena.cli as cli_module
from stablearena.cli import _format_cell

BOX = r"[\s│┃━─┏┓┗┛┡┩└┘┳┻╇┴┼]+"
SELECTION = [
    "experiment",
    "selection",
    "--simulate",
    "8",
    "--seeds",
    "2",
    "--init",
    "20",
    "--steps",
    "20,40",
    "--grid",
    "10",
    "--strategies",
    "random,nearest,a-opt,d-opt",
]


class SteadyClock:
    """A clock advancing 0.25 s per reading: the timing columns read the same in every run."""

    def __init__(self) -> None:
        self.now = 0.0

    def perf_counter(self) -> float:
        self.now += 0.25
        return self.now


@pytest.fixture
def at_width(cli, monkeypatch):
    """Run a command with COLUMNS=width as a user's terminal would; its standard output."""
    from stablearena.analysis import comparison

    monkeypatch.setattr(comparison, "time", SteadyClock())

    def run(width: int, *args: str) -> str:
        monkeypatch.setenv("COLUMNS", str(width))
        monkeypatch.setattr(cli_module.console, "_console", None)  # a console of that width
        code, out, err = cli(*args)
        assert code == 0, err
        return out

    return run


def words(text: str) -> set[str]:
    return set(re.split(BOX, text)) - {""}


def shown_names_and_numbers(args: tuple[str, ...], payload: dict) -> list[str]:
    """What the table must show whole, read from the command's JSON output."""
    command = args[0]
    if command == "rank":
        out = []
        for m in payload["models"]:
            out += [m["model"], f"{m['rating']:.1f}", str(m["battles"])]
            out.append(f"{m['ci_low']:.1f}–{m['ci_high']:.1f}")
        return out
    if command == "compare":
        short = {"rao-kupper": "RK", "davidson": "DV"}
        out = []
        for r in payload["configurations"]:
            out += [short.get(r["method"], r["method"]), f"{r['nll']:.7f}"]
            out += [f"{r['aic']:.0f}", f"{r['bic']:.0f}", f"{r['seconds']:.2f}"]
        return out
    if command == "annotators":
        return [
            s
            for a in payload["annotators"]
            for s in (str(a["annotator"]), str(a["records"]), _format_cell(a["ability"]))
        ]
    return [s for name, v in payload["strategies"].items() for s in (name, _format_cell(v["mean"]))]


def check(at_width, args: tuple[str, ...]) -> None:
    payload = json.loads(at_width(1000, *args, "--format", "json"))
    wide = at_width(1000, *args)
    expected = shown_names_and_numbers(args, payload)
    assert expected and words(wide) >= {w for s in expected for w in s.split()}
    for width in (80, 120):
        out = at_width(width, *args)
        assert "…" not in out, out
        assert max(cell_len(line) for line in out.splitlines()) <= width, out
        missing = words(wide) - words(out)
        assert not missing, (width, sorted(missing), out)
        lines = out.splitlines()
        for s in expected:  # a name with spaces is never wrapped: it is on one line
            assert any(s in line for line in lines), (width, s, out)


@pytest.mark.parametrize(
    "args",
    [
        ("rank", "--ci", "fisher"),
        ("compare", "--kendall", "--no-progress"),
        ("annotators",),
        tuple(SELECTION),
    ],
    ids=["rank-ci-fisher", "compare", "annotators", "experiment-selection"],
)
def test_the_built_in_arena_fits_80_and_120_columns(at_width, args):
    check(at_width, args)


@pytest.mark.parametrize("command", [("rank", "--ci", "fisher"), ("annotators",)])
def test_real_data_with_long_names_fits_80_and_120_columns(at_width, llmfao_path, command):
    check(at_width, (command[0], str(llmfao_path), *command[1:]))


def test_a_table_cut_into_parts_says_how_to_see_it_whole(at_width):
    out = at_width(80, "compare", "--no-progress")
    assert "shown in 2 parts to fit 80 columns" in out and "--format csv" in out
    width = int(re.search(r"COLUMNS=(\d+)", out)[1])
    whole = at_width(width, "compare", "--no-progress")
    assert "parts" not in whole
    assert sum(line.startswith(" m-elo ") for line in whole.splitlines()) == 1
    for name in ("AIC", "BIC", "secs"):  # the columns 80 columns used to lose
        assert name in out and name in whole
