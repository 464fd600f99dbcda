"""The one-file HTML report of a fitted arena (``stablearena report``).

:func:`build_report` gathers everything the report shows from a fitted result and the data it
was fitted on — the ``rank`` payload with intervals (:func:`stablearena.analysis.leaderboard.
leaderboard_payload`, so the table is the JSON contract), a data summary, the figures of
:mod:`stablearena.figures.plots` rendered to inline SVG, the annotator screening (am-ELO abilities and
flags, when the log has annotators) and every note and warning — into a :class:`Report`;
:meth:`Report.html` renders it with the package's Jinja2 templates into one self-contained file
(CSS inline, figures as inline SVG, no script and nothing fetched from the network).

The templates are reusable pieces: ``components.html.j2`` holds macros (``leaderboard_table``,
``figure_block``, ``summary_cards``, ``annotator_table``, ``notes_list``) and ``report.css`` the
styles, so that another page — the live arena's dashboard — can import them from
:func:`template_environment` and show the same table and figures.
"""

from __future__ import annotations

import datetime as _dt
import warnings
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..._numeric import normal_ppf
from ...errors import InputError, StableArenaError, StableArenaWarning

if TYPE_CHECKING:  # pragma: no cover - typing only
    import jinja2

    from ...data.battles import Battles, PairCounts
    from ...raters.annotator import AmEloFitted
    from ...raters.base import Fitted
    from ...raters.uncertainty import Intervals, WinProbability

__all__ = [
    "REPORT_FIGURES",
    "FigureBlock",
    "Report",
    "build_report",
    "win_probability_for",
    "figure_blocks",
    "data_summary",
    "screen_annotators",
    "annotator_section",
    "template_environment",
    "method_text",
]

#: The report's figures, in page order (``leaderboard`` sits beside the table).
REPORT_FIGURES: tuple[str, ...] = (
    "leaderboard",
    "winrate",
    "observed",
    "battles",
    "ties",
    "map",
    "annotators",
)


@dataclass(frozen=True)
class FigureBlock:
    """One figure ready for a page: an anchor ``key``, a heading, the inline ``svg``, a caption
    saying how to read it and a ``short`` name for navigation."""

    key: str
    title: str
    svg: str
    caption: str
    short: str = ""


@dataclass(frozen=True)
class Report:
    """Everything the report shows (see :func:`build_report`); :meth:`html` renders it."""

    title: str
    payload: dict[str, Any]
    summary: list[dict[str, Any]]
    figures: list[FigureBlock]
    annotators: dict[str, Any] | None
    notes: list[str]
    command: str | None = None
    generated: str = field(default_factory=lambda: _dt.datetime.now().strftime("%Y-%m-%d %H:%M"))

    def figure(self, key: str) -> FigureBlock | None:
        return next((f for f in self.figures if f.key == key), None)

    def html(self) -> str:
        """The report as one self-contained HTML document."""
        from ... import __version__
        from ...analysis.leaderboard import interval_caption

        env = template_environment()
        ci = self.payload.get("ci")
        return env.get_template("report.html.j2").render(
            report=self,
            version=__version__,
            method_text=method_text(self.payload),
            interval_caption=interval_caption(ci) if ci else "",
        )

    def write(self, path: str | Path) -> Path:
        from ...atomic import atomic_write

        out = Path(path)
        try:
            atomic_write(out, self.html())  # a temporary file beside it, fsynced, then renamed
        except OSError as exc:
            raise InputError(f"cannot write {out}: {exc.strerror}.") from None
        return out


