"""Figures of fitted arenas: one function per figure, fitted results in, a matplotlib Axes out.

Each ``plot_*`` function takes fitted results (never a file path) and an optional ``ax``; without
one it makes a figure sized for the number of models (names stay readable and nothing overlaps
up to Chatbot Arena's 129 models and beyond) and draws on it. The same functions serve
``stablearena plot``, the HTML report (:mod:`stablearena.figures.report`) and the live arena's
dashboard; :func:`figure` builds a complete figure of one kind and :func:`figure_to_svg`
renders any figure to an SVG string for inlining in HTML.

Figures (``KINDS``):

- ``leaderboard`` — :func:`plot_leaderboard`: ratings with their intervals, best first, tiers
  shaded, each label carrying the model's rank interval (docs/methods/uncertainty.md).
- ``winrate`` — :func:`plot_winrate`: the predicted expected score E[W_ij] = P(i beats j) +
  ½ P(tie), beside :func:`plot_observed_winrate`, the observed (wins + ½ ties)/battles of every
  pair that has battles.
- ``battles`` — :func:`plot_battles`: battles per pair (the coverage pair selection changes).
- ``annotators`` — :func:`plot_annotators`: am-ELO abilities with intervals, flagged annotators
  marked with their reason (am-ELO paper, eq. 5 and Algorithm 3).
- ``ties`` — :func:`plot_ties`: observed and predicted outcome probabilities against the rating
  gap (leaderbot's marginal outcome check, App. D, binned by gap).
- ``map`` — :func:`plot_map`: classical multidimensional scaling of a covariance model's
  dissimilarity S = [Var(x_i − x_j)] (leaderbot §3.3), or, for models without covariance, a
  cluster tree of the models by the z-statistic of their rating differences.

Colours are the Okabe–Ito palette (distinguishable with every common colour-vision deficiency)
and the colour maps ``cividis`` and ``RdBu`` (ColorBrewer, colour-blind safe).
"""

from __future__ import annotations

import io
import re
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from .._numeric import normal_ppf
from ..data.battles import Battles, PairCounts, as_counts
from ..errors import InputError

if TYPE_CHECKING:  # pragma: no cover - typing only
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure

    from ..raters.annotator import AmEloFitted
    from ..raters.base import Fitted
    from ..raters.uncertainty import Covariance, Intervals, WinProbability

__all__ = [
    "KINDS",
    "OKABE_ITO",
    "plot_leaderboard",
    "plot_winrate",
    "plot_observed_winrate",
    "plot_battles",
    "plot_annotators",
    "plot_ties",
    "plot_map",
    "figure",
    "figure_to_svg",
    "save_figure",
    "check_output",
    "plot_style",
    "describe",
]

#: The figures :func:`figure` (and ``stablearena plot --kind``) can draw.
KINDS: tuple[str, ...] = ("leaderboard", "winrate", "battles", "annotators", "ties", "map")

#: Okabe & Ito (2008), "Color Universal Design": eight colours distinguishable by viewers with
#: any common colour-vision deficiency.
OKABE_ITO: dict[str, str] = {
    "black": "#000000",
    "orange": "#E69F00",
    "sky_blue": "#56B4E9",
    "green": "#009E73",
    "yellow": "#F0E442",
    "blue": "#0072B2",
    "vermillion": "#D55E00",
    "purple": "#CC79A7",
}
_CYCLE = [OKABE_ITO[k] for k in ("blue", "orange", "green", "vermillion", "purple", "sky_blue")]
_SHADE = "#EDEDED"  # tier bands
_MISSING = "#C4C4C4"  # matrix cells without battles (unlike RdBu's near-white middle)
_LABEL_CHARS = 38  # longest model name shown in full (longer ones end in "…")

#: Inches per model row in the list-like figures (leaderboard, annotators, cluster tree) and per
#: matrix cell: 7.5-pt labels on rows 0.155 in (11.2 pt) apart leave 3.7 pt between lines.
_ROW_IN = 0.155
_CELL_IN = 0.125

_STYLE: dict[str, Any] = {
    "font.family": "DejaVu Sans",
    "font.size": 8,
    "axes.titlesize": 9,
    "axes.labelsize": 8,
    "xtick.labelsize": 7.5,
    "ytick.labelsize": 7.5,
    "legend.fontsize": 7.5,
    "axes.spines.top": False,
    "axes.spines.right": False,
    "axes.prop_cycle": None,  # set below (needs matplotlib's cycler)
    "svg.fonttype": "none",  # text stays text in SVG: small files, selectable names
    "svg.hashsalt": "stablearena",  # deterministic ids
    "figure.dpi": 100,
    "savefig.dpi": 150,
}


@contextmanager
def plot_style() -> Iterator[None]:
    """The figures' shared style (fonts, sizes, colour cycle) as a matplotlib ``rc_context``."""
    import matplotlib
    from cycler import cycler

    style = dict(_STYLE, **{"axes.prop_cycle": cycler(color=_CYCLE)})
    with matplotlib.rc_context(style):
        yield


# ============================================================================ helpers
#: Characters of 9-pt title text per inch of width (DejaVu Sans averages ≈ 5.5 pt a character).
_TITLE_CHARS_PER_IN = 13.0
_TITLE_LINE_IN = 9.0 * 1.3 / 72


def _new_axes(width: float, height: float, ncols: int = 1) -> Any:
    """A fresh Figure (not registered with pyplot, so safe in servers) with ``ncols`` Axes laid
    out by matplotlib's constrained layout — for figures with few labels."""
    from matplotlib.figure import Figure

    fig = Figure(figsize=(width, height), layout="constrained")
    axes = fig.subplots(1, ncols, squeeze=False)[0]
    return axes[0] if ncols == 1 else tuple(axes)


def _framed_axes(
    title_lines: int,
    *,
    plot_w: float,
    plot_h: float,
    left: float,
    right: float,
    bottom: float,
    ncols: int = 1,
    gap: float = 0.0,
) -> list[Axes]:
    """A fresh Figure laid out by hand around ``ncols`` plot areas of ``plot_w`` × ``plot_h``
    inches, with the given margins (inches; ``gap`` between panels) and room for a title of
    ``title_lines`` lines. Figures with a label per model use this: the margins come from one
    measurement of the labels (:func:`_text_width`), where a layout engine measures every
    label on every pass (seconds at 129 models)."""
    from matplotlib.figure import Figure

    top = 0.14 + title_lines * _TITLE_LINE_IN
    width = left + ncols * plot_w + (ncols - 1) * gap + right
    height = bottom + plot_h + top
    fig = Figure(figsize=(width, height))
    return [
        fig.add_axes(
            (
                (left + k * (plot_w + gap)) / width,
                bottom / height,
                plot_w / width,
                plot_h / height,
            )
        )
        for k in range(ncols)
    ]


