"""Conversations on the arena page (issue 31, item 2; docs/guides/arena-page.md,
"Conversations"): follow-up turns in the same battle, each model given the whole conversation
with its own answers; a vote after any turn closes the battle; stop (both calls cancelled, the
battle never votable nor counted) and regenerate (the old answers kept); limits on turns,
regenerations and size; the battle stored turn by turn and read back by one reader
(store.arena.conversation); style counts and judges over the whole conversation. In process
(FastAPI's test client) against the demo server process (``+count``: its answer says how many
messages it received; ``/demo/stats`` records them per request)."""

from __future__ import annotations

import json
import re
import threading
import time
import uuid

import pytest
import sqlalchemy as sa
from fastapi.testclient import TestClient
from hypothesis import HealthCheck, given
from hypothesis import settings as fuzz_settings
from hypothesis import strategies as st

from stablearena.data.style_features import style_counts
from stablearena.judging.endpoints.demo import demo_reply
from stablearena.judging.endpoints.demo_server import DemoServer, tokens
from stablearena.service import store
from stablearena.service.app import create_app
from stablearena.service.settings import Settings
from stablearena.service.store.tables import battle_answers, battle_turns

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")


@pytest.fixture(scope="module")
def demo():
    with DemoServer(seed=0) as server:
        yield server


def settings(tmp_path, base_url: str, models, system: dict | None = None, **page) -> Settings:
    return Settings(
        db=f"sqlite:///{tmp_path / 'arena.db'}",
        fit_in_process=False,
        poll_seconds=0.05,
        seed=0,
        arena={"min_records": 0, "refit_votes": 1, "refit_seconds": 0.2},
        models=[
            {"name": m.split("+")[0], "base_url": base_url, "model": m, **(system or {}).get(m, {})}
            for m in models
        ],
        arena_page={"prompts": "demo", **page},
    )


def open_page(tc: TestClient) -> dict[str, str]:
    r = tc.get("/arena")
    return {"X-CSRF-Token": re.search(r'name="csrf-token" content="([0-9a-f]+)"', r.text).group(1)}


def lines(r) -> list[dict]:
    assert r.status_code == 200, r.text
    return [json.loads(x) for x in r.text.splitlines()]


def texts(got: list[dict]) -> dict[str, str]:
    return {s: "".join(x["delta"] for x in got if x.get("side") == s) for s in "ab"}


def sides(tc: TestClient, bid: str) -> dict[str, str]:
    """The model (as configured, with its test modes) on each side of battle ``bid``."""
    with tc.app.state.engine.connect() as conn:
        a, b = conn.execute(
            sa.select(store.battles.c.model_a, store.battles.c.model_b).where(
                store.battles.c.id == bid
            )
        ).one()
    names = tc.app.state.arena.names
    eps = tc.app.state.holder.endpoints
    return {"a": eps[a].model, "b": eps[b].model, "names": (names[a], names[b])}


def counts_total(tc: TestClient) -> float:
    with tc.app.state.engine.connect() as conn:
        row = conn.execute(
            sa.select(
                sa.func.coalesce(
                    sa.func.sum(
                        store.pair_counts.c.wins
                        + store.pair_counts.c.losses
                        + store.pair_counts.c.ties
                        + store.pair_counts.c.ties_both_bad
                    ),
                    0,
                )
            )
        ).scalar_one()
    return float(row)


def conversation(tc: TestClient, bid: str, history: bool = False) -> dict:
    with tc.app.state.engine.connect() as conn:
        return store.held.conversation(conn, bid, history=history)


