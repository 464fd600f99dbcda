"""``stablearena compare``: fit many tie / covariance configurations and compare their fit."""

from __future__ import annotations

from typing import Annotated, Any

import typer
from rich import box
from rich.table import Table

from ..battles import as_counts
from ..comparison import COMPARE_METHODS, compare_models, configurations, table_d1_configurations
from ..errors import InputError
from . import (
    BothBadOpt,
    ColOpt,
    ExcludeOpt,
    FormatOpt,
    InputFormatOpt,
    MinBattlesOpt,
    OutputOpt,
    PathArg,
    app,
    emit,
    load_data,
    split_list,
)


def _ints(values: list[str], flag: str, *, allow_none: bool) -> list[int | None]:
    out: list[int | None] = []
    for v in values:
        if allow_none and v.lower() == "none":
            out.append(None)
            continue
        try:
            k = int(v)
        except ValueError:
            raise InputError(
                f"{flag} takes comma-separated integers{' or none' if allow_none else ''}, not {v!r}."
            ) from None
        if k < 0:
            raise InputError(f"{flag} values must be non-negative, got {k}.")
        out.append(k)
    if not out:
        raise InputError(f"{flag} needs at least one value.")
    return out


def _fmt(v: Any, digits: int) -> str:
    if v is None:
        return "—"
    if isinstance(v, bool):
        return "yes" if v else "NO"
    if isinstance(v, int):
        return str(v)
    return f"{v:.{digits}f}"


#: Short method codes in the table (leaderbot's Table D.1 uses BT, RK, DV).
_SHORT = {"rao-kupper": "RK", "davidson": "DV"}


def _table(payload: dict[str, Any]) -> Table:
    rows = payload["configurations"]
    test = bool(payload.get("test_ratio"))
    title = f"Model comparison on {payload['data']} ({payload['n_comparisons']:,} comparisons)"
    caption = (
        "NLL and CE per comparison (nats); RMSE of predicted vs observed counts weighted by n_ij/n; "
        "KLD, JSD ×100 (nats, mean over pairs); AIC/BIC with the total log-likelihood and k free "
        "parameters. Bradley–Terry rows are scored on their own outcomes (m-elo: ties as half; "
        "bt: ties dropped) and are not comparable in NLL with tie models. RK = Rao–Kupper, "
        "DV = Davidson."
    )
    table = Table(
        title=title,
        caption=caption,
        header_style="bold",
        box=box.SIMPLE_HEAD,
        pad_edge=False,
        collapse_padding=True,
    )
    cols = [
        ("model", "left"),
        ("k_tie", "right"),
        ("k_cov", "right"),
        ("params", "right"),
        ("NLL", "right"),
        ("CE win", "right"),
        ("CE loss", "right"),
        ("CE tie", "right"),
        ("RMSE", "right"),
        ("KLD", "right"),
        ("JSD", "right"),
        ("AIC", "right"),
        ("BIC", "right"),
        ("secs", "right"),
    ]
    if test:
        cols += [
            ("test NLL", "right"),
            ("test RMSE", "right"),
            ("test KLD", "right"),
            ("test JSD", "right"),
        ]
    cols.append(("conv", "left"))
    body = []
    for r in rows:
        cells = [
            _SHORT.get(r["method"], r["method"]),
            "—" if r["k_tie"] is None else str(r["k_tie"]),
            "none" if r["k_cov"] is None else str(r["k_cov"]),
            _fmt(r["n_params"], 0),
            _fmt(r["nll"], 7),
            _fmt(r["ce_win"], 4),
            _fmt(r["ce_loss"], 4),
            _fmt(r["ce_tie"], 4),
            _fmt(r["rmse"], 1),
            _fmt(None if r["kld"] is None else 100 * r["kld"], 2),
            _fmt(None if r["jsd"] is None else 100 * r["jsd"], 2),
            _fmt(r["aic"], 0),
            _fmt(r["bic"], 0),
            _fmt(r["seconds"], 2),
        ]
        if test:
            cells += [
                _fmt(r["test_nll"], 5),
                _fmt(r["test_rmse"], 1),
                _fmt(100 * r["test_kld"], 2),
                _fmt(100 * r["test_jsd"], 2),
            ]
        cells.append(_fmt(r["converged"], 0))
        body.append(cells)
    for k, (name, justify) in enumerate(cols):  # numbers are never cut; headers wrap instead
        widest = max((len(row[k]) for row in body), default=1)
        table.add_column(name, justify=justify, min_width=widest, no_wrap=False)
    for cells in body:
        table.add_row(*cells)
    return table


