"""Processes seen through Linux's /proc, for the tests that check what a killed command leaves
behind (its workers, the live arena's fit and render processes)."""

from __future__ import annotations

from pathlib import Path

HAVE_PROC = Path("/proc/self/stat").exists()


def _stat(pid: int) -> list[str] | None:
    """The fields of /proc/PID/stat after the command name (state first, then the parent)."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return None


def alive(pid: int) -> bool:
    """The process exists and is not a zombie."""
    fields = _stat(pid)
    return fields is not None and fields[0] != "Z"


def children(pid: int) -> set[int]:
    """Living processes whose parent is ``pid``."""
    out = set()
    for stat in Path("/proc").glob("[0-9]*/stat"):
        fields = _stat(int(stat.parent.name))
        if fields is not None and int(fields[1]) == pid and fields[0] != "Z":
            out.add(int(stat.parent.name))
    return out
