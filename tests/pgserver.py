"""A throwaway PostgreSQL server for the live arena's tests and benchmarks (not part of the
package: the benchmarks under bench/ import it from here).

Starts Debian's (or any installed) PostgreSQL in a temporary directory, listening on a free TCP
port of 127.0.0.1 and on a Unix socket in that directory, and removes everything on
:meth:`PostgresServer.stop`. PostgreSQL refuses to run as root: when we are root the binaries
run as the ``postgres`` system user (``runuser -u postgres --``), with the directory owned by
it. Binaries are looked up on ``PATH`` and in ``/usr/lib/postgresql/*/bin`` (``.ci/run``
installs the ``postgresql`` package when it is missing).
"""

from __future__ import annotations

import glob
import os
import shutil
import socket
import subprocess
import tempfile
from pathlib import Path

__all__ = ["PostgresServer", "find_bin_dir", "free_port"]


def find_bin_dir() -> Path | None:
    """The directory holding ``initdb`` and ``pg_ctl``, newest version first, or ``None``."""
    on_path = shutil.which("pg_ctl")
    if on_path and shutil.which("initdb"):
        return Path(on_path).parent
    dirs = sorted(
        glob.glob("/usr/lib/postgresql/*/bin"),
        key=lambda d: [int(x) for x in Path(d).parent.name.split(".") if x.isdigit()],
        reverse=True,
    )
    for d in dirs:
        if (Path(d) / "initdb").exists() and (Path(d) / "pg_ctl").exists():
            return Path(d)
    return None


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class PostgresServer:
    """``with PostgresServer() as pg: url = pg.create_database("arena")``."""

    def __init__(
        self,
        *,
        fsync: bool = True,
        listen: str = "127.0.0.1",
        conf: Path | None = None,
        trust: str | None = None,
    ) -> None:
        bindir = find_bin_dir()
        if bindir is None:
            raise RuntimeError(
                "PostgreSQL is not installed (no initdb/pg_ctl on PATH or in "
                "/usr/lib/postgresql/*/bin); install Debian's 'postgresql' package."
            )
        self.bindir = bindir
        self.fsync = fsync
        #: ``listen_addresses`` (comma-separated; tests/hosts.py adds a bridge address)
        self.listen = listen
        #: a settings file included by postgresql.conf (the options given here win)
        self.conf = conf
        #: a network (CIDR) whose connections are trusted besides 127.0.0.1's
        self.trust = trust
        self._opts = ""
        self.root = Path(tempfile.mkdtemp(prefix="stablearena-pg-"))
        self.data = self.root / "data"
        self.port = 0
        self.as_root = os.geteuid() == 0
        self.user = "postgres" if self.as_root else os.environ.get("USER", "postgres")
        self._running = False

    def _run(self, *args: str, check: bool = True) -> subprocess.CompletedProcess:
        cmd = [str(self.bindir / args[0]), *args[1:]]
        if self.as_root:
            cmd = ["runuser", "-u", "postgres", "--", *cmd]
        return subprocess.run(cmd, check=check, capture_output=True, text=True, cwd=self.root)

    def start(self) -> PostgresServer:
        if self.as_root:
            shutil.chown(self.root, "postgres", "postgres")
        self._run(
            "initdb",
            "-D",
            str(self.data),
            "-A",
            "trust",
            "-U",
            self.user,
            "-E",
            "UTF8",
            "--no-sync",
        )
        if self.conf is not None:
            own = self.root / "extra.conf"
            shutil.copy(self.conf, own)
            if self.as_root:
                shutil.chown(own, "postgres", "postgres")
            with (self.data / "postgresql.conf").open("a") as f:
                f.write(f"\ninclude '{own}'\n")
        if self.trust:
            with (self.data / "pg_hba.conf").open("a") as f:
                f.write(f"\nhost all all {self.trust} trust\n")
        for _attempt in range(5):
            self.port = free_port()
            opts = (
                f"-p {self.port} -k {self.root} -c listen_addresses='{self.listen}' "
                f"-c fsync={'on' if self.fsync else 'off'} -c max_connections=200 "
                "-c shared_buffers=64MB"
            )
            res = self._run(
                "pg_ctl",
                "-D",
                str(self.data),
                "-o",
                opts,
                "-l",
                str(self.root / "log"),
                "-w",
                "-t",
                "60",
                "start",
                check=False,
            )
            if res.returncode == 0:
                self._running, self._opts = True, opts
                return self
        log = (self.root / "log").read_text() if (self.root / "log").exists() else ""
        raise RuntimeError(f"PostgreSQL did not start: {res.stderr}\n{log[-2000:]}")

    def halt(self) -> None:
        """Stop the server (``-m fast``: sessions are closed) and keep its data, for
        :meth:`resume` (a restart of the database under load)."""
        self._run("pg_ctl", "-D", str(self.data), "-m", "fast", "-w", "stop")
        self._running = False

    def resume(self) -> None:
        """Start the server stopped by :meth:`halt` again, on the same port."""
        log = str(self.root / "log")
        self._run("pg_ctl", "-D", str(self.data), "-o", self._opts, "-l", log, "-w", "start")
        self._running = True

    def url(self, database: str = "postgres") -> str:
        return f"postgresql+psycopg://{self.user}@127.0.0.1:{self.port}/{database}"

    def create_database(self, name: str, template: str | None = None) -> str:
        """A new database (a copy of the database ``template`` when given, which must have no
        open connection); returns its URL."""
        import psycopg

        with psycopg.connect(
            f"host=127.0.0.1 port={self.port} user={self.user} dbname=postgres", autocommit=True
        ) as conn:
            copy = f' TEMPLATE "{template}"' if template else ""
            conn.execute(f'CREATE DATABASE "{name}"{copy}')
        return self.url(name)

    def stop(self) -> None:
        if self._running:
            self._run("pg_ctl", "-D", str(self.data), "-m", "immediate", "-w", "stop", check=False)
            self._running = False
        shutil.rmtree(self.root, ignore_errors=True)

    def __enter__(self) -> PostgresServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