@app.command()
def compare(
    path: PathArg = None,
    methods: Annotated[
        str,
        typer.Option("--methods", help=f"Comma-separated methods: {', '.join(COMPARE_METHODS)}."),
    ] = "m-elo,rao-kupper,davidson",
    k_tie: Annotated[
        str, typer.Option("--k-tie", help="Comma-separated tie factor ranks (0 = one threshold).")
    ] = "0",
    k_cov: Annotated[
        str,
        typer.Option(
            "--k-cov",
            help="Comma-separated covariance ranks: none, 0 (diagonal) or k (diagonal + rank k).",
        ),
    ] = "none",
    tie_form: Annotated[
        str,
        typer.Option(
            "--tie-form",
            help="Factored ties: 'nested' (shared η_0, larger k_tie nests smaller) or 'leaderbot'.",
        ),
    ] = "nested",
    table_d1: Annotated[
        bool,
        typer.Option(
            "--table-d1",
            help="Fit the 30 configurations of leaderbot's Table D.1 (overrides --methods/--k-tie/--k-cov).",
        ),
    ] = False,
    test_ratio: Annotated[
        float | None,
        typer.Option(
            "--test-ratio", help="Hold out this fraction for test-set metrics (e.g. 0.1)."
        ),
    ] = None,
    split: Annotated[
        str,
        typer.Option(
            "--split", help="Held-out split: 'battle' (each comparison) or 'pair' (whole pairs)."
        ),
    ] = "battle",
    seed: Annotated[int, typer.Option("--seed", help="Seed of the held-out split.")] = 0,
    kendall: Annotated[
        bool,
        typer.Option(
            "--kendall", help="Add Kendall's τ between the rankings of all configurations."
        ),
    ] = False,
    progress: Annotated[
        bool, typer.Option("--progress/--no-progress", help="Show a progress bar on stderr.")
    ] = True,
    fmt: FormatOpt = "table",
    output: OutputOpt = None,
    both_bad: BothBadOpt = "tie",
    exclude: ExcludeOpt = None,
    min_battles: MinBattlesOpt = 0,
    col: ColOpt = None,
    input_format: InputFormatOpt = None,
) -> None:
    """Fit every configuration (methods × k_tie × k_cov) and print one comparison table:
    parameters, NLL, cross-entropy per outcome, RMSE, KL/JS divergence, AIC, BIC and fit time
    (plus test-set metrics with --test-ratio)."""
    if table_d1:
        configs = table_d1_configurations(tie_form)
    else:
        names = split_list([methods])
        unknown = [m for m in names if m not in COMPARE_METHODS]
        if unknown:
            raise InputError(
                f"unknown method(s) {unknown}; choose from {', '.join(COMPARE_METHODS)}."
            )
        configs = configurations(
            names,
            [k for k in _ints(split_list([k_tie]), "--k-tie", allow_none=False) if k is not None],
            _ints(split_list([k_cov]), "--k-cov", allow_none=True),
            tie_form,
        )
    loaded = load_data(
        path,
        col=col,
        input_format=input_format,
        both_bad=both_bad,
        exclude=exclude,
        min_battles=min_battles,
    )
    result = compare_models(
        loaded.data, configs, test_ratio=test_ratio, split=split, seed=seed, progress=progress
    )
    payload: dict[str, Any] = {
        "data": loaded.label,
        "simulated": loaded.simulated,
        "n_comparisons": int(round(as_counts(loaded.data).n_comparisons)),
        **result.to_dict(),
    }
    if kendall:
        tau = result.kendall()
        payload["kendall_tau"] = {
            str(a): {str(b): float(tau.loc[a, b]) for b in tau.columns} for a in tau.index
        }
    emit(payload, fmt, output, records_key="configurations", table=_table)
