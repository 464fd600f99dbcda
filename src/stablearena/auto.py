"""The automatic arena: models answer a prompt set, LLM judges vote, battles chosen by
information.

Each battle is a pair of models on one prompt, judged by one judge in both orders
(:mod:`stablearena.judges`). The next battles come from a design:

* a pair selector of :mod:`stablearena.selection` (default
  :data:`~stablearena.selection.DEFAULT_STRATEGY`, the information design;
  docs/methods/selection.md), its information kept at the m-ELO scores refitted after every
  batch, the prompt drawn at random among those the pair has not yet been judged on;
* ``"round-robin"``: every pair on every prompt, prompt after prompt;
* ``"baseline"``: Arena-Hard-Auto's design, every model against one fixed baseline model on
  every prompt.

Each model's answer to a prompt is generated once and reused. The run stops at the budget
(judge calls), when the precision target is met (the top-k models' rank intervals no longer
overlap; docs/methods/uncertainty.md), or when no battle is left. Everything is written to a
:class:`Journal` as it happens, so a killed run resumes where it stopped: answers are reused
and finished judgements are never repeated or lost.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import os
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

import numpy as np

from .battles import Battles, Outcome
from .endpoints.client import Answer, Failure
from .endpoints.config import Price
from .errors import InputError
from .judges import JudgeClient, Judgement

__all__ = [
    "Prompt",
    "read_prompts",
    "Journal",
    "MemoryJournal",
    "JsonlJournal",
    "AutoConfig",
    "AutoResult",
    "AutoArena",
    "top_k_separated",
    "FIXED_DESIGNS",
]

#: Designs that do not read the information: every pair on every prompt; every model against
#: one baseline model.
FIXED_DESIGNS = ("round-robin", "baseline")

_ID_COLUMNS = ("id", "prompt_id", "question_id", "uid")
_TEXT_COLUMNS = ("prompt", "question", "text", "turns")


@dataclass(frozen=True)
class Prompt:
    """One prompt of the set."""

    id: str
    text: str


def _prompt_text(value: Any) -> str:
    if isinstance(value, (list, tuple)) or hasattr(value, "tolist"):
        items = list(value.tolist() if hasattr(value, "tolist") else value)
        if items and isinstance(items[0], dict):  # Arena-Hard v0.1: turns = [{"content": …}]
            return str(items[0].get("content", ""))
    return "" if value is None else str(value)


def read_prompts(path: str | Path) -> list[Prompt]:
    """Prompts from JSONL, CSV or Parquet: an id column (``id``, ``prompt_id``,
    ``question_id`` or ``uid``) and a text column (``prompt``, ``question``, ``text``, or
    Arena-Hard-Auto's ``turns``). Ids must be unique and texts non-empty."""
    import pandas as pd

    from .io import detect_format

    path = Path(path)
    fmt = detect_format(path)
    try:
        if fmt == "jsonl":
            frame = pd.read_json(path, lines=True, dtype=False)
        elif fmt == "csv":
            frame = pd.read_csv(path, dtype=str, keep_default_na=False)
        elif fmt == "parquet":
            frame = pd.read_parquet(path)
        else:
            raise InputError(f"{path}: prompts are read from JSONL, CSV or Parquet, not {fmt}")
    except (OSError, ValueError) as exc:
        if isinstance(exc, InputError):
            raise
        raise InputError(f"{path}: cannot read the prompts ({exc})") from exc
    id_col = next((c for c in _ID_COLUMNS if c in frame.columns), None)
    text_col = next((c for c in _TEXT_COLUMNS if c in frame.columns), None)
    if id_col is None or text_col is None:
        raise InputError(
            f"{path}: needs an id column ({', '.join(_ID_COLUMNS)}) and a prompt column "
            f"({', '.join(_TEXT_COLUMNS)}); it has {list(frame.columns)}"
        )
    out = [
        Prompt(str(i), _prompt_text(t)) for i, t in zip(frame[id_col], frame[text_col], strict=True)
    ]
    ids = [p.id for p in out]
    if len(set(ids)) != len(ids):
        dup = sorted({i for i in ids if ids.count(i) > 1})[:5]
        raise InputError(f"{path}: prompt ids must be unique; repeated: {dup}")
    empty = [p.id for p in out if not p.text.strip()]
    if empty:
        raise InputError(f"{path}: empty prompt text for id(s) {empty[:5]}")
    if not out:
        raise InputError(f"{path}: no prompts")
    return out


# ------------------------------------------------------------------------------------ journal
class Journal(Protocol):
    """Where an automatic arena keeps what it did (answers, judgements), so that a killed run
    resumes. An append-only log: :meth:`records` replays it, :meth:`append` adds one record
    durably before returning. Backends: :class:`JsonlJournal` (a file),
    :class:`MemoryJournal`, and :class:`stablearena.service.journal.DatabaseJournal` (the live
    arena's database, shared with ``serve``). Optional attributes ``label`` (what the journal
    is, for messages) and ``hint`` (what to do when it belongs to another run)."""

    def records(self) -> list[dict[str, Any]]:
        """Every record written so far, oldest first."""
        ...

    def append(self, record: dict[str, Any]) -> None:
        """Write one record durably."""
        ...

    def close(self) -> None:
        """Release the journal."""
        ...


class MemoryJournal:
    """A journal in memory (experiments; nothing survives the process)."""

    def __init__(self) -> None:
        self._records: list[dict[str, Any]] = []

    def records(self) -> list[dict[str, Any]]:
        return list(self._records)

    def append(self, record: dict[str, Any]) -> None:
        self._records.append(record)

    def close(self) -> None:
        pass


class JsonlJournal:
    """An append-only JSON Lines file, one record a line, flushed and fsynced after each.

    A last line cut short by a kill (no newline, or not JSON) is dropped on opening; any other
    bad line is an error."""

    def __init__(self, path: str | Path):
        self.path = Path(path)
        self.label = f"the journal {self.path}"
        self.hint = "give another journal file"
        self._records: list[dict[str, Any]] = []
        raw = self.path.read_bytes() if self.path.exists() else b""
        body, newline, tail = raw.rpartition(b"\n")  # tail: what follows the last newline
        for k, line in enumerate(body.split(b"\n") if newline else [], 1):
            if not line.strip():
                continue
            try:
                self._records.append(json.loads(line))
            except ValueError:
                raise InputError(
                    f"{self.path}, line {k}: not a journal record; the journal is damaged "
                    "(move it aside to start afresh)"
                ) from None
        keep = len(body) + len(newline)
        try:
            whole = json.loads(tail) if tail.strip() else None
        except ValueError:
            whole = None  # a line cut short by a kill: dropped
        self._fh = open(self.path, "ab")  # noqa: SIM115 - kept open for appends
        self._fh.truncate(keep)
        self._fh.seek(keep)
        if whole is not None:  # a whole record whose newline was not written yet
            self.append(whole)

    def records(self) -> list[dict[str, Any]]:
        return list(self._records)

    def append(self, record: dict[str, Any]) -> None:
        line = json.dumps(record, separators=(",", ":"), allow_nan=False).encode() + b"\n"
        self._fh.write(line)
        self._fh.flush()
        os.fsync(self._fh.fileno())
        self._records.append(record)

    def close(self) -> None:
        self._fh.close()


# ------------------------------------------------------------------------------------- config
@dataclass(frozen=True)
class AutoConfig:
    """How an automatic arena runs.

    ``budget``: judge calls (a battle costs two, one per order); ``None``: until the precision
    target is met or no battle is left. ``design``: a selector name, ``"round-robin"`` or
    ``"baseline"`` (then ``baseline`` names the baseline model). ``parallel``: battles in
    flight at once (the selector is asked for that many distinct pairs per batch).
    ``precision_top``: stop when the rank intervals (``level``, Fisher, m-ELO) of the top k
    models no longer overlap each other or the rest; checked every ``check_every`` judgements.
    """

    budget: int | None = None
    design: str | None = None
    baseline: str | None = None
    seed: int = 0
    parallel: int = 8
    precision_top: int | None = None
    level: float = 0.95
    check_every: int = 20

    def __post_init__(self) -> None:
        if self.budget is not None and self.budget < 2:
            raise InputError("the budget is in judge calls and a battle takes two: give >= 2")
        if self.parallel < 1 or self.check_every < 1:
            raise InputError("parallel and check_every must be >= 1")
        if self.precision_top is not None and self.precision_top < 1:
            raise InputError("precision_top must be >= 1")


def top_k_separated(rank: np.ndarray, rank_low: np.ndarray, rank_high: np.ndarray, k: int) -> bool:
    """Whether the top ``k`` models' rank intervals overlap neither each other nor the rest's:
    with models sorted by rank, ``rank_high`` of the r-th is below ``rank_low`` of the
    (r+1)-th for r = 1 … k."""
    order = np.argsort(rank, kind="stable")
    k = min(k, len(order) - 1)
    return all(rank_high[order[r]] < rank_low[order[r + 1]] for r in range(k))


@dataclass
class AutoResult:
    """What an automatic arena did: the judgements (successful and failed), the judge calls,
    tokens and cost, and why it stopped."""

    models: tuple[str, ...]
    judges: tuple[str, ...]
    judgements: list[dict[str, Any]] = field(default_factory=list)
    answers: int = 0
    answer_failures: int = 0
    calls: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cost: float = 0.0
    stop_reason: str = ""
    resumed: int = 0

    def battles(self) -> Battles:
        """The successful judgements as battles: model_a = x (shown first in the first order),
        the judge as annotator, the prompt id as prompt."""
        ok = [r for r in self.judgements if r.get("outcome") is not None]
        index = {m: k for k, m in enumerate(self.models)}
        code = {"x": Outcome.A, "y": Outcome.B, "tie": Outcome.TIE}
        return Battles.from_arrays(
            np.array([index[r["x"]] for r in ok], dtype=np.int32),
            np.array([index[r["y"]] for r in ok], dtype=np.int32),
            np.array([int(code[r["outcome"]]) for r in ok], dtype=np.int8),
            models=self.models,
            annotator=[r["judge"] for r in ok] if ok else None,
            prompt=[r["prompt_id"] for r in ok] if ok else None,
            source="auto",
        )

    @property
    def failures(self) -> list[dict[str, Any]]:
        """The judgements that failed (a model gave no answer, a judge call failed, or a
        verdict was unparseable)."""
        return [r for r in self.judgements if r.get("outcome") is None]


def _hash(*key: object) -> int:
    return int.from_bytes(hashlib.blake2b(repr(key).encode(), digest_size=8).digest(), "little")


# -------------------------------------------------------------------------------------- arena
class AutoArena:
    """An automatic arena over ``prompts`` with answering ``models`` and ``judges``.

    ``models``: clients with ``name`` and ``async answer(prompt, prompt_id)`` returning an
    :class:`Answer` or :class:`Failure` (:class:`~stablearena.endpoints.EndpointClient`,
    :class:`~stablearena.endpoints.OfflineClient`, or the in-process
    :class:`~stablearena.endpoints.demo.LocalDemoClient`); ``judges``:
    :class:`~stablearena.judges.JudgeClient`. ``prices``: per model or judge name, for the cost.
    ``on_progress`` is called with the :class:`AutoResult` after every judgement.
    """

    def __init__(
        self,
        models: Sequence[Any],
        judges: Sequence[JudgeClient],
        prompts: Sequence[Prompt],
        config: AutoConfig | None = None,
        *,
        journal: Journal | None = None,
        prices: dict[str, Price] | None = None,
        on_progress: Callable[[AutoResult], None] | None = None,
    ):
        self.models = list(models)
        self.judges = list(judges)
        self.prompts = list(prompts)
        self.config = config or AutoConfig()
        self.journal = journal if journal is not None else MemoryJournal()
        self.prices = dict(prices or {})
        self.on_progress = on_progress
        names = [m.name for m in self.models]
        if len(names) < 2 or len(set(names)) != len(names):
            raise InputError("an arena needs at least two models with distinct names")
        if not self.judges:
            raise InputError("an automatic arena needs at least one judge")
        if not self.prompts:
            raise InputError("an automatic arena needs prompts")
        self.names = tuple(names)
        self.index = {n: k for k, n in enumerate(names)}
        design = self.config.design
        if design == "baseline" and self.config.baseline not in self.index:
            raise InputError(f"the baseline design needs baseline = one of {list(names)}")
        if design is not None and design not in FIXED_DESIGNS:
            from .selection import get_selector

            get_selector(design)  # an unknown name is an error now, not after the answers
        self.result = AutoResult(self.names, tuple(j.name for j in self.judges))
        self._cache: dict[tuple[str, str], str] = {}
        self._tasks: dict[tuple[str, str], asyncio.Task[Any]] = {}
        self._done: set[tuple[int, int, str]] = set()
        self._prompt_by_id = {p.id: p for p in self.prompts}
        self._rng = np.random.default_rng(self.config.seed)

    # ---------------------------------------------------------------- bookkeeping
    def _key(self, x: str, y: str, pid: str) -> tuple[int, int, str]:
        i, j = self.index[x], self.index[y]
        return (min(i, j), max(i, j), pid)

    def _count(self, name: str, prompt_tokens: int, completion_tokens: int) -> None:
        r = self.result
        r.prompt_tokens += prompt_tokens
        r.completion_tokens += completion_tokens
        price = self.prices.get(name)
        if price is not None:
            r.cost += price.cost(prompt_tokens, completion_tokens)

    def _replay(self) -> None:
        records = self.journal.records()
        head = next((r for r in records if r.get("type") == "run"), None)
        if head is None:
            self.journal.append(
                {
                    "type": "run",
                    "models": list(self.names),
                    "judges": list(self.result.judges),
                    "design": self.config.design,
                    "seed": self.config.seed,
                }
            )
            return
        if head["models"] != list(self.names) or head["judges"] != list(self.result.judges):
            where = getattr(self.journal, "label", "the journal")
            hint = getattr(self.journal, "hint", "give another journal file")
            raise InputError(
                f"{where} belongs to another run (models {head['models']}, judges "
                f"{head['judges']}; this run: models {list(self.names)}, judges "
                f"{list(self.result.judges)}); {hint}"
            )
        for rec in records:
            if rec.get("type") == "answer":
                self._count(rec["model"], rec["prompt_tokens"], rec["completion_tokens"])
                if rec["ok"]:
                    self._cache[(rec["model"], rec["prompt_id"])] = rec["text"]
                    self.result.answers += 1
                else:
                    self.result.answer_failures += 1
            elif rec.get("type") == "judgement":
                self.result.calls += rec["calls"]
                self._count(rec["judge"], rec["prompt_tokens"], rec["completion_tokens"])
                if rec.get("stage") != "answer":
                    self._done.add(self._key(rec["x"], rec["y"], rec["prompt_id"]))
                self.result.judgements.append(rec)
        self.result.resumed = len(self.result.judgements)

    # ---------------------------------------------------------------- answers and judgements
    async def _answer(self, model: Any, prompt: Prompt) -> str | Failure:
        key = (model.name, prompt.id)
        if key in self._cache:
            return self._cache[key]
        task = self._tasks.get(key)
        if task is None:
            task = asyncio.ensure_future(model.answer(prompt.text, prompt.id))
            self._tasks[key] = task
        got = await task
        if self._tasks.get(key) is task:
            del self._tasks[key]
            rec: dict[str, Any] = {
                "type": "answer",
                "model": model.name,
                "prompt_id": prompt.id,
                "ok": got.ok,
            }
            if isinstance(got, Answer):
                rec.update(
                    text=got.text,
                    finish_reason=got.finish_reason,
                    ttft=got.ttft,
                    total_time=got.total_time,
                    prompt_tokens=got.prompt_tokens,
                    completion_tokens=got.completion_tokens,
                    usage_source=got.usage_source,
                    attempts=got.attempts,
                )
                self._cache[key] = got.text
                self.result.answers += 1
            else:
                rec.update(
                    reason=got.reason,
                    detail=got.detail,
                    attempts=got.attempts,
                    prompt_tokens=0,
                    completion_tokens=0,
                )
                self.result.answer_failures += 1
            self.journal.append(rec)
            self._count(model.name, rec["prompt_tokens"], rec["completion_tokens"])
        if isinstance(got, Answer):
            return got.text
        return got

    async def _battle(self, x: int, y: int, prompt: Prompt, judge: JudgeClient) -> None:
        mx, my = self.models[x], self.models[y]
        ax, ay = await asyncio.gather(self._answer(mx, prompt), self._answer(my, prompt))
        rec: dict[str, Any] = {
            "type": "judgement",
            "judge": judge.name,
            "x": mx.name,
            "y": my.name,
            "prompt_id": prompt.id,
        }
        failed = next((a for a in (ax, ay) if isinstance(a, Failure)), None)
        if failed is not None:
            rec.update(
                outcome=None,
                stage="answer",
                reason=failed.reason,
                detail=f"{failed.model}: {failed.detail}",
                calls=0,
                prompt_tokens=0,
                completion_tokens=0,
                verdicts=[],
            )
        else:
            assert isinstance(ax, str) and isinstance(ay, str)
            j: Judgement = await judge.judge_pair(prompt.text, prompt.id, mx.name, ax, my.name, ay)
            calls = j.calls
            rec.update(
                outcome=j.outcome,
                consistent=j.consistent,
                calls=2,
                prompt_tokens=sum(c.prompt_tokens for c in calls),
                completion_tokens=sum(c.completion_tokens for c in calls),
                verdicts=[
                    {"order": v.order, "winner": v.winner, "reasoning": v.reasoning}
                    for v in j.verdicts
                ],
            )
            if j.failure is not None:
                rec.update(stage="judge", reason=j.failure.reason, detail=j.failure.detail)
        self.journal.append(rec)
        r = self.result
        r.calls += rec["calls"]
        self._count(judge.name, rec["prompt_tokens"], rec["completion_tokens"])
        if rec.get("stage") != "answer":
            self._done.add(self._key(mx.name, my.name, prompt.id))
        r.judgements.append(rec)
        self._n_ok += rec["outcome"] is not None
        if self.on_progress is not None:
            self.on_progress(r)

    # ---------------------------------------------------------------- designs
    def _judge_for(self, i: int, j: int, pid: str) -> JudgeClient:
        return self.judges[_hash(self.config.seed, "judge", i, j, pid) % len(self.judges)]

    def _oriented(self, i: int, j: int, pid: str) -> tuple[int, int]:
        return (i, j) if _hash(self.config.seed, "order", i, j, pid) % 2 == 0 else (j, i)

    def _fixed_order(self) -> Iterable[tuple[int, int, str]]:
        m = len(self.names)
        order = self._rng.permutation(len(self.prompts))
        if self.config.design == "baseline":
            b = self.index[str(self.config.baseline)]
            pairs = [(min(k, b), max(k, b)) for k in range(m) if k != b]
        else:
            pairs = [(i, j) for i in range(m) for j in range(i + 1, m)]
        for p in order:
            pid = self.prompts[p].id
            for q in self._rng.permutation(len(pairs)):
                yield (*pairs[q], pid)

    def _prompt_for(self, i: int, j: int, pending: set[tuple[int, int, str]]) -> str | None:
        queue = self._queues.setdefault((i, j), list(self._rng.permutation(len(self.prompts))))
        while queue:
            pid = self.prompts[queue[-1]].id
            if (i, j, pid) in self._done or (i, j, pid) in pending:
                queue.pop()
                continue
            return pid
        return None

    def _unavailable(self) -> list[int]:
        return [
            k
            for k, m in enumerate(self.models)
            if getattr(getattr(m, "breaker", None), "under_outage", False)
        ]

    def _select(self, k: int, tracker: Any, selector: Any) -> list[tuple[int, int, str]]:
        """Up to ``k`` distinct pairs from the selector, each with a prompt the pair has not
        been judged on (a pair out of prompts is blocked and the selector asked again)."""
        out: list[tuple[int, int, str]] = []
        pending: set[tuple[int, int, str]] = set()
        down = self._unavailable()
        while len(out) < k:
            try:
                sel = selector.select(
                    tracker,
                    k - len(out),
                    rng=self._rng,
                    distinct=True,
                    exclude_models=down,
                    exclude_pairs=[(i, j) for i, j, _ in out],
                )
            except InputError:  # every pair blocked or excluded
                break
            ran_out = False
            for i, j in sel.pairs:
                i, j = int(i), int(j)
                pid = self._prompt_for(i, j, pending)
                if pid is None:
                    tracker.block_pair(i, j)
                    ran_out = True
                    continue
                pending.add((i, j, pid))
                out.append((i, j, pid))
            if not ran_out:
                break
        return out

    def _precise(self, battles: Battles) -> bool:
        k = self.config.precision_top
        if k is None or len(battles) == 0:
            return False
        import warnings

        from .errors import StableArenaError, StableArenaWarning
        from .raters.base import get_rater
        from .uncertainty import intervals

        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", StableArenaWarning)
                fitted = get_rater("m-elo").fit(battles)
                iv = intervals(fitted, "fisher", level=self.config.level, seed=self.config.seed)
        except StableArenaError:
            return False
        return top_k_separated(iv.rank, iv.rank_low, iv.rank_high, k)

    # ---------------------------------------------------------------- the loop
    async def run_async(self) -> AutoResult:
        """Run until the budget, the precision target, or the end of the battles."""
        from .arena import Refitter
        from .selection import DEFAULT_STRATEGY, InformationTracker, get_selector

        self._replay()
        cfg, r = self.config, self.result
        design = cfg.design or DEFAULT_STRATEGY
        self._queues: dict[tuple[int, int], list[int]] = {}
        fixed = iter(self._fixed_order()) if design in FIXED_DESIGNS else None
        selector = None if fixed is not None else get_selector(design)
        refitter = Refitter(self.names)
        battles = r.battles()
        if len(battles):
            refitter.add(battles.model_a, battles.model_b, battles.outcome)
        tracker = None
        if selector is not None:
            estimate = selector.estimate or "plug-in"
            tracker = InformationTracker(self.names, estimate=estimate)
            if len(battles):
                tracker.refresh(refitter.fit(), counts=refitter.counts())
        self._n_ok = last_check = len(r.judgements) - len(r.failures)
        idle = 0
        try:
            while True:
                if cfg.budget is not None and r.calls + 2 > cfg.budget:
                    r.stop_reason = "budget"
                    break
                k = cfg.parallel
                if cfg.budget is not None:
                    k = min(k, (cfg.budget - r.calls) // 2)
                if fixed is not None:
                    batch: list[tuple[int, int, str]] = []
                    down = set(self._unavailable())
                    for i, j, pid in fixed:
                        if (i, j, pid) in self._done or i in down or j in down:
                            continue
                        batch.append((i, j, pid))
                        if len(batch) >= k:
                            break
                else:
                    batch = self._select(k, tracker, selector)
                if not batch:
                    r.stop_reason = "exhausted"
                    break
                before = self._n_ok
                calls_before = r.calls
                await asyncio.gather(
                    *(
                        self._battle(
                            *self._oriented(i, j, pid),
                            self._prompt_by_id[pid],
                            self._judge_for(i, j, pid),
                        )
                        for i, j, pid in batch
                    )
                )
                n_ok = self._n_ok
                idle = idle + 1 if n_ok == before and r.calls == calls_before else 0
                if idle >= 3:
                    r.stop_reason = "failing"
                    break
                if tracker is not None and n_ok > before:
                    battles = r.battles()
                    refitter = Refitter(self.names)
                    refitter.add(battles.model_a, battles.model_b, battles.outcome)
                    tracker.refresh(refitter.fit(), counts=refitter.counts())
                if n_ok - last_check >= cfg.check_every:
                    last_check = n_ok
                    if self._precise(r.battles()):
                        r.stop_reason = "precision"
                        break
        finally:
            for m in [*self.models, *self.judges]:
                await m.aclose()
        if not r.stop_reason:
            r.stop_reason = "stopped"
        return r

    def run(self) -> AutoResult:
        """:meth:`run_async` in a new event loop."""
        return asyncio.run(self.run_async())


def fit_leaderboard(result: AutoResult, rater: str = "am-elo") -> tuple[Any, list[str]]:
    """The fitted leaderboard of an automatic arena's judgements (models without a
    successful judgement left out), and notes: am-ELO with the
    judges as annotators (their abilities estimated; docs/methods/annotators.md), or m-ELO on
    all judgements alike when ``rater="m-elo"`` — or when am-ELO finds no solution (then a note
    says why)."""
    import warnings

    from .errors import StableArenaError, StableArenaWarning
    from .raters.base import get_rater

    battles = result.battles().compact()
    if len(battles) == 0:
        raise InputError("no judgement succeeded, so there is no leaderboard (see the failures)")
    notes: list[str] = []
    missing = [m for m in result.models if m not in battles.models]
    if missing:
        notes.append(f"left out, no successful judgement: {', '.join(missing)}")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", StableArenaWarning)
        if rater == "am-elo":
            try:
                return get_rater("am-elo").fit(battles), notes
            except StableArenaError as exc:
                notes.append(f"am-ELO failed ({exc}); the leaderboard is m-ELO, judges alike")
        fitted = get_rater("m-elo").fit(battles)
    notes += [str(w.message) for w in caught]
    return fitted, notes
