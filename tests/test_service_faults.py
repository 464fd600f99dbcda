"""Database faults are health: with the disk full, the file made unwritable, the file damaged,
or PostgreSQL stopped mid-load, a write answers 503 ``storage_unavailable`` (retryable, nothing
recorded), ``/healthz`` answers 503 naming the reason until a write succeeds again, a damaged
SQLite file is refused at start, and every acknowledged vote is in the database afterwards.

The disk-full and unwritable cases need root (a tmpfs mount, ``chattr +i``: file permissions do
not stop root); they are skipped otherwise."""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
import time
import uuid
from pathlib import Path

import pytest
import sqlalchemy as sa
from fastapi.testclient import TestClient
from test_service import settings_for

from stablearena.service import store
from stablearena.service.app import create_app
from stablearena.service.settings import Settings
from stablearena.service.store.engine import DamagedDatabase

ROOT = os.geteuid() == 0


def _settings(url: str) -> Settings:
    return settings_for(url, refit_votes=1000)


class Load:
    """Annotators voting through the test client; remembers every acknowledged vote."""

    def __init__(self, tc: TestClient, n_annotators: int = 3) -> None:
        self.tc = tc
        admin = {"Authorization": f"Bearer {tc.app.state.admin_key}"}
        for m in "abcde":
            assert tc.post("/v1/admin/models", json={"name": m}, headers=admin).status_code < 300
        self.keys = []
        for k in range(n_annotators):
            r = tc.post("/v1/admin/annotators", json={"name": f"u{k}"}, headers=admin)
            assert r.status_code < 300, r.text
            self.keys.append(r.json()["key"])
        self.acked: dict[str, str] = {}  # battle id → outcome
        self.refused: list[dict] = []
        self.t = 0

    def step(self) -> int:
        """One battle and its vote; returns the status of the first refused request, else 200."""
        key = self.keys[self.t % len(self.keys)]
        self.t += 1
        h = {"Authorization": f"Bearer {key}"}
        r = self.tc.post("/v1/battles", json={"k": 1}, headers=h)
        if r.status_code != 200:
            self.refused.append(r.json())
            return r.status_code
        b = r.json()["battles"][0]
        out = "model_a" if self.t % 3 else "tie"
        r = self.tc.post(f"/v1/battles/{b['battle_id']}/vote", json={"outcome": out}, headers=h)
        if r.status_code != 200:
            self.refused.append(r.json())
            return r.status_code
        self.acked[b["battle_id"]] = out
        return 200

    def until_refused(self, tries: int = 3000) -> int:
        for _ in range(tries):
            status = self.step()
            if status != 200:
                return status
        raise AssertionError("no write failed")

    def check_durable(self, engine: sa.engine.Engine) -> None:
        """Every acknowledged vote is stored (current, with its outcome) and the counts agree."""
        codes = dict(zip(store.OUTCOMES, range(4), strict=True))
        with engine.connect() as conn:
            rows = conn.execute(
                sa.select(store.votes.c.battle_id, store.votes.c.outcome).where(
                    store.votes.c.superseded == sa.false()
                )
            ).all()
            total = conn.execute(
                sa.select(
                    sa.func.sum(
                        store.pair_counts.c.wins
                        + store.pair_counts.c.losses
                        + store.pair_counts.c.ties
                        + store.pair_counts.c.ties_both_bad
                    )
                )
            ).scalar_one()
        stored = {bid: o for bid, o in rows}
        missing = [b for b, o in self.acked.items() if stored.get(b) != codes[o]]
        assert missing == [] and len(self.acked) > 0
        assert total == len(stored)


def _health(tc: TestClient) -> tuple[int, dict]:
    r = tc.get("/healthz")
    return r.status_code, r.json()


def _storage_refusal(load: Load, status: int) -> None:
    assert status == 503, load.refused[-1]
    err = load.refused[-1]["error"]
    assert err["code"] == "storage_unavailable" and "retry" in err["message"]


@contextlib.contextmanager
def _tmpfs(path: Path, size: str = "4m"):
    # 4 MB: with 1 MB, the room the filler left after it went was sometimes too little for the
    # WAL's next frames (the disk-full test failed 2 runs in 6 once migration 0007 added a table)
    path.mkdir()
    res = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(path)], capture_output=True
    )
    if res.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {res.stderr.decode().strip()}")
    try:
        yield path
    finally:
        subprocess.run(["umount", "-l", str(path)], check=False)


@pytest.mark.skipif(not ROOT, reason="mounting a small tmpfs needs root")
def test_disk_full_is_503_storage_unavailable_and_healthz_says_so_until_space_returns(tmp_path):
    with _tmpfs(tmp_path / "disk") as disk:
        with TestClient(create_app(_settings(f"sqlite:///{disk}/arena.db"))) as tc:
            load = Load(tc)
            for _ in range(20):
                assert load.step() == 200
            assert _health(tc)[0] == 200
            filler = disk / "filler"
            fd = os.open(filler, os.O_WRONLY | os.O_CREAT, 0o600)
            with contextlib.suppress(OSError):
                while True:  # fill the disk to the last block
                    os.write(fd, b"\0" * 4096)
            os.close(fd)
            status = load.until_refused()
            _storage_refusal(load, status)
            code, health = _health(tc)
            assert code == 503 and health["database"] == "unwritable"
            assert "full" in health["database_error"]
            filler.unlink()
            code, health = _health(tc)  # the probe write succeeds: healthy again
            assert code == 200 and health["database_error"] is None
            for _ in range(10):
                assert load.step() == 200
            load.check_durable(tc.app.state.engine)


