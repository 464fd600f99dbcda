"""The automatic arena: models answer a prompt set, LLM judges vote, battles chosen by
information.

Each battle is a pair of models on one prompt, judged by one judge in both orders
(:mod:`stablearena.judging.judges`). The next battles come from a design:

* a pair selector of :mod:`stablearena.design.selection` (default
  :data:`~stablearena.design.selection.DEFAULT_STRATEGY`, the information design;
  docs/methods/selection.md), its information kept at the am-ELO fit refitted after every
  batch, and each battle's judge chosen by its estimated ability (:class:`JudgeSteering`),
  the prompt drawn at random among those the pair has not yet been judged on;
* ``"round-robin"``: every pair on every prompt, prompt after prompt;
* ``"baseline"``: Arena-Hard-Auto's design, every model against one fixed baseline model on
  every prompt.

The fixed designs draw each battle's judge by a hash, every judge alike.

Each model's answer to a prompt is generated once and reused. The run stops at the budget
(judge calls), when the precision target is met (the top-k models' rank intervals no longer
overlap; docs/methods/uncertainty.md), or when no battle is left. Everything is written to a
:class:`Journal` as it happens, so a killed run resumes where it stopped: answers are reused
and finished judgements are never repeated or lost.
"""

from __future__ import annotations

import asyncio
import hashlib
import io
import json
import os
import warnings
from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

import numpy as np

from ..data.battles import Battles, Outcome
from ..errors import InputError, StableArenaWarning
from ..inputs import load_json_line, read_input_bytes
from .endpoints.client import Answer, Failure, prompt_problem
from .endpoints.config import Price
from .judges import JudgeClient, Judgement
from .probes import ProbeConfig

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
    "JUDGE_CHOICES",
    "judge_information",
    "JudgeSteering",
    "review_judges",
    "self_preference",
]

#: Designs that do not read the information: every pair on every prompt; every model against
#: one baseline model.
FIXED_DESIGNS = ("round-robin", "baseline")

#: How a battle's judge is chosen (:class:`AutoConfig` ``judge_choice``).
JUDGE_CHOICES = ("information", "spread")

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

    from ..data.io import detect_format

    path = Path(path)
    fmt = detect_format(path)
    if fmt not in ("jsonl", "csv", "parquet"):
        raise InputError(f"{path}: prompts are read from JSONL, CSV or Parquet, not {fmt}")
    data = io.BytesIO(read_input_bytes(path, "prompts"))  # a regular file, within the limit
    try:
        if fmt == "jsonl":
            frame = pd.read_json(data, lines=True, dtype=False)
        elif fmt == "csv":
            frame = pd.read_csv(data, dtype=str, keep_default_na=False)
        else:
            frame = pd.read_parquet(data)
    except (OSError, ValueError, RecursionError) as exc:
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
    for p in out:
        problem = prompt_problem(p.text)
        if problem:
            raise InputError(f"{path}: the prompt of id {p.id!r} {problem}")
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
        #: the line number of each record (messages name it: :func:`replay_records`)
        self.lines: list[int] = []
        exists = os.path.lexists(self.path)
        raw = read_input_bytes(self.path, "journal") if exists else b""
        body, newline, tail = raw.rpartition(b"\n")  # tail: what follows the last newline
        n_lines = body.count(b"\n") + 1 if newline else 0
        for k, line in enumerate(body.split(b"\n") if newline else [], 1):
            if not line.strip():
                continue
            where = f"{self.path}, line {k}"
            try:
                self._records.append(load_json_line(line, where, "journal"))
                self.lines.append(k)
            except InputError as exc:
                raise InputError(
                    f"{exc} The journal is damaged (move it aside to start afresh)"
                ) from None
        keep = len(body) + len(newline)
        try:
            where = f"{self.path}, line {n_lines + 1}"
            whole = load_json_line(tail, where, "journal") if tail.strip() else None
        except InputError:
            whole = None  # a line cut short by a kill: dropped
            warnings.warn(
                f"{self.path}, line {n_lines + 1}: dropped a last line cut short ({len(tail)} "
                "bytes, no newline: a run killed while writing it); its work is done again.",
                StableArenaWarning,
                stacklevel=2,
            )
        self._fh = open(self.path, "ab")  # noqa: SIM115 - kept open for appends
        self._fh.truncate(keep)
        self._fh.seek(keep)
        if whole is not None:  # a whole record whose newline was not written yet
            self.append(whole)

    def records(self) -> list[dict[str, Any]]:
        return list(self._records)

    def where(self, k: int) -> str:
        """The ``k``-th record's place, for messages: the file and its line."""
        return f"{self.path}, line {self.lines[k] if k < len(self.lines) else k + 1}"

    def append(self, record: dict[str, Any]) -> None:
        line = json.dumps(record, separators=(",", ":"), allow_nan=False).encode() + b"\n"
        self._fh.write(line)
        self._fh.flush()
        os.fsync(self._fh.fileno())
        self._records.append(record)
        self.lines.append((self.lines[-1] if self.lines else 0) + 1)

    def close(self) -> None:
        self._fh.close()


