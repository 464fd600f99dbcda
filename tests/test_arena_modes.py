"""The page's other modes (issue 42 item 3; docs/guides/arena-page.md, "Modes") over HTTP,
against a real ``stablearena serve`` process and the demo model server process: side-by-side
votes of models picked by name are kept and exported with ``anony: false`` and change nothing on
``/v1/leaderboard``; a direct chat gives its model the whole conversation and is never a battle;
a share link exists only after the vote and its view holds nothing of the voter."""

from __future__ import annotations

import io
import json
import re
import time

import httpx
import pandas as pd
import pytest
from arena_process import page_server
from test_anonymity import CONFIG

from stablearena.judging.endpoints.demo_server import DemoServer

MODELS = ("demo-ace", "demo-fair", "demo-wild")
# the arena of test_anonymity: every vote counts at once, no limits in the way


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("arena-modes")
    with DemoServer(seed=0) as demo, page_server(tmp, demo.base_url, MODELS, 0.0, CONFIG) as server:
        yield demo, server


class Page:
    """One visitor of /arena: its cookie (in the client) and CSRF token."""

    def __init__(self, url: str) -> None:
        self.url = url
        self.client = httpx.Client(timeout=60)
        page = self.client.get(url + "/arena")
        self.csrf = re.search(r'name="csrf-token" content="([0-9a-f]+)"', page.text).group(1)
        self.cookie = self.client.cookies.get("sa_arena")

    def post(self, path: str, body: dict) -> httpx.Response:
        return self.client.post(
            self.url + path, json=body, headers={"X-CSRF-Token": self.csrf, "Origin": self.url}
        )

    def stream(self, path: str, body: dict) -> list[dict]:
        r = self.post(path, body)
        assert r.status_code == 200, r.text
        lines = [json.loads(x) for x in r.text.splitlines()]
        assert lines[-1]["status"] == "complete", lines[-1]
        return lines

    def battle(self, prompt: str, models: list[str] | None = None) -> str:
        body = {"prompt": prompt, **({"models": models} if models else {})}
        return self.stream("/arena/battles", body)[0]["battle_id"]

    def vote(self, bid: str, outcome: str) -> dict:
        r = self.post(f"/arena/battles/{bid}/vote", {"outcome": outcome})
        assert r.status_code == 200, r.text
        return r.json()


def _board(url: str) -> dict:
    return httpx.get(url + "/v1/leaderboard?method=m-elo").json()


def _wait_board(url: str, n: int) -> dict:
    deadline = time.time() + 60
    while True:
        got = _board(url)
        if got.get("n_battles") == n or time.time() > deadline:
            return got
        time.sleep(0.1)


def test_named_side_by_side_votes_change_nothing_on_the_board_and_export_anony_false(
    served, tmp_path, cli
):
    """Six anonymous votes make the board; twelve side-by-side votes (demo-wild picked and
    always voted better) then one more anonymous vote: the board is that of the seven
    anonymous votes alone — read back from the export by ``stablearena rank`` — and the export
    keeps every named vote with ``anony`` false and strategy ``named``."""
    _, server = served
    url, admin = server.url, {"Authorization": f"Bearer {server.admin_key}"}
    page = Page(url)
    for k in range(6):
        page.vote(page.battle(f"What is {k + 2}*{k + 5}?"), "model_a")
    first = _wait_board(url, 6)
    assert first["n_battles"] == 6
    named = []
    for k in range(12):
        pair = ["demo-wild", "demo-ace"] if k % 2 else ["demo-ace", "demo-wild"]
        bid = page.battle(f"What is {k + 3}+{k + 9}?", pair)
        got = page.vote(bid, "model_a" if pair[0] == "demo-wild" else "model_b")
        assert (got["model_a"], got["model_b"]) == tuple(pair)  # the order picked
        assert got["counts"] is False
        assert got["why"].startswith("not on the board: you picked the models")
        named.append(bid)
    page.vote(page.battle("What is 4*4?"), "tie")
    board = _wait_board(url, 7)
    assert board["n_battles"] == 7
    every = httpx.get(url + "/v1/leaderboard?method=m-elo&anony=all").json()
    assert every["n_battles"] == 19
    raw = httpx.get(url + "/v1/export?texts=true", headers=admin, timeout=60).content
    df = pd.read_json(io.BytesIO(raw), lines=True, dtype=False)
    mine = df[df["battle_id"].isin(named)] if "battle_id" in df else df[~df["anony"]]
    assert len(mine) == 12 and not mine["anony"].any()
    assert (df["anony"] == (df["strategy"] != "named")).all()
    path = tmp_path / "votes.jsonl"
    path.write_bytes(raw)
    code, out, err = cli("rank", path, "--method", "m-elo", "--format", "json")
    assert code == 0, err
    offline = json.loads(out)
    assert offline["n_battles"] == 7
    rated = {m["model"]: m["rating"] for m in offline["models"]}
    for m in board["models"]:  # the live board is the anonymous votes' alone
        assert abs(m["rating"] - rated[m["model"]]) < 0.01, m
    code, out, _ = cli("rank", path, "--method", "m-elo", "--format", "json", "--keep-non-anony")
    kept = {m["model"]: m["rating"] for m in json.loads(out)["models"]}
    assert kept["demo-wild"] - rated["demo-wild"] > 50  # the named votes would have moved it


