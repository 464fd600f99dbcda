"""``stablearena rank``: a leaderboard from a battle log."""

from typing import TYPE_CHECKING, Annotated, Any

import typer

from .. import choices
from ..errors import InputError
from .common import (
    DATA_OPTIONS,
    FormatOpt,
    OptionBlock,
    OutputOpt,
    PathArg,
    _metavar,
    app,
    choice_option,
    count_option,
    data_options,
    emit,
    finite,
    fit_progress,
    load_data,
    non_negative,
    notes_footer,
    one_of,
    payload_options,
    positive,
    probability,
    records_table,
    seed_option,
    with_options,
)
from .rater_flags import build_rater, rater_options

if TYPE_CHECKING:  # pragma: no cover
    from .common import Loaded


def needs_battles(method: str, ci: str, cluster: str | None) -> bool:
    """Whether a fit needs the individual battles (online Elo replays them in order; a
    clustered bootstrap resamples annotators or prompts) rather than their pair counts."""
    return method == "elo" or (ci == "bootstrap" and cluster is not None)


# ------------------------------------------------------------------ options shared with plot/report
MethodOpt = Annotated[
    str,
    typer.Option(
        "--method",
        "-m",
        help="Rating method (m-elo: exact Bradley–Terry, ties as half; bt: ties dropped; elo: "
        "online Elo; am-elo: with annotator abilities; rao-kupper, davidson: tie models; "
        "bt-cov: Thurstonian covariance; style-*: style control, see --style).",
        metavar=_metavar(tuple(choices.RATER_MODULES)),
        callback=one_of(*choices.RATER_MODULES, flag="--method", unknown=True),
    ),
]
AnchorOpt = Annotated[
    str | None,
    typer.Option(
        "--anchor",
        help="Fix one model's rating: MODEL=RATING (default: mean 1000).",
        metavar="MODEL=RATING",
    ),
]
SolverOpt = Annotated[
    str | None,
    choice_option(
        "--solver",
        choices.SOLVERS,
        "m-elo/bt/am-elo: 'newton' (exact, default) or 'adam' (paper reproduction); "
        "rao-kupper/davidson: 'auto', 'newton' or 'lbfgs'.",
    ),
]
EloKOpt = Annotated[
    float | None,
    typer.Option("--elo-k", help="elo: K factor (default 4).", metavar="K", callback=positive),
]
ShufflesOpt = Annotated[
    int | None,
    count_option(
        "--shuffles",
        "elo: average over this many seeded shuffles (default: order as given).",
        0,
        1_000_000,
        "S",
    ),
]
SeedOpt = Annotated[
    int | None,
    seed_option("Random seed (elo shuffles, bootstrap)."),
]
MinRecordsOpt = Annotated[
    int | None,
    typer.Option(
        "--min-records",
        help="am-elo: annotators with fewer records wait (δ).",
        metavar="N",
        callback=non_negative,
    ),
]
AbilityThresholdOpt = Annotated[
    float | None,
    typer.Option(
        "--ability-threshold",
        help="am-elo: flag annotators below this ability (ε, mean-1 scale).",
        metavar="EPS",
        callback=finite,
    ),
]
ExcludeFlaggedOpt = Annotated[
    bool, typer.Option("--exclude-flagged", help="am-elo: refit without flagged annotators.")
]
KTieOpt = Annotated[
    int | None,
    typer.Option(
        "--k-tie",
        help="rao-kupper/davidson: tie factors (0 = one threshold).",
        metavar="K",
        callback=non_negative,
    ),
]
KCovOpt = Annotated[
    str | None,
    typer.Option(
        "--k-cov",
        help="rao-kupper/davidson: covariance rank: none, 0 (diagonal) or k.",
        metavar="[none|0|K]",
    ),
]
ConfidenceOpt = Annotated[
    float | None,
    typer.Option(
        "--confidence",
        help="am-elo: flag only annotators whose ability is below the threshold with this confidence (e.g. 0.95).",
        metavar="LEVEL",
        callback=probability,
    ),
]
NormalizationOpt = Annotated[
    str | None,
    choice_option(
        "--normalization",
        choices.NORMALIZATIONS,
        "am-elo: 'mean' (abilities average C, m-ELO's Elo scale; default) or 'sum' (the paper's Σθ = 1).",
    ),
]
TieFormOpt = Annotated[
    str | None,
    choice_option(
        "--tie-form", choices.TIE_FORMS, "rao-kupper/davidson: 'nested' (default) or 'leaderbot'."
    ),
]
CiOpt = Annotated[
    str,
    choice_option(
        "--ci",
        ("none", *choices.CI_METHODS),
        "Intervals: none, fisher (inverse information), sandwich (robust) or bootstrap.",
    ),
]
RoundsOpt = Annotated[
    int,
    count_option("--rounds", "Bootstrap rounds (with --ci bootstrap).", 2, 1_000_000),
]
ClusterOpt = Annotated[
    str | None,
    choice_option(
        "--cluster", choices.CLUSTERS, "Bootstrap whole annotators or prompts instead of battles."
    ),
]
LevelOpt = Annotated[
    float,
    typer.Option(
        "--level",
        help="Confidence level of the intervals.",
        metavar="LEVEL",
        callback=probability,
    ),
]