_METHOD_TEXT = {
    "m-elo": "m-ELO: Bradley–Terry maximum likelihood with ties counted as half a win, "
    "P(i beats j) = σ(C (R_i − R_j)), C = ln 10 / 400, solved exactly on the pair counts.",
    "bt": "Bradley–Terry maximum likelihood with ties left out, P(i beats j) = σ(C (R_i − R_j)).",
    "elo": "Online Elo: one update per battle in the order given (or the mean over seeded "
    "shuffles); the result depends on the order of the battles.",
    "am-elo": "am-ELO: joint maximum likelihood of the ratings and every annotator's ability "
    "a_k, P(i beats j | k) = σ(a_k (x_i − x_j)); annotators voting at random or against the "
    "consensus stop moving the ratings.",
    "rao-kupper": "Rao–Kupper tie model (leaderbot): explicit win / tie / loss probabilities "
    "with tie thresholds, exact constrained maximum likelihood.",
    "davidson": "Davidson tie model (leaderbot): explicit win / tie / loss probabilities, exact "
    "constrained maximum likelihood.",
    "style-m-elo": "Style-controlled m-ELO (contextual Bradley–Terry, LMArena's default board): "
    "P(A beats B) = σ(x_A − x_B + γᵀz), z the battle's standardised style differences, ties as "
    "half a win, fitted jointly with an L2 penalty; the ratings are at equal style.",
    "style-bt": "Style-controlled Bradley–Terry: P(A beats B) = σ(x_A − x_B + γᵀz), ties left "
    "out, fitted jointly with an L2 penalty; the ratings are at equal style.",
    "style-am-elo": "Style-controlled am-ELO: P(A beats B | k) = σ(θ_k (x_A − x_B + γᵀz)) with "
    "every annotator's ability θ_k, fitted jointly; the ratings are at equal style.",
}


def method_text(payload: dict[str, Any]) -> str:
    """One sentence on the fitted method of a ``rank`` payload (its options included)."""
    method = str(payload.get("method", ""))
    text = _METHOD_TEXT.get(method, f"{method}.")
    extra = [
        f"{k} = {payload[k]}" for k in ("k_tie", "k_cov", "tie_form") if payload.get(k) is not None
    ]
    if payload.get("shuffles"):
        extra.append(f"{payload['shuffles']} shuffles")
    return text + (f" Options: {', '.join(extra)}." if extra else "")


def template_environment(*packages: str) -> jinja2.Environment:
    """The Jinja2 environment of the package's templates (HTML autoescaped; SVG is passed with
    ``|safe``), with the filters they use: ``num`` (counts, thousands separators) and
    ``fixed(d)`` (d decimals). ``packages``: more packages whose ``templates`` folder is
    searched first (the live arena's dashboard adds its pages beside the report's pieces)."""
    import jinja2

    loaders = [jinja2.PackageLoader(p, "templates") for p in packages]
    env = jinja2.Environment(
        loader=jinja2.ChoiceLoader(
            [*loaders, jinja2.PackageLoader("stablearena.figures.report", "templates")]
        ),
        autoescape=jinja2.select_autoescape(enabled_extensions=("html", "j2")),
        trim_blocks=True,
        lstrip_blocks=True,
        undefined=jinja2.StrictUndefined,
    )
    env.filters["num"] = lambda x: f"{x:,.0f}" if isinstance(x, (int, float)) else str(x)
    env.filters["fixed"] = lambda x, d=1: f"{x:.{d}f}" if isinstance(x, (int, float)) else str(x)
    return env


