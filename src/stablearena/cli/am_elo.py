"""am-ELO commands: ``stablearena annotators`` and the am-ELO paper's experiment protocols
(``stablearena experiment perturbation | prediction | restarts``)."""

import math
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from .. import choices
from ..errors import InputError
from .common import (
    DATA_OPTIONS,
    BothBadOpt,
    ColOpt,
    FormatOpt,
    InputFormatOpt,
    OptionBlock,
    OutputOpt,
    PathArg,
    app,
    choice_option,
    count_option,
    emit,
    experiment_app,
    finite,
    fit_progress,
    load_data,
    non_negative,
    notes_footer,
    positive,
    probability,
    records_table,
    seed_check,
    seed_option,
    split_list,
    with_options,
)

if TYPE_CHECKING:  # pragma: no cover
    from ..data.battles import Battles

MinRecordsOpt = Annotated[
    int,
    typer.Option(
        "--min-records",
        help="Annotators with fewer records are left out (δ).",
        metavar="N",
        callback=non_negative,
    ),
]
SimulateOpt = Annotated[
    bool,
    typer.Option(
        "--simulate",
        help="Use a simulated arena of honest annotators (see --models/--annotators/--battles).",
    ),
]
SimModelsOpt = Annotated[
    int,
    count_option("--models", "--simulate: number of models.", 2, 100_000),
]
SimAnnOpt = Annotated[
    int,
    count_option("--annotators", "--simulate: number of annotators.", 2, 1_000_000),
]
SimBattlesOpt = Annotated[
    int,
    count_option("--battles", "--simulate: number of battles.", 1, 1_000_000_000),
]
SimSeedOpt = Annotated[
    int,
    typer.Option("--sim-seed", help="--simulate: arena seed.", metavar="SEED", callback=seed_check),
]
SeedOpt = Annotated[
    int,
    seed_option("Random seed of the protocol."),
]
#: The simulated arena of ``experiment perturbation | prediction | restarts`` (after PATH).
SIMULATION_OPTIONS: OptionBlock = (
    ("simulate", SimulateOpt, False),
    ("models", SimModelsOpt, 20),
    ("n_annotators", SimAnnOpt, 100),
    ("battles", SimBattlesOpt, 20_000),
    ("sim_seed", SimSeedOpt, 0),
)
#: How those experiments read a battle log (their last options).
EXPERIMENT_DATA_OPTIONS: OptionBlock = (
    ("col", ColOpt, None),
    ("input_format", InputFormatOpt, None),
    ("both_bad", BothBadOpt, "tie"),
)
EloShufflesOpt = Annotated[
    int,
    count_option(
        "--elo-shuffles", "Online Elo is averaged over this many shuffles.", 1, 1_000_000, "S"
    ),
]


def _floats(text: str, flag: str) -> tuple[float, ...]:
    try:
        values = tuple(float(v) for v in split_list([text]))
    except ValueError:
        raise InputError(f"{flag} must be comma-separated numbers, not {text!r}.") from None
    bad = [v for v in values if not math.isfinite(v)]
    if bad:
        raise InputError(f"{flag} must be finite numbers, not {bad[0]}.")
    return values


def _experiment_data(
    path: Path | None,
    *,
    simulate: bool,
    models: int,
    n_annotators: int,
    battles: int,
    sim_seed: int,
    col: list[str] | None,
    input_format: str | None,
    both_bad: str,
) -> "tuple[Battles, str, bool]":
    from ..data.battles import Battles

    if simulate:
        from ..simulation.experiments.perturbation import simulated_perturbation_arena

        if path is not None:
            raise InputError("give either a PATH or --simulate, not both.")
        if models < 2 or n_annotators < 2 or battles < 1:
            raise InputError("--simulate needs --models ≥ 2, --annotators ≥ 2 and --battles ≥ 1.")
        data = simulated_perturbation_arena(models, n_annotators, battles, seed=sim_seed)
        label = f"simulated arena: {models} models, {n_annotators} honest annotators, {battles:,} battles (seed {sim_seed})"
        return data, label, True
    loaded = load_data(path, col=col, input_format=input_format, both_bad=both_bad)
    if not isinstance(loaded.data, Battles):
        raise InputError(
            f"{loaded.label}: these experiments need individual battles with annotator ids, not pair counts."
        )
    return loaded.data, loaded.label, loaded.simulated


# ---------------------------------------------------------------------------- annotators
def _bound_option(flag: str, metavar: str, text: str) -> Any:
    """A non-negative number of the bounded-influence rule (docs/guides/annotators.md)."""
    return typer.Option(
        flag, help=f"Bounded influence: {text}.", metavar=metavar, callback=non_negative
    )