#: Command parameter → CLI flag, for the rater options above (see RATER_FLAGS).
StyleOpt = Annotated[
    bool,
    typer.Option(
        "--style",
        help="Style control (m-elo, bt, am-elo): LMArena's length/headers/lists/bold covariates "
        "from conv_metadata or answer text, or those named by --covariate.",
    ),
]
CovariateOpt = Annotated[
    list[str] | None,
    typer.Option(
        "--covariate",
        metavar="A:B|COLUMN",
        help="Style covariate (implies --style): A:B per-side numeric columns (normalised "
        "difference (a-b)/(a+b+1)) or a ready difference column. Repeatable.",
    ),
]
TextColumnsOpt = Annotated[
    str | None,
    typer.Option(
        "--text-columns",
        help="--style: answer-text columns A:B to count style in.",
        metavar="A:B",
    ),
]
PenaltyOpt = Annotated[
    str | None,
    choice_option(
        "--penalty",
        ("gamma", "all", "none"),
        "--style: L2 penalty on 'gamma' (default, arena-rank), 'all' (FastChat) or 'none'.",
    ),
]
RegOpt = Annotated[
    float | None,
    typer.Option(
        "--reg",
        help="--style: penalty strength λ on the summed log-likelihood (0.5).",
        metavar="LAMBDA",
        callback=non_negative,
    ),
]
WhereOpt = Annotated[
    list[str] | None,
    typer.Option(
        "--where",
        help="Keep battles with COLUMN=VALUE (any column; repeatable).",
        metavar="COLUMN=VALUE",
    ),
]


#: ``rank --method``: every rater, and ``arena`` (the live arena's rule on a log).
RankMethodOpt = Annotated[
    str,
    typer.Option(
        "--method",
        "-m",
        help="Rating method (m-elo: exact Bradley–Terry, ties as half; bt: ties dropped; elo: "
        "online Elo; am-elo: with annotator abilities; rao-kupper, davidson: tie models; "
        "bt-cov: Thurstonian covariance; style-*: style control, see --style; arena: the live "
        "arena's rule, accounts from the judge column, ages from tstamp).",
        metavar=_metavar((*choices.RATER_MODULES, "arena")),
        callback=one_of(*choices.RATER_MODULES, "arena", flag="--method", unknown=True),
    ),
]


def _arena_bound(flag: str, metavar: str, text: str) -> Any:
    """A non-negative number of the arena rule's bounded influence (``--method arena``)."""
    return typer.Option(
        flag,
        help=f"arena: bounded influence, {text}.",
        metavar=metavar,
        callback=non_negative,
    )


