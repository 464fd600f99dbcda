"""Models that address the judge found by their effect (issue 41 item 3): one judge favours a
model the other judges do not — whatever form its note takes — and Cochran's heterogeneity test
of the judges' residuals on that model finds it (stablearena.judging.injection.judge_disagreement)."""

from __future__ import annotations

import numpy as np

from stablearena.judging.injection import judge_disagreement

TRUTH = np.linspace(-1.5, 1.5, 8)
MODELS = [f"m{k}" for k in range(8)]


def _judgements(rng, n, judges, obey=None, sly=3):
    out = []
    for _ in range(n):
        a, b = rng.choice(8, 2, replace=False)
        for j in judges:
            p = 1 / (1 + np.exp(-(TRUTH[a] - TRUTH[b])))
            won_a = rng.random() < p
            if j == obey and sly in (a, b):
                won_a = a == sly  # follows the sly model's notes
            out.append(
                {"judge": j, "x": MODELS[a], "y": MODELS[b], "outcome": "x" if won_a else "y"}
            )
    return out


def test_the_model_one_judge_favours_is_found_and_the_judge_named():
    rng = np.random.default_rng(0)
    got = judge_disagreement(_judgements(rng, 300, ["honest1", "honest2", "obey"], obey="obey"))
    assert got["m3"]["flagged"] and got["m3"]["favoured_by"] == "obey"
    assert got["m3"]["z"] > 3
    assert [m for m, r in got.items() if r["flagged"]] == ["m3"]


def test_judges_that_agree_flag_no_model_beyond_the_level():
    false = 0
    for seed in range(20):
        rng = np.random.default_rng(100 + seed)
        got = judge_disagreement(_judgements(rng, 300, ["j1", "j2", "j3"]))
        assert len(got) == 8 and all(0 <= r["p_value"] <= 1 for r in got.values())
        false += any(r["flagged"] for r in got.values())
    assert false <= 2, false  # level 0.01 per run


def test_one_judge_or_no_judgement_gives_no_test():
    rng = np.random.default_rng(1)
    assert judge_disagreement(_judgements(rng, 50, ["only"])) == {}
    assert judge_disagreement([]) == {}
    failed = [{"judge": "a", "x": "m0", "y": "m1", "outcome": None}]
    assert judge_disagreement(failed) == {}


def test_auto_over_http_reports_the_model_the_obeying_judge_favours(tmp_path):
    """End to end: `auto` against the demo server process — demo-sly's answers carry notes to
    the judge, policy keep (nothing contained), judge-obey beside two honest judges. The output
    JSON's judge_disagreement flags demo-sly, favoured by judge-obey, and a warning says so; the
    journal ends with the same table (a ``disagreement`` record) and the report shows the
    warning."""
    import json

    from typer.testing import CliRunner

    from stablearena.cli import app
    from stablearena.judging.endpoints.demo import demo_prompts
    from stablearena.judging.endpoints.demo_server import DemoServer

    with DemoServer(seed=0) as server:
        names = ["demo-ace", "demo-solid", "demo-sly", "demo-fair", "demo-wild"]
        (tmp_path / "m.toml").write_text(
            "".join(
                f'[[models]]\nname = "{m}"\nbase_url = "{server.base_url}"\nmodel = "{m}"\n'
                for m in names
            )
        )
        (tmp_path / "j.toml").write_text(
            "".join(
                f'[[judges]]\nname = "{j}"\nbase_url = "{server.base_url}"\nmodel = "{j}"\n'
                for j in ("judge-obey", "judge-keen", "judge-fair")
            )
            + '[injection]\npolicy = "keep"\n'
        )
        prompts = tmp_path / "p.jsonl"
        prompts.write_text("".join(json.dumps(p) + "\n" for p in demo_prompts(60, seed=3)))
        out = tmp_path / "out.json"
        args = ["auto", str(prompts), "--models", str(tmp_path / "m.toml"), "--judges"]
        args += [str(tmp_path / "j.toml"), "--budget", "900", "-o", str(out)]
        args += ["--journal", str(tmp_path / "run.jsonl"), "--report", str(tmp_path / "r.html")]
        res = CliRunner().invoke(app, args)
    assert res.exit_code == 0, res.output
    got = json.loads(out.read_text())["judge_disagreement"]
    assert got["demo-sly"]["flagged"] and got["demo-sly"]["favoured_by"] == "judge-obey"
    assert [m for m, r in got.items() if r["flagged"]] == ["demo-sly"]
    assert "the judges disagree about demo-sly beyond chance" in " ".join(res.output.split())
    journal = [json.loads(line) for line in (tmp_path / "run.jsonl").read_text().splitlines()]
    assert journal[-1]["type"] == "disagreement" and journal[-1]["models"] == got
    judged = [r for r in journal if r["type"] == "judgement" and r.get("outcome") is not None]
    assert journal[-1]["judgements"] == len(judged)
    report = " ".join((tmp_path / "r.html").read_text().split())
    assert "the judges disagree about demo-sly beyond chance" in report


def test_two_judges_disagree_but_cannot_say_which_one_lifts_the_model():
    rng = np.random.default_rng(2)
    got = judge_disagreement(_judgements(rng, 400, ["honest", "obey"], obey="obey"))
    assert got["m3"]["disagree"] and not any(r["flagged"] for r in got.values())
