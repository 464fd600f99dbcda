"""The live arena's dashboard (issue 11 part 3): pages built from the report's pieces, drawn once
per published fit in another process and only while someone watches, served as stored bytes by
every worker; the admin login (a session cookie, never the key in a URL) and the admin view.
What a person sees in a browser is in test_dashboard_browser.py."""

from __future__ import annotations

import base64
import gzip
import hashlib
import os
import re
import time
import uuid

import numpy as np
import pytest
import sqlalchemy as sa
from fastapi.testclient import TestClient
from test_report import parse
from test_service import settings_for as service_settings

from stablearena.service import dashboard as dash_module
from stablearena.service import store
from stablearena.service.app import create_app
from stablearena.service.client import ArenaClient
from stablearena.service.render import (
    ADMIN_FIGURES,
    PUBLIC_FIGURES,
    RenderJob,
    build_view,
    script,
    script_hash,
)
from stablearena.service.settings import Settings

MODELS = ("gpt-4o", "claude-3-opus", "llama-3-70b", "mistral-large", "qwen2-72b", "phi-3")
TRUTH = dict(zip(MODELS, np.linspace(1.5, -1.5, len(MODELS)), strict=True))


def settings_for(url: str, **arena) -> Settings:
    """The service tests' settings, screening with δ = 20 and ``exclude``, drawing every fit."""
    base = service_settings(url, **{"min_records": 20, "policy": "exclude", **arena})
    return base.model_copy(update={"dashboard_share": 1.0})


def play(tc: TestClient, admin: ArenaClient, n: int, *, seed: int = 0, names=None, flippers=()):
    """``n`` votes by annotators ``names`` (created when new); ``flippers`` vote backwards."""
    rng = np.random.default_rng(seed)
    names = names or [f"u{k}" for k in range(6)]
    clients = {}
    for name in names:
        key = tc.app.state.__dict__.setdefault("keys", {}).get(name)
        if key is None:
            key = tc.app.state.keys[name] = admin.create_annotator(name)
        clients[name] = ArenaClient("http://testserver", key, client=TestClient(tc.app), retries=0)
    for t in range(n):
        name = names[t % len(names)]
        (b,) = clients[name].next_battles()
        p = 1 / (1 + np.exp(-(TRUTH[b["model_a"]] - TRUTH[b["model_b"]])))
        out = "model_a" if rng.random() < p else "model_b"
        if name in flippers:
            out = "model_b" if out == "model_a" else "model_a"
        clients[name].vote(b["battle_id"], out)


def open_arena(url: str, **arena) -> tuple[TestClient, ArenaClient]:
    tc = TestClient(create_app(settings_for(url, **arena)))
    tc.__enter__()
    admin = ArenaClient(
        "http://testserver", tc.app.state.admin_key, client=TestClient(tc.app), retries=0
    )
    return tc, admin


def wait_for_view(tc: TestClient, fit_id: int | None = None, timeout: float = 120.0) -> dict:
    """Poll like an open page until the view of ``fit_id`` (default: the published fit) is
    served."""
    deadline = time.time() + timeout
    while time.time() < deadline:
        state = tc.get("/dashboard/poll").json()
        want = fit_id or (state["published"] or {}).get("fit_id")
        if state["view"] and want and state["view"]["fit_id"] >= want:
            return state
        time.sleep(0.2)
    d = tc.app.state.dashboard
    raise AssertionError(f"no view in {timeout} s: {state}; render error {d.render_error}")


@pytest.fixture(scope="module")
def arena(tmp_path_factory):
    """One arena for the tests that only read: 6 models, 6 annotators of whom u0 flips every vote
    (excluded by the Stable Arena), 360 votes, refitted, and its view drawn."""
    url = f"sqlite:///{tmp_path_factory.mktemp('dash') / 'arena.db'}"
    tc, admin = open_arena(url)
    for m in MODELS:
        admin.add_model(m)
    play(tc, admin, 360, flippers={"u0"})
    admin.refit()
    wait_for_view(tc)
    yield tc, admin
    tc.__exit__(None, None, None)


