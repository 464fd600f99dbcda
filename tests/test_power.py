"""The power estimate (stablearena.judging.power): the formula, its inputs, the CLI, and simulation."""

from __future__ import annotations

import json
import math
import time

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from stablearena.cli import app
from stablearena.errors import InputError
from stablearena.judging.auto_arena import (
    AutoConfig,
    AutoResult,
    JsonlJournal,
    MemoryJournal,
    Prompt,
    fit_judgements,
)
from stablearena.judging.endpoints.demo import DEMO_MODELS, LocalDemoClient, demo_prompts
from stablearena.judging.power import information_model, power_estimate
from stablearena.judging.probes import ProbeConfig  # the power tests count judge calls: no probes
from stablearena.raters.uncertainty import covariance
from tests.test_auto import local_arena

Z95 = 1.959963984540054


def two_model_run(wins: int, losses: int) -> AutoResult:
    r = AutoResult(("a", "b"), ("j",))
    for k in range(wins + losses):
        out = "x" if k < wins else "y"
        rec = {"type": "judgement", "judge": "j", "x": "a", "y": "b", "prompt_id": f"p{k}"}
        r.judgements.append({**rec, "outcome": out, "calls": 2})
    r.calls = 2 * (wins + losses)
    return r


@settings(max_examples=30, deadline=None)
@given(st.integers(3, 60), st.integers(1, 60))
def test_pair_estimate_is_the_closed_form(wins, losses):
    """One pair, one judge, m-ELO: every judgement carries the same information, so after n more
    V(n) = V₀ N₀/(N₀ + n), and separation needs n = N₀(V₀ z²/d² − 1) judgements."""
    r = two_model_run(wins, losses)
    n0 = wins + losses
    f, _ = fit_judgements(r.battles(), "m-elo")
    v = covariance(f).scores
    d, var = f.scores[0] - f.scores[1], v[0, 0] + v[1, 1] - 2 * v[0, 1]
    est = power_estimate(r, prompts=10**6, pair=("a", "b"), rater="m-elo")
    if d == 0:
        assert est.judgements is None and est.calls is None
        return
    exact = n0 * (var * Z95**2 / d**2 - 1)
    if exact <= 0:
        assert est.separated_now and est.judgements == 0
    else:
        assert est.judgements == math.ceil(exact - 1e-9) or abs(est.judgements - exact) <= 1
        assert est.calls == 2 * est.judgements
        with_power = power_estimate(r, prompts=10**6, pair=("a", "b"), rater="m-elo", power=0.8)
        assert with_power.judgements > est.judgements
        z = Z95 + 0.8416212335729143
        assert abs(with_power.judgements - n0 * (var * z**2 / d**2 - 1)) <= 1


def test_prompts_run_out():
    r = two_model_run(14, 10)
    est = power_estimate(r, prompts=30, pair=("a", "b"), rater="m-elo")
    assert est.judgements > 6 and est.prompts_needed == 24 + est.judgements
    assert est.prompts_out == ["a vs b"] and "more than the 30 prompts" in est.notes[0]
    assert power_estimate(r, prompts=10**4, pair=("a", "b"), rater="m-elo").prompts_out == []


def test_power_refuses_bad_input():
    r = two_model_run(5, 3)
    with pytest.raises(InputError, match="--top K"):
        power_estimate(r, prompts=10)
    with pytest.raises(InputError, match="two different models"):
        power_estimate(r, prompts=10, pair=("a", "c"))
    with pytest.raises(InputError, match="level"):
        power_estimate(r, prompts=10, top=1, level=1.0)
    with pytest.raises(InputError, match="fewer than two"):
        power_estimate(two_model_run(1, 0), prompts=10, top=1)