#: The options of ``rank --method arena`` only (the live arena's ``arena.*`` settings).
ARENA_OPTIONS: OptionBlock = (
    (
        "rule",
        Annotated[
            str | None,
            choice_option(
                "--rule",
                ("crowd", "am-elo"),
                "arena: the board's rule — crowd (the default: every account's votes count, "
                "abilities shrunk toward the crowd's, a per-model limit per account, a flood "
                "test; docs/methods/crowd.md) or am-elo (the Stable Arena with bounded "
                "influence and its ramps).",
            ),
        ],
        None,
    ),
    (
        "model_votes",
        Annotated[
            float | None,
            _arena_bound(
                "--model-votes",
                "N",
                "(crowd rule) least per-model limit of one account: the limit is the established "
                "accounts' 99.9th-percentile votes per model, between N and 50 (default 10; 0: "
                "no limit)",
            ),
        ],
        None,
    ),
    (
        "flood_days",
        Annotated[
            float | None,
            _arena_bound(
                "--flood-days",
                "D",
                "(crowd rule) accounts with fewer active days are new for the flood test "
                "(0: no test)",
            ),
        ],
        None,
    ),
    (
        "cap",
        Annotated[
            float | None,
            _arena_bound(
                "--cap",
                "A",
                "(am-ELO rule) largest weight of one account (0: none); the crowd rule's is "
                "the crowd's average vote, 1",
            ),
        ],
        None,
    ),
    (
        "ramp_votes",
        Annotated[
            float | None, _arena_bound("--ramp-votes", "N", "votes until full weight (0: none)")
        ],
        None,
    ),
    (
        "ramp_days",
        Annotated[
            float | None,
            _arena_bound("--ramp-days", "D", "days of age until full weight (0: no age ramp)"),
        ],
        None,
    ),
    (
        "record_days",
        Annotated[
            float | None,
            _arena_bound(
                "--record-days", "D", "days of record before an account may weigh more than 1"
            ),
        ],
        None,
    ),
    (
        "young_share",
        Annotated[
            float | None,
            _arena_bound(
                "--young-share",
                "S",
                "largest share of a model's weighted votes from accounts under --ramp-days days "
                "of record, together (0: off)",
            ),
        ],
        None,
    ),
    (
        "policy",
        Annotated[
            str | None,
            choice_option(
                "--policy",
                ("exclude", "warn"),
                "arena: leave annotators below the ability threshold out (exclude, the default) "
                "or only flag them (warn).",
            ),
        ],
        None,
    ),
    (
        "influence",
        Annotated[
            str | None,
            choice_option(
                "--influence",
                ("exclude", "warn"),
                "arena: act on influence flags (exclude, the default) or only show them (warn).",
            ),
        ],
        None,
    ),
    (
        "now",
        Annotated[
            float | None,
            typer.Option(
                "--now",
                help="arena: the time of the board in Unix seconds (default: the log's last vote).",
                metavar="T",
                callback=finite,
            ),
        ],
        None,
    ),
)

#: The method and interval options of ``rank``, ``plot`` and ``report`` (after the data
#: options), in their --help order; ``plot`` and ``report`` default ``ci`` to "fisher".
FIT_OPTIONS: OptionBlock = (
    ("anchor", AnchorOpt, None),
    ("solver", SolverOpt, None),
    ("elo_k", EloKOpt, None),
    ("shuffles", ShufflesOpt, None),
    ("seed", SeedOpt, None),
    ("min_records", MinRecordsOpt, None),
    ("ability_threshold", AbilityThresholdOpt, None),
    ("exclude_flagged", ExcludeFlaggedOpt, False),
    ("k_tie", KTieOpt, None),
    ("k_cov", KCovOpt, None),
    ("confidence", ConfidenceOpt, None),
    ("normalization", NormalizationOpt, None),
    ("tie_form", TieFormOpt, None),
    ("ci", CiOpt, "none"),
    ("rounds", RoundsOpt, 1000),
    ("cluster", ClusterOpt, None),
    ("level", LevelOpt, 0.95),
    ("style", StyleOpt, False),
    ("covariate", CovariateOpt, None),
    ("text_columns", TextColumnsOpt, None),
    ("penalty", PenaltyOpt, None),
    ("reg", RegOpt, None),
    ("where", WhereOpt, None),
)


def fit_from_options(options: dict[str, Any]) -> "tuple[Loaded, Any]":
    """Check, read the data and fit the rater — the part of ``rank``, ``plot`` and ``report``
    that is the same. ``options``: as for :func:`rater_options`, plus ``path`` and the filters
    of :func:`load_data`. Returns what was loaded and the fitted result."""
    method = options["method"]
    rater = build_rater(method, rater_options(options))
    loaded = load_data(
        options["path"],
        **data_options(options),
        counts_only=not needs_battles(method, options["ci"], options["cluster"]),
        by_annotator=method == "am-elo",
        ipw=options.get("ipw", False),
    )
    if method == "elo":
        # every method refuses a log whose ratings cannot be compared; online Elo itself would
        # rate it (with a warning), so the command checks first
        from ..data.battles import as_counts
        from ..data.graph import check_comparison_graph

        check_comparison_graph(as_counts(loaded.data))
    with fit_progress(f"fitting {method} on {loaded.label}"):
        return loaded, rater.fit(loaded.data)


