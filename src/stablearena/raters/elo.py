"""Online Elo, the order-dependent baseline that m-ELO replaces (docs/methods/ratings.md).

For each battle, in order, with R the current ratings, C = ln10/400 and W the score of model_a
(1 won, 0 lost, ½ either kind of tie):

    E = σ(C (R_a − R_b)) = 1 / (1 + 10^((R_b − R_a)/400))
    R_a ← R_a + K w (W − E),    R_b ← R_b − K w (W − E)

with K = 4 and every model starting at 1000, FastChat's defaults (``compute_online_elo`` in
FastChat's ``elo_analysis.py``, used by Chatbot Arena before it moved to maximum likelihood),
and w the battle's weight (1 when the log has none). Each update is one stochastic-gradient
step, learning rate K/C, on the m-ELO log-likelihood of that battle (docs/methods/ratings.md), so the result
depends on the order of the battles. The usual remedy is to replay the log in many random
orders and report the mean and spread of the scores (am-ELO paper §2, citing Sismanis 2010);
the am-ELO paper's baseline shuffles the data 1,000 times and averages (§5.2):
``Elo(shuffles=1000)``.

The update loop is sequential by nature; it runs compiled (numba) and each shuffled order is
drawn by a Fisher–Yates shuffle driven by a SplitMix64 stream seeded from ``(seed, shuffle
number)``, so any one order can be reproduced on its own with :func:`shuffle_order`.
"""

from __future__ import annotations

import math
import warnings
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np
from numba import njit

from .._numeric import expit
from ..data.battles import Battles, PairCounts
from ..data.graph import check_comparison_graph
from ..errors import DisconnectedGraphError, InputError, StableArenaWarning
from .base import (
    ELO_SCALE,
    MAX_RATING,
    Convergence,
    Fitted,
    Rater,
    parse_anchor,
    register_rater,
)
from .bradley_terry import bradley_terry_loglik

if TYPE_CHECKING:  # pragma: no cover
    import pandas as pd

__all__ = [
    "Elo",
    "EloFitted",
    "online_elo",
    "online_elo_shuffled",
    "shuffle_order",
    "DEFAULT_K",
    "DEFAULT_INITIAL",
]

#: FastChat's K-factor (``compute_online_elo(..., K=4)``).
DEFAULT_K: float = 4.0
#: FastChat's initial rating (``INIT_RATING = 1000``).
DEFAULT_INITIAL: float = 1000.0

_GOLDEN = np.uint64(0x9E3779B97F4A7C15)
_MIX1 = np.uint64(0xBF58476D1CE4E5B9)
_MIX2 = np.uint64(0x94D049BB133111EB)
_S30 = np.uint64(30)
_S27 = np.uint64(27)
_S31 = np.uint64(31)
_S11 = np.uint64(11)
_TWO_M53 = 1.0 / 9007199254740992.0  # 2**-53


@njit(cache=True)
def _splitmix64(state: np.uint64) -> tuple[np.uint64, np.uint64]:
    """One step of SplitMix64 (Steele, Lea & Flood 2014): (new state, output)."""
    state = state + _GOLDEN
    z = state
    z = (z ^ (z >> _S30)) * _MIX1
    z = (z ^ (z >> _S27)) * _MIX2
    return state, z ^ (z >> _S31)


@njit(cache=True)
def _stream_state(seed: np.uint64, s: np.uint64) -> np.uint64:
    """Initial state of the stream for shuffle ``s``: two SplitMix64 mixes of (seed, s)."""
    st, z = _splitmix64(seed)
    st, z2 = _splitmix64(z ^ (s * _GOLDEN))
    return z2


@njit(cache=True)
def _draw_index(state: np.uint64, t: int, n: int) -> tuple[np.uint64, int]:
    """Next stream state and an index uniform on t..n−1 (53-bit float; bias below 2⁻⁵³·n)."""
    state, z = _splitmix64(state)
    u = float(z >> _S11) * _TWO_M53
    return state, t + int(u * (n - t))


@njit(cache=True)
def _fill_order(order: np.ndarray, seed: np.uint64, s: np.uint64) -> None:
    """Forward Fisher–Yates (Durstenfeld) shuffle of 0..n−1 into ``order`` for shuffle ``s``:
    step t swaps position t with a uniform position k ∈ [t, n), then fixes position t."""
    n = order.shape[0]
    for t in range(n):
        order[t] = t
    state = _stream_state(seed, s)
    for t in range(n):
        state, k = _draw_index(state, t, n)
        tmp = order[t]
        order[t] = order[k]
        order[k] = tmp


