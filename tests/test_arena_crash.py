"""kill -9 of ``serve`` while a held battle streams: no half battle counted, no acknowledged
vote lost; after the restart a battle killed in its first turn is failed, one killed in a
follow-up is back at its last complete turn (votable, and it takes follow-ups), and none of them
holds the visitor's open slots (issue 44, item 4). A host starting beside a live one leaves the
battles that one streams alone."""

from __future__ import annotations

import json
import re
import uuid

import httpx
import pytest
from arena_process import ServerProcess
from pgserver import free_port

from stablearena.judging.endpoints.demo_server import DemoServer


def page(client: httpx.Client) -> str:
    r = client.get("/arena")
    return re.search(r'name="csrf-token" content="([0-9a-f]+)"', r.text).group(1)


def _two_battles(c: httpx.Client, url: str, h: dict) -> list[str]:
    """Two page battles held to their end (turn 1 complete): their ids."""
    ids = []
    for q in ("What is 2+2?", "Name a colour."):
        got = _lines(c.post(url + "/arena/battles", json={"prompt": q}, headers=h))
        assert got[-1]["status"] == "complete", got[-1]
        ids.append(got[0]["battle_id"])
    return ids


def test_kill_during_streaming(tmp_path):
    with DemoServer(seed=0) as demo:
        config = tmp_path / "arena.toml"
        config.write_text(
            "[arena]\nmin_records = 0\n\n"
            + "".join(
                f'[[models]]\nname = "{n}"\nbase_url = "{demo.base_url}"\nmodel = "{n}{mode}"\n\n'
                for n, mode in (("demo-ace", ""), ("demo-wild", ""))
            )
        )
        db = f"sqlite:///{tmp_path / 'arena.db'}"
        server = ServerProcess(db, "--config", str(config), cwd=tmp_path).start()
        admin = {"Authorization": f"Bearer {server.admin_key}"}
        with httpx.Client(base_url=server.url, timeout=30) as c:
            h = {"X-CSRF-Token": page(c), "Origin": server.url}
            # one complete battle, voted on and acknowledged
            lines = [
                json.loads(x)
                for x in c.post(
                    "/arena/battles", json={"prompt": "What is 2+2?"}, headers=h
                ).text.splitlines()
            ]
            done_id = lines[0]["battle_id"]
            assert (
                c.post(
                    f"/arena/battles/{done_id}/vote", json={"outcome": "tie"}, headers=h
                ).status_code
                == 200
            )
        # slow models: the server is killed while both answers stream
        slow = config.read_text().replace('model = "demo-ace"', 'model = "demo-ace+slow=0.5"')
        slow = slow.replace('model = "demo-wild"', 'model = "demo-wild+slow=0.5"')
        server.stop()
        config.write_text(slow)
        server = ServerProcess(db, "--config", str(config), cwd=tmp_path).start()
        with httpx.Client(base_url=server.url, timeout=30) as c:
            h = {"X-CSRF-Token": page(c), "Origin": server.url}
            with c.stream(
                "POST", "/arena/battles", json={"prompt": "What is 3*4?"}, headers=h
            ) as s:
                it = s.iter_lines()
                half_id = json.loads(next(it))["battle_id"]
                assert "delta" in json.loads(next(it))  # streaming has begun
                server.kill()
        server = ServerProcess(db, "--config", str(config), cwd=tmp_path).start()
        try:
            with httpx.Client(base_url=server.url, timeout=30) as c:
                export = [
                    json.loads(x) for x in c.get("/v1/export", headers=admin).text.splitlines()
                ]
                assert [r["battle_id"] for r in export] == [done_id]  # the vote kept, no half one
                held = {
                    b["battle_id"]: b
                    for b in c.get("/v1/admin/held", headers=admin).json()["battles"]
                }
                # killed in its first turn: failed (was ``served`` for ever, holding an open slot)
                assert held[half_id]["status"] == "failed" and held[half_id]["voted"] is False
                assert held[done_id]["status"] == "complete" and held[done_id]["voted"] is True
                # and it can never be voted on
                h = {"X-CSRF-Token": page(c), "Origin": server.url}
                r = c.post(f"/arena/battles/{half_id}/vote", json={"outcome": "model_a"}, headers=h)
                assert r.status_code in (403, 409)
        finally:
            server.stop()


