"""Judges reported honestly (issue 33, item 3): a judge is flagged only when its standard error
supports it, abilities carry no floating-point dust, and a board whose orientation rests on one
judge, or judges that disagree systematically, give warnings in the output and the JSON."""

from __future__ import annotations

import json

import numpy as np
import pytest
from test_auto import local_arena
from typer.testing import CliRunner

from stablearena.cli import app
from stablearena.judging.auto_arena import AutoConfig, fit_leaderboard, review_judges
from stablearena.judging.endpoints.demo import DEMO_MODELS, LocalDemoClient
from stablearena.judging.endpoints.demo_server import DemoServer
from stablearena.judging.judges import JudgeClient, demo_judges
from stablearena.judging.probes import ProbeConfig


def _judges(*names):
    return [
        JudgeClient(j, client=LocalDemoClient(j.name, system_prompt=j.endpoint.system_prompt))
        for j in demo_judges("http://127.0.0.1:1/v1", list(names))
    ]


def _review(names, seed, budget=400, n_models=5):
    models = [LocalDemoClient(m.name) for m in DEMO_MODELS[:n_models]]
    # the review of abilities alone: probes off (tests/test_probes.py tests them; probes take a
    # share of the budget, so these seeds' runs would be other runs)
    cfg = AutoConfig(budget=budget, seed=seed, probes=ProbeConfig(share=0))
    r = local_arena(cfg, models=models, judges=_judges(*names))
    result = r.run()
    fitted, _ = fit_leaderboard(result)
    return review_judges(fitted, result.judges)


def test_one_honest_and_one_adversarial_judge_warn():
    rows, warnings = _review(["judge-keen", "judge-contrary"], seed=0)
    assert any("orientation rests on one judge" in w for w in warnings), warnings
    assert any("disagree systematically" in w for w in warnings), warnings
    assert {r["status"] for r in rows} == {"trusted", "flagged"}


def test_honest_judges_together_give_no_orientation_warning():
    rows, warnings = _review(["judge-keen", "judge-fair", "judge-lax"], seed=1, budget=600)
    assert not any("orientation" in w for w in warnings), (rows, warnings)
    assert not any(r["flagged"] for r in rows)


def test_a_position_biased_judge_prints_no_dust():
    rows, _ = _review(["judge-keen", "judge-fair", "judge-first"], seed=2)
    first = next(r for r in rows if r["annotator"] == "judge-first")
    # its two orders cancel into ties: ability ~0 (the fit gives e.g. -1.8e-11), shown as 0.0
    assert first["ability"] == round(first["ability"], 4) and abs(first["ability"]) < 0.5
    assert str(first["ability"]) in ("0.0",) or "e" not in str(first["ability"])
    assert first["status"] == "uncertain" and not first["flagged"]


@pytest.mark.parametrize("seeds", [range(20)])
def test_an_honest_judge_at_70_percent_is_not_flagged(seeds):
    """judge-lax is right 70% of the time: flagged (ability below 0 by 2 se) in at most 1 of 20
    seeds (>= 95%); the old rule (ability < 0) flagged it by noise."""
    flagged = 0
    for seed in seeds:
        rows, _ = _review(["judge-lax", "judge-keen", "judge-contrary"], seed=seed, budget=200)
        lax = next(r for r in rows if r["annotator"] == "judge-lax")
        flagged += lax["flagged"]
    assert flagged <= len(seeds) // 20, f"judge-lax flagged in {flagged} of {len(seeds)} seeds"


