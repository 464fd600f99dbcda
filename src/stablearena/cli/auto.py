"""``stablearena auto``: an automatic arena — models answer a prompt set, LLM judges vote."""

import sys
from pathlib import Path
from typing import Annotated, Any

import typer

from .common import (
    _print_err,
    app,
    console,
    count_option,
    emit,
    err_console,
    records_table,
    seed_option,
)


@app.command()
def auto(
    prompts: Annotated[
        Path | None,
        typer.Argument(
            help="Prompts: JSONL, CSV or Parquet with an id and a prompt column (with --demo: "
            "optional, 200 built-in checkable prompts by default).",
            show_default=False,
        ),
    ] = None,
    models: Annotated[
        Path | None, typer.Option("--models", help="models.toml ([[models]] tables).")
    ] = None,
    judges: Annotated[
        Path | None, typer.Option("--judges", help="judges.toml ([[judges]] tables).")
    ] = None,
    budget: Annotated[
        int | None,
        count_option(
            "--budget", "Judge calls at most (a battle costs two: both orders).", 2, 10**9
        ),
    ] = None,
    demo: Annotated[
        bool,
        typer.Option(
            "--demo",
            help="Start the local demo server and use its 8 demo models and 5 demo judges "
            "(instead of --models/--judges).",
        ),
    ] = False,
    seed: Annotated[int, seed_option("Random seed.", None)] = 0,
    design: Annotated[
        str | None,
        typer.Option(
            "--design",
            help="How battles are chosen: a pair-selection strategy (default: the information "
            "design, stablearena.design.selection.DEFAULT_STRATEGY), round-robin, or baseline.",
            metavar="STRATEGY",
        ),
    ] = None,
    baseline: Annotated[
        str | None, typer.Option("--baseline", help="The baseline model of --design baseline.")
    ] = None,
    parallel: Annotated[
        int,
        count_option("--parallel", "Battles in flight at once.", 1, 1024, None),
    ] = 8,
    precision_top: Annotated[
        int | None,
        count_option(
            "--precision-top",
            "Stop once the top K models' 95% rank intervals overlap no other's.",
            1,
            10**6,
            "K",
        ),
    ] = None,
    judge_choice: Annotated[
        str | None,
        typer.Option(
            "--judge-choice",
            help="How each battle's judge is chosen: information (after a warm-up, the judge "
            "whose verdict is expected to teach the most; judges estimated below 0 are left "
            "out) or spread (every judge alike, by a hash). Default: information for the "
            "information design, spread for round-robin and baseline.",
            metavar="[information|spread]",
        ),
    ] = None,
    judge_warmup: Annotated[
        int,
        count_option(
            "--judge-warmup",
            "With --judge-choice information: judgements per judge before its ability steers.",
            0,
            10**6,
            None,
        ),
    ] = 10,
    journal: Annotated[
        Path | None,
        typer.Option(
            "--journal",
            help="Append-only JSONL journal of answers and judgements; a killed run given the "
            "same journal resumes where it stopped.",
        ),
    ] = None,
    db: Annotated[
        str | None,
        typer.Option(
            "--db",
            help="Keep the run in the live arena's database (sqlite:///FILE or "
            "postgresql+psycopg://…), instead of --journal: a killed run given the same --db "
            "resumes, and `stablearena serve --db` shows the result.",
            metavar="URL",
        ),
    ] = None,
    injection: Annotated[
        str | None,
        typer.Option(
            "--injection",
            help="What happens to a battle whose answer talks to the judge: forfeit (default: "
            "that answer loses, no judge call), cut (the note is cut before judging), drop (no "
            "vote) or keep (judged as is). Overrides judges.toml's [injection] policy.",
            metavar="[forfeit|cut|drop|keep]",
        ),
    ] = None,
    report: Annotated[
        Path | None, typer.Option("--report", help="Also write the HTML report to this file.")
    ] = None,
    output: Annotated[
        Path | None,
        typer.Option("--output", "-o", help="Write the leaderboard as JSON to this file."),
    ] = None,
    arena_hard_dir: Annotated[
        Path | None,
        typer.Option(
            "--arena-hard-dir",
            help="Also write the run in Arena-Hard-Auto's layout to this directory (question.jsonl, "
            "model_answer/, model_judgment/<judge>/; games against --baseline) and print its "
            "baseline boards and benchmark metrics beside ours.",
        ),
    ] = None,
    arena_hard_config: Annotated[
        Path | None,
        typer.Option(
            "--arena-hard-config",
            help="Judge as Arena-Hard-Auto's judge settings say (its config/*.yaml: "
            "prompt_template, every regex_patterns entry as it reads them, temperature, "
            "max_tokens; each prompt's category's system prompt and baseline) with every judge.",
        ),
    ] = None,
    arena_hard_endpoints: Annotated[
        Path | None,
        typer.Option(
            "--arena-hard-endpoints",
            help="Arena-Hard-Auto's endpoint file (config/api_config.yaml): with "
            "--arena-hard-gen-config its model_list are the models, and the judge is "
            "--arena-hard-config's judge_model (instead of --models/--judges).",
        ),
    ] = None,
    arena_hard_gen_config: Annotated[
        Path | None,
        typer.Option(
            "--arena-hard-gen-config",
            help="Arena-Hard-Auto's generation settings (config/gen_answer_config.yaml): its "
            "model_list, each looked up in --arena-hard-endpoints.",
        ),
    ] = None,
    reference: Annotated[
        Path | None,
        typer.Option(
            "--reference",
            help="A reference (human) board, CSV with model, score, lower, upper: the output's "
            "benchmark_metrics then add agreement with CI, pair-rank Brier, Spearman, Kendall.",
        ),
    ] = None,
    probe_share: Annotated[
        float,
        typer.Option(
            "--probe-share",
            help="Share of the judge calls spent on probe battles of known verdict (a real "
            "answer against a cut copy of it carrying a note to the judge, or none): a judge "
            "that follows the notes is flagged and its verdicts weigh nothing. 0: no probes.",
            min=0.0,
            max=0.9,
        ),
    ] = 0.15,
    rater: Annotated[
        str,
        typer.Option(
            "--rater",
            help="am-elo (judges as annotators, their abilities estimated) or m-elo (all "
            "judgements alike).",
            metavar="[am-elo|m-elo]",
        ),
    ] = "am-elo",
) -> None:
    """Run an automatic arena: battles chosen by information, each judged by an LLM judge in
    both orders; prints the leaderboard with the judges' abilities (each judge flagged,
    uncertain or trusted by its standard error) and warnings about the judges: the board's
    orientation resting on one judge, judges that disagree systematically."""
    import contextlib

    from ..errors import InputError
    from ..judging.auto_arena import (
        JUDGE_CHOICES,
        AutoArena,
        AutoConfig,
        JsonlJournal,
        Prompt,
        fit_leaderboard,
        read_prompts,
    )
    from ..judging.endpoints import make_client, read_models
    from ..judging.endpoints.config import ModelEndpoint
    from ..judging.endpoints.demo import demo_prompts
    from ..judging.injection import check_policy
    from ..judging.judges import JudgeClient, injection_from_toml, read_judges
    from ..judging.probes import ProbeConfig

    if rater not in ("am-elo", "m-elo"):
        raise InputError(f"--rater must be am-elo or m-elo, not {rater!r}")
    if judge_choice is not None and judge_choice not in JUDGE_CHOICES:
        raise InputError(
            f"--judge-choice must be one of {', '.join(JUDGE_CHOICES)}, not {judge_choice!r}"
        )
    from ..judging.arena_hard import read_board

    ref_board = read_board(reference) if reference is not None else None
    if arena_hard_dir is not None and baseline is None:
        raise InputError(
            "--arena-hard-dir needs --baseline MODEL (its games are against one model)"
        )
    from_ah = arena_hard_endpoints is not None or arena_hard_gen_config is not None
    if from_ah and (
        arena_hard_endpoints is None or arena_hard_gen_config is None or arena_hard_config is None
    ):
        raise InputError(
            "--arena-hard-endpoints needs --arena-hard-gen-config (the models) and "
            "--arena-hard-config (the judge), all three"
        )
    if from_ah and (demo or models is not None or judges is not None):
        raise InputError("give the models by --arena-hard-endpoints or by --models/--judges/--demo")
    if not demo and not from_ah and (models is None or judges is None):
        raise InputError("give --models FILE and --judges FILE (or --demo for the demo arena)")
    if prompts is None and not demo:
        raise InputError("give a PROMPTS file (JSONL, CSV or Parquet with id and prompt)")
    prompt_list = (
        read_prompts(prompts)
        if prompts is not None
        else [Prompt(p["id"], p["prompt"]) for p in demo_prompts(200, seed)]
    )
    with contextlib.ExitStack() as stack:
        if demo:
            from ..judging.endpoints.demo_server import DemoServer, demo_endpoints

            server = stack.enter_context(DemoServer(seed=seed))
            model_cfg, judge_cfg = demo_endpoints(server.base_url)
            err_console.print(f"demo server at {server.base_url}")
            policy, guard = "forfeit", None
        elif from_ah:
            model_cfg, judge_cfg = _arena_hard_endpoints(
                arena_hard_endpoints, arena_hard_gen_config, arena_hard_config
            )
            policy, guard = "forfeit", None
        else:
            assert models is not None and judges is not None
            model_cfg, judge_cfg = read_models(models), read_judges(judges)
            policy, guard = injection_from_toml(judges)
        if arena_hard_dir is not None:  # before the work: each name must name a file there
            from ..judging.arena_hard import check_run_names

            names = [m.name for m in model_cfg]
            check_run_names(arena_hard_dir, names, [j.name for j in judge_cfg])
        if injection is not None:
            policy = check_policy(injection, "--injection")
        classifier = None
        if guard is not None:
            from ..judging.injection import InjectionClassifier

            classifier = InjectionClassifier(make_client(guard))
        prices = {m.name: m.price for m in model_cfg if getattr(m, "price", None)}
        prices.update({j.name: j.endpoint.price for j in judge_cfg if j.endpoint.price})
        config = AutoConfig(
            budget=budget,
            design=design,
            baseline=baseline,
            seed=seed,
            parallel=parallel,
            precision_top=precision_top,
            judge_choice=judge_choice,
            judge_warmup=judge_warmup,
            rater=rater,
            probes=ProbeConfig(share=probe_share),
        )
        if journal is not None and db is not None:
            raise InputError("give --journal FILE or --db URL, not both")
        jr: Any = JsonlJournal(journal) if journal is not None else None
        if db is not None:
            from ..extras import require

            require("serve", "stablearena auto --db")
            from ..service.journal import DatabaseJournal

            # the demo server's address dies with the run: its models are stored as names
            jr = DatabaseJournal(db, prompt_list, model_cfg, endpoints=not demo)
            if jr.admin_key is not None:
                print(
                    "created a new arena database; the admin key (shown once, store it now):\n"
                    f"  {jr.admin_key}",
                    flush=True,
                )
        if jr is not None:
            stack.callback(jr.close)
        total = budget
        progress = _progress(total)
        stack.enter_context(progress)
        task = progress.add_task("judging", total=total, calls=0, tokens=0, cost=0.0)

        plain = _PlainProgress(total)  # stderr not a terminal (a log): a line now and then

        def update(r: Any) -> None:
            tokens = r.prompt_tokens + r.completion_tokens
            progress.update(task, completed=r.calls, calls=r.calls, tokens=tokens, cost=r.cost)
            plain.update(r.calls, tokens, r.cost)

        ah, ah_category, ah_categories = None, "hard_prompt", {}
        if prompts is not None:
            from ..judging.arena_hard import prompt_categories

            ah_categories = prompt_categories(prompts)
        if arena_hard_config is not None:
            from ..judging.arena_hard import apply_judge_settings, read_judge_settings

            ah = read_judge_settings(arena_hard_config)
            cats = ah.categories
            ah_category = next(
                (c for c, v in cats.items() if v.baseline == baseline), next(iter(cats))
            )
            judge_cfg = [apply_judge_settings(j, ah, ah_categories, ah_category) for j in judge_cfg]
        arena = AutoArena(
            [make_client(m) for m in model_cfg],
            [JudgeClient(j, injection=policy, classifier=classifier) for j in judge_cfg],
            prompt_list,
            config,
            journal=jr,
            prices=prices,
            on_progress=update,
        )
        result = arena.run()
        update(result)
    if result.resumed:
        where = journal if journal is not None else getattr(jr, "label", db)
        err_console.print(f"resumed: {result.resumed} judgements replayed from {where}")
    fitted, notes = fit_leaderboard(result, rater)
    families = {m.name: getattr(m, "family", None) for m in model_cfg}
    families.update({j.name: j.endpoint.family for j in judge_cfg})
    payload = _payload(
        result,
        fitted,
        notes,
        [m.to_record() for m in model_cfg if isinstance(m, ModelEndpoint)],
        families,
    )
    from ..errors import StableArenaError
    from ..judging.arena_hard import fitted_metrics

    try:
        payload["benchmark_metrics"] = fitted_metrics(fitted, ref_board)
    except StableArenaError as exc:  # e.g. no interval for this fit: the board still stands
        payload["notes"].append(f"no benchmark metrics: {exc}")
    if arena_hard_dir is not None:
        from .arena_hard import export_arena_hard

        payload["arena_hard"] = export_arena_hard(
            arena,
            prompt_list,
            arena_hard_dir,
            baseline,
            ref_board,
            categories=ah_categories,
            category=ah_category,
            parser=ah.parser() if ah is not None else None,
        )
    if output is not None:
        emit(payload, "json", output)
    _print(payload)
    if arena_hard_dir is not None:
        from .arena_hard import print_arena_hard

        print_arena_hard(payload["arena_hard"])
    if report is not None:
        from ..figures.report import build_report

        rep = build_report(
            fitted,
            result.battles().compact(),
            source="stablearena auto",
            command=" ".join(["stablearena", *sys.argv[1:]]),
            notes=payload["warnings"],  # the judges' and the injections' warnings
        )
        rep.write(report)
        err_console.print(f"report written to {report}")