@app.command()
@with_options(DATA_OPTIONS)
def annotators(
    path: PathArg = None,
    fmt: FormatOpt = "table",
    output: OutputOpt = None,
    *,
    min_records: Annotated[
        int,
        typer.Option(
            "--min-records",
            help="Annotators with fewer records wait (δ).",
            metavar="N",
            callback=non_negative,
        ),
    ] = 0,
    ability_threshold: Annotated[
        float,
        typer.Option(
            "--ability-threshold",
            help="Flag annotators below this ability (ε, mean-1 scale).",
            metavar="EPS",
            callback=finite,
        ),
    ] = 0.0,
    exclude_flagged: Annotated[
        bool, typer.Option("--exclude-flagged", help="Refit without the flagged annotators.")
    ] = False,
    confidence: Annotated[
        float | None,
        typer.Option(
            "--confidence",
            help="Flag only when the one-sided upper bound at this level is below ε (e.g. 0.95).",
            metavar="LEVEL",
            callback=probability,
        ),
    ] = None,
    normalization: Annotated[
        str,
        choice_option(
            "--normalization",
            choices.NORMALIZATIONS,
            "'mean' (mean θ = C, Elo scale) or 'sum' (paper, Σθ = 1).",
        ),
    ] = "mean",
    cap: Annotated[
        float, _bound_option("--cap", "A", "no account weighs more than this ability (0: no cap)")
    ] = choices.TRUST_CAP,
    ramp_votes: Annotated[
        float,
        _bound_option(
            "--ramp-votes", "N", "an account's weight grows until this many votes (0: none)"
        ),
    ] = choices.TRUST_RAMP_VOTES,
    **options: Any,
) -> None:
    """Fit am-ELO and list the annotators: flagged ones first, then the others worst
    (lowest ability) first, then those waiting for more records (fewer than δ).

    Ability is relative to the average fitted annotator (1.0); below 0 votes against the
    consensus. Weight: the account's weight under bounded influence, min(max(ability, 0),
    --cap) · min(1, votes / --ramp-votes) (the live arena's age ramp, arena.trust_ramp_days, is
    off here: pair counts carry no account ages); influence: the most a model's rating moves
    (Elo points) when the account's votes are removed. JSON: {"method", "n_battles",
    "n_annotators", "annotators": [{"annotator", "records", "ability", "ability_se", "flagged",
    "reason", "status", "weight", "influence", "influence_model", "influence_z",
    "influence_flag", "trust"}], "trust": {...}, ...}.
    """
    from ..raters.annotator import AmElo

    rater = AmElo(
        min_records=min_records,
        ability_threshold=ability_threshold,
        exclude_flagged=exclude_flagged,
        confidence=confidence,
        normalization=normalization,
    )
    loaded = load_data(
        path,
        **options,
        counts_only=True,
        by_annotator=True,
    )
    from ..analysis.leaderboard import ANNOTATOR_GROUPS as group
    from ..analysis.leaderboard import annotators_payload

    with fit_progress(f"fitting am-elo on {loaded.label}"):
        fitted = rater.fit(loaded.data)
    payload = annotators_payload(
        fitted,
        source=loaded.label,
        simulated=loaded.simulated,
        ability_threshold=ability_threshold,
        normalization=normalization,
        trust={"cap": cap, "ramp_votes": ramp_votes},
    )
    if loaded.dropped:
        payload["dropped_models"] = [{"model": k, "reason": v} for k, v in loaded.dropped.items()]

    def table(p: dict[str, Any]) -> Any:
        from rich.console import Group

        def rows(which: int) -> list[dict[str, Any]]:
            shown = ("annotator", "records", "ability", "status", "weight")
            return [
                {k: r[k] for k in shown}
                | {"influence": round(r["influence"], 1), "reason": _reason(r)}
                for r in p["annotators"]
                if group.get(r["status"], 1) == which
            ]

        t = p["trust"]
        caption = (
            f"{p['n_annotators']} annotators, {p['n_flagged']} flagged (ability < {p['ability_threshold']:g}), "
            f"{p['n_waiting']} waiting (fewer than {p['min_records']} records), "
            f"{p['n_battles']:,} battles in the fit"
            + (" — SIMULATED data" if p["simulated"] else "")
            + f". Bounded influence: {t['n_capped']} capped at {t['ability_cap'] or 'no cap':g}, "
            f"{t['n_ramped']} ramped (weight grows until {t['ramp_votes'] or 0:g} votes), "
            f"{t['n_influence_flagged']} influence outliers; influence: Elo points the account "
            "moves a model."
        )
        parts = []
        titles = (
            f"FLAGGED annotators (ability < {p['ability_threshold']:g}) — {p['source']}",
            f"annotators in the fit, worst first — {p['source']}",
            f"waiting: fewer than {p['min_records']} records, not in the fit — {p['source']}",
        )
        for which, title in enumerate(titles):
            part = rows(which)
            if part:
                parts.append(records_table(part, title=title))
        if not parts:
            parts.append(records_table([], title=titles[1]))
        from rich.text import Text

        parts.append(Text(caption))
        return Group(*parts)

    emit(
        payload,
        fmt,
        output,
        records_key="annotators",
        table=table,
        footer=notes_footer(payload["notes"], loaded.dropped),
    )