#: Each record type's fields that replaying reads, and their types (``int`` fields are ≥ 0).
_FIELDS: dict[str, dict[str, Any]] = {
    "run": {"models": list, "judges": list},
    "answer": {
        "model": str,
        "prompt_id": str,
        "ok": bool,
        "prompt_tokens": int,
        "completion_tokens": int,
    },
    "judgement": {
        "judge": str,
        "x": str,
        "y": str,
        "prompt_id": str,
        "calls": int,
        "prompt_tokens": int,
        "completion_tokens": int,
    },
    "probe": {
        "judge": str,
        "prompt_id": str,
        "n": int,
        "picked": list,
        "calls": int,
        "prompt_tokens": int,
        "completion_tokens": int,
    },
}
_TYPE_NAMES = {list: "a list", str: "a string", bool: "true or false", int: "a whole number ≥ 0"}


def _check_record(rec: Any, where: str) -> None:
    """Raise :class:`InputError` naming ``where`` unless ``rec`` is a journal record whose
    fields have the types replaying needs (other record types are left alone)."""
    hint = "the journal is damaged or not a journal (move it aside to start afresh)"
    if not isinstance(rec, dict):
        raise InputError(f"{where}: not a journal record (a JSON object); {hint}")
    for name, kind in _FIELDS.get(rec.get("type"), {}).items():  # type: ignore[arg-type]
        value = rec.get(name)
        ok = isinstance(value, kind) and (kind is not int or not isinstance(value, bool))
        if kind is int and ok:
            ok = value >= 0
        if kind is list and ok:
            ok = all(isinstance(v, str) for v in value)
        if not ok:
            shown = "missing" if name not in rec else f"{json.dumps(value)[:60]}"
            raise InputError(
                f"{where}: a {rec['type']} record's {name!r} must be {_TYPE_NAMES[kind]}"
                f"{' of strings' if kind is list else ''}, not {shown}; {hint}"
            )
    if rec.get("type") == "answer" and rec["ok"] and not isinstance(rec.get("text"), str):
        raise InputError(f"{where}: an answer record with ok=true has no text; {hint}")
    if rec.get("type") == "probe" and not set(rec["picked"]) <= {"worse", "better", "tie"}:
        raise InputError(
            f"{where}: a probe's 'picked' must hold worse, better or tie, not "
            f"{json.dumps(rec['picked'])[:60]}; {hint}"
        )
    if rec.get("type") == "judgement" and rec.get("outcome") not in (None, "x", "y", "tie"):
        raise InputError(
            f"{where}: a judgement's 'outcome' must be x, y, tie or null, not "
            f"{json.dumps(rec.get('outcome'))[:60]}; {hint}"
        )


def replay_records(journal: Journal) -> list[dict[str, Any]]:
    """The journal's records, checked (:func:`_check_record`: a clear error naming the file and
    line, or the record's number) and with duplicates left out: a record equal to an earlier
    one, or a second judgement of the same pair and prompt by a judge (a run judges each once),
    is counted once; a warning says how many were skipped."""
    records = journal.records()
    where = getattr(journal, "where", None)
    label = getattr(journal, "label", "the journal")
    seen: set[str] = set()
    judged: set[tuple[str, str, str]] = set()
    out = []
    skipped = 0
    for k, rec in enumerate(records):
        _check_record(rec, where(k) if where else f"{label}, record {k + 1}")
        text = json.dumps(rec, sort_keys=True)
        key = None
        if rec.get("type") == "judgement" and rec.get("stage") != "answer":
            x, y = sorted((rec["x"], rec["y"]))
            key = (x, y, rec["prompt_id"])
        if text in seen or (key is not None and key in judged):
            skipped += 1
            continue
        seen.add(text)
        if key is not None:
            judged.add(key)
        out.append(rec)
    if skipped:
        warnings.warn(
            f"{label}: skipped {skipped} duplicated record{'s' if skipped > 1 else ''} (the same "
            "record, or the same pair and prompt judged again); each is counted once.",
            StableArenaWarning,
            stacklevel=2,
        )
    return out


