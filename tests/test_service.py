"""The live arena (``stablearena serve``, issue 10; docs/methods/live-arena.md), on SQLite and on a real
PostgreSQL server the tests start themselves: serving rule, votes (durable, idempotent,
corrections), counts kept with the votes, screening online, leaderboards equal to ``rank`` on the
export, security and bad input, restart, crash (SIGKILL) and two workers on one database."""

from __future__ import annotations

import contextlib
import io
import json
import threading
import time
import uuid
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import httpx
import numpy as np
import pandas as pd
import pytest
import sqlalchemy as sa
from arena_process import ServerProcess
from fastapi.testclient import TestClient
from procs import HAVE_PROC, alive, children

from stablearena.service import store
from stablearena.service.app import create_app
from stablearena.service.client import ArenaClient, ArenaError
from stablearena.service.settings import Settings


# ---------------------------------------------------------------------------------- fixtures
@pytest.fixture(params=["sqlite", "postgresql"])
def db_url(request, tmp_path):
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path / 'arena.db'}"
    pg = request.getfixturevalue("postgres")
    return pg.create_database("t" + uuid.uuid4().hex[:12])


def settings_for(url: str, **arena) -> Settings:
    base = {"min_records": 0, "refit_votes": 1000, "refit_seconds": 1000.0}
    base.update(arena)
    return Settings(
        db=url,
        fit_in_process=False,
        poll_seconds=0.05,
        seed=0,
        rate_limit=1e6,
        rate_burst=1_000_000,
        arena=base,
    )


class Arena:
    """An in-process arena: the FastAPI test client, an admin client and annotator clients."""

    def __init__(self, tc: TestClient) -> None:
        self.tc = tc
        self.admin = ArenaClient(
            "http://testserver", tc.app.state.admin_key, client=TestClient(tc.app), retries=0
        )

    def annotator(self, name: str) -> ArenaClient:
        key = self.admin.create_annotator(name)
        return ArenaClient("http://testserver", key, client=TestClient(self.tc.app), retries=0)

    def raw(self, method: str, path: str, key: str | None = None, **kw):
        headers = kw.pop("headers", {})
        if key:
            headers["Authorization"] = f"Bearer {key}"
        return self.tc.request(method, path, headers=headers, **kw)


@pytest.fixture
def make_arena(db_url):
    opened = []

    def make(models=("a", "b", "c", "d", "e"), **arena) -> Arena:
        tc = TestClient(create_app(settings_for(db_url, **arena)))
        tc.__enter__()
        opened.append(tc)
        a = Arena(tc)
        for m in models:
            a.admin.add_model(m)
        return a

    yield make
    for tc in opened:
        tc.__exit__(None, None, None)


def better(battle: dict, truth: dict[str, float]) -> str:
    return "model_a" if truth[battle["model_a"]] > truth[battle["model_b"]] else "model_b"


def counts_from_votes(engine: sa.engine.Engine) -> dict:
    """Pair counts recomputed from the current votes (the reference for the counts table)."""
    out: Counter = Counter()
    with engine.connect() as conn:
        for a, b, k, o in conn.execute(
            sa.select(
                store.votes.c.model_a,
                store.votes.c.model_b,
                store.votes.c.annotator_id,
                store.votes.c.outcome,
            ).where(store.votes.c.superseded == sa.false())
        ):
            row = store.count_row(a, b, k, o, 1.0)
            for col in ("wins", "losses", "ties", "ties_both_bad"):
                out[(row["i"], row["j"], k, col)] += row[col]
    return {key: v for key, v in out.items() if v}


def counts_table(engine: sa.engine.Engine) -> dict:
    out = {}
    with engine.connect() as conn:
        for r in conn.execute(sa.select(store.pair_counts)):
            for col in ("wins", "losses", "ties", "ties_both_bad"):
                if getattr(r, col):
                    out[(r.i, r.j, r.annotator_id, col)] = getattr(r, col)
    return out


# ---------------------------------------------------------------------------------- basics
def test_first_start_creates_the_admin_key_once_and_stores_only_its_hash(db_url):
    engine = store.make_engine(db_url)
    key = store.migrate(engine)
    assert key and key.startswith("sa_")
    assert store.migrate(engine) is None  # later starts: no new key
    with engine.connect() as conn:
        dump = json.dumps([list(map(str, r)) for r in conn.execute(sa.select(store.annotators))])
    # the secret is all after "sa_<key id>_" (urlsafe base64: it may hold "_" itself)
    secret = key.split("_", 2)[2]
    assert key not in dump and secret not in dump
    engine.dispose()


def test_a_battle_is_served_voted_and_replayed_idempotently(make_arena):
    arena = make_arena()
    ann = arena.annotator("alice")
    (b,) = ann.next_battles()
    assert set(b) >= {"battle_id", "model_a", "model_b", "strategy", "propensity", "expires_at"}
    assert b["model_a"] != b["model_b"] and 0 < b["propensity"] <= 1
    first = ann.vote(b["battle_id"], "tie")
    assert first["replayed"] is False and first["outcome"] == "tie"
    again = ann.vote(b["battle_id"], "tie")
    assert again["replayed"] is True and again["vote_id"] == first["vote_id"]
    with pytest.raises(ArenaError) as exc:
        ann.vote(b["battle_id"], "model_a")
    assert exc.value.status == 409 and exc.value.field == "outcome"
    engine = arena.tc.app.state.engine
    assert counts_table(engine) == counts_from_votes(engine)
    with engine.connect() as conn:
        assert conn.execute(sa.select(sa.func.count()).select_from(store.votes)).scalar_one() == 1


def test_vote_errors_unknown_foreign_expired(make_arena):
    arena = make_arena(battle_ttl=0.3)
    alice, bob = arena.annotator("alice"), arena.annotator("bob")
    (b,) = alice.next_battles()
    with pytest.raises(ArenaError) as exc:
        bob.vote(b["battle_id"], "model_a")
    assert exc.value.status == 403 and exc.value.field == "battle_id"
    with pytest.raises(ArenaError) as exc:
        alice.vote(uuid.uuid4().hex, "model_a")
    assert exc.value.status == 404
    with pytest.raises(ArenaError) as exc:
        alice.vote("not-a-battle", "model_a")
    assert exc.value.status == 404 and exc.value.field == "battle_id"
    time.sleep(0.4)
    with pytest.raises(ArenaError) as exc:
        alice.vote(b["battle_id"], "model_a")
    assert exc.value.status == 410


def test_a_correction_within_the_window_keeps_the_history_and_moves_the_count(make_arena):
    arena = make_arena(correction_window=60.0)
    ann = arena.annotator("alice")
    (b,) = ann.next_battles()
    ann.vote(b["battle_id"], "model_a")
    fixed = ann.vote(b["battle_id"], "model_b")
    assert fixed["corrected"] and fixed["revision"] == 1
    assert ann.vote(b["battle_id"], "model_b")["replayed"]
    engine = arena.tc.app.state.engine
    assert counts_table(engine) == counts_from_votes(engine)
    assert sum(counts_table(engine).values()) == 1
    full = pd.read_csv(io.BytesIO(arena.admin.export("csv", history=True)))
    assert list(full["winner"]) == ["model_a", "model_b"] and list(full["superseded"]) == [
        True,
        False,
    ]
    current = pd.read_csv(io.BytesIO(arena.admin.export("csv")))
    assert list(current["winner"]) == ["model_b"]
    # with corrections switched off, a different outcome is a conflict
    arena.admin.config(correction_window=0.0)
    with pytest.raises(ArenaError) as exc:
        ann.vote(b["battle_id"], "tie")
    assert exc.value.status == 409