def test_a_direct_chat_gets_the_whole_conversation_and_is_never_a_battle(served):
    demo, server = served
    url, admin = server.url, {"Authorization": f"Bearer {server.admin_key}"}
    page = Page(url)
    held_before = httpx.get(url + "/v1/admin/held?limit=10000", headers=admin).json()["battles"]
    first = page.stream("/arena/chats", {"prompt": "What is 6*7?", "model": "demo-fair"})
    assert first[0]["turn"] == 1 and "battle_id" not in first[0]
    chat = first[0]["chat_id"]
    assert all(x.get("side", "a") == "a" for x in first)  # one model, one side
    page.stream(f"/arena/chats/{chat}/turns", {"prompt": "And what is 17 + 23?"})
    last = demo.stats()["demo-fair+slow=0"]["last_messages"]
    assert [m["role"] for m in last] == ["user", "assistant", "user"]
    assert last[0]["content"] == "What is 6*7?" and last[2]["content"] == "And what is 17 + 23?"
    # no battle, no vote: the held battles and the board are as they were
    held_after = httpx.get(url + "/v1/admin/held?limit=10000", headers=admin).json()["battles"]
    assert len(held_after) == len(held_before)
    assert page.post(f"/arena/battles/{chat}/vote", {"outcome": "model_a"}).status_code == 404
    # another identity cannot continue it; an unknown model is refused with the choices
    other = Page(url)
    r = other.post(f"/arena/chats/{chat}/turns", {"prompt": "hi"})
    assert r.status_code == 403, r.text
    r = page.post("/arena/chats", {"prompt": "hi", "model": "gpt-nothing"})
    assert r.status_code == 422 and "demo-ace" in r.json()["error"]["message"]


def test_a_share_link_only_after_the_vote_and_nothing_of_the_voter_in_it(served):
    _, server = served
    url = server.url
    page = Page(url)
    bid = page.battle("What is 12*12?")
    r = page.post(f"/arena/battles/{bid}/share", {})
    assert r.status_code == 409 and r.json()["error"]["code"] == "not_voted"
    voted = page.vote(bid, "model_b")
    assert Page(url).post(f"/arena/battles/{bid}/share", {}).status_code == 403  # not its voter
    link = page.post(f"/arena/battles/{bid}/share", {}).json()["url"]
    assert page.post(f"/arena/battles/{bid}/share", {}).json()["url"] == link  # one per battle
    token = link.rsplit("/", 1)[1]
    assert re.fullmatch(r"[A-Za-z0-9_-]{32}", token)
    anyone = httpx.get(url + link + ".json")  # no cookie: anyone with the link
    assert anyone.status_code == 200 and "set-cookie" not in anyone.headers
    got = anyone.json()
    assert got["model_a"] == voted["model_a"] and got["model_b"] == voted["model_b"]
    assert got["outcome"] == "model_b" and got["mode"] == "battle"
    assert got["turns"][0]["prompt"] == "What is 12*12?" and got["turns"][0]["a"]
    html = httpx.get(url + link)
    assert html.status_code == 200 and "set-cookie" not in html.headers
    assert html.headers["referrer-policy"] == "no-referrer"
    assert "Model B was better" in html.text and voted["model_a"] in html.text
    visitor = httpx.get(url + "/v1/admin/held?limit=10000", headers=_admin(server)).json()
    held = next(b for b in visitor["battles"] if b["battle_id"] == bid)
    annotators = httpx.get(url + "/v1/export", headers=_admin(server)).text
    judge = next(
        json.loads(x)["judge"] for x in annotators.splitlines() if json.loads(x)["battle_id"] == bid
    )
    assert judge.startswith("visitor-")
    for text in (anyone.text, html.text):  # nothing of the voter, nor what finds its row
        for secret in (judge, page.cookie, page.csrf, bid, "127.0.0.1", str(held["served_at"])[:8]):
            assert secret not in text, secret
        assert "annotator" not in text and "address" not in text
    for bad in ("x" * 32, "short", token[:-1] + ("A" if token[-1] != "A" else "B")):
        assert httpx.get(f"{url}/share/{bad}.json").status_code == 404


def _admin(server) -> dict[str, str]:
    return {"Authorization": f"Bearer {server.admin_key}"}