# ============================================================================ data summary
def data_summary(data: Battles | PairCounts, fitted: Fitted) -> list[dict[str, Any]]:
    """Summary cards of the data the fit used: models, comparisons, pairs compared, ties,
    annotators (prompts, time span when the log has them) and the fit's NLL and convergence."""
    import numpy as np

    from ...data.battles import Battles, as_counts

    c = as_counts(data).collapse().nonempty()
    m = c.n_models
    pairs = len(c)
    total = c.n_comparisons
    ties = float(c.ties.sum())
    both_bad = float(c.ties_both_bad.sum())
    cards: list[dict[str, Any]] = [
        {"label": "models", "value": f"{m:,}"},
        {
            "label": "battles" if isinstance(data, Battles) else "comparisons",
            "value": f"{total:,.0f}",
        },
        {
            "label": "pairs compared",
            "value": f"{pairs:,} / {m * (m - 1) // 2:,}",
            "detail": f"{pairs / max(m * (m - 1) // 2, 1):.0%} of all pairs",
        },
        {
            "label": "ties",
            "value": f"{(ties + both_bad) / max(total, 1):.1%}",
            "detail": f"both-bad {both_bad / max(total, 1):.1%}" if both_bad else "",
        },
    ]
    names = getattr(data, "annotators", None)
    if names is not None:
        cards.append({"label": "annotators", "value": f"{len(names):,}"})
    if isinstance(data, Battles):
        if data.prompts is not None:
            cards.append({"label": "prompts", "value": f"{len(data.prompts):,}"})
        if data.timestamp is not None and len(data.timestamp):
            lo, hi = float(np.min(data.timestamp)), float(np.max(data.timestamp))
            if lo > 1e8:  # looks like Unix seconds
                fmt = "%Y-%m-%d"
                span = (
                    f"{_dt.datetime.fromtimestamp(lo, _dt.timezone.utc).strftime(fmt)} – "
                    f"{_dt.datetime.fromtimestamp(hi, _dt.timezone.utc).strftime(fmt)}"
                )
                cards.append({"label": "time span", "value": span})
    conv = fitted.convergence
    cards.append(
        {
            "label": "NLL per comparison",
            "value": f"{fitted.nll:.4f}",
            "detail": (
                "online updates"
                if conv.solver == "online"
                else f"{conv.solver}, {'converged' if conv.converged else 'NOT converged'} in "
                f"{conv.iterations} iterations"
            ),
        }
    )
    return cards


# ============================================================================ annotators
def screen_annotators(
    fitted: Fitted, data: Battles | PairCounts
) -> tuple[AmEloFitted | None, list[str]]:
    """The am-ELO fit whose annotator abilities the report shows: ``fitted`` itself when it is
    one, otherwise — when the log names at least two annotators — am-ELO with its default
    screening (every annotator fitted, flagged when its ability is below 0) fitted on ``data``.
    Returns ``(fit or None, notes)``; a screening that fails is a note, not an error."""
    from ...raters.annotator import AmElo, AmEloFitted

    if isinstance(fitted, AmEloFitted):
        return fitted, []
    names = getattr(data, "annotators", None)
    if names is None or len(names) < 2:
        return None, []
    rater = AmElo()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            fit = rater.fit(data)
        except StableArenaError as exc:
            return None, [f"annotator screening (am-ELO) could not be fitted: {exc}"]
    notes = [
        f"the annotator section comes from an am-ELO fit with default screening (every annotator "
        f"fitted, flagged when its ability is below {rater.ability_threshold:g}); the leaderboard "
        f"is {fitted.method}'s. Rank with --method am-elo to use it for the ratings."
    ]
    notes += [f"annotator screening: {w.message}" for w in caught]
    return fit, notes


def annotator_section(fit: AmEloFitted, z: float, *, everyone: bool = False) -> dict[str, Any]:
    """The annotator screening summary of an am-ELO fit for the ``annotator_table`` macro:
    counts by status and a row per flagged annotator (``everyone``: per annotator, worst first)
    with its records, ability, interval ability ± ``z``·se, status and reason."""
    tab = fit.annotator_table()
    status = tab["status"].to_numpy(str)
    rows = [
        {
            "annotator": str(r.annotator),
            "records": int(r.records),
            "ability": float(r.ability),
            "low": float(r.ability - z * r.ability_se),
            "high": float(r.ability + z * r.ability_se),
            "status": str(r.status),
            "reason": str(r.reason),
            "flagged": bool(r.flagged),
        }
        for r in tab.itertuples(index=False)
        if everyone or r.flagged
    ]
    return {
        "total": len(tab),
        "fitted": int(((status == "included") | (status == "flagged")).sum()),
        "flagged": int(tab["flagged"].sum()),
        "excluded": int((status == "excluded").sum()),
        "left_out": int((status == "left_out").sum()),
        "threshold": float(fit.params.get("ability_threshold", 0.0) or 0.0),
        "min_records": int(fit.params.get("min_records", 0) or 0),
        "rows": rows,
    }


