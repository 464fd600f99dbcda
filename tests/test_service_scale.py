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
