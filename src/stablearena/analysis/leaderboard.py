"""The leaderboard payload: the JSON contract of ``stablearena rank --format json``.

One function builds it for every consumer — the CLI (``rank``), the HTML report and the live
arena's ``GET /v1/leaderboard`` — so they cannot drift apart:

``{"method", "n_battles", "n_models", "nll", "models": [{"rank", "model", "rating", "battles",
…}], "convergence", "notes", "source", "simulated"}``, and with intervals (``ci`` other than
``"none"``) per model ``se, ci_low, ci_high, rank_low, rank_high, displayed_rank, tier`` plus a
``"ci"`` object saying how they were computed. Later features add keys, never rename these.
"""

from __future__ import annotations

import math
from typing import Any

__all__ = [
    "leaderboard_payload",
    "annotators_payload",
    "add_intervals",
    "intervals_for",
    "interval_caption",
    "interval_records",
    "convergence_text",
    "INTERVAL_KEYS",
]


def leaderboard_payload(
    fitted: Any,
    data: Any = None,
    *,
    source: str = "<memory>",
    simulated: bool = False,
    ci: str = "none",
    level: float = 0.95,
    rounds: int = 1000,
    cluster: str | None = None,
    seed: int | None = None,
    progress: bool = False,
    precomputed: Any = None,
) -> dict[str, Any]:
    """The ``rank --format json`` payload of a fitted rater (``fitted.to_dict()`` plus
    ``source`` and ``simulated``), with intervals when ``ci`` is ``fisher``, ``sandwich`` or
    ``bootstrap`` (``data``: the battles or counts it was fitted on, needed for a clustered
    bootstrap). ``precomputed``: the :class:`~stablearena.raters.uncertainty.Intervals` of these
    options when the caller already has them (the report draws them too), so that they are
    computed once.

    A fit that the live arena would not publish (stablearena.analysis.fitcheck: not converged, or a
    score that is not finite) gets a note saying so, first among the notes."""
    from .fitcheck import board_problems

    payload = fitted.to_dict()
    payload["source"] = source
    payload["simulated"] = simulated
    conv = payload.get("convergence") or {}
    problems = board_problems(
        {str(m): float(x) for m, x in zip(fitted.models, fitted.scores, strict=True)},
        converged=bool(conv.get("converged", True)) or conv.get("solver") == "online",
    )
    if problems:
        payload["notes"] = [
            f"not a board to publish: {'; '.join(problems)} (the live arena keeps its last good "
            "board instead; more votes, or another method, may give a fit that converges)",
            *payload.get("notes", []),
        ]
    if ci != "none":
        add_intervals(
            payload,
            fitted,
            data,
            ci,
            level,
            rounds,
            cluster,
            seed,
            progress=progress,
            precomputed=precomputed,
        )
    return payload


