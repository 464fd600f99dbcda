"""``stablearena experiment rigging``: the cost of rigging a leaderboard (docs/guides/rigging.md)."""

import json
import sys
from pathlib import Path
from typing import Annotated, Any

import typer

from ..atomic import atomic_write
from ..errors import InputError
from .common import (
    FormatOpt,
    OutputOpt,
    count_option,
    emit,
    experiment_app,
    records_table,
    seed_option,
    split_list,
)

#: every family of :data:`stablearena.simulation.attacks.FAMILIES` (spelled out: the CLI starts without
#: importing the simulator)
_ALL_FAMILIES = (
    "target/few,target/many,target+camo/few,target+camo/many,"
    "omni/few,omni/many,omni+camo/few,omni+camo/many"
)


def _source(path: Path | None) -> Any:
    """The honest arena's source: a pair-count file, or the bundled Chatbot Arena 2024 counts."""
    if path is not None and str(path) != "chatbot-arena-2024":
        return path
    from ..data import datasets

    load = getattr(datasets, "load", None)
    if load is not None:
        return load("chatbot-arena-2024")
    return datasets.chatbot_arena_2024()


def _fmt(v: Any, se: Any, censored: int) -> str:
    if v is None:
        return "—"
    text = f"{v:,.0f}" + (f" ± {se:,.0f}" if se is not None else "")
    return ("≥ " if censored else "") + text


