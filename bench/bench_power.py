"""The power estimate (``stablearena.judging.power``) against simulation: predicted vs needed calls.

Per seed: a local arena of ``--models`` demo models and the 5 demo judges on ``--prompts`` demo
prompts (in process, :class:`stablearena.judging.endpoints.demo.LocalDemoClient`), the information
design, run to ``--budget`` judge calls with the ``--precision-top K`` stop on (a seed that
separates before the budget is counted apart). At the budget, :func:`power_estimate` predicts
the further calls to separate the top K; the same run is then continued from its journal (same
seed, no budget, precision stop checked every ``--check-every`` judgements) until it separates,
and the further calls it needed are counted. Reported: per seed predicted, needed and their
ratio; the ratio's median, geometric mean, mean ± SE, and how many seeds are within ×1.5 — for the
plug-in estimate and for the predictive median — and how often the needed calls fall between
the predictive quartiles (50% if calibrated).

    python bench/bench_power.py [--seeds 20] [--budget 200] [--top 2] [--models 5]
        [--prompts 200] [--check-every 2] [--json out.json]
"""

from __future__ import annotations

import argparse
import json
import math
import time

import numpy as np

from stablearena.judging.auto_arena import (
    AutoArena,
    AutoConfig,
    MemoryJournal,
    Prompt,
    fit_judgements,
)
from stablearena.judging.endpoints.demo import DEMO_MODELS, LocalDemoClient, demo_prompts
from stablearena.judging.judges import JudgeClient, demo_judges
from stablearena.judging.power import information_model, power_estimate
from stablearena.raters.uncertainty import covariance


def arena(config: AutoConfig, journal, n_models: int, prompts) -> AutoArena:
    models = [LocalDemoClient(m.name) for m in DEMO_MODELS[:n_models]]
    judges = [
        JudgeClient(j, client=LocalDemoClient(j.name, system_prompt=j.endpoint.system_prompt))
        for j in demo_judges("http://127.0.0.1:1/v1")
    ]
    return AutoArena(models, judges, prompts, config, journal=journal)


def one_seed(
    seed: int,
    *,
    budget: int,
    top: int,
    n_models: int,
    n_prompts: int,
    check_every: int,
    cap: int = 20_000,
) -> dict:
    """Predicted vs needed further calls for one seed (``needed`` None: separated before the
    budget, or not within ``cap`` calls)."""
    prompts = [Prompt(p["id"], p["prompt"]) for p in demo_prompts(n_prompts, seed=seed)]
    journal = MemoryJournal()
    kw = dict(seed=seed, precision_top=top, check_every=check_every, parallel=4)
    first = arena(AutoConfig(budget=budget, **kw), journal, n_models, prompts).run()
    if first.stop_reason != "budget":
        return {"seed": seed, "stop": first.stop_reason, "calls": first.calls}
    est = power_estimate(first, prompts=len(prompts), top=top, seed=seed)
    again = arena(AutoConfig(budget=cap, **kw), journal, n_models, prompts).run()
    needed = again.calls - first.calls if again.stop_reason == "precision" else None
    check = decompose(first, again, top, seed, len(prompts)) if needed else {}
    return {
        "seed": seed,
        "stop": again.stop_reason,
        "calls": first.calls,
        "separated_now": est.separated_now,
        "predicted": est.calls,
        "predicted_median": (est.predictive or {}).get("calls_median"),
        "predicted_q25_q75": [
            (est.predictive or {}).get("calls_q25"),
            (est.predictive or {}).get("calls_q75"),
        ],
        "needed": needed,
        "prompts_out": est.prompts_out,
        **check,
    }