def test_auto_power_cli(tmp_path):
    path = tmp_path / "run.jsonl"
    jr = JsonlJournal(path)
    models = [LocalDemoClient(m.name) for m in DEMO_MODELS[:3]]
    local_arena(
        AutoConfig(budget=40, seed=2, probes=ProbeConfig(share=0)), models, journal=jr
    ).run()
    jr.close()
    size = path.stat().st_size
    cmd = ["auto-power", "--journal", str(path), "--top", "1", "--prompts", "60"]
    out = CliRunner().invoke(app, [*cmd, "--format", "json"])
    assert out.exit_code == 0, out.output
    d = json.loads(out.stdout)
    assert d["target"] == "top 1" and d["calls_so_far"] == 40 and d["prompts"] == 60
    assert d["separated_now"] or d["calls"] is None or d["calls"] > 0
    assert path.stat().st_size == size  # read from a copy, never touched
    out = CliRunner().invoke(app, ["auto-power", "--journal", str(path), "--pair", "demo-ace"])
    assert out.exit_code != 0
    table = CliRunner().invoke(app, cmd)
    assert table.exit_code == 0 and "top 1 at 95%" in table.stdout
    assert d["separated_now"] or "predictive" in table.stdout


#: the factor the prediction may be off on average (geometric mean of predicted / needed)
FACTOR = 3.0


def test_power_estimate_against_simulation():
    """Stop a 3-model run at 60 calls, predict the calls to separate the top model, continue the
    run from its journal until the precision stop, compare (seeds where both are defined)."""
    t0 = time.perf_counter()
    ratios, predictive, sd_ratios = [], [], []
    for seed in (1, 3):  # seeds 0, 2: no am-ELO spread / separated by 60 calls
        prompts = [Prompt(p["id"], p["prompt"]) for p in demo_prompts(60, seed=seed)]
        models = [LocalDemoClient(m.name) for m in DEMO_MODELS[:3]]
        journal = MemoryJournal()
        kw = dict(seed=seed, precision_top=1, check_every=2, parallel=4)
        first = local_arena(
            AutoConfig(budget=60, probes=ProbeConfig(share=0), **kw),
            models,
            prompts=prompts,
            journal=journal,
        ).run()
        if first.stop_reason != "budget":
            continue
        est = power_estimate(first, prompts=60, top=1, seed=seed)
        models = [LocalDemoClient(m.name) for m in DEMO_MODELS[:3]]
        again = local_arena(
            AutoConfig(budget=4000, probes=ProbeConfig(share=0), **kw),
            models,
            prompts=prompts,
            journal=journal,
        ).run()
        if est.calls is None or again.stop_reason != "precision":
            continue
        # the same criterion as the precision stop: at the stop, separated now
        assert power_estimate(again, prompts=60, top=1, seed=seed, draws=0).separated_now
        ratios.append(max(est.calls, 2) / (again.calls - first.calls))
        # the information part: the deciding contrast's sd predicted for the judgements the run
        # needed, against the final fit's (the gaps' error is the rest: bench/bench_power.py)
        model = information_model(first)
        final, _ = fit_judgements(again.battles(), "am-elo")
        c = np.zeros(3)
        c[final.order()[0]], c[final.order()[1]] = 1.0, -1.0
        more = sum(r.get("outcome") is not None for r in again.judgements) - len(model.ok)
        sd_final = math.sqrt(float(c @ covariance(final, "fisher").scores @ c))
        sd_ratios.append(model.sd(c, more) / sd_final)
        predictive.append(est.predictive["calls_median"] / (again.calls - first.calls))
    print(f"ratios {np.round(ratios, 2)}, predictive {np.round(predictive, 2)}")
    print(f"sd predicted / final {np.round(sd_ratios, 3)}")
    print(f"in {time.perf_counter() - t0:.1f} s")
    assert len(ratios) == 2
    assert 1 / FACTOR <= math.exp(np.mean(np.log(ratios))) <= FACTOR
    assert 1 / FACTOR <= math.exp(np.mean(np.log(predictive))) <= FACTOR
    assert all(1 / 1.5 <= r <= 1.5 for r in sd_ratios), sd_ratios
