"""The live counts (stablearena.service.counts): kept in memory from the votes since the last
look, they agree with the ``pair_counts`` table at every step — new votes, corrections, votes
bulk-imported — and an update reads only the new votes."""

from __future__ import annotations

import time

import numpy as np
import pytest

from stablearena.service import store
from stablearena.service.counts import LiveCounts


@pytest.fixture
def engine(tmp_path):
    eng = store.make_engine(f"sqlite:///{tmp_path}/arena.db")
    store.migrate(eng)
    yield eng
    eng.dispose()


def _import(engine, n: int, seed: int, key: str) -> None:
    rng = np.random.default_rng(seed)
    a = rng.integers(0, 6, n)
    b = (a + rng.integers(1, 6, n)) % 6
    store.import_votes(
        engine,
        key=key,
        label=key,
        model_names=[f"m{k}" for k in range(6)],
        annotator_names=[f"u{k}" for k in range(5)],
        model_a=a,
        model_b=b,
        annotator=rng.integers(0, 5, n),
        outcome=rng.integers(0, 4, n),
        timestamp=np.full(n, 1.0),
        now=time.time(),
    )


def _vote(engine, battle: str, annotator: int, a: int, b: int, outcome: int) -> store.VoteResult:
    conn = store.write_conn(engine)
    try:
        with conn.begin():
            if battle.startswith("new"):
                store.insert_battles(
                    conn,
                    [
                        {
                            "id": battle.removeprefix("new"),
                            "annotator_id": annotator,
                            "model_a": a,
                            "model_b": b,
                            "strategy": "test",
                            "propensity": None,
                            "served_at": time.time(),
                            "expires_at": time.time() + 600,
                        }
                    ],
                )
            return store.record_vote(
                conn, battle.removeprefix("new"), annotator, outcome, time.time(), 600.0
            )
    finally:
        conn.close()


def test_live_counts_follow_votes_corrections_and_imports(engine):
    live = LiveCounts()
    live.load(engine)
    assert live.verify(engine) == [] and live.as_of_vote == 0
    _import(engine, 300, 1, "first")
    assert live.update(engine) == 300 and live.verify(engine) == []
    with engine.connect() as conn:
        ids = {name: i for i, name in store.names_after(conn, "models", 0)}
        ann = {name: i for i, name in store.names_after(conn, "annotators", 0)}
    a, b, u = ids["m4"], ids["m1"], ann["u2"]  # a > b: the count is oriented to (b, a)
    assert _vote(engine, "newx1", u, a, b, 0).kind == "new"
    assert _vote(engine, "x1", u, a, b, 3).kind == "corrected"  # moves one count
    assert live.update(engine) == 2 and live.verify(engine) == []
    assert _vote(engine, "x1", u, a, b, 1).kind == "corrected"  # corrected again, alone
    _import(engine, 50, 2, "second")
    assert live.update(engine) == 51
    assert live.verify(engine) == []
    snap, table = live.snapshot(engine), store.read_snapshot(engine)
    assert snap.as_of_vote == table.as_of_vote and snap.n_votes == table.n_votes == 351
    ours, theirs = snap.counts(), table.counts()
    assert ours.models == theirs.models and ours.annotators == theirs.annotators
    for col in ("i", "j", "annotator", "wins", "losses", "ties", "ties_both_bad"):
        assert np.array_equal(getattr(ours, col), getattr(theirs, col)), col
    totals = {(int(i), int(j)): n for i, j, n in live.pair_totals()}
    with engine.connect() as conn:
        assert totals == {(int(i), int(j)): n for i, j, n in store.pair_totals(conn)}
    assert live.update(engine) == 0  # nothing new: nothing read


def test_a_vote_id_that_commits_late_is_not_missed(engine):
    """PostgreSQL takes vote ids before commit: an id below the newest seen may appear later
    (here: the newest vote is applied, then its predecessor's id is treated as in flight)."""
    _import(engine, 20, 3, "first")
    live = LiveCounts()
    live.load(engine)
    _import(engine, 5, 4, "second")
    with engine.connect() as conn:
        rows = store.votes_after(conn, 20, [])
    # apply only the newest vote, as if 21..24 were not yet committed
    live.as_of_vote = 24
    live._gaps.update({v: time.time() for v in (21, 22, 23, 24)})
    assert live.update(engine) == 5 and len(rows) == 5
    assert live.verify(engine) == [] and live.stats()["gaps"] == 0