def _arena_rule(options: dict[str, Any]) -> Any:
    """The :class:`~stablearena.crowd.board_rule.ArenaRule` of ``rank --method arena``'s options (the
    live arena's defaults for those not given); an error for a rater option it does not take."""
    from ..crowd.board_rule import ArenaRule

    for name in ("anchor", "solver", "elo_k", "shuffles", "k_tie", "k_cov", "tie_form"):
        if options.get(name) is not None:
            raise InputError(f"--{name.replace('_', '-')} does not apply to --method arena.")
    for name in ("style", "covariate", "by", "where", "normalization"):
        if options.get(name):
            raise InputError(
                f"--{name} does not apply to --method arena (the arena's rule ranks the whole "
                "log as the live arena does)."
            )
    method = options.get("rule") or "crowd"
    if options["ci"] != "none" and method != "crowd":
        raise InputError(
            "--method arena --rule am-elo gives no intervals: drop --ci (or use the crowd rule, "
            "or --method am-elo)."
        )
    given = {
        "method": method,
        "model_votes": options.get("model_votes"),
        "flood_days": options.get("flood_days"),
        "min_records": options.get("min_records"),
        "ability_threshold": options.get("ability_threshold"),
        "confidence": options.get("confidence"),
        "policy": options.get("policy") or ("exclude" if options.get("exclude_flagged") else None),
        "influence": options.get("influence"),
        "cap": options.get("cap"),
        "ramp_votes": options.get("ramp_votes"),
        "ramp_days": options.get("ramp_days"),
        "record_days": options.get("record_days"),
        "young_share": options.get("young_share"),
    }
    return ArenaRule(**{k: v for k, v in given.items() if v is not None})


def rank_arena(options: dict[str, Any]) -> None:
    """``rank --method arena``: :func:`stablearena.crowd.board_rule.arena_fit` on a log — the board
    the live arena publishes from the same votes."""
    from dataclasses import asdict

    from ..analysis.leaderboard import convergence_text, leaderboard_payload
    from ..crowd.board_rule import arena_fit, log_accounts

    rule = _arena_rule(options)
    loaded = load_data(options["path"], **data_options(options))
    battles = loaded.data
    if getattr(battles, "annotator", None) is None:
        raise InputError(
            f"{loaded.label}: no judge column (the account id of each vote), which the arena's "
            "rule needs to weigh accounts; add one (or name it with --col annotator=COLUMN), or "
            "rank with --method am-elo or m-elo."
        )
    ages = active = None
    now = None
    crowd = rule.method == "crowd"
    days = rule.flood_days if crowd else rule.ramp_days
    if days and (not crowd or getattr(battles, "timestamp", None) is not None):
        # the crowd rule's flood test needs days of record: without a tstamp column, no test
        times = log_accounts(battles, ramp_days=days, now=options.get("now"))
        ages, active, now = times.ages, times.active_days, times.now
    counts = battles.counts(by_annotator=True)
    with fit_progress(f"fitting the arena's rule on {loaded.label}"):
        got = arena_fit(counts, rule, ages=ages, active_days=active)
    payload = leaderboard_payload(
        got.fitted, counts, **{**payload_options(loaded, options), "source": loaded.label}
    )
    if crowd:
        c = got.step.crowd
        payload["crowd"] = {
            "prior_sd": c.prior_sd,
            "flagged": [{"annotator": k, "reason": v} for k, v in sorted(c.flagged.items())],
            "model_votes": c.fitted.params.get("model_votes"),  # the limit this fit used
            "capped_accounts": len(c.capped),
            "new_accounts": len(c.new) if ages is not None else None,
            "floods": [{"model": k, "z": v} for k, v in sorted(c.floods.items())],
        }
    payload["method"] = "arena"
    payload["rule"] = {**asdict(rule), "now": now}
    payload["left_out_weight_0"] = sorted(got.weightless)
    payload["influence_excluded"] = [
        {"annotator": k, "reason": v} for k, v in sorted(got.influence_excluded.items())
    ]
    if not got.converged and not any(n.startswith("not a board") for n in payload["notes"]):
        payload["notes"] = ["not a board to publish: the fit did not converge", *payload["notes"]]
    if loaded.dropped:
        payload["dropped_models"] = [{"model": k, "reason": v} for k, v in loaded.dropped.items()]

    def table(p: dict[str, Any]) -> Any:
        r = p["rule"]
        head = (
            f"{p['n_models']} models, {p['n_battles']:,} battles, NLL/comparison {p['nll']:.7f}"
            + convergence_text(p.get("convergence", {}))
        )
        if "crowd" in p:
            cr = p["crowd"]
            caption = (
                head
                + f"; crowd rule: ability spread τ {cr['prior_sd']:.3g}, cap {choices.CROWD_CAP:g}, "
                f"≤ {cr['model_votes'] or 'no limit'} weighted votes per account and model "
                f"({cr['capped_accounts']} accounts capped), {len(cr['flagged'])} screened out, "
                + (
                    "no flood test (no tstamp column)"
                    if cr["new_accounts"] is None
                    else f"{cr['new_accounts']} new accounts, {len(cr['floods'])} floods"
                )
            )
            return records_table(
                p["models"], title=f"arena leaderboard — {p['source']}", caption=caption
            )
        caption = (
            head
            + f"; δ {r['min_records']}, cap {r['cap'] or 'none'}, ramp {r['ramp_votes'] or 0:g} "
            f"votes / {r['ramp_days'] or 0:g} days, influence {r['influence']}; "
            f"{len(p['influence_excluded'])} excluded by influence, "
            f"{len(p['left_out_weight_0'])} left out at weight 0"
        )
        return records_table(
            p["models"], title=f"arena leaderboard — {p['source']}", caption=caption
        )

    emit(
        payload,
        options["fmt"],
        options["output"],
        table=table,
        footer=notes_footer(payload["notes"], loaded.dropped),
    )