def _reason(r: dict[str, Any]) -> str:
    """The table's reason: the screening's, then the bounded-influence rule's when it says
    more than "full weight" (and is not the screening's decision again)."""
    if r["trust"] == "full weight" or r["weight"] == 0 and r["status"] != "included":
        return r["reason"]
    return f"{r['reason']}; {r['trust']}"


# ---------------------------------------------------------------------------- experiments
@experiment_app.command("perturbation")
@with_options(SIMULATION_OPTIONS, last=EXPERIMENT_DATA_OPTIONS)
def experiment_perturbation(
    path: PathArg = None,
    *,
    kind: Annotated[
        str,
        typer.Option(
            "--kind",
            help="Perturbation(s), comma-separated.",
            metavar="[" + ",".join(choices.PERTURBATIONS) + "]",
        ),
    ] = "random,equal,flip,mixed",
    ratios: Annotated[
        str,
        typer.Option(
            "--ratios",
            help="Fractions of perturbed annotators, comma-separated.",
            metavar="R1,R2,…",
        ),
    ] = "0.1,0.2,0.3,0.4",
    seeds: Annotated[
        int,
        count_option("--seeds", "Repetitions per kind and ratio.", 1, 100_000),
    ] = 5,
    methods: Annotated[
        str,
        typer.Option(
            "--methods", help="Methods compared (must include am-elo).", metavar="M1,M2,…"
        ),
    ] = "elo,m-elo,am-elo",
    thresholds: Annotated[
        str | None,
        typer.Option(
            "--thresholds",
            help="ε values for flagging (mean-1 scale); default 0 and the paper's 0.005·M.",
            metavar="E1,E2,…",
        ),
    ] = None,
    min_records: MinRecordsOpt = 50,
    elo_shuffles: EloShufflesOpt = 1000,
    screen: Annotated[
        bool,
        typer.Option(
            "--screen/--no-screen",
            help="Start from the log the Stable Arena keeps: annotators with ability < 0 "
            "before any perturbation are screened out (refitted until none is left).",
        ),
    ] = True,
    seed: SeedOpt = 0,
    fmt: FormatOpt = "table",
    output: OutputOpt = None,
    **options: Any,
) -> None:
    """am-ELO §5.5: consistency under perturbed annotators, and F1 of finding them.

    By default the protocol starts from the log the Stable Arena screening keeps (annotators
    already anomalous before any perturbation are screened out and listed), so that "perturbed"
    is the true set of anomalous annotators; --no-screen runs it on the unscreened log."""
    from ..simulation.experiments.perturbation import PerturbationConfig, run_perturbation

    data, label, simulated = _experiment_data(path, **options)
    config = PerturbationConfig(
        kinds=tuple(split_list([kind])),
        ratios=_floats(ratios, "--ratios"),
        seeds=seeds,
        methods=tuple(split_list([methods])),
        thresholds=None if thresholds is None else _floats(thresholds, "--thresholds"),
        min_records=min_records,
        elo_shuffles=elo_shuffles,
        seed=seed,
        screen=screen,
    )
    result = run_perturbation(data, config, source=label)
    payload = result.to_dict() | {"simulated": simulated}

    def table(p: dict[str, Any]) -> Any:
        eps = [f"{e:.4g}" for e in p["thresholds"]]
        keep = ["kind", "ratio"] + [f"consistency_{m}" for m in p["config"]["methods"]]
        keep += (
            ["inconsistency_am_over_m"]
            + [f"f1@{e}" for e in eps]
            + [f"f1_unflagged@{e}" for e in eps]
        )
        failed = [f"failed_{m}" for m in p["config"]["methods"]]
        keep += [f for f in failed if any(r.get(f) for r in p["summary"])]
        rows = [{k: r.get(k) for k in keep if k in r} for r in p["summary"]]
        for r in rows:
            for k, v in r.items():
                if v is None:
                    r[k] = "—" if k != "inconsistency_am_over_m" else ""
        out = [d["annotator"] for d in p["screened_out"] if d["status"] == "excluded"]
        screened = (
            f"screened out before perturbing (ability < 0): {', '.join(out) or 'none'}; "
            if p["config"]["screen"]
            else "unscreened; "
        )
        caption = _caption(
            p,
            screened
            + f"{p['config']['seeds']} seeds; F1 of ability < ε vs perturbed; f1_unflagged leaves out "
            f"annotators already below ε unperturbed ({', '.join(p['baseline_flagged'][eps[0]]) or 'none'} at ε={eps[0]})"
            + "".join(
                f"; {m}: no maximum-likelihood solution in {n} run(s), left out of its means"
                for m in p["config"]["methods"]
                if (n := sum(r.get(f"failed_{m}", 0) for r in p["summary"]))
            ),
        )
        return records_table(rows, title=f"perturbation — {p['source']}", caption=caption)

    emit(payload, fmt, output, records_key="summary", table=table)