# ---------------------------------------------------------------------------------- the pages
def test_the_view_is_the_reports_table_and_figures_for_the_published_fit(arena):
    from stablearena.service.refit import refit_published
    from stablearena.service.store import read_snapshot

    tc, admin = arena
    st = tc.app.state.arena
    published = admin.leaderboard()
    job = RenderJob(
        db=st.settings.db,
        fit_id=st.fit.id,
        as_of_vote=st.fit.as_of_vote,
        fitted_at=st.fit.fitted_at,
        fit_seconds=st.fit.seconds,
        payload=st.fit.payload,
        strategy="d-opt",
    )
    fitted = st.fit.fitted or refit_published(st.fit.payload, read_snapshot(st.engine).counts())
    view = build_view(fitted, job)
    page, main, adm = parse(view.page), parse(view.main), parse(view.admin)
    # the leaderboard: one row per model, in the published order, with intervals and tiers
    assert page.rows["leaderboard"] == main.rows["leaderboard"] == len(MODELS)
    order = re.findall(r'<tr class="[^"]*" data-model="([^"]+)"', view.main)
    assert order == [m["model"] for m in published["models"]]
    head = re.search(r"<thead>(.*?)</thead>", view.main, re.S).group(1)
    for col in ("rating", "95% interval", "rank interval", "tier", "battles"):
        assert col in head
    assert main.figures == list(PUBLIC_FIGURES)
    assert adm.figures == list(ADMIN_FIGURES)
    # the admin content: every annotator with its decision; the flipper excluded, with the reason
    assert adm.rows["annotators"] == 6
    flipper = re.search(r'data-annotator="u0" data-status="(\w+)">(.*?)</tr>', view.admin, re.S)
    assert flipper.group(1) == "excluded"
    assert "excluded" in re.search(r'class="reason">([^<]*)<', flipper.group(2)).group(1)
    # self-contained: no external request, one inline script allowed by its hash
    for html in (view.page, view.admin):
        assert not re.search(r"""(src|href)=["'](https?:)?//""", html)
        assert "<link" not in html.replace('<link rel="icon" href="data:,">', "")
        assert "@import" not in html and "url(http" not in html
    assert page.scripts == 1 and view.page.count(script()) == 1
    digest = base64.b64encode(hashlib.sha256(script().encode()).digest()).decode()
    assert script_hash() == f"'sha256-{digest}'"


def test_public_page_is_served_as_stored_bytes_with_a_strict_policy(arena):
    tc, _ = arena
    d = tc.app.state.dashboard
    zipped = tc.get("/", headers={"Accept-Encoding": "gzip"})
    assert zipped.status_code == 200
    assert zipped.headers["content-encoding"] == "gzip"
    with d.engine.connect() as conn:
        stored = conn.execute(
            sa.select(store.dashboard_views.c.page).where(
                store.dashboard_views.c.fit_id == d.view.fit_id
            )
        ).scalar_one()
    assert int(zipped.headers["content-length"]) == len(stored)  # sent as stored
    plain = tc.get("/", headers={"Accept-Encoding": "identity"})
    assert "content-encoding" not in plain.headers
    assert plain.text == gzip.decompress(stored).decode() == zipped.text
    csp = plain.headers["content-security-policy"]
    assert f"script-src {script_hash()};" in csp and "default-src 'none'" in csp
    assert "connect-src 'self'" in csp and "frame-ancestors 'none'" in csp
    assert plain.headers["x-content-type-options"] == "nosniff"
    assert f'data-version="{d.view.fit_id}"' in plain.text
    frag = tc.get("/dashboard/fragment")
    assert frag.headers["x-dashboard-version"] == str(d.view.fit_id)
    assert frag.text in plain.text and frag.text.startswith("<main")
    state = tc.get("/dashboard/poll").json()
    assert state["version"] == str(d.view.fit_id) and state["votes"] == 360
    assert state["status"].startswith("Leaderboard as of vote 360")


def test_each_fit_is_drawn_once_in_another_process(arena):
    tc, admin = arena
    d = tc.app.state.dashboard
    assert d.last_render.pid not in (0, os.getpid())  # drawn by the render process
    assert os.getpriority(os.PRIO_PROCESS, d.last_render.pid) >= 10  # at a low priority
    assert d.last_render.status == "stored" and d.last_render.cpu_seconds > 0
    renders = d.renders
    fit_id = d.view.fit_id
    for _ in range(10):  # pages and polls while nothing new is published draw nothing
        tc.get("/")
        tc.get("/dashboard/poll")
    time.sleep(0.5)
    assert d.renders == renders and d.view.fit_id == fit_id
    with d.engine.connect() as conn:
        ids = conn.execute(sa.select(store.dashboard_views.c.fit_id)).scalars().all()
    assert len(ids) == len(set(ids)) and fit_id in ids


