"""The CLI's leaderboard table draws exactly what Rich's own table draws when the table fits (it
exists to be fast: Rich's table takes about 0.13 s for 200 rows, most of a fast `rank`), and when
it does not fit it wraps at spaces or splits into parts instead of cutting cells with "…"."""

from __future__ import annotations

import os
import re

from hypothesis import given, settings
from hypothesis import strategies as st
from rich.cells import cell_len
from rich.console import Console

from stablearena.cli import RecordsTable, records_table

TEXT = st.text(
    alphabet=st.sampled_from(list("abcxyz -_.:/0123456789") + ["模", "型", "😀", "é", "\n", "\t"]),
    max_size=30,
)
VALUE = st.one_of(st.integers(-(10**9), 10**9), st.floats(-1e6, 1e6), TEXT, st.booleans())


def text_of(renderable: object, width: int) -> str:
    console = Console(record=True, width=width, file=open(os.devnull, "w"))  # noqa: SIM115
    console.print(renderable)
    return console.export_text()


def words(text: str) -> set[str]:
    return set(re.split(r"[\s│┃━─┏┓┗┛┡┩└┘┳┻╇┴┼]+", text))


@settings(max_examples=300, deadline=None)
@given(
    columns=st.lists(st.tuples(TEXT, VALUE), min_size=1, max_size=6, unique_by=lambda c: c[0]),
    n_rows=st.integers(1, 12),
    data=st.data(),
    title=st.one_of(st.none(), TEXT, st.just("a long title that wraps " * 5)),
    caption=st.one_of(st.none(), TEXT, st.just("notes and more notes " * 6)),
    width=st.sampled_from([30, 80, 160]),
)
def test_records_table_draws_as_richs_table_or_fits(columns, n_rows, data, title, caption, width):
    """As Rich's table when that fits; otherwise within the width, no "…", and every word of
    every cell whole unless it is wider than its column (the terminal) and must be folded."""
    first = dict(columns)
    records = [first] + [{k: data.draw(VALUE) for k in first} for _ in range(n_rows - 1)]
    table = records_table(records, title or None, caption or None)
    assert isinstance(table, RecordsTable)
    out = text_of(table, width)
    rich = table.rich_table()
    if Console(width=10_000, file=open(os.devnull, "w")).measure(rich).maximum <= width:  # noqa: SIM115
        assert out == text_of(rich, width)
        return
    assert "…" not in out
    assert all(cell_len(line) <= width for line in out.splitlines())
    _, parts = table.layout(width)
    assert sorted({j for columns, _ in parts for j in columns}) == list(range(len(table.headers)))
    shown = words(out)
    for columns, widths in parts:
        for j, w in zip(columns, widths, strict=True):
            header = table.headers[j]
            pieces = [p for word in header.split() for p in re.findall(r"[^_]*_+|[^_]+", word)]
            if header.isprintable():  # headers may also wrap after an underscore
                for p in pieces:  # never broken inside a piece (pieces may share a line)
                    assert cell_len(p) > w or any(p in word for word in shown), (header, w)
            for cells in table.rows:
                for line in cells[j].splitlines():
                    for i, word in enumerate(line.split()):
                        # Rich keeps a line's leading spaces with its first word
                        lead = len(line) - len(line.lstrip()) if i == 0 else 0
                        if "\t" not in cells[j] and lead + cell_len(word) <= w:
                            assert word in shown, (word, j, w)


def test_a_table_too_wide_for_the_terminal_is_split_with_its_key_columns_repeated():
    records = [
        {"rank": i + 1, "model": f"model-{i}", **{f"metric {k}": 1000.5 + k for k in range(12)}}
        for i in range(3)
    ]
    table = records_table(records, "title", "caption")
    assert table.keys == 2  # rank and model
    out = text_of(table, 80)
    compact, parts = table.layout(80)
    assert compact and len(parts) == 2
    assert all(columns[:2] == [0, 1] for columns, _ in parts)
    assert out.count("model-2") == 2 and "1011.5" in out
    assert f"COLUMNS={table.one_table_width()}" in out and "--format csv" in out
    assert "…" not in out and max(cell_len(line) for line in out.splitlines()) <= 80
    assert len(table.layout(table.one_table_width())[1]) == 1


def test_a_200_model_leaderboard_is_drawn_without_richs_table():
    records = [{"rank": i + 1, "model": f"model_{i:03d}", "rating": 1000.0 + i} for i in range(200)]
    table = records_table(records, "m-elo leaderboard — x.csv", "200 models")
    assert table._plain(160) is not None  # the fast path applies
    out = text_of(table, 160)
    assert out.count("\n") == 200 + 4 + 2 and "model_199" in out
    assert out == text_of(table.rich_table(), 160)