def _arena_hard_endpoints(endpoints: Any, gen_config: Any, settings: Any) -> tuple[list, list]:
    """The models (the generation settings' model_list) and the judge (the judge settings'
    judge_model, at its temperature and max_tokens) of Arena-Hard-Auto's files."""
    from ..judging.arena_hard import (
        endpoint_from_settings,
        read_endpoints,
        read_generation_settings,
        read_judge_settings,
    )
    from ..judging.judges import DEFAULT_JUDGE_SYSTEM_PROMPT, Judge

    entries = read_endpoints(endpoints)
    _, names, defaults = read_generation_settings(gen_config)
    models = [
        endpoint_from_settings(
            entries,
            n,
            str(endpoints),
            temperature=None
            if "temperature" in entries.get(n, {})
            else defaults.get("temperature"),
            max_tokens=None if "max_tokens" in entries.get(n, {}) else defaults.get("max_tokens"),
        )
        for n in names
    ]
    ah = read_judge_settings(settings)
    judge = endpoint_from_settings(
        entries,
        ah.judge_model,
        str(endpoints),
        temperature=ah.temperature,
        max_tokens=ah.max_tokens,
    )
    from dataclasses import replace

    judge = replace(judge, system_prompt=judge.system_prompt or DEFAULT_JUDGE_SYSTEM_PROMPT)
    return models, [Judge(judge.name, judge)]