def fitted_arena(tmp_path) -> TestClient:  # noqa: ANN001
    """A SQLite arena of four models, 40 votes of two annotators and a published fit."""
    tc, admin = open_arena(f"sqlite:///{tmp_path / 'a.db'}", min_records=0)
    for m in MODELS[:4]:
        admin.add_model(m)
    play(tc, admin, 40, names=["a", "b"])
    admin.refit()
    return tc


def test_nothing_is_drawn_while_nobody_watches(tmp_path):
    tc = fitted_arena(tmp_path)
    try:
        time.sleep(0.5)
        d = tc.app.state.dashboard
        assert tc.app.state.arena.fit is not None
        assert d.renders == 0 and d._executor is None and d.view is None  # no process either
        # the first page before anything is drawn says so, and the poll starts the drawing
        first = tc.get("/")
        assert first.status_code == 200 and 'data-version="none"' in first.text
        assert "Drawing the first leaderboard" in first.text
        state = wait_for_view(tc)
        assert state["view"]["fit_id"] == tc.app.state.arena.fit.id
    finally:
        tc.__exit__(None, None, None)


def test_an_idle_workers_watchers_ask_the_database_little(tmp_path):
    """Once the view is of the published fit, the dashboard's watcher asks the database nothing;
    the refitter's poll is two statements (the votes since its last look, then the watermark,
    the newest fit id and two settings in one)."""
    tc = fitted_arena(tmp_path)
    try:
        wait_for_view(tc)
        st = tc.app.state
        seen: list[str] = []

        def count(conn, cursor, statement, *args) -> None:  # noqa: ANN001
            seen.append(statement)

        sa.event.listen(st.arena.engine, "before_cursor_execute", count)
        try:
            for _ in range(5):
                st.dashboard.tick()
            dashboard = len(seen)
            st.refitter.tick()
            refitter = len(seen) - dashboard
        finally:
            sa.event.remove(st.arena.engine, "before_cursor_execute", count)
        assert dashboard == 0, seen
        assert refitter == 2, seen[dashboard:]
    finally:
        tc.__exit__(None, None, None)


@pytest.fixture(params=["sqlite", "postgresql"])
def db_url(request, tmp_path):
    if request.param == "sqlite":
        yield f"sqlite:///{tmp_path / 'shared.db'}"
        return
    pg = request.getfixturevalue("postgres")
    yield pg.create_database("d" + uuid.uuid4().hex[:12])


@pytest.mark.slow_on("sqlite")  # the PostgreSQL run stays in the default suite
def test_every_worker_serves_the_view_one_drew_and_a_restart_keeps_it(db_url, monkeypatch):
    """Two workers on one database: the one that refits draws, the other serves the same bytes;
    a worker started later serves the stored view at once, and without a stored view redraws
    the published fit from the counts (they are still the fit's)."""
    a, admin = open_arena(db_url, min_records=0)
    try:
        for m in MODELS[:5]:
            admin.add_model(m)
        play(a, admin, 60, names=["a", "b", "c"])
        admin.refit()
        wait_for_view(a)
        b = TestClient(create_app(settings_for(db_url, min_records=0)))
        with b:
            deadline = time.time() + 30
            while b.app.state.dashboard.view is None and time.time() < deadline:
                time.sleep(0.05)
            assert b.app.state.dashboard.view.fit_id == a.app.state.dashboard.view.fit_id
            assert b.get("/").content == a.get("/").content
            assert b.app.state.dashboard.renders == 0  # it drew nothing itself
    finally:
        a.__exit__(None, None, None)
    engine = store.make_engine(db_url)
    with engine.begin() as conn:
        conn.execute(store.dashboard_views.delete())
    engine.dispose()
    monkeypatch.setattr(dash_module, "FALLBACK_GRACE", 0.0)
    c = TestClient(create_app(settings_for(db_url, min_records=0)))
    with c:
        assert c.app.state.arena.fit.fitted is None  # loaded from the database
        state = wait_for_view(c)
        assert state["view"]["as_of_vote"] == 60
        assert c.app.state.dashboard.last_render.status == "stored"