@app.command()
@with_options(DATA_OPTIONS, FIT_OPTIONS, ARENA_OPTIONS)
def rank(
    path: PathArg = None,
    method: RankMethodOpt = "m-elo",
    fmt: FormatOpt = "table",
    output: OutputOpt = None,
    *,
    by: Annotated[
        str | None,
        typer.Option(
            "--by",
            help="One board per value of this column (JSON: keyed by value).",
            metavar="COLUMN",
        ),
    ] = None,
    ipw: Annotated[
        bool,
        typer.Option(
            "--ipw",
            help="Weight each battle by 1/propensity (normalised to mean 1) as a sampling "
            "weight: the live arena's export stores the probability each pair was drawn with "
            "(column propensity, or --col propensity=NAME). Intervals: --ci sandwich (Fisher "
            "and the battle bootstrap are refused; --cluster bootstraps are allowed).",
        ),
    ] = False,
    **options: Any,
) -> None:
    """Fit a rating method and print the leaderboard.

    JSON output: {"method", "n_battles", "n_models", "nll" (negative log-likelihood per
    comparison), "models": [{"rank", "model", "rating", "battles", ...}], ...}.
    With --ci, each model also gets "se", "ci_low", "ci_high", "rank_low", "rank_high",
    "displayed_rank" (Chatbot Arena's) and "tier", and the payload a "ci" object.
    """
    options = {
        "path": path,
        "method": method,
        "fmt": fmt,
        "output": output,
        "by": by,
        "ipw": ipw,
        **options,
    }
    if method == "arena" and ipw:
        raise InputError(
            "--ipw does not apply to --method arena (the arena's rule weighs accounts itself); "
            "use --method m-elo, bt or elo."
        )
    if method == "arena":
        rank_arena(options)
        return
    for name in (
        "rule",
        "model_votes",
        "flood_days",
        "cap",
        "ramp_votes",
        "ramp_days",
        "record_days",
        "young_share",
        "policy",
        "influence",
        "now",
    ):
        if options.get(name) is not None:
            flag = "--" + name.replace("_", "-")
            raise InputError(f"{flag} applies to --method arena only, not --method {method}.")
    from .boards import rank_boards, style_method, uses_boards, uses_style

    if uses_boards(options):
        rater_method = style_method(method) if uses_style(options) else method
        rank_boards(build_rater(rater_method, rater_options(options)), options)
        return
    from ..analysis.leaderboard import (
        convergence_text,
        interval_caption,
        interval_records,
        leaderboard_payload,
    )

    loaded, fitted = fit_from_options(options)
    if options["ci"] in ("fisher", "sandwich"):
        # the covariance and the rank draws take minutes at thousands of models: say so
        with fit_progress(f"{options['ci']} intervals of {fitted.n_models:,} models"):
            payload = leaderboard_payload(fitted, loaded.data, **payload_options(loaded, options))
    else:
        payload = leaderboard_payload(fitted, loaded.data, **payload_options(loaded, options))
    if loaded.dropped:
        payload["dropped_models"] = [{"model": k, "reason": v} for k, v in loaded.dropped.items()]

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

    notes = [*payload["notes"], *payload.get("ci", {}).get("notes", [])]
    emit(payload, fmt, output, table=table, footer=notes_footer(notes, loaded.dropped))