# ---------------------------------------------------------------------------------- follow-ups
@pytest.fixture(params=["sqlite", "postgresql"])
def db_url(request, tmp_path):
    name = "k" + uuid.uuid4().hex[:12]
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path / (name + '.db')}"
    return request.getfixturevalue("postgres").create_database(name)


def _config(path, base_url: str, slow: float, visitor_open: int = 2) -> None:
    """Two demo models, each word streamed ``slow`` seconds apart; at most ``visitor_open``
    battles without a vote per visitor."""
    mode = f"+slow={slow:g}" if slow else ""
    path.write_text(
        f"[arena]\nmin_records = 0\n\n[arena_page]\nvisitor_open = {visitor_open}\n\n"
        + "".join(
            f'[[models]]\nname = "{n}"\nbase_url = "{base_url}"\nmodel = "{n}{mode}"\n\n'
            for n in ("demo-ace", "demo-wild")
        )
    )


def _lines(r: httpx.Response) -> list[dict]:
    return [json.loads(x) for x in r.text.splitlines()]


def _headers(c: httpx.Client, url: str) -> dict[str, str]:
    r = c.get(url + "/arena")
    token = re.search(r'name="csrf-token" content="([0-9a-f]+)"', r.text).group(1)
    return {"X-CSRF-Token": token, "Origin": url}


def _stream_until_a_piece(c: httpx.Client, url: str, path: str, body: dict, h: dict):
    """Post a streamed turn and read it until the first answer piece: (the stream's context,
    its lines to come, its first line)."""
    s = c.stream("POST", url + path, json=body, headers=h)
    it = s.__enter__().iter_lines()
    first = json.loads(next(it))
    assert "delta" in json.loads(next(it)), first  # the answers stream
    return s, it, first


def _drop(streams) -> None:
    for s in streams:
        try:
            s.__exit__(None, None, None)
        except httpx.HTTPError:  # the server was killed under it
            pass


def _held(c: httpx.Client, url: str, admin: dict) -> dict[str, dict]:
    got = c.get(url + "/v1/admin/held", headers=admin).json()["battles"]
    return {b["battle_id"]: b for b in got}


def test_kill_mid_follow_up_then_restart_votes_and_follows_up(db_url, tmp_path):
    """Two battles with turn 1 complete whose follow-ups stream, and a third in its first
    turn, when ``serve`` is killed (SIGKILL). After the restart the two are complete at turn 1
    and the third failed, holding none of the visitor's 3 open slots: a new battle is served at
    once; one battle takes its vote (on turn 1), the other a follow-up and then its vote — no
    409 ``busy``/``incomplete``, no 429 "vote on them first" (before: all three stayed
    ``served``, and the visitor was refused for an hour)."""
    config = tmp_path / "arena.toml"
    port = free_port()  # one address for the three starts: the visitor's cookie goes on
    with DemoServer(seed=0) as demo, httpx.Client(timeout=60) as c:
        _config(config, demo.base_url, 0, visitor_open=3)
        server = ServerProcess(db_url, "--config", str(config), cwd=tmp_path, port=port).start()
        url, admin = server.url, {"Authorization": f"Bearer {server.admin_key}"}
        h = _headers(c, url)
        ids = _two_battles(c, url, h)
        server.stop()
        _config(config, demo.base_url, 0.5, visitor_open=3)  # killed while the answers stream
        server = ServerProcess(db_url, "--config", str(config), cwd=tmp_path, port=port).start()
        h = _headers(c, url)
        streams = []
        for bid in ids:
            s, _, first = _stream_until_a_piece(
                c, url, f"/arena/battles/{bid}/turns", {"prompt": "Why?"}, h
            )
            assert first["turn"] == 2
            streams.append(s)
        s, _, first = _stream_until_a_piece(c, url, "/arena/battles", {"prompt": "What is 3*4?"}, h)
        streams.append(s)
        half = first["battle_id"]
        assert [_held(c, url, admin)[b]["status"] for b in [*ids, half]] == ["served"] * 3
        server.kill()
        _drop(streams)
        _config(config, demo.base_url, 0, visitor_open=3)
        server = ServerProcess(db_url, "--config", str(config), cwd=tmp_path, port=port).start()
        try:
            held = _held(c, url, admin)
            assert [held[b]["status"] for b in [*ids, half]] == ["complete", "complete", "failed"]
            h = _headers(c, url)
            got = _lines(c.post(url + "/arena/battles", json={"prompt": "And 5+5?"}, headers=h))
            assert got[-1]["status"] == "complete", got  # 3 open: the failed one is not
            r = c.post(f"{url}/arena/battles/{ids[0]}/vote", json={"outcome": "model_a"}, headers=h)
            assert r.status_code == 200, r.text
            got = _lines(
                c.post(f"{url}/arena/battles/{ids[1]}/turns", json={"prompt": "Why?"}, headers=h)
            )
            assert got[0]["turn"] == 2 and got[-1]["status"] == "complete", got[-1]
            r = c.post(f"{url}/arena/battles/{ids[1]}/vote", json={"outcome": "tie"}, headers=h)
            assert r.status_code == 200, r.text
            r = c.post(f"{url}/arena/battles/{half}/vote", json={"outcome": "tie"}, headers=h)
            assert r.status_code == 409 and r.json()["error"]["code"] == "failed", r.text
            export = _lines(c.get(url + "/v1/export", headers=admin))
            assert {e["battle_id"]: e["turn"] for e in export} == {ids[0]: 1, ids[1]: 2}
        finally:
            server.stop()