# ---------------------------------------------------------------------------------- serving rule
def test_serving_rule_excludes_retired_and_outage_models_and_respects_models(make_arena):
    arena = make_arena(exploration=0.3)
    ann = arena.annotator("alice")
    arena.admin.update_model("a", retired=True)
    arena.admin.update_model("b", outage=True)
    seen = set()
    for _ in range(30):
        for b in ann.next_battles(k=2):
            seen |= {b["model_a"], b["model_b"]}
    assert seen <= {"c", "d", "e"} and len(seen) == 3
    arena.admin.update_model("b", outage=False)
    forced = ann.next_battles(k=3, models=["b", "e"])
    assert all({b["model_a"], b["model_b"]} == {"b", "e"} for b in forced)
    assert all(b["propensity"] == pytest.approx(1.0) for b in forced)
    with pytest.raises(ArenaError) as exc:
        ann.next_battles(models=["a", "c"])  # a is retired: one model left
    assert exc.value.status == 409 and exc.value.field == "models"
    with pytest.raises(ArenaError) as exc:
        ann.next_battles(models=["c", "nope"])
    assert exc.value.status == 422 and exc.value.field == "models"


def test_a_model_added_before_the_tracker_knows_it_waits_and_nothing_fails(make_arena, monkeypatch):
    """Between a registry reload that brings a new model and the rebuild of the information
    tracker (another thread, or another worker's change seen by a poll), requests are served
    among the models the tracker knows; asking for the new one is 503 'retry shortly', never a
    500; after the rebuild it is served."""
    arena = make_arena(models=("a", "b", "c"))
    ann = arena.annotator("alice")
    st = arena.tc.app.state.arena
    rebuild = st.rebuild_tracker
    monkeypatch.setattr(st, "rebuild_tracker", lambda **kw: None)  # the window, held open
    arena.admin.add_model("d")
    assert "d" in st.model_ids
    for _ in range(10):
        (b,) = ann.next_battles()
        assert {b["model_a"], b["model_b"]} <= {"a", "b", "c"}
    with pytest.raises(ArenaError) as exc:
        ann.next_battles(models=["a", "d"])
    assert exc.value.status == 503 and exc.value.code == "not_ready"
    monkeypatch.setattr(st, "rebuild_tracker", rebuild)
    st.rebuild_tracker()
    forced = ann.next_battles(models=["a", "d"])
    assert {forced[0]["model_a"], forced[0]["model_b"]} == {"a", "d"}


def test_sides_are_randomised_and_judged_pairs_wait_while_others_remain(make_arena):
    arena = make_arena(models=("a", "b", "c", "d"))
    ann = arena.annotator("alice")
    pairs, firsts = [], Counter()
    for _ in range(6):  # 4 models: 6 pairs; each judged once before any repeats
        (b,) = ann.next_battles()
        ann.vote(b["battle_id"], "tie")
        pairs.append(frozenset((b["model_a"], b["model_b"])))
        firsts[b["model_a"]] += 1
    assert len(set(pairs)) == 6
    more = [ann.next_battles()[0] for _ in range(40)]
    assert len({b["model_a"] for b in more}) >= 3  # either side, any model


def test_propensity_is_the_mixture_of_the_strategy_and_the_exploration_floor(make_arena):
    eps = 0.25
    arena = make_arena(models=tuple("abcdef"), exploration=eps)
    ann = arena.annotator("alice")
    truth = dict(zip("abcdef", range(6), strict=True))
    for _ in range(40):  # connect the graph (no warm-up picks)
        (b,) = ann.next_battles()
        ann.vote(b["battle_id"], better(b, truth))
    n_allowed = 15  # alice has judged every pair, so every pair is allowed again
    props = Counter()
    for _ in range(200):
        (b,) = ann.next_battles()
        props[(b["strategy"], round(b["propensity"], 9))] += 1
    floor = eps / max(n_allowed, 1)
    for (strategy, p), _ in props.items():
        # π = (1 − ε)·P_d-opt(pair) + ε/15, where d-opt gives 1/t to each of t tied best pairs
        share = (p - floor) / (1 - eps)
        ties = 1 / share if share > 1e-9 else 0
        assert p >= floor - 1e-12 and (share < 1e-9 or abs(ties - round(ties)) < 1e-6), p
        if strategy != "explore":
            assert share > 1e-9  # the strategy's own pick has its probability
    share = sum(n for (s, _), n in props.items() if s == "explore") / 200
    assert 0.1 < share < 0.42


def test_the_default_strategy_is_read_at_run_time(make_arena, monkeypatch):
    import stablearena.design.selection as selection

    arena = make_arena()
    assert arena.admin.config()["strategy_in_use"] == selection.DEFAULT_STRATEGY
    monkeypatch.setattr(selection, "DEFAULT_STRATEGY", "random")
    arena.admin.config(exploration=0.0)  # any change reloads the configuration
    ann = arena.annotator("alice")
    (b,) = ann.next_battles()
    assert b["strategy"] == "random"
    arena.admin.config(strategy="a-opt")
    assert ann.next_battles()[0]["strategy"] == "a-opt"


# ---------------------------------------------------------------------------------- leaderboards
def play(
    arena: Arena, names: list[str], n: int, truth: dict[str, float], seed: int = 0, flippers=()
):
    rng = np.random.default_rng(seed)
    clients = {name: arena.annotator(name) for name in names}
    for t in range(n):
        name = names[t % len(names)]
        (b,) = clients[name].next_battles()
        p = 1 / (1 + np.exp(-(truth[b["model_a"]] - truth[b["model_b"]])))
        out = "model_a" if rng.random() < p else "model_b"
        if rng.random() < 0.1:
            out = "tie"
        if name in flippers and out != "tie":
            out = "model_b" if out == "model_a" else "model_a"
        clients[name].vote(b["battle_id"], out)
    return clients


@pytest.mark.slow_on("sqlite")  # the PostgreSQL run stays in the default suite
@pytest.mark.parametrize("fmt", ["jsonl", "csv", "parquet"])
def test_the_export_reads_back_through_rank_to_the_identical_leaderboard(
    make_arena, cli, tmp_path, fmt
):
    arena = make_arena(  # `rank` fits am-ELO without bounded influence (test_service_trust)
        models=tuple("abcdef"),
        board_rule="am-elo",  # the published fit is the am-ELO rule's (the crowd rule's: below)
        min_records=5,
        ability_threshold=0.0,
        ability_cap=0.0,
        trust_ramp_votes=0.0,
    )
    truth = dict(zip("abcdef", np.linspace(-1.5, 1.5, 6), strict=True))
    play(arena, ["u1", "u2", "u3", "u4"], 160, truth, seed=1)
    arena.admin.refit()
    path = tmp_path / f"votes.{fmt}"
    path.write_bytes(arena.admin.export(fmt))
    for method, flags in (
        ("m-elo", []),
        ("am-elo", ["--min-records", "5", "--ability-threshold", "0"]),
    ):
        live = arena.admin.leaderboard(method=method)
        code, out, err = cli("rank", path, "--method", method, "--format", "json", *flags)
        assert code == 0, err
        offline = json.loads(out)
        assert live["n_battles"] == offline["n_battles"] == 160
        assert [m["model"] for m in live["models"]] == [m["model"] for m in offline["models"]]
        tol = 0.0 if method == "m-elo" else 1e-4  # am-ELO's refit is warm-started: same optimum
        assert np.allclose(
            [m["rating"] for m in live["models"]],
            [m["rating"] for m in offline["models"]],
            rtol=0,
            atol=tol,
        )
        assert live["nll"] == pytest.approx(offline["nll"], abs=1e-12 if tol == 0 else 1e-9)
        assert set(offline) <= set(live) and {"as_of_vote", "fitted_at"} <= set(live)
    assert arena.admin.leaderboard()["as_of_vote"] == 160