def _text_width(texts: Sequence[str], size: float) -> float:
    """Width in inches of the widest of ``texts`` at ``size`` points in the figures' font."""
    from matplotlib.font_manager import FontProperties
    from matplotlib.textpath import TextToPath

    if not texts:
        return 0.0
    prop = FontProperties(family=_STYLE["font.family"], size=size)
    ttp = TextToPath()
    # measuring costs ~1.5 ms a string: measure the 16 longest (by characters), plus 3% slack
    # for a shorter string of wider letters
    longest = sorted(set(texts), key=len, reverse=True)[:16]
    widest = max(ttp.get_text_width_height_descent(t, prop, ismath=False)[0] for t in longest)
    return 1.03 * float(widest) / 72.0


def _short(name: str) -> str:
    return name if len(name) <= _LABEL_CHARS else name[: _LABEL_CHARS - 1] + "…"


def describe(fitted: Fitted, source: str | None = None) -> str:
    """The caption line naming the fitted method and the data: "m-elo · source · n battles"."""
    parts = [str(fitted.method)]
    options = [
        f"{name}={getattr(fitted, name)}"
        for name in ("k_tie", "k_cov")
        if getattr(fitted, name, None) is not None
    ]
    if options:
        parts[0] += f" ({', '.join(options)})"
    if source:
        parts.append(str(source))
    parts.append(f"{int(round(fitted.n_comparisons)):,} comparisons of {fitted.n_models} models")
    return " · ".join(parts)


def _title_text(what: str, fitted: Fitted, source: str | None, width_in: float) -> str:
    """Two-part title: what the figure shows, then the method and data, wrapped to ``width_in``."""
    import textwrap

    chars = max(40, int(width_in * _TITLE_CHARS_PER_IN))
    return textwrap.fill(what, chars) + "\n" + textwrap.fill(describe(fitted, source), chars)


def _axes_for(
    ax: Axes | None,
    what: str,
    fitted: Fitted,
    source: str | None,
    **frame: float,
) -> Axes:
    """``ax`` titled, or a new hand-laid-out figure (:func:`_framed_axes` with ``frame``'s
    plot size and margins) titled. The title may run over the right margin."""
    if ax is None:
        # the title starts at the figure's left edge and may use its whole width
        width = frame["left"] + frame["plot_w"] + frame["right"] - 0.2
        text = _title_text(what, fitted, source, width)
        ax = _framed_axes(text.count("\n") + 1, **frame)[0]  # type: ignore[arg-type]
        ax.set_title(text, loc="left", fontsize=9, x=-(frame["left"] - 0.1) / frame["plot_w"])
        return ax
    width = ax.get_position().width * ax.figure.get_figwidth()
    ax.set_title(_title_text(what, fitted, source, width + 0.8), loc="left", fontsize=9)
    return ax


def _title(ax: Axes, what: str, fitted: Fitted, source: str | None) -> None:
    """Title an Axes of a figure with a layout engine (wrapped to the figure's width)."""
    text = _title_text(what, fitted, source, ax.figure.get_figwidth() * 0.9)
    ax.set_title(text, loc="left", fontsize=9)


def _colorbar(ax: Axes, mappable: Any, label: str) -> Any:
    """A slim colour bar right of ``ax``: placed by hand in a hand-laid-out figure, by the
    layout engine otherwise."""
    fig = ax.figure
    if fig.get_layout_engine() is None:
        pos = ax.get_position()
        w_in, h_in = fig.get_figwidth(), fig.get_figheight()
        height = min(pos.height, 3.6 / h_in)
        cax = fig.add_axes((pos.x1 + 0.12 / w_in, pos.y1 - height, 0.14 / w_in, height))
        cb = fig.colorbar(mappable, cax=cax)
    else:
        cb = fig.colorbar(mappable, ax=ax, shrink=0.5, aspect=30, pad=0.01)
    cb.set_label(label)
    return cb


#: Right margin (inches) of a matrix figure: colour bar, its tick labels and its label.
_COLORBAR_IN = 1.05


def _rating_label(fitted: Fitted) -> str:
    if fitted.anchor is not None:
        return f"rating (Elo scale, {fitted.anchor[0]} = {fitted.anchor[1]:g})"
    return "rating (Elo scale, mean 1000)"


def _check_intervals(fitted: Fitted, intervals: Intervals | None) -> None:
    if intervals is None or intervals.fitted is fitted:
        return
    if tuple(intervals.models) != tuple(fitted.models) or not np.allclose(
        intervals.ratings, fitted.ratings
    ):
        raise InputError("the intervals belong to another fit (their models or ratings differ).")


def _fitted_rows(fitted: Fitted, data: Battles | PairCounts | None) -> tuple[PairCounts, Any, Any]:
    """The pair counts of ``data`` (default: those the model was fitted on), one row per pair with
    at least one comparison, and each row's two models as indices into ``fitted.models``."""
    source = data if data is not None else fitted.counts
    if source is None:
        raise InputError(
            f"this {fitted.method} result keeps no pair counts: pass the battles it was fitted on."
        )
    c = as_counts(source).collapse().nonempty()
    where = {name: k for k, name in enumerate(fitted.models)}
    unknown = [name for name in c.models if name not in where]
    if unknown:
        raise InputError(
            f"{c.source}: model(s) {unknown[:5]} are not in the {fitted.method} fit; pass the data "
            "the model was fitted on."
        )
    code = np.array([where[name] for name in c.models], dtype=np.int64)
    return c, code[c.i], code[c.j]


def _pair_matrices(fitted: Fitted, data: Battles | PairCounts | None) -> tuple[Any, Any]:
    """m×m battles per pair ``n`` (symmetric) and Σ W of the row model ``s`` (wins + ½ ties),
    in ``fitted.models`` order, from ``data`` (default: the counts the model was fitted on)."""
    c, i, j = _fitted_rows(fitted, data)
    m = fitted.n_models
    n = np.zeros((m, m))
    s = np.zeros((m, m))
    np.add.at(n, (i, j), c.totals)
    np.add.at(n, (j, i), c.totals)
    np.add.at(s, (i, j), c.score)
    np.add.at(s, (j, i), c.losses + 0.5 * c.all_ties)
    return n, s