def decompose(first, again, top: int, seed: int, n_prompts: int) -> dict:
    """Which part of the prediction is off. At the stop, the deciding contrast is the adjacent
    pair of the top K (in the final order) with the smallest z = gap / sd. ``sd_ratio``: its sd
    predicted for the judgements the run actually needed (√cᵀ(J₀ + nΔJ)⁺c, the information part
    of the estimate) over the sd of the final fit; ``gap_ratio``: its gap at the stop over its
    gap when the estimate was made. ``oracle``: the plug-in's calls had it known the scores the
    run ends with (the information still the run's at the estimate): the truth-known bound of
    what a better gap estimate could give."""
    model = information_model(first)
    final, _ = fit_judgements(again.battles(), "am-elo")
    xf = np.asarray(final.scores, dtype=float)
    sf = np.asarray(covariance(final, "fisher").scores, dtype=float)
    order = final.order()
    n_more = sum(r.get("outcome") is not None for r in again.judgements) - len(model.ok)
    best = None
    for r in range(min(top, len(order) - 1)):
        c = np.zeros(len(xf))
        c[order[r]], c[order[r + 1]] = 1.0, -1.0
        z = float(c @ xf) / math.sqrt(max(float(c @ sf @ c), 1e-300))
        if best is None or z < best[0]:
            best = (z, c)
    assert best is not None
    c = best[1]
    sd_final = math.sqrt(max(float(c @ sf @ c), 0.0))
    gap_now = float(c @ model.x)
    oracle = power_estimate(
        first,
        prompts=n_prompts,
        top=top,
        seed=seed,
        draws=0,
        scores=dict(zip(final.models, xf, strict=True)),
    )
    return {
        "sd_ratio": round(model.sd(c, n_more) / sd_final, 4) if sd_final > 0 else None,
        "gap_now": round(gap_now, 4),
        "gap_stop": round(float(c @ xf), 4),
        "oracle": oracle.calls,
    }


def summarise(rows: list[dict], key: str = "predicted") -> dict:
    pairs = [
        (r[key], r["needed"])
        for r in rows
        if r.get(key) is not None and r.get("needed") is not None and r["needed"] > 0
    ]
    # a prediction of 0 against a need > 0 counts as predicted = one batch (2 calls)
    ratio = np.array([max(p, 2) / n for p, n in pairs])
    if len(ratio) == 0:
        return {"n": 0}
    log = np.log(ratio)
    return {
        "n": len(ratio),
        "median_ratio": float(np.median(ratio)),
        "geo_mean_ratio": float(np.exp(log.mean())),
        "mean_ratio": float(ratio.mean()),
        "se_ratio": float(ratio.std(ddof=1) / math.sqrt(len(ratio))) if len(ratio) > 1 else 0.0,
        "within_1_5": int(np.sum((ratio >= 1 / 1.5) & (ratio <= 1.5))),
        "within_2": int(np.sum((ratio >= 0.5) & (ratio <= 2))),
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seeds", type=int, default=20)
    ap.add_argument("--budget", type=int, default=200)
    ap.add_argument("--top", type=int, default=2)
    ap.add_argument("--models", type=int, default=5)
    ap.add_argument("--prompts", type=int, default=200)
    ap.add_argument("--check-every", type=int, default=2)
    ap.add_argument("--json", default=None)
    a = ap.parse_args()
    t0 = time.perf_counter()
    rows = []
    for seed in range(a.seeds):
        r = one_seed(
            seed,
            budget=a.budget,
            top=a.top,
            n_models=a.models,
            n_prompts=a.prompts,
            check_every=a.check_every,
        )
        rows.append(r)
        print(json.dumps(r), flush=True)
    s = {
        "plug_in": summarise(rows),
        "predictive_median": summarise(rows, "predicted_median"),
        "oracle_gaps": summarise(rows, "oracle"),
    }
    sd = [r["sd_ratio"] for r in rows if r.get("sd_ratio")]
    gaps = [
        abs(r["gap_stop"]) / abs(r["gap_now"]) for r in rows if r.get("gap_now") and r["gap_stop"]
    ]
    if sd:
        s["sd_ratio_median"] = float(np.median(sd))
        s["sd_ratio_within_1_25"] = f"{sum(0.8 <= v <= 1.25 for v in sd)} of {len(sd)}"
    if gaps:
        s["gap_stop_over_gap_now_median"] = float(np.median(gaps))
    inside = [
        r["predicted_q25_q75"][0] <= r["needed"] <= r["predicted_q25_q75"][1]
        for r in rows
        if r.get("needed") and None not in r.get("predicted_q25_q75", [None])
    ]
    s["needed_within_predictive_quartiles"] = f"{sum(inside)} of {len(inside)}"
    s["not_compared"] = [r for r in rows if r.get("needed") is None or r.get("predicted") is None]
    s["seconds"] = round(time.perf_counter() - t0, 1)
    s["args"] = vars(a)
    print(json.dumps(s, indent=1))
    if a.json:
        with open(a.json, "w") as f:
            json.dump({"rows": rows, "summary": s}, f, indent=1)


if __name__ == "__main__":
    main()