def test_leaderboard_with_intervals_and_other_methods(make_arena):
    arena = make_arena(models=tuple("abcd"))
    truth = dict(zip("abcd", [0.0, 1.0, 2.0, 3.0], strict=True))
    play(arena, ["u1", "u2", "u3", "u4"], 100, truth)
    arena.admin.refit()
    lb = arena.admin.leaderboard(method="m-elo", ci="fisher")
    assert lb["ci"]["method"] == "fisher" and all("ci_low" in m for m in lb["models"])
    assert arena.admin.leaderboard(method="bt")["method"] == "bt"
    with pytest.raises(ArenaError) as exc:
        arena.admin.leaderboard(method="elo")
    assert exc.value.status == 422 and exc.value.field == "method"
    with pytest.raises(ArenaError) as exc:
        arena.admin.leaderboard(ci="magic")
    assert exc.value.status == 422 and exc.value.field == "ci"


def test_a_young_arena_says_it_waits_for_min_records_and_how_to_change_it(make_arena):
    """Before any annotator has δ = min_records votes there is no am-ELO fit: the leaderboard,
    a forced refit and /healthz say so (503 "waiting", naming the setting and how to lower it)
    instead of reporting a failed fit; lowering δ at run time publishes the first fit."""
    arena = make_arena(models=tuple("abcd"), min_records=50, board_rule="am-elo")  # crowd: no wait
    play(arena, ["u1"], 7, dict(zip("abcd", [0.0, 0.5, 1.0, 1.5], strict=True)))
    with pytest.raises(ArenaError) as exc:
        arena.admin.refit()
    assert exc.value.status == 503 and exc.value.code == "waiting"
    assert "arena.min_records=50" in str(exc.value) and "the most so far: 7" in str(exc.value)
    with pytest.raises(ArenaError) as exc:
        arena.admin.leaderboard()
    assert exc.value.status == 503 and exc.value.code == "waiting"
    assert "PATCH /v1/admin/config" in str(exc.value)
    health = arena.raw("GET", "/healthz").json()
    assert health["refit_error"] is None and "min_records=50" in health["refit_waiting"]
    status = arena.raw("GET", "/dashboard/poll").json()["status"]  # what the page shows
    assert "no leaderboard yet" in status and "arena.min_records=50" in status
    # meanwhile the other methods rank every vote (computed from the counts)
    young = arena.admin.leaderboard(method="m-elo")
    assert young["method"] == "m-elo" and young["as_of_vote"] == 7 and young["n_battles"] == 7
    with pytest.raises(ArenaError) as exc:  # am-ELO with intervals waits for its fit too
        arena.admin.leaderboard(ci="fisher")
    assert exc.value.code == "waiting"
    arena.admin.config(min_records=5)
    arena.admin.refit()
    assert arena.admin.leaderboard()["as_of_vote"] == 7
    assert arena.raw("GET", "/healthz").json()["refit_waiting"] is None


def test_the_refitter_keeps_the_leaderboard_within_k_votes(make_arena):
    arena = make_arena(models=tuple("abcd"), refit_votes=10, refit_seconds=1000.0)
    truth = dict(zip("abcd", [0.0, 0.5, 1.0, 1.5], strict=True))
    with pytest.raises(ArenaError) as exc:
        arena.admin.leaderboard()
    assert exc.value.status == 503
    play(arena, ["u1", "u2"], 35, truth)
    # the refitter refits whenever the fit is K = 10 or more votes behind, so once it settles
    # the published fit is at most 9 votes behind the 35 (where between 26 and 35 it ends
    # depends on how fast the votes came relative to the fits)
    deadline = time.time() + 20
    while time.time() < deadline:
        try:
            if arena.admin.leaderboard()["as_of_vote"] >= 35 - 9:
                break
        except ArenaError:
            pass
        time.sleep(0.05)
    time.sleep(0.3)  # several polls of the refitter: nothing is due any more
    assert 35 - 9 <= arena.admin.leaderboard()["as_of_vote"] <= 35
    metrics = arena.raw("GET", "/metrics").text
    assert "stablearena_votes_total" in metrics and "stablearena_staleness_votes" in metrics


@pytest.mark.slow_on("sqlite")  # the PostgreSQL run stays in the default suite
def test_screening_online_flags_and_excludes_flippers_with_reasons(make_arena):
    # no fit before all 480 votes are in (δ above everyone's records), so that the flippers
    # are excluded in the round the test reads, whatever the speed of the votes against the
    # background refitter (a later round says "excluded in an earlier round")
    arena = make_arena(models=tuple("abcdefgh"), min_records=1000, policy="exclude")
    truth = dict(zip("abcdefgh", np.linspace(-2, 2, 8), strict=True))
    names = [f"u{k}" for k in range(8)]
    play(arena, names, 480, truth, seed=3, flippers={"u0", "u1"})
    arena.admin.config(min_records=20)
    arena.admin.refit()
    payload = arena.admin.annotators()
    by = {a["annotator"]: a for a in payload["annotators"]}
    assert by["u0"]["status"] == "excluded" and by["u1"]["status"] == "excluded"
    assert by["u0"]["reason"].startswith("excluded: ability")
    assert all(by[f"u{k}"]["status"] == "included" for k in range(2, 8))
    assert payload["policy"] == "exclude" and payload["n_flagged"] == 2
    # the excluded annotators' votes are kept, and left out of the published fit
    assert arena.admin.leaderboard()["n_battles"] == 480 - by["u0"]["records"] - by["u1"]["records"]
    assert len(pd.read_csv(io.BytesIO(arena.admin.export("csv")))) == 480
    # an annotator key cannot read the screening
    with pytest.raises(ArenaError) as exc:
        next(iter(arena.tc.app.state.arena.principals.values()))
        ArenaClient(
            "http://testserver", None, client=TestClient(arena.tc.app), retries=0
        ).annotators()
    assert exc.value.status == 401


# ---------------------------------------------------------------------------------- security
def test_keys_roles_and_revocation(make_arena):
    arena = make_arena()
    key = arena.admin.create_annotator("alice")
    ok = arena.raw("POST", "/v1/battles", key, json={})
    assert ok.status_code == 200
    for bad in (None, "sa_0000000000000000_nope", "Bearer", key + "x"):
        r = arena.raw("POST", "/v1/battles", bad, json={})
        assert r.status_code == 401 and r.json()["error"]["field"] == "authorization"
    r = arena.raw("POST", "/v1/battles", headers={"Authorization": "Basic abc"}, json={})
    assert r.status_code == 401
    assert arena.raw("GET", "/v1/export", key).status_code == 403
    assert arena.raw("PATCH", "/v1/admin/config", key, json={"exploration": 0.5}).status_code == 403
    with pytest.raises(ArenaError) as exc:
        arena.admin.create_annotator("alice")
    assert exc.value.status == 409
    arena.admin.revoke_annotator("alice")
    assert arena.raw("POST", "/v1/battles", key, json={}).status_code == 401
    new = arena.admin.create_annotator("alice")  # a revoked annotator gets a new key
    assert arena.raw("POST", "/v1/battles", new, json={}).status_code == 200