def annotators_payload(
    fitted: Any,
    *,
    source: str = "<memory>",
    simulated: bool = False,
    ability_threshold: float = 0.0,
    normalization: str = "mean",
    trust: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """The ``stablearena annotators --format json`` payload of a fitted am-ELO result
    (:class:`~stablearena.raters.annotator.AmEloFitted`) — the one builder for the CLI and the
    live arena's ``GET /v1/annotators``. Every annotator with ``records, ability, ability_se,
    flagged, reason, status``: the flagged ones first (``status`` flagged or excluded), then
    those in the fit, then those waiting for more records (``left_out``: fewer than
    ``min_records``), each group worst (lowest ability) first; ``flagged`` lists the flagged
    names, ``n_waiting`` counts the waiting ones.

    ``trust``: ``{"cap": …, "ramp_votes": …}`` (optionally ``"ramp_days"`` and ``"ages"``,
    name → days: the age ramp) adds the bounded-influence rule
    (:func:`stablearena.crowd.trust.account_trust`): per annotator ``weight, influence,
    influence_model, influence_z, influence_flag, trust`` (the reason; ``age_days`` with ages,
    None for an account that counts as old), and a ``"trust"`` object with the settings and
    how many accounts were capped, ramped (by votes), young (ramped by age) and flagged."""
    d = fitted.to_dict()
    status = {row.annotator: row.status for row in fitted.annotator_table().itertuples(index=False)}
    for rec in d["annotators"]:
        rec["status"] = status[rec["annotator"]]
    summary = None
    if trust is not None:
        from ..crowd.trust import account_trust

        accounts = {t.annotator: t for t in account_trust(fitted, **trust)}
        for rec in d["annotators"]:
            t = accounts[rec["annotator"]]
            rec |= {
                "weight": t.weight,
                "influence": t.influence,
                "influence_model": t.influence_model,
                "influence_z": t.influence_z,
                "influence_flag": t.flagged,
                # left out by the arena's rule (influence, weight 0): its reason, not a guess
                "trust": rec["reason"]
                if t.weight == 0
                and rec["reason"].startswith(("excluded by influence", "left out: weight 0"))
                else t.reason,
            }
            if trust.get("ages") is not None:  # +∞ (an account that counts as old): None
                age = t.age_days
                rec["age_days"] = age if age is not None and math.isfinite(age) else None
        summary = {
            "ability_cap": trust.get("cap"),
            "ramp_votes": trust.get("ramp_votes"),
            "n_capped": sum(t.capped for t in accounts.values()),
            "n_ramped": sum(t.ramped for t in accounts.values()),
            "ramp_days": trust.get("ramp_days") if trust.get("ages") is not None else None,
            "n_young": sum(t.aged for t in accounts.values()),
            "young_share": trust.get("young_share") if trust.get("ages") is not None else None,
            "n_influence_flagged": sum(t.flagged is not None for t in accounts.values()),
        }
    ordered = sorted(d["annotators"], key=lambda r: ANNOTATOR_GROUPS.get(r["status"], 1))
    out = {
        "method": d["method"],
        "source": source,
        "simulated": simulated,
        "n_battles": d["n_battles"],
        "n_models": d["n_models"],
        "n_annotators": len(ordered),
        "n_flagged": int(fitted.flagged.sum()),
        "n_waiting": sum(r["status"] == "left_out" for r in ordered),
        "flagged": [r["annotator"] for r in ordered if ANNOTATOR_GROUPS.get(r["status"]) == 0],
        "ability_threshold": ability_threshold,
        "min_records": int(dict(fitted.params).get("min_records", 0)),
        "normalization": normalization,
        "convergence": d["convergence"],
        "notes": d["notes"],
        "annotators": ordered,
    }
    if summary is not None:
        out["trust"] = summary
    return out


#: Annotator status → group of the annotators listing: 0 flagged, 1 in the fit, 2 waiting.
ANNOTATOR_GROUPS: dict[str, int] = {"flagged": 0, "excluded": 0, "included": 1, "left_out": 2}


def convergence_text(conv: dict[str, Any]) -> str:
    """A caption fragment on how the fit ended (online Elo does not optimise anything)."""
    if not conv:
        return ""
    if conv.get("solver") == "online":
        return f", online updates ({conv.get('iterations')} passes)"
    state = "converged" if conv.get("converged") else "NOT converged"
    return f", {conv.get('solver')} {state} in {conv.get('iterations')} iterations"


def add_intervals(
    payload: dict[str, Any],
    fitted: Any,
    data: Any,
    ci: str,
    level: float,
    rounds: int,
    cluster: str | None,
    seed: int | None,
    *,
    progress: bool = False,
    precomputed: Any = None,
) -> None:
    """Add per-model intervals, rank intervals and tiers (stablearena.raters.uncertainty) to a
    ``rank`` payload, and a "ci" object saying how they were computed (``precomputed``: the
    intervals of exactly these options, when the caller has them already)."""
    from ..errors import InputError

    if precomputed is not None:
        if precomputed.method != ci or precomputed.level != level:
            raise InputError(
                f"precomputed {precomputed.method} intervals at level {precomputed.level} do not "
                f"match ci={ci!r}, level={level}."
            )
        iv = precomputed
    else:
        iv = intervals_for(
            fitted,
            data,
            ci,
            level=level,
            rounds=rounds,
            cluster=cluster,
            seed=seed,
            progress=progress,
        )
    where = {name: k for k, name in enumerate(fitted.models)}
    for entry in payload["models"]:
        k = where[entry["model"]]
        entry["se"] = float(iv.se[k])
        entry["ci_low"] = float(iv.ci_low[k])
        entry["ci_high"] = float(iv.ci_high[k])
        entry["rank_low"] = int(iv.rank_low[k])
        entry["rank_high"] = int(iv.rank_high[k])
        entry["displayed_rank"] = int(iv.displayed_rank[k])
        entry["tier"] = int(iv.tier[k])
    info: dict[str, Any] = {
        "method": ci,
        "level": level,
        "seed": 0 if seed is None else seed,
        "dispersion": float(iv.covariance.dispersion),
        "tiers": "adjacent models, two-sided z-tests, Holm-adjusted",
        "notes": list(iv.notes),
    }
    if ci == "bootstrap":
        assert iv.bootstrap is not None
        info.update(rounds=rounds, cluster=cluster or "battle", failed_rounds=iv.bootstrap.failed)
    else:
        info["rank_intervals"] = "normal approximation (draws from the estimated covariance)"
    payload["ci"] = info


def intervals_for(
    fitted: Any,
    data: Any,
    ci: str,
    *,
    level: float = 0.95,
    rounds: int = 1000,
    cluster: str | None = None,
    seed: int | None = None,
    progress: bool = False,
) -> Any:
    """The :class:`~stablearena.raters.uncertainty.Intervals` that ``rank``'s options ask for: ``ci``
    (fisher, sandwich, bootstrap) at ``level``; the bootstrap with ``rounds`` and ``seed``
    (default 0), clustered by ``cluster`` on the raw battles ``data`` when given."""
    from ..data.battles import Battles
    from ..raters.uncertainty import intervals

    return intervals(
        fitted,
        ci,  # type: ignore[arg-type]
        level=level,
        rounds=rounds,
        seed=0 if seed is None else seed,
        battles=data if isinstance(data, Battles) else None,
        cluster=cluster,  # type: ignore[arg-type]
        progress=progress,
    )


def interval_caption(info: dict[str, Any]) -> str:
    """One line saying which intervals the table shows."""
    text = f"{info['level']:.0%} {info['method']} intervals"
    if info["method"] == "bootstrap":
        text += f" ({info['rounds']} rounds, resampling {info['cluster']}s)"
    if info.get("dispersion", 1.0) != 1.0:
        text += f", dispersion φ = {info['dispersion']:.3f}"
    return text + "; tiers: Holm-adjusted tests of adjacent models"


INTERVAL_KEYS = ("se", "ci_low", "ci_high", "rank_low", "rank_high", "displayed_rank", "tier")


def interval_records(models: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Table rows with the interval columns condensed ("1093.8–1114.2", "5–7") to fit a terminal."""
    out = []
    for e in models:
        # "rank (UB)" is LMArena's upper-bound rank (1 + the models clearly above); "#" is
        # only the position by rating, 1..N (the payload's "rank")
        row: dict[str, Any] = {
            "rank (UB)": e["displayed_rank"],
            "#": e["rank"],
            "model": e["model"],
            "rating": e["rating"],
        }
        row["interval"] = f"{e['ci_low']:.1f}–{e['ci_high']:.1f}"
        row["ranks"] = (
            str(e["rank_low"])
            if e["rank_low"] == e["rank_high"]
            else f"{e['rank_low']}–{e['rank_high']}"
        )
        row["tier"] = e["tier"]
        row.update(
            {k: v for k, v in e.items() if k not in row and k not in (*INTERVAL_KEYS, "rank")}
        )
        out.append(row)
    return out