def test_cli_warns_in_output_and_json(tmp_path):
    with DemoServer(seed=0) as server:
        (tmp_path / "models.toml").write_text(
            "".join(
                f'[[models]]\nname = "{m.name}"\nbase_url = "{server.base_url}"\n'
                f'model = "{m.name}"\n'
                for m in DEMO_MODELS[:4]
            )
        )
        (tmp_path / "judges.toml").write_text(
            "".join(
                f'[[judges]]\nname = "{j}"\nbase_url = "{server.base_url}"\nmodel = "{j}"\n'
                for j in ("judge-keen", "judge-contrary")
            )
        )
        prompts = tmp_path / "prompts.jsonl"
        from stablearena.judging.endpoints.demo import demo_prompts

        prompts.write_text("".join(json.dumps(p) + "\n" for p in demo_prompts(40, seed=5)))
        out = tmp_path / "out.json"
        res = CliRunner().invoke(
            app,
            [
                "auto",
                str(prompts),
                "--models",
                str(tmp_path / "models.toml"),
                "--judges",
                str(tmp_path / "judges.toml"),
                "--budget",
                "240",
                "--probe-share",  # the warnings of the abilities alone (probes: test_probes.py)
                "0",
                "-o",
                str(out),
            ],
        )
    assert res.exit_code == 0, res.output
    assert "warning: the board's orientation rests on one judge" in res.output
    payload = json.loads(out.read_text())
    assert any("orientation rests on one judge" in w for w in payload["warnings"])
    assert {r["status"] for r in payload["annotators"]} <= {"trusted", "flagged", "uncertain"}


def test_a_near_singular_information_does_not_break_the_design():
    """Seed 84: two honest judges and an adversarial one, 200 calls. The inverse of a
    near-singular information gave variances of -1e16 and the D-optimal gain log1p(-1.3e16)
    stopped the run (math domain error). Now a negative variance takes the SVD path, a rank-one
    update that loses Σ makes it computed again, and the gain is never below 0."""
    rows, warnings = _review(["judge-lax", "judge-keen", "judge-contrary"], seed=84, budget=200)
    assert rows and all(np.isfinite(r["ability"]) for r in rows)


def test_a_single_judge_is_not_estimable_and_warns():
    """With one judge am-ELO's scale fixes its ability (se 0): shown as not estimable, and the
    board's orientation rests on it (the run with one judge divided by that 0)."""
    rows, warnings = _review(["judge-keen"], seed=0, budget=120)
    assert rows[0]["status"] == "uncertain" and rows[0]["ability_se"] is None
    assert "not estimable" in rows[0]["reason"]
    assert any("rests on one judge (judge-keen)" in w for w in warnings)


def test_a_judge_of_the_same_family_as_a_model_is_reported(tmp_path):
    """Self-preference: judge-keen declared of the family of demo-ace (family = "acme" on both)
    is named, with the share its family's model won from it and from the other judge."""
    from stablearena.judging.auto_arena import self_preference

    rows = []
    for _ in range(10):
        rows.append({"judge": "judge-keen", "x": "demo-ace", "y": "demo-wild", "outcome": "x"})
        rows.append({"judge": "judge-fair", "x": "demo-wild", "y": "demo-ace", "outcome": "x"})
    rows.append({"judge": "judge-keen", "x": "demo-fair", "y": "demo-wild", "outcome": "x"})
    families = {"demo-ace": "acme", "judge-keen": "acme", "judge-fair": "other"}
    (w,) = self_preference(rows, families)
    assert "judge judge-keen (acme) judged 10 battle(s)" in w and "demo-ace" in w
    assert "they won 100% of them" in w and "gave them 0% of 10" in w
    assert self_preference(rows, {}) == []


def test_family_is_read_from_the_config(tmp_path):
    from stablearena.errors import InputError
    from stablearena.judging.endpoints import read_models

    p = tmp_path / "m.toml"
    p.write_text('[[models]]\nname = "a"\nbase_url = "http://x/v1"\nmodel = "a"\nfamily = "acme"\n')
    assert read_models(p)[0].family == "acme"
    p.write_text('[[models]]\nname = "a"\nbase_url = "http://x/v1"\nmodel = "a"\nfamily = ""\n')
    with pytest.raises(InputError, match="family"):
        read_models(p)