# ------------------------------------------------------------------------------------- config
@dataclass(frozen=True)
class AutoConfig:
    """How an automatic arena runs.

    ``budget``: judge calls (a battle costs two, one per order); ``None``: until the precision
    target is met or no battle is left. ``design``: a selector name, ``"round-robin"`` or
    ``"baseline"`` (then ``baseline`` names the baseline model). ``parallel``: battles in
    flight at once (the selector is asked for that many distinct pairs per batch).
    ``precision_top``: stop when the rank intervals (``level``, Fisher) of the top k models
    no longer overlap each other or the rest, on the fit the leaderboard reports (``rater``:
    am-ELO with the judges' abilities, or m-ELO; :func:`fit_judgements`); checked every
    ``check_every`` judgements.
    ``judge_choice``: ``"information"`` (each battle to the judge whose judgement is expected to
    carry the most information, :func:`judge_information`, after ``judge_warmup`` judgements
    of every judge) or ``"spread"`` (a judge drawn per battle by a hash, every judge alike);
    by default ``"information"`` for the information design and ``"spread"`` for the fixed
    designs.
    ``probes``: the probe battles mixed in (:class:`~stablearena.judging.probes.ProbeConfig`: by default
    15% of the judge calls; ``ProbeConfig(share=0)`` turns them off). A judge the probes flag
    is left out of the fit and sent no more battles.
    """

    budget: int | None = None
    design: str | None = None
    baseline: str | None = None
    seed: int = 0
    parallel: int = 8
    precision_top: int | None = None
    level: float = 0.95
    check_every: int = 20
    judge_choice: str | None = None
    judge_warmup: int = 10
    rater: str = "am-elo"
    probes: ProbeConfig = field(default_factory=ProbeConfig)

    def __post_init__(self) -> None:
        if self.rater not in ("am-elo", "m-elo"):
            raise InputError(f"rater must be am-elo or m-elo, not {self.rater!r}")
        if self.budget is not None and self.budget < 2:
            raise InputError("the budget is in judge calls and a battle takes two: give >= 2")
        if self.judge_choice not in (None, *JUDGE_CHOICES):
            raise InputError(
                f"judge_choice must be one of {', '.join(JUDGE_CHOICES)}, not {self.judge_choice!r}"
            )
        if self.judge_warmup < 0:
            raise InputError("judge_warmup must be >= 0")
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
    #: the probe battles' records (stablearena.judging.probes): never votes
    probes: list[dict[str, Any]] = field(default_factory=list)
    #: judges flagged by their probes → the reason; their judgements weigh nothing
    excluded: dict[str, str] = field(default_factory=dict)

    def battles(self) -> Battles:
        """The successful judgements as battles: model_a = x (shown first in the first order),
        the judge as annotator, the prompt id as prompt. A battle forfeited by an answer that
        talks to the judge counts as its judge's vote: an annotator of its own for the rule
        would be a second voice whose sign am-ELO cannot fix against a single judge (measured:
        with one obeying judge, the fit took the rule for the adversary and put the injecting
        model first). The judgements of a judge flagged by its probes (:attr:`excluded`) are left
        out, and probes are never battles."""
        ok = [
            r
            for r in self.judgements
            if r.get("outcome") is not None and r["judge"] not in self.excluded
        ]
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


# ---------------------------------------------------------------------------------- steering
def judge_information(ability: np.ndarray, gap: float | np.ndarray) -> np.ndarray:
    """Fisher information about the score gap Δ = x_i − x_j carried by one judgement of a judge
    of am-ELO ability a (docs/methods/annotators.md): P(i beats j) = σ(aΔ), so

        I(a, Δ) = a₊² σ(aΔ)(1 − σ(aΔ)),   a₊ = max(a, 0).

    A judge of ability ≤ 0 counts for nothing: ~0 tells nothing (a position-biased judge,
    whose two orders cancel into ties), and a negative ability is an inverted or adversarial
    judge, whose votes the project never trusts (the bounded-influence rule of
    :mod:`stablearena.crowd.trust` gives it weight 0)."""
    from scipy.special import expit

    a = np.maximum(np.asarray(ability, dtype=float), 0.0)
    p = expit(a * gap)
    return a * a * p * (1.0 - p)


def _judge_balanced_scores(counts: Any) -> np.ndarray | None:
    """m-ELO scores of pair × judge ``counts`` with every judge's rows weighted 1/(its
    comparisons), so each judge weighs alike; ``None`` when the fit fails."""
    import warnings

    from ..data.battles import PairCounts
    from ..errors import StableArenaError, StableArenaWarning
    from ..raters.base import get_rater

    n = np.bincount(counts.annotator, counts.totals, len(counts.annotators))
    w = 1.0 / np.maximum(n, 1e-12)[counts.annotator]
    eff = PairCounts(
        models=counts.models,
        i=counts.i,
        j=counts.j,
        wins=counts.wins * w,
        losses=counts.losses * w,
        ties=counts.ties * w,
        ties_both_bad=counts.ties_both_bad * w,
    )
    try:
        with warnings.catch_warnings(), np.errstate(all="ignore"):
            warnings.simplefilter("ignore", StableArenaWarning)
            return np.asarray(get_rater("m-elo").fit(eff).scores, dtype=float)
    except StableArenaError:
        return None


#: A judge whose ability is below 0 by this many standard errors is no longer sent battles.
SCREEN_Z = 2.0