def _matrix_axes(ax: Axes, names: Sequence[str], fontsize: float) -> None:
    """Model names beside the rows and under the columns of a matrix. Written as plain texts (in
    axes-blended coordinates) rather than as ticks: 2 × 129 tick objects cost a second each
    time the figure is drawn."""
    ax.set_xticks([])
    ax.set_yticks([])
    left, below = ax.get_yaxis_transform(), ax.get_xaxis_transform()
    pad = 2.0 / 72 / (ax.get_position().width * ax.figure.get_figwidth())  # 2 pt in axes units
    pad_y = 2.0 / 72 / (ax.get_position().height * ax.figure.get_figheight())
    for k, name in enumerate(names):
        label = _short(name)
        ax.text(
            -pad,
            k,
            label,
            transform=left,
            ha="right",
            va="center",
            fontsize=fontsize,
            parse_math=False,
            gid=f"row-label-{k}",
        )
        ax.text(
            k,
            -pad_y,
            label,
            transform=below,
            ha="center",
            va="top",
            rotation=90,
            fontsize=fontsize,
            parse_math=False,
            gid=f"column-label-{k}",
        )
    for side in ("top", "right", "bottom", "left"):
        ax.spines[side].set_visible(False)


def _row_labels(
    ax: Axes, y: Any, labels: Sequence[str], fontsize: float, *, right: bool = False
) -> None:
    """One label per row at data heights ``y``, left of the axes (or right of it), as plain
    texts: cheaper to lay out and draw than tick labels (which cost seconds at 129 models)."""
    ax.set_yticks([])
    trans = ax.get_yaxis_transform()
    pad = 3.0 / 72 / (ax.get_position().width * ax.figure.get_figwidth())
    for k, (yk, label) in enumerate(zip(y, labels, strict=True)):
        ax.text(
            1.0 + pad if right else -pad,
            yk,
            label,
            transform=trans,
            ha="left" if right else "right",
            va="center",
            fontsize=fontsize,
            parse_math=False,
            gid=f"row-label-{k}",
        )


def _matrix_frame(names: Sequence[str]) -> dict[str, float]:
    """Plot size and margins of a matrix figure: cells of _CELL_IN inches, names at both sides."""
    m = len(names)
    label = _text_width([_short(x) for x in names], _matrix_fontsize(m)) + 0.12
    side = max(3.0, _CELL_IN * m)
    return {"plot_w": side, "plot_h": side, "left": label, "bottom": label, "right": _COLORBAR_IN}


def _matrix_fontsize(m: int) -> float:
    return 7.5 if m <= 40 else 6.5


def _annotate_cells(ax: Axes, values: Any, fmt: str, dark: Any) -> None:
    """Write each finite value in its cell (small matrices only), white on dark cells."""
    m = values.shape[0]
    for a in range(m):
        for b in range(m):
            v = values[a, b]
            if a == b or not np.isfinite(v):
                continue
            ax.text(
                b,
                a,
                format(v, fmt),
                ha="center",
                va="center",
                fontsize=6.5,
                color="white" if dark[a, b] else "black",
            )


# ============================================================================ leaderboard
def plot_leaderboard(
    fitted: Fitted,
    intervals: Intervals | None = None,
    *,
    ax: Axes | None = None,
    source: str | None = None,
    width: float = 7.6,
) -> Axes:
    """Ratings best first with their interval bars; tiers shaded; rank intervals in the labels.

    ``intervals`` (:func:`stablearena.raters.uncertainty.intervals`) supplies the bars (normal R ± z·se
    for fisher/sandwich, percentile for the bootstrap), the rank intervals and the tiers
    (adjacent models, Holm-adjusted z-tests); without it the points are drawn alone. ``width``:
    of a new figure, in inches (its height follows the number of models).
    """
    _check_intervals(fitted, intervals)
    m = fitted.n_models
    order = np.asarray(fitted.order())
    ratings = np.asarray(fitted.ratings, dtype=float)[order]
    y = np.arange(m)
    if intervals is not None:
        rl = np.asarray(intervals.rank_low)[order]
        rh = np.asarray(intervals.rank_high)[order]
        labels = [
            f"{_short(fitted.models[k])}  [{a}]"
            if a == b
            else f"{_short(fitted.models[k])}  [{a}–{b}]"
            for k, a, b in zip(order, rl, rh, strict=True)
        ]
        what = (
            f"{fitted.method} ratings with {intervals.level:.0%} {intervals.method} intervals "
            "[rank interval]; shaded bands: tiers"
        )
    else:
        labels = [f"{_short(fitted.models[k])}  [{r + 1}]" for r, k in enumerate(order)]
        what = f"{fitted.method} ratings [rank] (no intervals: use --ci)"
    with plot_style():
        left = _text_width(labels, _STYLE["ytick.labelsize"]) + 0.15
        right = 0.5 if intervals is not None else 0.2
        ax = _axes_for(
            ax,
            what,
            fitted,
            source,
            plot_w=max(2.0, width - left - right),
            plot_h=max(1.0, _ROW_IN * m),
            left=left,
            right=right,
            bottom=0.5,
        )
        if intervals is not None:
            lo = np.asarray(intervals.ci_low)[order]
            hi = np.asarray(intervals.ci_high)[order]
            tier = np.asarray(intervals.tier)[order]
            # tiers are runs of adjacent models: shade every other one, name each at the right
            starts = np.flatnonzero(np.r_[True, tier[1:] != tier[:-1]])
            ends = np.r_[starts[1:], m]
            trans = ax.get_yaxis_transform()
            for k, (a, b) in enumerate(zip(starts, ends, strict=True)):
                if k % 2 == 1:  # tier 1 unshaded: a single tier leaves the chart plain
                    ax.axhspan(a - 0.5, b - 0.5, color=_SHADE, zorder=0, lw=0)
                ax.text(
                    1.005,
                    (a + b - 1) / 2,
                    f"tier {tier[a]}",
                    transform=trans,
                    ha="left",
                    va="center",
                    fontsize=6.5,
                    color="#555555",
                )
            # bars from lo to hi (a percentile interval need not be centred on the point); a
            # light thick bar and a dark tick stay visible when the interval is only a few
            # pixels wide (Chatbot Arena: ±5 points on a 500-point axis)
            ax.hlines(y, lo, hi, color=OKABE_ITO["sky_blue"], lw=3.0 if m > 60 else 3.6, zorder=3)
            ax.plot(
                ratings,
                y,
                "|",
                ms=5.0 if m > 60 else 7.0,
                mew=1.4,
                color=OKABE_ITO["blue"],
                zorder=4,
                label=f"rating, {intervals.level:.0%} {intervals.method} interval",
            )
        else:
            ax.plot(ratings, y, "o", ms=3.2, color=OKABE_ITO["blue"], zorder=3)
        _row_labels(ax, y, labels, _STYLE["ytick.labelsize"])
        ax.set_ylim(m - 0.5, -0.5)
        ax.tick_params(axis="y", length=0)
        ax.grid(axis="x", color="#DDDDDD", lw=0.6, zorder=1)
        ax.set_axisbelow(True)
        ax.spines["left"].set_visible(False)
        ax.set_xlabel(_rating_label(fitted))
    return ax