def test_rate_limit_and_body_limit(db_url):
    s = settings_for(db_url)
    s.rate_limit, s.rate_burst, s.max_body_bytes = 1.0, 3, 1024
    with TestClient(create_app(s)) as tc:
        arena = Arena(tc)
        arena.admin.add_model("a")
        arena.admin.add_model("b")
        key = arena.admin.create_annotator("alice")
        codes = [arena.raw("POST", "/v1/battles", key, json={}).status_code for _ in range(5)]
        assert codes[:3] == [200, 200, 200] and 429 in codes[3:]
        r = arena.raw("POST", "/v1/battles", key, json={})
        assert r.status_code == 429 and int(r.headers["Retry-After"]) >= 1
        big = arena.raw(
            "POST",
            "/v1/battles",
            key,
            content=b"{" + b" " * 5000 + b"}",
            headers={"content-type": "application/json"},
        )
        assert big.status_code == 413 and big.json()["error"]["field"] == "body"

        time.sleep(1.1)  # one token back: the chunked body is read after the key is checked

        def chunks():
            yield b'{"k": 1, "models": ['
            for _ in range(200):
                yield b'"aaaaaaaaaaaaaaaaaaaa",'
            yield b'"b"]}'

        chunked = arena.raw(
            "POST",
            "/v1/battles",
            key,
            content=chunks(),
            headers={"content-type": "application/json"},
        )
        assert chunked.status_code == 413


BAD_INPUT = [
    ("POST", "/v1/battles", {"k": 0}, "k"),
    ("POST", "/v1/battles", {"k": 10_000}, "k"),
    ("POST", "/v1/battles", {"k": "two"}, "k"),
    ("POST", "/v1/battles", {"models": ["a"]}, "models"),
    ("POST", "/v1/battles", {"models": "a,b"}, "models"),
    ("POST", "/v1/battles", {"models": ["a", ""]}, "models.1"),
    ("POST", "/v1/battles", {"colour": "red"}, "colour"),
    ("POST", "/v1/battles", "[1, 2", "body"),
    ("POST", "/v1/battles", [1, 2], "body"),
    ("POST", "/v1/battles/{bid}/vote", {"outcome": "left"}, "outcome"),
    ("POST", "/v1/battles/{bid}/vote", {}, "outcome"),
    ("POST", "/v1/battles/{bid}/vote", {"outcome": 1}, "outcome"),
    ("POST", "/v1/battles/" + "x" * 70 + "/vote", {"outcome": "tie"}, "battle_id"),
    ("GET", "/v1/leaderboard?method=magic", None, "method"),
    ("GET", "/v1/leaderboard?level=2", None, "level"),
    ("GET", "/v1/export?format=xlsx", None, "format"),
    ("PATCH", "/v1/admin/config", {"exploration": 2}, "exploration"),
    ("PATCH", "/v1/admin/config", {"policy": "ban"}, "policy"),
    ("PATCH", "/v1/admin/config", {"strategy": "magic"}, "strategy"),
    ("PATCH", "/v1/admin/config", {"bogus": 1}, "bogus"),
    ("POST", "/v1/admin/models", {"name": ""}, "name"),
    ("POST", "/v1/admin/models", {"name": "a"}, "name"),
    ("PATCH", "/v1/admin/models/nope", {"retired": True}, "name"),
    ("PATCH", "/v1/admin/models/a", {"boost": 0.5}, "boost"),
    ("PATCH", "/v1/admin/models/a", {}, "body"),
    ("POST", "/v1/admin/annotators", {"name": "x", "role": "root"}, "role"),
    ("DELETE", "/v1/admin/annotators/nobody", None, "name"),
    ("GET", "/v1/nowhere", None, "path"),
]


def test_bad_input_is_a_4xx_json_error_naming_the_field(make_arena):
    """One arena, every bad request in :data:`BAD_INPUT` (method, path, body, field at fault)."""
    arena = make_arena()
    key = arena.tc.app.state.admin_key
    (b,) = arena.admin.next_battles()
    for method, path, body, field in BAD_INPUT:
        kw = {}
        if isinstance(body, str):
            kw = {"content": body.encode(), "headers": {"content-type": "application/json"}}
        elif body is not None:
            kw = {"json": body}
        r = arena.raw(method, path.replace("{bid}", b["battle_id"]), key, **kw)
        assert 400 <= r.status_code < 500, (method, path, body, r.text)
        err = r.json()["error"]
        assert err["field"] == field, (method, path, body, err)
        assert "Traceback" not in r.text and err["message"]


def test_the_hot_routes_answer_as_their_fastapi_routes(make_arena):
    """The plain-ASGI front (service.hot) and the FastAPI routes behind it give the same
    answers: the bad bodies of BAD_INPUT, keys, oversized bodies, and served battles and votes
    whose pre-encoded JSON round-trips names with quotes and non-ASCII characters."""
    names = ('gpt "4o"', "modèle-ü/ß", "c\\d", "e")
    arena = make_arena(models=names)
    key = arena.admin.create_annotator("alice")
    inner = TestClient(arena.tc.app.app)  # the FastAPI application itself, without the front
    paths = {"front": arena.tc, "fastapi": inner}

    def both(method, path, auth=key, **kw):
        headers = dict(kw.pop("headers", {}))
        if auth:
            headers["Authorization"] = f"Bearer {auth}"
        return {name: tc.request(method, path, headers=headers, **kw) for name, tc in paths.items()}

    empty = both("GET", "/v1/leaderboard", None)  # no votes yet: the same 503
    assert [r.status_code for r in empty.values()] == [503, 503]
    assert empty["front"].json() == empty["fastapi"].json()
    served = both("POST", "/v1/battles", json={"k": 2})
    for r in served.values():
        assert r.status_code == 200 and r.headers["content-type"] == "application/json"
        for b in r.json()["battles"]:
            assert {b["model_a"], b["model_b"]} <= set(names) and b["model_a"] != b["model_b"]
            assert isinstance(b["propensity"], float) and 0 < b["propensity"] <= 1
    assert served["front"].json().keys() == served["fastapi"].json().keys()
    for name, r in served.items():  # each path votes on a battle it served
        bid = r.json()["battles"][0]["battle_id"]
        voted = paths[name].post(
            f"/v1/battles/{bid}/vote",
            json={"outcome": "tie"},
            headers={"Authorization": f"Bearer {key}"},
        )
        assert voted.status_code == 200, voted.text
        body = voted.json()
        assert body["outcome"] == "tie" and body["replayed"] is False
        assert {body["model_a"], body["model_b"]} <= set(names)
        again = both("POST", f"/v1/battles/{bid}/vote", json={"outcome": "tie"})
        assert all(a.json() == {**body, "replayed": True} for a in again.values())
        other = both("POST", f"/v1/battles/{bid}/vote", json={"outcome": "model_a"})
        assert [a.status_code for a in other.values()] == [409, 409]
    bid = served["front"].json()["battles"][1]["battle_id"]
    cases = [
        (path.replace("{bid}", bid), body, None)
        for method, path, body, _ in BAD_INPUT
        if method == "POST" and path.startswith("/v1/battles")
    ]
    cases += [
        ("/v1/battles", {}, "sa_0000000000000000_nope"),
        ("/v1/battles", {}, ""),
        ("/v1/battles", {"k": 1.5}, None),
        ("/v1/battles", {"k": True}, None),
        ("/v1/battles", {"k": "2"}, None),
        ("/v1/battles", {"models": [names[0], 3]}, None),
        ("/v1/battles", {"models": ["nope", "e"]}, None),
        (f"/v1/battles/{bid}/vote", {"outcome": "tie", "why": "x"}, None),
        (f"/v1/battles/{bid}/vote", "", None),
        (f"/v1/battles/{'0' * 32}/vote", {"outcome": "tie"}, None),
    ]
    for path, body, auth in cases:
        kw = (
            {"content": body.encode(), "headers": {"content-type": "application/json"}}
            if isinstance(body, str)
            else {"json": body}
        )
        got = both("POST", path, key if auth is None else auth, **kw)
        front, fastapi = got["front"], got["fastapi"]
        assert front.status_code == fastapi.status_code, (path, body, front.text, fastapi.text)
        if front.status_code != 200:  # pydantic's lax mode takes k = true as 1, on both paths
            assert 400 <= front.status_code < 500 and front.json() == fastapi.json(), (
                path,
                body,
                front.text,
                fastapi.text,
            )
    # an oversized body: 413 naming the body, before the key is even looked at
    big = both("POST", "/v1/battles", None, content=b"{" + b" " * 70_000 + b"}")
    assert [r.status_code for r in big.values()] == [413, 413]
    assert big["front"].json() == big["fastapi"].json()
    # the published leaderboard: the same bytes, the `rank` contract plus as_of_vote
    arena.admin.refit()
    board = both("GET", "/v1/leaderboard", None)
    assert board["front"].content == board["fastapi"].content
    assert (
        board["front"].json() == arena.admin.leaderboard()
        and board["front"].json()["as_of_vote"] == 2
    )
    inner.close()