class JudgeSteering:
    """The am-ELO fit that steers the information design: its scores place the pairs, its judge
    abilities choose the judges (docs/guides/models-and-judges.md).

    :meth:`refit` fits am-ELO (judges as annotators) to the judgements so far. Then

    * :meth:`refresh` gives the pair selector's tracker the am-ELO scores, on the scale of the
      best judge (a_best x), and the battles counted in battles of the best judge: a battle
      judged by judge k counts (a_k₊ / a_best)² — a judge of ability ≤ 0 adds no information;
    * :meth:`choose` sends a battle to a judge by Thompson sampling of the abilities: draw each
      a_k ~ N(â_k, se_k²) (a judge without a successful judgement: N(0, 1)) and take the judge
      of largest :func:`judge_information` at the pair's am-ELO gap. Judges whose abilities are
      uncertain are tried now and then, one well below the best almost never, and one whose
      ability is reliably ≤ 0 (â + 2 se ≤ 0: inverted, adversarial) never again. Until every
      judge has made ``warmup`` judgements, the battle goes to the judge with the fewest
      instead, so that every ability can be estimated.

    **Orientation.** am-ELO fixes the sign of the scale by the majority of *votes*
    (docs/methods/annotator-identification.md), and this design decides who gets the votes: an
    early fit in which the inverted judge looks honest would send it the battles and so make it
    the majority for good (the leaderboard upside down; seen in the demo arena). The steering
    therefore orients the fit by the *judges* instead: scores and abilities change sign (the
    likelihood is the same) when the am-ELO scores point against the m-ELO scores of the votes
    weighted 1/n_k for a judge with n_k votes — every judge one voice, whatever the design
    sent it. This assumes, as the screening does, that the judges are on the whole honest.

    While am-ELO has no fit (too few judgements, or a comparison graph not yet connected),
    :attr:`fitted` is ``None`` and the arena falls back to m-ELO and the spread judges.
    """

    def __init__(self, judges: Sequence[str], warmup: int = 10):
        self.judges = tuple(judges)
        self.warmup = int(warmup)
        self.fitted: Any = None
        self.attempts = np.zeros(len(self.judges))
        self.scores = np.zeros(0)
        self.abilities = np.zeros(len(self.judges))
        self.ability_se = np.ones(len(self.judges))

    def refit(self, battles: Battles, attempts: dict[str, int]) -> None:
        """Fit am-ELO to ``battles`` (annotator = judge); ``attempts``: judgements tried per
        judge (failures included)."""
        import warnings

        from ..errors import StableArenaError, StableArenaWarning
        from ..raters.base import get_rater

        self.attempts = np.array([attempts.get(j, 0) for j in self.judges], dtype=float)
        self.fitted = None
        self.abilities, self.ability_se = np.zeros(len(self.judges)), np.ones(len(self.judges))
        if len(battles) == 0:
            return
        try:
            with warnings.catch_warnings(), np.errstate(all="ignore"):
                warnings.simplefilter("ignore", StableArenaWarning)
                fitted = get_rater("am-elo").fit(battles)
        except StableArenaError:
            return
        if not fitted.convergence.converged:
            return
        x = np.asarray(fitted.scores, dtype=float)
        mean, se = self._abilities(fitted, x)
        balanced = _judge_balanced_scores(fitted.counts)
        if balanced is not None and float(x @ balanced) < 0:
            x, mean = -x, -mean
        if mean.max() > 0:
            self.fitted, self.scores, self.abilities, self.ability_se = fitted, x, mean, se

    def _abilities(self, f: Any, x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(â, se) per judge of :attr:`judges` in fit ``f`` at scores ``x``; N(0, 1) for a
        judge not in the fit.

        se is the standard error with the scores held at the fit's, 1/√(Σ_r d_r² n_r p_r(1 −
        p_r)) over the judge's rows r (d_r the rows' score gap, p_r = σ(â d_r)): free of the
        scale gauge mean |a| = 1, whose uncertainty is common to every judge and does not
        change which judge is best."""
        from scipy.special import expit

        mean, se = np.zeros(len(self.judges)), np.ones(len(self.judges))
        c = f.counts
        d = x[c.i] - x[c.j]
        p = expit(f.abilities[c.annotator] * d)
        info = np.bincount(c.annotator, d * d * c.totals * p * (1 - p), len(f.annotators))
        for k, name in enumerate(self.judges):
            if name in f.annotators:
                q = f.annotators.index(name)
                mean[k], se[k] = f.abilities[q], 1.0 / np.sqrt(max(info[q], 1e-12))
        return mean, se

    def refresh(self, tracker: Any) -> None:
        """Re-evaluate ``tracker`` (:class:`~stablearena.design.selection.InformationTracker`) at the
        am-ELO scores, with each judge's battles weighted by its information (see above)."""
        from ..data.battles import PairCounts

        c = self.fitted.counts
        by_name = dict(zip(self.judges, np.maximum(self.abilities, 0.0), strict=True))
        a = np.array([by_name.get(n, 0.0) for n in self.fitted.annotators])
        best = float(a.max())
        w = (a[c.annotator] / best) ** 2 * c.totals
        keep = w > 0
        zero = np.zeros(int(keep.sum()))
        eff = PairCounts(
            models=c.models,
            i=c.i[keep],
            j=c.j[keep],
            wins=w[keep],
            losses=zero,
            ties=zero,
            ties_both_bad=zero,
        )
        tracker.refresh(best * self.scores, counts=eff)

    def choose(
        self,
        battles: Sequence[tuple[int, int, str]],
        rng: np.random.Generator,
        spread: Callable[[int, int, str], int],
        excluded: Sequence[str] = (),
    ) -> list[int]:
        """A judge (index into :attr:`judges`) for each battle (i, j, prompt id; model indices
        of the arena); ``spread`` gives the judge while am-ELO has no fit. A judge of
        ``excluded`` (flagged by its probes) is never chosen, whatever its ability: ``spread``
        must not return one either."""
        n = self.attempts.copy()
        mean, se = self.abilities, self.ability_se
        out_of_play = np.array([name in excluded for name in self.judges], dtype=bool)
        # ability reliably <= 0, or flagged by the probes: never chosen
        screened = (mean + SCREEN_Z * se <= 0) | out_of_play
        x = None if self.fitted is None else self.scores
        out = []
        for i, j, pid in battles:
            cold = np.flatnonzero((n < self.warmup) & ~out_of_play)
            if len(cold):
                k = int(cold[np.argmin(n[cold])])
            elif x is None:
                k = spread(i, j, pid)
            else:
                draw = rng.normal(mean, se)
                info = judge_information(np.where(screened, 0.0, draw), x[i] - x[j])
                k = int(np.argmax(info)) if info.max() > 0 else spread(i, j, pid)
            n[k] += 1
            out.append(k)
        return out


