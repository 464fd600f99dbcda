"""What it costs to rig a leaderboard: attacks on an arena, simulated and measured.

An **honest arena** (:func:`honest_arena`) is built from a real log's pair counts (e.g. the
Chatbot Arena 2024 counts): every real battle is kept with probability ``fraction`` (a scaled-down
arena, for speed) and given to one of many synthetic honest annotators, whose volumes are drawn
log-uniformly between ``volumes`` = (20, 200) votes. The truth is m-ELO on the full real counts;
an honest vote on a pair is drawn from that pair's empirical outcome frequencies.

An **attacker** (:func:`attack_stream`) is served battles at the arena's pair frequencies and
votes according to its family (:class:`Family`):

- ``target``: votes for the target whenever it recognises the target in a battle (recognised
  with probability ``accuracy`` when present; never imagined when absent);
- ``omni`` (omnipresent greedy, Min et al. 2025): in every battle, the outcome whose one-step
  Newton effect on the target's margin over the model just above it is largest — the vote's
  gradient g times the inverse information Σ of the attacker's current m-ELO fit of the public
  counts (refreshed every time its votes have grown by 10 %);
- ``camouflage``: whenever the vote does not matter (``target``: the target is not recognised;
  ``omni``: the best outcome's effect is below the 95th percentile of effects over the served
  pairs), the account votes honestly instead of abstaining or voting greedily;
- ``accounts``: ``"few"`` — the votes go round-robin to 5 accounts; ``"many"`` — accounts of
  normal volumes (log-uniform on [δ, 200] with δ = 50, the screening's ``min_records``: smaller
  accounts would be left out of am-ELO's fit), filled one after the other.

A **defence** maps the counts (honest + attack) to ratings (:data:`DEFENCES`): ``m-elo``;
``am-elo+screen`` (today's Stable Arena: δ = 50, ε = 0, exclusion repeated until nobody is
flagged); ``m-elo+influence`` and ``am-elo+screen+influence`` (the influence screening of
:func:`stablearena.crowd.influence.account_influence`, one round, then the screening repeated);
``am-elo+screen+cap`` (bounded influence without a ramp, :func:`capped_scores`);
``am-elo+screen+bounded`` and ``am-elo+screen+influence+bounded`` (bounded influence with a
ramp, :func:`stablearena.crowd.trust.bounded_scores` at :data:`BOUNDED_CAP` and
:data:`BOUNDED_RAMP_VOTES`, after today's or the influence screening); ``m-elo+evalue``
(LMArena's per-account e-value test, :func:`stablearena.crowd.influence.e_values`).
docs/guides/rigging.md has the measurements.

The **cost** of lifting the target by L places under a defence (:func:`votes_needed`) is the
smallest prefix of the attack stream after which the target's rank under that defence is at
least L places above its rank without the attack: found by doubling the number of votes from 1
and then bisecting each level's bracket geometrically (to 10 % by default), not by refitting
after every vote; the screened fits at each prefix are shared between the defences built on
them.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np

from ..choices import (
    CROWD_FLOOD_DAYS,
    CROWD_MODEL_VOTES,
    TRUST_CAP,
    TRUST_RAMP_DAYS,
    TRUST_RAMP_VOTES,
    TRUST_RECORD_DAYS,
    TRUST_YOUNG_SHARE,
)
from ..crowd.influence import (
    INFLUENCE_ABILITY_CAP,
    Influence,
    account_influence,
    am_elo_covariance,
    e_values,
)
from ..crowd.trust import admit_young, bounded_fit, bounded_scores, young_names
from ..data.battles import PairCounts
from ..errors import InputError, StableArenaWarning
from ..raters.bradley_terry import solve_bradley_terry

__all__ = [
    "Family",
    "FAMILIES",
    "HonestArena",
    "honest_arena",
    "AttackStream",
    "attack_stream",
    "Influence",
    "account_influence",
    "e_values",
    "DEFENCES",
    "defence_scores",
    "summarise",
    "votes_needed",
    "run_seed",
    "DETECTORS",
    "detector_roc",
    "roc_seed",
    "summarise_roc",
]

#: Outcome columns of a vote: i wins, j wins, tie (as in :class:`PairCounts`).
_WIN_I, _WIN_J, _TIE = 0, 1, 2


@dataclass(frozen=True)
class Family:
    """An attack family: ``kind`` ``"target"`` or ``"omni"``; ``camouflage``; ``accounts``
    ``"few"`` (5 accounts) or ``"many"`` (accounts of normal volumes)."""

    kind: str
    camouflage: bool
    accounts: str

    @property
    def name(self) -> str:
        return f"{self.kind}{'+camo' if self.camouflage else ''}/{self.accounts}"

    @classmethod
    def parse(cls, text: str) -> Family:
        try:
            head, accounts = text.split("/")
            kind, _, camo = head.partition("+")
            fam = cls(kind, camo == "camo", accounts)
        except ValueError:
            fam = None
        if fam is None or fam.kind not in ("target", "omni") or fam.accounts not in ("few", "many"):
            raise InputError(
                f"attack family {text!r}: write KIND[+camo]/ACCOUNTS with KIND target or omni and "
                "ACCOUNTS few or many, e.g. target+camo/many."
            )
        if camo not in ("", "camo"):
            raise InputError(f"attack family {text!r}: the only modifier is +camo.")
        return fam


FAMILIES: tuple[Family, ...] = tuple(
    Family(k, c, a) for k in ("target", "omni") for c in (False, True) for a in ("few", "many")
)


# ------------------------------------------------------------------------------ honest arena
@dataclass(frozen=True, eq=False)
class HonestArena:
    """A scaled-down honest arena with its truth.

    ``counts``: pair × annotator counts of the honest votes (annotators ``h00000``…);
    ``truth``: m-ELO scores (natural units) on the full source counts; ``pair_i``/``pair_j``:
    the source's pairs, served with probabilities ``serve``; ``outcome_p``: each pair's
    empirical (i wins, j wins, tie) frequencies (both kinds of tie pooled); ``ages``: each
    honest annotator's account age in days, ``active_days``: the number of distinct days on
    which it voted (:func:`honest_arena`).
    """

    counts: PairCounts
    truth: np.ndarray
    pair_i: np.ndarray
    pair_j: np.ndarray
    serve: np.ndarray
    outcome_p: np.ndarray
    volumes: np.ndarray
    fraction: float
    ages: np.ndarray | None = None
    active_days: np.ndarray | None = None

    @property
    def models(self) -> tuple[str, ...]:
        return self.counts.models

    @property
    def n_votes(self) -> int:
        return int(round(self.counts.n_comparisons))


#: Honest accounts' ages in the simulation: uniform on [0, this many] days.
HONEST_MAX_AGE_DAYS: float = 365.0
#: Honest accounts' votes per active day in the simulation: log-uniform on this range (an
#: assumption — no log at hand records sessions; docs/guides/rigging.md, "Sleepers").
HONEST_VOTES_PER_DAY: tuple[float, float] = (2.0, 20.0)


def honest_active_days(
    volumes: np.ndarray, ages: np.ndarray, rng: np.random.Generator
) -> np.ndarray:
    """Distinct days with a vote of honest accounts with ``volumes`` votes and ``ages`` days:
    each votes r per active day, r log-uniform on :data:`HONEST_VOTES_PER_DAY`, on at most
    ⌊age⌋ + 1 days — min(⌊age⌋ + 1, ⌈n / r⌉)."""
    lo, hi = HONEST_VOTES_PER_DAY
    r = np.exp(rng.uniform(math.log(lo), math.log(hi), len(volumes)))
    days = np.ceil(np.asarray(volumes, float) / r)
    return np.maximum(1.0, np.minimum(np.floor(np.asarray(ages, float)) + 1.0, days))


@dataclass(frozen=True)
class CrowdClass:
    """One kind of visitor in a crowd model: ``share`` of the accounts, votes log-uniform on
    [``votes[0]``, ``votes[1]``], active days uniform on [``days[0]``, ``days[1]``] (never more
    than its votes)."""

    share: float
    votes: tuple[int, int]
    days: tuple[int, int]


#: Crowd models of a public arena (docs/guides/rigging.md, "Crowds"): who votes how much.
#: ``casual`` — only casual visitors (1–10 votes on one or two days); ``public`` — a casual
#: majority with a few regulars and heavy voters, about LMArena's 2023 mix (33,000 votes from
#: about 13,000 addresses: a mean of 2.5 votes per address; here 3.9); ``regulars`` — a
#: community arena with many regulars; ``legacy`` — the simulator's crowd before crowd models
#: (20–200 votes each, :data:`HONEST_VOTES_PER_DAY`), kept to compare with earlier rounds.
CROWDS: dict[str, tuple[CrowdClass, ...]] = {
    "casual": (CrowdClass(0.75, (1, 4), (1, 1)), CrowdClass(0.25, (3, 10), (1, 2))),
    "public": (
        CrowdClass(0.88, (1, 10), (1, 2)),
        CrowdClass(0.11, (11, 100), (3, 30)),
        CrowdClass(0.01, (101, 600), (20, 120)),
    ),
    "regulars": (
        CrowdClass(0.55, (1, 10), (1, 2)),
        CrowdClass(0.38, (11, 100), (3, 30)),
        CrowdClass(0.07, (101, 600), (20, 120)),
    ),
}


def crowd_accounts(
    crowd: str, total: int, rng: np.random.Generator, max_age_days: float = HONEST_MAX_AGE_DAYS
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(volumes, active days, ages in days) of accounts drawn from crowd model ``crowd``
    (:data:`CROWDS`) until their votes sum to ``total`` (the last one cut): each account's class
    by the shares, its votes log-uniform on the class's range, its active days uniform on the
    class's (at most its votes), its age uniform on [active days − 1, ``max_age_days``]."""
    if crowd not in CROWDS:
        raise InputError(f"unknown crowd model {crowd!r}; choose from {', '.join(CROWDS)}.")
    classes = CROWDS[crowd]
    share = np.array([c.share for c in classes])
    share = share / share.sum()
    vols: list[np.ndarray] = []
    days: list[np.ndarray] = []
    got = 0
    while got < total:
        n = max(64, int((total - got) / 3))
        kind = rng.choice(len(classes), size=n, p=share)
        v = np.zeros(n, dtype=np.int64)
        dd = np.zeros(n, dtype=np.int64)
        for q, c in enumerate(classes):
            sel = kind == q
            lo, hi = c.votes
            v[sel] = np.floor(
                np.exp(rng.uniform(math.log(lo), math.log(hi + 1), int(sel.sum())))
            ).astype(np.int64)
            dd[sel] = rng.integers(c.days[0], c.days[1] + 1, int(sel.sum()))
        vols.append(v)
        days.append(np.minimum(dd, v))
        got += int(v.sum())
    vol = np.concatenate(vols)
    act = np.concatenate(days)
    cum = np.cumsum(vol)
    n = int(np.searchsorted(cum, total)) + 1
    vol, act = vol[:n].copy(), act[:n].astype(float)
    vol[-1] -= int(cum[n - 1] - total)
    keep = vol > 0
    vol, act = vol[keep], np.maximum(1.0, np.minimum(act[keep], vol[keep]))
    ages = rng.uniform(0.0, 1.0, len(vol)) * (max_age_days - (act - 1.0)) + (act - 1.0)
    return vol, act, ages