# ---------------------------------------------------------------------------------- admin login
def cookie_header(resp) -> str:
    return resp.headers.get("set-cookie", "")


def test_admin_view_needs_a_login_by_form_and_a_strict_session_cookie(arena):
    tc, admin = arena
    app = tc.app
    anon = TestClient(app, follow_redirects=False)
    r = anon.get("/admin")
    assert r.status_code == 303 and r.headers["location"] == "/admin/login"
    assert anon.get("/admin/poll").status_code == 401
    assert anon.get("/admin/fragment").status_code == 401
    form = anon.get("/admin/login")
    assert 'method="post"' in form.text and 'type="password"' in form.text
    # the key in the URL is never read; an annotator's key, garbage or JSON do not log in
    admin_key = app.state.admin_key
    annotator_key = app.state.keys["u1"]
    assert anon.post(f"/admin/login?key={admin_key}").status_code == 415
    assert (
        anon.post(
            f"/admin/login?key={admin_key}",
            content=b"",
            headers={"content-type": "application/x-www-form-urlencoded"},
        ).status_code
        == 401
    )
    assert anon.post("/admin/login", data={"key": annotator_key}).status_code == 401
    assert anon.post("/admin/login", data={"key": "sa_nonsense"}).status_code == 401
    assert anon.post("/admin/login", json={"key": admin_key}).status_code == 415
    evil = anon.post(
        "/admin/login", data={"key": admin_key}, headers={"origin": "http://evil.example"}
    )
    assert evil.status_code == 403 and "set-cookie" not in evil.headers
    # the admin key logs in: a random token in an HttpOnly, SameSite=Strict cookie for /admin
    ok = anon.post("/admin/login", data={"key": admin_key})
    assert ok.status_code == 303 and ok.headers["location"] == "/admin"
    cookie = cookie_header(ok)
    token = re.search(rf"{dash_module.COOKIE}=([^;]+)", cookie).group(1)
    assert "HttpOnly" in cookie and "SameSite=strict" in cookie and "Path=/admin" in cookie
    assert token not in admin_key and admin_key not in cookie
    with app.state.arena.engine.connect() as conn:
        rows = conn.execute(sa.select(store.dashboard_sessions)).all()
    assert any(r.token_hash == hashlib.sha256(token.encode()).hexdigest() for r in rows)
    assert all(token not in tuple(map(str, r)) for r in rows)  # only its hash is stored
    page = anon.get("/admin")
    assert page.status_code == 200 and "Arena administration" in page.text
    assert page.headers["cache-control"] == "no-store"
    assert anon.get("/admin/login").status_code == 303  # already logged in
    poll = anon.get("/admin/poll").json()
    assert "staleness" in poll["health_html"] and poll["version"] == str(
        app.state.dashboard.view.fit_id
    )
    # log-out ends the session on the server, not only in this browser
    out = anon.post("/admin/logout")
    assert out.status_code == 303 and 'stablearena_admin=""' in cookie_header(out)
    stolen = TestClient(app, follow_redirects=False, cookies={dash_module.COOKIE: token})
    assert stolen.get("/admin").status_code == 303


def test_revoking_the_admin_key_or_expiry_ends_its_sessions(arena):
    tc, admin = arena
    app = tc.app
    ops_key = admin.create_annotator("ops", role="admin")
    ops = TestClient(app, follow_redirects=False)
    assert ops.post("/admin/login", data={"key": ops_key}).status_code == 303
    assert ops.get("/admin").status_code == 200
    admin.revoke_annotator("ops")
    assert ops.get("/admin").status_code == 303
    # an expired session
    boss = TestClient(app, follow_redirects=False)
    boss.post("/admin/login", data={"key": app.state.admin_key})
    assert boss.get("/admin").status_code == 200
    with app.state.arena.engine.begin() as conn:
        conn.execute(store.dashboard_sessions.update().values(expires_at=time.time() - 1))
    assert boss.get("/admin").status_code == 303


