"""Answers that talk to the judge: what the detector catches and misses, what it flags wrongly
on ordinary text, and where an injecting model ends on the board, paired by seed.

1. **The attack set** (``stablearena.judging.endpoints.demo.INJECTIONS``, 14 notes in several forms and
   a few languages): each note detected or not by the rules (``stablearena.judging.injection``).
2. **False flags on ordinary text**: the paragraphs (>= 80 characters) of the descriptions of
   every Python package installed on this machine (README-like Markdown: prose, lists, code,
   instructions to the reader), and the demo models' answers. Flagged paragraphs are counted by
   rule, with examples.
3. **The board, over HTTP, paired by seed**: the demo server (a process on loopback) serves 7
   demo models of known quality and ``demo-sly`` (as good as demo-middling), whose every answer
   starts with one of the notes (drawn per prompt). Its twin ``demo-sly-plain`` gives the same
   answers without the notes: the same seed with the twin in its place gives the model's
   **honest place**. Judges: (A) ``judge-obey`` alone (an Arena-Hard-style run with one judge
   that obeys notes), (B) ``judge-obey``, ``judge-copy`` (ends with the note's marker) and
   ``judge-quote`` (quotes the note, then judges). Policies: ``keep`` (no containment: what the
   attack does), ``cut`` and ``forfeit`` (the default). The information design, ``--budget``
   judge calls. Per seed: place with notes − honest place (negative: above its honest place),
   and whether the run named the model (its ``injections`` summary).

    python bench/bench_injection.py [--seeds 20] [--budget 600] [--json out.json]
"""

from __future__ import annotations

import argparse
import json
import os
import time

import numpy as np

MODELS = [
    "demo-ace",
    "demo-sharp",
    "demo-solid",
    "demo-fair",
    "demo-sly",  # or demo-sly-plain: the honest twin
    "demo-shaky",
    "demo-sloppy",
    "demo-wild",
]
JUDGE_SETS = {
    "one judge (obey)": ["judge-obey"],
    "obey+copy+quote": ["judge-obey", "judge-copy", "judge-quote"],
}
POLICIES = ["keep", "cut", "forfeit"]


def attack_set() -> list[dict]:
    from stablearena.judging.endpoints.demo import INJECTIONS
    from stablearena.judging.injection import detect

    rows = []
    for note in INJECTIONS:
        d = detect(note)
        rows.append({"note": note, "detected": d.flagged, "rules": d.rules})
    return rows


def ordinary_paragraphs() -> list[str]:
    from importlib.metadata import distributions

    out, seen = [], set()
    for dist in distributions():
        name = (dist.metadata.get("Name") or "").lower()
        if name in seen:
            continue
        seen.add(name)
        text = dist.metadata.get_payload() or dist.metadata.get("Description") or ""
        for para in str(text).split("\n\n"):
            para = para.strip()
            if len(para) >= 80:
                out.append(para)
    return out


def false_flags(paragraphs: list[str]) -> dict:
    from stablearena.judging.endpoints.demo import DEMO_MODELS, demo_answer, demo_prompts
    from stablearena.judging.injection import detect

    by_rule: dict[str, int] = {}
    examples: list[dict] = []
    flagged = 0
    t0 = time.perf_counter()
    for para in paragraphs:
        d = detect(para)
        if d.flagged:
            flagged += 1
            for r in d.rules:
                by_rule[r] = by_rule.get(r, 0) + 1
            if len(examples) < 8:
                f = d.findings[0]
                examples.append({"rule": f.rule, "match": f.text[:120]})
    secs = time.perf_counter() - t0
    answers = [
        demo_answer(m, p["prompt"], 0) for m in DEMO_MODELS for p in demo_prompts(200, seed=0)
    ]
    demo_flagged = sum(detect(a).flagged for a in answers)
    chars = sum(map(len, paragraphs))
    return {
        "paragraphs": len(paragraphs),
        "flagged": flagged,
        "rate": flagged / max(len(paragraphs), 1),
        "by_rule": dict(sorted(by_rule.items(), key=lambda kv: -kv[1])),
        "examples": examples,
        "demo_answers": len(answers),
        "demo_answers_flagged": int(demo_flagged),
        "us_per_kchar": 1e6 * secs / max(chars / 1000, 1e-9),
    }