# ============================================================================ win rates
def plot_winrate(
    fitted: Fitted,
    win_probability: WinProbability | None = None,
    *,
    ax: Axes | None = None,
    source: str | None = None,
    colorbar: bool = True,
) -> Axes:
    """Predicted expected score of the row model against the column model, models best first.

    E[W_ij] = P(i beats j) + ½ P(tie) from ``fitted.win_matrix()``. With ``win_probability``
    (:func:`stablearena.raters.uncertainty.win_probability`) a grey dot marks each pair whose interval
    contains ½ — pairs the data cannot order. Up to 16 models the values are written in the cells.
    """
    m = fitted.n_models
    order = np.asarray(fitted.order())
    names = [fitted.models[k] for k in order]
    what = "predicted P(row beats column) + ½ P(tie)"
    if win_probability is not None:
        if tuple(win_probability.models) != tuple(fitted.models):
            raise InputError("the win probabilities belong to another fit (their models differ).")
        what += f"; dots: {win_probability.level:.0%} interval contains ½"
    with plot_style():
        ax = _axes_for(ax, what, fitted, source, **_matrix_frame(names))
        p = np.asarray(fitted.win_matrix(), dtype=float)[np.ix_(order, order)]
        im = ax.imshow(p, cmap="RdBu", vmin=0.0, vmax=1.0, interpolation="none")
        np.fill_diagonal(p, np.nan)
        _matrix_axes(ax, names, _matrix_fontsize(m))
        if win_probability is not None:
            lo = np.asarray(win_probability.low)[np.ix_(order, order)]
            hi = np.asarray(win_probability.high)[np.ix_(order, order)]
            open_ = (lo <= 0.5) & (hi >= 0.5) & ~np.eye(m, dtype=bool)
            a, b = np.nonzero(open_)
            shift = 0.3 if m <= 16 else 0.0  # beside the written value
            ax.scatter(
                b + shift, a - shift, s=max(2.0, 40.0 / m**0.8), c="#4D4D4D", marker="o", lw=0
            )
        if m <= 16:
            _annotate_cells(ax, p * 100, ".0f", np.abs(p - 0.5) > 0.3)
        if colorbar:
            _colorbar(ax, im, "expected score of the row model")
    return ax


def plot_observed_winrate(
    fitted: Fitted,
    data: Battles | PairCounts | None = None,
    *,
    ax: Axes | None = None,
    source: str | None = None,
    colorbar: bool = True,
) -> Axes:
    """Observed score of the row model against the column model, (wins + ½ ties) / battles, in
    the fitted model's order; pairs without battles are left blank (light grey)."""
    n, s = _pair_matrices(fitted, data)
    m = fitted.n_models
    order = np.asarray(fitted.order())
    names = [fitted.models[k] for k in order]
    n, s = n[np.ix_(order, order)], s[np.ix_(order, order)]
    pairs = int(np.count_nonzero(np.triu(n, 1)))
    what = (
        f"observed (wins + ½ ties) / battles; {pairs:,} of {m * (m - 1) // 2:,} pairs have "
        "battles (grey: none)"
    )
    with plot_style():
        import matplotlib

        ax = _axes_for(ax, what, fitted, source, **_matrix_frame(names))
        with np.errstate(invalid="ignore", divide="ignore"):
            obs = np.where(n > 0, s / np.where(n > 0, n, 1.0), np.nan)
        np.fill_diagonal(obs, 0.5)  # a model against itself: neutral, as in the predicted matrix
        cmap = matplotlib.colormaps["RdBu"].with_extremes(bad=_MISSING)
        im = ax.imshow(
            np.ma.masked_invalid(obs), cmap=cmap, vmin=0.0, vmax=1.0, interpolation="none"
        )
        _matrix_axes(ax, names, _matrix_fontsize(m))
        if m <= 16:
            _annotate_cells(ax, obs * 100, ".0f", np.abs(np.nan_to_num(obs, nan=0.5) - 0.5) > 0.3)
        if colorbar:
            _colorbar(ax, im, "observed score of the row model")
    return ax


# ============================================================================ coverage
def plot_battles(
    fitted: Fitted,
    data: Battles | PairCounts | None = None,
    *,
    ax: Axes | None = None,
    source: str | None = None,
) -> Axes:
    """Battles per pair on a log colour scale, models best first (white: never compared) — the
    coverage the pair-selection strategies shape (``stablearena next-pairs``)."""
    n, _ = _pair_matrices(fitted, data)
    m = fitted.n_models
    order = np.asarray(fitted.order())
    names = [fitted.models[k] for k in order]
    n = n[np.ix_(order, order)]
    upper = n[np.triu_indices(m, 1)]
    have = upper[upper > 0]
    med = float(np.median(have)) if have.size else 0.0
    what = (
        f"battles per pair: {have.size:,} of {upper.size:,} pairs compared, median "
        f"{med:,.0f}, white = never"
    )
    with plot_style():
        import matplotlib
        from matplotlib.colors import LogNorm, Normalize

        ax = _axes_for(ax, what, fitted, source, **_matrix_frame(names))
        shown = np.where(n > 0, n, np.nan)
        np.fill_diagonal(shown, np.nan)
        cmap = matplotlib.colormaps["cividis"].with_extremes(bad="white")
        finite = shown[np.isfinite(shown)]
        vmin = float(finite.min()) if finite.size else 1.0
        vmax = float(finite.max()) if finite.size else 1.0
        log = vmax > 10 * vmin  # a log scale only when the counts span a decade
        norm = LogNorm(vmin, vmax) if log else Normalize(0.0, max(vmax, 1.0))
        im = ax.imshow(np.ma.masked_invalid(shown), cmap=cmap, norm=norm, interpolation="none")
        _matrix_axes(ax, names, _matrix_fontsize(m))
        if m <= 16:
            _annotate_cells(ax, n, ".0f", norm(np.where(n > 0, n, vmin)) < 0.45)
        cb = _colorbar(ax, im, "battles of the pair" + (" (log scale)" if log else ""))
        if log:
            ticks = [
                t * 10.0**e
                for e in range(int(np.floor(np.log10(vmin))), int(np.ceil(np.log10(vmax))) + 1)
                for t in (1, 2, 5)
                if vmin <= t * 10.0**e <= vmax
            ]
            cb.set_ticks(ticks, labels=[f"{t:,.0f}" for t in ticks])
            cb.minorticks_off()
    return ax


