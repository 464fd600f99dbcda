"""``stablearena next-pairs`` and ``stablearena experiment selection`` (adaptive pair selection)."""

import sys
import warnings
from pathlib import Path
from typing import Annotated, Any

import typer

from ..atomic import atomic_path
from ..errors import InputError, StableArenaWarning
from .common import (
    DATA_OPTIONS,
    FormatOpt,
    OutputOpt,
    PathArg,
    app,
    check_outputs,
    count,
    count_option,
    emit,
    err_console,
    experiment_app,
    fit_progress,
    load_data,
    positive,
    records_table,
    require_module,
    seed_option,
    split_list,
    with_options,
)

EstimateOpt = Annotated[
    str,
    typer.Option(
        "--estimate",
        help="a-opt/d-opt/rank-opt: ratings the information is evaluated at: 'empirical-bayes' "
        "(shrunk by their uncertainty) or 'plug-in' (as fitted, the paper's).",
    ),
]


@app.command("next-pairs")
@with_options(DATA_OPTIONS)
def next_pairs(
    path: PathArg = None,
    k: Annotated[
        int,
        typer.Option(
            "-k", "--pairs", help="How many pairs to propose.", callback=count(1, 100_000)
        ),
    ] = 10,
    strategy: Annotated[
        str | None,
        typer.Option(
            "--strategy",
            "-s",
            help="random, nearest, ada-pair, arena-weights, a-opt, d-opt, rank-opt, "
            "a-opt-grounded, d-opt-grounded (default: stablearena.design.selection.DEFAULT_STRATEGY, "
            "d-opt, chosen on pooled evidence: docs/methods/default-design.md).",
        ),
    ] = None,
    annotator: Annotated[
        str | None,
        typer.Option("--annotator", help="Leave out the pairs this annotator has already judged."),
    ] = None,
    skip_model: Annotated[
        list[str] | None,
        typer.Option(
            "--skip-model",
            help="Never propose this model (e.g. an outage); its battles still count. Repeat or comma-separate.",
        ),
    ] = None,
    method: Annotated[
        str, typer.Option("--method", "-m", help="Rater whose current ratings guide the choice.")
    ] = "m-elo",
    batch_mode: Annotated[
        str,
        typer.Option(
            "--batch-mode",
            help="a-opt/d-opt/rank-opt: 'greedy' (update the information after each pick) or "
            "'top-k' (the paper's).",
        ),
    ] = "greedy",
    estimate: EstimateOpt = "empirical-bayes",
    weights: Annotated[
        str,
        typer.Option(
            "--weights",
            help="rank-opt: each pair's weight, the sensitivity of its misordering probability "
            "'expected' over the true gap given the estimate, or at the 'plug-in' gap.",
        ),
    ] = "expected",
    distinct: Annotated[
        bool,
        typer.Option(
            "--distinct", help="No pair twice in the batch (one per concurrent annotator)."
        ),
    ] = False,
    seed: Annotated[
        int,
        seed_option("Seed for random choices and ties.", None),
    ] = 0,
    *,
    fmt: FormatOpt = "table",
    output: OutputOpt = None,
    **options: Any,
) -> None:
    """The pairs to run next for a battle log, with each pick's expected information gain.

    d-opt's gain is the rise of ln det of the Fisher information the battle would bring; a-opt's
    the fall of the total variance of the ratings (natural units²); rank-opt's the fall of the
    expected number of misordered pairs (first order). A batch is greedy: each pick is counted
    as played before the next one is chosen.
    """
    import numpy as np

    from ..data.battles import Battles, as_counts
    from ..design.selection import DEFAULT_STRATEGY, InformationTracker, get_selector
    from ..raters.base import get_rater

    strategy = strategy or DEFAULT_STRATEGY

    loaded = load_data(
        path,
        **options,
        counts_only=annotator is None,
    )
    data = loaded.data
    selector_options: dict[str, Any] = {}
    if strategy in ("a-opt", "d-opt", "rank-opt"):
        selector_options["batch_mode"] = batch_mode
        selector_options["estimate"] = estimate
    if strategy == "rank-opt":
        selector_options["weights"] = weights
    selector = get_selector(strategy, **selector_options)
    exclude_pairs: list[tuple[int, int]] = []
    if annotator is not None:
        if not isinstance(data, Battles) or data.annotator is None:
            raise InputError(
                f"{loaded.label}: --annotator needs a battle log with an annotator column "
                "(map it with --col annotator=NAME)."
            )
        if annotator not in data.annotators:  # type: ignore[operator]
            raise InputError(f"{loaded.label}: annotator {annotator!r} does not occur in the log.")
        mine = data.annotator == data.annotators.index(annotator)  # type: ignore[union-attr]
        a, b = data.model_a[mine], data.model_b[mine]
        exclude_pairs = sorted(
            {(int(min(x, y)), int(max(x, y))) for x, y in zip(a, b, strict=True)}
        )
    with fit_progress(f"fitting {method} on {loaded.label}"):
        fitted = get_rater(method).fit(data)
    counts = as_counts(data)
    skipped = split_list(skip_model)
    with fit_progress(f"{strategy}: choosing {k} pair(s) among {counts.n_models:,} models"):
        tracker = InformationTracker.from_counts(
            counts, np.asarray(fitted.scores, dtype=float), estimate=selector.estimate or "plug-in"
        )
        sel = selector.select(
            tracker,
            k,
            rng=seed,
            exclude_models=skipped,
            exclude_pairs=exclude_pairs,
            distinct=distinct,
        )
    notes = []
    if len(sel.pairs) < k:  # --distinct (or the exclusions) left fewer pairs than asked for
        why = "pairs of models" if distinct else "pairs"
        notes.append(
            f"{len(sel.pairs)} pairs, not the {k} asked for: only {len(sel.pairs)} distinct {why} "
            f"remain among the {tracker.n_models - len(skipped)} models that may be proposed"
            + (
                f" after the {len(exclude_pairs)} pairs {annotator} has judged"
                if exclude_pairs
                else ""
            )
            + ("; without --distinct a pair may come back" if distinct else "")
            + "."
        )
        warnings.warn(notes[-1], StableArenaWarning, stacklevel=1)
    pairs = []
    for rank, (rec, (i, j)) in enumerate(zip(sel.to_records(), sel.pairs, strict=True), start=1):
        pairs.append(
            {
                "rank": rank,
                "model_a": rec["model_a"],
                "model_b": rec["model_b"],
                "gain": rec["gain"],
                "warm_up": rec["warm_up"],
                "battles_so_far": int(round(tracker.pair_battles[i, j])),
                "expected_score_a": float(fitted.predict(int(i), int(j))),
            }
        )
    payload = {
        "strategy": sel.strategy,
        "criterion": sel.criterion,
        "method": method,
        "estimate": tracker.estimate,
        "source": loaded.label,
        "n_models": tracker.n_models,
        "n_battles": int(round(tracker.n_battles)),
        "annotator": annotator,
        "excluded_pairs": len(exclude_pairs),
        "skipped_models": skipped,
        "requested": k,
        "notes": notes,
        "pairs": pairs,
    }

    def table(p: dict[str, Any]) -> Any:
        title = f"Next {len(p['pairs'])} pairs — {p['strategy']} on {p['method']} ratings"
        caption = (
            f"gain: {p['criterion']} at the {p['estimate']} ratings; "
            f"{p['n_battles']:,} battles of {p['n_models']} models"
        )
        if p["annotator"] is not None:
            caption += f"; {p['excluded_pairs']} pairs already judged by {p['annotator']} left out"
        return records_table(p["pairs"], title=title, caption=caption)

    emit(payload, fmt, output, records_key="pairs", table=table)


