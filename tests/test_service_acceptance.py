"""Acceptance runs of the live arena (issue 10), each through a real ``stablearena serve`` child
process and the Python client:

- LLMFAO replayed battle by battle (each battle served to its annotator with ``models`` set to
  its pair, then voted) gives ``stablearena rank --method am-elo``'s leaderboard and
  ``stablearena annotators``' flagged annotators;
- a simulated arena with 10% flipping annotators, 20,000 votes chosen by the arena itself:
  the flippers are flagged and am-ELO is at least as close to the truth as m-ELO on all votes.

They take minutes (marked slow): ``python -m pytest -m slow tests/test_service_acceptance.py -s``.
A small version of the simulation runs in the default suite.
"""

from __future__ import annotations

import json
import subprocess
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest
from arena_process import FAST, ServerProcess, simulated_arena_run

from stablearena.service.client import ArenaClient


def _cli_json(*args: str) -> dict:
    out = subprocess.run(
        [sys.executable, "-m", "stablearena", *args, "--format", "json"],
        capture_output=True,
        text=True,
        check=True,
    )
    return json.loads(out.stdout)


@pytest.mark.slow
def test_llmfao_replayed_through_the_api_matches_rank_and_annotators(llmfao_path, tmp_path):
    from stablearena.data.io import read_battles

    battles = read_battles(llmfao_path)
    frame = battles.to_frame()
    server = ServerProcess(
        f"sqlite:///{tmp_path / 'llmfao.db'}",
        *FAST,
        "--set",
        "arena.min_records=0",
        "--set",
        "arena.ability_threshold=0",
        "--set",
        "arena.policy='warn'",
        "--set",
        "arena.refit_votes=100000",
        "--set",
        "arena.refit_seconds=100000",
        "--set",  # `rank` fits am-ELO without bounded influence
        "arena.ability_cap=0",
        "--set",
        "arena.trust_ramp_votes=0",
        "--set",  # nor influence screening (the arena's rule is `rank --method arena`)
        "arena.influence_policy='warn'",
        cwd=tmp_path,
    ).start()
    t0 = time.time()
    try:
        admin = ArenaClient(server.url, server.admin_key, timeout=120)
        for name in battles.models:
            admin.add_model(name)
        keys = {name: admin.create_annotator(name) for name in battles.annotators}
        flip = {
            "model_a": "model_b",
            "model_b": "model_a",
            "tie": "tie",
            "tie (bothbad)": "both_bad",
        }
        same = {
            "model_a": "model_a",
            "model_b": "model_b",
            "tie": "tie",
            "tie (bothbad)": "both_bad",
        }
        groups = frame.groupby("judge", sort=False)
        lock = threading.Lock()
        served = {"n": 0}

        def replay(item) -> None:
            judge, rows = item
            with ArenaClient(server.url, keys[judge], timeout=120) as client:
                for a, b, winner in zip(
                    rows["model_a"], rows["model_b"], rows["winner"], strict=True
                ):
                    (battle,) = client.next_battles(models=[a, b])
                    assert {battle["model_a"], battle["model_b"]} == {a, b}
                    assert battle["propensity"] == pytest.approx(1.0)
                    mapping = same if battle["model_a"] == a else flip
                    client.vote(battle["battle_id"], mapping[winner])
                    with lock:
                        served["n"] += 1

        with ThreadPoolExecutor(8) as pool:
            list(pool.map(replay, list(groups)))
        replay_seconds = time.time() - t0
        admin.refit()
        live = admin.leaderboard()
        live_ann = admin.annotators()
        admin.close()
    finally:
        server.stop()
    offline = _cli_json("rank", str(llmfao_path), "--method", "am-elo")
    offline_ann = _cli_json("annotators", str(llmfao_path))
    order_live = [m["model"] for m in live["models"]]
    order_off = [m["model"] for m in offline["models"]]
    diff = np.abs(
        np.array([m["rating"] for m in live["models"]])
        - np.array([m["rating"] for m in offline["models"]])
    )
    flagged_live = sorted(a["annotator"] for a in live_ann["annotators"] if a["flagged"])
    flagged_off = sorted(a["annotator"] for a in offline_ann["annotators"] if a["flagged"])
    print(
        f"\nLLMFAO replay: {served['n']} battles in {replay_seconds:.1f} s through the API; "
        f"n_battles live {live['n_battles']} / rank {offline['n_battles']}; same order: "
        f"{order_live == order_off}; max |rating difference| {diff.max():.2e} Elo; NLL live "
        f"{live['nll']:.10f} / rank {offline['nll']:.10f}; flagged live {len(flagged_live)} / "
        f"annotators {len(flagged_off)}, same set: {flagged_live == flagged_off}"
    )
    assert served["n"] == len(battles) == live["n_battles"] == offline["n_battles"]
    assert order_live == order_off
    assert diff.max() < 1e-4
    assert flagged_live == flagged_off


@pytest.mark.slow
def test_simulated_arena_with_flippers_20000_votes(tmp_path):
    res = simulated_arena_run(tmp_path, n_models=30, n_annotators=100, n_votes=20_000, threads=8)
    print("\nsimulated arena through the API:", res)
    assert res["votes"] == 20_000
    assert res["flippers_flagged"] >= 0.9 * res["flippers"]
    assert res["tau_am_elo"] >= res["tau_m_elo_all_votes"]


def test_simulated_arena_with_flippers_small(tmp_path):
    """The same path at a size the default suite can afford (8 models, 800 votes): the
    flipper is flagged and the ranking is close to the truth. At this size the τ of two
    methods differ by noise, so am-ELO against m-ELO is compared by the slow 20,000-vote run."""
    res = simulated_arena_run(tmp_path, n_models=8, n_annotators=10, n_votes=800, threads=4, seed=1)
    assert res["votes"] == 800
    # at 67 votes the flipper (ability −0.92) is shrunk toward the crowd's 1: its ability falls to
    # or below 0, so it weighs nothing, but its upper bound is not always below ε = 0 (flagged in
    # 3 of 4 runs at this size; weight 0 in 4 of 4): the test is that its votes do not count
    assert res["flippers_silenced"] == res["flippers"] == 1 and res["honest_silenced"] == 0
    assert res["honest_flagged"] == 0
    assert res["tau_am_elo"] >= 0.6