# ============================================================================ annotators
def plot_annotators(
    fitted: AmEloFitted,
    *,
    ax: Axes | None = None,
    source: str | None = None,
    level: float = 0.95,
) -> Axes:
    """am-ELO abilities a_k ± z·se (mean 1 = the average fitted annotator; 0 = votes at random;
    below 0 = votes against the consensus), worst first; flagged annotators in vermillion with
    their reason, annotators left out of the fit (too few records) hollow and grey."""

    if not hasattr(fitted, "annotator_table"):
        raise InputError(
            f"the annotators figure needs an am-ELO fit (--method am-elo), not {fitted.method}."
        )
    if not 0.0 < level < 1.0:
        raise InputError(f"level must lie strictly between 0 and 1, not {level}.")
    tab = fitted.annotator_table()
    k = len(tab)
    z = float(normal_ppf(0.5 + level / 2))
    y = np.arange(k)
    ab = tab["ability"].to_numpy(float)
    se = tab["ability_se"].to_numpy(float)
    status = tab["status"].to_numpy(str)
    flagged = tab["flagged"].to_numpy(bool)
    left = status == "left_out"
    ok = ~flagged & ~left
    threshold = float(fitted.params.get("ability_threshold", 0.0) or 0.0)
    names = tab["annotator"].astype(str).to_numpy()
    records = tab["records"].to_numpy()
    labels = [f"{_short(a)} ({r:,} rec.)" for a, r in zip(names, records, strict=True)]
    reasons = [str(tab["reason"].iloc[r]) for r in np.flatnonzero(flagged | left)]
    what = (
        f"am-ELO annotator abilities, worst first: {int(flagged.sum())} of {k} flagged "
        f"(ability < {threshold:g})"
    )
    with plot_style():
        margin = _text_width(labels, _STYLE["ytick.labelsize"]) + 0.15
        ax = _axes_for(
            ax,
            what,
            fitted,
            source,
            plot_w=5.0,
            plot_h=max(1.0, _ROW_IN * k),
            left=margin,
            right=max(0.3, _text_width(reasons, 6.5) + 0.2),
            bottom=0.5,
        )
        groups = (
            (ok, OKABE_ITO["blue"], "o", "fitted", True),
            (flagged, OKABE_ITO["vermillion"], "D", "flagged", True),
            (left, "#8C8C8C", "o", "left out of the fit (ability with ratings fixed)", False),
        )
        for mask, colour, marker, label, filled in groups:
            if not mask.any():
                continue
            ax.errorbar(
                ab[mask],
                y[mask],
                xerr=z * se[mask],
                fmt=marker,
                ms=3.4,
                color=colour,
                ecolor=colour,
                mfc=colour if filled else "white",
                elinewidth=1.1,
                capsize=0,
                zorder=3,
                label=f"{label} ({int(mask.sum())})",
            )
        ax.axvline(0.0, color=OKABE_ITO["black"], lw=0.8, zorder=2)
        ax.axvline(1.0, color="#999999", lw=0.8, ls=":", zorder=2)
        if threshold != 0.0:
            ax.axvline(threshold, color=OKABE_ITO["vermillion"], lw=0.8, ls="--", zorder=2)
        trans = ax.get_yaxis_transform()
        for r in np.flatnonzero(flagged | left):
            ax.text(
                1.01,
                r,
                str(tab["reason"].iloc[r]),
                transform=trans,
                parse_math=False,
                ha="left",
                va="center",
                fontsize=6.5,
                color=OKABE_ITO["vermillion"] if flagged[r] else "#6E6E6E",
            )
        _row_labels(ax, y, labels, _STYLE["ytick.labelsize"])
        ax.set_ylim(k - 0.5, -0.5)
        ax.tick_params(axis="y", length=0)
        ax.spines["left"].set_visible(False)
        ax.grid(axis="x", color="#DDDDDD", lw=0.6)
        ax.set_axisbelow(True)
        # the axis spans the abilities (and 0, 1, ε); the widest intervals (a few records) run off it
        lo_x = min(float(ab.min()), 0.0, threshold)
        hi_x = max(float(ab.max()), 1.0, threshold)
        pad = 0.08 * (hi_x - lo_x)
        ax.set_xlim(lo_x - pad, hi_x + pad)
        clipped = bool(np.any((ab - z * se < lo_x - pad) | (ab + z * se > hi_x + pad)))
        ax.set_xlabel(
            f"ability (mean 1 over fitted annotators; 0 = random voting); {level:.0%} intervals"
            + ("; intervals running off the axis are cut" if clipped else "")
        )
        ax.legend(loc="upper right", frameon=True, framealpha=0.9)  # worst first: empty corner
    return ax


# ============================================================================ ties
def _gap_bins(gap: Any, weight: Any, bins: int) -> Any:
    """Bin index of each row: edges at weighted quantiles of ``gap`` (about equal comparisons per
    bin), at most ``bins`` bins."""
    order = np.argsort(gap, kind="mergesort")
    cum = np.cumsum(weight[order])
    total = cum[-1]
    target = total * np.arange(1, bins) / bins
    edges = np.unique(gap[order][np.searchsorted(cum, target)])
    return np.searchsorted(edges, gap, side="right")