def test_the_fit_process_fits_its_own_live_counts_as_the_table_would(engine):
    """run_live_fit (what the fit process runs) keeps its own counts, brought up to date from
    the new votes only, and publishes what a fit of the whole table publishes; the fitted
    object (every count) comes back only when asked for."""
    from stablearena.service import refit
    from stablearena.service.settings import ArenaConfig

    db = str(engine.url)
    cfg = ArenaConfig(min_records=5).model_dump()
    _import(engine, 400, 5, "first")
    for step in range(2):
        out = refit.run_live_fit(db, cfg, None, want_fitted=step == 1)
        ages = refit.live_ages(engine, cfg)  # the age ramp's ages, as run_live_fit reads them
        want = refit.run_fit(store.read_snapshot(engine), cfg, None, "other", ages)
        assert out.as_of_vote == store.read_snapshot(engine).as_of_vote == 400 + 60 * step
        assert out.payload["leaderboard"]["models"] == want.payload["leaderboard"]["models"]
        assert out.payload["annotators"] == want.payload["annotators"]
        assert (out.fitted is None) == (step == 0) and out.cpu_seconds > 0
        _import(engine, 60, 6 + step, f"more{step}")
    engine_, live = refit._LIVE[db]
    assert live.votes_applied == 60  # the second fit read the 60 new votes, not the table
    assert live.verify(engine) == []
    refit._LIVE.pop(db)
    engine_.dispose()


def test_refits_are_paced_by_their_cost(tmp_path):
    """After a fit that took d seconds of CPU, the next waits until the worker has spent
    d/refit_share seconds of CPU (or 10·wall/refit_share seconds pass); small arenas are not
    paced."""
    from types import SimpleNamespace

    from stablearena.service.refitter import UNPACED_CELLS, Refitter
    from stablearena.service.settings import Settings

    eng = store.make_engine(f"sqlite:///{tmp_path}/a.db")
    settings = Settings(db=str(eng.url), refit_share=0.05)
    counts = SimpleNamespace(cells=UNPACED_CELLS)
    r = Refitter(SimpleNamespace(settings=settings, engine=eng, counts=counts))
    assert r.paced()  # no fit yet
    now, cpu = time.time(), time.process_time()
    r.last_fit = (2.0, 2.5, now, cpu)  # 2 s of CPU: wait for 40 s of serving CPU
    assert not r.paced()
    r.last_fit = (2.0, 2.5, now, cpu - 40.0)
    assert r.paced()
    r.last_fit = (2.0, 2.5, now - 10 * 2.5 / 0.05, cpu)  # idle: 500 s of wall time
    assert r.paced()
    r.last_fit = (2.0, 2.5, now, cpu)
    counts.cells = UNPACED_CELLS - 1  # a small arena
    assert r.paced()
    eng.dispose()


# ------------------------------------------------------------------ one-step updates
def _import_bt(engine, n: int, seed: int, key: str, annotators: int = 5) -> None:
    """``n`` votes on six models by a Bradley–Terry truth (strengths −1.5 … 1.5, 10% ties)."""
    rng = np.random.default_rng(seed)
    truth = np.linspace(-1.5, 1.5, 6)
    a = rng.integers(0, 6, n)
    b = (a + rng.integers(1, 6, n)) % 6
    p = 1 / (1 + np.exp(-(truth[a] - truth[b])))
    outcome = np.where(rng.random(n) < 0.1, 2, np.where(rng.random(n) < p, 0, 1))
    store.import_votes(
        engine,
        key=key,
        label=key,
        model_names=[f"m{k}" for k in range(6)],
        annotator_names=[f"u{k}" for k in range(annotators)],
        model_a=a,
        model_b=b,
        annotator=rng.integers(0, annotators, n),
        outcome=outcome,
        timestamp=np.full(n, 1.0),
        now=time.time(),
    )