class _PlainProgress:
    """Progress for a standard error that is not a terminal (the Rich bar is off there): a
    line at the first judge call and then at most every ``every`` seconds, so a log shows that
    the run is alive and how far it is."""

    def __init__(self, total: int | None, every: float = 10.0) -> None:
        import time

        self.total, self.every, self._clock = total, every, time.monotonic
        self.start = self._clock()
        self.last: float | None = None
        self.enabled = not sys.stderr.isatty()

    def update(self, calls: int, tokens: int, cost: float) -> None:
        now = self._clock()
        if (
            not self.enabled
            or calls <= 0
            or (self.last is not None and now - self.last < self.every)
        ):
            return
        self.last = now
        of = f"/{self.total:,}" if self.total else ""
        err_console.print(
            f"judging: {calls:,}{of} judge calls, {tokens:,} tokens, cost {cost:.4f}, "
            f"{now - self.start:.0f} s",
            highlight=False,
        )


def _progress(total: int | None) -> Any:
    from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn

    return Progress(
        TextColumn("{task.description}"),
        BarColumn(),
        TextColumn("{task.fields[calls]:,} judge calls"),
        TextColumn("{task.fields[tokens]:,} tokens"),
        TextColumn("cost {task.fields[cost]:.4f}"),
        TimeElapsedColumn(),
        console=err_console,
        disable=not sys.stderr.isatty(),
    )