def plot_ties(
    fitted: Fitted,
    data: Battles | PairCounts | None = None,
    *,
    ax: Axes | None = None,
    source: str | None = None,
    bins: int = 12,
    level: float = 0.95,
) -> Axes:
    """Observed and predicted outcome probabilities of the higher-rated model against the rating
    gap R_high − R_low (Elo points), pairs pooled into ``bins`` bins of about equal comparisons.

    Observed: the fraction of the bin's comparisons the higher-rated model won, tied and lost,
    with binomial ``level`` intervals. Predicted: the fitted model's probabilities for the same
    pairs, weighted by their comparisons (leaderbot App. D's marginal check, by gap). Tie models
    (Rao–Kupper, Davidson) predict all three outcomes; Bradley–Terry-type models (m-ELO, am-ELO,
    Elo) predict no ties — for them the expected score P(win) + ½ P(tie) is compared instead.
    """

    if bins < 2:
        raise InputError(f"bins must be at least 2, not {bins}.")
    if not 0.0 < level < 1.0:
        raise InputError(f"level must lie strictly between 0 and 1, not {level}.")
    c, i, j = _fitted_rows(fitted, data)
    r = np.asarray(fitted.ratings, dtype=float)
    flip = r[i] < r[j]
    hi_, lo_ = np.where(flip, j, i), np.where(flip, i, j)
    win = np.where(flip, c.losses, c.wins)
    loss = np.where(flip, c.wins, c.losses)
    tie = c.all_ties
    n = win + loss + tie
    gap = r[hi_] - r[lo_]
    has_ties = (
        hasattr(fitted, "outcome_probabilities")
        and getattr(fitted, "outcome_space", "ties") == "ties"
    )
    if has_ties:
        pred = np.asarray(fitted.outcome_probabilities(hi_, lo_), dtype=float).reshape(-1, 3)
    else:
        pred = None
        expected = np.asarray(fitted.predict(hi_, lo_), dtype=float).reshape(-1)
    b = _gap_bins(gap, n, bins)
    nb = np.bincount(b, n)
    used = nb > 0
    nb = nb[used]
    x = np.bincount(b, n * gap)[used] / nb

    def frac(v: Any) -> Any:
        return np.bincount(b, v, len(used))[used] / nb

    z = float(normal_ppf(0.5 + level / 2))
    with plot_style():
        from matplotlib.legend_handler import HandlerTuple
        from matplotlib.lines import Line2D

        if ax is None:
            ax = _new_axes(9.4, 4.6)
        series = (
            ("won by the higher-rated", win, 0, OKABE_ITO["blue"], "o"),
            ("tied", tie, 2, OKABE_ITO["orange"], "s"),
            ("won by the lower-rated", loss, 1, OKABE_ITO["vermillion"], "^"),
        )
        handles: list[Any] = []
        labels: list[str] = []
        for label, counts, col, colour, marker in series:
            f = frac(counts)
            ax.errorbar(
                x,
                f,
                yerr=z * np.sqrt(f * (1 - f) / nb),
                fmt=marker,
                ms=4,
                color=colour,
                capsize=0,
                elinewidth=1,
                zorder=3,
            )
            dot = Line2D([], [], marker=marker, color=colour, ls="none", ms=4)
            if pred is not None:
                ax.plot(x, frac(n * pred[:, col]), "-", color=colour, lw=1.6)
                handles.append((dot, Line2D([], [], color=colour, lw=1.6)))
            else:
                handles.append(dot)
            labels.append(label)
        if pred is None:
            ax.plot(x, frac(win + 0.5 * tie), "o", mfc="white", color="black", ms=4, zorder=3)
            ax.plot(x, frac(n * expected), "-", color="black", lw=1.6)
            handles.append(
                (
                    Line2D([], [], marker="o", mfc="white", color="black", ls="none", ms=4),
                    Line2D([], [], color="black", lw=1.6),
                )
            )
            labels.append("score: win + ½ tie")
            note = (
                f"markers: observed; line: {fitted.method}'s predicted score. {fitted.method} "
                "has no tie outcome (a tie scores ½): fit rao-kupper or davidson to predict ties."
            )
        else:
            note = "markers: observed; lines: predicted by the fit for the same pairs."
        ax.set_ylim(-0.02, 1.02)
        ax.set_xlim(left=0)
        ax.grid(color="#E3E3E3", lw=0.6)
        ax.set_axisbelow(True)
        ax.set_xlabel("rating gap R(higher) − R(lower), Elo points (bins of ≈ equal comparisons)")
        ax.set_ylabel("fraction of comparisons")
        ax.legend(
            handles,
            labels,
            handler_map={tuple: HandlerTuple(ndivide=None)},
            loc="upper left",
            bbox_to_anchor=(1.01, 1.0),
            frameon=False,
            handlelength=3.0,
        )
        _title(
            ax,
            f"outcomes against the rating gap, {level:.0%} binomial intervals; {note}",
            fitted,
            source,
        )
    return ax


# ============================================================================ map
def _mds(s: Any) -> tuple[Any, Any]:
    """Classical MDS (Torgerson 1952) of a squared-distance matrix: the top two principal
    coordinates of B = −½ J S J and the share of the positive eigenvalues they explain."""
    m = s.shape[0]
    j = np.eye(m) - np.full((m, m), 1.0 / m)
    bmat = -0.5 * j @ s @ j
    vals, vecs = np.linalg.eigh((bmat + bmat.T) / 2)
    idx = np.argsort(vals)[::-1][:2]
    lam = np.clip(vals[idx], 0.0, None)
    share = lam / max(float(np.clip(vals, 0.0, None).sum()), 1e-300)
    return vecs[:, idx] * np.sqrt(lam), share