@pytest.mark.skipif(not ROOT or shutil.which("chattr") is None, reason="chattr +i needs root")
def test_an_unwritable_file_is_503_and_healthz_names_it_until_writes_succeed(tmp_path):
    """File modes do not stop root; the immutable attribute does (``chattr +i``)."""
    db = tmp_path / "arena.db"
    with TestClient(create_app(_settings(f"sqlite:///{db}"))) as tc:
        load = Load(tc)
        for _ in range(20):
            assert load.step() == 200
        files = [str(p) for p in (db, Path(f"{db}-wal")) if p.exists()]
        res = subprocess.run(["chattr", "+i", *files], capture_output=True)
        if res.returncode != 0:
            pytest.skip(f"chattr +i does not work here: {res.stderr.decode().strip()}")
        try:
            status = load.until_refused()
            _storage_refusal(load, status)
            code, health = _health(tc)
            assert code == 503 and health["database"] == "unwritable"
            assert "disk I/O error" in health["database_error"]
        finally:
            subprocess.run(["chattr", "-i", *files], check=False)
        code, health = _health(tc)
        assert code == 200 and health["database"] == "ok"
        for _ in range(10):
            assert load.step() == 200
        load.check_durable(tc.app.state.engine)


def test_a_damaged_sqlite_file_is_refused_at_start_with_a_clear_message(tmp_path):
    db = tmp_path / "arena.db"
    with TestClient(create_app(_settings(f"sqlite:///{db}"))) as tc:
        load = Load(tc)
        for _ in range(60):
            assert load.step() == 200
    size = db.stat().st_size
    assert size > 8 * 4096
    with open(db, "r+b") as f:  # garbage over every page after the first two
        f.seek(2 * 4096)
        f.write(os.urandom(size - 2 * 4096))
    engine = store.make_engine(f"sqlite:///{db}")
    with pytest.raises(DamagedDatabase) as exc:
        store.migrate(engine)
    msg = str(exc.value)
    assert "damaged" in msg and "quick_check" in msg and ".recover" in msg
    with pytest.raises(DamagedDatabase), TestClient(create_app(_settings(f"sqlite:///{db}"))):
        pass  # the server does not start on it


def test_postgresql_stopped_and_restarted_mid_load():
    """Stopped: writes answer 503 ``storage_unavailable`` and /healthz 503; restarted on the
    same port: the pool reconnects, writes succeed, no acknowledged vote is lost."""
    from pgserver import PostgresServer

    pg = PostgresServer()
    pg.start()
    try:
        url = pg.create_database("f" + uuid.uuid4().hex[:12])
        with TestClient(create_app(_settings(url))) as tc:
            load = Load(tc)
            for _ in range(30):
                assert load.step() == 200
            opts = f"-p {pg.port} -k {pg.root} -c listen_addresses=127.0.0.1 -c max_connections=200"
            pg._run("pg_ctl", "-D", str(pg.data), "-m", "immediate", "-w", "stop")
            status = load.until_refused(50)
            _storage_refusal(load, status)
            code, health = _health(tc)
            assert code == 503 and health["database"] == "unreachable"
            pg._run(
                "pg_ctl", "-D", str(pg.data), "-o", opts, "-l", str(pg.root / "log"), "-w", "start"
            )
            deadline = time.time() + 30
            while _health(tc)[0] != 200 and time.time() < deadline:
                time.sleep(0.2)
            assert _health(tc)[0] == 200
            ok = sum(load.step() == 200 for _ in range(20))
            assert ok >= 19  # the first write after the restart may meet a dead connection
            load.check_durable(tc.app.state.engine)
    finally:
        pg.stop()


def test_postgresql_stopped_before_a_read_is_503_not_a_bug(postgres):
    """A request whose read meets a stopped database — a first visit to /arena (the page's
    secret is read from the database) — answers 503
    ``storage_unavailable`` (retry later; a load balancer's check takes the host out), not 500
    "internal error … a bug"; the same once the database is back: 200."""
    url = postgres.create_database("r" + uuid.uuid4().hex[:12])
    with TestClient(create_app(_settings(url))) as tc:
        postgres.halt()
        try:
            r = tc.get("/arena")
            assert r.status_code == 503, r.text
            assert r.json()["error"]["code"] == "storage_unavailable", r.text
            assert "cannot be reached" in r.json()["error"]["message"]
        finally:
            postgres.resume()
        deadline = time.time() + 30
        while tc.get("/arena").status_code != 200 and time.time() < deadline:
            time.sleep(0.2)
        assert tc.get("/arena").status_code == 200