def _source_counts(source: str | Path | PairCounts) -> PairCounts:
    if isinstance(source, PairCounts):
        return source.collapse() if source.annotator is not None else source
    from ..data.io import read_battles

    data = read_battles(source)
    if not isinstance(data, PairCounts):
        from ..data.battles import as_counts

        data = as_counts(data)
    return data


def log_uniform_volumes(total: int, low: int, high: int, rng: np.random.Generator) -> np.ndarray:
    """Volumes ⌊exp U(ln low, ln high + 1)⌋ drawn until they sum to ``total`` (the last one cut)."""
    if not (1 <= low <= high):
        raise InputError(f"volumes must satisfy 1 ≤ low ≤ high, not ({low}, {high}).")
    mean = (high + 1 - low) / math.log((high + 1) / low)
    vols = np.floor(
        np.exp(rng.uniform(math.log(low), math.log(high + 1), int(total / mean * 1.3) + 8))
    )
    cum = np.cumsum(vols)
    n = int(np.searchsorted(cum, total)) + 1
    vols = vols[:n]
    vols[-1] -= cum[n - 1] - total
    return vols[vols > 0].astype(np.int64)


def honest_arena(
    source: str | Path | PairCounts,
    *,
    fraction: float = 0.05,
    volumes: tuple[int, int] = (20, 200),
    seed: int = 0,
    max_age_days: float = HONEST_MAX_AGE_DAYS,
    crowd: str | None = None,
) -> HonestArena:
    """The honest arena of the module docstring: each battle of ``source`` kept with probability
    ``fraction``, spread over annotators with log-uniform volumes in ``volumes``; each
    annotator's account age uniform on [0, ``max_age_days``] days (accounts created at a
    constant rate over that time; drawn from a stream of its own, so the votes do not depend
    on it) and its active days (:func:`honest_active_days`, a third stream)."""
    if not 0 < fraction <= 1:
        raise InputError(f"fraction must lie in (0, 1], not {fraction!r}.")
    full = _source_counts(source)
    rng = np.random.default_rng(seed)
    tot = full.totals
    truth = solve_bradley_terry(
        full.n_models, full.i.astype(np.int64), full.j.astype(np.int64), tot, full.score
    ).x
    y = np.column_stack([full.wins, full.losses, full.all_ties])
    outcome_p = y / np.maximum(tot, 1e-300)[:, None]
    kept = rng.binomial(np.round(y).astype(np.int64), fraction)
    per_row = kept.sum(axis=1)
    m = full.n_models
    seen = (np.bincount(full.i, per_row, m) + np.bincount(full.j, per_row, m)) > 0
    if not seen.all():
        # a model with no battle in the sample cannot be rated: leave it out of the arena
        keep_rows = seen[full.i] & seen[full.j]
        full = full.take(keep_rows).compact()
        kept, y, tot, outcome_p = (
            kept[keep_rows],
            y[keep_rows],
            tot[keep_rows],
            outcome_p[keep_rows],
        )
        truth = truth[seen]
        truth = truth - truth.mean()
    n = int(kept.sum())
    if crowd is not None and crowd != "legacy":
        vols, active, ages = crowd_accounts(
            crowd, n, np.random.default_rng((seed, 4)), max_age_days
        )
    else:
        vols = log_uniform_volumes(n, volumes[0], volumes[1], rng)
    # battles (pair row, outcome) in random order, dealt to annotators by their volumes
    row = np.repeat(np.repeat(np.arange(len(full)), 3), kept.ravel())
    oc = np.tile(np.arange(3), len(full))
    oc = np.repeat(oc, kept.ravel())
    perm = rng.permutation(n)
    row, oc = row[perm], oc[perm]
    ann = np.repeat(np.arange(len(vols)), vols)
    names = tuple(f"h{k:05d}" for k in range(len(vols)))
    counts = _counts_from_votes(full, row, oc, ann, names)
    if crowd is None or crowd == "legacy":
        ages = np.random.default_rng((seed, 1)).uniform(0.0, max_age_days, len(vols))
        active = honest_active_days(vols, ages, np.random.default_rng((seed, 2)))
    return HonestArena(
        counts=counts,
        truth=truth,
        pair_i=full.i.astype(np.int64),
        pair_j=full.j.astype(np.int64),
        serve=tot / tot.sum(),
        outcome_p=outcome_p,
        volumes=vols,
        fraction=float(fraction),
        ages=ages,
        active_days=active,
    )


