"""Every CSV the project emits goes through one writer (``stablearena.data.io.csv_text``, issue 44,
item 1): a field holding a CR, an LF, a comma or a quote is quoted, and a formula is neutralised
at the start of a cell and after every line break inside it. Read back by Python's csv module
and by a strict RFC 4180 reader that, as spreadsheets do, ends a row at a bare CR
(docs/guides/live-arena-security.md)."""

from __future__ import annotations

import csv
import io
import json
import re
import uuid

import httpx
import pytest
from arena_process import ServerProcess
from hypothesis import given, settings
from hypothesis import strategies as st

from stablearena.data.io import FORMULA_STARTS, csv_safe, csv_text
from stablearena.judging.endpoints.demo_server import DemoServer

#: The issue's prompt: a bare CR, then a formula that opens a command.
ATTACK = "hello\r=cmd|' /C calc'!A0"


def spreadsheet_rows(text: str) -> list[list[str]]:
    """A strict RFC 4180 reader that ends a row at CR, LF or CRLF outside quotes (a bare CR
    too, as spreadsheets do); a quote inside an unquoted field, text after a closing quote or
    an unclosed quote is an error."""
    rows: list[list[str]] = []
    row: list[str] = []
    field: list[str] = []
    i, n = 0, len(text)
    quoted = closed = False  # inside quotes; the field's closing quote has been read
    started = False  # the current row has a field (an empty line is no row)
    while i < n:
        c = text[i]
        if quoted:
            if c == '"' and text[i + 1 : i + 2] == '"':
                field.append('"')
                i += 1
            elif c == '"':
                quoted, closed = False, True
            else:
                field.append(c)
        elif c == ",":
            row.append("".join(field))
            field, closed, started = [], False, True
        elif c in "\r\n":
            if started or field or closed:
                row.append("".join(field))
                rows.append(row)
            row, field, closed, started = [], [], False, False
            if c == "\r" and text[i + 1 : i + 2] == "\n":
                i += 1
        elif closed:
            raise ValueError(f"text after a closing quote at {i}: {text[i : i + 20]!r}")
        elif c == '"':
            if field:
                raise ValueError(f"a quote inside an unquoted field at {i}: {text[i : i + 20]!r}")
            quoted, started = True, True
        else:
            field.append(c)
            started = True
        i += 1
    if quoted:
        raise ValueError("an unclosed quote at the end")
    if started or field or closed:
        row.append("".join(field))
        rows.append(row)
    return rows


def _formula_after_a_break(cell: str) -> bool:
    """Whether ``cell`` has a formula character at its start or right after a CR or LF."""
    return any(
        cell[p] in "".join(FORMULA_STARTS)
        for p in range(len(cell))
        if p == 0 or cell[p - 1] in "\r\n"
    )


# ---------------------------------------------------------------------------------- property
TRICKY = "ab =+-@\t\r\n,\"'1.;"
cells = st.one_of(
    st.text(alphabet=TRICKY, max_size=12),
    st.text(max_size=6),
    st.integers(-10, 10),
    st.floats(-1e3, 1e3, allow_nan=False),
)


@settings(max_examples=600, deadline=None)
@given(
    header=st.lists(st.text(alphabet=TRICKY, max_size=6), min_size=1, max_size=4), data=st.data()
)
def test_written_rows_read_back_the_same_by_both_readers_with_no_formula(header, data):
    width = len(header)
    rows = data.draw(st.lists(st.lists(cells, min_size=width, max_size=width), max_size=5))
    text = csv_text(header, rows)
    expected = [[str(csv_safe(v)) for v in r] for r in [header, *rows]]
    assert list(csv.reader(io.StringIO(text, newline=""))) == expected
    assert spreadsheet_rows(text) == expected  # a bare CR inside a cell does not split its row
    for original, row in zip([header, *rows], expected, strict=True):
        for v, cell in zip(original, row, strict=True):
            if isinstance(v, str):
                assert not _formula_after_a_break(cell), (v, cell)
                assert cell.replace("'", "") == v.replace("'", "")  # only ' put in
            else:
                assert cell == str(v)  # numbers, negative ones too, stay numbers


def test_the_standard_writer_and_pandas_left_a_bare_cr_unquoted():
    """Why the project has its own writer: both split the issue's row for a spreadsheet."""
    import pandas as pd

    buf = io.StringIO()
    csv.writer(buf, lineterminator="\n").writerow([csv_safe(ATTACK)])
    assert len(spreadsheet_rows(buf.getvalue())) == 2
    assert len(spreadsheet_rows(pd.DataFrame({"p": [ATTACK]}).to_csv(index=False))) == 3
    assert spreadsheet_rows(csv_text(["p"], [[ATTACK]])) == [["p"], [csv_safe(ATTACK)]]


def test_cli_csv_quotes_a_bare_cr(cli, tmp_path):
    from stablearena.cli import _csv_text

    text = _csv_text([{"model": ATTACK, "score": -1.5}])
    assert spreadsheet_rows(text) == [["model", "score"], ["hello\r'=cmd|' /C calc'!A0", "-1.5"]]


# ---------------------------------------------------------------------------------- export
@pytest.fixture(params=["sqlite", "postgresql"])
def db_url(request, tmp_path):
    name = "c" + uuid.uuid4().hex[:12]
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path / (name + '.db')}"
    return request.getfixturevalue("postgres").create_database(name)


def _page_client(client: httpx.Client, url: str) -> dict[str, str]:
    r = client.get("/arena")
    token = re.search(r'name="csrf-token" content="([0-9a-f]+)"', r.text).group(1)
    return {"X-CSRF-Token": token, "Origin": url}


def test_export_quotes_a_visitors_prompt_with_a_bare_cr(db_url, tmp_path):
    """The issue's attack through the arena page: the exported prompt stays one cell of one
    row for a spreadsheet, its formula neutralised, on SQLite and PostgreSQL."""
    with DemoServer(seed=0) as demo:
        config = tmp_path / "arena.toml"
        config.write_text(
            "[arena]\nmin_records = 0\n\n"
            + "".join(
                f'[[models]]\nname = "{n}"\nbase_url = "{demo.base_url}"\nmodel = "{n}"\n\n'
                for n in ("demo-ace", "demo-wild")
            )
        )
        with ServerProcess(db_url, "--config", str(config), cwd=tmp_path) as server:
            with httpx.Client(base_url=server.url, timeout=60) as c:
                h = _page_client(c, server.url)
                r = c.post("/arena/battles", json={"prompt": ATTACK}, headers=h)
                assert r.status_code == 200, r.text
                battle = json.loads(r.text.splitlines()[0])["battle_id"]
                r = c.post(f"/arena/battles/{battle}/vote", json={"outcome": "tie"}, headers=h)
                assert r.status_code == 200, r.text
                admin = {"Authorization": f"Bearer {server.admin_key}"}
                r = c.get("/v1/export", params={"texts": "true", "format": "csv"}, headers=admin)
                assert r.status_code == 200, r.text
    text = r.content.decode()
    sheet = spreadsheet_rows(text)
    assert len(sheet) == 2, sheet  # the header and the one vote: no row split at the CR
    (row,) = csv.DictReader(io.StringIO(text, newline=""))
    assert dict(zip(sheet[0], sheet[1], strict=True)) == row
    assert row["prompt_text"] == "hello\r'=cmd|' /C calc'!A0"
    assert ATTACK not in text
    for cell in sheet[1]:
        assert not _formula_after_a_break(cell), cell
        if cell.startswith("["):  # a conversation: JSON text, its CR escaped as \r
            assert "\r" not in cell and json.loads(cell)[0]["content"] == ATTACK
