"""Battles and their sufficient statistic, the pair counts (docs/methods/data.md).

A :class:`Battles` holds a validated battle log as integer-coded NumPy arrays plus name
tables. :meth:`Battles.counts` aggregates it into :class:`PairCounts` — for every unordered
pair ``i < j`` (and optionally every annotator) the weighted number of wins of ``i``, wins of
``j``, ties and both-bad ties. Every likelihood in the package depends on the data only through
these counts, so every fit reads a :class:`PairCounts`.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field, replace
from enum import IntEnum
from functools import lru_cache
from typing import TYPE_CHECKING, Any, Literal

import numpy as np

from .._scatter import coo_todense
from ..errors import InputError

if TYPE_CHECKING:  # pragma: no cover
    import pandas as pd

__all__ = [
    "Outcome",
    "OUTCOME_LABELS",
    "parse_outcomes",
    "Battles",
    "PairCounts",
    "BothBad",
    "UNKNOWN_ANNOTATOR",
    "as_counts",
    "ipw_weights",
]

BothBad = Literal["tie", "drop"]

#: Annotator name of battles that have no annotator id (empty or missing in the log; they are
#: kept and attributed to this one annotator, whom am-ELO reports like any other).
UNKNOWN_ANNOTATOR = "unknown"


class Outcome(IntEnum):
    """Outcome of one battle, coded as the small integers stored in :attr:`Battles.outcome`."""

    A = 0  #: model_a better
    B = 1  #: model_b better
    TIE = 2
    TIE_BOTH_BAD = 3


#: Accepted text labels (case-insensitive, surrounding blanks ignored), docs/methods/data.md.
OUTCOME_LABELS: dict[str, Outcome] = {
    "model_a": Outcome.A,
    "a": Outcome.A,
    "left": Outcome.A,
    "model_b": Outcome.B,
    "b": Outcome.B,
    "right": Outcome.B,
    "tie": Outcome.TIE,
    "draw": Outcome.TIE,
    "tie (bothbad)": Outcome.TIE_BOTH_BAD,
    "both_bad": Outcome.TIE_BOTH_BAD,
    "bothbad": Outcome.TIE_BOTH_BAD,
}

#: Score W of model_a for each outcome code (ties are half a win).
_SCORE_A = np.array([1.0, 0.0, 0.5, 0.5])


#: A positive weight may be at most this many times smaller than the largest: smaller ones
#: cannot change a fit in double precision, yet a pair joined only by them makes it singular.
WEIGHT_RANGE: float = 1e12
#: Bounds of the total weight (the effective number of battles) of a log: weights count battles,
#: and solvers' tolerances, the existence prior and standard errors are in battle units.
MIN_TOTAL_WEIGHT: float = 1.0
MAX_TOTAL_WEIGHT: float = 1e15


def _row_hint(rows: np.ndarray, source: str) -> str:
    """ "SOURCE: data row R1, R2 … (1-based, header not counted)" for the first offending rows;
    a ``source`` with an ``offset`` attribute (a batch of a streamed file) counts from it."""
    offset = int(getattr(source, "offset", 0))
    shown = ", ".join(str(int(r) + 1 + offset) for r in rows[:5])
    more = f" and {len(rows) - 5} more" if len(rows) > 5 else ""
    return f"{str(source)}: data row {shown}{more} (1-based, header not counted)"


def check_weights(weight: np.ndarray, source: str) -> None:
    """Raise :class:`InputError` unless the battle weights are usable.

    A weight counts its battle that many times. Each must be finite and ≥ 0, and the positive
    ones may span at most :data:`WEIGHT_RANGE` (12 orders of magnitude). Their total — the
    effective number of battles — is checked when a fit aggregates them (:func:`as_counts`,
    :func:`check_total`): it must lie between :data:`MIN_TOTAL_WEIGHT` (one battle) and
    :data:`MAX_TOTAL_WEIGHT` (beyond it counts lose integer precision and likelihoods overflow).
    A log whose weights are all zero is refused by the fits ("no comparisons")."""
    w = np.asarray(weight, dtype=float)
    bad = np.flatnonzero(~np.isfinite(w) | (w < 0))
    if len(bad):
        raise InputError(
            f"{_row_hint(bad, source)}: weight {float(w[bad[0]])!r} is not a finite "
            "non-negative number."
        )
    positive = w > 0
    if not positive.any():
        return
    top = float(w.max())
    small = np.flatnonzero(positive & (w < top / WEIGHT_RANGE))
    if len(small):
        raise InputError(
            f"{_row_hint(small, source)}: weight {float(w[small[0]])!r} is more than "
            f"{WEIGHT_RANGE:.0e} times smaller than the largest ({top!r}), too small to count in "
            "double precision; set such weights to 0 or rescale them."
        )


def ipw_weights(propensity: Sequence | np.ndarray, source: str = "input") -> np.ndarray:
    """Inverse-propensity weights w_b = 1/π_b of battles drawn with probabilities ``propensity``,
    normalised to mean 1 (docs/methods/uncertainty.md, sampling weights).

    π is the probability with which the live arena's serving rule drew the battle's pair (the
    ``propensity`` column of its export, :mod:`stablearena.design.serving_draw`). Each must be a finite
    number in (0, 1]: a missing, non-numeric, non-finite, zero, negative or larger-than-1 value
    raises :class:`InputError` naming the row and the value — a weight is never guessed. The
    normalisation leaves point estimates and the sandwich covariance unchanged (both are
    invariant to a common factor) and keeps the total weight the number of battles."""
    raw = np.asarray(propensity)
    if raw.dtype.kind in "biuf" and raw.dtype.kind != "b":
        p = raw.astype(float)
    else:
        p = np.empty(len(raw))
        for k, v in enumerate(raw.tolist()):
            try:
                if isinstance(v, bool):
                    raise TypeError
                p[k] = np.nan if v is None else float(v)
            except (TypeError, ValueError):
                raise InputError(
                    f"{_row_hint(np.array([k]), source)}: propensity {v!r} is not a number; it "
                    "must be the probability (in (0, 1]) with which the battle's pair was drawn."
                ) from None
    if p.ndim != 1:
        raise InputError(f"{source}: the propensities must be one number per battle.")
    if len(p) == 0:
        raise InputError(f"{source}: no battles, so no propensities to weight by.")
    missing = np.flatnonzero(np.isnan(p))
    if len(missing):
        raise InputError(
            f"{_row_hint(missing, source)}: the propensity is missing (a battle not served by "
            "the arena's serving rule, e.g. an imported one, has none); inverse-propensity "
            "weights need every battle's draw probability: leave such battles out or rank "
            "without --ipw."
        )
    for bad, what in (
        (~np.isfinite(p), "is not a finite number"),
        (p <= 0, "is not positive (a drawn battle had a positive probability)"),
        (p > 1, "is larger than 1 (not a probability)"),
    ):
        rows = np.flatnonzero(bad)
        if len(rows):
            raise InputError(
                f"{_row_hint(rows, source)}: propensity {float(p[rows[0]])!r} {what}; it must "
                "lie in (0, 1]."
            )
    w = 1.0 / p
    w /= w.mean()
    top = float(w.max())
    small = np.flatnonzero(w < top / WEIGHT_RANGE)
    if len(small):
        raise InputError(
            f"{_row_hint(small, source)}: propensity {float(p[small[0]])!r} gives a weight more "
            f"than {WEIGHT_RANGE:.0e} times smaller than the largest: the propensities span too "
            "many orders of magnitude to weight by."
        )
    return w


def parse_outcomes(values: Sequence | np.ndarray | pd.Series, source: str = "input") -> np.ndarray:
    """Map outcome labels to :class:`Outcome` codes (``int8``).

    Text labels follow :data:`OUTCOME_LABELS`; a numeric column is read as the score of
    model_a: 1 → A, 0 → B, 0.5 → TIE. Anything else raises :class:`InputError` naming the first
    offending row and label — an unknown label is never silently a tie.
    """
    if isinstance(values, np.ndarray) and values.dtype.kind in "biuf":
        return _numeric_outcomes(values, source)
    import pandas as pd

    series = values if isinstance(values, pd.Series) else pd.Series(np.asarray(values))
    if len(series) == 0:
        return np.zeros(0, dtype=np.int8)
    if pd.api.types.is_bool_dtype(series.dtype) or pd.api.types.is_numeric_dtype(series.dtype):
        return _numeric_outcomes(
            series.to_numpy(dtype=float, na_value=np.nan)
            if not pd.api.types.is_bool_dtype(series.dtype)
            else np.zeros(len(series), dtype=bool),
            source,
        )
    if series.isna().any():
        bad = np.flatnonzero(series.isna().to_numpy())
        raise InputError(f"{_row_hint(bad, source)}: the outcome is empty.")
    labels = series.astype(str)
    uniques, inverse = np.unique(labels.to_numpy(dtype=object).astype(str), return_inverse=True)
    return codes_from_labels(list(uniques), inverse, source)


def _numeric_outcomes(values: np.ndarray, source: str) -> np.ndarray:
    """Codes of a numeric outcome column (the score of model_a: 1, 0 or 0.5)."""
    if values.dtype.kind == "b":
        raise InputError(
            f"{source}: the outcome column is boolean; use labels model_a/model_b/tie "
            "or the numeric score of model_a (1, 0, 0.5)."
        )
    x = values.astype(float, copy=False)
    codes = np.full(len(x), -1, dtype=np.int8)
    codes[x == 1.0] = Outcome.A
    codes[x == 0.0] = Outcome.B
    codes[x == 0.5] = Outcome.TIE
    bad = np.flatnonzero(codes < 0)
    if len(bad):
        value = x[bad[0]]
        shown = "empty" if np.isnan(value) else repr(float(value))
        raise InputError(
            f"{_row_hint(bad, source)}: outcome {shown} is not 1 (model_a won), "
            "0 (model_b won) or 0.5 (tie)."
        )
    return codes


def codes_from_labels(labels: Sequence[object], index: np.ndarray, source: str) -> np.ndarray:
    """Outcome codes for rows given as ``labels[index]`` (the distinct labels looked up once).

    Labels follow :data:`OUTCOME_LABELS` (case-insensitive, blanks ignored) or read as the numeric
    score of model_a 1 / 0 / 0.5; any other label is an error naming the first row and the label.
    """
    table = np.full(len(labels), -1, dtype=np.int8)
    for k, label in enumerate(labels):
        code = OUTCOME_LABELS.get(str(label).strip().lower())
        if code is None:
            try:
                code = {1.0: Outcome.A, 0.0: Outcome.B, 0.5: Outcome.TIE}.get(float(str(label)))
            except ValueError:
                code = None
        if code is not None:
            table[k] = code
    codes = table[index]
    if table.min(initial=0) < 0 and len(bad := np.flatnonzero(codes < 0)):
        # (rows are searched only when some distinct label is unknown)
        known = ", ".join(sorted(OUTCOME_LABELS))
        raise InputError(
            f"{_row_hint(bad, source)}: unknown outcome label {str(labels[index[bad[0]]])!r}. "
            f"Accepted (case-insensitive): {known}; or numeric 1/0/0.5. "
            "Fix or remove the row, or map the label yourself before loading."
        )
    return codes


def _encode_names(
    values: np.ndarray | Sequence, what: str, source: str
) -> tuple[np.ndarray, tuple[str, ...]]:
    """Integer-code a column of names; empty or missing names are an error."""
    import pandas as pd

    series = pd.Series(np.asarray(values, dtype=object))
    as_str = series.astype(str).str.strip()
    missing = series.isna().to_numpy() | (as_str == "").to_numpy()
    if missing.any():
        bad = np.flatnonzero(missing)
        raise InputError(f"{_row_hint(bad, source)}: the {what} name is empty or missing.")
    codes, names = pd.factorize(as_str, sort=True)
    return codes.astype(np.int32), tuple(str(n) for n in names)


def _used_names(names: tuple[str, ...], *codes: np.ndarray) -> tuple[tuple[str, ...], np.ndarray]:
    """The ``names`` some code in ``codes`` uses, in their order, and every old code's new code
    among them (the ``compact`` of battles and of pair counts)."""
    used = np.zeros(len(names), dtype=bool)
    for c in codes:
        used[c] = True
    return tuple(n for n, u in zip(names, used, strict=True) if u), np.cumsum(used) - 1


def _unsigned_max(x: np.ndarray) -> int:
    """The largest element of an integer array with negative values read as huge ones (their
    two's-complement unsigned value): ``< k`` exactly when every element lies in 0..k−1."""
    if x.dtype.kind == "i":
        x = x.view(x.dtype.str.replace("i", "u"))
    return int(x.max())


def _first_invalid(a: np.ndarray, b: np.ndarray, outcome: np.ndarray, m: int) -> tuple[int, int]:
    """(first bad row, problem) with problem 1 = model code out of range, 2 = a model against
    itself, 3 = outcome code not 0..3; (-1, 0) when all are valid.

    The common all-valid case costs three reductions and one comparison over the columns (a
    signed code read as unsigned is negative exactly when it is at least 2^(bits−1), so one
    maximum bounds it on both sides); rows are located only when something is wrong."""
    if len(a) == 0:
        return -1, 0
    out_of_range = _unsigned_max(a) >= m or _unsigned_max(b) >= m
    self_battle = bool(np.any(a == b)) if not out_of_range else True
    bad_outcome = _unsigned_max(outcome) > 3
    if not (out_of_range or self_battle or bad_outcome):
        return -1, 0
    problems = np.zeros(len(a), dtype=np.int8)
    problems[(outcome < 0) | (outcome > 3)] = 3
    problems[a == b] = 2
    problems[(a < 0) | (b < 0) | (a >= m) | (b >= m)] = 1
    row = int(np.flatnonzero(problems)[0])
    return row, int(problems[row])


def count_rows(
    a: np.ndarray,
    b: np.ndarray,
    outcome: np.ndarray,
    m: int,
    *,
    weight: np.ndarray | None = None,
    annotator: np.ndarray | None = None,
    n_annotators: int = 1,
) -> tuple[np.ndarray, np.ndarray, np.ndarray | None, np.ndarray]:
    """Aggregate battles (valid codes) into count rows: ``(i, j, annotator, table)`` with
    ``i < j``, one row per (pair[, annotator]) that occurs (zero-weight battles included), rows
    in key order, and ``table`` (rows × 4, float) the weighted A/B/tie/both-bad counts seen from
    i (stored by column on the dense path: each column contiguous).

    The sufficient statistic of every fit (docs/methods/data.md), vectorised: when the (ordered
    pair × annotator × outcome) space is small beside the log, one scatter-add
    (:func:`_ordered_table`) fills a dense model_a × outcome × model_b [× annotator] table that
    is then folded onto i < j (A and B swap where model_a had the larger index); otherwise the
    unordered keys are sorted (``np.unique``) and summed.
    """
    n_ann = n_annotators if annotator is not None else 1
    space = m * m * n_ann
    n = len(a)
    if space * 4 <= max(8 * n, 1 << 20):
        dt = np.int32 if space * 4 < 2**31 else np.int64
        t = _ordered_table(a, b, outcome, m, weight, annotator, n_ann, dt)
        iu, ju, up, low = _fold_positions(m)
        if n_ann > 1:  # (pair, annotator) in key order
            up = (up[:, None] * n_ann + np.arange(n_ann)).ravel()
            low = (low[:, None] * n_ann + np.arange(n_ann)).ravel()
        cols = _fold(t, up, low, m * n_ann)
        if weight is not None and n and not weight.min() > 0:
            # a row of zero-weight battles still exists: count occurrences (with positive
            # weights only, a row occurs exactly when its weighted counts are positive)
            seen = _fold(
                _ordered_table(a, b, outcome, m, None, annotator, n_ann, dt), up, low, m * n_ann
            )
            seen = seen.sum(axis=0)
        else:
            seen = (cols[0] + cols[1]) + (cols[2] + cols[3])
        keep = np.flatnonzero(seen > 0)
        if len(keep) < cols.shape[1]:  # (no copy when every pair [× annotator] occurs)
            cols = cols[:, keep]
        table = cols.T
        if n_ann == 1:  # (no division)
            pair, ann = keep, np.zeros(len(keep), dtype=np.int32)
        else:
            pair, ann = np.divmod(keep, n_ann)
        i, j = iu[pair], ju[pair]
    else:
        a64 = a.astype(np.int64)
        b64 = b.astype(np.int64)
        oc = outcome.astype(np.int64)
        oc ^= (a64 > b64) & (oc < 2)
        key = np.minimum(a64, b64) * m + np.maximum(a64, b64)
        if annotator is not None:
            key = key * n_ann + annotator
        ukey, inv = np.unique(key, return_inverse=True)
        table = np.bincount(inv * 4 + oc, weight, len(ukey) * 4).reshape(len(ukey), 4)
        ann = ukey % n_ann
        pair = ukey // n_ann
        i, j = pair // m, pair % m
    return (
        i.astype(np.int32, copy=False),
        j.astype(np.int32, copy=False),
        ann.astype(np.int32, copy=False) if annotator is not None else None,
        np.asarray(table, dtype=float),
    )


def _ordered_table(
    a: np.ndarray,
    b: np.ndarray,
    outcome: np.ndarray,
    m: int,
    weight: np.ndarray | None,
    annotator: np.ndarray | None,
    n_ann: int,
    dt: type[np.integer],
) -> np.ndarray:
    """The flat model_a × outcome × model_b [× annotator] table (m·4·m·n_ann cells) with
    ``weight[k]`` (1 without weights) added at battle k's cell ``((4·a + o)·m + b)·n_ann + ann``:
    integer counts without weights, floats with; index arithmetic in ``dt``.

    SciPy's compiled ``coo_todense`` when it loads (:mod:`stablearena._scatter`), with row
    4·a + o and column b (the codes themselves without annotators), chunk by chunk; else
    ``np.bincount`` over the flat cell index. The compiled kernel does not check bounds, so
    each chunk's row and column indices are checked first (one unsigned maximum each): a cell
    outside the table is an error, never a write outside it."""
    scatter = coo_todense()
    n = len(a)
    if scatter is None or not n:
        key = np.left_shift(a, 2, dtype=dt)  # then in place: no further temporaries
        key += outcome
        key *= dt(m)
        key += b
        if annotator is not None:
            key *= dt(n_ann)
            key += annotator
        return np.bincount(key, weight, minlength=m * m * n_ann * 4)
    # counts as int32 below 2^31 battles (no cell can overflow), else int64
    vtype = float if weight is not None else np.int32 if n < 2**31 else np.int64
    out = np.zeros(m * m * n_ann * 4, dtype=vtype)
    ones = _ones(np.dtype(vtype)) if weight is None else None
    w = None if weight is None else np.ascontiguousarray(weight, dtype=float)
    # a chunk of the log at a time: its index columns stay in the processor's cache between
    # the passes that build them and the kernel that reads them (1M battles: 1.7 ms against
    # 2.0 in one piece), and no allocation grows with the log
    own_col = annotator is not None or b.dtype != dt or not b.flags.c_contiguous
    buf = np.empty((1 + own_col, min(n, _CHUNK)), dtype=dt)
    for lo in range(0, n, _CHUNK):
        hi = min(lo + _CHUNK, n)
        row = np.left_shift(a[lo:hi], 2, out=buf[0, : hi - lo], dtype=dt)
        row += outcome[lo:hi]
        if own_col:
            col = np.multiply(b[lo:hi], dt(n_ann), out=buf[1, : hi - lo], dtype=dt)
            if annotator is not None:
                col += annotator[lo:hi]
        else:
            col = b[lo:hi]
        if _unsigned_max(row) >= 4 * m or _unsigned_max(col) >= m * n_ann:
            raise InputError(
                "model, annotator or outcome codes outside their ranges: were the arrays of a "
                "validated Battles changed in place? Build a new one with Battles.from_arrays."
            )
        vals = ones[: hi - lo] if w is None else w[lo:hi]
        scatter(4 * m, m * n_ann, hi - lo, row, col, vals, out, 0)
    return out


#: Battles per call of the compiled scatter-add (:func:`_ordered_table`).
_CHUNK = 1 << 18


@lru_cache(maxsize=2)
def _ones(dtype: np.dtype) -> np.ndarray:
    """:data:`_CHUNK` ones (read-only): the values the scatter-add adds without weights."""
    out = np.ones(_CHUNK, dtype=dtype)
    out.flags.writeable = False
    return out


def _fold(t: np.ndarray, up: np.ndarray, low: np.ndarray, stride: int) -> np.ndarray:
    """(4, rows) float counts seen from i of the rows whose cells in the flat model_a × outcome
    × model_b [× annotator] table ``t`` start at ``up`` (i first, outcome 0) and ``low`` (j
    first): an outcome adds ``stride`` = m·n_ann to a cell, and A and B swap from j's side."""
    cols = np.empty((4, len(up)))
    for col, other in ((0, 1), (1, 0), (2, 2), (3, 3)):
        # gathers from offset views: no index arithmetic per outcome
        np.add(t[col * stride :].take(up), t[other * stride :].take(low), out=cols[col])
    return cols


#: :func:`_fold_positions` keeps its arrays for up to this many models (24 bytes per pair:
#: 6 MB at 724 models); larger tables are rebuilt per call, where the counting dwarfs them.
_FOLD_CACHE_MODELS = 724


def _fold_positions(m: int) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """``(i, j, up, low)`` for the pairs i < j of ``m`` models in key order: the models as
    int32 and the flat positions of (i, outcome 0, j) and (j, outcome 0, i) in an m × 4 × m
    table (read-only; cached for up to :data:`_FOLD_CACHE_MODELS` models, where building them
    costs as much as the fold)."""
    return _fold_positions_cached(m) if m <= _FOLD_CACHE_MODELS else _build_fold_positions(m)


@lru_cache(maxsize=4)
def _fold_positions_cached(m: int) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    return _build_fold_positions(m)


def _build_fold_positions(m: int) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    iu, ju = np.triu_indices(m, 1)
    up, low = iu * (4 * m) + ju, ju * (4 * m) + iu
    out = (iu.astype(np.int32), ju.astype(np.int32), up, low)
    for x in out:
        x.flags.writeable = False
    return out


@dataclass(frozen=True, eq=False)
class Battles:
    """A validated battle log: integer-coded arrays plus name tables.

    Attributes:
        models: model names; ``model_a``/``model_b`` index into it.
        model_a, model_b: ``int32`` codes of the two models (``model_a`` shown first).
        outcome: ``int8`` :class:`Outcome` codes.
        annotator, annotators: optional ``int32`` codes and names of the judge.
        prompt, prompts: optional ``int32`` codes and names of the prompt.
        timestamp: optional ``float64`` (seconds, or whatever unit the log used).
        weight: optional non-negative ``float64`` weight of each battle.
        source: where the log came from, used in messages.
        covariates, covariate_names: optional ``float64`` (battles × d) per-battle covariates
            (e.g. style differences, :mod:`stablearena.data.style_features`) and their names.
        extra: optional other columns of the log kept by name (``read_battles(extra=...)``), for
            category filters and covariates; each a per-battle array.
        sampling_weights: whether ``weight`` holds sampling weights (inverse propensities,
            :meth:`with_ipw`) rather than frequency weights (a weight counts its battle that
            many times). Point estimates read both alike; the variance does not: the pair
            counts then also carry Σ w² per outcome (:attr:`PairCounts.squares`) for the
            sampling-weight sandwich (docs/methods/uncertainty.md).
    """

    models: tuple[str, ...]
    model_a: np.ndarray
    model_b: np.ndarray
    outcome: np.ndarray
    annotator: np.ndarray | None = None
    annotators: tuple[str, ...] | None = None
    prompt: np.ndarray | None = None
    prompts: tuple[str, ...] | None = None
    timestamp: np.ndarray | None = None
    weight: np.ndarray | None = None
    source: str = field(default="<memory>", compare=False)
    covariates: np.ndarray | None = None
    covariate_names: tuple[str, ...] | None = None
    extra: Mapping[str, np.ndarray] | None = field(default=None, repr=False)
    sampling_weights: bool = False

    def __post_init__(self) -> None:
        n = len(self.model_a)
        if self.sampling_weights and self.weight is None:
            raise InputError(f"{self.source}: sampling_weights=True needs a weight column.")
        m = len(self.models)
        _check_optional_columns(self, n)
        if len(set(self.models)) != m:
            raise InputError(f"{self.source}: model names must be unique.")
        for name in ("model_b", "outcome", "annotator", "prompt", "timestamp", "weight"):
            arr = getattr(self, name)
            if arr is not None and len(arr) != n:
                raise InputError(
                    f"{self.source}: column {name} has {len(arr)} rows, model_a has {n}."
                )
        a, b = self.model_a, self.model_b
        row, problem = _first_invalid(a, b, self.outcome, m) if n else (-1, 0)
        if problem == 1:
            raise InputError(
                f"{_row_hint(np.array([row]), self.source)}: model code outside 0..{m - 1}."
            )
        if problem == 2:
            same = np.flatnonzero(a == b)
            raise InputError(
                f"{_row_hint(same, self.source)}: model {self.models[a[same[0]]]!r} battles itself. "
                "Remove self-battles from the log."
            )
        if problem == 3:
            raise InputError(
                f"{_row_hint(np.array([row]), self.source)}: outcome code {int(self.outcome[row])} "
                "is not 0..3 (see stablearena.Outcome)."
            )
        for codes, names, what in (
            (self.annotator, self.annotators, "annotator"),
            (self.prompt, self.prompts, "prompt"),
        ):
            if (codes is None) != (names is None):
                raise InputError(f"{self.source}: {what} codes and {what} names go together.")
            if codes is not None and n and (codes.min() < 0 or codes.max() >= len(names)):
                raise InputError(f"{self.source}: {what} codes must index the {what} names.")
        if self.weight is not None:
            check_weights(self.weight, self.source)

    # ------------------------------------------------------------------ construction
    @classmethod
    def from_arrays(
        cls,
        model_a: Sequence | np.ndarray,
        model_b: Sequence | np.ndarray,
        outcome: Sequence | np.ndarray,
        *,
        models: Sequence[str] | None = None,
        annotator: Sequence | np.ndarray | None = None,
        prompt: Sequence | np.ndarray | None = None,
        timestamp: Sequence | np.ndarray | None = None,
        weight: Sequence | np.ndarray | None = None,
        source: str = "<memory>",
    ) -> Battles:
        """Build battles from columns.

        ``model_a``/``model_b`` are either integer codes into ``models`` or model names (then
        ``models`` is derived, sorted). ``outcome`` is integer :class:`Outcome` codes when it is an
        integer array, otherwise labels or numeric scores as in :func:`parse_outcomes`.
        """
        a = np.asarray(model_a)
        b = np.asarray(model_b)
        if not (np.issubdtype(a.dtype, np.integer) and np.issubdtype(b.dtype, np.integer)):
            # keep missing values (None/NaN) visible as such, not as the text 'nan'
            a = np.asarray(model_a, dtype=object)
            b = np.asarray(model_b, dtype=object)
        if len(a) != len(b):
            raise InputError(f"{source}: model_a has {len(a)} rows, model_b has {len(b)}.")
        if models is None:
            codes, names = _encode_names(np.concatenate([a, b]), "model", source)
            a_codes, b_codes = codes[: len(a)], codes[len(a) :]
        else:
            names = tuple(str(x) for x in models)
            if not (np.issubdtype(a.dtype, np.integer) and np.issubdtype(b.dtype, np.integer)):
                raise InputError(
                    f"{source}: with models= given, model_a/model_b must be integer codes."
                )
            # copies: a validated log must not change when the caller later edits its arrays;
            # both in one allocation (two of 4 MB per million battles let malloc hand the
            # memory back to the system after each use and fault it in again on the next:
            # 2,400 page faults and 6 ms per million battles in a fresh process; measured)
            a_codes, b_codes = np.empty((2, len(a)), dtype=np.int32)
            a_codes[...] = a
            b_codes[...] = b
        oc = np.asarray(outcome)
        if (
            np.issubdtype(oc.dtype, np.integer)
            and oc.dtype != np.bool_
            and (len(oc) == 0 or oc.max() <= 3)
        ):
            if len(oc) and oc.min() < 0:
                raise InputError(f"{source}: outcome codes must be 0..3 (see stablearena.Outcome).")
            out_codes = oc.astype(np.int8)
        else:
            out_codes = parse_outcomes(oc, source)
        ann_codes = ann_names = pr_codes = pr_names = None
        if annotator is not None:
            ann_codes, ann_names = _encode_names(annotator, "annotator", source)
        if prompt is not None:
            pr_codes, pr_names = _encode_names(prompt, "prompt", source)
        return cls(
            models=names,
            model_a=a_codes,
            model_b=b_codes,
            outcome=out_codes,
            annotator=ann_codes,
            annotators=ann_names,
            prompt=pr_codes,
            prompts=pr_names,
            timestamp=None if timestamp is None else np.asarray(timestamp, dtype=float),
            weight=None if weight is None else np.asarray(weight, dtype=float),
            source=source,
        )

    # ------------------------------------------------------------------ basic views
    def __len__(self) -> int:
        return len(self.model_a)

    @property
    def n_models(self) -> int:
        return len(self.models)

    @property
    def scores(self) -> np.ndarray:
        """W of model_a for each battle: 1 won, 0 lost, 0.5 tie (either kind)."""
        return _SCORE_A[self.outcome]

    def weights(self) -> np.ndarray:
        """Per-battle weights (ones when the log has none)."""
        return np.ones(len(self)) if self.weight is None else self.weight

    def battles_per_model(self) -> np.ndarray:
        """Number of battles (weighted) each model took part in."""
        w = self.weights()
        m = self.n_models
        return np.bincount(self.model_a, w, m) + np.bincount(self.model_b, w, m)

    def take(self, index: np.ndarray) -> Battles:
        """A new log with the battles at ``index`` (integer positions or a boolean mask), in that order."""
        idx = np.asarray(index)

        def sub(x: np.ndarray | None) -> np.ndarray | None:
            return None if x is None else x[idx]

        return replace(
            self,
            model_a=self.model_a[idx],
            model_b=self.model_b[idx],
            outcome=self.outcome[idx],
            annotator=sub(self.annotator),
            prompt=sub(self.prompt),
            timestamp=sub(self.timestamp),
            weight=sub(self.weight),
            covariates=sub(self.covariates),
            extra=None if self.extra is None else {k: v[idx] for k, v in self.extra.items()},
        )

    def with_ipw(
        self, propensity: Sequence | np.ndarray | None = None, *, column: str = "propensity"
    ) -> Battles:
        """The same battles weighted by their inverse propensities as sampling weights.

        Each battle gets w_b = 1/π_b normalised to mean 1 (:func:`ipw_weights`, which names the
        row and value of a missing, non-finite or out-of-(0, 1] propensity). π is
        ``propensity`` (one per battle) when given, else the log's extra column ``column``
        (``read_battles(path, extra=["propensity"])``; the live arena's export names it
        ``propensity``). The result has ``sampling_weights=True``: its pair counts carry the
        squared weights, ``covariance(fitted, "sandwich")`` uses them, and Fisher intervals
        and the battle bootstrap are refused (docs/methods/uncertainty.md). A log that already
        has weights is refused rather than reweighted silently."""
        if self.weight is not None:
            what = "sampling (inverse-propensity)" if self.sampling_weights else "frequency"
            raise InputError(
                f"{self.source}: the log already has {what} weights; inverse-propensity weights "
                "would replace them. Drop the weight column (or its --col weight= mapping) to "
                "weight by 1/propensity."
            )
        if propensity is None:
            cols = self.extra or {}
            if column not in cols:
                raise InputError(
                    f"{self.source}: no propensity column {column!r} to weight by (the live "
                    "arena's export has one per battle: the probability its pair was drawn "
                    "with). Read it with read_battles(..., extra=[" + repr(column) + "]), or "
                    "name the column with --col propensity=NAME."
                )
            propensity = cols[column]
        p = np.asarray(propensity)
        if len(p) != len(self):
            raise InputError(
                f"{self.source}: {len(p)} propensities for {len(self)} battles; give one per battle."
            )
        return replace(self, weight=ipw_weights(p, self.source), sampling_weights=True)

    def with_outcome(self, outcome: np.ndarray) -> Battles:
        """The same battles with other outcome codes (used by perturbations)."""
        return replace(self, outcome=np.asarray(outcome, dtype=np.int8))

    def compact(self) -> Battles:
        """Drop models (and annotators, prompts) that no longer occur, re-coding the rest."""
        models, new = _used_names(self.models, self.model_a, self.model_b)
        out = replace(
            self,
            models=models,
            model_a=new[self.model_a].astype(np.int32),
            model_b=new[self.model_b].astype(np.int32),
        )
        for codes_name, names_name in (("annotator", "annotators"), ("prompt", "prompts")):
            codes = getattr(out, codes_name)
            if codes is None:
                continue
            names, remap = _used_names(getattr(out, names_name), codes)
            out = replace(out, **{codes_name: remap[codes].astype(np.int32), names_name: names})
        return out

    # ------------------------------------------------------------------ filters
    def drop_both_bad(self) -> Battles:
        """Remove TIE_BOTH_BAD battles (``--both-bad drop``)."""
        return self.take(self.outcome != Outcome.TIE_BOTH_BAD).compact()

    def filter(
        self,
        *,
        exclude_models: Sequence[str] = (),
        min_battles: int = 0,
        both_bad: BothBad = "tie",
    ) -> Battles:
        """Apply the standard filters and drop models left with no battles.

        ``exclude_models`` removes every battle of those models (unknown names are an error);
        ``min_battles`` removes models with fewer battles, repeatedly until every remaining model
        has at least that many (removing a model lowers its opponents' counts);
        ``both_bad="drop"`` removes both-bad ties.
        """
        return _filtered(
            self,
            lambda d: (d.model_a, d.model_b),
            exclude_models=exclude_models,
            min_battles=min_battles,
            both_bad=both_bad,
            what="battles",
        )

    # ------------------------------------------------------------------ aggregation
    def counts(self, *, by_annotator: bool = False) -> PairCounts:
        """Aggregate into :class:`PairCounts` (per annotator too when ``by_annotator``)."""
        if by_annotator and self.annotator is None:
            raise InputError(f"{self.source}: the log has no annotator column.")
        if self.weight is not None and not np.isfinite(self.weight.sum()):
            raise InputError(
                f"{self.source}: the weights sum past the largest floating-point number; a weight "
                "counts its battle that many times (1 = one battle): rescale them (e.g. to mean 1)."
            )
        i, j, ann, table = count_rows(
            self.model_a,
            self.model_b,
            self.outcome,
            self.n_models,
            weight=self.weight,
            annotator=self.annotator if by_annotator else None,
            n_annotators=len(self.annotators) if by_annotator else 1,  # type: ignore[arg-type]
        )
        squares = None
        if self.sampling_weights:
            assert self.weight is not None
            i2, j2, _, squares = count_rows(
                self.model_a,
                self.model_b,
                self.outcome,
                self.n_models,
                weight=self.weight * self.weight,
                annotator=self.annotator if by_annotator else None,
                n_annotators=len(self.annotators) if by_annotator else 1,  # type: ignore[arg-type]
            )
            # the same rows: a row exists where a battle does, whatever its weight
            assert np.array_equal(i2, i) and np.array_equal(j2, j)
            squares = np.ascontiguousarray(squares)
        with _counted():  # valid by construction: codes and weights were checked
            return PairCounts(
                models=self.models,
                i=i,
                j=j,
                # contiguous columns: views when count_rows stored the table by column
                wins=np.ascontiguousarray(table[:, 0]),
                losses=np.ascontiguousarray(table[:, 1]),
                ties=np.ascontiguousarray(table[:, 2]),
                ties_both_bad=np.ascontiguousarray(table[:, 3]),
                annotator=ann,
                annotators=self.annotators if by_annotator else None,
                source=self.source,
                squares=squares,
            )

    def to_frame(self) -> pd.DataFrame:
        """The log as a DataFrame with model names and outcome labels."""
        import pandas as pd

        names = np.array(self.models, dtype=object)
        labels = np.array(["model_a", "model_b", "tie", "tie (bothbad)"], dtype=object)
        df = pd.DataFrame(
            {
                "model_a": names[self.model_a],
                "model_b": names[self.model_b],
                "winner": labels[self.outcome],
            }
        )
        if self.annotator is not None:
            df["judge"] = np.array(self.annotators, dtype=object)[self.annotator]
        if self.prompt is not None:
            df["prompt"] = np.array(self.prompts, dtype=object)[self.prompt]
        if self.timestamp is not None:
            df["tstamp"] = self.timestamp
        if self.weight is not None:
            df["weight"] = self.weight
        return df


#: Set while :meth:`Battles.counts` builds its :class:`PairCounts`: rows from
#: :func:`count_rows` over validated codes satisfy the checks by construction, so they are not
#: run again (0.1 ms at 20k rows).
_COUNTED: ContextVar[bool] = ContextVar("stablearena_counted", default=False)


@contextmanager
def _counted() -> Iterator[None]:
    token = _COUNTED.set(True)
    try:
        yield
    finally:
        _COUNTED.reset(token)


@dataclass(frozen=True, eq=False)
class PairCounts:
    """The sufficient statistic: weighted outcome counts per unordered pair ``i < j``.

    Rows are unique ``(i, j)`` pairs, or ``(i, j, annotator)`` triples when ``annotator`` is set.
    ``wins`` counts battles won by ``i``, ``losses`` battles won by ``j``; ``ties`` and
    ``ties_both_bad`` the two kinds of tie. Counts are floats so that weighted logs and
    bootstrap resamples use the same type.

    ``squares`` (rows × 4, optional): Σ w² of the battles behind each count — wins, losses,
    ties, both-bad ties, in that order — when the weights are sampling weights
    (:meth:`Battles.with_ipw`); ``None`` for unweighted logs and frequency weights, where a
    weight counts its battle that many times. With it the counts stay the one sufficient
    statistic of the sampling-weight sandwich (docs/methods/uncertainty.md). It follows the
    rows through :meth:`take`, :meth:`collapse`, :meth:`compact` and the filters; counts
    replaced by :meth:`with_counts` (a resample) have none.
    """

    models: tuple[str, ...]
    i: np.ndarray
    j: np.ndarray
    wins: np.ndarray
    losses: np.ndarray
    ties: np.ndarray
    ties_both_bad: np.ndarray
    annotator: np.ndarray | None = None
    annotators: tuple[str, ...] | None = None
    source: str = field(default="<memory>", compare=False)
    squares: np.ndarray | None = field(default=None, repr=False)

    def __post_init__(self) -> None:
        n = len(self.i)
        for name in ("j", "wins", "losses", "ties", "ties_both_bad"):
            if len(getattr(self, name)) != n:
                raise InputError(f"{self.source}: pair-count column {name} has the wrong length.")
        sq = self.squares
        if sq is not None and (
            sq.shape != (n, 4) or (n and not (sq.min() >= 0 and np.isfinite(sq.max())))
        ):
            raise InputError(
                f"{self.source}: squares must be rows × 4 finite non-negative sums of squared "
                f"weights, got shape {sq.shape}."
            )
        if n and not _COUNTED.get():
            m = len(self.models)
            if self.i.min() < 0 or self.j.max() >= m or np.any(self.i >= self.j):
                raise InputError(f"{self.source}: pair counts need 0 <= i < j < {m} in every row.")
            for name in ("wins", "losses", "ties", "ties_both_bad"):
                x = getattr(self, name)
                # two reductions, no temporary: a NaN fails the first test, ±inf one of them
                if not (x.min() >= 0 and np.isfinite(x.max())):
                    raise InputError(
                        f"{self.source}: {name} counts must be finite and non-negative."
                    )

    # ------------------------------------------------------------------ construction
    @classmethod
    def from_arrays(
        cls,
        models: Sequence[str],
        pairs: np.ndarray,
        outcomes: np.ndarray,
        source: str = "<memory>",
    ) -> PairCounts:
        """From leaderbot's layout: ``pairs`` (n, 2) model indices, ``outcomes`` (n, 3 or 4) as
        ``[wins of first, wins of second, ties, (both-bad ties)]``. Rows may be in either order
        and repeat; they are oriented to ``i < j`` and summed."""
        names = tuple(str(x) for x in models)
        p = np.asarray(pairs)
        y = np.asarray(outcomes, dtype=float)
        if (
            p.ndim != 2
            or p.shape[1] != 2
            or y.ndim != 2
            or y.shape[0] != p.shape[0]
            or y.shape[1] not in (3, 4)
        ):
            raise InputError(
                f"{source}: expected X as n×2 model indices and Y as n×3 or n×4 counts, got "
                f"{p.shape} and {y.shape}."
            )
        if y.shape[1] == 3:
            y = np.column_stack([y, np.zeros(len(y))])
        m = len(names)
        if len(p) and (p.min() < 0 or p.max() >= m):
            raise InputError(f"{source}: a model index in X lies outside 0..{m - 1}.")
        same = np.flatnonzero(p[:, 0] == p[:, 1])
        if len(same):
            raise InputError(
                f"{source}: pair row {same[0]} has model {names[p[same[0], 0]]!r} against itself."
            )
        if not np.all(np.isfinite(y)) or (len(y) and y.min() < 0):
            raise InputError(f"{source}: Y must hold finite non-negative counts.")
        check_total(float(y.sum()), source)
        rows = y.sum(axis=1)
        small = np.flatnonzero((rows > 0) & (rows < rows.max() / WEIGHT_RANGE))
        if len(small):
            raise InputError(
                f"{source}: pair row {small[0]} holds {rows[small[0]]:.3g} comparisons, more than "
                f"{WEIGHT_RANGE:.0e} times fewer than the largest row ({rows.max():.3g}), too few "
                "to count in double precision; set them to 0 or rescale the counts."
            )
        swap = p[:, 0] > p[:, 1]
        i = np.where(swap, p[:, 1], p[:, 0]).astype(np.int64)
        j = np.where(swap, p[:, 0], p[:, 1]).astype(np.int64)
        w = np.where(swap, y[:, 1], y[:, 0])
        lo = np.where(swap, y[:, 0], y[:, 1])
        key, inv = np.unique(i * m + j, return_inverse=True)
        k = len(key)
        return cls(
            models=names,
            i=(key // m).astype(np.int32),
            j=(key % m).astype(np.int32),
            wins=np.bincount(inv, w, k),
            losses=np.bincount(inv, lo, k),
            ties=np.bincount(inv, y[:, 2], k),
            ties_both_bad=np.bincount(inv, y[:, 3], k),
            source=source,
        )

    # ------------------------------------------------------------------ views
    @property
    def n_models(self) -> int:
        return len(self.models)

    def __len__(self) -> int:
        return len(self.i)

    @property
    def totals(self) -> np.ndarray:
        """Comparisons per row (wins + losses + both kinds of tie)."""
        return self.wins + self.losses + self.ties + self.ties_both_bad

    @property
    def all_ties(self) -> np.ndarray:
        """Ties of either kind per row."""
        return self.ties + self.ties_both_bad

    @property
    def score(self) -> np.ndarray:
        """Σ W of model i per row: wins + ½ ties (docs/methods/data.md)."""
        return self.wins + 0.5 * self.all_ties

    @property
    def n_comparisons(self) -> float:
        return float(self.totals.sum())

    @property
    def sampling_weights(self) -> bool:
        """Whether the counts are sums of sampling weights (they carry :attr:`squares`)."""
        return self.squares is not None

    def battles_per_model(self) -> np.ndarray:
        t = self.totals
        m = self.n_models
        return np.bincount(self.i, t, m) + np.bincount(self.j, t, m)

    def collapse(self) -> PairCounts:
        """Sum over annotators: one row per pair."""
        if self.annotator is None:
            return self
        m = self.n_models
        key, inv = np.unique(self.i.astype(np.int64) * m + self.j, return_inverse=True)
        k = len(key)
        sq = self.squares
        return PairCounts(
            models=self.models,
            i=(key // m).astype(np.int32),
            j=(key % m).astype(np.int32),
            wins=np.bincount(inv, self.wins, k),
            losses=np.bincount(inv, self.losses, k),
            ties=np.bincount(inv, self.ties, k),
            ties_both_bad=np.bincount(inv, self.ties_both_bad, k),
            source=self.source,
            squares=None
            if sq is None
            else np.column_stack([np.bincount(inv, sq[:, c], k) for c in range(4)]),
        )

    def take(self, index: np.ndarray) -> PairCounts:
        """Rows at ``index`` (positions or mask)."""
        idx = np.asarray(index)
        return replace(
            self,
            i=self.i[idx],
            j=self.j[idx],
            wins=self.wins[idx],
            losses=self.losses[idx],
            ties=self.ties[idx],
            ties_both_bad=self.ties_both_bad[idx],
            annotator=None if self.annotator is None else self.annotator[idx],
            squares=None if self.squares is None else self.squares[idx],
        )

    def with_counts(
        self,
        wins: np.ndarray,
        losses: np.ndarray,
        ties: np.ndarray,
        ties_both_bad: np.ndarray | None = None,
    ) -> PairCounts:
        """Same rows, other counts (bootstrap resamples, simulations); without :attr:`squares`
        (they described the old counts)."""
        return replace(
            self,
            squares=None,
            wins=np.asarray(wins, dtype=float),
            losses=np.asarray(losses, dtype=float),
            ties=np.asarray(ties, dtype=float),
            ties_both_bad=np.zeros(len(self.i))
            if ties_both_bad is None
            else np.asarray(ties_both_bad, dtype=float),
        )

    def drop_both_bad(self) -> PairCounts:
        """Both-bad ties removed (``--both-bad drop``); rows left empty are removed."""
        sq = None
        if self.squares is not None:
            sq = self.squares.copy()
            sq[:, 3] = 0.0
        out = replace(self, ties_both_bad=np.zeros(len(self.i)), squares=sq)
        return out.take(out.totals > 0)

    def compact(self) -> PairCounts:
        """Drop models (and annotators) that occur in no row, re-coding the rest."""
        models, new = _used_names(self.models, self.i, self.j)
        out = replace(
            self, models=models, i=new[self.i].astype(np.int32), j=new[self.j].astype(np.int32)
        )
        if out.annotator is not None and out.annotators is not None:
            annotators, remap = _used_names(out.annotators, out.annotator)
            out = replace(
                out, annotator=remap[out.annotator].astype(np.int32), annotators=annotators
            )
        return out

    def filter(
        self,
        *,
        exclude_models: Sequence[str] = (),
        min_battles: int = 0,
        both_bad: BothBad = "tie",
    ) -> PairCounts:
        """The filters of :meth:`Battles.filter`, applied to counts."""
        return _filtered(
            self.nonempty(),
            lambda d: (d.i, d.j),
            exclude_models=exclude_models,
            min_battles=min_battles,
            both_bad=both_bad,
            what="comparisons",
        )

    def nonempty(self) -> PairCounts:
        """Rows with at least one comparison."""
        return self.take(self.totals > 0)

    def matrix(self) -> np.ndarray:
        """Dense m×m matrix of Σ W: entry (a, b) = wins of a over b + ½ ties."""
        m = self.n_models
        c = self.collapse()
        out = np.zeros((m, m))
        np.add.at(out, (c.i, c.j), c.score)
        np.add.at(out, (c.j, c.i), c.losses + 0.5 * c.all_ties)
        return out

    def to_frame(self) -> pd.DataFrame:
        import pandas as pd

        names = np.array(self.models, dtype=object)
        df = pd.DataFrame(
            {
                "model_i": names[self.i],
                "model_j": names[self.j],
                "wins": self.wins,
                "losses": self.losses,
                "ties": self.ties,
                "ties_both_bad": self.ties_both_bad,
            }
        )
        if self.annotator is not None:
            df["annotator"] = np.array(self.annotators, dtype=object)[self.annotator]
        return df


def _check_optional_columns(battles: Battles, n: int) -> None:
    """Covariates and extra columns: one entry per battle; covariates finite and named."""
    src = battles.source
    cov = battles.covariates
    if (cov is None) != (battles.covariate_names is None):
        raise InputError(f"{src}: covariates and covariate_names go together.")
    if cov is not None:
        if cov.ndim != 2 or cov.shape[0] != n or cov.shape[1] != len(battles.covariate_names):  # type: ignore[arg-type]
            raise InputError(
                f"{src}: covariates must be battles × {len(battles.covariate_names)} "  # type: ignore[arg-type]
                f"(one column per name), got shape {cov.shape} for {n} battles."
            )
        bad = np.flatnonzero(~np.isfinite(cov).all(axis=1))
        if len(bad):
            k = int(np.flatnonzero(~np.isfinite(cov[bad[0]]))[0])
            raise InputError(
                f"{_row_hint(bad, src)}: covariate {battles.covariate_names[k]!r} is "  # type: ignore[index]
                f"{cov[bad[0], k]!r}, not a finite number."
            )
    for name, col in (battles.extra or {}).items():
        if len(col) != n:
            raise InputError(f"{src}: extra column {name!r} has {len(col)} rows, model_a has {n}.")


def _filtered(
    data: Any,
    ends: Callable[[Any], tuple[np.ndarray, np.ndarray]],
    *,
    exclude_models: Sequence[str],
    min_battles: int,
    both_bad: str,
    what: str,
) -> Any:
    """The standard filters, shared by :class:`Battles` and :class:`PairCounts` (``ends`` gives
    each row's two model indices). Models left without rows are dropped after every step."""
    out = data
    if both_bad == "drop":
        out = out.drop_both_bad()
    elif both_bad != "tie":
        raise InputError(f"both_bad must be 'tie' or 'drop', not {both_bad!r}.")
    if exclude_models:
        unknown = sorted(set(exclude_models) - set(out.models))
        if unknown:
            raise InputError(f"{data.source}: cannot exclude unknown model(s) {unknown}.")
        bad = np.array([n in set(exclude_models) for n in out.models])
        a, b = ends(out)
        out = out.take(~(bad[a] | bad[b])).compact()
    while min_battles > 0 and len(out):
        small = out.battles_per_model() < min_battles
        if not small.any():
            break
        a, b = ends(out)
        out = out.take(~(small[a] | small[b])).compact()
    if len(out) == 0:
        if len(data) == 0:
            raise InputError(
                f"{data.source}: there are no {what} (every count or weight is zero); there is "
                "nothing to rate."
            )
        raise InputError(f"{data.source}: no {what} are left after filtering.")
    return out


def check_total(total: float, source: str) -> None:
    """Raise :class:`InputError` when a positive number of comparisons lies outside
    [:data:`MIN_TOTAL_WEIGHT`, :data:`MAX_TOTAL_WEIGHT`] (see :func:`check_weights`)."""
    if total > 0 and not MIN_TOTAL_WEIGHT <= total <= MAX_TOTAL_WEIGHT:
        side = "less than one" if total < MIN_TOTAL_WEIGHT else f"more than {MAX_TOTAL_WEIGHT:.0e}"
        raise InputError(
            f"{source}: the comparisons sum to {total:.6g}, {side}. Counts and weights count "
            "battles, and fits, priors and standard errors are in battle units; rescale them "
            "(e.g. to mean 1 per battle)."
        )


def as_counts(data: Battles | PairCounts, *, by_annotator: bool = False) -> PairCounts:
    """The pair counts of ``data`` (itself when it already is counts); their total must lie in
    [1, 1e15] comparisons (:func:`check_total`)."""
    if isinstance(data, PairCounts):
        out = data if by_annotator else data.collapse()
    elif isinstance(data, Battles):
        if len(data) == 0:
            raise InputError(f"{data.source}: the battle log is empty.")
        out = data.counts(by_annotator=by_annotator)
    else:
        raise InputError(f"expected Battles or PairCounts, got {type(data).__name__}.")
    check_total(out.n_comparisons, out.source)
    return out