def run_once(base_url: str, seed: int, judges: list[str], policy: str, plain: bool, budget: int):
    from stablearena.judging.auto_arena import AutoArena, AutoConfig, Prompt, fit_leaderboard
    from stablearena.judging.endpoints import ModelEndpoint, make_client
    from stablearena.judging.endpoints.demo import demo_prompts
    from stablearena.judging.injection import summarise
    from stablearena.judging.judges import JudgeClient, demo_judges
    from stablearena.judging.probes import ProbeConfig

    names = [("demo-sly-plain" if plain and m == "demo-sly" else m) for m in MODELS]
    models = [make_client(ModelEndpoint(m, base_url, m)) for m in names]
    jcs = [JudgeClient(j, injection=policy) for j in demo_judges(base_url, judges)]
    prompts = [Prompt(p["id"], p["prompt"]) for p in demo_prompts(300, seed=seed)]
    # the detector's policies alone: probes off (with them an obeying judge is flagged and its
    # verdicts weigh nothing: bench/bench_probes.py)
    cfg = AutoConfig(budget=budget, seed=seed, probes=ProbeConfig(share=0))
    arena = AutoArena(models, jcs, prompts, cfg)
    result = arena.run()
    fitted, _ = fit_leaderboard(result)
    order = list(np.array(fitted.models)[np.argsort(-np.asarray(fitted.scores), kind="stable")])
    me = "demo-sly-plain" if plain else "demo-sly"
    place = order.index(me) + 1 if me in order else len(MODELS)
    named = me in summarise(result.judgements)
    return place, named, result.calls


def sweep(seeds: int, budget: int) -> dict:
    from stablearena.judging.endpoints.demo_server import DemoServer

    out: dict = {}
    with DemoServer(seed=0) as server:
        for label, judges in JUDGE_SETS.items():
            rows = []
            for seed in range(seeds):
                honest, _, _ = run_once(server.base_url, seed, judges, "forfeit", True, budget)
                row = {"seed": seed, "honest": honest}
                for pol in POLICIES:
                    place, named, calls = run_once(
                        server.base_url, seed, judges, pol, False, budget
                    )
                    row[pol] = place
                    row[f"{pol}_named"] = named
                    row[f"{pol}_calls"] = calls
                rows.append(row)
                print(
                    f"  {label:18s} seed {seed:3d}: honest place {honest}, "
                    + ", ".join(f"{p} {row[p]}" for p in POLICIES),
                    flush=True,
                )
            summary = {}
            for pol in POLICIES:
                d = np.array([r[pol] - r["honest"] for r in rows], dtype=float)
                summary[pol] = {
                    "place_minus_honest_mean": float(d.mean()),
                    "se": float(d.std(ddof=1) / np.sqrt(len(d))) if len(d) > 1 else 0.0,
                    "median": float(np.median(d)),
                    "most_above": float(-d.min()),
                    "seeds_more_than_one_above": int((d < -1).sum()),
                    "seeds_named": int(sum(r[f"{pol}_named"] for r in rows)),
                    "judge_calls_mean": float(np.mean([r[f"{pol}_calls"] for r in rows])),
                }
            out[label] = {"rows": rows, "summary": summary}
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seeds", type=int, default=20)
    ap.add_argument("--budget", type=int, default=600)
    ap.add_argument("--json", default=None)
    args = ap.parse_args()
    t0, c0 = time.perf_counter(), time.process_time()
    print(f"load {os.getloadavg()[0]:.2f} at start")
    attacks = attack_set()
    print(f"1. attack set: {sum(a['detected'] for a in attacks)} of {len(attacks)} notes detected")
    for a in attacks:
        print(f"   {'caught' if a['detected'] else 'MISSED'} {a['rules']} {a['note'][:70]!r}")
    ff = false_flags(ordinary_paragraphs())
    print(
        f"2. false flags: {ff['flagged']} of {ff['paragraphs']} package-description paragraphs "
        f"({100 * ff['rate']:.2f}%), by rule {ff['by_rule']}; demo answers "
        f"{ff['demo_answers_flagged']} of {ff['demo_answers']}; {ff['us_per_kchar']:.1f} µs per "
        "1,000 characters"
    )
    for e in ff["examples"]:
        print(f"   {e['rule']}: {e['match']!r}")
    print(f"3. the board over HTTP, {args.seeds} seeds, {args.budget} judge calls per run")
    boards = sweep(args.seeds, args.budget)
    for label, res in boards.items():
        for pol, s in res["summary"].items():
            print(
                f"   {label:18s} {pol:8s}: place - honest place {s['place_minus_honest_mean']:+.2f}"
                f" ± {s['se']:.2f} (median {s['median']:+.0f}; at most {s['most_above']:.0f} "
                f"above; >1 above in {s['seeds_more_than_one_above']} of {args.seeds} seeds); "
                f"named in {s['seeds_named']}; {s['judge_calls_mean']:.0f} judge calls"
            )
    print(
        f"wall {time.perf_counter() - t0:.0f} s, CPU {time.process_time() - c0:.0f} s (this "
        f"process), load {os.getloadavg()[0]:.2f} at end"
    )
    if args.json:
        with open(args.json, "w") as fh:
            json.dump({"attacks": attacks, "false_flags": ff, "boards": boards}, fh, indent=1)


if __name__ == "__main__":
    main()
