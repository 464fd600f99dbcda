"""The automatic arena's journal in the live arena's database (``stablearena auto --db``;
docs/guides/models-and-judges.md).

:class:`DatabaseJournal` is a :class:`stablearena.judging.auto_arena.Journal`: the records of a run are kept
in the table ``auto_journal``, so a killed run given the same database resumes (answers reused,
judgements never repeated), and each judgement is stored in the same transaction as the live
arena stores battles and votes (:mod:`.store.auto`): ``stablearena serve --db`` on that
database shows the models, the judges as annotators and every judgement as one vote (its
verdict of both orders) on its leaderboard, export and dashboard. Writes are transactions of
their own (SQLite: ``BEGIN IMMEDIATE`` with a 30 s busy timeout), so a ``serve`` using the
database at the same time waits for them, and they for it; nothing is written outside a
transaction.
"""

from __future__ import annotations

import json
import time
from collections.abc import Sequence
from typing import Any

import sqlalchemy as sa

from ..data.style_features import style_counts
from ..errors import InputError
from ..judging.auto_arena import Prompt
from ..judging.endpoints.config import ModelEndpoint
from . import store
from .holder import endpoint_json

__all__ = ["DatabaseJournal"]


def _redacted(url: str) -> str:
    return sa.engine.make_url(url).render_as_string(hide_password=True)


class DatabaseJournal:
    """A journal in the database at ``url`` (created and migrated when needed), for an
    automatic arena over ``prompts`` with the configured ``models`` (:class:`ModelEndpoint`,
    :class:`~stablearena.judging.endpoints.OfflineModel`, or plain names). With ``endpoints``, a model
    with an endpoint is stored with it, as ``serve``'s ``[[models]]`` (so ``/arena`` can call
    it); otherwise models are stored as names. ``admin_key``: the new database's admin key
    (``None`` when the database existed)."""

    def __init__(
        self,
        url: str,
        prompts: Sequence[Prompt],
        models: Sequence[Any],
        *,
        endpoints: bool = True,
    ) -> None:
        self.label = f"--db {_redacted(url)}"
        self.hint = "give a new database (another --db) or this run's --models and --judges"
        self.engine = store.make_engine(url)
        try:
            self.admin_key = store.migrate(self.engine)
        except sa.exc.SQLAlchemyError as exc:
            self.engine.dispose()
            why = getattr(exc, "orig", None) or exc
            first = (str(why).strip().splitlines() or [""])[0]
            raise InputError(
                f"{self.label}: cannot open the database ({type(why).__name__}: {first}); "
                "check the URL, that the server runs and the file is an arena database"
            ) from None
        self.prompts = {p.id: p.text for p in prompts}
        self.entries: list[tuple[str, str | None]] = []
        self.params: dict[str, str] = {}
        for m in models:
            name = m if isinstance(m, str) else m.name
            ep = m if isinstance(m, ModelEndpoint) else None
            self.entries.append((name, endpoint_json(ep) if ep is not None and endpoints else None))
            p = {**ep.params, "system_prompt": ep.system_prompt} if ep is not None else {}
            self.params[name] = json.dumps(p, sort_keys=True)
        self.judges: list[str] = []
        self.answers: dict[tuple[str, str], dict[str, Any]] = {}
        self.model_ids: dict[str, int] = {}
        self.judge_ids: dict[str, int] = {}

    # ------------------------------------------------------------------ Journal
    def records(self) -> list[dict[str, Any]]:
        """Every record written so far, oldest first."""
        out = store.auto.journal_records(self.engine)
        for rec in out:
            if rec.get("type") == "run" and not self.judges:
                self.judges = list(rec.get("judges", []))
            elif rec.get("type") == "answer":
                self.answers[(rec["model"], rec["prompt_id"])] = rec
        return out

    def append(self, record: dict[str, Any]) -> None:
        """Write one record, with what it stores for ``serve``, in one transaction."""
        kind = record.get("type")
        if kind == "run":
            self.judges = list(record["judges"])
        if kind == "answer":
            self.answers[(record["model"], record["prompt_id"])] = record
        now = time.time()
        conn = store.write_conn(self.engine)
        try:
            with conn.begin():
                battle_id = None
                if kind == "run" or not self.model_ids:
                    self._register(conn, now)
                if kind == "judgement":
                    battle_id = self._judged(conn, record, now)
                if kind == "probe":  # so that serve's fits leave a flagged judge out too
                    store.probes.record_probe(
                        conn,
                        judge_id=self.judge_ids[record["judge"]],
                        battle_id=str(record["prompt_id"])[:32],
                        note=record.get("note"),
                        picked=list(record["picked"]),
                        calls=int(record["calls"]),
                        now=now,
                    )
                store.auto.append_record(conn, record, now, battle_id)
        finally:
            conn.info.pop("immediate", None)
            conn.close()

    def close(self) -> None:
        """Release the database."""
        self.engine.dispose()

    # ------------------------------------------------------------------ storing
    def _register(self, conn: Any, now: float) -> None:
        store.auto.register(conn, self.entries, self.judges, now)
        self.model_ids = store.auto.name_ids(conn, [n for n, _ in self.entries])
        self.judge_ids = {j: store.held.judge_annotator(conn, j, now) for j in self.judges}

    def _answer_row(self, name: str, prompt_id: str) -> dict[str, Any] | None:
        rec = self.answers.get((name, prompt_id))
        if rec is None:
            return None
        row: dict[str, Any] = {"model_id": self.model_ids[name], "params": self.params[name]}
        if rec["ok"]:
            row.update({k: rec.get(k) for k in (*store.held.ANSWER_FIELDS, "attempts")})
            tokens, headers, lists, bold = style_counts(rec["text"])
            row.update(
                style_tokens=tokens, style_headers=headers, style_lists=lists, style_bold=bold
            )
        else:
            row.update(
                failure=rec["reason"], failure_detail=rec.get("detail"), attempts=rec["attempts"]
            )
        return row

    def _judged(self, conn: Any, rec: dict[str, Any], now: float) -> str:
        x, y, pid = rec["x"], rec["y"], rec["prompt_id"]
        answers = {}
        for name in (x, y):
            row = self._answer_row(name, pid)
            if row is not None:
                answers[self.model_ids[name]] = row
        failure = None
        if rec.get("outcome") is None:
            who = "answer" if rec.get("stage") == "answer" else f"judge {rec['judge']}"
            failure = f"{who}: {rec.get('reason')} ({rec.get('detail')})"
        return store.auto.store_judged(
            conn,
            judge_id=self.judge_ids[rec["judge"]],
            x=self.model_ids[x],
            y=self.model_ids[y],
            outcome=rec.get("outcome"),
            failure=failure,
            held={
                "prompt_id": pid,
                "prompt": self.prompts.get(pid, ""),
                "category": None,
                "judge_reasoning": json.dumps(rec["verdicts"]) if rec.get("verdicts") else None,
            },
            answers=answers,
            now=now,
        )
