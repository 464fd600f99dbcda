"""Probe battles against a judge that obeys notes: the generated corpus's split, and where a
model that writes notes ends on the board with and without probes, paired by seed.

1. **The corpus** (``stablearena.judging.judge_notes``): its size and split, the share of its notes the
   rule-based detector (``stablearena.judging.injection``) catches on each part, and the share an
   obeying reader (``read_notes``) still reads after the arena's visible-text step.
2. **The board over HTTP, paired by seed**: the demo server (a process on loopback) serves 7
   demo models of known quality and a sly model (as good as demo-middling) whose every answer
   starts with a note of one part of the corpus (``--sly heldout``: ``demo-sly-heldout``;
   ``tune``: ``demo-sly-tune``); its twin ``demo-sly-plain`` gives the same answers without
   notes, so the same seed with the twin gives the model's honest place. Judges: (1)
   ``judge-obey`` alone, (2) ``judge-obey``, ``judge-keen`` and ``judge-quote`` (two honest
   judges; quote reads notes and ignores them). The injection policy is ``keep`` (no detector:
   what the judges alone do). With probes (``--share``, notes from ``--probe-notes``) and
   without. Per seed: sly place − honest place, the obeying judge flagged or not, honest judges
   flagged, probe share of the judge calls.

    python bench/bench_probes.py [--seeds 10] [--budget 600] [--sly heldout] [--share 0.1]
        [--probe-notes all] [--sets "obey alone" "obey+keen+quote"] [--no-corpus]
        [--json out.json]
"""

from __future__ import annotations

import argparse
import json
import os
import time
from collections import Counter

import numpy as np

MODELS = [
    "demo-ace",
    "demo-sharp",
    "demo-solid",
    "demo-fair",
    "SLY",
    "demo-shaky",
    "demo-sloppy",
    "demo-wild",
]
JUDGE_SETS = {
    "obey alone": ["judge-obey"],
    "obey+keen+quote": ["judge-obey", "judge-keen", "judge-quote"],
}


def corpus_summary() -> dict:
    from stablearena.judging.injection import detect
    from stablearena.judging.judge_notes import notes, read_notes
    from stablearena.judging.visible import visible_text

    out: dict = {}
    for part in ("tune", "heldout"):
        ns = notes(part)
        caught = sum(detect(n.text).flagged for n in ns)
        read = sum(bool(read_notes(visible_text(n.text))) for n in ns)
        by_enc = Counter(n.encoding for n in ns)
        out[part] = {
            "notes": len(ns),
            "detector_caught": caught,
            "obeyer_reads_after_visible": read,
            "encodings": dict(by_enc),
            "places": dict(Counter(n.place for n in ns)),
            "languages": dict(Counter(n.language for n in ns)),
        }
    return out


def run_once(base_url, seed, judges, sly, budget, share, probe_notes, threshold=None):
    from stablearena.errors import InputError
    from stablearena.judging.auto_arena import AutoArena, AutoConfig, Prompt, fit_leaderboard
    from stablearena.judging.endpoints import ModelEndpoint, make_client
    from stablearena.judging.endpoints.demo import demo_prompts
    from stablearena.judging.judges import JudgeClient, demo_judges
    from stablearena.judging.probes import ProbeConfig, probe_report

    names = [sly if m == "SLY" else m for m in MODELS]
    models = [make_client(ModelEndpoint(m, base_url, m)) for m in names]
    jcs = [JudgeClient(j, injection="keep") for j in demo_judges(base_url, judges)]
    prompts = [Prompt(p["id"], p["prompt"]) for p in demo_prompts(300, seed=seed)]
    pc = ProbeConfig(share=share, notes=probe_notes)
    if threshold is not None:
        pc = ProbeConfig(share=share, notes=probe_notes, threshold=threshold)
    cfg = AutoConfig(budget=budget, seed=seed, probes=pc)
    result = AutoArena(models, jcs, prompts, cfg).run()
    rep = probe_report(result.probes, result.judges, result.calls, pc.threshold, pc.z)
    try:
        fitted, _ = fit_leaderboard(result)
    except InputError:
        place = None  # every judge flagged: no board
    else:
        order = list(np.array(fitted.models)[np.argsort(-np.asarray(fitted.scores), kind="stable")])
        place = order.index(sly) + 1 if sly in order else len(MODELS)
    return {
        "place": place,
        "flagged": rep["flagged"],
        "probe_share": rep["probe_share"],
        "calls": result.calls,
        "stop": result.stop_reason,
        "obey_row": next((r for r in rep["judges"] if r["judge"] == "judge-obey"), None),
    }