def test_three_turns_each_model_gets_its_own_conversation_and_a_vote_closes_it(tmp_path, demo):
    """Turn k's upstream request carries 2k-1 messages (2k with a system prompt): the user's
    messages and that model's own answers, never the other's; the vote after turn 3 is counted
    once, and the battle takes no fourth turn."""
    ace, wild = "demo-ace+count+id=conv3", "demo-wild+count+id=conv3"
    s = settings(tmp_path, demo.base_url, (ace, wild), {wild: {"system_prompt": "Be brief."}})
    with TestClient(create_app(s)) as tc:
        h = open_page(tc)
        got = lines(tc.post("/arena/battles", json={"prompt": "What is 17*23?"}, headers=h))
        bid = got[0]["battle_id"]
        assert got[0]["turn"] == 1 and got[-1]["status"] == "complete"
        answers = [texts(got)]
        for k, prompt in ((2, "And 18*23?"), (3, "Say it in words.")):
            if k == 3:  # planned from the stored battle, as on another worker or after a restart
                tc.app.state.holder.convs.clear()
            got = lines(tc.post(f"/arena/battles/{bid}/turns", json={"prompt": prompt}, headers=h))
            assert got[0] == {"battle_id": bid, "turn": k, "attempt": 1}
            assert got[-1] == {"done": True, "status": "complete", "failure": None}
            answers.append(texts(got))
        stats = demo.stats()
        assert stats[ace]["messages"] == [1, 3, 5]
        assert stats[wild]["messages"] == [2, 4, 6]  # its system prompt first
        who = sides(tc, bid)
        for side in "ab":
            sent = stats[who[side]]["last_messages"]
            own = [m["content"] for m in sent if m["role"] == "assistant"]
            assert own == [answers[0][side], answers[1][side]]  # its own answers, in order
            assert [m["content"] for m in sent if m["role"] == "user"] == [
                "What is 17*23?",
                "And 18*23?",
                "Say it in words.",
            ]
            assert answers[2][side].startswith(f"I received {len(sent)} messages")
        # stored whole, turn by turn; the one reader gives FastChat's lists
        conv = conversation(tc, bid)
        assert conv["turns"] == 3
        for side in "ab":
            assert [m["role"] for m in conv[side]] == ["user", "assistant"] * 3
            assert [m["content"] for m in conv[side][1::2]] == [a[side] for a in answers]
        # style counts of the side: the whole conversation's
        with tc.app.state.engine.connect() as conn:
            rows = conn.execute(sa.select(battle_answers)).all()
        for r in rows:
            want = [sum(x) for x in zip(*(style_counts(a[r.side]) for a in answers), strict=True)]
            assert [r.style_tokens, r.style_headers, r.style_lists, r.style_bold] == want
            assert r.text == answers[2][r.side]  # the last turn's answer
        # a vote after turn 3: counted once; the battle is over
        r = tc.post(f"/arena/battles/{bid}/vote", json={"outcome": "model_a"}, headers=h)
        assert r.status_code == 200, r.text
        assert counts_total(tc) == 1.0
        r = tc.post(f"/arena/battles/{bid}/turns", json={"prompt": "more"}, headers=h)
        assert r.status_code == 409 and "over" in r.json()["error"]["message"]
        assert tc.post(f"/arena/battles/{bid}/regenerate", headers=h).status_code == 409
        assert counts_total(tc) == 1.0 and demo.stats()[ace]["messages"] == [1, 3, 5]


def test_regenerate_resamples_both_answers_and_keeps_the_old_ones(tmp_path, demo):
    ace, wild = "demo-ace+count+id=regen", "demo-wild+count+id=regen"
    with TestClient(create_app(settings(tmp_path, demo.base_url, (ace, wild)))) as tc:
        h = open_page(tc)
        got = lines(tc.post("/arena/battles", json={"prompt": "What is 2+2?"}, headers=h))
        bid, first = got[0]["battle_id"], texts(got)
        got = lines(tc.post(f"/arena/battles/{bid}/regenerate", headers=h))
        assert got[0] == {"battle_id": bid, "turn": 1, "attempt": 2}
        assert got[-1]["status"] == "complete"
        second = texts(got)
        # re-sampled with the same one message; the old attempt kept in the record
        assert demo.stats()[ace]["messages"] == [1, 1]
        conv = conversation(tc, bid, history=True)
        assert conv["turns"] == 1 and [m["content"] for m in conv["a"]] == [
            "What is 2+2?",
            second["a"],
        ]
        assert conv["replaced"] == [{"turn": 1, "attempt": 1, "a": first["a"], "b": first["b"]}]
        # the follow-up carries the regenerated answer, not the replaced one
        lines(tc.post(f"/arena/battles/{bid}/turns", json={"prompt": "Why?"}, headers=h))
        sent = demo.stats()[sides(tc, bid)["a"]]["last_messages"]
        assert [m["content"] for m in sent] == ["What is 2+2?", second["a"], "Why?"]
        r = tc.post(f"/arena/battles/{bid}/vote", json={"outcome": "tie"}, headers=h)
        assert r.status_code == 200 and counts_total(tc) == 1.0