def _payload(
    result: Any,
    fitted: Any,
    notes: list[str],
    endpoints: list[dict],
    families: dict[str, str | None] | None = None,
) -> dict[str, Any]:
    from ..judging.auto_arena import review_judges, self_preference
    from ..judging.injection import judge_disagreement, summarise
    from ..judging.probes import probe_report

    d = fitted.to_dict()
    judges, warnings = review_judges(fitted, [j for j in result.judges if j not in result.excluded])
    probes = probe_report(result.probes, result.judges, result.calls)
    for name, reason in result.excluded.items():
        n = sum(r["judge"] == name and r.get("outcome") is not None for r in result.judgements)
        judges.append(
            {
                "annotator": name,
                "records": n,
                "ability": None,
                "ability_se": None,
                "status": "flagged",
                "flagged": True,
                "reason": f"{reason}; its {n} verdict(s) left out of the fit",
            }
        )
        warnings.append(f"judge {name} {reason}: its verdicts weigh nothing")
    warnings += self_preference(result.judgements, families or {})
    injections = summarise(result.judgements)
    for model, row in injections.items():
        acts = ", ".join(f"{k} {v}" for k, v in sorted(row["actions"].items()))
        warnings.append(
            f"{model}'s answers talk to the judge in {row['flagged_battles']} battle(s) "
            f"(rules: {', '.join(sorted(row['rules']))}; done: {acts})"
        )
    disagreement = judge_disagreement(result.judgements)
    for model, row in disagreement.items():
        if row["flagged"]:
            warnings.append(
                f"the judges disagree about {model} beyond chance (Cochran's Q = {row['q']:g} on "
                f"{row['df']} df, p = {row['p_value']:.2g}): {row['favoured_by']} favours it "
                f"(z = {row['z']:+.1f}) where the other judges do not; its answers may address "
                f"the judge (the detector flagged {row['detector']} battle(s))"
            )
    failures: dict[str, int] = {}
    for rec in result.failures:
        failures[rec["reason"]] = failures.get(rec["reason"], 0) + 1
    return {
        "method": d["method"],
        "stop_reason": result.stop_reason,
        "judge_calls": result.calls,
        "judgements": len(result.judgements) - len(result.failures),
        "failed_judgements": failures,
        "answers": result.answers,
        "prompt_tokens": result.prompt_tokens,
        "completion_tokens": result.completion_tokens,
        "cost": result.cost,
        "resumed": result.resumed,
        "notes": notes + list(d.get("notes", [])),
        "warnings": warnings,
        "injections": injections,
        "judge_disagreement": disagreement,
        "probes": probes,
        "models": d["models"],
        "annotators": judges,
        "endpoints": endpoints,
    }


