"""Style covariates of battles: LMArena's four style features and user-named covariates (docs/methods/style.md).

LMArena's style control (FastChat ``elo_analysis``/``rating_systems``; arena-hard-auto
``add_markdown_info.py``) describes each answer by

- **length**: tokens of the assistant turns (LMArena: GPT-4o's ``o200k_base`` BPE via tiktoken);
- **headers**: markdown header lines ``^#{1,6}\\s``;
- **lists**: list items, ordered ``^\\s*\\d+\\.\\s`` plus unordered ``^\\s*[-*+]\\s``;
- **bold**: bold spans ``\\*\\*[^*\\n]+\\*\\*`` plus ``__[^_\\n]+__``;

the markdown elements counted after removing fenced code blocks (between lines of three
backticks), the tokens on the
whole answer, summed over the assistant turns. Each feature enters the model as the normalised
difference (a − b)/(a + b + 1) of the two answers, standardised over the battles at fit time
(:mod:`stablearena.raters.style`).

Tokens without a download: tiktoken needs to fetch its vocabulary, which an offline machine
cannot, so :func:`count_tokens` counts words and punctuation marks instead (the regex
``\\w+|[^\\w\\s]``). How it compares with GPT-4o's tokenizer is measured in
``bench/bench_style.py --tokens`` (README, "Style control and category boards").

Covariates come from, in this order of preference when none are named:

1. LMArena's per-side metadata (``conv_metadata`` with ``sum_assistant_a_tokens``/``_b``,
   ``header_count_a`` {h1…h6}, ``list_count_a`` {ordered, unordered}, ``bold_count_a`` {``**``,
   ``__``} and the ``_b`` twins), nested or flattened to top-level columns;
2. answer text columns (``conversation_a``/``_b`` lists of turns, or ``response_a``/``_b``,
   ``answer_a``/``_b``, ``output_a``/``_b`` strings);

or from named columns: ``"len_a:len_b"`` (two per-side numeric columns, normalised difference
computed) or ``"diff"`` (a ready difference column, used as it is).
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from dataclasses import replace
from typing import Any

import numpy as np

from ..errors import InputError
from .battles import Battles

__all__ = [
    "STYLE_FEATURES",
    "count_tokens",
    "style_counts",
    "answer_text",
    "normalized_difference",
    "style_differences",
    "add_covariates",
    "with_covariates",
    "simulate_style_battles",
]

#: LMArena's four style features, in the order the covariates are built.
STYLE_FEATURES: tuple[str, ...] = ("length", "headers", "lists", "bold")

_CODE_BLOCK = re.compile(r"```[^`]*```")
_TOKEN = re.compile(r"\w+|[^\w\s]")
_HEADER = re.compile(r"^#{1,6}\s", re.MULTILINE)
_ORDERED = re.compile(r"^\s*\d+\.\s", re.MULTILINE)
_UNORDERED = re.compile(r"^\s*[-*+]\s", re.MULTILINE)
_BOLD = (re.compile(r"\*\*[^*\n]+\*\*"), re.compile(r"__[^_\n]+__"))

#: Per-side metadata fields of LMArena's public preference data ({side} is a or b).
_META_FIELDS: dict[str, str] = {
    "length": "sum_assistant_{side}_tokens",
    "headers": "header_count_{side}",
    "lists": "list_count_{side}",
    "bold": "bold_count_{side}",
}
_META_PREFIXES: tuple[str, ...] = ("conv_metadata.", "")
#: Answer-text column pairs recognised (first match wins).
TEXT_COLUMNS: tuple[tuple[str, str], ...] = (
    ("conversation_a", "conversation_b"),
    ("response_a", "response_b"),
    ("answer_a", "answer_b"),
    ("output_a", "output_b"),
)


# ---------------------------------------------------------------------------------- text
def count_tokens(text: str) -> int:
    """Words and punctuation marks in ``text`` (``\\w+|[^\\w\\s]``): the offline length measure."""
    return len(_TOKEN.findall(text))


def style_counts(text: str) -> tuple[int, int, int, int]:
    """(tokens, headers, list items, bold spans) of one answer (module docstring: the markdown
    elements are counted with fenced code blocks removed, the tokens on the whole answer)."""
    plain = _CODE_BLOCK.sub("", text)
    return (
        count_tokens(text),
        len(_HEADER.findall(plain)),
        len(_ORDERED.findall(plain)) + len(_UNORDERED.findall(plain)),
        sum(len(p.findall(plain)) for p in _BOLD),
    )


def _content_text(content: Any) -> str:
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, dict):
        for key in ("text", "answer", "content"):
            if key in content:
                return _content_text(content[key])
        return ""
    if isinstance(content, (list, tuple, np.ndarray)):
        return "\n".join(_content_text(c) for c in content)
    return str(content)


def answer_text(cell: Any) -> list[str]:
    """The assistant turns of one answer cell: a string is one turn; a conversation (a list of
    ``{"role", "content"}`` turns, possibly JSON-encoded) gives its assistant turns, whose content
    may be a string or a list of ``{"type": "text", "text"}`` parts."""
    if cell is None or (isinstance(cell, float) and np.isnan(cell)):
        return []
    if isinstance(cell, str):
        stripped = cell.lstrip()
        if stripped.startswith("[") and '"role"' in stripped:
            try:
                cell = json.loads(stripped)
            except json.JSONDecodeError:
                return [cell]
        else:
            return [cell]
    if isinstance(cell, (list, tuple, np.ndarray)):
        turns = []
        for turn in cell:
            if isinstance(turn, dict) and "role" in turn:
                if turn.get("role") == "assistant":
                    turns.append(_content_text(turn.get("content")))
            else:
                turns.append(_content_text(turn))
        return turns
    return [_content_text(cell)]


def _counts_of_column(values: np.ndarray) -> np.ndarray:
    """battles × 4 style counts, summed over each answer's assistant turns."""
    out = np.zeros((len(values), 4))
    for r, cell in enumerate(values):
        for turn in answer_text(cell):
            out[r] += style_counts(turn)
    return out


