"""Simulated arenas with known truth (docs/methods/selection.md, docs/methods/metrics.md).

:func:`simulate_battles` draws battles between models of known Elo-scale ratings, judged by
annotators of known ability. Battles are drawn with pairs uniform at random (or from given
pair probabilities), the position (which model is ``model_a``) at random, and the outcome from
one of these rules:

- ``"bt"``: Bradley–Terry, no ties: A wins with p = σ(θ_k C (r_a − r_b)).
- ``"paper"``: docs/methods/selection.md (Fewer Battles, App. C.2 reconstructed): W = 1 with p², 0 with (1 − p)²,
  ½ (tie) with 2p(1 − p); the expected score is p.
- ``"davidson"``: Davidson's tie model with ν = e^η (docs/methods/ties.md), applied to θ_k C (r_a − r_b).
- ``"rao-kupper"``: Rao–Kupper's tie model with ν = e^η ≥ 1 (docs/methods/ties.md): with z the log-odds,
  A wins with σ(z − η), B with σ(−z − η), and the rest is a tie.

θ_k is the annotator's ability on the mean-1 scale (1 = an average honest annotator; 0 votes at
random; negative votes against the consensus).

The arena loop that chooses battles as it goes (selection + simulation or replay:
``SimulatedArena``, ``ReplayArena``, ``run_arena``, ``Refitter``) is :mod:`stablearena.simulation.arena`,
which builds on this module.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Literal

import numpy as np

from .._numeric import DEFAULT_OFFSET, ELO_SCALE
from ..errors import InputError
from .battles import Battles, Outcome

__all__ = [
    "OutcomeRule",
    "OUTCOME_RULES",
    "simulate_battles",
    "sample_outcomes",
    "outcome_probabilities",
    "random_ratings",
]

OutcomeRule = Literal["bt", "paper", "davidson", "rao-kupper"]
OUTCOME_RULES: tuple[str, ...] = ("bt", "paper", "davidson", "rao-kupper")


def random_ratings(
    n_models: int, *, spread: float = 200.0, seed: int | np.random.Generator = 0
) -> np.ndarray:
    """Elo-scale true ratings: normal with standard deviation ``spread`` around 1000."""
    rng = np.random.default_rng(seed)
    return DEFAULT_OFFSET + spread * rng.standard_normal(n_models)


def outcome_probabilities(
    z: np.ndarray, rule: OutcomeRule = "bt", eta: float = 0.0
) -> tuple[np.ndarray, np.ndarray]:
    """P(model_a wins) and P(model_b wins) for log-odds ``z`` under ``rule`` (the rest is a tie)."""
    z = np.asarray(z, dtype=float)
    if rule == "bt":
        p = 1.0 / (1.0 + np.exp(-z))
        return p, 1.0 - p
    if rule == "paper":
        p = 1.0 / (1.0 + np.exp(-z))
        return p * p, (1 - p) * (1 - p)
    if rule == "davidson":
        ea, eb = np.exp(z / 2), np.exp(-z / 2)
        den = ea + eb + np.exp(eta)
        return ea / den, eb / den
    if rule == "rao-kupper":
        if not eta >= 0:
            raise InputError(f"the Rao–Kupper tie parameter eta must be >= 0, not {eta!r}.")
        return 1.0 / (1.0 + np.exp(eta - z)), 1.0 / (1.0 + np.exp(eta + z))
    raise InputError(f"outcome rule must be one of {', '.join(OUTCOME_RULES)}, not {rule!r}.")


def sample_outcomes(
    z: np.ndarray, rng: np.random.Generator, rule: OutcomeRule = "bt", eta: float = 0.0
) -> np.ndarray:
    """Outcome codes (:class:`Outcome`) for log-odds ``z`` of model_a over model_b."""
    u = rng.random(len(z))
    pa, pb = outcome_probabilities(z, rule, eta)
    if rule == "bt":
        return np.where(u < pa, Outcome.A, Outcome.B).astype(np.int8)
    return np.where(u < pa, Outcome.A, np.where(u < pa + pb, Outcome.B, Outcome.TIE)).astype(
        np.int8
    )


def simulate_battles(
    true_ratings: Sequence[float] | np.ndarray,
    n_battles: int,
    *,
    abilities: Sequence[float] | np.ndarray | None = None,
    annotator_probs: Sequence[float] | np.ndarray | None = None,
    rule: OutcomeRule = "bt",
    eta: float = 0.0,
    pair_probs: np.ndarray | None = None,
    models: Sequence[str] | None = None,
    annotators: Sequence[str] | None = None,
    seed: int | np.random.Generator = 0,
) -> Battles:
    """Simulate ``n_battles`` battles (vectorised; deterministic for a given ``seed``).

    Args:
        true_ratings: Elo-scale ratings of the models (C = ln10/400 per point).
        abilities: θ_k per annotator on the mean-1 scale; ``None`` = one annotator of ability 1
            and no annotator column.
        annotator_probs: how often each annotator judges (default uniform).
        rule, eta: outcome rule (module docstring).
        pair_probs: optional m×m matrix (or flat vector over i<j pairs) of pair sampling weights.
        models, annotators: names (default ``model_000``…, ``ann_000``…).
    """
    rng = np.random.default_rng(seed)
    r = np.asarray(true_ratings, dtype=float)
    m = len(r)
    if m < 2:
        raise InputError("a simulated arena needs at least two models.")
    if n_battles < 0:
        raise InputError("n_battles must be non-negative.")
    if pair_probs is None:
        a = rng.integers(0, m, n_battles)
        b = rng.integers(0, m - 1, n_battles)
        b = b + (b >= a)
    else:
        iu, ju = np.triu_indices(m, 1)
        w = np.asarray(pair_probs, dtype=float)
        w = w[iu, ju] if w.ndim == 2 else w
        if len(w) != len(iu) or np.any(w < 0) or w.sum() <= 0:
            raise InputError(
                "pair_probs must give a non-negative weight to each of the m(m-1)/2 pairs."
            )
        k = rng.choice(len(iu), n_battles, p=w / w.sum())
        flip = rng.random(n_battles) < 0.5
        a = np.where(flip, ju[k], iu[k])
        b = np.where(flip, iu[k], ju[k])
    if abilities is None:
        theta = np.ones(n_battles)
        ann = None
    else:
        ab = np.asarray(abilities, dtype=float)
        probs = (
            None
            if annotator_probs is None
            else np.asarray(annotator_probs, float) / np.sum(annotator_probs)
        )
        ann = rng.choice(len(ab), n_battles, p=probs).astype(np.int32)
        theta = ab[ann]
    z = theta * ELO_SCALE * (r[a] - r[b])
    outcome = sample_outcomes(z, rng, rule, eta)
    names = tuple(models) if models is not None else tuple(f"model_{k:03d}" for k in range(m))
    if len(names) != m:
        raise InputError("models must name every rating.")
    ann_names = None
    if ann is not None:
        n_ann = len(np.asarray(abilities))
        ann_names = (
            tuple(annotators)
            if annotators is not None
            else tuple(f"ann_{k:03d}" for k in range(n_ann))
        )
        if len(ann_names) != n_ann:
            raise InputError("annotators must name every ability.")
    return Battles(
        models=names,
        model_a=a.astype(np.int32),
        model_b=b.astype(np.int32),
        outcome=outcome,
        annotator=ann,
        annotators=ann_names,
        source="simulated arena",
    )
