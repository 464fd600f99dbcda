"""``stablearena datasets``: the built-in data sets (docs/datasets.md)."""

from typing import Annotated, Any

import typer

from .common import FormatOpt, OutputOpt, app, emit, records_table


def _table(payload: dict[str, Any]) -> Any:
    rows = [
        {
            "name": d["name"],
            "battles": d["battles"],
            "models": d["models"],
            "annotators": "" if d["annotators"] is None else d["annotators"],
            "kB": round(d["bytes"] / 1024) if d["bytes"] else "",
            "licence": d["licence"],
        }
        for d in payload["datasets"]
    ]
    return records_table(rows)


def _footer(payload: dict[str, Any]) -> list[str]:
    width = max(len(d["name"]) for d in payload["datasets"]) + 2
    lines: list[str] = []
    for d in payload["datasets"]:
        lines += [d["name"].ljust(width) + d["description"], " " * width + "source: " + d["source"]]
    return [*lines, "Licences and attribution: ATTRIBUTION.md and LICENSES/ beside the files."]


@app.command("datasets")
def datasets_command(
    path_of: Annotated[
        str | None,
        typer.Option(
            "--path",
            help="Print the path of this data set's bundled file instead of the list.",
            metavar="NAME",
        ),
    ] = None,
    fmt: FormatOpt = "table",
    output: OutputOpt = None,
) -> None:
    """List the built-in data sets: name, size, licence, description and source.

    Every command that reads a battle log takes a name in place of a PATH
    (`stablearena rank llmfao`); in Python, stablearena.data.datasets.load(NAME) and
    stablearena.data.datasets.path(NAME). An existing file of the same name wins."""
    from ..data import datasets

    if path_of is not None:
        typer.echo(str(datasets.path(path_of)))
        return
    payload = {"datasets": datasets.listing()}
    emit(payload, fmt, output, records_key="datasets", table=_table, footer=_footer(payload))