def test_live_counts_delta_is_the_change_since_the_full_fits_snapshot(engine):
    """With a journal, delta() holds each cell's change since the marked snapshot (new votes
    and a correction: −1 on one outcome, +1 on another), read from the new votes only."""
    live = LiveCounts(journal=True)
    _import(engine, 300, 1, "first")
    live.load(engine)
    before = live.snapshot(engine, mark=True)
    _vote(engine, "newb1", 2, 1, 2, 0)
    _import(engine, 40, 2, "more")
    _vote(engine, "b1", 2, 1, 2, 1)  # a correction: a win of model 1 becomes a loss
    delta = live.delta(engine)
    after = live.snapshot(engine)
    assert delta.n_votes == 41 and delta.as_of_vote == after.as_of_vote
    key = lambda s, r: (s.i[r], s.j[r], s.annotator[r])  # noqa: E731
    cols = ("wins", "losses", "ties", "ties_both_bad")
    old = {key(before, r): [getattr(before, c)[r] for c in cols] for r in range(len(before.i))}
    new = {key(after, r): [getattr(after, c)[r] for c in cols] for r in range(len(after.i))}
    moved = {k: np.subtract(v, old.get(k, 0.0)) for k, v in new.items()}
    got = {key(delta, r): [getattr(delta, c)[r] for c in cols] for r in range(len(delta.i))}
    assert {k for k, v in moved.items() if np.any(v)} <= set(got)
    for k, v in got.items():
        np.testing.assert_array_equal(v, moved[k])
    live.snapshot(engine, mark=True)
    assert live.delta(engine).n_votes == 0
    with pytest.raises(RuntimeError):
        LiveCounts().delta(engine)


def test_the_fit_process_updates_its_last_full_fit_by_one_step(engine):
    """run_live_update: the full fit's board moved by the votes since, with the full fit's
    abilities; its ratings within 2 Elo points of a full refit (weights re-estimated) on 5%
    more votes, and the full fit's own ratings when no vote came."""
    from stablearena.service import refit
    from stablearena.service.settings import ArenaConfig

    db = str(engine.url)
    cfg = ArenaConfig(min_records=5).model_dump()
    _import_bt(engine, 1200, 1, "first")
    full = refit.run_live_fit(db, cfg, None, want_fitted=False)
    info = {"id": 7, "as_of_vote": full.as_of_vote, "n_votes": 1200, "fitted_at": 1.0}
    same = refit.run_live_update(db, info, want_fitted=False)
    board = full.payload["leaderboard"]
    assert same.payload["leaderboard"]["models"] == board["models"]
    assert same.payload["leaderboard"]["votes_since_full_fit"] == 0
    _import_bt(engine, 60, 2, "more")
    out = refit.run_live_update(db, info, want_fitted=True)
    lb = out.payload["leaderboard"]
    assert lb["update"] == "one-step" and lb["full_fit"] == info
    assert lb["votes_since_full_fit"] == 60 and out.payload["n_votes"] == 1260
    assert out.as_of_vote == 1260 and lb["n_battles"] == board["n_battles"] + 60
    assert "annotators" not in lb  # only what changed: the rest is the full fit's
    merged = refit.merge_update(full.payload, out.payload)
    assert merged["annotators"] == full.payload["annotators"]
    assert merged["leaderboard"]["annotators"] == board["annotators"]
    refit_all = refit.run_fit(store.read_snapshot(engine), cfg, None, "other")
    want = {r["model"]: r["rating"] for r in refit_all.payload["leaderboard"]["models"]}
    got = {r["model"]: r["rating"] for r in lb["models"]}
    was = {r["model"]: r["rating"] for r in board["models"]}
    assert max(abs(got[m] - want[m]) for m in want) < 2.0
    assert max(abs(got[m] - want[m]) for m in want) < max(abs(was[m] - want[m]) for m in want)
    assert out.fitted is not None and list(out.fitted.models) == sorted(want)
    # another full fit (here or elsewhere) published: no update from an older base
    assert refit.run_live_update(db, {**info, "as_of_vote": 5}, want_fitted=False).payload == {}
    engine_, _ = refit._LIVE.pop(db)
    refit._BASE.pop(db)
    engine_.dispose()


