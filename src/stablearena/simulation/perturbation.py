"""Perturbed annotators and annotator profiles for simulated arenas (docs/methods/metrics.md; am-ELO §5.5).

Perturbations (am-ELO paper, §5.5), applied to *every* vote of a chosen fraction of annotators:

- ``random``: a decisive vote becomes a tie or the opposite vote, 50/50; ties stay.
- ``equal``: every vote becomes a tie.
- ``flip``: A ↔ B; ties stay.
- ``mixed``: each vote is perturbed by one of the three above, chosen uniformly at random.

Annotator *profiles* for simulated arenas (built on :func:`stablearena.data.simulate.simulate_battles`):

- ``honest``: Bradley–Terry votes σ(θ C (r_a − r_b)) with an ability θ drawn from a spread
  (default uniform on [0.5, 1.5], mean 1);
- ``random``: θ = 0, a coin flip between A and B (under the chosen outcome rule);
- ``always_tie``: every vote a tie;
- ``flipper``: an honest annotator's vote reversed (θ drawn as for honest, then negated);
- ``always_a``: position-biased, always votes for the model shown first.

Everything is seeded and vectorised.
"""

from __future__ import annotations

import warnings
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Literal

import numpy as np

from ..choices import PERTURBATIONS
from ..data.battles import Battles, Outcome
from ..data.simulate import OutcomeRule, random_ratings, simulate_battles
from ..errors import InputError, StableArenaWarning

__all__ = [
    "PERTURBATIONS",
    "PROFILES",
    "PerturbationKind",
    "perturb_outcomes",
    "choose_annotators",
    "Perturbed",
    "perturb_annotators",
    "SimulatedArena",
    "simulate_arena",
]

PerturbationKind = Literal["random", "equal", "flip", "mixed"]
PROFILES: tuple[str, ...] = ("honest", "random", "always_tie", "flipper", "always_a")

_FLIP = np.array([Outcome.B, Outcome.A, Outcome.TIE, Outcome.TIE_BOTH_BAD], dtype=np.int8)


def perturb_outcomes(outcome: np.ndarray, kind: str, rng: np.random.Generator) -> np.ndarray:
    """Perturbed copies of :class:`~stablearena.data.battles.Outcome` codes (see module docstring)."""
    oc = np.asarray(outcome, dtype=np.int8)
    if kind == "flip":
        return _FLIP[oc]
    if kind == "equal":
        return np.full(len(oc), Outcome.TIE, dtype=np.int8)
    if kind == "random":
        decisive = oc < Outcome.TIE
        to_tie = rng.random(len(oc)) < 0.5
        out = np.where(decisive, np.where(to_tie, Outcome.TIE, _FLIP[oc]), oc)
        return out.astype(np.int8)
    if kind == "mixed":
        which = rng.integers(0, 3, len(oc))
        rnd = perturb_outcomes(oc, "random", rng)
        out = np.where(which == 0, rnd, np.where(which == 1, Outcome.TIE, _FLIP[oc]))
        return out.astype(np.int8)
    raise InputError(f"perturbation kind must be one of {', '.join(PERTURBATIONS)}, not {kind!r}.")


def choose_annotators(
    n_annotators: int,
    fraction: float,
    rng: np.random.Generator,
    eligible: np.ndarray | None = None,
) -> np.ndarray:
    """Boolean mask of round(fraction × #eligible) annotators drawn without replacement."""
    if not (0.0 <= fraction <= 1.0):
        raise InputError(
            f"the fraction of perturbed annotators must lie in [0, 1], not {fraction!r}."
        )
    if fraction > 0.5:
        warnings.warn(
            f"perturbing {fraction:.0%} of annotators: above half, am-ELO's normalisation (the "
            "majority is honest) orients the ranking by the perturbed annotators.",
            StableArenaWarning,
            stacklevel=2,
        )
    pool = np.arange(n_annotators) if eligible is None else np.flatnonzero(eligible)
    k = int(round(fraction * len(pool)))
    mask = np.zeros(n_annotators, dtype=bool)
    if k:
        mask[rng.choice(pool, k, replace=False)] = True
    return mask


@dataclass(frozen=True, eq=False)
class Perturbed:
    """A perturbed battle log and the truth: which annotators were perturbed, and how."""

    battles: Battles
    perturbed: np.ndarray
    kind: str
    fraction: float
    seed: int | None

    @property
    def perturbed_names(self) -> list[str]:
        return [self.battles.annotators[k] for k in np.flatnonzero(self.perturbed)]  # type: ignore[index]


