"""Bounded influence in the live arena (docs/guides/annotators.md): the published am-ELO
leaderboard weighs each account by min(max(a_k, 0), ability_cap) · min(1, n_k /
trust_ramp_votes) — it equals :func:`stablearena.crowd.trust.bounded_fit` of the exported votes — and
the admin API and view show each account's weight, influence and the reason."""

from __future__ import annotations

import re
import time
import warnings
from typing import Any

import numpy as np
import pytest
from fastapi.testclient import TestClient
from test_dashboard import MODELS, TRUTH, open_arena, wait_for_view

from stablearena.crowd.trust import DEFAULT_CAP, DEFAULT_RAMP_VOTES, bounded_fit
from stablearena.data.io import read_battles
from stablearena.raters.annotator import AmElo
from stablearena.service.client import ArenaClient

#: δ = 20 votes: ``newbie`` (30 votes) is in the fit but still ramping to DEFAULT_RAMP_VOTES;
#: the honest accounts have voted past the ramp (they weigh their ability).
HONEST_VOTES = int(DEFAULT_RAMP_VOTES) + 20
ACCOUNTS = {**{f"h{k}": HONEST_VOTES for k in range(5)}, "heavy": 240, "newbie": 30}


def vote_as(
    tc: TestClient,
    admin: ArenaClient,
    rng: np.random.Generator,
    accounts: dict[str, int] = ACCOUNTS,
    before_voting: Any = None,
) -> None:
    """Honest accounts vote by the Bradley–Terry truth; ``heavy`` always for the stronger
    model (it agrees with the ranking, so its am-ELO ability is far above the others').
    ``before_voting()`` runs once the accounts exist."""
    clients = {
        name: ArenaClient(
            "http://testserver", admin.create_annotator(name), client=TestClient(tc.app), retries=0
        )
        for name in accounts
    }
    if before_voting is not None:
        before_voting()
    left = dict(accounts)
    while any(left.values()):
        for name, client in clients.items():
            if not left[name]:
                continue
            left[name] -= 1
            (b,) = client.next_battles()
            a, z = TRUTH[b["model_a"]], TRUTH[b["model_b"]]
            a_wins = a > z if name == "heavy" else rng.random() < 1 / (1 + np.exp(z - a))
            client.vote(b["battle_id"], "model_a" if a_wins else "model_b")


def exported_am_elo(admin: ArenaClient, tmp_path: Any, young: Any = None) -> Any:
    """am-ELO (δ = 20, ε = 0, no bounds) on the arena's exported votes; ``young`` (name →
    reason) left out of it and admitted afterwards (:func:`stablearena.crowd.trust.admit_young`)."""
    from stablearena.crowd.trust import admit_young

    path = tmp_path / "votes.jsonl"
    path.write_bytes(admin.export("jsonl"))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        counts = read_battles(path).counts(by_annotator=True)
        fit = AmElo(min_records=20, ability_threshold=0.0).fit(counts, leave_out=young)
        return admit_young(fit, counts, young) if young else fit


@pytest.fixture(scope="module")
def arena(tmp_path_factory):
    url = f"sqlite:///{tmp_path_factory.mktemp('trust') / 'arena.db'}"
    tc, admin = open_arena(url, policy="warn", ability_threshold=0.0, board_rule="am-elo")
    for m in MODELS:
        admin.add_model(m)
    vote_as(tc, admin, np.random.default_rng(3))
    admin.refit()
    yield tc, admin
    tc.__exit__(None, None, None)


def test_the_defaults_come_from_stablearena_trust(arena):
    tc, admin = arena
    cfg = admin._request("GET", "/v1/admin/config")
    assert cfg["ability_cap"] == DEFAULT_CAP and cfg["trust_ramp_votes"] == DEFAULT_RAMP_VOTES