# ---------------------------------------------------------------------------------- differences
def normalized_difference(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """(a − b) / (a + b + 1): LMArena's normalised style difference (0 for equal answers, in
    (−1, 1) for non-negative counts)."""
    a = np.asarray(a, dtype=float)
    b = np.asarray(b, dtype=float)
    return (a - b) / (a + b + 1.0)


def _column(battles: Battles, name: str) -> np.ndarray | None:
    extra = battles.extra or {}
    return extra.get(name)


def _numeric_side(battles: Battles, name: str, what: str) -> np.ndarray | None:
    """A per-side count: the column itself, or the sum of its nested fields (``name.*``)."""
    extra = battles.extra or {}
    if name in extra:
        col = extra[name]
        if col.dtype == object:
            return np.array([_sum_nested(v, battles, name, r) for r, v in enumerate(col)])
        return _finite(col, battles, name, what)
    parts = [k for k in extra if k.startswith(name + ".")]
    if not parts:
        return None
    return sum(_finite(extra[k], battles, k, what) for k in sorted(parts))  # type: ignore[return-value]


def _sum_nested(value: Any, battles: Battles, name: str, row: int) -> float:
    if isinstance(value, dict):
        return float(sum(_sum_nested(v, battles, name, row) for v in value.values()))
    try:
        x = float(value)
    except (TypeError, ValueError):
        x = float("nan")
    if not np.isfinite(x):
        raise InputError(
            f"{battles.source}: data row {row + 1}: {name} is {value!r}, not a count; fix the row or "
            "leave it out (e.g. --where)."
        )
    return x


def _finite(col: np.ndarray, battles: Battles, name: str, what: str) -> np.ndarray:
    x = (
        np.asarray(col, dtype=float)
        if col.dtype != object
        else np.array([_sum_nested(v, battles, name, r) for r, v in enumerate(col)])
    )
    bad = np.flatnonzero(~np.isfinite(x))
    if len(bad):
        raise InputError(
            f"{battles.source}: data row {bad[0] + 1}{f' and {len(bad) - 1} more' if len(bad) > 1 else ''}: "
            f"{what} column {name!r} is missing or not a number; fix or filter those rows."
        )
    return x


def _from_metadata(battles: Battles) -> tuple[np.ndarray, tuple[str, ...]] | None:
    for prefix in _META_PREFIXES:
        sides = {}
        for feature, template in _META_FIELDS.items():
            pair = [
                _numeric_side(battles, prefix + template.format(side=s), "style metadata")
                for s in ("a", "b")
            ]
            if pair[0] is None or pair[1] is None:
                break
            sides[feature] = pair
        if len(sides) == len(_META_FIELDS):
            z = np.column_stack([normalized_difference(*sides[f]) for f in STYLE_FEATURES])
            return z, STYLE_FEATURES
    return None


def _from_text(
    battles: Battles, text_columns: tuple[str, str] | None
) -> tuple[np.ndarray, tuple[str, ...]] | None:
    extra = battles.extra or {}
    candidates = [text_columns] if text_columns is not None else list(TEXT_COLUMNS)
    for col_a, col_b in candidates:
        if col_a in extra and col_b in extra:
            ca = _counts_of_column(extra[col_a])
            cb = _counts_of_column(extra[col_b])
            return normalized_difference(ca, cb), STYLE_FEATURES
        if text_columns is not None:
            missing = [c for c in (col_a, col_b) if c not in extra]
            raise InputError(
                f"{battles.source}: no answer-text column {', '.join(map(repr, missing))} "
                f"(kept columns: {', '.join(extra) or 'none'})."
            )
    return None


def style_differences(
    battles: Battles,
    covariates: Sequence[str] | None = None,
    *,
    text_columns: tuple[str, str] | None = None,
) -> tuple[np.ndarray, tuple[str, ...]]:
    """battles × d normalised differences and their names.

    ``covariates``: column specs ``"A:B"`` (per-side numbers → (a − b)/(a + b + 1), named
    ``A:B``) or ``"D"`` (a ready difference, used as it is). ``None``: LMArena's four features,
    from its metadata or, failing that, from answer text (``text_columns`` names the pair).
    Columns are looked up in :attr:`Battles.extra` (``read_battles(..., extra=...)``)."""
    if covariates:
        cols, names = [], []
        for spec in covariates:
            left, sep, right = spec.partition(":")
            if sep:
                if not left or not right:
                    raise InputError(
                        f"covariate {spec!r} must look like COLUMN_A:COLUMN_B or COLUMN."
                    )
                a = _numeric_side(battles, left, "covariate")
                b = _numeric_side(battles, right, "covariate")
                missing = [c for c, v in ((left, a), (right, b)) if v is None]
                if missing:
                    raise _missing(battles, missing)
                cols.append(normalized_difference(a, b))  # type: ignore[arg-type]
            else:
                d = _numeric_side(battles, spec, "covariate")
                if d is None:
                    raise _missing(battles, [spec])
                cols.append(d)
            names.append(spec)
        if len(set(names)) != len(names):
            raise InputError(f"covariates named twice: {names}.")
        return np.column_stack(cols), tuple(names)
    if text_columns is None:
        found = _from_metadata(battles)
        if found is not None:
            return found
    found = _from_text(battles, text_columns)
    if found is not None:
        return found
    raise InputError(
        f"{battles.source}: no style information. Style control needs LMArena's per-side "
        "metadata (conv_metadata with sum_assistant_a_tokens, header_count_a, list_count_a, "
        "bold_count_a and the _b twins), answer text columns ("
        + ", ".join(f"{a}/{b}" for a, b in TEXT_COLUMNS)
        + "), or covariates named with --covariate A:B (per-side numbers) or --covariate DIFF. "
        f"Kept columns: {', '.join((battles.extra or {}).keys()) or 'none'}."
    )


def _missing(battles: Battles, names: list[str]) -> InputError:
    kept = ", ".join((battles.extra or {}).keys()) or "none"
    return InputError(
        f"{battles.source}: no column {', '.join(map(repr, names))} for the covariate "
        f"(kept columns: {kept})."
    )


def with_covariates(battles: Battles, z: np.ndarray, names: Sequence[str]) -> Battles:
    """The same battles with ``z`` (battles × d) as their covariates, named ``names``."""
    z = np.asarray(z, dtype=float)
    if z.ndim == 1:
        z = z[:, None]
    return replace(battles, covariates=z, covariate_names=tuple(str(n) for n in names))


def add_covariates(
    battles: Battles,
    covariates: Sequence[str] | None = None,
    *,
    text_columns: tuple[str, str] | None = None,
) -> Battles:
    """The battles with the covariates of :func:`style_differences` attached."""
    z, names = style_differences(battles, covariates, text_columns=text_columns)
    return with_covariates(battles, z, names)


# ---------------------------------------------------------------------------------- simulation
def simulate_style_battles(
    true_ratings: np.ndarray,
    n_battles: int,
    gamma: Sequence[float] = (0.25,),
    *,
    abilities: np.ndarray | None = None,
    style_spread: float = 0.5,
    ties: bool = False,
    seed: int | np.random.Generator = 0,
) -> Battles:
    """A simulated arena with a known style effect (vectorised, seeded).

    Each model m has a typical answer length L_m = 400·exp(style_spread·N(0, 1)); each answer's
    length is Poisson(L_m·LogNormal(0, 0.3)) and, for the other features, Poisson counts
    proportional to it. Covariates are the normalised differences, standardised over the
    battles; the outcome is drawn from σ(θ_k (C (r_a − r_b) + γᵀz)) (θ_k = ``abilities`` of a
    uniformly drawn annotator, or 1), with ties (half of the probability mass near ½ as in
    the outcome rule of docs/methods/selection.md) when ``ties``. Returns battles with ``covariates`` set to the *standardised*
    z the outcomes were drawn from (``len(gamma)`` features of :data:`STYLE_FEATURES`) and the
    raw per-side counts in ``extra``."""
    from .._numeric import ELO_SCALE
    from .battles import Outcome

    rng = np.random.default_rng(seed)
    r = np.asarray(true_ratings, dtype=float)
    m = len(r)
    g = np.asarray(gamma, dtype=float)
    d = len(g)
    if not 1 <= d <= 4:
        raise InputError("gamma must have 1 to 4 entries (length, headers, lists, bold).")
    a = rng.integers(0, m, n_battles)
    b = rng.integers(0, m - 1, n_battles)
    b = b + (b >= a)
    typical = 400.0 * np.exp(style_spread * rng.standard_normal(m))
    markdown = np.exp(0.5 * rng.standard_normal((m, 3))) * np.array([0.01, 0.03, 0.02])

    def side(models: np.ndarray) -> np.ndarray:
        length = rng.poisson(typical[models] * rng.lognormal(0.0, 0.3, len(models)))
        other = rng.poisson(markdown[models] * length[:, None])
        return np.column_stack([length, other]).astype(float)

    ca, cb = side(a), side(b)
    diff = normalized_difference(ca, cb)[:, :d]
    z = (diff - diff.mean(axis=0)) / diff.std(axis=0)
    logit = ELO_SCALE * (r[a] - r[b]) + z @ g
    ann = None
    names = None
    if abilities is not None:
        ab = np.asarray(abilities, dtype=float)
        ann = rng.integers(0, len(ab), n_battles).astype(np.int32)
        logit = ab[ann] * logit
        names = tuple(f"ann_{k:03d}" for k in range(len(ab)))
    p = 1.0 / (1.0 + np.exp(-logit))
    u = rng.random(n_battles)
    if ties:
        pa, pb = p * p, (1 - p) * (1 - p)
        outcome = np.where(u < pa, Outcome.A, np.where(u < pa + pb, Outcome.B, Outcome.TIE))
    else:
        outcome = np.where(u < p, Outcome.A, Outcome.B)
    extra = {}
    for k, f in enumerate(STYLE_FEATURES):
        extra[f"{f}_a"] = ca[:, k]
        extra[f"{f}_b"] = cb[:, k]
    return Battles(
        models=tuple(f"model_{k:03d}" for k in range(m)),
        model_a=a.astype(np.int32),
        model_b=b.astype(np.int32),
        outcome=outcome.astype(np.int8),
        annotator=ann,
        annotators=names,
        source="simulated style arena",
        covariates=z,
        covariate_names=STYLE_FEATURES[:d],
        extra=extra,
    )
