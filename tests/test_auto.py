"""The automatic arena: designs, stops, failures, and resuming a killed run from its journal."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections import Counter

import numpy as np
import pandas as pd
import pytest

from stablearena.analysis.metrics import kendall_tau
from stablearena.errors import InputError
from stablearena.judging.auto_arena import (
    AutoArena,
    AutoConfig,
    JsonlJournal,
    JudgeSteering,
    Prompt,
    fit_leaderboard,
    judge_information,
    read_prompts,
    top_k_separated,
)
from stablearena.judging.endpoints import EndpointClient, ModelEndpoint
from stablearena.judging.endpoints.demo import DEMO_MODELS, LocalDemoClient, demo_prompts
from stablearena.judging.endpoints.demo_server import DemoServer
from stablearena.judging.judges import Judge, JudgeClient, demo_judges
from stablearena.judging.probes import ProbeConfig
from stablearena.raters.base import get_rater

PROMPTS = [Prompt(p["id"], p["prompt"]) for p in demo_prompts(60, seed=3)]


def local_arena(config: AutoConfig, models=None, judges=None, prompts=PROMPTS, **kw) -> AutoArena:
    models = models or [LocalDemoClient(m.name) for m in DEMO_MODELS[:5]]
    judges = judges or [
        JudgeClient(j, client=LocalDemoClient(j.name, system_prompt=j.endpoint.system_prompt))
        for j in demo_judges("http://127.0.0.1:1/v1")
    ]
    return AutoArena(models, judges, prompts, config, **kw)


def keys(result) -> list[tuple]:
    return [(*sorted((r["x"], r["y"])), r["prompt_id"]) for r in result.judgements]


def test_budget_stop_and_no_battle_twice():
    r = local_arena(AutoConfig(budget=101, seed=1)).run()
    # battles and probes (15% of the calls by default) share the budget, two calls each
    assert r.stop_reason == "budget" and r.calls == 100 and r.probes
    assert 2 * len(r.judgements) + sum(p["calls"] for p in r.probes) == 100
    assert len(set(keys(r))) == len(r.judgements)
    assert r.completion_tokens > 0 and len(r.battles()) == len(r.judgements)
    assert set(r.battles().annotators) <= {j.name for j in demo_judges("http://x")}


def test_designs():
    base = local_arena(AutoConfig(budget=80, design="baseline", baseline="demo-fair")).run()
    assert all("demo-fair" in (r["x"], r["y"]) for r in base.judgements)
    # probes off: the budget is exactly the round robin's battles
    off = ProbeConfig(share=0)
    rr = local_arena(AutoConfig(2 * 10 * 3, "round-robin", parallel=3, probes=off)).run()
    per_prompt = Counter(r["prompt_id"] for r in rr.judgements)
    assert sorted(per_prompt.values()) == [10, 10, 10]  # all 10 pairs of 5 models per prompt
    with pytest.raises(InputError, match="baseline"):
        local_arena(AutoConfig(design="baseline", baseline="nobody"))
    with pytest.raises(InputError, match="strategy"):
        local_arena(AutoConfig(design="best-guess"))


def test_exhausted_when_every_battle_is_judged():
    prompts = PROMPTS[:2]
    models = [LocalDemoClient(m.name) for m in DEMO_MODELS[:3]]
    r = local_arena(AutoConfig(), models=models, prompts=prompts).run()
    assert r.stop_reason == "exhausted" and len(set(keys(r))) == len(r.judgements) == 6


def _precision_run(judge_names, **config):
    models = [LocalDemoClient(m.name) for m in (DEMO_MODELS[0], DEMO_MODELS[-1])]
    prompts = [Prompt(p["id"], p["prompt"]) for p in demo_prompts(400, seed=4)]
    judges = [
        JudgeClient(j, client=LocalDemoClient(j.name, system_prompt=j.endpoint.system_prompt))
        for j in demo_judges("http://127.0.0.1:1/v1", judge_names)
    ]
    cfg = AutoConfig(precision_top=1, check_every=10, parallel=5, **config)
    return local_arena(cfg, models=models, judges=judges, prompts=prompts).run()


def test_precision_stop():
    r = _precision_run(["judge-keen"])
    assert r.stop_reason == "precision" and len(r.judgements) < 400
    from stablearena.raters.uncertainty import intervals

    fitted, _ = fit_leaderboard(r)
    iv = intervals(fitted, "fisher")
    assert top_k_separated(iv.rank, iv.rank_low, iv.rank_high, 1)


def test_precision_stop_reads_the_fit_the_leaderboard_reports():
    """A keen judge and a contrary one, battles spread over both: m-ELO (judges alike) sees
    about even results and cannot separate the two models, am-ELO (the contrary judge's
    ability negative) can — so the default (am-ELO) run stops on am-ELO's intervals many
    judgements before an m-ELO run (10 against 200 when written)."""
    from stablearena.judging.probes import ProbeConfig
    from stablearena.raters.uncertainty import intervals

    # probes off: they test the judges against notes, not the stop; with them on, the contrary
    # judge can be flagged (a note on the cut copy makes the demo judges call it wrong, which
    # the contrary judge inverts into picking it) and m-ELO then sees the keen judge alone
    judges, off = ["judge-keen", "judge-contrary"], ProbeConfig(share=0.0)
    r = _precision_run(judges, judge_choice="spread", probes=off)
    assert r.stop_reason == "precision" and len(r.judgements) < 100
    fitted, notes = fit_leaderboard(r)
    assert fitted.method == "am-elo" and not notes
    iv = intervals(fitted, "fisher")
    assert top_k_separated(iv.rank, iv.rank_low, iv.rank_high, 1)
    r = _precision_run(judges, judge_choice="spread", rater="m-elo", probes=off)
    assert len(r.judgements) > 100


def test_auto_config_refuses_an_unknown_rater():
    with pytest.raises(InputError, match="rater must be am-elo or m-elo"):
        AutoConfig(rater="elo")


def test_top_k_separated():
    rank, low, high = np.array([1, 2, 3]), np.array([1, 2, 2]), np.array([1, 3, 3])
    assert top_k_separated(rank, low, high, 1) and not top_k_separated(rank, low, high, 2)


@pytest.fixture(scope="module")
def server():
    with DemoServer(seed=0) as s:
        yield s


def failing_arena(server, names: list[str]) -> tuple[list, list]:
    """Clients of the demo models ``names`` (model ids as given), one model that always fails
    (HTTP 500) and two judges, one of which never gives a parseable verdict."""
    models = [EndpointClient(ModelEndpoint(n.split("+")[0], server.base_url, n)) for n in names]
    broken = ModelEndpoint(
        "broken", server.base_url, "demo-ace+fail500", max_retries=0, outage_after=1000
    )
    models.append(EndpointClient(broken))
    mumbler = Judge("mumbler", ModelEndpoint("mumbler", server.base_url, "demo-sharp"))
    judges = [JudgeClient(j) for j in demo_judges(server.base_url, ["judge-keen"])]
    judges.append(JudgeClient(mumbler))
    return models, judges


def test_over_http_answers_once_and_failures_are_never_votes(server):
    names = [m.name for m in DEMO_MODELS[:3]]
    models, judges = failing_arena(server, [f"{n}+id=once" for n in names])
    r = AutoArena(models, judges, PROMPTS[:6], AutoConfig(budget=200, parallel=4)).run()
    st = server.stats()
    for n in names:  # each answer generated once, reused by every battle that needs it
        used = {j["prompt_id"] for j in r.judgements if n in (j["x"], j["y"])}
        assert st[f"{n}+id=once"]["requests"] == len(used)
    stages = Counter(f.get("stage") for f in r.failures)
    assert stages["answer"] > 0 and stages["judge"] > 0
    assert all(f["reason"] in ("http_500", "unparseable") for f in r.failures)
    b = r.battles()
    assert len(b) == len(r.judgements) - len(r.failures)
    assert "broken" not in {b.models[k] for k in np.concatenate([b.model_a, b.model_b])}
    assert "mumbler" not in set(b.annotators or ())
    fitted, notes = fit_leaderboard(r, "m-elo")
    assert fitted.n_models == 3 and "left out, no successful judgement: broken" in notes


def test_journal_drops_a_torn_last_line(tmp_path):
    path = tmp_path / "j.jsonl"
    path.write_text('{"type":"run"}\n{"type":"answer","mo')
    j = JsonlJournal(path)
    assert j.records() == [{"type": "run"}]
    j.append({"type": "x"})
    j.close()
    assert path.read_text() == '{"type":"run"}\n{"type":"x"}\n'
    path.write_text('{"type":"run"}\n{"type":"x"}')  # whole, but its newline not written
    assert JsonlJournal(path).records() == [{"type": "run"}, {"type": "x"}]
    assert path.read_text() == '{"type":"run"}\n{"type":"x"}\n'
    path.write_text('{"type":"run"}\nnot json\n{"type":"x"}\n')
    with pytest.raises(InputError, match="damaged"):
        JsonlJournal(path)


def test_journal_of_another_run_is_refused(tmp_path):
    j = JsonlJournal(tmp_path / "j.jsonl")
    local_arena(AutoConfig(budget=4), journal=j).run()
    models = [LocalDemoClient(m.name) for m in DEMO_MODELS[:4]]
    with pytest.raises(InputError, match="another run"):
        local_arena(AutoConfig(budget=4), models=models, journal=j).run()


def test_read_prompts(tmp_path):
    rows = [
        {"question_id": "q1", "turns": [{"content": "What is 2+2?"}]},
        {"question_id": "q2", "turns": [{"content": "What is 3+3?"}]},
    ]
    (tmp_path / "a.jsonl").write_text("\n".join(json.dumps(r) for r in rows))
    assert read_prompts(tmp_path / "a.jsonl") == [
        Prompt("q1", "What is 2+2?"),
        Prompt("q2", "What is 3+3?"),
    ]
    pd.DataFrame({"id": ["a", "b"], "prompt": ["x", "y"]}).to_csv(tmp_path / "p.csv", index=False)
    pd.DataFrame({"id": ["a", "b"], "prompt": ["x", "y"]}).to_parquet(tmp_path / "p.parquet")
    assert read_prompts(tmp_path / "p.csv") == read_prompts(tmp_path / "p.parquet")
    pd.DataFrame({"id": ["a", "a"], "prompt": ["x", "y"]}).to_csv(tmp_path / "d.csv", index=False)
    with pytest.raises(InputError, match="unique"):
        read_prompts(tmp_path / "d.csv")
    pd.DataFrame({"key": ["a"], "prompt": ["x"]}).to_csv(tmp_path / "n.csv", index=False)
    with pytest.raises(InputError, match="id column"):
        read_prompts(tmp_path / "n.csv")


def _toml(server, tmp_path) -> tuple:
    models = tmp_path / "models.toml"
    models.write_text(
        "".join(
            f'[[models]]\nname = "{m.name}"\nbase_url = "{server.base_url}"\n'
            f'model = "{m.name}+slow=0.003"\n\n'
            for m in DEMO_MODELS[:6]
        )
    )
    judges = tmp_path / "judges.toml"
    judges.write_text(
        "".join(
            f'[[judges]]\nname = "{j}"\nbase_url = "{server.base_url}"\nmodel = "{j}+slow=0.003"\n\n'
            for j in ("judge-keen", "judge-fair", "judge-contrary")
        )
    )
    prompts = tmp_path / "prompts.jsonl"
    prompts.write_text("\n".join(json.dumps(p) for p in demo_prompts(50, seed=5)))
    return models, judges, prompts


def _judgements(path) -> list[dict]:
    out = []
    for line in path.read_text().splitlines():
        try:
            rec = json.loads(line)
        except ValueError:
            continue
        if rec.get("type") == "judgement":
            out.append(rec)
    return out


def test_resume_after_kill_9(server, tmp_path):
    models, judges, prompts = _toml(server, tmp_path)
    journal = tmp_path / "run.jsonl"
    budget = 240
    cmd = [
        sys.executable,
        "-m",
        "stablearena",
        "auto",
        str(prompts),
        "--models",
        str(models),
        "--judges",
        str(judges),
        "--budget",
        str(budget),
        "--journal",
        str(journal),
        "--parallel",
        "4",
        "--seed",
        "7",
    ]
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and proc.poll() is None:
        if journal.exists() and len(_judgements(journal)) >= 30:
            break
        time.sleep(0.02)
    assert proc.poll() is None, proc.stderr.read().decode()
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    proc.stderr.close()
    before = _judgements(journal)
    assert 30 <= len(before) < budget // 2
    done = subprocess.run(
        cmd + ["--output", str(tmp_path / "board.json")],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    assert f"resumed: {len(before)} judgements" in done.stderr
    after = _judgements(journal)
    assert after[: len(before)] == before  # nothing lost or rewritten
    battle_keys = [(*sorted((r["x"], r["y"])), r["prompt_id"]) for r in after]
    assert len(set(battle_keys)) == len(battle_keys)  # nothing judged twice
    probes = [json.loads(line) for line in journal.read_text().splitlines()]
    probe_calls = sum(r["calls"] for r in probes if r.get("type") == "probe")
    assert probe_calls > 0 and sum(r["calls"] for r in after) + probe_calls == budget
    answers = [json.loads(line) for line in journal.read_text().splitlines()]
    ok = [(a["model"], a["prompt_id"]) for a in answers if a.get("type") == "answer" and a["ok"]]
    assert len(set(ok)) == len(ok)  # every answer generated once, across both runs
    board = json.loads((tmp_path / "board.json").read_text())
    assert board["judge_calls"] == budget and board["stop_reason"] == "budget"
    assert board["judgements"] == len(after) and board["resumed"] == len(before)


def test_cli_demo(tmp_path):
    out = tmp_path / "board.json"
    cmd = [sys.executable, "-m", "stablearena", "auto", "--demo", "--budget", "60",
           "--output", str(out), "--rater", "m-elo"]  # fmt: skip
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    board = json.loads(out.read_text())
    assert board["judge_calls"] == 60
    assert 2 * board["judgements"] + board["probes"]["probe_calls"] == 60
    assert [r["status"] for r in board["probes"]["judges"]].count("flagged") == 0
    assert board["method"] == "m-elo" and len(board["models"]) >= 2
    assert "demo server at http://127.0.0.1:" in done.stderr
    assert len(board["endpoints"]) == 8  # the demo models' configuration is exported


def test_cli_judge_choice(tmp_path):
    out = tmp_path / "board.json"
    cmd = [sys.executable, "-m", "stablearena", "auto", "--demo", "--budget", "40",
           "--output", str(out), "--judge-choice", "spread", "--judge-warmup", "2"]  # fmt: skip
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert json.loads(out.read_text())["judge_calls"] == 40
    bad = subprocess.run(
        [*cmd[:-4], "--judge-choice", "best"], capture_output=True, text=True, timeout=60
    )
    assert bad.returncode == 2 and "--judge-choice must be one of information, spread" in bad.stderr
    assert "demo server" not in bad.stderr  # refused before anything starts


def test_judge_information():
    a = np.array([-1.0, 0.0, 0.5, 1.0, 2.0])
    info = judge_information(a, 0.3)
    p = 1 / (1 + np.exp(-a[2:] * 0.3))
    assert info[0] == info[1] == 0.0  # inverted or ~0: no information
    np.testing.assert_allclose(info[2:], a[2:] ** 2 * p * (1 - p))
    assert judge_information(np.array([1.0]), 0.0)[0] == pytest.approx(0.25)
    with pytest.raises(InputError, match="judge_choice"):
        AutoConfig(judge_choice="best")


def demo_run(config: AutoConfig):
    models = [LocalDemoClient(m.name) for m in DEMO_MODELS]
    prompts = [Prompt(p["id"], p["prompt"]) for p in demo_prompts(200, seed=5)]
    return local_arena(config, models=models, prompts=prompts).run()


def test_judge_steering_screens_a_judge_of_ability_below_zero():
    # enough votes: a round-robin run, every judge alike (about 160 battles each)
    r = demo_run(AutoConfig(budget=1600, seed=2, design="round-robin"))
    steer = JudgeSteering(r.judges, warmup=10)
    steer.refit(r.battles(), Counter(x["judge"] for x in r.judgements))
    ability = dict(zip(steer.judges, steer.abilities, strict=True))
    assert ability["judge-contrary"] < 0 < ability["judge-keen"]
    assert abs(ability["judge-first"]) < 0.1
    battles = [(0, 1, "p"), (3, 4, "p"), (6, 7, "p")] * 1000
    picks = Counter(steer.judges[k] for k in steer.choose(battles, np.random.default_rng(0), min))
    assert picks["judge-contrary"] == picks["judge-first"] == 0  # inverted; position-biased
    assert picks.most_common(1)[0][0] in ("judge-keen", "judge-fair", "judge-lax")
    # before the fit (or without one): the warm-up, then the spread judge
    cold = JudgeSteering(r.judges, warmup=2)
    assert cold.choose([(0, 1, "p")] * 12, np.random.default_rng(0), lambda *_: 4) == [
        0, 1, 2, 3, 4, 0, 1, 2, 3, 4, 4, 4
    ]  # fmt: skip


def test_information_design_sends_battles_to_good_judges():
    r = demo_run(AutoConfig(budget=1600, seed=2, parallel=8, judge_warmup=10))
    judged = [x for x in r.judgements if x.get("stage") != "answer"]
    assert min(Counter(x["judge"] for x in judged).values()) >= 10  # every ability estimated
    early = Counter(x["judge"] for x in judged[: len(judged) // 2])
    late = Counter(x["judge"] for x in judged[len(judged) // 2 :])
    bad = ("judge-contrary", "judge-first")
    assert sum(late[j] for j in bad) <= 0.12 * len(judged) / 2, late
    assert sum(late[j] for j in bad) < sum(early[j] for j in bad), (early, late)
    assert late.most_common(1)[0][0] == "judge-keen", late
    # the pairs are still chosen by information: every pair judged, the true order recovered
    assert len({tuple(sorted((x["x"], x["y"]))) for x in judged}) == 28
    fitted, _ = fit_leaderboard(r)
    assert kendall_tau(-np.arange(8.0), np.asarray(fitted.scores)) >= 0.85
    # the fixed designs keep every judge alike
    rr = Counter(
        x["judge"] for x in demo_run(AutoConfig(budget=400, design="round-robin")).judgements
    )
    assert min(rr.values()) >= 25


def test_judge_steering_orients_by_judges_not_votes():
    # the inverted judge holds most votes (as a design that sent it battles would make it):
    # am-ELO's vote majority turns the scale over; the steering, one voice per judge, does not
    names = ["judge-keen", "judge-fair", "judge-contrary"]
    judges = [
        JudgeClient(j, client=LocalDemoClient(j.name, system_prompt=j.endpoint.system_prompt))
        for j in demo_judges("http://127.0.0.1:1/v1", names)
    ]
    models = [LocalDemoClient(m.name) for m in DEMO_MODELS]
    prompts = [Prompt(p["id"], p["prompt"]) for p in demo_prompts(200, seed=5)]
    cfg = AutoConfig(budget=3000, seed=1, design="round-robin")
    r = local_arena(cfg, models=models, judges=judges, prompts=prompts).run()
    b = r.battles()
    who = np.asarray(b.annotators)[b.annotator]
    keep = (who == "judge-contrary") | (np.arange(len(b)) % 5 == 0)
    sub = b.take(np.flatnonzero(keep))
    plain = get_rater("am-elo").fit(sub)
    assert kendall_tau(-np.arange(8.0), np.asarray(plain.scores)) < 0  # upside down
    steer = JudgeSteering(r.judges)
    steer.refit(sub, Counter(who[keep]))
    assert kendall_tau(-np.arange(8.0), steer.scores) > 0.8
    ability = dict(zip(steer.judges, steer.abilities, strict=True))
    assert ability["judge-contrary"] < 0 < min(ability["judge-keen"], ability["judge-fair"])
