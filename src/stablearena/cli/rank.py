"""``stablearena rank``: a leaderboard from a battle log."""

from __future__ import annotations

import sys
from dataclasses import fields, is_dataclass
from typing import Annotated, Any

import typer

from ..errors import InputError
from ..leaderboard import (
    convergence_text,
    interval_caption,
    interval_records,
    leaderboard_payload,
)
from ..raters import get_rater
from ..raters.base import _REGISTRY
from ..uncertainty import CI_METHODS
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
    records_table,
    split_list,
)

#: CLI flag → rater option (dataclass field) name.
RATER_FLAGS: dict[str, str] = {
    "--solver": "solver",
    "--anchor": "anchor",
    "--elo-k": "k",
    "--shuffles": "shuffles",
    "--seed": "seed",
    "--min-records": "min_records",
    "--ability-threshold": "ability_threshold",
    "--exclude-flagged": "exclude_flagged",
    "--k-tie": "k_tie",
    "--k-cov": "k_cov",
    "--tie-form": "tie_form",
    "--confidence": "confidence",
    "--normalization": "normalization",
    "--penalty": "penalty",
    "--reg": "reg",
}


def build_rater(method: str, given: dict[str, Any]) -> Any:
    """The rater for ``method`` with the options the user set (unset ones keep the rater's defaults)."""
    if method not in _REGISTRY:
        raise InputError(
            f"unknown --method {method!r}; choose one of {', '.join(sorted(_REGISTRY))}."
        )
    cls = _REGISTRY[method]
    accepted = {f.name for f in fields(cls)} if is_dataclass(cls) else set()
    options = {}
    for flag, value in given.items():
        if value is None or value is False:
            continue
        name = RATER_FLAGS[flag]
        if name not in accepted:
            raise InputError(f"option {flag} does not apply to --method {method}.")
        options[name] = value
    if "k_cov" in options and isinstance(options["k_cov"], str):
        options["k_cov"] = (
            None if options["k_cov"].lower() == "none" else _int(options["k_cov"], "--k-cov")
        )
    return get_rater(method, **options)


def _int(text: str, flag: str) -> int:
    try:
        return int(text)
    except ValueError:
        raise InputError(f"{flag} must be an integer or 'none', not {text!r}.") from None