@contextlib.contextmanager
def deaf_worker(db_url: str) -> Iterator[TestClient]:
    """A second worker on the arena's database that hears of changes made through the first
    only when a request makes it look (its refitter's poll is switched off)."""
    other = TestClient(create_app(settings_for(db_url), worker=1))
    other.__enter__()
    try:
        other.app.state.refitter.tick = lambda: None
        yield other
    finally:
        other.__exit__(None, None, None)


def test_a_model_added_through_another_worker_is_found_at_once(make_arena, db_url):
    """A request naming a model that another worker added since this one last polled looks
    the registry up again instead of answering 422 unknown_model."""
    arena = make_arena(models=("a", "b"))
    with deaf_worker(db_url) as other:
        key = arena.admin.create_annotator("u")
        auth = {"Authorization": f"Bearer {key}"}
        assert other.post("/v1/battles", json={}, headers=auth).status_code == 200
        arena.admin.add_model("c")
        r = other.post("/v1/battles", json={"models": ["a", "c"]}, headers=auth)
        assert r.status_code == 200, r.text
        (b,) = r.json()["battles"]
        assert {b["model_a"], b["model_b"]} == {"a", "c"}
        bad = other.post("/v1/battles", json={"models": ["a", "nope"]}, headers=auth)
        assert bad.status_code == 422 and bad.json()["error"]["code"] == "unknown_model"


def test_models_added_through_another_worker_end_no_pair_at_once(make_arena, db_url):
    """A worker that has heard of fewer than two active models looks the registry up again
    before answering 409 no_pair: models added through another worker are served at once
    (found by serve --workers 2, where the worker that did not take the admin's calls answered
    409 until its next poll)."""
    arena = make_arena(models=("a",))
    with deaf_worker(db_url) as other:
        key = arena.admin.create_annotator("u")
        auth = {"Authorization": f"Bearer {key}"}
        lonely = other.post("/v1/battles", json={}, headers=auth)
        assert lonely.status_code == 409 and lonely.json()["error"]["code"] == "no_pair"
        arena.admin.add_model("b")
        r = other.post("/v1/battles", json={}, headers=auth)
        assert r.status_code == 200, r.text
        (b,) = r.json()["battles"]
        assert {b["model_a"], b["model_b"]} == {"a", "b"}


def test_the_registry_check_reads_once_per_transaction_and_again_after_a_bump(db_url):
    """store.registry_changed reads the revision at the first write of a transaction that asks
    (a change committed by another connection before it is seen), keeps it for the rest of
    the transaction, and reads it again after bump_revision in the same transaction."""
    engine = store.make_engine(db_url)
    store.migrate(engine)
    with engine.connect() as conn:
        rev = int(store.get_meta(conn, "revision") or 0)
    writer, other = store._write_conn(engine), store._write_conn(engine)
    try:
        with writer.begin():
            cur = store.cursor(writer)
            assert not store.registry_changed(cur, writer, rev)
            store.bump_revision(writer)
            assert store.registry_changed(cur, writer, rev)
        with other.begin():
            store.bump_revision(other)  # another worker's change, committed before
        with writer.begin():
            cur = store.cursor(writer)
            assert store.registry_changed(cur, writer, rev + 1)
            assert not store.registry_changed(cur, writer, rev + 2)
            assert not store.registry_changed(cur, writer, None)
    finally:
        writer.close()
        other.close()
    engine.dispose()


def test_a_key_revoked_through_another_worker_is_refused_at_once(make_arena, db_url):
    """A key revoked through one worker is refused by another at once — for the next battle
    and for a vote on a battle served before — though the other has not polled since: each
    write checks the registry's revision in its transaction (otherwise the key would keep
    working there until the next poll)."""
    arena = make_arena(models=("a", "b", "c"))
    with deaf_worker(db_url) as other:
        key = arena.admin.create_annotator("u")
        auth = {"Authorization": f"Bearer {key}"}
        first, second = (
            other.post("/v1/battles", json={}, headers=auth).json()["battles"][0] for _ in range(2)
        )
        ok = other.post(
            f"/v1/battles/{first['battle_id']}/vote", json={"outcome": "tie"}, headers=auth
        )
        assert ok.status_code == 200, ok.text
        arena.admin.revoke_annotator("u")
        served = other.post("/v1/battles", json={}, headers=auth)
        assert served.status_code == 401, served.text
        voted = other.post(
            f"/v1/battles/{second['battle_id']}/vote", json={"outcome": "tie"}, headers=auth
        )
        assert voted.status_code == 401, voted.text
    export = arena.admin.export("jsonl").decode().splitlines()
    assert len(export) == 1  # the vote before the revocation only


def test_a_model_retired_through_another_worker_is_never_served_again(make_arena, db_url):
    """After the admin's call to retire a model (or put it under outage) returns, no worker
    serves it, even one that has not polled since."""
    arena = make_arena(models=("a", "b", "c", "d"))
    with deaf_worker(db_url) as other:
        auth = {"Authorization": f"Bearer {arena.admin.create_annotator('u')}"}
        assert other.post("/v1/battles", json={"k": 4}, headers=auth).status_code == 200
        arena.admin.update_model("c", retired=True)
        arena.admin.update_model("d", outage=True)
        for _ in range(12):
            r = other.post("/v1/battles", json={}, headers=auth)
            assert r.status_code == 200, r.text
            (b,) = r.json()["battles"]
            assert {b["model_a"], b["model_b"]} == {"a", "b"}