def _print(p: dict[str, Any]) -> None:
    caption = (
        f"{p['judgements']:,} judgements, {p['judge_calls']:,} judge calls, "
        f"{p['prompt_tokens'] + p['completion_tokens']:,} tokens, cost {p['cost']:.4f}; "
        f"stopped: {p['stop_reason']}"
    )
    console.print(records_table(p["models"], title=f"{p['method']} leaderboard", caption=caption))
    if p.get("benchmark_metrics"):
        met = p["benchmark_metrics"]
        console.print(
            "benchmark metrics (90% intervals): "
            + ", ".join(
                f"{k}: {round(v, 3) if isinstance(v, float) else v}"
                for k, v in met.items()
                if v != []
            )
        )
    if p["annotators"]:
        shown = [{k: v for k, v in r.items() if k != "flagged"} for r in p["annotators"]]
        console.print(records_table(shown, title="judges (annotators; se: standard error)"))
    probed = [r for r in p["probes"]["judges"] if r["status"] != "untested"]
    if probed:
        cols = ("judge", "status", "noted_calls", "picked_noted", "control_calls")
        shown = [
            {**{k: r[k] for k in cols}, "susceptibility": r["susceptibility"], "se": r["se"]}
            for r in probed
        ]
        share = p["probes"]["probe_share"]
        console.print(
            records_table(
                shown,
                title=f"probes ({p['probes']['probe_calls']:,} judge calls, {share:.1%} of all)",
            )
        )
    if p["failed_judgements"]:
        failed = ", ".join(f"{k}: {v}" for k, v in sorted(p["failed_judgements"].items()))
        err_console.print(f"failed judgements (never votes): {failed}")
    for note in p["notes"]:
        err_console.print(f"note: {note}")
    for warning in p["warnings"]:
        _print_err(warning, "warning:", "bold yellow")