@njit(cache=True)
def _elo_pass(
    a: np.ndarray,
    b: np.ndarray,
    score: np.ndarray,
    kw: np.ndarray,
    order: np.ndarray,
    ratings: np.ndarray,
    scale: float,
) -> None:
    """One pass of online Elo over the battles at ``order`` (in place on ``ratings``)."""
    for t in range(order.shape[0]):
        r = order[t]
        ia = a[r]
        ib = b[r]
        e = 1.0 / (1.0 + math.exp(scale * (ratings[ib] - ratings[ia])))
        d = kw[r] * (score[r] - e)
        ratings[ia] += d
        ratings[ib] -= d


@njit(cache=True)
def _elo_shuffles(
    a: np.ndarray,
    b: np.ndarray,
    score: np.ndarray,
    kw: np.ndarray,
    m: int,
    initial: float,
    scale: float,
    seed: np.uint64,
    shuffles: int,
) -> np.ndarray:
    """Final ratings of ``shuffles`` passes, each over its own random order: (shuffles, m).

    The shuffle is fused with the pass: step t of the forward Fisher–Yates shuffle of
    :func:`_fill_order` moves a uniformly chosen remaining battle to position t of working
    copies of the columns, and that battle is played at once — the same order as
    :func:`_fill_order` gives, without an index indirection.
    """
    n = a.shape[0]
    out = np.empty((shuffles, m))
    wa = np.empty_like(a)
    wb = np.empty_like(b)
    ws = np.empty_like(score)
    wk = np.empty_like(kw)
    ratings = np.empty(m)
    for s in range(shuffles):
        wa[:] = a
        wb[:] = b
        ws[:] = score
        wk[:] = kw
        ratings[:] = initial
        state = _stream_state(seed, np.uint64(s))
        for t in range(n):
            state, k = _draw_index(state, t, n)
            ia = wa[k]
            ib = wb[k]
            sc = ws[k]
            kk = wk[k]
            wa[k] = wa[t]
            wb[k] = wb[t]
            ws[k] = ws[t]
            wk[k] = wk[t]
            e = 1.0 / (1.0 + math.exp(scale * (ratings[ib] - ratings[ia])))
            d = kk * (sc - e)
            ratings[ia] += d
            ratings[ib] -= d
        out[s] = ratings
    return out


def _seed64(seed: int) -> np.uint64:
    return np.uint64(int(seed) & 0xFFFFFFFFFFFFFFFF)


def shuffle_order(n_battles: int, seed: int, shuffle: int) -> np.ndarray:
    """The order of the battles used by shuffle number ``shuffle`` (0-based) of
    ``Elo(shuffles=..., seed=seed)``: a permutation of ``0..n_battles−1`` (``int64``)."""
    order = np.empty(int(n_battles), dtype=np.int64)
    _fill_order(order, _seed64(seed), np.uint64(int(shuffle)))
    return order