@experiment_app.command("selection")
@with_options(DATA_OPTIONS)
def experiment_selection(
    path: PathArg = None,
    simulate: Annotated[
        int | None,
        count_option(
            "--simulate",
            "Simulation mode with this many models (instead of PATH).",
            2,
            100_000,
            None,
        ),
    ] = None,
    fit: Annotated[
        str | None,
        typer.Option(
            "--fit",
            help="Simulate from this tie model fitted to PATH (rao-kupper or davidson; with the "
            "log's annotator abilities when it names annotators) instead of replaying it.",
        ),
    ] = None,
    strategies: Annotated[
        str, typer.Option("--strategies", help="Comma-separated strategies to compare.")
    ] = "random,nearest,ada-pair,a-opt,d-opt,rank-opt",
    init: Annotated[
        int,
        count_option("--init", "Initial random battles.", 0, 100_000_000, None),
    ] = 100,
    steps: Annotated[
        str, typer.Option("--steps", help="Selected battles at which to record, comma-separated.")
    ] = "100,200,500,1000",
    grid: Annotated[
        int,
        count_option(
            "--grid", "Selected battles between two points of the curves.", 1, 100_000_000, None
        ),
    ] = 50,
    seeds: Annotated[int, count_option("--seeds", "Repetitions.", 1, 100_000, None)] = 5,
    baseline: Annotated[
        str,
        typer.Option(
            "--baseline", help="Strategy of the paired differences and battles-to-target."
        ),
    ] = "random",
    workers: Annotated[
        int,
        count_option("--workers", "Processes running seeds in parallel.", 1, 256, None),
    ] = 1,
    bound_seeds: Annotated[
        int,
        count_option(
            "--bound-seeds",
            "Simulated arenas: for this many seeds, also the best any allocation of the "
            "battles can reach in the normal approximation (slow: minutes per seed at 100+ "
            "models).",
            0,
            100_000,
            None,
        ),
    ] = 0,
    batch: Annotated[
        int, typer.Option("--batch", help="Pairs chosen per refit (greedy batches).")
    ] = 1,
    rater: Annotated[
        str, typer.Option("--rater", help="Refit inside the loop: m-elo (exact) or elo (online).")
    ] = "m-elo",
    spread: Annotated[
        float, typer.Option("--spread", help="Simulation: std of the true ratings, Elo points.")
    ] = 100.0,
    estimate: EstimateOpt = "empirical-bayes",
    seed: Annotated[int, seed_option("Base seed.", None)] = 0,
    plot: Annotated[
        Path | None,
        typer.Option(
            "--plot", help="PNG of the curves and pair-choice heatmaps (default: beside --output)."
        ),
    ] = None,
    *,
    fmt: FormatOpt = "table",
    output: OutputOpt = None,
    **options: Any,
) -> None:
    """The "Fewer Battles, More Gain" Table 2 protocol: replay a real log (PATH), simulate from
    a tie model fitted to it (PATH --fit rao-kupper), or simulate (--simulate N).

    Each strategy starts from the same INIT random battles per seed and picks pairs (outcomes
    drawn without replacement from the log, from the fitted model, or simulated with ties
    2p(1 − p)); the pairwise agreement with the ground truth and the A-Info / D-Info of the
    chosen battles are recorded at each step. The table adds the paired difference from the
    baseline (mean ± standard error over seeds, seeds won) and battles-to-target: the selected
    battles each strategy needs to reach the baseline's pairwise metric at the last step.
    """
    import numpy as np

    from .._threads import single_threaded_blas
    from ..simulation.experiments.selection import (
        plot_selection_experiment,
        run_selection_experiment,
    )

    if (path is None) == (simulate is None):
        raise InputError("give either a battle log PATH (replay mode) or --simulate N_MODELS.")
    if fit is not None and path is None:
        raise InputError("--fit simulates from a model fitted to a battle log: give PATH too.")
    if plot is None and output is not None and str(output) != "-":
        plot = output.with_suffix(".png")
    if plot is not None:
        require_module("matplotlib", "--plot", "plot")
        check_outputs({"plot": plot, "output": output, "path": path})
    if fmt.lower() == "csv":
        raise InputError("experiment selection writes --format table or json (nested results).")
    try:
        step_list = [int(s) for s in split_list([steps])]
    except ValueError:
        raise InputError(f"--steps must be comma-separated integers, not {steps!r}.") from None
    if any(s > 100_000_000 for s in step_list):
        raise InputError(f"--steps must be at most 100,000,000 selected battles, not {steps!r}.")
    names = split_list([strategies])
    data = None
    if path is not None:
        data = load_data(
            path,
            **options,
        ).data
    total = len(names) * seeds
    done = [0]

    def progress(name: str, sd: int) -> None:
        done[0] += 1
        if sys.stderr.isatty():
            err_console.print(f"  {done[0]}/{total}: {name}, seed {sd}", highlight=False)

    with warnings.catch_warnings(), single_threaded_blas():
        warnings.simplefilter("ignore", StableArenaWarning)
        result = run_selection_experiment(
            data,
            n_models=simulate,
            fit=fit,
            strategies=names,
            init=init,
            steps=step_list,
            grid=grid,
            seeds=seeds,
            baseline=baseline,
            workers=workers,
            bound_seeds=bound_seeds,
            batch=batch,
            rater=rater,
            spread=spread,
            estimate=estimate,  # type: ignore[arg-type]
            seed=seed,
            progress=progress,
        )
    payload = result.to_dict()
    if plot is not None:
        try:
            with atomic_path(plot) as tmp:
                plot_selection_experiment(result, tmp)
        except OSError as exc:
            raise InputError(f"cannot write {plot}: {exc.strerror}.") from None
        err_console.print(f"wrote {plot}")
        payload["settings"]["plot"] = str(plot)

    def table(p: dict[str, Any]) -> Any:
        rows = []
        st = p["settings"]
        for name, v in p["strategies"].items():
            row: dict[str, Any] = {"strategy": name, "mean": v["mean"]}
            for s, vals in v["pairwise"].items():
                row[f"@{s}"] = float(np.mean(vals))
            summ = p["summary"][name]
            paired, reach = summ["paired"], summ["battles_to_target"]
            if paired is not None and name == st["baseline"]:
                row["vs baseline"], row["seeds won"] = "(baseline)", ""
            elif paired is not None:
                row["vs baseline"] = f"{paired['mean_diff']:+.4f} ± {paired['se']:.4f}"
                row["seeds won"] = f"{paired['won']}/{st['seeds']}"
            pe = summ.get("paired_expected")
            if pe is not None:
                row["E(pairwise) vs baseline"] = (
                    "(baseline)" if name == st["baseline"] else f"{pe['mean_diff']:+.4f}"
                )
            if reach is not None:
                b = reach["battles"]
                row["battles-to-target"] = (
                    f"> {st['steps'][-1]}" if b is None else f"{b:.0f} ({reach['fraction']:.0%})"
                )
            row["A-Info/battle"] = summ["a_info_growth"]
            row["D-Info/battle"] = summ["d_info_growth"]
            row["max/median model"] = summ["max_model_share_over_median"]
            rows.append(row)
        what = st.get("source") or f"{st['n_models']} simulated models"
        title = f"Pair selection ({st['mode']}): {what}"
        caption = (
            f"pairwise metric vs ground truth ({st['ground_truth']}), mean of {st['seeds']} seeds; "
            f"init {st['init']}, batch {st['batch']}, rater {st['rater']}"
        )
        if st["baseline"] is not None:
            caption += (
                f"; vs baseline: paired difference from {st['baseline']} (mean ± standard error "
                f"over seeds); battles-to-target: selected battles to reach {st['baseline']}'s "
                f"seed-mean pairwise metric at step {st['steps'][-1]} (seed-mean curve every "
                f"{st['grid']} battles, linear interpolation)"
            )
        if any(v.get("paired_expected") for v in p["summary"].values()):
            caption += (
                "; E(pairwise): expected pairwise metric of the chosen battles in the normal "
                "approximation (no outcome noise)"
            )
        bounds = p.get("bound") or []
        least = [b["least_selected"] for b in bounds if b.get("least_selected") is not None]
        if bounds:
            caption += (
                f"; bound over {len(bounds)} seeds: the best allocation of "
                f"{bounds[0]['battles']} battles reaches E(pairwise) "
                f"{np.mean([b['best'] for b in bounds]):.4f}, and over the steps no design "
                f"gains more than {np.mean([b['best_gain'] for b in bounds]):+.4f} on even pairs "
                "in expectation"
            )
            if least:
                caption += (
                    f" and needs {np.mean(least):.0f} selected battles "
                    f"({np.mean(least) / st['steps'][-1]:.0%}) to reach the baseline's E(pairwise) at the last step"
                )
        return records_table(rows, title=title, caption=caption)

    emit(payload, fmt, output, records_key="strategies", table=table)