def perturb_annotators(
    battles: Battles,
    kind: str,
    fraction: float,
    *,
    seed: int | np.random.Generator | None = 0,
    eligible: np.ndarray | Sequence[str] | None = None,
) -> Perturbed:
    """Perturb every vote of a random ``fraction`` of the annotators (am-ELO §5.5).

    ``eligible``: boolean mask over ``battles.annotators`` or annotator names to draw from
    (default all; e.g. only annotators with enough records to be fitted).
    """
    if battles.annotator is None:
        raise InputError(f"{battles.source}: perturbing annotators needs an annotator column.")
    if kind not in PERTURBATIONS:
        raise InputError(
            f"perturbation kind must be one of {', '.join(PERTURBATIONS)}, not {kind!r}."
        )
    names = battles.annotators  # type: ignore[assignment]
    kk = len(names)  # type: ignore[arg-type]
    if eligible is not None:
        el = np.asarray(eligible)
        if el.dtype != bool:
            wanted = {str(x) for x in el}
            unknown = sorted(wanted - set(names))  # type: ignore[arg-type]
            if unknown:
                raise InputError(f"unknown annotator(s) in eligible: {unknown[:5]}.")
            el = np.array([n in wanted for n in names], dtype=bool)  # type: ignore[union-attr]
        elif len(el) != kk:
            raise InputError(f"eligible has {len(el)} entries, the log has {kk} annotators.")
    else:
        el = None
    rng = np.random.default_rng(seed)
    mask = choose_annotators(kk, fraction, rng, el)
    hit = mask[battles.annotator]
    out = battles.outcome.copy()
    out[hit] = perturb_outcomes(battles.outcome[hit], kind, rng)
    return Perturbed(
        battles.with_outcome(out),
        mask,
        kind,
        float(fraction),
        seed if isinstance(seed, (int, np.integer)) or seed is None else None,
    )


@dataclass(frozen=True, eq=False)
class SimulatedArena:
    """A simulated arena with its truth.

    ``true_ratings``: Elo-scale ratings of the models; ``abilities``: each annotator's θ on
    the mean-1 scale of an honest annotator (0 for random, always-tie and always-A voters,
    negative for flippers); ``profiles``: each annotator's profile name.
    """

    battles: Battles
    true_ratings: np.ndarray
    abilities: np.ndarray
    profiles: tuple[str, ...]

    @property
    def honest(self) -> np.ndarray:
        return np.array(self.profiles) == "honest"

    def of_profile(self, *names: str) -> np.ndarray:
        return np.isin(np.array(self.profiles), names)


def simulate_arena(
    n_models: int = 20,
    n_battles: int = 20_000,
    *,
    profiles: Mapping[str, int] | None = None,
    ability_range: tuple[float, float] = (0.5, 1.5),
    rating_spread: float = 200.0,
    true_ratings: np.ndarray | Sequence[float] | None = None,
    rule: OutcomeRule = "bt",
    eta: float = 0.0,
    shuffle_annotators: bool = True,
    seed: int = 0,
) -> SimulatedArena:
    """Simulate an arena judged by annotators of the given profiles (module docstring).

    ``profiles`` maps profile name → number of annotators (default 100 honest). Each annotator
    judges the same expected number of battles; pairs and positions are uniform at random.
    ``shuffle_annotators`` interleaves the profiles so that names (``ann_000``…) reveal nothing.
    """
    profiles = {"honest": 100} if profiles is None else dict(profiles)
    unknown = sorted(set(profiles) - set(PROFILES))
    if unknown:
        raise InputError(
            f"unknown annotator profile(s) {unknown}; choose from {', '.join(PROFILES)}."
        )
    if any(int(v) < 0 for v in profiles.values()) or sum(profiles.values()) == 0:
        raise InputError("profiles must give non-negative counts with at least one annotator.")
    lo, hi = ability_range
    if not (0 <= lo <= hi):
        raise InputError(f"ability_range must satisfy 0 ≤ low ≤ high, not {ability_range!r}.")
    rng = np.random.default_rng(seed)
    kinds = np.concatenate([np.full(int(v), name, dtype=object) for name, v in profiles.items()])
    if shuffle_annotators:
        kinds = kinds[rng.permutation(len(kinds))]
    kk = len(kinds)
    theta = rng.uniform(lo, hi, kk)
    theta = np.where(kinds == "flipper", -theta, theta)
    theta = np.where(np.isin(kinds, ["random", "always_tie", "always_a"]), 0.0, theta)
    r = (
        random_ratings(n_models, spread=rating_spread, seed=rng)
        if true_ratings is None
        else np.asarray(true_ratings, float)
    )
    if len(r) != n_models:
        raise InputError(f"true_ratings has {len(r)} entries for {n_models} models.")
    b = simulate_battles(r, n_battles, abilities=theta, rule=rule, eta=eta, seed=rng)
    out = b.outcome.copy()
    k = b.annotator
    out[kinds[k] == "always_tie"] = Outcome.TIE
    out[kinds[k] == "always_a"] = Outcome.A
    return SimulatedArena(b.with_outcome(out), r, theta, tuple(str(x) for x in kinds))