def _prepare(
    model_a: np.ndarray,
    model_b: np.ndarray,
    score: np.ndarray,
    weight: np.ndarray | None,
    k: float,
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    a = np.ascontiguousarray(model_a, dtype=np.int32)
    b = np.ascontiguousarray(model_b, dtype=np.int32)
    s = np.ascontiguousarray(score, dtype=np.float64)
    with np.errstate(over="ignore"):
        kw = (
            np.full(len(a), float(k))
            if weight is None
            else float(k) * np.asarray(weight, dtype=np.float64)
        )
    if not np.all(np.isfinite(kw)):
        raise InputError(
            f"K × weight overflows (k={k}); use a smaller K-factor or smaller weights."
        )
    return a, b, s, np.ascontiguousarray(kw)


def online_elo(
    model_a: np.ndarray,
    model_b: np.ndarray,
    score: np.ndarray,
    n_models: int,
    *,
    k: float = DEFAULT_K,
    initial: float = DEFAULT_INITIAL,
    weight: np.ndarray | None = None,
    order: np.ndarray | None = None,
) -> np.ndarray:
    """Online Elo ratings after one pass over the battles (docs/methods/ratings.md).

    ``model_a``/``model_b`` are integer model codes, ``score`` the score W of model_a (1, 0,
    ½), ``weight`` optional per-battle weights scaling K. ``order`` (a permutation of the battle
    positions) defaults to the order given. Returns the ``n_models`` final Elo-scale ratings.
    """
    a, b, s, kw = _prepare(model_a, model_b, score, weight, k)
    idx = np.arange(len(a)) if order is None else np.ascontiguousarray(order, dtype=np.int64)
    ratings = np.full(int(n_models), float(initial))
    _elo_pass(a, b, s, kw, idx, ratings, ELO_SCALE)
    return ratings


def online_elo_shuffled(
    model_a: np.ndarray,
    model_b: np.ndarray,
    score: np.ndarray,
    n_models: int,
    *,
    shuffles: int,
    seed: int = 0,
    k: float = DEFAULT_K,
    initial: float = DEFAULT_INITIAL,
    weight: np.ndarray | None = None,
) -> np.ndarray:
    """Final online-Elo ratings for each of ``shuffles`` random orders, shape (shuffles, n_models).

    Row ``s`` is :func:`online_elo` over :func:`shuffle_order` ``(n, seed, s)``.
    """
    a, b, s, kw = _prepare(model_a, model_b, score, weight, k)
    return _elo_shuffles(
        a, b, s, kw, int(n_models), float(initial), ELO_SCALE, _seed64(seed), int(shuffles)
    )


@dataclass(frozen=True, eq=False, kw_only=True)
class EloFitted(Fitted):
    """Online-Elo result.

    ``scores`` are C·(mean rating − its mean), so :meth:`predict` is σ(C (R_i − R_j)) of the
    mean ratings; ``loglik`` is the ties-as-half Bradley–Terry log-likelihood of those ratings on
    the pair counts, so ``nll`` is directly comparable with m-ELO's (which maximises it).

    Attributes:
        ratings_std: per-model standard deviation (Elo points, over the shuffled orders, ddof 0)
            of the final rating, or ``None`` when the battles were taken in the order given.
        shuffles: number of random orders averaged (0 = the order given).
        initial: the initial rating; with no anchor, ``ratings`` have this mean.
    """

    ratings_std: np.ndarray | None = field(default=None, repr=False)
    shuffles: int = 0
    initial: float = DEFAULT_INITIAL

    @property
    def ratings(self) -> np.ndarray:
        """Mean online-Elo ratings; their mean is ``initial`` (Elo updates are zero-sum) unless
        a model is anchored."""
        r = self.scores / self.elo_scale
        if self.anchor is None:
            return r - r.mean() + self.initial
        k = self.models.index(self.anchor[0])
        return r - r[k] + self.anchor[1]

    def leaderboard(self) -> pd.DataFrame:
        """Columns ``rank, model, rating, battles`` (and ``std`` over shuffles), best first."""
        lb = super().leaderboard()
        if self.ratings_std is not None:
            lb["std"] = self.ratings_std[self.order()]
        return lb

    def to_dict(self) -> dict[str, Any]:
        """The ``rank`` JSON contract plus ``"shuffles"`` and, per model, ``"std"`` when
        shuffled."""
        out = super().to_dict()
        out["shuffles"] = self.shuffles
        if self.ratings_std is not None:
            std = dict(zip(self.models, self.ratings_std.tolist(), strict=True))
            for entry in out["models"]:
                entry["std"] = float(std[entry["model"]])
        return out

    def refit(self, counts: PairCounts) -> Fitted:
        raise NotImplementedError(
            "online Elo cannot be refitted on pair counts: its ratings depend on the order of the "
            "battles, which counts do not keep. Resample the battle log and call Elo().fit, or "
            "bootstrap m-ELO instead."
        )


#: The largest K factor: one battle moves a rating by at most K points; K = 400 already moves it
#: by the whole 10 : 1 odds scale, and a K near 1e306 made every rating overflow or garbage.
MAX_K = 1000.0


def _check_options(k: float, initial: float, shuffles: int, seed: int) -> None:
    if not (isinstance(k, (int, float)) and math.isfinite(k) and 0 < k <= MAX_K):
        raise InputError(
            f"Elo option k must be a number above 0 and at most {MAX_K:g} (--elo-k; FastChat "
            f"uses 4; one battle moves a rating by at most k points), not {k!r}."
        )
    if (
        not (isinstance(initial, (int, float)) and math.isfinite(initial))
        or abs(initial) > MAX_RATING
    ):
        raise InputError(
            f"Elo option initial must be a finite number from {-MAX_RATING:,.0f} to "
            f"{MAX_RATING:,.0f} (default 1000), not {initial!r}."
        )
    if isinstance(shuffles, bool) or not isinstance(shuffles, (int, np.integer)) or shuffles < 0:
        raise InputError(
            f"Elo option shuffles must be a non-negative integer (0 = order given; the papers use "
            f"1000), not {shuffles!r}."
        )
    if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)):
        raise InputError(f"Elo option seed must be an integer, not {seed!r}.")