@experiment_app.command("prediction")
@with_options(SIMULATION_OPTIONS, last=EXPERIMENT_DATA_OPTIONS)
def experiment_prediction(
    path: PathArg = None,
    *,
    folds: Annotated[
        int,
        count_option("--folds", "Folds of the held-out estimate.", 2, 1000, "K"),
    ] = 5,
    methods: Annotated[
        str, typer.Option("--methods", help="Methods compared.", metavar="M1,M2,…")
    ] = "elo,m-elo,am-elo",
    min_records: MinRecordsOpt = 50,
    elo_shuffles: EloShufflesOpt = 1000,
    seed: SeedOpt = 0,
    fmt: FormatOpt = "table",
    output: OutputOpt = None,
    **options: Any,
) -> None:
    """am-ELO Table 2: MSE and AUC of predicted outcomes, in-sample and held-out."""
    from ..simulation.experiments.prediction import PredictionConfig, run_prediction

    data, label, simulated = _experiment_data(path, **options)
    config = PredictionConfig(
        methods=tuple(split_list([methods])),
        folds=folds,
        min_records=min_records,
        elo_shuffles=elo_shuffles,
        seed=seed,
    )
    _emit_experiment(
        run_prediction(data, config, source=label).to_dict() | {"simulated": simulated},
        fmt,
        output,
        key="table",
        title="prediction (am-ELO Table 2)",
        detail=f"held-out = {config.folds}-fold mean (std)",
    )


def _caption(p: dict[str, Any], detail: str) -> str:
    """An experiment table's caption: the data's size, ``detail``, whether simulated."""
    return (
        f"{p['n_models']} models, {p['n_annotators']} annotators, {p['n_battles']:,} battles; "
        + detail
        + (" — SIMULATED data" if p["simulated"] else "")
    )


def _emit_experiment(
    payload: dict[str, Any], fmt: str, output: Any, *, key: str, title: str, detail: str
) -> None:
    """Emit an experiment result; the table shows ``payload[key]`` under a caption giving the
    data's size, ``detail`` and whether the data were simulated."""

    def table(p: dict[str, Any]) -> Any:
        caption = _caption(p, detail)
        return records_table(p[key], title=f"{title} — {p['source']}", caption=caption)

    emit(payload, fmt, output, records_key=key, table=table)


@experiment_app.command("restarts")
@with_options(SIMULATION_OPTIONS, last=EXPERIMENT_DATA_OPTIONS)
def experiment_restarts(
    path: PathArg = None,
    *,
    restarts: Annotated[
        int,
        count_option("--restarts", "Random restarts per method.", 2, 100_000),
    ] = 5,
    steps: Annotated[
        int,
        count_option("--steps", "Adam steps (epochs).", 1, 100_000_000),
    ] = 2000,
    lr: Annotated[
        float, typer.Option("--lr", help="Adam learning rate.", metavar="LR", callback=positive)
    ] = 0.1,
    record_every: Annotated[
        int,
        count_option(
            "--record-every", "Record loss and consistency every N epochs.", 1, 100_000_000
        ),
    ] = 20,
    min_records: MinRecordsOpt = 50,
    seed: SeedOpt = 0,
    fmt: FormatOpt = "table",
    output: OutputOpt = None,
    **options: Any,
) -> None:
    """am-ELO Figure 5: loss and consistency of random restarts, with and without normalisation.

    JSON adds "epochs" and "curves" {method: {"loss": [...], "consistency": [...]}}.
    """
    from ..simulation.experiments.restarts import RestartsConfig, run_restarts

    data, label, simulated = _experiment_data(path, **options)
    config = RestartsConfig(
        restarts=restarts,
        steps=steps,
        lr=lr,
        record_every=record_every,
        min_records=min_records,
        seed=seed,
    )
    _emit_experiment(
        run_restarts(data, config, source=label).to_dict() | {"simulated": simulated},
        fmt,
        output,
        key="final",
        title="restarts (am-ELO Figure 5)",
        detail=f"final values after {config.steps} epochs; loss = mean binary cross-entropy",
    )