def test_two_workers_on_one_database_keep_every_rule(make_arena, db_url):
    """Two workers (two applications, each with its own caches and writer) on one database:
    an annotator served and voting through either one never gets a pair it has judged while
    another remains, even a pair judged through the other worker a moment ago; a vote is
    idempotent whichever worker gets it again; both serve the newest fit."""
    arena = make_arena(models=("a", "b", "c"), exploration=0.0)
    other = TestClient(create_app(settings_for(db_url, exploration=0.0), worker=1))
    other.__enter__()
    try:
        first, second = arena.tc, other
        for u in range(16):
            key = arena.admin.create_annotator(f"u{u}")
            auth = {"Authorization": f"Bearer {key}"}
            pairs = []
            # 3 models, 3 pairs: each judged once before any repeats. Served and voted through
            # one worker, then the next battle from the other, which has not heard of the vote
            for w in (second, first, second):
                (b,) = w.post("/v1/battles", json={}, headers=auth).json()["battles"]
                bid = b["battle_id"]
                voted = w.post(f"/v1/battles/{bid}/vote", json={"outcome": "tie"}, headers=auth)
                assert voted.status_code == 200, voted.text
                pairs.append(frozenset((b["model_a"], b["model_b"])))
            assert len(set(pairs)) == 3, (u, pairs)
            # every pair judged: repeats are allowed again
            assert first.post("/v1/battles", json={}, headers=auth).status_code == 200
            # the vote again, or another outcome, through the worker that did not record it
            again = first.post(f"/v1/battles/{bid}/vote", json={"outcome": "tie"}, headers=auth)
            assert again.json()["replayed"] is True
            assert again.json()["vote_id"] == voted.json()["vote_id"]
            changed = first.post(
                f"/v1/battles/{bid}/vote", json={"outcome": "model_a"}, headers=auth
            )
            assert changed.status_code == 409
        redrawn = first.get("/metrics").text
        assert "stablearena_battles_redrawn_total 0.0" not in redrawn, (
            "the first worker never drew a pair judged through the second: the test proves nothing"
        )
        engine = arena.tc.app.state.engine
        assert counts_table(engine) == counts_from_votes(engine)
        arena.admin.refit()
        deadline = time.time() + 20
        while time.time() < deadline:
            boards = [w.get("/v1/leaderboard").json() for w in (first, second)]
            if boards[0] == boards[1]:
                break
            time.sleep(0.05)
        assert boards[0] == boards[1] and boards[0]["as_of_vote"] == 48
    finally:
        other.__exit__(None, None, None)


# ---------------------------------------------------------------------------------- durability
def test_restart_rebuilds_every_cache_from_the_database(db_url):
    s = settings_for(db_url, min_records=0)
    truth = dict(zip("abcd", [0.0, 0.5, 1.0, 1.5], strict=True))
    with TestClient(create_app(s)) as tc:
        arena = Arena(tc)
        admin_key = tc.app.state.admin_key
        for m in "abcd":
            arena.admin.add_model(m)
        play(arena, ["u1", "u2"], 40, truth)
        arena.admin.refit()
        before = arena.admin.leaderboard()
        judged = {k: set(v) for k, v in tc.app.state.arena.judged.items()}
        battles_before = tc.app.state.arena.tracker.pair_battles.copy()
    with TestClient(create_app(s)) as tc:
        assert tc.app.state.admin_key is None  # printed once, on the first start only
        admin = ArenaClient("http://testserver", admin_key, client=tc)
        after = admin.leaderboard()
        assert after["models"] == before["models"] and after["as_of_vote"] == before["as_of_vote"]
        st = tc.app.state.arena
        assert {k: set(v) for k, v in st.judged.items()} == judged
        assert np.array_equal(st.tracker.pair_battles, battles_before)


def test_import_seeds_the_arena_once(db_url, tmp_path, cli):
    from stablearena.service.seed import import_log
    from stablearena.simulation.perturbation import simulate_arena

    log = simulate_arena(6, 600, profiles={"honest": 5}, seed=2).battles.to_frame()
    path = tmp_path / "log.csv"
    log.to_csv(path, index=False)
    engine = store.make_engine(db_url)
    store.migrate(engine)
    added = import_log(engine, path)
    assert added["battles"] == 600 and added["models"] == 6
    with pytest.raises(Exception, match="imported already"):
        import_log(engine, path)
    assert counts_table(engine) == counts_from_votes(engine)
    engine.dispose()
    no_bounds = {
        "ability_cap": 0.0,
        "trust_ramp_votes": 0.0,
        "board_rule": "am-elo",
    }  # as `rank` fits am-ELO
    with TestClient(create_app(settings_for(db_url, min_records=0, **no_bounds))) as tc:
        admin = ArenaClient("http://testserver", None, client=tc)
        deadline = time.time() + 30
        while tc.app.state.arena.fit is None and time.time() < deadline:
            time.sleep(0.05)
        live = admin.leaderboard()
    code, out, _ = cli("rank", path, "--method", "am-elo", "--format", "json")
    offline = json.loads(out)
    assert [m["model"] for m in live["models"]] == [m["model"] for m in offline["models"]]
    assert np.allclose(
        [m["rating"] for m in live["models"]], [m["rating"] for m in offline["models"]], atol=1e-9
    )


def test_the_store_counts_each_accounts_distinct_utc_days(db_url):
    """store.account_active_days (the live input of the activity credit): distinct UTC days
    with a vote per account, as log_accounts counts them offline."""
    from stablearena.crowd.board_rule import log_accounts
    from stablearena.data.battles import Battles

    day = 86400.0
    t0 = 1_700_000_000 // 86400 * 86400.0  # a UTC midnight
    ts = np.array([t0 + 10, t0 + day - 1, t0 + day, t0 + 5 * day + 3, t0 + 7, t0 + 2 * day])
    ann = np.array([0, 0, 0, 0, 1, 1])
    engine = store.make_engine(db_url)
    store.migrate(engine)
    try:
        store.import_votes(
            engine,
            key="k",
            label="days",
            model_names=["a", "b"],
            annotator_names=["u0", "u1"],
            model_a=np.zeros(6, np.int64),
            model_b=np.ones(6, np.int64),
            annotator=ann,
            outcome=np.zeros(6, np.int64),
            timestamp=ts,
            now=t0 + 9 * day,
        )
        with engine.connect() as conn:
            live = store.account_active_days(conn)
    finally:
        engine.dispose()
    assert live == {"u0": 3.0, "u1": 2.0}
    b = Battles.from_arrays(
        np.full(6, "a", dtype=object),
        np.full(6, "b", dtype=object),
        np.zeros(6, np.int8),
        annotator=np.array(["u0", "u1"], dtype=object)[ann],
        timestamp=ts,
    )
    assert log_accounts(b).active_days == live