# ============================================================================ figures
_CAPTIONS = {
    "leaderboard": (
        "Ratings (dark ticks) with their intervals (light bars), best first. The bracket after each name is "
        "the model's rank interval; shaded bands group models into tiers the data cannot "
        "separate (adjacent models, Holm-adjusted tests)."
    ),
    "winrate": (
        "Predicted expected score of the row model against the column model, P(win) + ½ P(tie), "
        "from the fitted ratings. A dot marks a pair whose interval contains ½."
    ),
    "observed": (
        "Observed score of the row model against the column model, (wins + ½ ties) / battles, for "
        "the pairs that met; grey cells never met. Compare with the predicted matrix: pairs with "
        "few battles are noisy."
    ),
    "battles": (
        "How many battles each pair has (log colour scale when the counts span a decade; white: "
        "never compared). Sparse rows are models whose ratings rest on few opponents."
    ),
    "ties": (
        "Outcomes of the higher-rated model against the rating gap, pooled in bins of about equal "
        "comparisons: markers observed (with binomial intervals), lines predicted by the fit for "
        "the same pairs."
    ),
    "map": (
        "For covariance models, a map of the fitted dissimilarity (classical MDS); otherwise a "
        "cluster tree of the models by the z-statistic of their rating differences: groups "
        "joined right of the dashed line are not separable."
    ),
    "annotators": (
        "am-ELO ability of every annotator with its interval, worst first (1 = the average "
        "annotator, 0 = random voting, below 0 = voting against the consensus); flagged "
        "annotators in vermillion with the reason."
    ),
}

_TITLES = {
    "leaderboard": "Ratings and intervals",
    "winrate": "Predicted win rates",
    "observed": "Observed win rates",
    "battles": "Battles per pair",
    "ties": "Ties and outcomes against the rating gap",
    "map": "Map of the models",
    "annotators": "Annotator abilities",
}


_SHORT = {
    "leaderboard": "Intervals",
    "winrate": "Win rates",
    "observed": "Observed",
    "battles": "Coverage",
    "ties": "Ties",
    "map": "Map",
    "annotators": "Abilities",
}


def _render(
    key: str,
    fitted: Fitted,
    data: Battles | PairCounts | None,
    *,
    intervals: Intervals | None,
    win_probability: WinProbability | None,
    annotators: AmEloFitted | None,
    source: str | None,
) -> str:
    """One report figure as inline SVG; the two win-rate matrices are separate figures here so
    that each can be read at full width."""
    from .. import plots

    if key == "leaderboard":
        ax = plots.plot_leaderboard(fitted, intervals, source=source, width=5.6)
    elif key == "winrate":
        ax = plots.plot_winrate(fitted, win_probability, source=source)
    elif key == "observed":
        ax = plots.plot_observed_winrate(fitted, data, source=source)
    elif key == "annotators":
        ax = plots.plot_annotators(annotators, source=source)  # type: ignore[arg-type]
    elif key in ("battles", "ties"):
        ax = plots.figure(key, fitted, data=data, source=source).axes[0]
    elif key == "map":
        ax = plots.plot_map(fitted, intervals, source=source)
    else:
        raise InputError(f"unknown report figure {key!r}; choose from {', '.join(REPORT_FIGURES)}.")
    return plots.figure_to_svg(ax.figure, prefix=f"{key}-")


def figure_blocks(
    fitted: Fitted,
    data: Battles | PairCounts | None = None,
    *,
    intervals: Intervals | None = None,
    win_probability: WinProbability | None = None,
    annotators: AmEloFitted | None = None,
    source: str | None = None,
    kinds: Sequence[str] = REPORT_FIGURES,
) -> tuple[list[FigureBlock], list[str]]:
    """Render the requested figures to inline SVG blocks (ids prefixed per figure, so they can
    share a page). A figure that cannot be drawn for this fit is left out with a note saying
    why (e.g. ``annotators`` without an am-ELO fit). Returns ``(blocks, notes)``."""
    blocks: list[FigureBlock] = []
    notes: list[str] = []
    for key in kinds:
        if key == "annotators" and annotators is None:
            continue
        try:
            svg = _render(
                key,
                fitted,
                data,
                intervals=intervals,
                win_probability=win_probability,
                annotators=annotators,
                source=source,
            )
        except StableArenaError as exc:
            notes.append(f"figure '{_TITLES[key]}' was not drawn: {exc}")
            continue
        blocks.append(FigureBlock(key, _TITLES[key], svg, _CAPTIONS[key], _SHORT[key]))
    return blocks, notes