def test_the_admin_api_says_who_was_capped_and_who_ramps(arena):
    tc, admin = arena
    ann = admin.annotators()
    assert ann["trust"]["ability_cap"] == DEFAULT_CAP
    assert ann["trust"]["n_capped"] >= 1 and ann["trust"]["n_ramped"] >= 1
    rows = {r["annotator"]: r for r in ann["annotators"]}
    heavy, new = rows["heavy"], rows["newbie"]
    assert heavy["ability"] > DEFAULT_CAP and heavy["weight"] == DEFAULT_CAP
    assert heavy["trust"].startswith(f"capped at {DEFAULT_CAP:g} (ability ")
    assert new["weight"] == pytest.approx(max(new["ability"], 0) * 30 / DEFAULT_RAMP_VOTES)
    assert f"new: weight ramps until {DEFAULT_RAMP_VOTES:g} votes (30 so far)" in new["trust"]
    honest = [rows[f"h{k}"] for k in range(5)]
    assert all(r["influence"] > 0 and r["influence_model"] in MODELS for r in honest)
    assert heavy["influence"] > new["influence"]


def test_the_leaderboard_is_bounded_fit_of_the_exported_votes(arena, tmp_path):
    tc, admin = arena
    live = admin.leaderboard()
    fit = exported_am_elo(admin, tmp_path)
    bounded = bounded_fit(fit, cap=DEFAULT_CAP, ramp_votes=DEFAULT_RAMP_VOTES)
    assert not np.allclose(bounded.scores, fit.scores, atol=1e-3)  # the rule changed the board
    want = dict(zip(bounded.models, bounded.ratings, strict=True))
    got = {m["model"]: m["rating"] for m in live["models"]}
    assert got.keys() == want.keys()
    assert np.allclose([got[m] for m in want], list(want.values()), atol=1e-4)
    assert any("bounded influence" in n for n in live["notes"])


def test_the_admin_view_shows_weight_influence_and_reason(arena):
    tc, admin = arena
    wait_for_view(tc)
    s = TestClient(tc.app, follow_redirects=False)
    s.post("/admin/login", data={"key": tc.app.state.admin_key})
    html = s.get("/admin").text
    assert 'id="bounded-influence"' in html
    head = re.search(r'<table class="annotators".*?<thead>(.*?)</thead>', html, re.S).group(1)
    assert all(c in head for c in ("weight", "influence", "bounded influence"))
    row = re.search(r'data-annotator="heavy"[^>]*>(.*?)</tr>', html, re.S).group(1)
    assert f'data-weight="{DEFAULT_CAP}"' in row and f"capped at {DEFAULT_CAP:g}" in row
    row = re.search(r'data-annotator="newbie"[^>]*>(.*?)</tr>', html, re.S).group(1)
    assert "new: weight ramps until" in row