# ---------------------------------------------------------------------------------- processes
def hammer(
    box: list[str], keys: list[str], stop: threading.Event, acked: dict, lock: threading.Lock
) -> list[threading.Thread]:
    """Clients that request battles and vote until ``stop``, at the server address in
    ``box[0]`` (it changes when the server restarts). Every acknowledged vote goes into
    ``acked`` (battle id → outcome); a vote whose answer was lost is retried, at whichever
    server is up, until it is acknowledged (a vote is idempotent)."""

    def run(key: str, seed: int) -> None:
        rng = np.random.default_rng(seed)
        url, client = "", None
        unacked: list[tuple[str, str]] = []
        while not stop.is_set() or unacked:
            if box[0] != url:
                url = box[0]
                client = ArenaClient(url, key, timeout=5, retries=0)
            try:
                for bid, out in list(unacked):
                    res = client.vote(bid, out)
                    with lock:
                        acked[bid] = res["outcome"]
                    unacked.remove((bid, out))
                if stop.is_set():
                    break
                (b,) = client.next_battles()
                out = ["model_a", "model_b", "tie", "both_bad"][int(rng.integers(4))]
                unacked.append((b["battle_id"], out))
                res = client.vote(b["battle_id"], out)
                with lock:
                    acked[b["battle_id"]] = res["outcome"]
                unacked.remove((b["battle_id"], out))
            except ArenaError as exc:
                if exc.status not in (0, 500, 502, 503):
                    raise
                time.sleep(0.05)

    threads = [threading.Thread(target=run, args=(k, s), daemon=True) for s, k in enumerate(keys)]
    for t in threads:
        t.start()
    return threads


def kill_test(
    db: str,
    kills: int,
    tmp_path: Path,
    clients: int = 4,
    run_seconds: float = 0.5,
    min_acks: int = 15,
    extra: tuple[str, ...] = (),
) -> dict:
    """Serve ``db`` in a child process, kill it with SIGKILL mid-stream ``kills`` times while
    ``clients`` clients vote, restart it each time; then check every acknowledged vote is
    stored exactly once with its outcome and the counts table equals the votes."""
    acked: dict[str, str] = {}
    lock = threading.Lock()
    args = [
        "--set",
        "rate_limit=100000",
        "--set",
        "rate_burst=100000",
        "--set",
        "arena.min_records=0",
        *extra,
    ]
    server = ServerProcess(db, *args, cwd=tmp_path).start()
    admin_key = server.admin_key
    admin = ArenaClient(server.url, admin_key)
    for m in ("m1", "m2", "m3", "m4", "m5", "m6"):
        admin.add_model(m)
    keys = [admin.create_annotator(f"c{k}") for k in range(clients)]
    admin.close()
    box = [server.url]
    stop = threading.Event()
    threads = hammer(box, keys, stop, acked, lock)
    rng = np.random.default_rng(kills)
    for _ in range(kills):
        # let traffic flow (at least min_acks new acknowledged votes), then kill at a random
        # moment: some requests are always in flight
        target = len(acked) + min_acks
        deadline = time.time() + 120
        while len(acked) < target and time.time() < deadline:
            time.sleep(0.02)
        time.sleep(rng.uniform(0.0, run_seconds))
        server.kill()  # mid-stream: the clients are waiting on answers
        server = ServerProcess(db, *args, cwd=tmp_path).start()
        box[0] = server.url
    time.sleep(run_seconds)
    stop.set()
    for t in threads:
        t.join(timeout=60)
    admin = ArenaClient(server.url, admin_key)
    log = pd.read_json(io.BytesIO(admin.export("jsonl", history=True)), lines=True)
    admin.close()
    server.stop()
    engine = store.make_engine(db)
    consistent = counts_table(engine) == counts_from_votes(engine)
    engine.dispose()
    per_battle = log.groupby("battle_id").size()
    stored = dict(zip(log["battle_id"], log["winner"], strict=True))
    labels = dict(zip(store.OUTCOMES, store.EXPORT_LABELS, strict=True))
    missing = [b for b in acked if b not in stored]
    wrong = [b for b, o in acked.items() if b in stored and stored[b] != labels[o]]
    return {
        "kills": kills,
        "acknowledged": len(acked),
        "stored": len(log),
        "missing": len(missing),
        "wrong": len(wrong),
        "duplicated": int((per_battle > 1).sum()),
        "counts_consistent": consistent,
    }


def test_sigkill_mid_stream_loses_and_duplicates_nothing_sqlite(tmp_path):
    res = kill_test(f"sqlite:///{tmp_path / 'kill.db'}", kills=3, tmp_path=tmp_path)
    assert res["acknowledged"] >= 45
    assert res["missing"] == res["wrong"] == res["duplicated"] == 0 and res["counts_consistent"], (
        res
    )


@pytest.mark.slow  # PostgreSQL under kill -9: tests/test_hosts.py's smoke (default run)
def test_sigkill_mid_stream_loses_and_duplicates_nothing_postgresql(postgres, tmp_path):
    res = kill_test(postgres.create_database("kill"), kills=2, tmp_path=tmp_path)
    assert res["acknowledged"] >= 30
    assert res["missing"] == res["wrong"] == res["duplicated"] == 0 and res["counts_consistent"], (
        res
    )


def _workers(url: str, n: int) -> dict[int, int]:
    """Worker number -> pid, from /healthz over fresh connections until all ``n`` answered."""
    import httpx

    seen: dict[int, int] = {}
    for _ in range(400):
        health = httpx.get(url + "/healthz", timeout=10).json()
        seen[health["worker"]] = health["pid"]
        if len(seen) == n:
            break
    return seen


@pytest.mark.skipif(not HAVE_PROC, reason="reads /proc (Linux)")
def test_workers_share_the_socket_and_die_with_serve_sqlite(tmp_path):
    """``serve --workers 2``: both workers take connections from the one socket; SIGKILL of
    ``serve`` takes the workers with it (none keeps serving the port), and votes sent to the
    workers survive kills, exactly once."""
    db = f"sqlite:///{tmp_path / 'workers.db'}"
    server = ServerProcess(db, "--workers", "2", cwd=tmp_path).start()
    try:
        pids = _workers(server.url, 2)
        assert set(pids) == {0, 1} and server.proc.pid not in pids.values()
        assert all(alive(p) for p in pids.values())
    finally:
        server.kill()
    deadline = time.time() + 10
    while any(alive(p) for p in pids.values()) and time.time() < deadline:
        time.sleep(0.05)
    assert not any(alive(p) for p in pids.values())
    db = f"sqlite:///{tmp_path / 'workers-kill.db'}"
    res = kill_test(db, kills=1, tmp_path=tmp_path, extra=("--workers", "2"))
    assert res["acknowledged"] >= 15
    assert res["missing"] == res["wrong"] == res["duplicated"] == 0 and res["counts_consistent"], (
        res
    )


@pytest.mark.slow
def test_sigkill_twenty_times_sqlite(tmp_path):
    res = kill_test(f"sqlite:///{tmp_path / 'kill20.db'}", kills=20, tmp_path=tmp_path)
    print("kill test, 20 kills:", res)
    assert res["acknowledged"] >= 20 * 15
    assert res["missing"] == res["wrong"] == res["duplicated"] == 0 and res["counts_consistent"], (
        res
    )


def _draw(client: ArenaClient, wait: float = 30.0) -> list[dict]:
    """``next_battles``, retried while the server answers that it is still loading the models
    another server just added (503 ``not_ready``, 409 ``no_pair``: within ``poll_seconds``)."""
    deadline = time.time() + wait
    while True:
        try:
            return client.next_battles()
        except ArenaError as exc:
            if exc.code not in ("not_ready", "no_pair") or time.time() > deadline:
                raise
            time.sleep(0.05)