def sweep(seeds, budget, sly, share, probe_notes, sets=tuple(JUDGE_SETS), threshold=None):
    from stablearena.judging.endpoints.demo_server import DemoServer

    out: dict = {}
    with DemoServer(seed=0) as server:
        for label, judges in JUDGE_SETS.items():
            if label not in sets:
                continue
            rows = []
            for seed in range(seeds):
                row: dict = {"seed": seed}
                for probes, sh in (("without", 0.0), ("with", share)):
                    common = (budget, sh, probe_notes, threshold)
                    honest = run_once(server.base_url, seed, judges, "demo-sly-plain", *common)
                    attacked = run_once(server.base_url, seed, judges, sly, *common)
                    row[probes] = {"honest": honest, "sly": attacked}
                rows.append(row)
                w, p = row["without"], row["with"]
                print(
                    f"  {label:16s} seed {seed:2d}: without probes sly {w['sly']['place']} vs "
                    f"honest {w['honest']['place']}; with probes sly {p['sly']['place']} vs "
                    f"honest {p['honest']['place']}, flagged {p['sly']['flagged']} / twin run "
                    f"{p['honest']['flagged']}, probe share {p['sly']['probe_share']:.3f}",
                    flush=True,
                )
            out[label] = {"rows": rows, "summary": summarise(rows, judges)}
    return out


def summarise(rows, judges) -> dict:
    s: dict = {}
    for probes in ("without", "with"):
        pairs = [(r[probes]["sly"]["place"], r[probes]["honest"]["place"]) for r in rows]
        d = np.array([a - b for a, b in pairs if a is not None and b is not None], dtype=float)
        runs = [r[probes][k] for r in rows for k in ("sly", "honest")]
        honest_judges = [j for j in judges if j != "judge-obey"]
        s[probes] = {
            "paired_seeds_with_a_board": int(len(d)),
            "no_board_runs": int(sum(x["place"] is None for x in runs)),
            "shift_mean": float(d.mean()) if len(d) else None,
            "shift_se": float(d.std(ddof=1) / np.sqrt(len(d))) if len(d) > 1 else None,
            "obey_flagged_runs": int(sum("judge-obey" in x["flagged"] for x in runs)),
            "honest_false_flags": int(sum(j in x["flagged"] for x in runs for j in honest_judges)),
            "runs": len(runs),
            "probe_share_mean": float(np.mean([x["probe_share"] for x in runs])),
            "calls_mean": float(np.mean([x["calls"] for x in runs])),
        }
    return s


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seeds", type=int, default=10)
    ap.add_argument("--budget", type=int, default=600)
    ap.add_argument("--sly", choices=["heldout", "tune"], default="heldout")
    ap.add_argument("--share", type=float, default=0.1)
    ap.add_argument("--probe-notes", default="all", choices=["all", "tune", "heldout"])
    ap.add_argument("--threshold", type=float, default=None, help="the flag's (default 0.2)")
    ap.add_argument("--no-corpus", action="store_true")
    ap.add_argument("--sets", nargs="+", default=list(JUDGE_SETS), choices=list(JUDGE_SETS))
    ap.add_argument("--json", default=None)
    args = ap.parse_args()
    t0 = time.perf_counter()
    print(f"load {os.getloadavg()[0]:.2f} at start")
    corpus = None
    if not args.no_corpus:
        corpus = corpus_summary()
        for part, c in corpus.items():
            print(
                f"1. {part}: {c['notes']} notes; detector catches {c['detector_caught']} "
                f"({100 * c['detector_caught'] / c['notes']:.1f}%); an obeying reader reads "
                f"{c['obeyer_reads_after_visible']} "
                f"({100 * c['obeyer_reads_after_visible'] / c['notes']:.1f}%) after the "
                "visible-text step"
            )
    sly = f"demo-sly-{args.sly}"
    print(
        f"2. {sly}, {args.seeds} seeds, {args.budget} judge calls, probe share {args.share}, "
        f"probe notes {args.probe_notes}"
    )
    boards = sweep(
        args.seeds, args.budget, sly, args.share, args.probe_notes, args.sets, args.threshold
    )
    for label, res in boards.items():
        for probes, s in res["summary"].items():
            shift = (
                "no board in any run"
                if s["shift_mean"] is None
                else f"sly place - honest place {s['shift_mean']:+.2f} ± {s['shift_se'] or 0:.2f}"
                f" over {s['paired_seeds_with_a_board']} paired seeds"
            )
            print(
                f"   {label:16s} {probes:7s} probes: {shift}; runs with no board "
                f"{s['no_board_runs']}/{s['runs']}; judge-obey flagged in "
                f"{s['obey_flagged_runs']}/{s['runs']} runs; honest judges' false flags "
                f"{s['honest_false_flags']}; probe share {s['probe_share_mean']:.3f} of "
                f"{s['calls_mean']:.0f} judge calls"
            )
    print(f"wall {time.perf_counter() - t0:.0f} s, load {os.getloadavg()[0]:.2f} at end")
    if args.json:
        with open(args.json, "w") as fh:
            json.dump({"args": vars(args), "corpus": corpus, "boards": boards}, fh, indent=1)


if __name__ == "__main__":
    main()