@app.command()
def rank(
    path: PathArg = None,
    method: Annotated[
        str,
        typer.Option(
            "--method", "-m", help="Rating method: elo, m-elo, bt, am-elo, rao-kupper, davidson."
        ),
    ] = "m-elo",
    fmt: FormatOpt = "table",
    output: OutputOpt = None,
    both_bad: BothBadOpt = "tie",
    exclude: ExcludeOpt = None,
    min_battles: MinBattlesOpt = 0,
    col: ColOpt = None,
    input_format: InputFormatOpt = None,
    anchor: Annotated[
        str | None,
        typer.Option("--anchor", help="Fix one model's rating: MODEL=RATING (default: mean 1000)."),
    ] = None,
    solver: Annotated[
        str | None,
        typer.Option(
            "--solver",
            help="m-elo/bt/am-elo: 'newton' (exact, default) or 'adam' (paper reproduction).",
        ),
    ] = None,
    elo_k: Annotated[
        float | None, typer.Option("--elo-k", help="elo: K factor (default 4).")
    ] = None,
    shuffles: Annotated[
        int | None,
        typer.Option(
            "--shuffles",
            help="elo: average over this many seeded shuffles (default: order as given).",
        ),
    ] = None,
    seed: Annotated[
        int | None, typer.Option("--seed", help="Random seed (elo shuffles, bootstrap).")
    ] = None,
    min_records: Annotated[
        int | None,
        typer.Option("--min-records", help="am-elo: annotators with fewer records wait (δ)."),
    ] = None,
    ability_threshold: Annotated[
        float | None,
        typer.Option(
            "--ability-threshold",
            help="am-elo: flag annotators below this ability (ε, mean-1 scale).",
        ),
    ] = None,
    exclude_flagged: Annotated[
        bool, typer.Option("--exclude-flagged", help="am-elo: refit without flagged annotators.")
    ] = False,
    k_tie: Annotated[
        int | None,
        typer.Option("--k-tie", help="rao-kupper/davidson: tie factors (0 = one threshold)."),
    ] = None,
    k_cov: Annotated[
        str | None,
        typer.Option(
            "--k-cov", help="rao-kupper/davidson: covariance rank: none, 0 (diagonal) or k."
        ),
    ] = None,
    confidence: Annotated[
        float | None,
        typer.Option(
            "--confidence",
            help="am-elo: flag only annotators whose ability is below the threshold with this confidence (e.g. 0.95).",
        ),
    ] = None,
    normalization: Annotated[
        str | None,
        typer.Option(
            "--normalization",
            help="am-elo: 'mean' (abilities average C, m-ELO's Elo scale; default) or 'sum' (the paper's Σθ = 1).",
        ),
    ] = None,
    tie_form: Annotated[
        str | None,
        typer.Option("--tie-form", help="rao-kupper/davidson: 'nested' (default) or 'leaderbot'."),
    ] = None,
    ci: Annotated[
        str,
        typer.Option(
            "--ci",
            help="Intervals: none, fisher (inverse information), sandwich (robust) or bootstrap.",
        ),
    ] = "none",
    rounds: Annotated[
        int, typer.Option("--rounds", help="Bootstrap rounds (with --ci bootstrap).")
    ] = 1000,
    cluster: Annotated[
        str | None,
        typer.Option(
            "--cluster",
            help="Bootstrap whole annotators or prompts instead of battles: annotator or prompt.",
        ),
    ] = None,
    level: Annotated[
        float, typer.Option("--level", help="Confidence level of the intervals.")
    ] = 0.95,
    style: Annotated[
        bool,
        typer.Option(
            "--style",
            help="Style control (m-elo, bt, am-elo): LMArena's length/headers/lists/bold covariates "
            "from conv_metadata or answer text, or those named by --covariate.",
        ),
    ] = False,
    covariate: Annotated[
        list[str] | None,
        typer.Option(
            "--covariate",
            help="Style covariate (implies --style): A:B per-side numeric columns (normalised "
            "difference (a-b)/(a+b+1)) or a ready difference column. Repeatable.",
        ),
    ] = None,
    text_columns: Annotated[
        str | None,
        typer.Option("--text-columns", help="--style: answer-text columns A:B to count style in."),
    ] = None,
    penalty: Annotated[
        str | None,
        typer.Option(
            "--penalty",
            help="--style: L2 penalty on 'gamma' (default, arena-rank), 'all' (FastChat) or 'none'.",
        ),
    ] = None,
    reg: Annotated[
        float | None,
        typer.Option(
            "--reg", help="--style: penalty strength λ on the summed log-likelihood (0.5)."
        ),
    ] = None,
    where: Annotated[
        list[str] | None,
        typer.Option("--where", help="Keep battles with COLUMN=VALUE (any column; repeatable)."),
    ] = None,
    by: Annotated[
        str | None,
        typer.Option("--by", help="One board per value of this column (JSON: keyed by value)."),
    ] = None,
) -> None:
    """Fit a rating method and print the leaderboard.

    JSON output: {"method", "n_battles", "n_models", "nll" (negative log-likelihood per
    comparison), "models": [{"rank", "model", "rating", "battles", ...}], ...}.
    With --ci, each model also gets "se", "ci_low", "ci_high", "rank_low", "rank_high",
    "displayed_rank" (Chatbot Arena's) and "tier", and the payload a "ci" object.
    """
    if ci not in ("none", *CI_METHODS):
        raise InputError(f"--ci must be none, {', '.join(CI_METHODS)}, not {ci!r}.")
    if cluster is not None and ci != "bootstrap":
        raise InputError("--cluster applies to the bootstrap: add --ci bootstrap.")
    cls = _REGISTRY.get(method)
    if seed is not None and ci != "none" and cls is not None and is_dataclass(cls):
        # --seed also seeds the intervals; pass it to the rater only if the rater takes one
        if "seed" not in {f.name for f in fields(cls)}:
            seed_for_rater = None
        else:
            seed_for_rater = seed
    else:
        seed_for_rater = seed
    given = {
        "--solver": solver,
        "--anchor": anchor,
        "--elo-k": elo_k,
        "--shuffles": shuffles,
        "--seed": seed_for_rater,
        "--min-records": min_records,
        "--ability-threshold": ability_threshold,
        "--exclude-flagged": exclude_flagged,
        "--k-tie": k_tie,
        "--k-cov": k_cov,
        "--tie-form": tie_form,
        "--confidence": confidence,
        "--normalization": normalization,
        "--penalty": penalty,
        "--reg": reg,
    }
    if style or covariate or where or by or text_columns:
        from .boards import rank_boards, style_method

        use_style = style or bool(covariate) or text_columns is not None
        rank_boards(
            build_rater(style_method(method) if use_style else method, given),
            path,
            style=use_style,
            covariates=covariate or [],
            text_columns=text_columns,
            where_items=where or [],
            by=by,
            col=col,
            input_format=input_format,
            both_bad=both_bad,
            exclude=split_list(exclude),
            min_battles=min_battles,
            payload_options={
                "ci": ci,
                "level": level,
                "rounds": rounds,
                "cluster": cluster,
                "seed": seed,
            },
            fmt=fmt,
            output=output,
        )
        return
    rater = build_rater(method, given)
    loaded = load_data(
        path,
        col=col,
        input_format=input_format,
        both_bad=both_bad,
        exclude=exclude,
        min_battles=min_battles,
    )
    fitted = rater.fit(loaded.data)
    payload = leaderboard_payload(
        fitted,
        loaded.data,
        source=loaded.label,
        simulated=loaded.simulated,
        ci=ci,
        level=level,
        rounds=rounds,
        cluster=cluster,
        seed=seed,
        progress=sys.stderr.isatty(),
    )

    def table(p: dict[str, Any]) -> Any:
        title = f"{p['method']} leaderboard — {p['source']}"
        conv = p.get("convergence", {})
        caption = (
            f"{p['n_models']} models, {p['n_battles']:,} battles, NLL/comparison {p['nll']:.7f}"
            + convergence_text(conv)
            + (" — SIMULATED data" if p["simulated"] else "")
            + (f"; {interval_caption(p['ci'])}" if "ci" in p else "")
        )
        records = interval_records(p["models"]) if "ci" in p else p["models"]
        return records_table(records, title=title, caption=caption)

    emit(payload, fmt, output, table=table)