def test_two_server_processes_on_one_postgresql_database_serve_the_same_leaderboard(
    postgres, tmp_path
):
    db = postgres.create_database("two")
    args = [
        "--set",
        "arena.min_records=0",
        "--set",
        "arena.refit_votes=20",
        "--set",
        "poll_seconds=0.1",
        # every vote in the board: with the default exclude policies a board counted 90 of the
        # 120 votes on both servers in 2 of 12 runs (one account's 30 left out, most likely by
        # the screening; this test is about the two servers agreeing)
        "--set",
        "arena.policy=warn",
        "--set",
        "arena.influence_policy=warn",
    ]
    first = ServerProcess(db, *args, cwd=tmp_path).start()
    second = ServerProcess(db, *args, cwd=tmp_path).start()
    try:
        assert first.admin_key and second.admin_key is None  # one database, one admin key
        a1 = ArenaClient(first.url, first.admin_key)
        a2 = ArenaClient(second.url, first.admin_key)
        for m in ("m1", "m2", "m3", "m4", "m5"):
            a1.add_model(m)
        keys = [a1.create_annotator(f"u{k}") for k in range(4)]
        truth = {"m1": 0.0, "m2": 0.4, "m3": 0.8, "m4": 1.2, "m5": 1.6}
        rng = np.random.default_rng(0)
        for t in range(120):
            # each annotator alternates between the two workers: a battle served by one worker
            # is voted through the other half of the time
            c1 = ArenaClient(first.url, keys[t % 4])
            c2 = ArenaClient(second.url, keys[t % 4])
            (b,) = _draw(c1 if t % 2 else c2)
            p = 1 / (1 + np.exp(-(truth[b["model_a"]] - truth[b["model_b"]])))
            (c2 if t % 3 else c1).vote(b["battle_id"], "model_a" if rng.random() < p else "model_b")
            c1.close()
            c2.close()
        a1.refit()
        deadline = time.time() + 30
        while time.time() < deadline:
            l1, l2 = a1.leaderboard(), a2.leaderboard()
            if l1["as_of_vote"] == l2["as_of_vote"] == 120:
                break
            time.sleep(0.1)
        assert l1 == l2 and l1["n_battles"] == 120
        # the same models and states (battle counts include each worker's own pending battles)
        strip = [{k: v for k, v in m.items() if k != "battles"} for m in a1.models()]
        assert strip == [{k: v for k, v in m.items() if k != "battles"} for m in a2.models()]
        a1.close()
        a2.close()
    finally:
        first.stop()
        second.stop()


def test_serve_refuses_bad_settings_with_one_line(cli, tmp_path):
    code, _, err = cli("serve", "--db", "mysql://x", "--port", "0")
    assert code == 2 and "db" in err
    code, _, err = cli(
        "serve", "--db", f"sqlite:///{tmp_path}/a.db", "--set", "arena.exploration=7"
    )
    assert code == 2 and "exploration" in err
    code, _, err = cli("serve", "--db", f"sqlite:///{tmp_path}/a.db", "--set", "nonsense=1")
    assert code == 2 and "nonsense" in err
    code, _, err = cli("serve", "--config", tmp_path / "missing.toml")
    assert code == 2 and "missing.toml" in err
    bad = tmp_path / "bad.toml"
    bad.write_text("port = 'eighty'\n")
    code, _, err = cli("serve", "--config", bad)
    assert code == 2 and "port" in err
    code, _, err = cli("serve", "--db", "sqlite:///nowhere/dir/a.db")
    assert code == 2 and "does not exist" in err


def test_client_retries_a_vote_whose_answer_was_lost(make_arena):
    arena = make_arena()
    ann = arena.annotator("alice")
    (b,) = ann.next_battles()
    import httpx

    calls = {"n": 0}
    inner = arena.tc

    class Flaky(httpx.BaseTransport):
        def handle_request(self, request):
            calls["n"] += 1
            resp = inner.request(
                request.method,
                request.url.path,
                content=request.content,
                headers=dict(request.headers),
            )
            if calls["n"] == 1:  # the vote is stored, but its answer is lost
                raise httpx.ReadError("connection reset")
            return httpx.Response(resp.status_code, content=resp.content, headers=resp.headers)

    flaky = ArenaClient("http://testserver", None, transport=Flaky(), retries=3)
    flaky._http.headers["Authorization"] = ann._http.headers["Authorization"]
    res = flaky.vote(b["battle_id"], "model_a")
    assert res["replayed"] is True and calls["n"] == 2
    engine = arena.tc.app.state.engine
    with engine.connect() as conn:
        assert conn.execute(sa.select(sa.func.count()).select_from(store.votes)).scalar_one() == 1


@pytest.mark.skipif(not HAVE_PROC, reason="reads /proc (Linux)")
def test_sigkill_of_serve_leaves_no_fit_or_render_process_behind(tmp_path):
    """The fit process and the dashboard's render process end with a server killed by SIGKILL
    (before, every crash left both behind as orphans, 150–280 MB each)."""
    server = ServerProcess(
        f"sqlite:///{tmp_path / 'orphans.db'}",
        "--set",
        "arena.min_records=0",
        "--set",
        "arena.refit_votes=10",
        "--set",
        "poll_seconds=0.2",
        "--set",
        "dashboard_share=1.0",
        cwd=tmp_path,
    ).start()
    try:
        admin = ArenaClient(server.url, server.admin_key, timeout=120)
        for m in ("m0", "m1", "m2", "m3"):
            admin.add_model(m)
        voter = ArenaClient(server.url, admin.create_annotator("v"), timeout=120)
        httpx.get(server.url + "/", timeout=30)  # someone watches: fits are drawn
        for k in range(30):
            (b,) = voter.next_battles()
            voter.vote(b["battle_id"], "model_a" if k % 3 else "model_b")
        admin.refit()
        deadline = time.time() + 120
        while time.time() < deadline:  # the fit process and the render process are up
            if len(children(server.proc.pid)) >= 2:
                break
            time.sleep(0.2)
        kids = children(server.proc.pid)
        assert len(kids) >= 2, kids
    finally:
        server.kill()
    deadline = time.time() + 15
    while any(alive(p) for p in kids) and time.time() < deadline:
        time.sleep(0.1)
    assert not [p for p in kids if alive(p)]


def test_library_messages_name_the_services_setting_not_the_cli_flag():
    """A fit that fails in the arena tells the admin to raise ``arena.min_records`` (how to
    change it here), not the command line's ``--min-records``."""
    from stablearena import AmElo
    from stablearena.errors import StableArenaError
    from stablearena.service.state import for_the_service
    from stablearena.simulation.perturbation import simulate_arena

    # a fit that cannot run: no annotator has min_records votes (before am-ELO's identification
    # fix, this arena's am-ELO fit failed to converge, with the same advice)
    arena = simulate_arena(3, 300, profiles={"honest": 5}, seed=1)
    with pytest.raises(StableArenaError) as exc:
        AmElo(min_records=10**6).fit(arena.battles)
    assert "--min-records" in str(exc.value)
    text = for_the_service(str(exc.value))
    assert "--min-records" not in text and "arena.min_records (PATCH /v1/admin/config" in text