@app.command("auto-power")
def auto_power(
    journal: Annotated[
        Path,
        typer.Option(
            "--journal",
            help="The JSONL journal of a running or finished `stablearena auto` (read from a "
            "copy: a running run's file is never touched).",
            exists=True,
            dir_okay=False,
        ),
    ],
    top: Annotated[
        int | None,
        count_option(
            "--top",
            "Calls to separate the top K models, as --precision-top K stops.",
            1,
            10**6,
            "K",
        ),
    ] = None,
    pair: Annotated[
        tuple[str, str] | None,
        typer.Option("--pair", help="Calls to separate these two models.", metavar="A B"),
    ] = None,
    confidence: Annotated[
        float, typer.Option("--confidence", help="Confidence level of the separation.")
    ] = 0.95,
    power: Annotated[
        float | None,
        typer.Option(
            "--power",
            help="With --pair: the chance of separating if the true gap is the estimated one "
            "(e.g. 0.8); default: the estimated gap plugged in (a 50% chance).",
        ),
    ] = None,
    prompts: Annotated[
        int | None,
        count_option(
            "--prompts",
            "Size of the run's prompt set (default: the prompts in the journal, a lower bound).",
            1,
            10**9,
            "N",
        ),
    ] = None,
    rater: Annotated[
        str, typer.Option("--rater", help="am-elo or m-elo, as the run's --rater.")
    ] = "am-elo",
    fmt: Annotated[str, typer.Option("--format", help="table or json.")] = "table",
) -> None:
    """Predict the further judge calls (and prompts) a `stablearena auto` run needs to separate
    its top K models or a pair, from its current fit (stablearena.judging.power)."""
    import shutil
    import tempfile

    from ..errors import InputError
    from ..judging.auto_arena import AutoResult, JsonlJournal, replay_records
    from ..judging.power import power_estimate

    if fmt not in ("table", "json"):
        raise InputError(f"--format must be table or json, not {fmt!r}")
    with tempfile.TemporaryDirectory() as tmp:
        copy = Path(tmp) / "journal.jsonl"
        shutil.copyfile(journal, copy)
        jr = JsonlJournal(copy)
        try:
            records = replay_records(jr)  # checked, each record once (as a resumed run reads it)
        finally:
            jr.close()
    head = next((r for r in records if r.get("type") == "run"), None)
    if head is None:
        raise InputError(f"{journal}: no run record; is it the journal of `stablearena auto`?")
    result = AutoResult(tuple(head["models"]), tuple(head["judges"]))
    seen: set[str] = set()
    for rec in records:
        if rec.get("type") == "judgement":
            result.judgements.append(rec)
            result.calls += rec["calls"]
        if "prompt_id" in rec:
            seen.add(rec["prompt_id"])
    est = power_estimate(
        result,
        prompts=prompts or len(seen),
        top=top,
        pair=pair,
        level=confidence,
        power=power,
        rater=rater,
        seed=int(head.get("seed") or 0),
    )
    d = est.to_dict()
    if prompts is None:
        d["notes"].append(
            f"prompt set size taken as the {len(seen)} prompts in the journal (give --prompts N)"
        )
    if fmt == "json":
        sys.stdout.write(__import__("json").dumps(d, indent=2) + "\n")
        return
    _print_power(d)


def _print_power(d: dict[str, Any]) -> None:
    where = f"{d['target']} at {d['level']:.0%}"
    if d["power"] is not None:
        where += f" with {d['power']:.0%} power"
    so_far = f"{d['calls_so_far']:,} judge calls so far"
    if d["separated_now"]:
        console.print(f"{where}: separated already ({so_far})")
    elif d["calls"] is None:
        console.print(f"{where}: not reachable as the design spends its calls ({so_far})")
    else:
        console.print(
            f"{where}: about {d['calls']:,} more judge calls ({d['judgements']:,} judgements; "
            f"{so_far}); the busiest pair would use {d['prompts_needed']:,} of "
            f"{d['prompts']:,} prompts"
        )
    pred = d.get("predictive")
    if pred:
        q = [f"{v:,}" if v is not None else "never" for v in
             (pred["calls_q25"], pred["calls_median"], pred["calls_q75"])]  # fmt: skip
        console.print(
            f"predictive (true scores and future verdicts drawn, {pred['draws']} paths): median "
            f"{q[1]} more judge calls, quartiles {q[0]} – {q[2]}; "
            f"{pred['share_not_separated']:.0%} not separated within "
            f"{pred['horizon_calls']:,} calls"
        )
    for note in d["notes"]:
        err_console.print(f"note: {note}")