@experiment_app.command("rigging")
def experiment_rigging(
    path: Annotated[
        Path | None,
        typer.Argument(
            help="Pair counts of the real arena the honest arena is drawn from (a leaderbot "
            "JSON file); default: the bundled Chatbot Arena 2024 counts.",
            metavar="PATH",
        ),
    ] = None,
    seeds: Annotated[int, count_option("--seeds", "Seeds (arenas and attacks).", 1, 10_000)] = 10,
    seed: Annotated[int, seed_option("First seed.")] = 0,
    fraction: Annotated[
        float,
        typer.Option(
            "--fraction",
            help="Share of the real battles kept in the honest arena (scaled down for speed).",
            metavar="F",
        ),
    ] = 0.02,
    families: Annotated[
        str,
        typer.Option(
            "--families",
            help="Attack families KIND[+camo]/ACCOUNTS, KIND target|omni, ACCOUNTS few|many.",
            metavar="F1,F2,…",
        ),
    ] = _ALL_FAMILIES,
    targets: Annotated[
        str, typer.Option("--targets", help="Target positions.", metavar="top,middle,bottom")
    ] = "top,middle,bottom",
    defences: Annotated[
        str,
        typer.Option("--defences", help="Defences (the first is the baseline).", metavar="D1,…"),
    ] = "m-elo,am-elo+screen,am-elo+screen+influence+bounded",
    max_votes: Annotated[
        int | None,
        count_option(
            "--max-votes", "Attack budget (default 25 % of the honest arena's votes).", 1, 10**9
        ),
    ] = None,
    accuracy: Annotated[
        float,
        typer.Option(
            "--accuracy",
            help="Probability that a target-only attacker recognises the target.",
            metavar="P",
        ),
    ] = 1.0,
    precision: Annotated[
        float,
        typer.Option(
            "--precision",
            help="Costs found to this factor (doubling, then geometric bisection; 1: to the vote).",
            metavar="R",
        ),
    ] = 1.1,
    cap: Annotated[
        float | None,
        typer.Option(
            "--cap",
            help="Bounded influence of the +bounded defences: the largest weight of an account "
            "(default stablearena.simulation.attacks.BOUNDED_CAP).",
            metavar="W",
        ),
    ] = None,
    ramp_votes: Annotated[
        float | None,
        typer.Option(
            "--ramp-votes",
            help="Bounded influence: an account's weight grows linearly until it has voted this "
            "often (default stablearena.simulation.attacks.BOUNDED_RAMP_VOTES; 0: no ramp).",
            metavar="N",
        ),
    ] = None,
    ramp_days: Annotated[
        float | None,
        typer.Option(
            "--ramp-days",
            help="Bounded influence: an account's weight grows linearly with its age until this "
            "many days (default stablearena.simulation.attacks.BOUNDED_RAMP_DAYS; 0: no age ramp). Honest "
            "accounts' ages are uniform on [0, 365] days.",
            metavar="D",
        ),
    ] = None,
    attack_age: Annotated[
        float,
        typer.Option(
            "--attack-age",
            help="Age in days of the attacker's accounts when the leaderboard is read (0: created "
            "for the attack).",
            metavar="D",
        ),
    ] = 0.0,
    warmup: Annotated[
        int,
        count_option(
            "--warmup",
            "Sleepers: votes each attacker account casts before the attack (one a day at most "
            "over its --attack-age), counted in its cost; 0: none.",
            0,
            10**6,
        ),
    ] = 0,
    warmup_mode: Annotated[
        str,
        typer.Option(
            "--warmup-mode",
            help="Sleepers' warm-up votes: 'board' (the public board's favourite wins) or "
            "'honest' (drawn like an honest annotator's).",
            metavar="board|honest",
        ),
    ] = "board",
    attack_days: Annotated[
        float,
        typer.Option(
            "--attack-days",
            help="Distinct days over which each attacker account casts its attack votes.",
            metavar="D",
        ),
    ] = 1.0,
    record_days: Annotated[
        float | None,
        typer.Option(
            "--record-days",
            help="Bounded influence: no account weighs more than 1 before this many days of "
            "record (default stablearena.simulation.attacks.BOUNDED_RECORD_DAYS; 0: off).",
            metavar="D",
        ),
    ] = None,
    young_share: Annotated[
        float | None,
        typer.Option(
            "--young-share",
            help="Bounded influence: accounts under --ramp-days days of record together supply "
            "at most this share of any model's weighted votes (default "
            "stablearena.simulation.attacks.BOUNDED_YOUNG_SHARE; 0: off).",
            metavar="S",
        ),
    ] = None,
    trust_days: Annotated[
        str,
        typer.Option(
            "--trust-days",
            help="What the day rules count: 'active' (distinct days with a vote; honest accounts "
            "vote 2–20 times per active day) or 'age' (days since creation: the rule before "
            "sleepers).",
            metavar="active|age",
        ),
    ] = "active",
    min_records: Annotated[
        int,
        count_option(
            "--min-records", "δ: accounts with fewer votes are left out of am-ELO's fit.", 1, 10**6
        ),
    ] = 50,
    crowd: Annotated[
        str | None,
        typer.Option(
            "--crowd",
            help="The honest accounts' volumes and active days from a crowd model of "
            "stablearena.simulation.attacks.CROWDS (casual, public, regulars, legacy; docs/guides/"
            "rigging.md, 'Crowds'); default: the older 20–200 votes per account.",
            metavar="NAME",
        ),
    ] = None,
    results: Annotated[
        Path | None,
        typer.Option(
            "--results",
            help="Directory of per-seed results (seed_N.json): existing ones are read, new ones "
            "written there.",
            metavar="DIR",
        ),
    ] = None,
    roc: Annotated[
        bool,
        typer.Option(
            "--roc",
            help="Instead of costs: at the number of votes that lifts the target by 10 places on "
            "the m-ELO baseline, the ROC AUC of each per-account detector (influence push, "
            "selection test, e-value, −am-ELO ability) separating attacker accounts from honest "
            "ones (both with ≥ 50 votes). Per-seed results: roc_seed_N.json.",
        ),
    ] = False,
    no_run: Annotated[
        bool,
        typer.Option("--no-run", help="Only summarise the seeds already in --results."),
    ] = False,
    fmt: FormatOpt = "table",
    output: OutputOpt = None,
) -> None:
    """Votes needed to lift a model by 1, 3 and 10 places, per attack family and defence.

    An honest arena is drawn from real pair counts (each battle kept with probability
    --fraction, spread over synthetic annotators of 20–200 votes, or as --crowd draws them); attackers are served pairs at
    the arena's frequencies. Each figure is the mean over seeds (± SE); ratio_L is the mean over
    seeds of the cost divided by the baseline's on the same seed. '≥' marks a mean in which some
    seeds did not reach the level within the budget (counted at the budget)."""
    from ..simulation import attacks as A

    if not 0 < fraction <= 1:
        raise InputError(f"--fraction must lie in (0, 1], not {fraction}.")
    if not 0 < accuracy <= 1:
        raise InputError(f"--accuracy must lie in (0, 1], not {accuracy}.")
    fams = [A.Family.parse(f) for f in split_list([families])]
    tgts = split_list([targets])
    bad = sorted(set(tgts) - set(A.TARGET_RANKS))
    if bad:
        raise InputError(f"--targets must be among top, middle, bottom, not {bad}.")
    defs = split_list([defences])
    bad = sorted(set(defs) - set(A.DEFENCES))
    if bad or not defs:
        raise InputError(f"--defences must be among {', '.join(A.DEFENCES)}, not {bad or '[]'}.")
    if no_run and results is None:
        raise InputError("--no-run summarises --results DIR; give the directory.")
    if results is not None:
        results.mkdir(parents=True, exist_ok=True)
    from .._progress import counting_bar

    bounded = {
        "cap": A.BOUNDED_CAP if cap is None else cap,
        "ramp_votes": A.BOUNDED_RAMP_VOTES if ramp_votes is None else ramp_votes,
        "ramp_days": A.BOUNDED_RAMP_DAYS if ramp_days is None else ramp_days,
        "record_days": A.BOUNDED_RECORD_DAYS if record_days is None else record_days,
        "young_share": A.BOUNDED_YOUNG_SHARE if young_share is None else young_share,
    }
    if not 0 <= bounded["young_share"] < 1:
        raise InputError(
            f"--young-share must lie in [0, 1) (0: off), not {bounded['young_share']}."
        )
    if precision < 1:
        raise InputError(f"--precision must be ≥ 1, not {precision}.")
    if min(bounded["ramp_votes"], bounded["ramp_days"], bounded["record_days"]) < 0:
        raise InputError("--ramp-votes, --ramp-days and --record-days must be ≥ 0.")
    if bounded["cap"] <= 0:
        raise InputError(f"--cap must be > 0, not {bounded['cap']}.")
    if warmup_mode not in A.WARMUP_MODES:
        raise InputError(f"--warmup-mode must be board or honest, not {warmup_mode!r}.")
    if trust_days not in A.TRUST_DAYS:
        raise InputError(f"--trust-days must be active or age, not {trust_days!r}.")
    if attack_days < 1:
        raise InputError(f"--attack-days must be ≥ 1 (the attack takes a day), not {attack_days}.")
    sleeper = {
        "warmup": warmup,
        "warmup_mode": warmup_mode,
        "attack_days": attack_days,
        "days": trust_days,
        "min_records": min_records,
    }
    if attack_age < 0:
        raise InputError(f"--attack-age must be ≥ 0 days, not {attack_age}.")
    if crowd is not None and crowd not in (*A.CROWDS, "legacy"):
        raise InputError(f"--crowd must be one of {', '.join(A.CROWDS)}, legacy; not {crowd!r}.")
    records: list[dict[str, Any]] = []
    source = None
    used = []
    stem = "roc_seed" if roc else "seed"
    files = {
        s: results / f"{stem}_{s}.json" if results is not None else None
        for s in range(seed, seed + seeds)
    }
    to_run = [s for s, f in files.items() if not no_run and (f is None or not f.exists())]
    bar = counting_bar(
        "rigging [dim]{task.description}[/]", enabled=bool(to_run) and sys.stderr.isatty()
    )
    with bar:
        per_seed = len(tgts) * len(fams) * (1 if roc else len(defs))
        task = bar.add_task("", total=len(to_run) * per_seed)
        for s, file in files.items():
            if file is not None and file.exists():
                records += json.loads(file.read_text())
                used.append(s)
                continue
            if no_run:
                continue
            source = source if source is not None else _source(path)
            arena = A.honest_arena(source, fraction=fraction, seed=s, crowd=crowd)

            def step(text: str) -> None:
                bar.update(task, advance=1, description=text)

            cell = {
                "seed": s,
                "families": fams,
                "targets": tgts,
                "max_votes": max_votes,
                "accuracy": accuracy,
                "precision": precision,
                "log": step,
            }
            if roc:
                recs = A.roc_seed(arena, **cell)
            else:
                recs = A.run_seed(
                    arena, **cell, defences=defs, attack_age=attack_age, **bounded, **sleeper
                )
            if file is not None:
                atomic_write(file, json.dumps(recs))
            records += recs
            used.append(s)
    if not records:
        raise InputError(f"no per-seed results in {results} for seeds {seed}–{seed + seeds - 1}.")
    if roc:
        _emit_roc(records, fams, tgts, path, fraction, used, fmt, output)
        return
    budgets = {r["seed"]: r.get("max_votes") for r in records}
    keep = {(f.name, t, d) for f in fams for t in tgts for d in defs}
    records = [r for r in records if (r["family"], r["target"], r["defence"]) in keep]
    summary = A.summarise(records, baseline=defs[0], max_votes=budgets)
    payload = {
        "source": str(path) if path is not None else "chatbot-arena-2024",
        "fraction": fraction,
        "precision": precision,
        **bounded,
        "attack_age": attack_age,
        **sleeper,
        "crowd": crowd or "20–200 votes",
        "seeds": used,
        "summary": summary,
        "runs": records,
    }

    def table(p: dict[str, Any]) -> Any:
        rows = []
        for r in p["summary"]:
            row = {"family": r["family"], "target": r["target"], "defence": r["defence"]}
            for level in (1, 3, 10):
                row[f"votes +{level}"] = _fmt(
                    r.get(f"votes_{level}"), r.get(f"votes_{level}_se"), r.get(f"censored_{level}")
                )
            for level in (1, 3, 10):
                v, med = r.get(f"ratio_{level}"), r.get(f"ratio_{level}_median")
                row[f"×{defs[0]} +{level}"] = "—" if v is None else f"{v:.2f} (median {med:.2f})"
            rows.append(row)
        caption = (
            f"seeds {', '.join(map(str, p['seeds']))}; honest arena = {p['fraction']:g} of the "
            "real battles; votes (warm-up included): mean ± SE over seeds (≥: some seeds "
            f"censored at the budget); ×{defs[0]}: mean (and median) over seeds of the per-seed "
            "cost ratio"
        )
        return records_table(rows, title="rigging — votes needed to lift a model", caption=caption)

    emit(payload, fmt, output, records_key="summary", table=table)