def _counts_from_votes(
    full: PairCounts, row: np.ndarray, oc: np.ndarray, ann: np.ndarray, names: tuple[str, ...]
) -> PairCounts:
    """Pair × annotator counts of votes (source pair row, outcome column, annotator)."""
    npairs = len(full)
    key = ann.astype(np.int64) * npairs + row
    uk, inv = np.unique(key, return_inverse=True)
    y = np.zeros((len(uk), 3))
    np.add.at(y, (inv, oc), 1.0)
    r = uk % npairs
    return PairCounts(
        models=full.models,
        i=full.i[r].astype(np.int32),
        j=full.j[r].astype(np.int32),
        wins=y[:, 0],
        losses=y[:, 1],
        ties=y[:, 2],
        ties_both_bad=np.zeros(len(uk)),
        annotator=(uk // npairs).astype(np.int32),
        annotators=names,
        source="honest arena",
    )


def merge_counts(a: PairCounts, b: PairCounts) -> PairCounts:
    """Rows of ``a`` and ``b`` (same models, disjoint annotator names) as one PairCounts."""
    na = len(a.annotators)  # type: ignore[arg-type]
    return PairCounts(
        models=a.models,
        i=np.concatenate([a.i, b.i]),
        j=np.concatenate([a.j, b.j]),
        wins=np.concatenate([a.wins, b.wins]),
        losses=np.concatenate([a.losses, b.losses]),
        ties=np.concatenate([a.ties, b.ties]),
        ties_both_bad=np.concatenate([a.ties_both_bad, b.ties_both_bad]),
        annotator=np.concatenate([a.annotator, b.annotator + na]).astype(np.int32),  # type: ignore[operator]
        annotators=(*a.annotators, *b.annotators),  # type: ignore[misc]
        source=a.source,
    )


# ------------------------------------------------------------------------------ m-ELO pieces
def _pooled(counts: PairCounts) -> tuple[np.ndarray, ...]:
    m = counts.n_models
    key = counts.i.astype(np.int64) * m + counts.j
    uk, inv = np.unique(key, return_inverse=True)
    n = np.bincount(inv, counts.totals, len(uk))
    s = np.bincount(inv, counts.score, len(uk))
    return uk // m, uk % m, n, s


def m_elo_scores(counts: PairCounts, x0: np.ndarray | None = None) -> np.ndarray:
    """m-ELO (Bradley–Terry MLE, ties as half) scores in natural units, pooled over annotators."""
    from ..data.graph import check_comparison_graph

    i, j, n, s = _pooled(counts)
    check = check_comparison_graph(counts, ties_count=True)
    prior = None if check.ok else check.needs_prior
    return solve_bradley_terry(counts.n_models, i, j, n, s, x0=x0, prior_mask=prior).x


def bt_covariance(x: np.ndarray, i: np.ndarray, j: np.ndarray, w: np.ndarray) -> np.ndarray:
    """Σ = (L + 11ᵀ/m)⁻¹ − 11ᵀ/m: the covariance of the scores under Σx = 0 from the
    Laplacian L with edge weights ``w`` (the Fisher information n p (1 − p) of each row)."""
    from ..raters.information import laplacian

    m = len(x)
    lap = laplacian(m, i, j, w)
    one = np.full((m, m), 1.0 / m)
    return np.linalg.inv(lap + one) - one


# ------------------------------------------------------------------------------ the attacker
@dataclass(frozen=True, eq=False)
class AttackStream:
    """The attacker's votes in order: ``row`` (source pair), ``outcome`` (0: i wins, 1: j wins,
    2: tie), ``account``; ``served[v]``: battles served up to and including vote v."""

    family: Family
    target: int
    row: np.ndarray
    outcome: np.ndarray
    account: np.ndarray
    served: np.ndarray
    greedy: np.ndarray

    def counts(
        self,
        n_votes: int,
        models: tuple[str, ...],
        full: HonestArena,
        warmup: Warmup | None = None,
    ) -> PairCounts:
        """The first ``n_votes`` votes as pair × account counts (accounts ``x00000``…), with
        the ``warmup`` votes of every account they use (cast before the attack)."""
        acc = self.account[:n_votes]
        n_acc = self.n_accounts(n_votes)
        names = tuple(f"x{k:05d}" for k in range(n_acc))
        src = PairCounts(
            models=models,
            i=full.pair_i.astype(np.int32),
            j=full.pair_j.astype(np.int32),
            wins=np.zeros(len(full.pair_i)),
            losses=np.zeros(len(full.pair_i)),
            ties=np.zeros(len(full.pair_i)),
            ties_both_bad=np.zeros(len(full.pair_i)),
        )
        row, oc = self.row[:n_votes], self.outcome[:n_votes]
        if warmup is not None and warmup.per_account and n_acc:
            k = n_acc * warmup.per_account
            row = np.concatenate([warmup.row[:k], row])
            oc = np.concatenate([warmup.outcome[:k], oc])
            acc = np.concatenate([np.repeat(np.arange(n_acc), warmup.per_account), acc])
        return _counts_from_votes(src, row, oc, acc, names)

    def n_accounts(self, n_votes: int) -> int:
        """Accounts the first ``n_votes`` votes use."""
        return int(self.account[:n_votes].max()) + 1 if n_votes else 0


@dataclass(frozen=True, eq=False)
class Warmup:
    """A sleeper's warm-up: ``per_account`` votes cast by every attacker account before the
    attack (``row``, ``outcome``: account k's are entries k·per_account … (k + 1)·per_account −
    1), ``mode`` ``"board"`` (the public board's favourite wins every battle: votes that agree
    with the board, raising the account's am-ELO ability) or ``"honest"`` (drawn like an honest
    annotator's) — :func:`warmup_votes`."""

    per_account: int
    mode: str
    row: np.ndarray
    outcome: np.ndarray


#: Warm-up modes of :func:`warmup_votes` (``experiment rigging --warmup-mode``).
WARMUP_MODES: tuple[str, ...] = ("board", "honest")


def warmup_votes(
    arena: HonestArena,
    board: np.ndarray,
    per_account: int,
    n_accounts: int,
    *,
    mode: str = "board",
    seed: int = 0,
) -> Warmup:
    """``per_account`` warm-up votes for each of ``n_accounts`` accounts on battles served at
    the arena's pair frequencies: ``"board"`` — the model ahead on ``board`` (the public
    leaderboard's scores) wins; ``"honest"`` — the outcome drawn from the pair's empirical
    frequencies, as an honest annotator's."""
    if mode not in WARMUP_MODES:
        raise InputError(f"warm-up mode {mode!r}: choose {' or '.join(WARMUP_MODES)}.")
    if per_account < 0:
        raise InputError(f"warm-up votes per account must be ≥ 0, not {per_account}.")
    rng = np.random.default_rng((seed, 7))
    n = per_account * n_accounts
    r = rng.choice(len(arena.pair_i), size=n, p=arena.serve)
    if mode == "board":
        oc = np.where(board[arena.pair_i[r]] >= board[arena.pair_j[r]], _WIN_I, _WIN_J)
    else:
        cum_p = np.cumsum(arena.outcome_p[r], axis=1)
        oc = (rng.random(n)[:, None] > cum_p).sum(axis=1).clip(0, 2)
    return Warmup(per_account, mode, r.astype(np.int64), oc.astype(np.int64))


def _accounts(n: int, family: Family, rng: np.random.Generator, min_records: int) -> np.ndarray:
    if family.accounts == "few":
        return np.arange(n) % 5
    vols = log_uniform_volumes(n, min_records, 200, rng)
    return np.repeat(np.arange(len(vols)), vols)[:n]


def attack_stream(
    arena: HonestArena,
    target: int,
    family: Family,
    max_votes: int,
    *,
    accuracy: float = 1.0,
    min_records: int = 50,
    seed: int = 0,
) -> AttackStream:
    """The attacker's first ``max_votes`` votes (module docstring)."""
    rng = np.random.default_rng(seed)
    npairs = len(arena.pair_i)
    cum_p = np.cumsum(arena.outcome_p, axis=1)
    has_t = (arena.pair_i == target) | (arena.pair_j == target)
    rows: list[np.ndarray] = []
    outs: list[np.ndarray] = []
    greedy_l: list[np.ndarray] = []
    served: list[np.ndarray] = []
    n_served = 0
    n_votes = 0
    # the attacker's view of the public counts: the honest arena pooled, plus its own votes
    hi, hj, hn, hs = _pooled(arena.counts)
    own_n = np.zeros(npairs)
    own_s = np.zeros(npairs)
    x = None
    while n_votes < max_votes:
        chunk = max(16, n_votes // 10)
        if family.kind == "target":
            # serve battles until the chunk's votes are cast
            need = (
                chunk
                if family.camouflage
                else max(1, int(chunk / max(arena.serve[has_t].sum() * accuracy, 1e-9)))
            )
            r = rng.choice(npairs, size=need, p=arena.serve)
            recog = has_t[r] & (rng.random(need) < accuracy)
            honest_oc = (rng.random(need)[:, None] > cum_p[r]).sum(axis=1).clip(0, 2)
            for_t = np.where(arena.pair_i[r] == target, _WIN_I, _WIN_J)
            if family.camouflage:
                vote = np.ones(need, dtype=bool)
                oc = np.where(recog, for_t, honest_oc)
            else:
                vote = recog
                oc = for_t
            idx = np.flatnonzero(vote)
            srv = np.arange(1, need + 1)[idx] + n_served
            n_served += need
            rows.append(r[idx])
            outs.append(oc[idx])
            greedy_l.append(recog[idx])
            served.append(srv)
            n_votes += len(idx)
            continue
        # omnipresent greedy: effects from the attacker's current m-ELO fit
        pi = np.concatenate([hi, arena.pair_i])
        pj = np.concatenate([hj, arena.pair_j])
        pn = np.concatenate([hn, own_n])
        ps = np.concatenate([hs, own_s])
        x = solve_bradley_terry(arena.counts.n_models, pi, pj, pn, ps, x0=x).x
        p = 1.0 / (1.0 + np.exp(-(x[pi] - x[pj])))
        cov = bt_covariance(x, pi, pj, pn * p * (1 - p))
        order = np.argsort(-x)
        pos = int(np.flatnonzero(order == target)[0])
        rival = int(order[pos - 1]) if pos > 0 else None
        if rival is None:
            v = cov[target]
        else:
            v = cov[target] - cov[rival]
        gain_dir = v[arena.pair_i] - v[arena.pair_j]  # effect of a unit push of i over j
        pp = 1.0 / (1.0 + np.exp(-(x[arena.pair_i] - x[arena.pair_j])))
        # one Newton step: i wins → (1 − p)·gain_dir, j wins → −p·gain_dir
        eff = np.column_stack([(1 - pp) * gain_dir, -pp * gain_dir, (0.5 - pp) * gain_dir])
        best = eff.argmax(axis=1)
        best_eff = eff.max(axis=1)
        thr = _weighted_quantile(best_eff, arena.serve, 0.95)
        r = rng.choice(npairs, size=chunk, p=arena.serve)
        honest_oc = (rng.random(chunk)[:, None] > cum_p[r]).sum(axis=1).clip(0, 2)
        matters = best_eff[r] >= thr
        oc = np.where(matters | (not family.camouflage), best[r], honest_oc)
        rows.append(r)
        outs.append(oc)
        greedy_l.append(matters | (not family.camouflage))
        served.append(np.arange(1, chunk + 1) + n_served)
        n_served += chunk
        n_votes += chunk
        np.add.at(own_n, r, 1.0)
        np.add.at(own_s, r, np.where(oc == _WIN_I, 1.0, np.where(oc == _TIE, 0.5, 0.0)))
    row = np.concatenate(rows)[:max_votes]
    return AttackStream(
        family=family,
        target=target,
        row=row,
        outcome=np.concatenate(outs)[:max_votes].astype(np.int64),
        account=_accounts(len(row), family, rng, min_records),
        served=np.concatenate(served)[:max_votes],
        greedy=np.concatenate(greedy_l)[:max_votes],
    )


def _weighted_quantile(values: np.ndarray, weights: np.ndarray, q: float) -> float:
    order = np.argsort(values)
    cw = np.cumsum(weights[order])
    return float(values[order][min(int(np.searchsorted(cw, q * cw[-1])), len(values) - 1)])


# ------------------------------------------------------------------------------ defences
DEFENCES: tuple[str, ...] = (
    "m-elo",
    "am-elo+screen",
    "m-elo+influence",
    "am-elo+screen+influence",
    "am-elo+screen+cap",
    "am-elo+screen+bounded",
    "am-elo+screen+influence+bounded",
    "m-elo+evalue",
    "arena",
    "crowd",
)

#: Bounded influence (:func:`stablearena.crowd.trust.bounded_scores`) of the ``+bounded`` defences:
#: an account's weight is min(max(a_k, 0), ``cap``) · min(1, n_k / ``ramp_votes``).
#: docs/guides/rigging.md chooses the values: the defaults of :mod:`stablearena.crowd.trust`.
BOUNDED_CAP: float = TRUST_CAP
BOUNDED_RAMP_VOTES: float = TRUST_RAMP_VOTES
#: The day ramp of the ``+bounded`` defences: × min(1, days of record / ``ramp_days``).
BOUNDED_RAMP_DAYS: float = TRUST_RAMP_DAYS
#: The record rule of the ``+bounded`` defences: weight ≤ 1 before ``record_days`` of record.
BOUNDED_RECORD_DAYS: float = TRUST_RECORD_DAYS
#: The young-share cap of the ``+bounded`` defences: accounts under ``ramp_days`` days of
#: record supply at most this share of any model's weighted votes (0: off).
BOUNDED_YOUNG_SHARE: float = TRUST_YOUNG_SHARE
#: What the day rules of the ``+bounded`` defences count: ``"active"`` (distinct days with a
#: vote, the default rule) or ``"age"`` (days since creation, the rule before sleepers).
TRUST_DAYS: tuple[str, ...] = ("active", "age")


def _rank_of(x: np.ndarray, target: int) -> int:
    """0-based position of ``target`` in the descending order of ``x`` (ties: worst place)."""
    return int(np.sum(x >= x[target]) - 1)


@dataclass
class _Fits:
    """What one seed's evaluations share: the honest fits (warm starts), the annotators today's
    screening excluded from the honest arena (a live arena excluded them before the attack),
    and the screened am-ELO fit at each prefix of the current attack stream."""

    honest_am: Any = None
    x_melo: np.ndarray | None = None
    pre_excluded: frozenset[str] = frozenset()
    screened: dict[int, Any] = field(default_factory=dict)
    influenced: dict[int, tuple[Any, set[str]]] = field(default_factory=dict)
    cap: float = BOUNDED_CAP
    ramp_votes: float = BOUNDED_RAMP_VOTES
    ramp_days: float = 0.0
    ages: dict[str, float] | None = None
    active_days: dict[str, float] | None = None
    record_days: float = 0.0
    young_share: float = 0.0
    min_records: int = 50
    model_votes: float | None = CROWD_MODEL_VOTES
    flood_days: float | None = CROWD_FLOOD_DAYS
    # the board rule's fits ("arena", "crowd"): how many, how many did not converge, and the
    # largest relative change of the board's spread (SD of the scores, over m-ELO's on the
    # same votes) from the honest arena's
    rule_fits: int = 0
    rule_unconverged: int = 0
    rule_scale_dev: float = 0.0
    honest_sd: float | None = None


def _screened_am_elo(
    counts: PairCounts,
    start: Any,
    min_records: int = 50,
    excluded: frozenset[str] = frozenset(),
    leave_out: Mapping[str, str] | None = None,
) -> Any:
    """Today's Stable Arena screening on counts: am-ELO (δ = ``min_records``, ε = 0) without the
    ``excluded`` and the ``leave_out`` (name → reason: young accounts, not screened), exclude
    the flagged, refit (warm), until a converged fit flags nobody
    (:func:`stablearena.crowd.screening.converged_fit`: an unconverged fit never excludes anyone)."""
    from ..crowd.screening import converged_fit
    from ..raters.annotator import AmElo

    rater = AmElo(min_records=min_records)
    out = set(excluded)
    fit = None
    for _ in range(20):
        fit = converged_fit(
            rater,
            _rated_models(counts, out | set(leave_out or ()), min_records),
            exclude=frozenset(out),
            start=start,
            leave_out=leave_out,
        )
        new = {fit.annotators[k] for k, st in enumerate(fit.status) if st == "flagged"}
        if not new or not fit.convergence.converged:
            break
        out |= new
        start = fit
    return fit


def _rated_models(counts: PairCounts, excluded: set[str], min_records: int) -> PairCounts:
    """``counts`` without the models that no annotator in the fit (≥ ``min_records`` records,
    not ``excluded``) has judged: am-ELO cannot rate them (their scores are reported as NaN)."""
    names = counts.annotators or ()
    rec = np.bincount(counts.annotator, counts.totals, len(names))  # type: ignore[arg-type]
    ok = (rec >= min_records) & ~np.array([n in excluded for n in names], dtype=bool)
    rows = ok[counts.annotator]  # type: ignore[index]
    m = counts.n_models
    seen = np.zeros(m, dtype=bool)
    seen[counts.i[rows]] = True
    seen[counts.j[rows]] = True
    if seen.all():
        return counts
    return counts.take(seen[counts.i] & seen[counts.j]).compact()


def _full_scores(fit: Any, models: tuple[str, ...]) -> np.ndarray:
    """The fit's scores in the order of ``models`` (NaN for a model it could not rate)."""
    if tuple(fit.models) == tuple(models):
        return np.asarray(fit.scores, float)
    where = {n: k for k, n in enumerate(fit.models)}
    return np.array([fit.scores[where[n]] if n in where else np.nan for n in models])


def _without(counts: PairCounts, names: set[str]) -> PairCounts:
    drop = np.array([n in names for n in counts.annotators], dtype=bool)  # type: ignore[union-attr]
    return counts.take(~drop[counts.annotator])  # type: ignore[index]


def capped_scores(fit: Any, cap: float) -> np.ndarray:
    """Bounded influence without a ramp: every account's weight held at min(max(a_k, 0),
    ``cap``) (:func:`stablearena.crowd.trust.bounded_scores`), so that no account weighs more than
    ``cap`` average annotators."""
    return bounded_scores(fit, cap=cap)


def defence_scores(
    defence: str, counts: PairCounts, fits: _Fits | None = None, key: int | None = None
) -> tuple[np.ndarray, set[str]]:
    """Scores of every model under ``defence`` (:data:`DEFENCES`) and the accounts it excluded
    (``key``: the prefix length, to reuse the screened am-ELO fit between defences)."""
    fits = fits or _Fits()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", StableArenaWarning)
        if defence in ("arena", "crowd"):
            # the live arena's rule itself (stablearena.crowd.board_rule.arena_fit): ``arena`` with
            # the live defaults, ``crowd`` with the simulation's trust options for am-ELO's
            # fields — the same function ``serve`` and ``rank --method arena`` run
            from ..crowd.board_rule import ArenaRule, arena_fit

            rule = ArenaRule(model_votes=fits.model_votes, flood_days=fits.flood_days)
            got = arena_fit(counts, rule, ages=fits.ages, active_days=fits.active_days)
            excl = set(got.step.crowd.flagged) if got.step.crowd is not None else set()
            x = _full_scores(got.fitted, counts.models)
            fits.rule_fits += 1
            fits.rule_unconverged += not got.converged
            # the board's spread against m-ELO's on the same votes, relative to that ratio on the
            # honest arena: a change the rule makes, not one the attack's votes make for anyone
            sd_m = float(np.std(m_elo_scores(counts, fits.x_melo)))
            sd = float(np.std(x)) / sd_m if sd_m > 0 else 1.0
            if fits.honest_sd is None:  # the first fit of a seed is the honest arena's
                fits.honest_sd = sd
            elif fits.honest_sd > 0:
                fits.rule_scale_dev = max(fits.rule_scale_dev, abs(sd / fits.honest_sd - 1))
            return x, excl
        if defence.startswith("m-elo"):
            x = m_elo_scores(counts, fits.x_melo)
            if defence == "m-elo":
                return x, set()
            i, j, n, s = _pooled(counts)
            if defence == "m-elo+evalue":
                ev = e_values(counts, x)
                bad = ev >= math.log(len(ev) / 0.05)
            else:
                p = 1.0 / (1.0 + np.exp(-(x[i] - x[j])))
                cov = bt_covariance(x, i, j, n * p * (1 - p))
                bad = account_influence(counts, x, cov).flagged
            names = {counts.annotators[k] for k in np.flatnonzero(bad)}  # type: ignore[index]
            if not names:
                return x, set()
            return m_elo_scores(_without(counts, names), x), names
        if defence.startswith("am-elo+screen"):
            young = _young(counts, fits) if defence.endswith("+bounded") else {}
            fit = fits.screened.get(key) if key is not None and not young else None
            if fit is None:
                fit = _screened_am_elo(
                    counts,
                    fits.honest_am,
                    fits.min_records,
                    excluded=fits.pre_excluded,
                    leave_out=young,
                )
                if key is not None and not young:
                    fits.screened[key] = fit
            excl = {fit.annotators[k] for k, st in enumerate(fit.status) if st == "excluded"}
            if defence == "am-elo+screen":
                return _full_scores(fit, counts.models), excl
            if defence == "am-elo+screen+cap":
                x = capped_scores(fit, INFLUENCE_ABILITY_CAP)
                return _full_scores(replace(fit, scores=x), counts.models), excl
            if defence.startswith("am-elo+screen+influence"):
                got = fits.influenced.get(key) if key is not None and not young else None
                if got is None:
                    got = _influence_screened(counts, fit, excl, fits.min_records, young)
                    if key is not None and not young:
                        fits.influenced[key] = got
                fit, names = got
                excl = excl | names
            if defence.endswith("+bounded"):
                # as the live arena publishes it: young accounts admitted with their abilities
                # alone; where the weighed votes alone cannot rank every model (a model judged
                # only by accounts that weigh 0), the fit unbounded
                fit = bounded_fit(
                    admit_young(fit, counts, young),
                    cap=fits.cap,
                    ramp_votes=fits.ramp_votes,
                    ages=fits.ages,
                    ramp_days=fits.ramp_days,
                    active_days=fits.active_days,
                    record_days=fits.record_days,
                    young_share=fits.young_share,
                )
            if defence in DEFENCES:
                return _full_scores(fit, counts.models), excl
    raise InputError(f"unknown defence {defence!r}; choose from {', '.join(DEFENCES)}.")


def _young(counts: PairCounts, fits: _Fits) -> dict[str, str]:
    """The young accounts of ``counts`` under the ``+bounded`` defences' day ramp
    (:func:`stablearena.crowd.trust.young_names`; with δ votes or more, not excluded before the
    attack): left out of the ability fit and admitted afterwards, as the live arena does."""
    got = young_names(
        counts,
        ages=fits.ages,
        active_days=fits.active_days,
        ramp_days=fits.ramp_days,
        min_records=fits.min_records,
    )
    return {n: r for n, r in got.items() if n not in fits.pre_excluded}


def _influence_screened(
    counts: PairCounts,
    fit: Any,
    excl: set[str],
    min_records: int = 50,
    leave_out: Mapping[str, str] | None = None,
) -> tuple[Any, set[str]]:
    """The influence screening after today's (module docstring): the accounts of the screened
    am-ELO ``fit`` flagged by :func:`account_influence` (judged at abilities clipped to
    [0, :data:`INFLUENCE_ABILITY_CAP`]) excluded and the screening repeated; the new fit and the
    accounts the influence test flagged."""
    sub = fit.counts
    a = np.clip(fit.abilities[fit._fit_annotators], 0.0, INFLUENCE_ABILITY_CAP)
    infl = account_influence(sub, fit.scores, am_elo_covariance(fit), a)
    names = {sub.annotators[k] for k in np.flatnonzero(infl.flagged)}  # type: ignore[index]
    if not names:
        return fit, set()
    return (
        _screened_am_elo(
            _without(counts, names),
            fit,
            min_records,
            excluded=frozenset(excl),
            leave_out=leave_out,
        ),
        names,
    )


def votes_needed(
    lift: Callable[[int], int],
    levels: Sequence[int],
    max_votes: int,
    *,
    start: int = 4,
    precision: float = 1.4,
) -> dict[int, int | None]:
    """Smallest number of votes v (to ``precision``, geometrically) with ``lift(v)`` ≥ L for each
    L in ``levels``: doubling from ``start`` until the largest level is reached (or ``max_votes``),
    then bisecting each level's bracket. ``None``: not reached within ``max_votes``. Assumes the
    lift grows with the votes (it does on average; a bracket's bisection finds one crossing)."""
    seen: dict[int, int] = {}

    def f(v: int) -> int:
        if v not in seen:
            seen[v] = lift(v)
        return seen[v]

    v = start
    top = max(levels)
    while True:
        if f(v) >= top or v >= max_votes:
            break
        v = min(2 * v, max_votes)
    out: dict[int, int | None] = {}
    for level in sorted(levels):
        ok = sorted(u for u, val in seen.items() if val >= level)
        if not ok:
            out[level] = None
            continue
        hi = ok[0]
        below = [u for u, val in seen.items() if u < hi and val < level]
        lo = max(below) if below else 0
        while lo and hi / lo > precision:
            mid = int(round(math.sqrt(lo * hi)))
            if mid in (lo, hi):
                break
            if f(mid) >= level:
                hi = mid
            else:
                lo = mid
        out[level] = hi
    return out


# ------------------------------------------------------------------------------ one seed
#: Target positions (0-based rank in the honest arena's m-ELO leaderboard): near the top,
#: the middle and the bottom of the 129 Chatbot Arena 2024 models (the top one leaves room to
#: climb 10 places).
TARGET_RANKS: dict[str, float] = {"top": 13 / 128, "middle": 0.5, "bottom": 120 / 128}


def _honest_ages(arena: HonestArena) -> dict[str, float] | None:
    """The honest annotators' ages in days by name (None: the arena has none)."""
    if arena.ages is None:
        return None
    return dict(zip(arena.counts.annotators or (), map(float, arena.ages), strict=True))


def _attacks(
    arena: HonestArena,
    x: np.ndarray,
    targets: Sequence[str],
    families: Sequence[Family],
    max_votes: int,
    accuracy: float,
    seed: int,
) -> Any:
    """(target name, target, family, attack stream) of every cell of a seed: the targets at
    :data:`TARGET_RANKS` of the honest arena's m-ELO scores ``x``; each family's stream seeded by
    the seed and the family alone."""
    m = arena.counts.n_models
    order = np.argsort(-x)
    for tname in targets:
        target = int(order[int(round(TARGET_RANKS[tname] * (m - 1)))])
        for fam in families:
            seed_f = seed * 1000 + _family_index(fam)
            stream = attack_stream(arena, target, fam, max_votes, accuracy=accuracy, seed=seed_f)
            yield tname, target, fam, stream


def _family_index(fam: Family) -> int:
    """The family's place in :data:`FAMILIES` (its attack stream's seed does not depend on which
    other families are run)."""
    return FAMILIES.index(fam) if fam in FAMILIES else len(FAMILIES)


def run_seed(
    arena: HonestArena,
    *,
    seed: int,
    families: Sequence[Family] = FAMILIES,
    defences: Sequence[str] = ("m-elo", "am-elo+screen", "am-elo+screen+influence"),
    targets: Sequence[str] = ("top", "middle", "bottom"),
    levels: Sequence[int] = (1, 3, 10),
    max_votes: int | None = None,
    accuracy: float = 1.0,
    precision: float = 1.1,
    cap: float = BOUNDED_CAP,
    ramp_votes: float = BOUNDED_RAMP_VOTES,
    ramp_days: float = BOUNDED_RAMP_DAYS,
    attack_age: float = 0.0,
    warmup: int = 0,
    warmup_mode: str = "board",
    attack_days: float = 1.0,
    record_days: float = BOUNDED_RECORD_DAYS,
    days: str = "active",
    min_records: int = 50,
    young_share: float = BOUNDED_YOUNG_SHARE,
    log: Callable[[str], None] | None = None,
) -> list[dict[str, Any]]:
    """Votes (and battles served) needed to lift each target by each level under each defence,
    one record per (family, target, defence). ``max_votes`` defaults to 25 % of the honest
    arena's votes. Costs are found to ``precision`` (a factor: doubling from 1 vote, then
    bisecting each bracket geometrically, :func:`votes_needed`); ``cap``, ``ramp_votes``,
    ``ramp_days``, ``record_days`` and ``young_share``: the bounded influence of the ``+bounded``
    defences, whose day rules read ``days`` — ``"active"``: each account's distinct days with a vote (honest:
    ``arena.active_days``), ``"age"``: days since creation (honest: ``arena.ages``).

    **Sleepers**: the attacker's accounts were created ``attack_age`` days before the board is
    read; each casts ``warmup`` votes before the attack (:func:`warmup_votes`, ``warmup_mode``),
    one a day at most over its age — its active days are min(⌊age⌋, warm-up votes) + the
    ``attack_days`` over which it casts its attack votes. The warm-up is the attacker's cost:
    ``votes_L`` counts the warm-up votes of the accounts the attack has used by then
    (``attack_votes_L``, ``warmup_L`` apart), ``accounts_L`` those accounts and
    ``account_days_L`` their active days (the identity cost in days of voting). The first
    defence in ``defences`` that is ``m-elo`` is measured without warm-up (an attacker of m-ELO
    gains nothing by one): the baseline the others are paired with."""
    max_votes = max_votes or int(0.25 * arena.n_votes)
    if days not in TRUST_DAYS:
        raise InputError(f"days {days!r}: choose {' or '.join(TRUST_DAYS)}.")
    fits = _Fits(
        cap=cap,
        ramp_votes=ramp_votes,
        ramp_days=ramp_days,
        record_days=record_days,
        young_share=young_share,
        min_records=min_records,
    )
    honest_days = _honest_days(arena, days)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", StableArenaWarning)
        fits.x_melo = m_elo_scores(arena.counts)
        if any(d.startswith("am-elo") for d in defences):
            fits.honest_am = _screened_am_elo(arena.counts, None, min_records)
            st = fits.honest_am.status
            fits.pre_excluded = frozenset(
                n for k, n in enumerate(fits.honest_am.annotators) if st[k] == "excluded"
            )
    _set_days(fits, days, honest_days)
    base = {d: defence_scores(d, arena.counts, fits) for d in defences}
    a_days = min(math.floor(attack_age), warmup) + attack_days
    out = []
    cells = _attacks(arena, fits.x_melo, targets, families, max_votes, accuracy, seed)
    for tname, target, fam, stream in cells:
        fits.screened, fits.influenced = {}, {}
        n_acc = stream.n_accounts(len(stream.account))
        warm = (
            warmup_votes(arena, fits.x_melo, warmup, n_acc, mode=warmup_mode, seed=seed)
            if warmup
            else None
        )
        if honest_days is not None:  # an arena without days: no day rules
            mine = {f"x{k:05d}": a_days if days == "active" else attack_age for k in range(n_acc)}
            _set_days(fits, days, {**honest_days, **mine})
        for d in defences:
            rank0 = _rank_of(base[d][0], target)
            excluded_at: dict[int, int] = {}
            scale_at: dict[int, float] = {}
            w = None if d == "m-elo" else warm

            def lift(
                v: int,
                d: str = d,
                rank0: int = rank0,
                stream: AttackStream = stream,
                excluded_at: dict[int, int] = excluded_at,
                scale_at: dict[int, float] = scale_at,
                target: int = target,
                w: Warmup | None = w,
            ) -> int:
                c = merge_counts(arena.counts, stream.counts(v, arena.models, arena, w))
                # the warm-up's screened fits differ from the bare attack's: keys apart
                fits.rule_scale_dev = 0.0
                x, excl = defence_scores(d, c, fits, key=v if w is None else -v)
                excluded_at[v] = sum(1 for n in excl if n.startswith("x"))
                scale_at[v] = fits.rule_scale_dev
                return rank0 - _rank_of(x, target)

            before = (fits.rule_fits, fits.rule_unconverged)
            need = votes_needed(lift, levels, max_votes, start=1, precision=precision)
            per = w.per_account if w is not None else 0
            rec: dict[str, Any] = {
                "seed": seed,
                "target": tname,
                "target_model": arena.models[target],
                "target_rank": rank0 + 1,
                "family": fam.name,
                "defence": d,
                "max_votes": max_votes,
                "fraction": arena.fraction,
                "precision": precision,
                "attack_age": attack_age,
                "warmup": per,
                "warmup_mode": warmup_mode if per else None,
                "attack_days": attack_days,
            }
            if d.endswith("+bounded"):
                rec.update(
                    cap=cap,
                    ramp_votes=ramp_votes,
                    ramp_days=ramp_days,
                    record_days=record_days,
                    days=days,
                    min_records=min_records,
                    young_share=young_share,
                )
            for level, v in need.items():
                k = stream.n_accounts(v) if v else None
                rec[f"votes_{level}"] = v + per * k if v else None  # type: ignore[operator]
                rec[f"attack_votes_{level}"] = v
                rec[f"warmup_{level}"] = per * k if v else None  # type: ignore[operator]
                rec[f"accounts_{level}"] = k
                days_k = attack_days if d == "m-elo" else a_days
                rec[f"account_days_{level}"] = k * days_k if v else None  # type: ignore[operator]
                rec[f"served_{level}"] = int(stream.served[v - 1]) if v else None
                rec[f"excluded_accounts_{level}"] = excluded_at.get(v) if v else None
                if d in ("arena", "crowd"):  # the board's spread against the honest board's
                    rec[f"rule_scale_dev_{level}"] = scale_at.get(v) if v else None
            # the most the budget buys: the attack's votes plus the warm-up of all its accounts
            rec["max_cost"] = max_votes + per * n_acc
            rec["fits"] = len(excluded_at)
            if d in ("arena", "crowd"):  # the board rule: did every fit hold?
                rec["rule_fits"] = fits.rule_fits - before[0]
                rec["rule_unconverged"] = fits.rule_unconverged - before[1]
                # the largest change of the board's spread from the honest board's over every
                # fit of this cell (attacks up to the budget included)
                rec["rule_scale_dev"] = max(scale_at.values(), default=0.0)
            out.append(rec)
            if log:
                log(f"seed {seed} {tname} {fam.name} {d}: {need}")
    return out


def _honest_days(arena: HonestArena, days: str) -> dict[str, float] | None:
    """The honest annotators' days of record by name — active days or ages (None: the arena
    has none)."""
    vals = arena.active_days if days == "active" else arena.ages
    if vals is None:
        return None
    return dict(zip(arena.counts.annotators or (), map(float, vals), strict=True))


def _set_days(fits: _Fits, days: str, values: dict[str, float] | None) -> None:
    """The day rules' input: ``values`` as active days or as ages."""
    if days == "active":
        fits.active_days, fits.ages = values, None
    else:
        fits.ages, fits.active_days = values, None


# ------------------------------------------------------------------------------ summaries
def summarise(
    records: Sequence[dict[str, Any]],
    *,
    baseline: str = "m-elo",
    levels: Sequence[int] = (1, 3, 10),
    max_votes: dict[int, int] | None = None,
) -> list[dict[str, Any]]:
    """One row per (family, target, defence): per level L the mean votes (and battles served)
    over seeds with its SE, the number of seeds where the attack did not reach L within the
    budget (``censored_L``; counted at the budget ``max_votes[seed]``, so the mean is then a
    lower bound; a sleeper's budget includes its warm-up, ``max_cost``), its median
    (``votes_L_median``), the mean over seeds of the cost ratio to ``baseline`` on the same
    seed, with its SE (:func:`stablearena.analysis.metrics.paired_difference` of the ratios against 0),
    the median ratio (``ratio_L_median``) and the mean account-days of the seeds that reached L
    (``account_days_L``)."""
    from ..analysis.metrics import paired_difference

    max_votes = max_votes or {}
    key = lambda r: (r["family"], r["target"], r["defence"])  # noqa: E731
    groups: dict[tuple[str, str, str], list[dict[str, Any]]] = {}
    for r in records:
        groups.setdefault(key(r), []).append(r)
    out = []
    for (fam, tgt, d), group in groups.items():
        base = {r["seed"]: r for r in groups.get((fam, tgt, baseline), [])}
        row: dict[str, Any] = {"family": fam, "target": tgt, "defence": d, "seeds": len(group)}
        for level in levels:

            def votes(r: dict[str, Any], level: int = level) -> float:
                v = r.get(f"votes_{level}")
                if v is not None:
                    return float(v)
                if r.get("max_cost") is not None:  # a sleeper's budget: its warm-up included
                    return float(r["max_cost"])
                return float(max_votes.get(r["seed"], np.nan))

            v = np.array([votes(r) for r in group])
            served = np.array(
                [r[f"served_{level}"] for r in group if r.get(f"served_{level}") is not None],
                dtype=float,
            )
            row[f"votes_{level}"] = float(np.nanmean(v)) if np.isfinite(v).any() else None
            row[f"votes_{level}_se"] = (
                float(np.nanstd(v, ddof=1) / math.sqrt(np.isfinite(v).sum()))
                if np.isfinite(v).sum() > 1
                else None
            )
            row[f"votes_{level}_median"] = float(np.nanmedian(v)) if np.isfinite(v).any() else None
            row[f"served_{level}"] = float(served.mean()) if len(served) else None
            row[f"censored_{level}"] = int(sum(r.get(f"votes_{level}") is None for r in group))
            ratios = [
                votes(r) / votes(base[r["seed"]])
                for r in group
                if r["seed"] in base and votes(base[r["seed"]]) > 0
            ]
            ratios = [x for x in ratios if math.isfinite(x)]
            if ratios:
                pdiff = paired_difference(ratios)
                row[f"ratio_{level}"] = pdiff["mean_diff"]
                row[f"ratio_{level}_se"] = pdiff["se"]
                row[f"ratio_{level}_median"] = float(np.median(ratios))
            else:
                row[f"ratio_{level}"] = row[f"ratio_{level}_se"] = None
                row[f"ratio_{level}_median"] = None
            days = [r[f"account_days_{level}"] for r in group if r.get(f"account_days_{level}")]
            row[f"account_days_{level}"] = float(np.mean(days)) if days else None
        out.append(row)
    return out


# ------------------------------------------------------------------------------ honest cost
def honest_cost(
    counts: PairCounts,
    reference: np.ndarray,
    anomalous: Sequence[str],
    defences: Sequence[str] = DEFENCES,
    *,
    cap: float = BOUNDED_CAP,
    ramp_votes: float = BOUNDED_RAMP_VOTES,
    ages: dict[str, float] | None = None,
    ramp_days: float = 0.0,
) -> dict[str, dict[str, float]]:
    """What each defence costs an arena without attacker: Kendall τ of its scores to
    ``reference`` (the true scores, or a clean fit) and precision / recall / F1 of the annotators
    it excluded against the ``anomalous`` ones (e.g. flippers). ``counts``: pair × annotator;
    ``cap``, ``ramp_votes``, ``ramp_days``: the bounded influence of the ``+bounded`` defences
    (the age ramp reads ``ages``, name → days; off without them)."""
    from ..analysis.metrics import detection_scores, kendall_tau

    names = counts.annotators or ()
    truth = np.array([n in set(anomalous) for n in names], dtype=bool)
    fits = _Fits(cap=cap, ramp_votes=ramp_votes, ramp_days=ramp_days, ages=ages)
    out = {}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", StableArenaWarning)
        for d in defences:
            x, excl = defence_scores(d, counts, fits, key=0)
            ok = np.isfinite(x)
            flagged = np.array([n in excl for n in names], dtype=bool)
            sc = detection_scores(flagged, truth)
            out[d] = {
                "tau": kendall_tau(x[ok], np.asarray(reference)[ok]),
                "excluded": int(flagged.sum()),
                "precision": sc["precision"],
                "recall": sc["recall"],
                "f1": sc["f1"],
            }
    return out


def account_statistics(counts: PairCounts, start: Any = None) -> dict[str, np.ndarray]:
    """Per annotator of ``counts``, the statistics a detector can rank accounts by (larger =
    more suspicious): ``push`` (influence max |z|), ``select`` (−ln tail probability of the
    selection test), ``evalue`` (ln e-value), ``low_ability`` (−am-ELO ability), all read off
    today's screened am-ELO fit (accounts it left out or excluded: NaN for push and select).
    Returns the annotator names under ``"accounts"``."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", StableArenaWarning)
        fit = _screened_am_elo(counts, start)
    names = counts.annotators or ()
    pos = {n: k for k, n in enumerate(names)}
    idx = fit._fit_annotators
    a = np.clip(fit.abilities[idx], 0.0, INFLUENCE_ABILITY_CAP)
    infl = account_influence(fit.counts, fit.scores, am_elo_covariance(fit), a)
    push = np.full(len(names), np.nan)
    select = np.full(len(names), np.nan)
    for k, n in enumerate(infl.accounts):
        push[pos[n]] = infl.max_z[k]
        select[pos[n]] = -infl.log_p_select[k]
    ab = dict(zip(fit.annotators, fit.abilities, strict=True))
    x = _full_scores(fit, counts.models)
    x = np.where(np.isfinite(x), x, 0.0)
    return {
        "accounts": np.array(names, dtype=object),
        "push": push,
        "select": select,
        "evalue": e_values(counts, x),
        "low_ability": -np.array([ab.get(n, np.nan) for n in names]),
    }


def auc(scores: np.ndarray, positive: np.ndarray) -> float:
    """Area under the ROC curve of ``scores`` for the ``positive`` class (Mann–Whitney U / n₊n₋;
    NaN scores count as the least suspicious, +∞ as the most)."""
    from scipy.stats import rankdata

    s = np.where(np.isnan(scores), -np.inf, scores)
    r = rankdata(s)
    pos = np.asarray(positive, bool)
    n1, n0 = int(pos.sum()), int((~pos).sum())
    if n1 == 0 or n0 == 0:
        return float("nan")
    return float((r[pos].sum() - n1 * (n1 + 1) / 2) / (n1 * n0))


#: The per-account statistics of :func:`account_statistics` a detector ranks accounts by.
DETECTORS: tuple[str, ...] = ("push", "select", "evalue", "low_ability")


def detector_roc(
    counts: PairCounts,
    attackers: Sequence[str],
    *,
    start: Any = None,
    min_votes: int = 50,
) -> dict[str, float]:
    """ROC AUC of each detector statistic (:data:`DETECTORS`, :func:`account_statistics` on
    ``counts``) separating the ``attackers`` accounts from the honest ones, both restricted to
    accounts with ≥ ``min_votes`` votes (smaller ones are not in today's screened fit): 1 = every
    attacker ranked more suspicious than every honest account, 0.5 = indistinguishable
    (Mann–Whitney, :func:`auc`). Also ``n_attackers`` and ``n_honest``."""
    stats = account_statistics(counts, start)
    names = counts.annotators or ()
    votes = np.bincount(counts.annotator, counts.totals, len(names))  # type: ignore[arg-type]
    bad = set(attackers)
    pos = np.array([n in bad for n in names], dtype=bool)
    ok = votes >= min_votes
    out = {d: auc(stats[d][ok], pos[ok]) for d in DETECTORS}
    out["n_attackers"] = int((pos & ok).sum())
    out["n_honest"] = int((~pos & ok).sum())
    return out


def roc_seed(
    arena: HonestArena,
    *,
    seed: int,
    families: Sequence[Family] = FAMILIES,
    targets: Sequence[str] = ("top", "middle", "bottom"),
    level: int = 10,
    max_votes: int | None = None,
    accuracy: float = 1.0,
    precision: float = 1.1,
    log: Callable[[str], None] | None = None,
) -> list[dict[str, Any]]:
    """What a detector sees of each attack at the volume where it lifts the target by ``level``
    places on m-ELO: per (target, family), that number of votes (:func:`votes_needed` on m-ELO,
    to ``precision``; the budget ``max_votes`` — default 25 % of the honest votes — when not
    reached, ``censored``) and :func:`detector_roc` of the arena with those votes — the attack
    streams of :func:`run_seed` (same seeds)."""
    max_votes = max_votes or int(0.25 * arena.n_votes)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", StableArenaWarning)
        x0 = m_elo_scores(arena.counts)
        start = _screened_am_elo(arena.counts, None)
    fits = _Fits(x_melo=x0)
    out = []
    for tname, target, fam, stream in _attacks(
        arena, x0, targets, families, max_votes, accuracy, seed
    ):
        rank0 = _rank_of(x0, target)

        def lift(
            v: int, stream: AttackStream = stream, target: int = target, rank0: int = rank0
        ) -> int:
            c = merge_counts(arena.counts, stream.counts(v, arena.models, arena))
            return rank0 - _rank_of(defence_scores("m-elo", c, fits)[0], target)

        v = votes_needed(lift, (level,), max_votes, start=1, precision=precision)[level]
        n = v or max_votes
        att = stream.counts(n, arena.models, arena)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", StableArenaWarning)
            roc = detector_roc(merge_counts(arena.counts, att), att.annotators or (), start=start)
        rec = {
            "seed": seed,
            "target": tname,
            "target_model": arena.models[target],
            "family": fam.name,
            "level": level,
            "votes": n,
            "censored": v is None,
            "max_votes": max_votes,
            "fraction": arena.fraction,
            # an AUC without attacker accounts of ≥ 50 votes is None (NaN: not JSON)
            **{
                f"auc_{k}" if k in DETECTORS else k: None if math.isnan(val) else val
                for k, val in roc.items()
            },
        }
        out.append(rec)
        if log:
            log(f"seed {seed} {tname} {fam.name}: {n} votes, {roc}")
    return out


def summarise_roc(records: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """One row per (family, target) of :func:`roc_seed` records: the votes and each detector's
    AUC, mean ± SE over seeds (NaN AUCs — no attacker account with enough votes — left out),
    and the number of censored seeds."""
    groups: dict[tuple[str, str], list[dict[str, Any]]] = {}
    for r in records:
        groups.setdefault((r["family"], r["target"]), []).append(r)

    def mse(vals: list[float]) -> tuple[float | None, float | None]:
        v = np.array([x for x in vals if x is not None and math.isfinite(x)], float)
        if not len(v):
            return None, None
        return float(v.mean()), float(v.std(ddof=1) / math.sqrt(len(v))) if len(v) > 1 else None

    out = []
    for (fam, tgt), group in groups.items():
        row: dict[str, Any] = {"family": fam, "target": tgt, "seeds": len(group)}
        row["votes"], row["votes_se"] = mse([r["votes"] for r in group])
        row["censored"] = int(sum(bool(r["censored"]) for r in group))
        row["n_attackers"], _ = mse([r["n_attackers"] for r in group])
        for d in DETECTORS:
            row[f"auc_{d}"], row[f"auc_{d}_se"] = mse([r[f"auc_{d}"] for r in group])
        out.append(row)
    return out
