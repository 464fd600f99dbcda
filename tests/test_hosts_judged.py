"""Issue 44: behind several hosts a new annotator got 503 "busy" at its 10th–15th battle (here 3 of
12 annotators before the fix) — the host's view of the pairs it had judged lagged the other
hosts', so every draw hit a pair the database refused. A host now reads the annotator's judged pairs from the database at the first
refused draw (stablearena.service.state.ArenaState.learn_judged)."""

from __future__ import annotations

from fastapi.testclient import TestClient
from test_service import db_url, settings_for  # noqa: F401  (db_url: the fixture)

from stablearena.service.app import create_app
from stablearena.service.client import ArenaClient

MODELS = tuple("abcdef")  # 15 pairs


def test_a_lagging_host_never_answers_busy_to_a_new_annotator(db_url):  # noqa: F811
    lagging = settings_for(db_url).model_copy(update={"poll_seconds": 3600.0})
    with (
        TestClient(create_app(settings_for(db_url))) as one,
        TestClient(create_app(lagging)) as two,
    ):
        admin = ArenaClient(
            "http://testserver", one.app.state.admin_key, client=TestClient(one.app), retries=0
        )
        for m in MODELS:
            admin.add_model(m)
        two.app.state.arena.refresh_registry()  # the lagging host knows the models, no votes
        busy = served = 0
        for k in range(12):
            key = admin.create_annotator(f"new{k}")
            first = ArenaClient("http://testserver", key, client=TestClient(one.app), retries=0)
            judged = set()
            while len(judged) < 12:  # 12 of the 15 pairs judged through the first host
                (b,) = first.next_battles()
                pair = frozenset((b["model_a"], b["model_b"]))
                if pair in judged:
                    continue  # served again before its vote: leave it unvoted
                first.vote(b["battle_id"], "model_a")
                judged.add(pair)
            got = two.post("/v1/battles", headers={"Authorization": f"Bearer {key}"}, json={})
            if got.status_code == 503:
                busy += 1
                continue
            assert got.status_code == 200, got.text
            (b,) = got.json()["battles"]
            assert frozenset((b["model_a"], b["model_b"])) not in judged
            served += 1
        assert busy == 0 and served == 12