def _emit_roc(
    records: list[dict[str, Any]],
    fams: list[Any],
    tgts: list[str],
    path: Path | None,
    fraction: float,
    used: list[int],
    fmt: Any,
    output: Any,
) -> None:
    """The ``--roc`` summary: per family × target, the m-ELO +10 volume and each detector's AUC
    (mean ± SE over seeds)."""
    from ..simulation import attacks as A

    keep = {(f.name, t) for f in fams for t in tgts}
    records = [r for r in records if (r["family"], r["target"]) in keep]
    payload = {
        "source": str(path) if path is not None else "chatbot-arena-2024",
        "fraction": fraction,
        "seeds": used,
        "summary": A.summarise_roc(records),
        "runs": records,
    }

    def table(p: dict[str, Any]) -> Any:
        rows = []
        for r in p["summary"]:
            row = {
                "family": r["family"],
                "target": r["target"],
                "votes (m-ELO +10)": _fmt(r["votes"], r["votes_se"], r["censored"]),
                "attacker accounts": "—" if r["n_attackers"] is None else f"{r['n_attackers']:.1f}",
            }
            for d in A.DETECTORS:
                v, se = r[f"auc_{d}"], r[f"auc_{d}_se"]
                row[f"AUC {d}"] = (
                    "—" if v is None else f"{v:.2f}" + (f" ± {se:.2f}" if se is not None else "")
                )
            rows.append(row)
        caption = (
            f"seeds {', '.join(map(str, p['seeds']))}; honest arena = {p['fraction']:g} of the "
            "real battles; AUC of each detector for attacker against honest accounts (both ≥ 50 "
            "votes; 0.5: indistinguishable), mean ± SE over seeds"
        )
        return records_table(rows, title="rigging — what a detector sees", caption=caption)

    emit(payload, fmt, output, records_key="summary", table=table)