def test_the_published_board_is_updated_between_paced_full_fits(tmp_path, monkeypatch):
    """A paced arena: after the full fit, the leaderboard follows every K votes by one-step
    updates (``update``, ``full_fit``, ``votes_since_full_fit``), /v1/annotators stays the full
    fit's, and a restart serves the same board from the database."""
    from fastapi.testclient import TestClient

    from stablearena.service import refitter
    from stablearena.service.app import create_app
    from stablearena.service.settings import Settings

    monkeypatch.setattr(refitter, "UNPACED_CELLS", 0)  # every arena paced
    settings = Settings(
        db=f"sqlite:///{tmp_path / 'arena.db'}",
        fit_in_process=False,
        poll_seconds=0.05,
        refit_share=0.0001,  # the next full fit after 10⁴ × its CPU
        rate_limit=1e6,
        rate_burst=1_000_000,
        arena={"min_records": 5, "refit_votes": 20, "refit_seconds": 1000.0},
    )

    def board(tc, votes: int, timeout: float = 30.0) -> dict:
        deadline = time.time() + timeout
        while time.time() < deadline:
            r = tc.get("/v1/leaderboard")
            if r.status_code == 200 and r.json()["as_of_vote"] >= votes:
                return r.json()
            time.sleep(0.05)
        raise AssertionError(f"no board of {votes} votes: {r.status_code} {r.text[:300]}")

    with TestClient(create_app(settings)) as tc:
        engine = tc.app.state.engine
        _import_bt(engine, 600, 1, "first")
        first = board(tc, 600)
        assert first["update"] == "full" and "full_fit" not in first
        auth = {"Authorization": f"Bearer {tc.app.state.admin_key}"}
        annotators = tc.get("/v1/annotators", headers=auth).json()
        tracker = tc.app.state.arena.tracker
        _import_bt(engine, 40, 2, "more")
        lb = board(tc, 640)
        assert lb["update"] == "one-step" and lb["votes_since_full_fit"] == 40
        assert lb["full_fit"]["as_of_vote"] == 600 and lb["full_fit"]["n_votes"] == 600
        assert lb["n_battles"] == first["n_battles"] + 40
        assert lb["annotators"] == first["annotators"]
        assert tc.get("/v1/annotators", headers=auth).json() == annotators
        assert tc.app.state.refitter.fits_done == 1 and tc.app.state.refitter.updates_done >= 1
        assert tc.app.state.arena.tracker is tracker  # rebuilt at full fits only
    with TestClient(create_app(settings)) as tc:  # a restart: the board from the database
        again = tc.get("/v1/leaderboard").json()
        assert again == lb


def test_old_fits_are_deleted_but_never_the_full_fit_of_the_newest_update(engine):
    from stablearena.service.refit import UPDATE_METHOD

    def publish(method: str, base: int | None = None) -> int:
        with engine.begin() as conn:
            return store.publish_fit(conn, method, 1, 1.0, 0.1, {}, 3, base)

    old = publish("am-elo")
    full = publish("am-elo")
    ups = [publish(UPDATE_METHOD, full) for _ in range(6)]
    with engine.connect() as conn:
        assert store.fit_row(conn, full) is not None  # kept: the updates start from it
        assert store.fit_row(conn, old) is None
        assert store.fit_row(conn, ups[2]) is None and store.fit_row(conn, ups[-3]) is not None
        assert store.latest_fit_row(conn).id == ups[-1]
    newer = publish("am-elo")
    publish(UPDATE_METHOD, newer)
    publish(UPDATE_METHOD, newer)
    with engine.connect() as conn:
        assert store.fit_row(conn, full) is None  # a newer full fit: the old one may go


def test_the_update_weighs_accounts_as_the_full_fit_did_under_the_age_ramp(engine):
    """The one-step update's frozen weights are the published full fit's — the age ramp
    included (a young account weighs its age over the ramp) — and an account new since the
    full fit weighs by the same rule at age 0: nothing, under an age ramp."""
    from stablearena.service import refit
    from stablearena.service.settings import ArenaConfig

    cfg = ArenaConfig(min_records=5, trust_ramp_days=7.0, board_rule="am-elo").model_dump()
    _import_bt(engine, 1200, 1, "first")
    ages = {"u0": 1.0, "u1": 3.5, "u2": 30.0, "u3": 30.0, "u4": 30.0}
    full = refit.run_fit(store.read_snapshot(engine), cfg, None, "aged", ages)
    published = {r["annotator"]: r["weight"] for r in full.payload["annotators"]["annotators"]}
    base = refit._BASE.pop("aged")
    assert base.weights == pytest.approx(published, abs=1e-12)
    assert base.weights["u0"] < base.weights["u1"] < base.weights["u2"]  # the age ramp applies
    trust = base.trust
    assert refit._new_account_weight("new", 500.0, trust) == 0.0  # age 0 at the full fit
    assert refit._new_account_weight("new", 500.0, {**trust, "ages": None}) == pytest.approx(
        min(refit.NEW_ACCOUNT_ABILITY, trust["cap"])
    )
