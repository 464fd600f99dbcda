"""The public leaderboard page ``/leaderboard``: rank (UB) with its meaning, category tabs,
the style toggle, the link from ``/arena`` and back; 404 for an unknown tab."""

from __future__ import annotations

from fastapi.testclient import TestClient
from test_arena_service import battle, demo, open_page, settings, vote  # noqa: F401

from stablearena.service.app import create_app


def test_public_leaderboard_page(tmp_path, demo):  # noqa: F811
    from stablearena.judging.endpoints.demo import demo_prompts

    s = settings(tmp_path, demo.base_url, models=("demo-ace", "demo-solid", "demo-wild"))
    s.models[2]["params"] = {"max_tokens": 3}
    s.arena_page.visitor_open = 100
    s.arena_page.visitor_battles_per_hour = 1e6
    with TestClient(create_app(s)) as tc:
        assert 'href="/leaderboard"' in tc.get("/arena").text
        csrf = open_page(tc)
        for k, p in enumerate(demo_prompts(24)):
            lines = battle(tc, csrf, p["prompt"])
            assert vote(tc, csrf, lines[0]["battle_id"], ("model_a", "model_b")[k % 2]).is_success
        import time

        deadline = time.time() + 60
        while time.time() < deadline and 'id="lb-table"' not in (r := tc.get("/leaderboard")).text:
            time.sleep(0.3)
        page = r.text
        assert r.status_code == 200 and "Rank (UB)" in page and 'href="/arena"' in page
        assert "1 + the number of models whose 95% interval lies entirely above" in page
        assert 'data-tab="math"' in page and 'data-tab="other"' in page
        assert "script-src" in r.headers["content-security-policy"] and "<script" not in page
        math = tc.get("/leaderboard?board=math")
        assert math.status_code == 200 and 'aria-current="page" data-tab="math"' in math.text
        styled = tc.get("/leaderboard?style=true")
        assert styled.status_code == 200 and 'data-style="on"' in styled.text
        assert tc.get("/leaderboard?board=nope").status_code == 404
        # it reloads itself (issue 42: it never did): a meta refresh, the page has no script
        from stablearena.service.api.public_board import REFRESH_SECONDS

        assert f'<meta http-equiv="refresh" content="{REFRESH_SECONDS}">' in page
        assert f"reloads itself every {REFRESH_SECONDS} s" in page