def _place_labels(ax: Axes, xy: Any, labels: Sequence[str], fontsize: float) -> int:
    """Write each label near its point without overlapping another label or point: try rings of
    positions at growing distance (a leader line joins a label set off from its point). Labels
    are placed in the order given (most important first). Returns how many needed a leader."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.patheffects import withStroke

    fig = ax.figure
    if not isinstance(fig.canvas, FigureCanvasAgg):
        FigureCanvasAgg(fig)
    fig.canvas.draw()  # final layout and limits
    fig.set_layout_engine("none")  # freeze the axes where the layout put them
    renderer = fig.canvas.get_renderer()
    pts = ax.transData.transform(xy)
    box = ax.get_window_extent()
    pad = 1.5
    r_pt = 3.0 * fig.dpi / 72  # marker radius in pixels
    occupied = [
        np.column_stack([pts[:, 0] - r_pt, pts[:, 1] - r_pt, pts[:, 0] + r_pt, pts[:, 1] + r_pt])
    ]
    placed = np.empty((0, 4))
    inv = ax.transData.inverted()
    moved = 0
    angles = np.deg2rad([0, 180, 30, 150, 330, 210, 60, 120, 300, 240, 90, 270])
    for k, text in enumerate(labels):
        t = ax.text(0, 0, text, fontsize=fontsize, ha="left", va="bottom")
        ext = t.get_window_extent(renderer)
        w, h = ext.width + pad, ext.height + pad
        t.remove()
        x0, y0 = pts[k]
        done = False
        for ring in range(40):
            rad = r_pt + 2 + ring * 0.8 * h
            for ang in angles:
                cx = x0 + rad * np.cos(ang)
                cy = y0 + rad * np.sin(ang)
                # anchor the label's near side at (cx, cy)
                left = cx if np.cos(ang) >= -1e-9 else cx - w
                bottom = (
                    cy - h / 2 if abs(np.sin(ang)) < 0.6 else (cy if np.sin(ang) > 0 else cy - h)
                )
                cand = np.array([left, bottom, left + w, bottom + h])
                if cand[0] < box.x0 or cand[2] > box.x1 or cand[1] < box.y0 or cand[3] > box.y1:
                    continue
                allb = np.vstack([*occupied, placed])
                hit = (
                    (allb[:, 0] < cand[2])
                    & (allb[:, 2] > cand[0])
                    & (allb[:, 1] < cand[3])
                    & (allb[:, 3] > cand[1])
                )
                if hit.any():
                    continue
                placed = np.vstack([placed, cand])
                tx, ty = inv.transform((cand[0] + pad / 2, cand[1] + pad / 2))
                ax.text(
                    tx,
                    ty,
                    text,
                    fontsize=fontsize,
                    ha="left",
                    va="bottom",
                    zorder=4,
                    path_effects=[withStroke(linewidth=2.2, foreground="white")],
                )
                if ring > 0:
                    moved += 1
                    near = inv.transform(
                        (np.clip(x0, cand[0], cand[2]), np.clip(y0, cand[1], cand[3]))
                    )
                    ax.plot(
                        [xy[k, 0], near[0]],
                        [xy[k, 1], near[1]],
                        "-",
                        color="#9A9A9A",
                        lw=0.5,
                        zorder=2,
                    )
                done = True
                break
            if done:
                break
        if not done:
            raise InputError(
                f"no room to label {len(labels)} models without overlap; draw a larger figure."
            )
    return moved


def _cluster_tree(
    ax: Axes | None,
    fitted: Fitted,
    cov: Covariance,
    intervals: Intervals | None,
    level: float,
    source: str | None,
) -> Axes:
    from scipy.cluster.hierarchy import dendrogram, fcluster, linkage
    from scipy.spatial.distance import squareform

    r = np.asarray(fitted.ratings, dtype=float)
    m = len(r)
    dse = np.asarray(cov.difference_se(), dtype=float)
    with np.errstate(divide="ignore", invalid="ignore"):
        zmat = np.abs(r[:, None] - r[None, :]) / np.where(dse > 0, dse, np.inf)
    zmat = np.nan_to_num((zmat + zmat.T) / 2, nan=0.0, posinf=0.0)
    np.fill_diagonal(zmat, 0.0)
    tree = linkage(squareform(zmat, checks=False), method="average")
    zcrit = float(normal_ppf(0.5 + level / 2))
    groups = fcluster(tree, zcrit, criterion="distance")
    leaves: dict[int, list[int]] = {k: [k] for k in range(m)}
    for row in range(len(tree)):
        a, b = int(tree[row, 0]), int(tree[row, 1])
        # the lower-rated child first: dendrogram draws it below, so the best model ends on top
        if r[leaves[a]].mean() > r[leaves[b]].mean():
            tree[row, 0], tree[row, 1] = b, a
        leaves[m + row] = leaves[a] + leaves[b]
    # colour each link below the cut by its group (groups numbered best first), the rest grey
    rank_of = {g: k for k, g in enumerate(dict.fromkeys(groups[np.asarray(fitted.order())]))}

    def colour(node: int) -> str:
        if tree[node - m, 2] > zcrit:
            return "#9A9A9A"
        return _CYCLE[rank_of[groups[leaves[node][0]]] % len(_CYCLE)]

    labels = [_short(x) for x in fitted.models]
    if intervals is not None:
        labels = [f"{x}  (tier {int(t)})" for x, t in zip(labels, intervals.tier, strict=True)]
    top = float(tree[:, 2].max()) if len(tree) else 1.0
    what = (
        f"cluster tree of the models by how clearly the data separate them: groups joined right of "
        f"the dashed line (z = {zcrit:.2f}) are not separable at {level:.0%} "
        f"({len(set(groups))} groups, coloured when they hold several models)"
    )
    ax = _axes_for(
        ax,
        what,
        fitted,
        source,
        plot_w=4.6,
        plot_h=max(1.0, _ROW_IN * m),
        left=0.3,
        right=_text_width(labels, 7.5) + 0.2,
        bottom=0.5,
    )
    from matplotlib.collections import LineCollection

    drawn = dendrogram(tree, no_plot=True, link_color_func=colour)
    # orientation "left": joins at x = distance, leaves on the right at y = 5, 15, … (the first
    # leaf, the lowest-rated group, at the bottom)
    segments = [
        np.column_stack([d, i]) for i, d in zip(drawn["icoord"], drawn["dcoord"], strict=True)
    ]
    ax.add_collection(LineCollection(segments, colors=drawn["color_list"], linewidths=1.2))
    ax.set_ylim(0, 10 * m)
    ax.set_xlim(top * 1.05, 0.0)
    _row_labels(ax, 5 + 10 * np.arange(m), [labels[k] for k in drawn["leaves"]], 7.5, right=True)
    for side in ("left", "right", "top"):
        ax.spines[side].set_visible(False)
    if top > 4 * zcrit:  # a log(1 + z) axis keeps the joins near the cut readable
        ax.set_xscale("function", functions=(np.log1p, np.expm1))
        ticks = [t for t in (0, 1, 2, 5, 10, 20, 50, 100, 200, 500, 1000, 2000, 5000) if t <= top]
        ax.set_xticks(ticks, [str(t) for t in ticks])
        ax.set_xlim(top * 1.05, 0.0)
    ax.axvline(zcrit, color=OKABE_ITO["black"], ls="--", lw=0.8)
    ax.tick_params(axis="y", length=0)
    ax.spines["left"].set_visible(False)
    ax.set_xlabel(
        "average |R_i − R_j| / se(R_i − R_j) between the joined groups"
        + (" (log(1 + z) scale)" if top > 4 * zcrit else "")
    )
    return ax


def plot_map(
    fitted: Fitted,
    intervals: Intervals | None = None,
    *,
    ax: Axes | None = None,
    source: str | None = None,
    level: float = 0.95,
) -> Axes:
    """Where the models sit relative to each other.

    Covariance models (``--k-cov``): classical MDS of the fitted dissimilarity S = [s_ij] =
    Var(x_i − x_j) = d_i + d_j + ‖λ_i − λ_j‖² (leaderbot eq. 9–13; ``TieFitted.dissimilarity``),
    read as squared distances — models close on the map are judged alike by the arena's voters
    — coloured by rating. Other models: a cluster tree (average linkage) of the z-statistics
    |R_i − R_j| / se(R_i − R_j), the se from ``intervals.covariance`` or the Fisher covariance;
    groups joined below the normal critical value at ``level`` are not separable (tier colours
    in the labels).
    """
    _check_intervals(fitted, intervals)
    s = fitted.dissimilarity() if hasattr(fitted, "dissimilarity") else None
    m = fitted.n_models
    with plot_style():
        if s is None:
            from ..raters.uncertainty import covariance

            cov = intervals.covariance if intervals is not None else covariance(fitted, "fisher")
            lvl = intervals.level if intervals is not None else level
            return _cluster_tree(ax, fitted, cov, intervals, lvl, source)
        xy, share = _mds(np.asarray(s, dtype=float))
        if ax is None:
            side = float(np.clip(3.5 + 0.075 * m, 5.5, 16.0))
            ax = _new_axes(side + 1.2, side)
        r = np.asarray(fitted.ratings, dtype=float)
        sc = ax.scatter(
            xy[:, 0], xy[:, 1], c=r, cmap="cividis", s=22, edgecolors="black", lw=0.4, zorder=3
        )
        cb = ax.figure.colorbar(sc, ax=ax, shrink=0.5, aspect=30, pad=0.01)
        cb.set_label(_rating_label(fitted))
        span = np.ptp(xy, axis=0)
        span = np.where(span > 0, span, 1.0)
        ax.set_xlim(xy[:, 0].min() - 0.12 * span[0], xy[:, 0].max() + 0.12 * span[0])
        ax.set_ylim(xy[:, 1].min() - 0.08 * span[1], xy[:, 1].max() + 0.08 * span[1])
        ax.set_xlabel(f"MDS coordinate 1 ({share[0]:.0%} of the dissimilarity)")
        ax.set_ylabel(f"MDS coordinate 2 ({share[1]:.0%})")
        ax.grid(color="#EEEEEE", lw=0.6)
        ax.set_axisbelow(True)
        _title(
            ax,
            "models placed by the fitted dissimilarity Var(x_i − x_j) (classical MDS); colour: rating",
            fitted,
            source,
        )
        order = np.asarray(fitted.order())
        _place_labels(
            ax, xy[order], [_short(fitted.models[k]) for k in order], 7.0 if m <= 60 else 6.5
        )
    return ax


# ============================================================================ whole figures
def figure(
    kind: str,
    fitted: Fitted,
    *,
    intervals: Intervals | None = None,
    win_probability: WinProbability | None = None,
    data: Battles | PairCounts | None = None,
    annotators: AmEloFitted | None = None,
    source: str | None = None,
) -> Figure:
    """The complete figure of one ``kind`` (see :data:`KINDS`), sized for the number of models.

    ``winrate`` puts the observed matrix beside the predicted one when the data have battles.
    ``annotators`` draws ``annotators`` (an am-ELO fit) or ``fitted`` itself when it is one.
    """
    if kind not in KINDS:
        raise InputError(f"unknown figure kind {kind!r}; choose one of {', '.join(KINDS)}.")
    if kind == "leaderboard":
        ax = plot_leaderboard(fitted, intervals, source=source)
    elif kind == "winrate":
        names = [fitted.models[k] for k in fitted.order()]
        frame = _matrix_frame(names)
        with plot_style():
            left, right = _framed_axes(
                4, ncols=2, gap=frame["right"] + frame["left"], **frame
            )  # room for 4 title lines
        plot_winrate(fitted, win_probability, ax=left, source=source)
        plot_observed_winrate(fitted, data, ax=right, source=source)
        ax = left
    elif kind == "battles":
        ax = plot_battles(fitted, data, source=source)
    elif kind == "annotators":
        target = annotators if annotators is not None else fitted
        ax = plot_annotators(target, source=source)  # type: ignore[arg-type]
    elif kind == "ties":
        ax = plot_ties(fitted, data, source=source)
    else:
        ax = plot_map(fitted, intervals, source=source)
    return ax.figure  # type: ignore[return-value]


_ID = re.compile(r'\bid="([^"]+)"')


def figure_to_svg(fig: Figure, *, prefix: str = "") -> str:
    """The figure as an SVG string ready to inline in HTML: no XML prolog, text kept as text
    (font family falling back to the browser's sans-serif), and every element id prefixed with
    ``prefix`` so that several figures can share one page."""
    with plot_style():
        buf = io.StringIO()
        fig.savefig(buf, format="svg", metadata={"Date": None, "Creator": "stablearena"})
    svg = buf.getvalue()
    svg = svg[svg.index("<svg") :]
    svg = svg.replace(
        "font-family:'DejaVu Sans'", "font-family:'DejaVu Sans',Arial,Helvetica,sans-serif"
    )
    svg = svg.replace(
        "font-family: 'DejaVu Sans'", "font-family: 'DejaVu Sans', Arial, Helvetica, sans-serif"
    )
    if prefix:
        ids = set(_ID.findall(svg))
        for old in sorted(ids, key=len, reverse=True):
            new = f"{prefix}{old}"
            svg = svg.replace(f'id="{old}"', f'id="{new}"')
            svg = svg.replace(f"#{old})", f"#{new})").replace(f'href="#{old}"', f'href="#{new}"')
    return svg


def check_output(path: str | Path, dpi: float = 150) -> str:
    """The format of a figure file named ``path`` (png, svg or pdf), after checking the name and
    ``dpi`` — before any work is done for it."""
    out = Path(path)
    fmt = out.suffix.lower().lstrip(".")
    if fmt not in ("png", "svg", "pdf"):
        raise InputError(
            f"{out}: the figure file must end in .png, .svg or .pdf, not {out.suffix!r}."
        )
    if not 20 <= dpi <= 600:
        raise InputError(f"--dpi must lie between 20 and 600, not {dpi:g}.")
    return fmt


def save_figure(fig: Figure, path: str | Path, *, dpi: float = 150) -> Path:
    """Write ``fig`` to ``path``; the format follows the suffix (.png, .svg, .pdf); ``dpi``:
    pixels per inch of a PNG."""
    from ..atomic import atomic_path

    out = Path(path)
    fmt = check_output(out, dpi)
    with plot_style():
        try:
            with atomic_path(out) as tmp:  # a temporary file beside it, fsynced, then renamed
                fig.savefig(
                    tmp,
                    format=fmt,
                    dpi=dpi,
                    metadata={"Creator": "stablearena"} if fmt != "png" else None,
                )
        except OSError as exc:
            raise InputError(f"cannot write {out}: {exc.strerror}.") from None
    return out