@pytest.mark.slow_on("sqlite")  # 22–95 s each: the PostgreSQL run stays in the default suite
def test_kill_mid_follow_up_then_the_visitor_abandons_what_it_cannot_reach(db_url, tmp_path):
    """The visitor's page is gone with the killed host: after the restart its two battles
    without a vote (one left complete, one recovered at turn 1) fill its cap of 2 and a new
    battle is refused (429 ``too_many_open``) — until it abandons them (``POST
    /arena/battles/abandon``, the page's *Abandon them*): both abandoned, never votable, and
    the next battle is served."""
    config = tmp_path / "arena.toml"
    port = free_port()
    with DemoServer(seed=0) as demo, httpx.Client(timeout=60) as c:
        # 0.05 s a word: the follow-up (~40 words) still streams when the kill comes, right
        # after its first piece (0.2 s a word made the test 42 s)
        _config(config, demo.base_url, 0.05, visitor_open=2)
        server = ServerProcess(db_url, "--config", str(config), cwd=tmp_path, port=port).start()
        url, admin = server.url, {"Authorization": f"Bearer {server.admin_key}"}
        h = _headers(c, url)
        ids = _two_battles(c, url, h)
        s, _, _ = _stream_until_a_piece(
            c, url, f"/arena/battles/{ids[1]}/turns", {"prompt": "Why?"}, h
        )
        server.kill()
        _drop([s])
        server = ServerProcess(db_url, "--config", str(config), cwd=tmp_path, port=port).start()
        try:
            assert [_held(c, url, admin)[b]["status"] for b in ids] == ["complete", "complete"]
            h = _headers(c, url)  # a new page: it knows neither battle
            r = c.post(url + "/arena/battles", json={"prompt": "And 5+5?"}, headers=h)
            assert r.status_code == 429 and r.json()["error"]["code"] == "too_many_open", r.text
            assert "abandon" in r.json()["error"]["message"]
            r = c.post(url + "/arena/battles/abandon", json={}, headers=h)
            assert r.status_code == 200 and r.json() == {"abandoned": ids}, r.text
            held = _held(c, url, admin)
            assert [held[b]["status"] for b in ids] == ["abandoned", "abandoned"]
            got = _lines(c.post(url + "/arena/battles", json={"prompt": "And 5+5?"}, headers=h))
            assert got[-1]["status"] == "complete", got
            r = c.post(f"{url}/arena/battles/{ids[0]}/vote", json={"outcome": "tie"}, headers=h)
            assert r.status_code == 409 and r.json()["error"]["code"] == "ended", r.text
            # without the page's token (another site's form) nothing is abandoned
            r = c.post(url + "/arena/battles/abandon", json={}, headers={"Origin": url})
            assert r.status_code == 403, r.text
            assert _held(c, url, admin)[got[0]["battle_id"]]["status"] == "complete"
        finally:
            server.stop()


