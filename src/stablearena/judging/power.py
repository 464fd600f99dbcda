"""How many more judge calls an automatic arena needs to separate its top models or a pair.

From the current fit of a running or finished ``stablearena auto`` (:func:`power_estimate`):

- the information about the model scores now, J₀ = Σ₀⁺ (Σ₀ the fit's Fisher covariance of the
  scores, the one the ``--precision-top`` stop reads);
- the information one more successful judgement adds, as the design has been spending it: over
  the recent judgements (the last half of the run), the judgement of pair (i, j) by a judge of
  am-ELO ability a carries I = a₊² p(1 − p) about x_i − x_j, p = σ(a(x_i − x_j))
  (:func:`~stablearena.judging.auto_arena.judge_information`), so the mean per judgement is
  ΔJ = κ/W Σ_recent I_b (e_i − e_j)(e_i − e_j)ᵀ; κ = tr J₀ / tr Σ_all I_b (e_i − e_j)(e_i − e_j)ᵀ
  calibrates this sum to the fit's own information (it absorbs the dispersion of ties and
  the cost of estimating the abilities);
- after n more judgements, Σ(n) = (J₀ + n ΔJ)⁺, at the current scores (a plug-in: the gaps are
  assumed to stay as estimated).

The target is met at the smallest n for which

- ``top=K``: the top K models' rank intervals at ``level`` (drawn from N(x, Σ(n)), as
  :func:`~stablearena.raters.uncertainty.intervals` draws them) overlap neither each other nor the
  rest's — :func:`~stablearena.judging.auto_arena.top_k_separated`, the same criterion as the precision stop;
- ``pair=(A, B)``: |d| ≥ (z + z_power)·sd(n), d = x_A − x_B, z = Φ⁻¹((1 + level)/2) and
  z_power = Φ⁻¹(power) (``power=None``: 0, i.e. separated if the gap stays at its estimate;
  ``power=0.8``: an 80% chance of separating when the true gap is the estimated one).

n is found by doubling then bisection; calls = n × (judge calls per successful judgement so
far, failures included). A (pair, prompt) is judged at most once: the n judgements, spread over
the pairs as in the recent window, need that many unused prompts per pair; the estimate says
when a pair would run out of prompts (then the estimate assumes battles that cannot happen;
measured, such predictions were mostly far too high).

The plug-in is biased: the needed calls go as 1/d², so an underestimated gap predicts far too
many calls and an overestimated one too few, and a run stops when its *estimate* separates,
which noise can bring early. The predictive estimate (``predictive``, :func:`_predictive`)
draws the true scores from the fit's normal approximation and the future judgements from it,
and reports the quartiles of the calls at which the run would stop.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np

from ..errors import InputError

#: Stop the search above this many further judgements (the answer is then "more than").
MAX_JUDGEMENTS = 10_000_000


@dataclass(frozen=True)
class PowerEstimate:
    """The predicted further cost of separating ``target`` (see the module docstring).

    ``judgements``/``calls``: further successful judgements / judge calls predicted (``None``:
    not reachable as the design spends its calls — see ``notes``); ``separated_now``: whether
    the target is met already; ``prompts_needed``: the most prompts any one pair would then
    have been judged on; ``prompts_out``: pairs that would run out of prompts first;
    ``predictive``: the predictive estimate (:func:`_predictive`): the quartiles of the calls
    over draws of the true scores and of the future judgements, and the share of draws not
    separated within its horizon."""

    target: str
    level: float
    power: float | None
    calls_so_far: int
    judgements_so_far: int
    separated_now: bool
    judgements: int | None
    calls: int | None
    calls_per_judgement: float
    prompts: int
    prompts_needed: int | None
    prompts_out: list[str] = field(default_factory=list)
    predictive: dict[str, Any] | None = None
    notes: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True)
class InformationModel:
    """The information a run has and gains per judgement (the module docstring's J₀, ΔJ): the
    fit's scores ``x`` and Fisher covariance ``sigma``, ``j0`` = Σ₀⁺, ``step`` = ΔJ (the mean
    information of a recent successful judgement, calibrated by κ), ``calls_per`` judge calls
    per successful judgement; ``ok`` the successful judgements in run order with the model
    indices ``ii``/``jj`` of each."""

    fitted: Any
    x: np.ndarray
    sigma: np.ndarray
    j0: np.ndarray
    step: np.ndarray
    calls_per: float
    ok: list[dict[str, Any]]
    ii: np.ndarray
    jj: np.ndarray
    notes: tuple[str, ...] = ()

    def sd(self, contrast: np.ndarray, n: float) -> float:
        """The predicted standard deviation of ``contrast`` · x after ``n`` more successful
        judgements: √(cᵀ (J₀ + n ΔJ)⁺ c)."""
        s = np.linalg.pinv(self.j0 + n * self.step, rcond=1e-10, hermitian=True)
        return float(np.sqrt(max(float(contrast @ s @ contrast), 0.0)))


def information_model(result: Any, rater: str = "am-elo") -> InformationModel:
    """:class:`InformationModel` of ``result`` (an :class:`~stablearena.judging.auto_arena.AutoResult`)
    fitted with ``rater``; raises :class:`~stablearena.errors.InputError` when the run has no
    fit with a Fisher covariance yet."""
    from ..errors import StableArenaError
    from ..raters.uncertainty import covariance
    from .auto_arena import fit_judgements, judge_information

    models = list(result.models)
    m = len(models)
    ok = [r for r in result.judgements if r.get("outcome") is not None]
    if len(ok) < 2:
        raise InputError("no fit yet: the run has fewer than two successful judgements")
    battles = result.battles()
    try:
        fitted, notes = fit_judgements(battles, rater)
        cov = covariance(fitted, "fisher")
    except StableArenaError as exc:
        raise InputError(
            f"the run's fit has no Fisher covariance yet ({exc}); judge more"
        ) from None
    x = np.asarray(fitted.scores, dtype=float)
    sigma = np.asarray(cov.scores, dtype=float)
    j0 = np.linalg.pinv((sigma + sigma.T) / 2, rcond=1e-10, hermitian=True)

    # per-judgement information, in run order
    index = {n: k for k, n in enumerate(models)}
    ii = np.array([index[r["x"]] for r in ok])
    jj = np.array([index[r["y"]] for r in ok])
    ability = np.ones(len(ok))
    if getattr(fitted, "abilities", None) is not None and getattr(fitted, "annotators", None):
        by = dict(zip(fitted.annotators, np.asarray(fitted.abilities, dtype=float), strict=True))
        ability = np.array([by.get(r["judge"], 0.0) for r in ok])

    info = judge_information(ability, x[ii] - x[jj])
    s_all = _laplacian(m, ii, jj, info)
    w0 = len(ok) // 2
    recent = slice(w0, None)
    s_recent = _laplacian(m, ii[recent], jj[recent], info[recent]) / (len(ok) - w0)
    kappa = float(np.trace(j0) / np.trace(s_all)) if np.trace(s_all) > 0 else 0.0
    step = kappa * s_recent
    calls_per = max(result.calls / len(ok), 2.0)

    return InformationModel(fitted, x, sigma, j0, step, calls_per, ok, ii, jj, tuple(notes))


def _laplacian(m: int, i: np.ndarray, j: np.ndarray, w: np.ndarray) -> np.ndarray:
    out = np.zeros((m, m))
    np.add.at(out, (i, i), w)
    np.add.at(out, (j, j), w)
    np.add.at(out, (i, j), -w)
    np.add.at(out, (j, i), -w)
    return out


def _z(p: float) -> float:
    from scipy.stats import norm

    return float(norm.ppf(p))


def power_estimate(
    result: Any,
    *,
    prompts: int,
    top: int | None = None,
    pair: tuple[str, str] | None = None,
    level: float = 0.95,
    power: float | None = None,
    rater: str = "am-elo",
    seed: int = 0,
    draws: int = 200,
    scores: Any = None,
) -> PowerEstimate:
    """Predict the further judge calls ``result`` (an :class:`~stablearena.judging.auto_arena.AutoResult`)
    needs to separate its ``top`` K models (as ``--precision-top K`` does) or the ``pair``
    (model names) at ``level``, with the design spending calls as it has recently; ``prompts``:
    the size of the prompt set; ``draws``: paths of the predictive estimate (0: none);
    ``scores``: a what-if — the scores (by model name, in the fit's units) to assume instead of
    the current estimate (the information stays the run's; bench/bench_power.py uses the scores
    a run ends with, to measure how much of the error is the gaps'). The formula is in the
    module docstring."""
    from ..raters.uncertainty import normal_rank_samples, rank_intervals
    from .auto_arena import top_k_separated

    if (top is None) == (pair is None):
        raise InputError("give the number of top models (--top K) or a pair (--pair A B)")
    if not 0.5 <= level < 1:
        raise InputError(f"level must be in [0.5, 1), not {level}")
    if power is not None and not 0.5 <= power < 1:
        raise InputError(f"power must be in [0.5, 1), not {power}")
    if top is not None and top < 1:
        raise InputError("top must be >= 1")
    if power is not None and top is not None:
        raise InputError("power applies to a pair; the top-K estimate is a plug-in")
    models = list(result.models)
    m = len(models)
    if pair is not None:
        unknown = [p for p in pair if p not in models]
        if unknown or pair[0] == pair[1]:
            raise InputError(
                f"--pair needs two different models of the run ({', '.join(models)}), "
                f"not {pair[0]!r} and {pair[1]!r}"
            )
    model = information_model(result, rater)
    ok, fitted, notes = model.ok, model.fitted, list(model.notes)
    x, sigma, j0, step, calls_per = model.x, model.sigma, model.j0, model.step, model.calls_per
    if scores is not None:
        missing = [n for n in models if n not in scores]
        if missing:
            raise InputError(f"scores= lacks {', '.join(missing)}")
        x = np.array([float(scores[n]) for n in models])
    index = {n: k for k, n in enumerate(models)}
    ii, jj, w0 = model.ii, model.jj, len(ok) // 2
    recent = slice(w0, None)

    z = _z(0.5 + level / 2) + (_z(power) if power is not None else 0.0)
    rank = np.empty(m, dtype=np.int64)
    order = fitted.order() if scores is None else np.lexsort((np.array(models), -x))
    rank[order] = np.arange(1, m + 1)

    def sigma_at(n: float) -> np.ndarray:
        return np.linalg.pinv(j0 + n * step, rcond=1e-10, hermitian=True)

    if pair is not None:
        c = np.zeros(m)
        c[index[pair[0]]], c[index[pair[1]]] = 1.0, -1.0
        gap = float(c @ x)
        target = f"{pair[0]} vs {pair[1]}"

        def met(n: float) -> bool:
            v = float(c @ sigma_at(n) @ c)
            return abs(gap) >= z * np.sqrt(max(v, 0.0))

        if gap == 0.0:
            notes.append("the estimated gap is 0: no number of calls separates it at a plug-in")
    else:
        assert top is not None
        target = f"top {top}"

        def met(n: float) -> bool:
            s = sigma_at(n)
            low, _ = rank_intervals(normal_rank_samples(x, s, seed=seed), level)
            _, high = rank_intervals(normal_rank_samples(x, s, seed=seed, worse=True), level)
            return top_k_separated(rank, np.minimum(low, rank), np.maximum(high, rank), top)

    now = met(0.0)
    n_need: int | None = 0
    if not now:
        hi = 1
        while hi <= MAX_JUDGEMENTS and not met(hi):
            hi *= 2
        if hi > MAX_JUDGEMENTS:
            n_need = None
            notes.append(
                f"not separated within {MAX_JUDGEMENTS:,} more judgements spent as the design "
                "has recently spent them (the pair may get no battles, or the gap is ~0)"
            )
        else:
            lo = hi // 2
            while hi - lo > 1:
                mid = (lo + hi) // 2
                if met(mid):
                    hi = mid
                else:
                    lo = mid
            n_need = hi

    # prompts: each (pair, prompt) judged at most once
    done: dict[tuple[int, int], int] = {}
    for r in result.judgements:
        if r.get("stage") != "answer":
            a, b = index[r["x"]], index[r["y"]]
            key = (min(a, b), max(a, b))
            done[key] = done.get(key, 0) + 1
    share: dict[tuple[int, int], int] = {}
    for a, b in zip(ii[recent], jj[recent], strict=True):
        key = (min(a, b), max(a, b))
        share[key] = share.get(key, 0) + 1
    w = len(ok) - w0
    prompts_needed = None
    out: list[str] = []
    if n_need is not None:
        need = {k: done.get(k, 0) + n_need * v / w for k, v in share.items()}
        prompts_needed = int(np.ceil(max([*need.values(), *done.values()])))
        out = [f"{models[a]} vs {models[b]}" for (a, b), v in sorted(need.items()) if v > prompts]
        if out:
            notes.append(
                f"{len(out)} pair(s) would need more than the {prompts} prompts: the estimate "
                "assumes battles that cannot happen and is unreliable (measured, "
                "bench/bench_power.py: mostly far too high)"
            )
    calls = None if n_need is None else int(np.ceil(n_need * calls_per))
    pred = None
    if draws > 0 and not now:
        crit = "pair" if pair is not None else "top"
        c_pair = c if pair is not None else None
        q, never, horizon = _predictive(
            x, sigma, j0, step, rank_fn=(crit, c_pair, z, top, level), draws=draws, seed=seed
        )
        pred = {
            "calls_q25": None if q[0] is None else int(np.ceil(q[0] * calls_per)),
            "calls_median": None if q[1] is None else int(np.ceil(q[1] * calls_per)),
            "calls_q75": None if q[2] is None else int(np.ceil(q[2] * calls_per)),
            "share_not_separated": round(never, 4),
            "horizon_calls": int(np.ceil(horizon * calls_per)),
            "draws": draws,
        }
    return PowerEstimate(
        target=target,
        level=level,
        power=power,
        calls_so_far=int(result.calls),
        judgements_so_far=len(ok),
        separated_now=bool(now),
        judgements=n_need,
        calls=calls,
        calls_per_judgement=round(calls_per, 4),
        prompts=int(prompts),
        prompts_needed=prompts_needed,
        prompts_out=out,
        predictive=pred,
        notes=notes,
    )


def _predictive(
    x: np.ndarray,
    sigma: np.ndarray,
    j0: np.ndarray,
    step: np.ndarray,
    *,
    rank_fn: tuple[str, np.ndarray | None, float, int | None, float],
    draws: int,
    seed: int,
    grid: int = 60,
    rank_draws: int = 400,
) -> tuple[tuple[float | None, float | None, float | None], float, float]:
    """The predictive estimate: the plug-in treats the estimated gaps as the true ones, but a
    run stops when its *estimate* separates, and the estimate moves. Per draw: true scores
    θ ~ N(x, Σ₀); the future judgements' score sum after n more, S_n ~ N(n ΔJ θ, n ΔJ) (a
    Gaussian random walk); the estimate then is x(n) = Σ(n)(J₀ x + S_n); the draw's calls are
    the first n on a geometric grid (``grid`` points from 1 to 10⁶ judgements) at which x(n)
    meets the target with Σ(n) (top K: rank intervals from ``rank_draws`` normal draws, the
    same for every path at a grid point). Returns the quartiles of n over the draws (``None``
    when more than that share never separates within the horizon), the share never separated,
    and the horizon."""
    crit, c, z, top, level = rank_fn
    rng = np.random.default_rng(np.random.SeedSequence(seed, spawn_key=(7,)))
    m = len(x)

    def root(a: np.ndarray) -> np.ndarray:
        vals, vecs = np.linalg.eigh((a + a.T) / 2)
        return vecs * np.sqrt(np.clip(vals, 0.0, None))

    theta = x[None, :] + rng.standard_normal((draws, m)) @ root(sigma).T
    ns = np.unique(np.round(np.geomspace(1, 1e6, grid)).astype(np.int64))
    r_step = root(step)
    walk = np.zeros((draws, m))
    prev = 0
    hit = np.full(draws, np.inf)
    for n in ns:
        walk += np.sqrt(n - prev) * (rng.standard_normal((draws, m)) @ r_step.T)
        prev = n
        live = np.isinf(hit)
        if not live.any():
            break
        s_n = np.linalg.pinv(j0 + n * step, rcond=1e-10, hermitian=True)
        est = (s_n @ (j0 @ x[:, None] + n * step @ theta[live].T + walk[live].T)).T
        if crit == "pair":
            assert c is not None
            ok = np.abs(est @ c) >= z * np.sqrt(max(float(c @ s_n @ c), 0.0))
        else:
            assert top is not None
            e = rng.standard_normal((rank_draws, m)) @ root(s_n).T
            ok = np.concatenate(
                [_top_separated(est[k : k + 50], e, top, level) for k in range(0, len(est), 50)]
            )
        idx = np.flatnonzero(live)[ok]
        hit[idx] = n
    never = float(np.mean(np.isinf(hit)))
    qs = tuple(
        None if np.isinf(v) else float(v)
        for v in np.quantile(hit, [0.25, 0.5, 0.75], method="higher")
    )
    return qs, never, float(ns[-1])  # type: ignore[return-value]


def _top_separated(est: np.ndarray, noise: np.ndarray, top: int, level: float) -> np.ndarray:
    """:func:`~stablearena.judging.auto_arena.top_k_separated` of the rank intervals drawn around each row of
    ``est`` (paths × models) with the same ``noise`` draws (draws × models), vectorised."""
    from ..raters.uncertainty import rank_intervals

    m = est.shape[1]
    smp = est[:, None, :] + noise[None, :, :]
    ranks = 1 + np.argsort(np.argsort(-smp, axis=2, kind="stable"), axis=2)
    p, d = ranks.shape[:2]
    low, _ = rank_intervals(ranks.transpose(1, 0, 2).reshape(d, p * m), level)
    _, high = rank_intervals(ranks.transpose(1, 0, 2).reshape(d, p * m), level)
    order = np.argsort(-est, axis=1, kind="stable")
    point = np.empty_like(order)
    np.put_along_axis(point, order, np.arange(1, m + 1)[None, :].repeat(len(est), 0), axis=1)
    low = np.minimum(low.reshape(p, m), point)
    high = np.maximum(high.reshape(p, m), point)
    ok = np.ones(len(est), dtype=bool)
    for r in range(min(top, m - 1)):
        a, b = order[:, r : r + 1], order[:, r + 1 : r + 2]
        ok &= np.take_along_axis(high, a, 1)[:, 0] < np.take_along_axis(low, b, 1)[:, 0]
    return ok