def test_login_attempts_are_rate_limited(arena):
    tc, _ = arena
    d = tc.app.state.dashboard
    guesser = TestClient(tc.app, follow_redirects=False)
    try:
        codes = [
            guesser.post("/admin/login", data={"key": f"sa_{k:016d}_x"}).status_code
            for k in range(14)
        ]
        assert codes[0] == 401 and codes[-1] == 429
    finally:
        d.login_limiter = type(d.login_limiter)(0.5, 10)  # the other tests log in again


def test_admin_view_shows_decisions_coverage_and_health(arena):
    tc, admin = arena
    admin.update_model("phi-3", retired=True)
    admin.update_model("qwen2-72b", outage=True)
    try:
        s = TestClient(tc.app, follow_redirects=False)
        s.post("/admin/login", data={"key": tc.app.state.admin_key})
        html = s.get("/admin").text
        page = parse(html)
        assert page.rows["annotators"] == 6
        assert page.figures == ["annotators", "battles"]
        assert re.search(r'data-annotator="u0" data-status="excluded"', html)
        assert "policy <strong>exclude</strong>" in html
        cards = dict(
            re.findall(r'<div class="label">([^<]+)</div>\s*<div class="value"[^>]*>([^<]+)<', html)
        )
        assert cards["votes"] == "360" and cards["battles served"] == "360"
        assert cards["staleness"] == "0 votes"
        assert cards["models"] == "4 active"
        assert re.search(r'data-list="retired">phi-3<', html)
        assert re.search(r'data-list="outage">qwen2-72b<', html)
    finally:
        admin.update_model("phi-3", retired=False)
        admin.update_model("qwen2-72b", outage=False)


# ---------------------------------------------------------------------------------- pacing
class _Pool:
    def __init__(self) -> None:
        self.jobs: list = []

    def submit(self, fn, job):
        from concurrent.futures import Future

        self.jobs.append(job)
        return Future()  # never completes: "drawing"


def test_renders_are_paced_to_the_share_of_a_core_and_wait_for_a_viewer():
    """After a render of c CPU seconds the next waits c·(1/share − 1); one render at a time;
    nothing while nobody watched for ``dashboard_idle`` seconds; each fit at most once."""
    from concurrent.futures import Future
    from types import SimpleNamespace

    from stablearena.service.dashboard import Dashboard
    from stablearena.service.render import RenderResult

    settings = Settings(db="sqlite:///x.db", dashboard_share=0.2, dashboard_idle=60.0)
    now = time.time()
    fit = SimpleNamespace(
        id=7, as_of_vote=70, fitted_at=now, seconds=0.1, payload={}, fitted=object()
    )
    state = SimpleNamespace(engine=None, fit=fit, strategy_name="d-opt", writer=None)
    d = Dashboard(state, settings)
    pool = _Pool()
    d._pool = lambda: pool
    d._maybe_render()
    assert pool.jobs == []  # nobody has looked at the dashboard
    d.watched_at = now
    d._maybe_render()
    assert [j.fit_id for j in pool.jobs] == [7] and d.rendering == 7
    fit.id = 8
    d._maybe_render()
    assert len(pool.jobs) == 1  # one render at a time
    done: Future = Future()
    done.set_result(RenderResult(7, "stored", cpu_seconds=2.0, wall_seconds=2.5, pid=1))
    before = time.time()
    d._done(done)
    after = time.time()
    assert d.rendering is None and d.renders == 1
    # 2 s × (1/0.2 − 1) after the render ended, however long this machine took to get here
    assert before + 8.0 - 1e-6 <= d.next_render_at <= after + 8.0 + 1e-6
    d._maybe_render()
    assert len(pool.jobs) == 1  # paced
    d.next_render_at = 0.0
    d._maybe_render()
    assert [j.fit_id for j in pool.jobs] == [7, 8]
    failed: Future = Future()
    failed.set_exception(RuntimeError("boom"))
    d._done(failed)
    assert d.render_error == "RuntimeError: boom" and d.rendering is None
    d.next_render_at = 0.0
    d._maybe_render()
    assert len(pool.jobs) == 2  # a fit that failed is not retried; the next fit will be drawn
    d.watched_at = time.time() - 61.0
    fit.id = 9
    d._maybe_render()
    assert len(pool.jobs) == 2  # nobody watches any more
