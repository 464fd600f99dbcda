"""kill -9 of ``serve`` while a held battle streams: no half battle counted, no acknowledged
vote lost, and the battle served but never completed is visible as such after the restart."""

from __future__ import annotations

import json
import re

import httpx
from arena_process import ServerProcess

from stablearena.endpoints.demo_server import DemoServer


def page(client: httpx.Client) -> str:
    r = client.get("/arena")
    return re.search(r'name="csrf-token" content="([0-9a-f]+)"', r.text).group(1)


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
                assert held[half_id]["status"] == "served" and held[half_id]["voted"] is False
                assert held[done_id]["status"] == "complete" and held[done_id]["voted"] is True
                # and it can never be voted on
                h = {"X-CSRF-Token": page(c), "Origin": server.url}
                r = c.post(f"/arena/battles/{half_id}/vote", json={"outcome": "model_a"}, headers=h)
                assert r.status_code in (403, 409)
        finally:
            server.stop()