def test_a_young_account_weighs_its_active_days_over_the_age_ramp(tmp_path):
    """The day ramp (trust_ramp_days, default DEFAULT_RAMP_DAYS) counts an account's active
    days — distinct UTC days with a vote (store.account_active_days) — not days since sign-up:
    four accounts created 20 days ago that voted on 20 different days weigh fully (at most 1
    before DEFAULT_RECORD_DAYS of record), one created a day ago that voted on one day weighs
    1/DEFAULT_RAMP_DAYS; the leaderboard is bounded_fit of the exported votes with those ages and active days."""
    import sqlalchemy as sa

    from stablearena.crowd.trust import DEFAULT_RAMP_DAYS, DEFAULT_RECORD_DAYS, DEFAULT_YOUNG_SHARE
    from stablearena.service.store.tables import annotators, meta, votes

    url = f"sqlite:///{tmp_path / 'arena.db'}"
    tc, admin = open_arena(url, policy="warn", ability_threshold=0.0, board_rule="am-elo")
    day, now = 86400.0, time.time()

    def backdate() -> None:  # the arena opened 60 days ago; accounts made 20 days ago, fresh 1
        engine = sa.create_engine(url)
        with engine.begin() as conn:
            conn.execute(
                meta.update().where(meta.c.key == "created_at").values(value=repr(now - 60 * day))
            )
            conn.execute(annotators.update().values(created_at=now - 20 * day))
            conn.execute(
                annotators.update().where(annotators.c.name == "fresh").values(created_at=now - day)
            )
        engine.dispose()

    def spread_votes() -> None:  # the old accounts' votes over 20 UTC days; fresh's today
        engine = sa.create_engine(url)
        with engine.begin() as conn:
            fresh = conn.execute(
                sa.select(annotators.c.id).where(annotators.c.name == "fresh")
            ).scalar_one()
            rows = conn.execute(
                sa.select(votes.c.id, votes.c.annotator_id)
                .where(votes.c.annotator_id != fresh)
                .order_by(votes.c.id)
            ).all()
            seen: dict[int, int] = {}
            for vid, who in rows:
                k = seen[who] = seen.get(who, -1) + 1
                conn.execute(
                    votes.update().where(votes.c.id == vid).values(created_at=now - (k % 20) * day)
                )
        engine.dispose()

    try:
        for m in MODELS:
            admin.add_model(m)
        accounts = {**{f"h{k}": 120 for k in range(4)}, "fresh": 120}
        vote_as(tc, admin, np.random.default_rng(5), accounts, before_voting=backdate)
        spread_votes()
        admin.refit()
        assert admin._request("GET", "/v1/admin/config")["trust_ramp_days"] == DEFAULT_RAMP_DAYS
        ann = admin.annotators()
        assert ann["trust"]["ramp_days"] == DEFAULT_RAMP_DAYS and ann["trust"]["n_young"] == 1
        rows = {r["annotator"]: r for r in ann["annotators"]}
        fresh = rows["fresh"]
        assert fresh["age_days"] == pytest.approx(1.0, abs=0.01)
        # under DEFAULT_RECORD_DAYS of record no account weighs more than 1 (the record rule)
        assert fresh["weight"] == pytest.approx(
            min(max(fresh["ability"], 0), 1.0) * 1 / DEFAULT_RAMP_DAYS
        )
        assert "young" in fresh["trust"]
        for k in range(4):
            r = rows[f"h{k}"]
            assert r["age_days"] == pytest.approx(20.0, abs=0.01) and "young" not in r["trust"]
            assert r["weight"] == pytest.approx(min(max(r["ability"], 0), 1.0))
        # the published leaderboard: bounded_fit of the exported votes with ages and active
        # days, the young account ("fresh": 1 active day) out of the ability fit and admitted
        assert fresh["reason"].startswith(f"young (1 of {DEFAULT_RAMP_DAYS:g} active days)")
        fit = exported_am_elo(admin, tmp_path, young={"fresh": "young"})
        ages = {n: r["age_days"] for n, r in rows.items()}
        active = {**{f"h{k}": 20.0 for k in range(4)}, "fresh": 1.0}
        want_fit = bounded_fit(
            fit,
            cap=DEFAULT_CAP,
            ramp_votes=DEFAULT_RAMP_VOTES,
            ages=ages,
            active_days=active,
            ramp_days=DEFAULT_RAMP_DAYS,
            record_days=DEFAULT_RECORD_DAYS,
            young_share=DEFAULT_YOUNG_SHARE,
        )
        old = bounded_fit(fit, cap=DEFAULT_CAP, ramp_votes=DEFAULT_RAMP_VOTES)
        assert not np.allclose(want_fit.scores, old.scores, atol=1e-4)
        want = dict(zip(want_fit.models, want_fit.ratings, strict=True))
        got = {m["model"]: m["rating"] for m in admin.leaderboard()["models"]}
        assert np.allclose([got[m] for m in want], list(want.values()), atol=1e-3)
    finally:
        tc.__exit__(None, None, None)


def test_a_published_fit_says_which_ages_its_age_ramp_used():
    from stablearena.service.refit import published_ages

    rows = [{"annotator": "a", "age_days": 2.5}, {"annotator": "b", "age_days": None}]
    payload = {"annotators": {"trust": {"ramp_days": 7.0}, "annotators": rows}}
    assert published_ages(payload) == {"a": 2.5, "b": float("inf")}
    payload["annotators"]["trust"]["ramp_days"] = None  # no age ramp
    assert published_ages(payload) is None and published_ages({}) is None