# ============================================================================ the report
def win_probability_for(fitted: Fitted, intervals: Intervals) -> WinProbability:
    """The win-probability matrix with intervals of the same kind and level as ``intervals``
    (reusing its bootstrap replicates or its covariance): :func:`stablearena.raters.uncertainty.
    win_probability`."""
    from ...raters.uncertainty import win_probability

    ci = intervals.method
    return win_probability(
        fitted,
        ci,  # type: ignore[arg-type]
        level=intervals.level,
        boot=intervals.bootstrap,
        cov=intervals.covariance if ci != "bootstrap" else None,
    )


def build_report(
    fitted: Fitted,
    data: Battles | PairCounts,
    *,
    source: str = "<memory>",
    simulated: bool = False,
    ci: str = "fisher",
    level: float = 0.95,
    rounds: int = 1000,
    cluster: str | None = None,
    seed: int | None = None,
    progress: bool = False,
    notes: Sequence[str] = (),
    command: str | None = None,
    kinds: Sequence[str] = REPORT_FIGURES,
) -> Report:
    """Everything the HTML report shows for ``fitted`` (fitted on ``data``).

    ``ci``/``level``/``rounds``/``cluster``/``seed``: the intervals, as in ``stablearena rank``
    (``"none"`` draws no interval bars or tiers). ``notes``: warnings already raised (e.g. by the
    fit); those raised while building are added. ``command``: the command line, shown so the
    report can be reproduced.
    """
    from ...analysis.leaderboard import intervals_for, leaderboard_payload

    all_notes = list(notes) + list(fitted.notes)
    iv = None
    with warnings.catch_warnings(record=True) as caught, ThreadPoolExecutor(1) as pool:
        warnings.simplefilter("always")
        wp_future = None
        # the same interval options for the figures' intervals and the leaderboard's
        options = {"level": level, "rounds": rounds, "cluster": cluster, "seed": seed}
        if ci != "none":
            iv = intervals_for(fitted, data, ci, progress=progress, **options)
            if "winrate" in kinds:
                # NumPy computes the win-probability quantiles without the GIL: on a second core
                # while the other figures are drawn
                wp_future = pool.submit(win_probability_for, fitted, iv)
        payload = leaderboard_payload(
            fitted, data, source=source, simulated=simulated, ci=ci, precomputed=iv, **options
        )
        screened, screen_notes = screen_annotators(fitted, data)
        figures, figure_notes = figure_blocks(
            fitted,
            data,
            intervals=iv,
            annotators=screened,
            source=source,
            kinds=[k for k in kinds if k != "winrate"],
        )
        if "winrate" in kinds:
            wp = None
            if wp_future is not None:
                try:
                    wp = wp_future.result()
                except StableArenaError as exc:
                    all_notes.append(f"win-probability intervals are not shown: {exc}")
            more, more_notes = figure_blocks(
                fitted, data, win_probability=wp, source=source, kinds=["winrate"]
            )
            figures += more
            figure_notes += more_notes
            figures.sort(key=lambda f: list(kinds).index(f.key))
    all_notes += screen_notes + figure_notes
    if "ci" in payload:
        all_notes += list(payload["ci"].get("notes", []))
    all_notes += [str(w.message) for w in caught if issubclass(w.category, StableArenaWarning)]
    for w in caught:  # anything else (a library's deprecation, …) goes where it always goes
        if not issubclass(w.category, StableArenaWarning):
            warnings.showwarning(w.message, w.category, w.filename, w.lineno)
    section = None
    if screened is not None:
        section = annotator_section(screened, float(normal_ppf(0.5 + level / 2)))
    return Report(
        title=f"{fitted.method} leaderboard — {source}",
        payload=payload,
        summary=data_summary(data, fitted),
        figures=figures,
        annotators=section,
        notes=list(dict.fromkeys(all_notes)),  # in order, each once
        command=command,
    )