@pytest.mark.slow_on("sqlite")  # 22–95 s each: the PostgreSQL run stays in the default suite
def test_a_host_starting_leaves_a_live_hosts_follow_up_alone(db_url, tmp_path):
    """A second host starts on the database while the first streams a follow-up (its start
    closes the battles of dead processes): the battle is left ``served`` under the live host,
    its turn 2 completes there, is stored and takes the vote."""
    config = tmp_path / "arena.toml"
    with DemoServer(seed=0) as demo, httpx.Client(timeout=60) as c:
        _config(config, demo.base_url, 0)
        port = free_port()
        first = ServerProcess(db_url, "--config", str(config), cwd=tmp_path, port=port).start()
        url, admin = first.url, {"Authorization": f"Bearer {first.admin_key}"}
        second = None
        try:
            h = _headers(c, url)
            got = _lines(c.post(url + "/arena/battles", json={"prompt": "2+2?"}, headers=h))
            bid = got[0]["battle_id"]
            first.stop()
            # the follow-up's words (about 40), 0.4 s apart, outlast the second host's start
            # (checked below: the battle is still "served", i.e. its turn 2 still streaming,
            # once the second host is up; at 2 s a word the test took 98 s)
            _config(config, demo.base_url, 0.4)
            first = ServerProcess(db_url, "--config", str(config), cwd=tmp_path, port=port)
            first.start()
            h = _headers(c, url)
            s, rest, head = _stream_until_a_piece(
                c, url, f"/arena/battles/{bid}/turns", {"prompt": "Why?"}, h
            )
            assert head["turn"] == 2
            second = ServerProcess(db_url, "--config", str(config), cwd=tmp_path).start()
            assert _held(c, second.url, admin)[bid]["status"] == "served"  # left alone
            last = [json.loads(x) for x in rest if x][-1]
            s.__exit__(None, None, None)
            assert last["status"] == "complete", last
            r = c.post(f"{url}/arena/battles/{bid}/vote", json={"outcome": "tie"}, headers=h)
            assert r.status_code == 200, r.text
            export = _lines(c.get(url + "/v1/export", headers=admin))
            assert [(e["battle_id"], e["turn"]) for e in export] == [(bid, 2)]
        finally:
            first.stop()
            if second is not None:
                second.stop()


@pytest.mark.slow_on("sqlite")  # 22–95 s each: the PostgreSQL run stays in the default suite
def test_a_clean_stop_closes_the_turns_it_cuts_at_their_last_complete_turn(db_url, tmp_path):
    """SIGTERM while a follow-up streams longer than ``graceful_timeout``: before the process
    exits, the battle is closed at turn 1 (complete, votable) by the stopping process itself,
    and its row of the serving processes is gone."""
    import sqlalchemy as sa

    from stablearena.service import store
    from stablearena.service.store.tables import held_battles, serving_processes

    config = tmp_path / "arena.toml"
    with DemoServer(seed=0) as demo, httpx.Client(timeout=60) as c:
        # the follow-up (~40 words at 0.15 s) streams ~6 s, past the 1 s graceful timeout
        _config(config, demo.base_url, 0.15)
        args = ("--config", str(config), "--set", "graceful_timeout=1")
        server = ServerProcess(db_url, *args, cwd=tmp_path).start()
        url = server.url
        h = _headers(c, url)
        got = _lines(c.post(url + "/arena/battles", json={"prompt": "2+2?"}, headers=h))
        bid = got[0]["battle_id"]
        s, _, head = _stream_until_a_piece(
            c, url, f"/arena/battles/{bid}/turns", {"prompt": "Why?"}, h
        )
        assert head["turn"] == 2
        server.stop()
        assert server.proc.returncode == 0, "".join(server.stderr)[-2000:]
        _drop([s])
    engine = store.make_engine(db_url)
    try:
        with engine.connect() as conn:
            status = store.held.held_status(conn, bid)
            owner = conn.execute(
                sa.select(held_battles.c.owner).where(held_battles.c.battle_id == bid)
            ).scalar()
            processes = conn.execute(sa.select(sa.func.count()).select_from(serving_processes))
            assert (status, owner, processes.scalar()) == ("complete", None, 0)
            assert store.held.conversation(conn, bid)["turns"] == 1
    finally:
        engine.dispose()
    assert "closed 1 battle(s) mid-turn" in "".join(server.stderr), "".join(server.stderr)[-2000:]
