"""The judges' probe battles (stablearena.judging.probes; docs/guides/models-and-judges.md, "Judges
tested, not trusted"): recorded, read back as records, and the judges they flag."""

from __future__ import annotations

from typing import Any

from sqlalchemy import Connection, Engine, func, insert, select

from .tables import annotators, judge_probes, votes


def record_probe(
    conn: Connection,
    judge_id: int,
    battle_id: str,
    note: str | None,
    picked: list[str],
    calls: int,
    now: float,
) -> None:
    """Store one probe of judge ``judge_id`` (run in the writer's transaction)."""
    conn.execute(
        insert(judge_probes).values(
            judge_id=judge_id,
            battle_id=battle_id,
            note=note,
            picked=",".join(picked),
            calls=int(calls),
            at=now,
        )
    )


def probe_records(conn: Connection) -> list[dict[str, Any]]:
    """Every probe as a record of :func:`stablearena.judging.probes.susceptibility` (``judge``: the
    judge's annotator name), oldest first."""
    rows = conn.execute(
        select(
            annotators.c.name,
            judge_probes.c.note,
            judge_probes.c.picked,
            judge_probes.c.calls,
            judge_probes.c.battle_id,
            judge_probes.c.at,
        )
        .join(annotators, annotators.c.id == judge_probes.c.judge_id)
        .order_by(judge_probes.c.id)
    ).all()
    return [
        {
            "judge": r.name,
            "note": r.note,
            "picked": [p for p in r.picked.split(",") if p],
            "calls": int(r.calls),
            "battle_id": r.battle_id,
            "at": float(r.at),
        }
        for r in rows
    ]


def judge_status(engine: Engine, threshold: float, z: float) -> dict[str, Any]:
    """What ``GET /v1/admin/judges`` answers: per judge with a probe its probe row
    (:func:`stablearena.judging.probes.probe_report`: susceptibility ± se, status ``flagged`` or
    ``passed`` and why) and its votes, and the probes' share of the judges' calls (a vote of a
    judge is one battle judged in both orders: two calls; a probe two calls)."""
    from ...judging.probes import probe_report

    with engine.connect() as conn:
        recs = probe_records(conn)
        names = sorted({r["judge"] for r in recs})
        counted = conn.execute(
            select(annotators.c.name, func.count(votes.c.id))
            .join(votes, votes.c.annotator_id == annotators.c.id)
            .where(annotators.c.name.in_(names), votes.c.superseded.is_(False))
            .group_by(annotators.c.name)
        ).all()
    n_votes = {name: int(n) for name, n in counted}
    calls = 2 * sum(n_votes.values()) + sum(r["calls"] for r in recs)
    rep = probe_report(recs, names, calls, threshold, z)
    for row in rep["judges"]:
        row["votes"] = n_votes.get(row["judge"], 0)
        if row["flagged"]:
            row["reason"] = f"follows notes to the judge: {row['reason']}; its votes weigh nothing"
    return rep


def flagged_judges(conn: Connection, threshold: float, z: float) -> dict[str, str]:
    """The judges the probes flag (name → reason): their votes weigh nothing in any fit."""
    from ...judging.probes import susceptibility

    rows = susceptibility(probe_records(conn), threshold, z)
    return {
        j: f"follows notes to the judge: {r['reason']}" for j, r in rows.items() if r["flagged"]
    }