def test_stop_cancels_both_calls_and_a_stopped_battle_is_never_counted(tmp_path, demo):
    ace, wild = "demo-ace+slow=0.3+id=stop", "demo-wild+slow=0.3+id=stop"
    s = settings(tmp_path, demo.base_url, (ace, wild))
    with TestClient(create_app(s)) as tc:
        h = open_page(tc)
        out: list = []
        t = threading.Thread(
            target=lambda: out.append(
                tc.post("/arena/battles", json={"prompt": "Tell me a story."}, headers=h)
            )
        )
        t.start()
        deadline = time.time() + 20
        while time.time() < deadline and demo.stats().get(ace, {}).get("in_flight", 0) < 1:
            time.sleep(0.02)
        time.sleep(0.4)  # a word or two have come
        rows = tc.get(
            "/v1/admin/held", headers={"Authorization": f"Bearer {tc.app.state.admin_key}"}
        )
        (bid,) = [b["battle_id"] for b in rows.json()["battles"]]
        r = tc.post(f"/arena/battles/{bid}/stop", headers=h)
        assert r.status_code == 200 and r.json() == {"battle_id": bid, "status": "stopped"}
        t.join(20)
        got = lines(out[0])
        assert got[-1] == {"done": True, "status": "stopped", "failure": "stopped by the person"}
        # both upstream calls were cancelled: nothing in flight, long before a whole answer
        deadline = time.time() + 5
        while time.time() < deadline and any(demo.stats()[m]["in_flight"] for m in (ace, wild)):
            time.sleep(0.02)
        assert all(demo.stats()[m]["in_flight"] == 0 for m in (ace, wild))
        on = sides(tc, bid)
        for side in "ab":  # each answer cut before its end
            model = on[side]
            whole = demo_reply(model.split("+")[0], demo.stats()[model]["last_messages"], demo.seed)
            assert len(tokens(texts(got)[side])) < len(tokens(whole)), (side, whole)
        # stored stopped, with what came; never votable, not counted, not open
        with tc.app.state.engine.connect() as conn:
            assert store.held.held_status(conn, bid) == "stopped"
            turns = conn.execute(sa.select(battle_turns)).all()
        assert {t.failure for t in turns} == {"stopped"} and len(turns) == 2
        conv = conversation(tc, bid)
        assert conv["turns"] == 1 and conv["a"][1]["content"] == texts(got)["a"]
        for outcome in ("model_a", "tie"):
            r = tc.post(f"/arena/battles/{bid}/vote", json={"outcome": outcome}, headers=h)
            assert r.status_code == 409
        assert (
            tc.post(f"/arena/battles/{bid}/turns", json={"prompt": "x"}, headers=h).status_code
            == 409
        )
        assert tc.post(f"/arena/battles/{bid}/regenerate", headers=h).status_code == 409
        assert counts_total(tc) == 0.0
        with tc.app.state.engine.connect() as conn:
            assert conn.execute(sa.select(sa.func.count()).select_from(store.votes)).scalar() == 0
            assert store.held.open_held(conn, 1, None, time.time()) == (0, 0)


def test_limits_on_turns_regenerations_and_size_name_the_limit(tmp_path, demo):
    models = ("demo-ace+id=lim", "demo-wild+id=lim")
    s = settings(
        tmp_path,
        demo.base_url,
        models,
        max_turns=2,
        max_regenerations=1,
        max_conversation_chars=320,
        max_prompt_chars=300,
    )
    with TestClient(create_app(s)) as tc:
        h = open_page(tc)
        bid = lines(tc.post("/arena/battles", json={"prompt": "What is 2+2?"}, headers=h))[0][
            "battle_id"
        ]
        # another identity may not continue, regenerate or stop it
        mine = dict(tc.cookies)
        tc.cookies.clear()
        h2 = open_page(tc)
        lines(tc.post("/arena/battles", json={"prompt": "hi"}, headers=h2))
        for path in ("turns", "regenerate", "stop"):
            body = {"prompt": "x"} if path == "turns" else None
            assert tc.post(f"/arena/battles/{bid}/{path}", json=body, headers=h2).status_code == 403
        tc.cookies.clear()
        tc.cookies.update(mine)
        # a follow-up too long, and a conversation too long: 4xx naming the limit and value
        r = tc.post(f"/arena/battles/{bid}/turns", json={"prompt": "y" * 301}, headers=h)
        assert r.status_code == 422
        assert "301 characters" in r.text and "max_prompt_chars = 300" in r.text
        r = tc.post(f"/arena/battles/{bid}/turns", json={"prompt": "z" * 299}, headers=h)
        assert r.status_code == 422 and "max_conversation_chars = 320" in r.text
        # a control character in a follow-up: refused as in a first prompt
        r = tc.post(f"/arena/battles/{bid}/turns", json={"prompt": "a\x00b"}, headers=h)
        assert r.status_code == 422
        lines(tc.post(f"/arena/battles/{bid}/regenerate", headers=h))
        r = tc.post(f"/arena/battles/{bid}/regenerate", headers=h)
        assert r.status_code == 422 and "max_regenerations = 1" in r.json()["error"]["message"]
        lines(tc.post(f"/arena/battles/{bid}/turns", json={"prompt": "And 3+3?"}, headers=h))
        r = tc.post(f"/arena/battles/{bid}/turns", json={"prompt": "And 4+4?"}, headers=h)
        assert r.status_code == 422
        assert "2 turns" in r.text and "max_turns = 2" in r.json()["error"]["message"]
        # still votable after a refusal
        assert tc.post(f"/arena/battles/{bid}/vote", json={"outcome": "tie"}, headers=h).is_success
    with pytest.raises(ValueError, match="max_turns"):
        settings(tmp_path, demo.base_url, models, max_turns=0)
    with pytest.raises(ValueError, match="max_conversation_chars"):
        settings(tmp_path, demo.base_url, models, max_conversation_chars=10**9)


