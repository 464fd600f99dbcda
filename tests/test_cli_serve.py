"""``stablearena serve`` checks its port before it creates a database or prints an admin key."""

from __future__ import annotations

import socket


def test_a_busy_port_is_named_before_the_database_is_created(cli, tmp_path):
    db = tmp_path / "arena.db"
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen(1)
        port = busy.getsockname()[1]
        code, out, err = cli("serve", "--db", f"sqlite:///{db}", "--port", str(port))
    assert code == 2
    assert not db.exists() and list(tmp_path.iterdir()) == []
    assert "admin key" not in out and out == ""
    message = " ".join(err.split())
    assert f"port {port} on 127.0.0.1 is busy" in message
    assert "nothing was created" in message and "--port N" in message and "--port 0" in message
    assert len(err.strip().splitlines()) <= 3  # one message, no traceback


def test_a_host_that_cannot_be_bound_is_refused_before_the_database_too(cli, tmp_path):
    db = tmp_path / "arena.db"
    code, _, err = cli("serve", "--db", f"sqlite:///{db}", "--host", "192.0.2.1", "--port", "0")
    assert code == 2 and not db.exists()
    assert "cannot listen on 192.0.2.1:0" in " ".join(err.split())
