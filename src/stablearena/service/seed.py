"""Seeding a live arena from an existing battle log (``stablearena serve --import LOG``).

Any log ``stablearena rank`` reads: each battle becomes a served battle (strategy ``import``,
no propensity: it was not served by the arena) with its vote, in log order, and its pair count;
a pair-count file (leaderbot's ``{models, X, Y}``) becomes one vote per counted comparison.
Models and annotators are created as needed (annotators without a key: an admin can give one
later under the same name). The same file (by content) is never imported twice.
"""

from __future__ import annotations

import hashlib
import time
import unicodedata
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from ..data.battles import UNKNOWN_ANNOTATOR, Battles, PairCounts
from ..errors import InputError
from . import store

if TYPE_CHECKING:
    from sqlalchemy.engine import Engine

__all__ = ["import_log", "counts_to_battles"]


def counts_to_battles(counts: PairCounts) -> Battles:
    """One battle per counted comparison of a pair-count table (whole counts only)."""
    cols = [counts.wins, counts.losses, counts.ties, counts.ties_both_bad]
    for name, x in zip(("wins", "losses", "ties", "ties_both_bad"), cols, strict=True):
        if not np.allclose(x, np.round(x)):
            raise InputError(
                f"{counts.source}: {name} counts are not whole numbers; they cannot be votes."
            )
    reps = np.column_stack([np.round(c).astype(np.int64) for c in cols])
    n = reps.sum(axis=1)
    a = np.repeat(counts.i, n)
    b = np.repeat(counts.j, n)
    oc = (
        np.concatenate([np.repeat(np.arange(4, dtype=np.int8), r) for r in reps])
        if len(reps)
        else np.zeros(0, np.int8)
    )
    ann = None
    if counts.annotator is not None:
        ann = np.array(counts.annotators, dtype=object)[np.repeat(counts.annotator, n)]
    return Battles.from_arrays(a, b, oc, models=counts.models, annotator=ann, source=counts.source)


def _checked_names(path: Path, what: str, names: Any) -> list[str]:
    """``names`` as the service stores names (Unicode NFC); an :class:`InputError` naming the
    first one that holds an invisible, control or direction-changing character, or two that
    differ only in their Unicode form (:func:`~stablearena.service.schemas.name_problem`)."""
    from .schemas import name_problem

    out = [unicodedata.normalize("NFC", str(n)) for n in names]
    for raw, name in zip(names, out, strict=True):
        problem = name_problem(name)
        if problem:
            raise InputError(f"{path}: the {what} name {str(raw)!r} {problem}; fix the log.")
    if len(set(out)) < len(out):
        twins = sorted({n for n in out if out.count(n) > 1})
        raise InputError(
            f"{path}: {what} names that differ only in their Unicode form: {twins[:3]}; "
            "use one spelling in the log."
        )
    return out


def import_log(engine: Engine, path: Path, progress: Any = None) -> dict[str, Any]:
    """Import the battle log at ``path`` in one transaction; returns what was added."""
    from ..data.io import read_battles

    path = Path(path)
    try:
        digest = hashlib.sha256(path.read_bytes()).hexdigest()
    except OSError as exc:
        raise InputError(f"--import {path}: {exc.strerror}.") from None
    data = read_battles(path)
    battles = counts_to_battles(data) if isinstance(data, PairCounts) else data
    if battles.weight is not None and not np.all(battles.weight == 1.0):
        raise InputError(
            f"{path}: the log has battle weights; the live arena stores one vote per battle. "
            "Import a log without a weight column."
        )
    n = len(battles)
    now = time.time()
    model_names = _checked_names(path, "model", battles.models)
    ts = battles.timestamp if battles.timestamp is not None else np.full(n, now)
    ann_names = (
        _checked_names(path, "annotator", battles.annotators)
        if battles.annotator is not None
        else [UNKNOWN_ANNOTATOR]
    )
    ann_codes = battles.annotator if battles.annotator is not None else np.zeros(n, dtype=np.int64)
    store.import_votes(
        engine,
        key=f"import:{digest[:48]}",
        label=str(path),
        model_names=model_names,
        annotator_names=ann_names,
        model_a=battles.model_a,
        model_b=battles.model_b,
        annotator=ann_codes,
        outcome=battles.outcome,
        timestamp=ts,
        now=now,
        progress=progress,
    )
    return {
        "battles": n,
        "models": len(battles.models),
        "annotators": len(ann_names),
        "source": str(path),
    }