@register_rater("elo")
@dataclass(frozen=True)
class Elo(Rater):
    """Online Elo (docs/methods/ratings.md): R_a += K w (W − σ(C(R_a − R_b))), R_b −= the same, per battle.

    Options:
        k: K-factor (FastChat: 4). A battle's weight, if the log has weights, multiplies it.
        initial: everyone's starting rating (FastChat: 1000).
        shuffles: 0 = one pass in the order given; S > 0 = S passes over seeded random orders,
            reporting the per-model mean rating and its standard deviation.
        seed: seed of the random orders.
        anchor: ``"MODEL=RATING"`` shifts the reported ratings so that MODEL reads RATING.

    Needs the raw battle log: pair counts have lost the order, so fitting on
    :class:`PairCounts` is an :class:`InputError`.
    """

    k: float = DEFAULT_K
    initial: float = DEFAULT_INITIAL
    shuffles: int = 0
    seed: int = 0
    anchor: str | tuple[str, float] | None = None

    def _overflow(self, runs: np.ndarray) -> None:
        finite = np.abs(runs[np.isfinite(runs)])
        largest = f"{finite.max():.3g}" if finite.size else "inf"
        raise InputError(
            f"online Elo ratings overflowed with k={self.k} (largest finite |rating| {largest}); "
            "use a smaller K-factor or smaller weights (FastChat uses K = 4)."
        )

    def fit(self, data: Battles | PairCounts) -> EloFitted:
        if isinstance(data, PairCounts):
            raise InputError(
                f"{data.source}: online Elo needs the battles in order, but got pair counts "
                "(which keep no order). Load the raw battle log, or use --method m-elo, which "
                "fits exactly on counts."
            )
        if not isinstance(data, Battles):
            raise InputError(f"expected Battles, got {type(data).__name__}.")
        if len(data) == 0:
            raise InputError(f"{data.source}: the battle log is empty.")
        _check_options(self.k, self.initial, self.shuffles, self.seed)
        anchor = parse_anchor(self.anchor)
        m = data.n_models
        counts = data.counts()
        if counts.n_comparisons <= 0:
            raise InputError(
                f"{data.source}: every battle has weight 0, so there is nothing to rate; give "
                "some battles a positive weight."
            )
        # A disconnected comparison graph (or a model with no battle that counts) leaves online
        # Elo's ratings of separate groups at arbitrary levels relative to each other. The fit
        # still returns them (online Elo is defined for any log) but says so in a warning and in
        # the notes; `stablearena rank --method elo` refuses such a log like every other method.
        notes: tuple[str, ...] = ()
        try:
            check_comparison_graph(counts)
        except DisconnectedGraphError as exc:
            notes = (
                f"{exc} Online Elo rated them anyway; ratings in different groups are not "
                "comparable.",
            )
            warnings.warn(notes[0], StableArenaWarning, stacklevel=2)
        score = data.scores
        if self.shuffles == 0:
            runs = online_elo(
                data.model_a,
                data.model_b,
                score,
                m,
                k=self.k,
                initial=self.initial,
                weight=data.weight,
            )[None, :]
        else:
            runs = online_elo_shuffled(
                data.model_a,
                data.model_b,
                score,
                m,
                shuffles=int(self.shuffles),
                seed=int(self.seed),
                k=self.k,
                initial=self.initial,
                weight=data.weight,
            )
        if not np.all(np.isfinite(runs)):
            self._overflow(runs)
        mean = runs.mean(axis=0)
        x = ELO_SCALE * (mean - mean.mean())
        n, s = counts.totals, counts.score
        total = float(n.sum())
        res = s - n * expit(x[counts.i] - x[counts.j])
        grad = np.bincount(counts.i, res, m) - np.bincount(counts.j, res, m)
        loglik = bradley_terry_loglik(x, counts.i, counts.j, n, s) if total > 0 else 0.0
        std = runs.std(axis=0) if self.shuffles > 0 else None
        if not (
            np.all(np.isfinite(x))
            and np.all(np.isfinite(grad))
            and math.isfinite(loglik)
            and (std is None or np.all(np.isfinite(std)))
        ):
            self._overflow(runs)
        runs_done = max(int(self.shuffles), 1)
        conv = Convergence(
            converged=True,
            iterations=runs_done,
            grad_norm=float(np.linalg.norm(grad)) / total if total > 0 else 0.0,
            solver="online",
            message=(
                f"{runs_done} online pass(es) over {len(data)} battles; online Elo does not "
                "maximise the likelihood — grad_norm is the m-ELO gradient at these ratings"
            ),
        )
        return EloFitted(
            method=self.name,
            models=data.models,
            scores=x,
            loglik=loglik,
            n_comparisons=total,
            battles=counts.battles_per_model(),
            convergence=conv,
            params=self.get_params(),
            anchor=anchor,
            counts=counts,
            ratings_std=std,
            notes=notes,
            shuffles=int(self.shuffles),
            initial=float(self.initial),
        )