def test_judges_judge_the_whole_conversation_at_the_vote(tmp_path, demo):
    judge = "judge-keen+id=convj"
    s = settings(tmp_path, demo.base_url, ("demo-ace+id=convj", "demo-wild+id=convj"))
    s.judges = [{"name": "judge-keen", "base_url": demo.base_url, "model": judge}]
    with TestClient(create_app(s)) as tc:
        h = open_page(tc)
        bid = lines(tc.post("/arena/battles", json={"prompt": "What is 12*12?"}, headers=h))[0][
            "battle_id"
        ]
        lines(tc.post(f"/arena/battles/{bid}/turns", json={"prompt": "And 13*13?"}, headers=h))
        assert judge not in demo.stats()  # nothing judged before the vote
        assert tc.post(f"/arena/battles/{bid}/vote", json={"outcome": "tie"}, headers=h).is_success
        deadline = time.time() + 20
        while time.time() < deadline and demo.stats().get(judge, {}).get("requests", 0) < 2:
            time.sleep(0.05)
        time.sleep(0.3)
        sent = "\n".join(m["content"] for m in demo.stats()[judge]["last_messages"])
        assert "What is 12*12?" in sent and "And 13*13?" in sent and "[Turn 2]" in sent
        with tc.app.state.engine.connect() as conn:
            copies = conn.execute(
                sa.select(store.battles.c.id).where(store.battles.c.strategy == "judge")
            ).scalars()
            convs = [store.held.conversation(conn, c) for c in copies]
        assert len(convs) == 1 and convs[0] == conversation(tc, bid)


def test_a_database_before_conversations_reads_its_battles_as_turn_one(tmp_path):
    """Migration 0008 keeps the stored answers readable: each is turn 1, attempt 1."""
    from stablearena.service.store.engine import upgrade

    eng = store.make_engine(f"sqlite:///{tmp_path / 'old.db'}")
    upgrade(eng, "0007")
    with eng.begin() as conn:
        conn.execute(
            sa.text("INSERT INTO models (id, name, added_at) VALUES (1, 'x', 0), (2, 'y', 0)")
        )
        conn.execute(
            sa.text(
                "INSERT INTO annotators (id, name, role, created_at) VALUES (1, 'v', 'annotator', 0)"
            )
        )
        conn.execute(
            sa.text(
                "INSERT INTO battles (id, annotator_id, model_a, model_b, strategy, served_at,"
                " expires_at) VALUES ('b1', 1, 1, 2, 'random', 0, 10)"
            )
        )
        conn.execute(
            sa.text(
                "INSERT INTO held_battles (battle_id, prompt, status, served_at) "
                "VALUES ('b1', 'old prompt', 'complete', 5)"
            )
        )
        for side, mid in (("a", 1), ("b", 2)):
            conn.execute(
                sa.text(
                    "INSERT INTO battle_answers (battle_id, side, model_id, text, params) "
                    f"VALUES ('b1', '{side}', {mid}, 'answer {side}', '{{}}')"
                )
            )
    store.migrate(eng)
    with eng.connect() as conn:
        conv = store.held.conversation(conn, "b1")
    eng.dispose()
    assert conv == {
        "a": [
            {"role": "user", "content": "old prompt"},
            {"role": "assistant", "content": "answer a"},
        ],
        "b": [
            {"role": "user", "content": "old prompt"},
            {"role": "assistant", "content": "answer b"},
        ],
        "turns": 1,
    }


# ---------------------------------------------------------------------------------- fuzz
@pytest.fixture(scope="module")
def fuzz_db(tmp_path_factory):
    """One migrated database for every example (each example holds its own battle)."""
    eng = store.make_engine(f"sqlite:///{tmp_path_factory.mktemp('fuzz') / 'fuzz.db'}")
    store.migrate(eng)
    with eng.begin() as conn:
        conn.execute(store.models.insert(), [{"name": n, "added_at": 0.0} for n in ("x", "y")])
        conn.execute(store.annotators.insert().values(name="v", role="annotator", created_at=0.0))
    yield eng
    eng.dispose()