# -------------------------------------------------------------------------------------- arena
class AutoArena:
    """An automatic arena over ``prompts`` with answering ``models`` and ``judges``.

    ``models``: clients with ``name`` and ``async answer(prompt, prompt_id)`` returning an
    :class:`Answer` or :class:`Failure` (:class:`~stablearena.judging.endpoints.EndpointClient`,
    :class:`~stablearena.judging.endpoints.OfflineClient`, or the in-process
    :class:`~stablearena.judging.endpoints.demo.LocalDemoClient`); ``judges``:
    :class:`~stablearena.judging.judges.JudgeClient`. ``prices``: per model or judge name, for the cost.
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
            from ..design.selection import get_selector

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
        records = replay_records(self.journal)
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
        unknown = sorted(
            {r[side] for r in records if r.get("type") == "judgement" for side in ("x", "y")}
            - set(self.names)
        )
        if unknown:
            where = getattr(self.journal, "label", "the journal")
            raise InputError(
                f"{where}: judgements of models not in its run record: {unknown[:5]}; the journal "
                "is damaged (move it aside to start afresh)"
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
            elif rec.get("type") == "probe":
                self.result.calls += rec["calls"]
                self._count(rec["judge"], rec["prompt_tokens"], rec["completion_tokens"])
                self.result.probes.append(rec)
        self.result.resumed = len(self.result.judgements)
        self._flag()

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
            decided = j.injection is not None and j.injection["action"] in ("forfeit", "drop")
            rec.update(
                outcome=j.outcome,
                consistent=j.consistent,
                calls=0 if decided else 2,  # forfeited or dropped: no judge call
                prompt_tokens=sum(c.prompt_tokens for c in calls),
                completion_tokens=sum(c.completion_tokens for c in calls),
                verdicts=j.verdict_records(),
            )
            if j.failure is not None:
                rec.update(stage="judge", reason=j.failure.reason, detail=j.failure.detail)
            if j.injection is not None:
                rec["injection"] = j.injection
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
    def _spread(self, i: int, j: int, pid: str) -> int:
        """A judge by a hash of the battle, among the judges the probes have not flagged."""
        ok = [k for k, jc in enumerate(self.judges) if jc.name not in self.result.excluded]
        return ok[_hash(self.config.seed, "judge", i, j, pid) % len(ok)]

    # ---------------------------------------------------------------- probes
    def _flag(self) -> list[str]:
        """Flag the judges whose probes show they follow notes (stablearena.judging.probes): their
        judgements leave the fit and they get no more battles. Returns the newly flagged."""
        from .probes import susceptibility

        pc = self.config.probes
        new = []
        for judge, row in susceptibility(self.result.probes, pc.threshold, pc.z).items():
            if row["flagged"] and judge not in self.result.excluded:
                self.result.excluded[judge] = f"follows notes to the judge: {row['reason']}"
                new.append(judge)
        return new

    def _probes_wanted(self, battles: int) -> int:
        """How many probes go with a batch of ``battles`` so that probe calls stay at the
        configured share of all judge calls (each probe and each battle is two calls)."""
        share = self.config.probes.share
        if share <= 0:
            return 0
        done = sum(int(p["calls"]) for p in self.result.probes)
        after = self.result.calls + 2 * battles
        # probes p so that (done + 2p) / (after + 2p) reaches the share
        need = (share * after - done) / (2 * (1 - share))
        return max(0, int(np.ceil(need)))

    async def _probe(self, battle: tuple[int, int, str], judge: JudgeClient, control: bool) -> None:
        """One probe of ``judge``: on ``battle``'s prompt, the answer of a model drawn
        uniformly from the run's models against a worse copy, with a corpus note (or,
        ``control``, none) after the copy. Not one of the battle's models: the design sends a
        model an obeying judge has lifted many battles, and a model that writes its own notes
        puts one on both sides of a probe built on its answer (the cut copy keeps it), which
        hides the judge's obedience; drawn uniformly, such a model is the source of 1/M of the
        probes at most."""
        from .judge_notes import notes
        from .probes import probe

        _, _, pid = battle
        prompt = self._prompt_by_id[pid]
        model = self.models[int(self._rng.integers(len(self.models)))]
        answer = await self._answer(model, prompt)
        if isinstance(answer, Failure):
            return
        pc = self.config.probes
        note = None
        if not control:
            part = notes(pc.notes)
            note = part[int(self._rng.integers(len(part)))]
        rec = await probe(judge, prompt.text, pid, answer, note, self._rng)
        if rec is None:
            return
        rec["n"] = len(self.result.probes)
        rec["model"] = model.name
        self.journal.append(rec)
        self.result.calls += rec["calls"]
        self._count(judge.name, rec["prompt_tokens"], rec["completion_tokens"])
        self.result.probes.append(rec)

    def _probe_judges(self, n: int) -> list[tuple[JudgeClient, bool]]:
        """``n`` judges for probes, among those the probes have not flagged, each with whether
        its probe is a control (:func:`~stablearena.judging.probes.is_control` of its probe count):
        half of the probes spread alike, half in proportion to the battles each judge has
        judged — the judge the design trusts most (JudgeSteering sends battles to the judge of
        highest ability, which an obeying judge may seem to be) is tested most. A **suspect**
        — a judge whose susceptibility is above the flag's threshold but whose lower bound is
        not yet — gets :data:`~.probes.SUSPECT_SHARE` of the probes until it is flagged or
        cleared (suspects alike), so that a judge is not left unflagged for want of probes
        (:func:`~.probes.suspects`); while there is no suspect, that share goes to the judges
        neither flagged nor cleared (:func:`~.probes.probe_focus`), so none stays undecided
        while the probes go to judges already cleared."""
        from .probes import SUSPECT_SHARE, is_control, probe_focus

        ok = [jc for jc in self.judges if jc.name not in self.result.excluded]
        if not ok:
            return []
        pc = self.config.probes
        probes = Counter(p["judge"] for p in self.result.probes)
        battles = Counter(r["judge"] for r in self.result.judgements if r.get("stage") != "answer")
        total = sum(battles[jc.name] for jc in ok)
        suspect = probe_focus(self.result.probes, (jc.name for jc in ok), pc.threshold, pc.z)
        out = []
        for _ in range(n):
            done = sum(probes[jc.name] for jc in ok) + 1

            def deficit(jc: JudgeClient, done: int = done) -> tuple[float, float]:
                base = 0.5 / len(ok) + (0.5 * battles[jc.name] / total if total else 0.5 / len(ok))
                share = base
                if suspect:  # the next probes resolve the suspects (else the undecided) first
                    share = SUSPECT_SHARE / len(suspect) if jc.name in suspect else 0.0
                    share += (1 - SUSPECT_SHARE) * base
                return (share * done - probes[jc.name], self._rng.random())

            jc = max(ok, key=deficit)
            out.append((jc, is_control(probes[jc.name], pc.control)))
            probes[jc.name] += 1
        return out

    def _refresh(self, tracker: Any, steering: JudgeSteering | None) -> None:
        """Refit after a batch: am-ELO steers the pairs and judges when it has a fit
        (:class:`JudgeSteering`); otherwise the tracker is refreshed at m-ELO, judges alike."""
        from ..raters.refit import Refitter

        if tracker is None and steering is None:
            return
        battles = self.result.battles()
        if steering is not None:
            attempts = Counter(
                r["judge"] for r in self.result.judgements if r.get("stage") != "answer"
            )
            steering.refit(battles, attempts)
            if tracker is not None and steering.fitted is not None:
                steering.refresh(tracker)
                return
        if tracker is not None and len(battles):
            refitter = Refitter(self.names)
            refitter.add(battles.model_a, battles.model_b, battles.outcome)
            tracker.refresh(refitter.fit(), counts=refitter.counts())

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
        from ..errors import StableArenaError
        from ..raters.uncertainty import intervals

        try:
            fitted, _ = fit_judgements(battles, self.config.rater)
            iv = intervals(fitted, "fisher", level=self.config.level, seed=self.config.seed)
        except StableArenaError:
            return False
        return top_k_separated(iv.rank, iv.rank_low, iv.rank_high, k)

    # ---------------------------------------------------------------- the loop
    async def run_async(self) -> AutoResult:
        """Run until the budget, the precision target, or the end of the battles."""
        from ..design.selection import DEFAULT_STRATEGY, InformationTracker, get_selector

        self._replay()
        cfg, r = self.config, self.result
        design = cfg.design or DEFAULT_STRATEGY
        self._queues: dict[tuple[int, int], list[int]] = {}
        fixed = iter(self._fixed_order()) if design in FIXED_DESIGNS else None
        selector = None if fixed is not None else get_selector(design)
        choice = cfg.judge_choice or ("spread" if fixed is not None else "information")
        steering = None
        if choice == "information":
            steering = JudgeSteering(r.judges, cfg.judge_warmup)
        tracker = None
        if selector is not None:
            estimate = selector.estimate or "plug-in"
            tracker = InformationTracker(self.names, estimate=estimate)
        self._refresh(tracker, steering)
        self._n_ok = last_check = len(r.judgements) - len(r.failures)
        idle = 0
        try:
            while True:
                if len(r.excluded) == len(self.judges):
                    r.stop_reason = "judges-flagged"
                    break
                if cfg.budget is not None and r.calls + 2 > cfg.budget:
                    r.stop_reason = "budget"
                    break
                k = cfg.parallel
                if cfg.budget is not None:
                    k = min(k, (cfg.budget - r.calls) // 2)
                # probes go beside the batch's battles; near the budget, at least one battle
                room = 2 * k if cfg.budget is None else (cfg.budget - r.calls) // 2
                n_probes = min(self._probes_wanted(k), room - 1, k)
                k = min(k, room - n_probes)
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
                if steering is not None:
                    judges = steering.choose(batch, self._rng, self._spread, r.excluded)
                else:
                    judges = [self._spread(i, j, pid) for i, j, pid in batch]
                probed = self._probe_judges(n_probes)
                await asyncio.gather(
                    *(
                        self._battle(
                            *self._oriented(i, j, pid), self._prompt_by_id[pid], self.judges[k]
                        )
                        for (i, j, pid), k in zip(batch, judges, strict=True)
                    ),
                    *(
                        self._probe(batch[int(self._rng.integers(len(batch)))], jc, control)
                        for jc, control in probed
                    ),
                )
                if self._flag():
                    self._refresh(tracker, steering)
                n_ok = self._n_ok
                idle = idle + 1 if n_ok == before and r.calls == calls_before else 0
                if idle >= 3:
                    r.stop_reason = "failing"
                    break
                if n_ok > before or (steering is not None and r.calls > calls_before):
                    self._refresh(tracker, steering)
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
        self._record_disagreement(r)
        return r

    def _record_disagreement(self, r: AutoResult) -> None:
        """The judges' disagreement per model at the end of the run, kept in the journal as one
        record of type ``disagreement`` — ``stop_reason``, ``judgements`` (how many verdicts it
        was computed on) and ``models`` (:func:`~.injection.judge_disagreement`, the table the
        output's ``judge_disagreement`` shows) — so that a journal keeps the per-model test beside
        the verdicts it was computed from. Replaying leaves these records alone; a resumed run
        writes its own at its end."""
        from ..errors import StableArenaError
        from .injection import judge_disagreement

        judged = sum(x.get("outcome") in ("x", "y", "tie") for x in r.judgements)
        if not judged:
            return
        record: dict[str, Any] = {
            "type": "disagreement",
            "stop_reason": r.stop_reason,
            "judgements": judged,
        }
        try:
            record["models"] = judge_disagreement(r.judgements)
        except StableArenaError as exc:  # e.g. judgements that leave the models in two groups
            record["models"], record["note"] = {}, f"no test: {exc}"
        self.journal.append(record)

    def run(self) -> AutoResult:
        """:meth:`run_async` in a new event loop."""
        return asyncio.run(self.run_async())


def fit_judgements(battles: Battles, rater: str = "am-elo") -> tuple[Any, list[str]]:
    """The fit of an automatic arena's judgements and its notes: am-ELO with the judges as
    annotators (their abilities estimated; docs/methods/annotators.md), or m-ELO on all
    judgements alike when ``rater="m-elo"`` — or when am-ELO finds no solution (then a note
    says why). The leaderboard (:func:`fit_leaderboard`) and the precision stop read it."""
    import warnings

    from ..errors import StableArenaError, StableArenaWarning
    from ..raters.base import get_rater

    notes: list[str] = []
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


def _clean(x: float, places: int = 4) -> float:
    """``x`` rounded to ``places`` decimals, with no negative zero (a position-biased judge's
    ability of -1.8e-11 is 0.0: the fit's floating-point dust, not a sign)."""
    r = round(float(x), places)
    return 0.0 if r == 0 else r


def self_preference(
    judgements: Sequence[dict[str, Any]], families: Mapping[str, str | None]
) -> list[str]:
    """Warnings for the judges that judged models of their own family (``families``: model and
    judge name → declared family): for each, the battles it judged between one model of its
    family and one of another, the share its family's models won there (a tie counts half), and
    the same share from the judges of other families — self-preference is a documented bias of
    LLM judges (docs/guides/models-and-judges.md)."""
    out = []
    for j in sorted({str(r["judge"]) for r in judgements}):
        fam = families.get(j)
        if not fam:
            continue

        def shares(keep: Callable[[str], bool], fam: str = fam) -> tuple[int, float]:
            n, won = 0, 0.0
            for r in judgements:
                if r.get("outcome") is None or not keep(str(r["judge"])):
                    continue
                fx, fy = families.get(str(r["x"])) == fam, families.get(str(r["y"])) == fam
                if fx == fy:
                    continue
                n += 1
                won += 0.5 if r["outcome"] == "tie" else float((r["outcome"] == "x") == fx)
            return n, (won / n if n else 0.0)

        n, own = shares(lambda k, j=j: k == j)
        if n == 0:
            continue
        m, other = shares(lambda k, fam=fam: families.get(k) != fam)
        models = sorted(
            {str(r[s]) for r in judgements for s in ("x", "y") if families.get(str(r[s])) == fam}
        )
        text = (
            f"judge {j} ({fam}) judged {n} battle(s) of its own family's models "
            f"({', '.join(models)}) against others: they won {own:.0%} of them"
        )
        text += (
            f"; judges of other families gave them {other:.0%} of {m}"
            if m
            else "; no judge of another family judged such battles to compare"
        )
        out.append(text + " (self-preference is a documented bias of LLM judges)")
    return out


def review_judges(
    fitted: Any, judges: Sequence[str] = (), z: float = SCREEN_Z
) -> tuple[list[dict[str, Any]], list[str]]:
    """The judges of an automatic arena's fit, each with a status its standard error supports,
    and the warnings the run must print (docs/guides/models-and-judges.md, "Judges reported
    honestly").

    With am-ELO (``fitted`` has abilities), judge k with ability â and standard error se is
    ``flagged`` when â + z·se < 0 (reliably against the board), ``trusted`` when â − z·se > 0,
    and ``uncertain`` otherwise (its interval covers 0: too few judgements, or a judge whose two
    orders cancel, like a position-biased one). Abilities and standard errors are rounded to 4
    decimals.

    Warnings:

    * the board's orientation rests on one judge (or none): am-ELO's likelihood is unchanged when
      every score and every ability is negated, and its gauge takes the direction most judges'
      votes point; with fewer than two judges whose ability is above 0 by one standard error,
      an inverted judge cannot be told from an honest one by the data;
    * judges disagree systematically: a flagged judge votes against the board the trusted ones
      make;
    * with m-ELO (no abilities), a run with a single judge.

    ``judges``: every judge of the run (those with no judgement are named in a warning too).
    """
    rows: list[dict[str, Any]] = []
    warnings: list[str] = []
    table = getattr(fitted, "annotator_table", None)
    if table is None:  # m-ELO: judgements alike
        if len(judges) == 1:
            warnings.append(
                f"one judge ({judges[0]}): the board is that judge's view; nothing in the run "
                "can check its orientation or its biases (add a second judge)"
            )
        return rows, warnings
    for r in table().itertuples(index=False):
        a, se = float(r.ability), float(r.ability_se)
        finite = bool(np.isfinite(se)) and se > 0  # se 0: fixed by the scale (a single judge)
        status = (
            "flagged"
            if finite and a + z * se < 0
            else "trusted"
            if finite and a - z * se > 0
            else "uncertain"
        )
        if not finite:
            reason = "not estimable: the fit's scale fixes it"
        elif status == "uncertain":
            reason = f"ability ± {z:g} se covers 0"
        else:
            reason = f"{abs(a) / se:.1f} se {'below' if status == 'flagged' else 'above'} 0"
        rows.append(
            {
                "annotator": str(r.annotator),
                "records": int(r.records),
                "ability": _clean(a),
                "ability_se": _clean(se) if finite else None,
                "status": status,
                "flagged": status == "flagged",
                "reason": reason,
            }
        )
    trusted = [r["annotator"] for r in rows if r["status"] == "trusted"]
    flagged = [r["annotator"] for r in rows if r["status"] == "flagged"]
    # the judges whose votes point the board's way: ability above 0 by one standard error
    support = [
        r["annotator"]
        for r in rows
        if r["ability"] > (r["ability_se"] if r["ability_se"] is not None else 0.0)
    ]
    if len(support) <= 1:
        who = f"one judge ({support[0]})" if support else "no judge"
        warnings.append(
            f"the board's orientation rests on {who}: no other judge's ability is above 0 by a "
            "standard error. am-ELO fits as well with every score and every ability negated, so "
            "here an inverted or adversarial judge cannot be told from an honest one: the order "
            "shown is the fit's convention, not evidence (add judges, or check a judge's "
            "verdicts by hand)"
        )
    if flagged:
        warnings.append(
            f"judges disagree systematically: {', '.join(flagged)} "
            f"vote{'s' if len(flagged) == 1 else ''} against the board "
            + (f"that {', '.join(trusted)} support" if trusted else "the others make")
            + f" (ability below 0 by more than {z:g} standard errors)"
        )
    seen = {r["annotator"] for r in rows}
    idle = [j for j in judges if j not in seen]
    if idle:
        warnings.append(f"judges with no successful judgement: {', '.join(idle)}")
    return rows, warnings


def fit_leaderboard(result: AutoResult, rater: str = "am-elo") -> tuple[Any, list[str]]:
    """The fitted leaderboard of an automatic arena's judgements (models without a
    successful judgement left out), and notes (:func:`fit_judgements`)."""
    battles = result.battles().compact()
    if (
        len(battles) == 0
        and result.excluded
        and all(
            r["judge"] in result.excluded for r in result.judgements if r.get("outcome") is not None
        )
    ):
        raise InputError(
            f"every judge that voted was flagged by its probes ({', '.join(result.excluded)}: "
            "it follows notes to the judge), so its verdicts weigh nothing and there is no "
            "leaderboard; add a judge that passes the probes, or run with probes off "
            "(--probe-share 0) to see that judge's board at your own risk"
        )
    if len(battles) == 0:
        raise InputError("no judgement succeeded, so there is no leaderboard (see the failures)")
    notes: list[str] = []
    missing = [m for m in result.models if m not in battles.models]
    if missing:
        notes.append(f"left out, no successful judgement: {', '.join(missing)}")
    fitted, fit_notes = fit_judgements(battles, rater)
    return fitted, notes + fit_notes
