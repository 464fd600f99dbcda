"""The service's threads carry their names to the operating system (``top -H``, /proc), so that
a host's CPU can be told apart by thread (bench/bench_hosts.py)."""

from __future__ import annotations

import sys
import threading
import time
from pathlib import Path

import pytest

from stablearena._threads import name_this_thread


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="prctl and /proc: Linux")
def test_a_named_thread_shows_its_name_in_proc() -> None:
    seen: list[str] = []
    ready, done = threading.Event(), threading.Event()

    def body() -> None:
        name_this_thread("arena-refitter-and-more")  # 15 bytes kept
        seen.append(Path(f"/proc/self/task/{threading.get_native_id()}/comm").read_text())
        ready.set()
        done.wait(5)

    t = threading.Thread(target=body)
    t.start()
    ready.wait(5)
    done.set()
    t.join()
    assert seen == ["arena-refitter-\n"]


def test_the_service_threads_are_named(tmp_path: Path) -> None:
    """The vote writer names its thread when it starts."""
    if not sys.platform.startswith("linux"):
        pytest.skip("prctl and /proc: Linux")
    from stablearena.service.store.engine import make_engine
    from stablearena.service.store.writer import Writer

    engine = make_engine(f"sqlite:///{tmp_path / 'w.db'}")
    w = Writer(engine)
    w.start()
    try:
        deadline = time.monotonic() + 5
        while time.monotonic() < deadline:
            names = {p.read_text().strip() for p in Path("/proc/self/task").glob("*/comm")}
            if "arena-writer" in names:
                break
            time.sleep(0.01)
        assert "arena-writer" in names
    finally:
        w.stop()
        engine.dispose()