def _answers(texts: dict[str, str]) -> list[dict]:
    out = []
    for side, mid in (("a", 1), ("b", 2)):
        tokens, headers, lists, bold = style_counts(texts[side])
        out.append(
            {
                "side": side,
                "model_id": mid,
                "params": "{}",
                "attempts": 1,
                "text": texts[side],
                "style_tokens": tokens,
                "style_headers": headers,
                "style_lists": lists,
                "style_bold": bold,
            }
        )
    return out


_TEXT = st.text(st.sampled_from("ab *#-\n1"), min_size=0, max_size=30)


@fuzz_settings(
    max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    ops=st.lists(
        st.tuples(st.sampled_from(["follow", "regen"]), _TEXT.filter(str.strip), _TEXT, _TEXT),
        max_size=8,
    ),
    max_turns=st.integers(1, 4),
    max_regen=st.integers(0, 3),
    max_chars=st.integers(20, 200),
)
def test_fuzz_turns_regenerations_and_limits_keep_the_conversation_whole(
    fuzz_db, ops, max_turns, max_regen, max_chars
):
    """Any sequence of follow-ups and regenerations, accepted or refused by the limits, leaves a
    conversation of user/assistant pairs per side equal to a model of it (the current answer of
    each turn), the replaced attempts kept, and the style counts the sum over the turns."""
    eng, bid = fuzz_db, uuid.uuid4().hex
    now = time.time()
    row = {
        "id": bid, "annotator_id": 1, "model_a": 1, "model_b": 2, "strategy": "random",
        "propensity": None, "served_at": now, "expires_at": 0.0, "check": False,
    }  # fmt: skip
    held = {"prompt_id": "p", "prompt": "first", "category": "other", "address": None}
    with eng.begin() as conn:
        assert store.held.insert_held(conn, row, {**held, "served_at": now}, None) == []
        store.held.finish_held(conn, bid, _answers({"a": "A1", "b": "B1"}), None, now, 3600.0)
    model = [("first", {"a": "A1", "b": "B1"})]  # the current turns
    replaced, regens = [], 0
    for kind, prompt, ta, tb in ops:
        with eng.begin() as conn:
            got = store.held.accept_turn(
                conn, bid, 1, prompt if kind == "follow" else None, now, max_turns, max_regen,
                max_chars,
            )  # fmt: skip
            new_prompt = prompt if kind == "follow" else model[-1][0]
            size = max(
                sum(len(p) + len(a[s]) for p, a in (model if kind == "follow" else model[:-1]))
                for s in "ab"
            ) + len(new_prompt)
            over = (
                (kind == "follow" and len(model) + 1 > max_turns)
                or (kind == "regen" and regens >= max_regen)
                or size > max_chars
            )
            assert isinstance(got, store.held.TurnRefused) == over, (got, over)
            if over:
                assert got.status == 422 and "arena_page.max_" in got.message
                continue
            assert (got.turn, got.prompt) == (len(model) + (kind == "follow"), new_prompt)
            store.held.finish_held(
                conn, bid, _answers({"a": ta, "b": tb}), None, now, 3600.0,
                got.turn, got.attempt, got.prompt,
            )  # fmt: skip
        if kind == "follow":
            model.append((prompt, {"a": ta, "b": tb}))
        else:
            regens += 1
            replaced.append(model[-1][1])
            model[-1] = (model[-1][0], {"a": ta, "b": tb})
    with eng.connect() as conn:
        conv = store.held.conversation(conn, bid, history=True)
        summary = {
            r.side: r
            for r in conn.execute(
                sa.select(battle_answers).where(battle_answers.c.battle_id == bid)
            ).all()
        }
        status = store.held.held_status(conn, bid)
    assert status == "complete" and conv["turns"] == len(model)
    for s in "ab":
        want = [
            m
            for p, a in model
            for m in ({"role": "user", "content": p}, {"role": "assistant", "content": a[s]})
        ]
        assert conv[s] == want
        sums = [sum(x) for x in zip(*(style_counts(a[s]) for _, a in model), strict=True)]
        r = summary[s]
        assert [r.style_tokens, r.style_headers, r.style_lists, r.style_bold] == sums
        assert r.text == model[-1][1][s]
    assert [{"a": r["a"], "b": r["b"]} for r in conv["replaced"]] == replaced
