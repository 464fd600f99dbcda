"""``stablearena compare``: fit many tie / covariance configurations and compare their fit."""

from typing import Annotated, Any

import typer

from .. import choices
from ..errors import InputError
from .common import (
    DATA_OPTIONS,
    FormatOpt,
    OutputOpt,
    PathArg,
    RecordsTable,
    app,
    choice_option,
    emit,
    load_data,
    notes_footer,
    seed_option,
    split_list,
    with_options,
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


def _table(payload: dict[str, Any]) -> RecordsTable:
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
    return RecordsTable(
        [name for name, _ in cols],
        [justify == "right" for _, justify in cols],
        body,
        title,
        caption,
        keys=3,  # model, k_tie, k_cov name a configuration
        compact=True,
    )


@app.command()
@with_options(DATA_OPTIONS)
def compare(
    path: PathArg = None,
    methods: Annotated[
        str,
        typer.Option(
            "--methods",
            help="Comma-separated methods.",
            metavar="[" + ",".join(choices.COMPARE_METHODS) + "]",
        ),
    ] = "m-elo,rao-kupper,davidson",
    k_tie: Annotated[
        str,
        typer.Option(
            "--k-tie",
            help="Comma-separated tie factor ranks (0 = one threshold).",
            metavar="K1,K2,…",
        ),
    ] = "0",
    k_cov: Annotated[
        str,
        typer.Option(
            "--k-cov",
            help="Comma-separated covariance ranks: none, 0 (diagonal) or k (diagonal + rank k).",
            metavar="[none|0|K],…",
        ),
    ] = "none",
    tie_form: Annotated[
        str | None,
        choice_option(
            "--tie-form",
            choices.TIE_FORMS,
            "Factored ties: 'nested' (shared η_0, larger k_tie nests smaller) or 'leaderbot' "
            "(leaderbot's parametrisation). Default: leaderbot with --table-d1 (as in its paper), "
            "nested otherwise.",
        ),
    ] = None,
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
            "--test-ratio",
            help="Hold out this fraction for test-set metrics (e.g. 0.1).",
            metavar="FRACTION",
        ),
    ] = None,
    split: Annotated[
        str,
        choice_option(
            "--split",
            choices.SPLITS,
            "Held-out split: 'battle' (each comparison) or 'pair' (whole pairs).",
        ),
    ] = "battle",
    seed: Annotated[
        int,
        seed_option("Seed of the held-out split."),
    ] = 0,
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
    **options: Any,
) -> None:
    """Fit every configuration (methods × k_tie × k_cov) and print one comparison table:
    parameters, NLL, cross-entropy per outcome, RMSE, KL/JS divergence, AIC, BIC and fit time
    (plus test-set metrics with --test-ratio)."""
    from ..analysis.comparison import compare_models, configurations, table_d1_configurations
    from ..data.battles import as_counts

    if tie_form is None:
        tie_form = "leaderbot" if table_d1 else "nested"
    if table_d1:
        configs = table_d1_configurations(tie_form)
    else:
        names = split_list([methods])
        unknown = [m for m in names if m not in choices.COMPARE_METHODS]
        if unknown:
            raise InputError(
                f"unknown method(s) {unknown}; choose from {', '.join(choices.COMPARE_METHODS)}."
            )
        configs = configurations(
            names,
            [k for k in _ints(split_list([k_tie]), "--k-tie", allow_none=False) if k is not None],
            _ints(split_list([k_cov]), "--k-cov", allow_none=True),
            tie_form,
        )
    loaded = load_data(
        path,
        **options,
        counts_only=True,
    )
    result = compare_models(
        loaded.data, configs, test_ratio=test_ratio, split=split, seed=seed, progress=progress
    )
    payload: dict[str, Any] = {
        "data": loaded.label,
        "simulated": loaded.simulated,
        "n_comparisons": int(round(as_counts(loaded.data).n_comparisons)),
        "tie_form": tie_form,
        **result.to_dict(),
    }
    if loaded.dropped:
        payload["dropped_models"] = [{"model": k, "reason": v} for k, v in loaded.dropped.items()]
    if kendall:
        tau = result.kendall()
        payload["kendall_tau"] = {
            str(a): {str(b): float(tau.loc[a, b]) for b in tau.columns} for a in tau.index
        }
        if fmt == "csv":  # one column per configuration: τ of this row's ranking against it
            labels = list(payload["kendall_tau"])
            for label, row in zip(labels, payload["configurations"], strict=True):
                for other in labels:
                    row[f"tau[{other}]"] = payload["kendall_tau"][label][other]

    def table(p: dict[str, Any]) -> Any:
        main = _table(p)
        if "kendall_tau" not in p:
            return main
        from rich.console import Group

        return Group(main, _tau_table(p["kendall_tau"]))

    notes = [f"{r['model']}: {n}" for r in payload["configurations"] for n in r.get("notes", [])]
    emit(
        payload,
        fmt,
        output,
        records_key="configurations",
        table=table,
        footer=notes_footer(notes, loaded.dropped),
    )


def _tau_table(tau: dict[str, dict[str, float]]) -> RecordsTable:
    """Kendall's τ between the configurations' rankings, one row and column per configuration."""
    labels = list(tau)
    return RecordsTable(
        ["configuration", *(str(k + 1) for k in range(len(labels)))],
        [False] + [True] * len(labels),
        [[f"{k + 1} {a}", *(f"{tau[a][b]:.3f}" for b in labels)] for k, a in enumerate(labels)],
        "Kendall's τ between the rankings of the configurations",
        None,
        compact=True,
    )