@experiment_app.command("selection-pooled")
def experiment_selection_pooled(
    results: Annotated[
        list[Path],
        typer.Argument(
            help="JSON results of `stablearena experiment selection --format json`, one per "
            "arena (the file name, without .json, labels the arena).",
            metavar="RESULT.json...",
        ),
    ],
    strategies: Annotated[
        str | None,
        typer.Option(
            "--strategies", help="Comma-separated strategies to compare (default: all run)."
        ),
    ] = None,
    baseline: Annotated[
        str, typer.Option("--baseline", help="Strategy every other is compared with first.")
    ] = "random",
    incumbent: Annotated[
        str,
        typer.Option(
            "--incumbent",
            help="The default a challenger must beat (docs/methods/default-design.md).",
        ),
    ] = "d-opt",
    threshold: Annotated[
        float,
        typer.Option(
            "--threshold",
            help="Pooled standard errors by which a challenger must beat the incumbent.",
            callback=positive,
        ),
    ] = 2.0,
    fmt: FormatOpt = "table",
    output: OutputOpt = None,
) -> None:
    """Pool `experiment selection` results over arenas and apply the default-design rule.

    Per pair of strategies (each minus the baseline, then each pair of the others with the
    incumbent as the reference): the paired difference of the pairwise metric (per seed, the
    mean over the recorded steps) on each arena, mean ± standard error (seeds won), and pooled
    over the arenas by a DerSimonian–Laird random-effects mean, whose standard error carries
    the between-arena variance; sign test over arena × seed. The rule: the incumbent stays the
    default unless a challenger's pooled lead over it is at least THRESHOLD standard errors.
    """
    import json

    from ..simulation.experiments.selection import pooled_comparison

    payloads = []
    for path in results:
        try:
            payloads.append(json.loads(path.read_text(encoding="utf-8")))
        except OSError as exc:
            raise InputError(f"cannot read {path}: {exc.strerror or exc}.") from None
        except (json.JSONDecodeError, UnicodeDecodeError) as exc:
            raise InputError(
                f"{path}: not JSON ({exc}); give the file `stablearena experiment selection "
                "--format json -o FILE` wrote."
            ) from None
    labels = [p.name.removesuffix(".json") for p in results]
    res = pooled_comparison(
        payloads,
        labels=labels,
        strategies=split_list([strategies]) if strategies else None,
        baseline=baseline,
        incumbent=incumbent,
        threshold=threshold,
    )
    res["files"] = [str(p) for p in results]

    def table(p: dict[str, Any]) -> Any:
        rows = []
        for c in p["comparisons"]:
            row: dict[str, Any] = {"difference": f"{c['strategy']} − {c['reference']}"}
            for label, a, n in zip(p["arenas"], c["arenas"], p["seeds"], strict=True):
                row[label] = f"{a['mean_diff']:+.4f} ± {a['se']:.4f} ({a['won']}/{n})"
            row["pooled"] = f"{c['mean_diff']:+.4f} ± {c['se']:.4f}"
            row["z"] = f"{c['mean_diff'] / c['se']:+.2f}"
            row["tau"] = f"{c['tau']:.4f}"
            row["seeds won/lost"] = f"{c['won']}/{c['lost']} (p={c['sign_p']:.2g})"
            rows.append(row)
        caption = (
            "paired difference of the pairwise metric (per seed: mean over the steps), per arena "
            "mean ± SE (seeds won/seeds); pooled: DerSimonian–Laird random-effects mean ± SE "
            "over the arenas, tau: between-arena sd; seeds won/lost over arena × seed with the "
            "two-sided sign-test p"
        )
        rule = p["rule"]
        if rule is not None:
            beat = [n for n, ch in rule["challengers"].items() if ch["beats_incumbent"]]
            caption += (
                f". Rule: {rule['incumbent']} stays unless a challenger leads it by ≥ "
                f"{rule['threshold']:g} SE → default: {rule['default']}"
                + (f" ({', '.join(beat)} beat it)" if beat else " (no challenger did)")
            )
        return records_table(
            rows,
            title=f"Pair selection pooled over {len(p['arenas'])} arena"
            + ("s" if len(p["arenas"]) > 1 else ""),
            caption=caption,
        )

    emit(res, fmt, output, records_key="comparisons", table=table)
