"""The figures of stablearena.figures.plots: drawn from small fitted arenas, rendered, and checked for what
a reader sees — not blank, one bar per model, the names, the labels, nothing overlapping at 129
models — plus ``stablearena plot`` end to end."""

from __future__ import annotations

import io
import re
from pathlib import Path

import numpy as np
import pytest

matplotlib = pytest.importorskip("matplotlib")

from matplotlib.backends.backend_agg import FigureCanvasAgg  # noqa: E402
from matplotlib.collections import LineCollection, PathCollection  # noqa: E402
from matplotlib.image import AxesImage  # noqa: E402

from stablearena.data.datasets import EXAMPLE_SOURCE, example_arena  # noqa: E402
from stablearena.data.simulate import simulate_battles  # noqa: E402
from stablearena.errors import InputError  # noqa: E402
from stablearena.figures import plots  # noqa: E402
from stablearena.raters import get_rater  # noqa: E402
from stablearena.raters.uncertainty import intervals, win_probability  # noqa: E402


# ---------------------------------------------------------------------------- fixtures
@pytest.fixture(scope="module")
def example():
    return example_arena().battles


@pytest.fixture(scope="module")
def fitted(example):
    return get_rater("m-elo").fit(example)


@pytest.fixture(scope="module")
def iv(fitted):
    return intervals(fitted, "fisher")


@pytest.fixture(scope="module")
def amelo(example):
    return get_rater("am-elo").fit(example)


@pytest.fixture(scope="module")
def big():
    """129 models with long names (as many as Chatbot Arena 2024), every pair compared."""
    rng = np.random.default_rng(3)
    names = [f"vendor-{k % 7}-model-{k:03d}-instruct-{'x' * (k % 9)}" for k in range(129)]
    battles = simulate_battles(rng.normal(1000, 120, 129), 150_000, models=names, seed=4)
    fit = get_rater("m-elo").fit(battles)
    return battles, fit, intervals(fit, "fisher")


def rgb(fig) -> np.ndarray:
    """The figure as an RGB array, as a PNG viewer would show it."""
    canvas = FigureCanvasAgg(fig)
    canvas.draw()
    return np.asarray(canvas.buffer_rgba())[:, :, :3]


def assert_not_blank(fig) -> np.ndarray:
    img = rgb(fig)
    ink = np.any(img < 235, axis=2)  # anything visibly darker than the white background
    assert ink.mean() > 0.02, f"only {ink.mean():.3%} of the image is drawn"
    assert img.std() > 10
    return img


def title(ax) -> str:
    """The title as one line (it is wrapped to the figure's width)."""
    return " ".join(ax.get_title(loc="left").split())


def texts(ax) -> list[str]:
    return [t.get_text() for t in ax.texts]


def row_labels(ax) -> list:
    """The per-row label texts (model or annotator names), top to bottom as drawn."""
    rows = [t for t in ax.texts if (t.get_gid() or "").startswith("row-label-")]
    return sorted(rows, key=lambda t: int(t.get_gid().rsplit("-", 1)[1]))


def bboxes(fig, artists) -> np.ndarray:
    renderer = fig.canvas.get_renderer()
    return np.array([a.get_window_extent(renderer).extents for a in artists if a.get_text()])


def overlaps(boxes: np.ndarray) -> int:
    """Pairs of boxes (x0, y0, x1, y1) that overlap by more than half a pixel."""
    x0, y0, x1, y1 = (boxes[:, k] for k in range(4))
    w = np.minimum(x1[:, None], x1[None, :]) - np.maximum(x0[:, None], x0[None, :])
    h = np.minimum(y1[:, None], y1[None, :]) - np.maximum(y0[:, None], y0[None, :])
    hit = (w > 0.5) & (h > 0.5)
    np.fill_diagonal(hit, False)
    return int(hit.sum() // 2)


# ---------------------------------------------------------------------------- leaderboard
def test_leaderboard_one_bar_per_model_sorted_with_rank_intervals_and_tiers(fitted, iv):
    ax = plots.plot_leaderboard(fitted, iv, source=EXAMPLE_SOURCE)
    assert_not_blank(ax.figure)
    m = fitted.n_models
    bars = [c for c in ax.collections if isinstance(c, LineCollection)]
    assert len(bars) == 1 and len(bars[0].get_segments()) == m
    labels = [t.get_text() for t in row_labels(ax)]
    order = fitted.order()
    assert len(labels) == m
    for label, k in zip(labels, order, strict=True):
        name = fitted.models[k]
        lo, hi = iv.rank_low[k], iv.rank_high[k]
        assert label.startswith(name)
        assert label.endswith(f"[{lo}]" if lo == hi else f"[{lo}–{hi}]")
    # the bars are the intervals, best model on top (y = 0)
    seg = bars[0].get_segments()
    top = seg[0]
    assert top[0][1] == 0 and np.isclose(top[0][0], iv.ci_low[order[0]])
    assert np.isclose(top[1][0], iv.ci_high[order[0]])
    ys = [s[0][1] for s in seg]
    assert ys == sorted(ys)
    n_tiers = len(set(iv.tier.tolist()))
    assert sum(t.startswith("tier ") for t in texts(ax)) == n_tiers
    assert "rating" in ax.get_xlabel() and "mean 1000" in ax.get_xlabel()
    heading = title(ax)
    assert "m-elo" in heading and EXAMPLE_SOURCE in heading and "fisher" in heading


def test_leaderboard_without_intervals_draws_points_and_says_so(fitted):
    ax = plots.plot_leaderboard(fitted)
    assert_not_blank(ax.figure)
    assert not [c for c in ax.collections if isinstance(c, LineCollection)]
    assert len(ax.lines[0].get_xdata()) == fitted.n_models
    assert "no intervals" in title(ax)


def test_leaderboard_rejects_intervals_of_another_fit(fitted, example):
    other = get_rater("bt").fit(example.take(np.arange(4000)))
    with pytest.raises(InputError, match="another fit"):
        plots.plot_leaderboard(other, intervals(fitted, "fisher"))


def test_leaderboard_legible_at_129_models(big):
    _, fit, iv129 = big
    ax = plots.plot_leaderboard(fit, iv129, source="simulated, 129 models")
    fig = ax.figure
    assert_not_blank(fig)
    labels = row_labels(ax)
    assert len(labels) == 129 and all(t.get_fontsize() >= 7 for t in labels)
    boxes = bboxes(fig, labels)
    assert overlaps(boxes) == 0
    # every label inside the figure (nothing cut off at the left edge)
    assert boxes[:, 0].min() >= 0 and boxes[:, 2].max() <= fig.bbox.width
    assert 17 < fig.get_figheight() < 26  # sized to the number of models


# ---------------------------------------------------------------------------- win rates
def test_winrate_predicted_matrix_and_undecided_dots(fitted, iv):
    wp = win_probability(fitted, "fisher")
    ax = plots.plot_winrate(fitted, wp, source=EXAMPLE_SOURCE)
    assert_not_blank(ax.figure)
    (im,) = [a for a in ax.get_children() if isinstance(a, AxesImage)]
    order = fitted.order()
    np.testing.assert_allclose(im.get_array(), fitted.win_matrix()[np.ix_(order, order)])
    assert texts(ax).count("aurora-70b") == 2  # row and column label
    undecided = (wp.low <= 0.5) & (wp.high >= 0.5) & ~np.eye(fitted.n_models, dtype=bool)
    dots = [c for c in ax.collections if isinstance(c, PathCollection)]
    assert len(dots) == 1 and len(dots[0].get_offsets()) == int(undecided.sum()) > 0
    assert "interval contains ½" in title(ax)
    # values written in the cells of a small matrix
    assert "78" in texts(ax)


def test_observed_winrate_blank_where_pairs_never_met():
    # a chain a-b, b-c, c-d: only 3 of 6 pairs met
    battles = simulate_battles(
        [1100, 1050, 1000, 950],
        3000,
        pair_probs=np.array([[0, 1, 0, 0], [1, 0, 1, 0], [0, 1, 0, 1], [0, 0, 1, 0]], dtype=float),
        models=["a", "b", "c", "d"],
        seed=1,
    )
    fit = get_rater("m-elo").fit(battles)
    ax = plots.plot_observed_winrate(fit)
    assert_not_blank(ax.figure)
    (im,) = [a for a in ax.get_children() if isinstance(a, AxesImage)]
    shown = im.get_array()
    assert int(np.ma.count_masked(shown)) == 6  # 3 unmet pairs, both orders
    counts = battles.counts().to_frame()
    ab = counts[(counts.model_i == "a") & (counts.model_j == "b")].iloc[0]
    expected = (ab.wins + 0.5 * (ab.ties + ab.ties_both_bad)) / (
        ab.wins + ab.losses + ab.ties + ab.ties_both_bad
    )
    order = list(fit.order())
    assert np.isclose(shown[order.index(0), order.index(1)], expected)
    assert "3 of 6 pairs" in title(ax)


def test_winrate_figure_has_both_panels(fitted, example):
    fig = plots.figure("winrate", fitted, data=example, source=EXAMPLE_SOURCE)
    assert_not_blank(fig)
    titled = [a for a in fig.axes if a.get_title(loc="left")]
    assert len(titled) == 2
    assert title(titled[0]).startswith("predicted")
    assert title(titled[1]).startswith("observed")


def test_matrices_legible_at_129_models(big):
    battles, fit, _ = big
    ax = plots.plot_battles(fit, battles, source="simulated, 129 models")
    fig = ax.figure
    assert_not_blank(fig)
    rows = row_labels(ax)
    cols = [t for t in ax.texts if (t.get_gid() or "").startswith("column-label-")]
    assert len(rows) == len(cols) == 129
    assert overlaps(bboxes(fig, rows)) == 0 and overlaps(bboxes(fig, cols)) == 0
    assert overlaps(np.vstack([bboxes(fig, rows), bboxes(fig, cols)])) == 0
    assert min(t.get_fontsize() for t in rows) >= 6.5
    assert bboxes(fig, rows)[:, 0].min() >= 0  # no name cut off


# ---------------------------------------------------------------------------- coverage
def test_battles_matrix_holds_the_pair_counts(fitted, example):
    ax = plots.plot_battles(fitted, example, source=EXAMPLE_SOURCE)
    assert_not_blank(ax.figure)
    (im,) = [a for a in ax.get_children() if isinstance(a, AxesImage)]
    order = list(fitted.order())
    c = example.counts().collapse()
    i, j = int(c.i[0]), int(c.j[0])
    total = c.totals[0]
    assert im.get_array()[order.index(i), order.index(j)] == total
    assert im.get_array()[order.index(j), order.index(i)] == total
    assert "66 of 66 pairs" in title(ax)
    (cbar,) = [a for a in ax.figure.axes if a is not ax]
    assert "battles" in cbar.get_ylabel()


# ---------------------------------------------------------------------------- annotators
def test_annotators_flagged_marked_with_reason(amelo):
    ax = plots.plot_annotators(amelo, source=EXAMPLE_SOURCE)
    assert_not_blank(ax.figure)
    tab = amelo.annotator_table()
    labels = [t.get_text() for t in row_labels(ax)]
    assert len(labels) == len(tab)
    assert labels[0].startswith(tab["annotator"].iloc[0])  # worst first
    flagged = tab[tab["flagged"]]
    assert len(flagged) == 5  # the example's 3 flippers and 2 of its 3 random voters
    for reason in flagged["reason"]:
        assert reason in texts(ax)
    legend = [t.get_text() for t in ax.get_legend().get_texts()]
    assert "flagged (5)" in legend and "fitted (35)" in legend
    assert "ability" in ax.get_xlabel()


def test_annotators_need_an_am_elo_fit(fitted):
    with pytest.raises(InputError, match="am-ELO"):
        plots.plot_annotators(fitted)


# ---------------------------------------------------------------------------- ties
def test_ties_tie_model_predicts_three_outcomes(example):
    rk = get_rater("rao-kupper").fit(example)
    ax = plots.plot_ties(rk, bins=8)
    assert_not_blank(ax.figure)
    predicted = [line for line in ax.lines if line.get_linestyle() == "-"]
    assert len(predicted) == 3
    # observed markers: the three fractions of each bin sum to one
    observed = [line for line in ax.lines if line.get_linestyle() == "None"]
    ys = np.array([line.get_ydata() for line in observed[:3]])
    np.testing.assert_allclose(ys.sum(axis=0), 1.0)
    # and the predicted ones too, and they track the observed
    yp = np.array([line.get_ydata() for line in predicted])
    np.testing.assert_allclose(yp.sum(axis=0), 1.0)
    assert np.abs(yp - ys).max() < 0.08
    assert "Elo points" in ax.get_xlabel() and "fraction" in ax.get_ylabel()


def test_ties_bradley_terry_compares_scores_and_says_it_has_no_ties(fitted):
    ax = plots.plot_ties(fitted)
    assert_not_blank(ax.figure)
    assert "no tie outcome" in title(ax)
    (line,) = [line for line in ax.lines if line.get_linestyle() == "-"]
    assert np.all(np.diff(line.get_xdata()) > 0)  # bins ordered by the gap
    assert np.all(np.diff(line.get_ydata()) > 0)  # the predicted score grows with the gap


def test_ties_bad_bins(fitted):
    with pytest.raises(InputError, match="bins"):
        plots.plot_ties(fitted, bins=1)
    with pytest.raises(InputError, match="level"):
        plots.plot_ties(fitted, level=95)


@pytest.mark.parametrize("draw", [plots.plot_battles, plots.plot_observed_winrate, plots.plot_ties])
def test_data_with_models_the_fit_does_not_know(example, draw):
    fit = get_rater("m-elo").fit(example.filter(exclude_models=["lumen-nano"]))
    with pytest.raises(InputError, match=r"lumen-nano.*not in the m-elo fit"):
        draw(fit, example)


# ---------------------------------------------------------------------------- map
def test_map_cluster_tree_without_covariance(fitted, iv):
    ax = plots.plot_map(fitted, iv, source=EXAMPLE_SOURCE)
    assert_not_blank(ax.figure)
    rows = row_labels(ax)
    labels = [t.get_text() for t in rows]
    assert len(labels) == fitted.n_models
    assert {lab.split("  (tier")[0] for lab in labels} == set(fitted.models)
    top = max(rows, key=lambda t: t.get_position()[1])
    assert top.get_text().startswith(fitted.models[fitted.order()[0]])  # best model on top
    assert overlaps(bboxes(ax.figure, rows)) == 0
    assert "cluster tree" in title(ax)


def test_map_mds_of_a_covariance_model_labels_every_model_without_overlap():
    rng = np.random.default_rng(0)
    names = [f"model-{k:02d}" for k in range(30)]
    battles = simulate_battles(
        rng.normal(1000, 100, 30), 30_000, models=names, rule="davidson", eta=-0.5, seed=2
    )
    cov = get_rater("rao-kupper", k_cov=2).fit(battles)
    ax = plots.plot_map(cov, source="simulated")
    fig = ax.figure
    assert_not_blank(fig)
    (points,) = [c for c in ax.collections if isinstance(c, PathCollection)]
    assert len(points.get_offsets()) == 30
    labels = [t for t in ax.texts if t.get_text() in set(names)]
    assert sorted(t.get_text() for t in labels) == names
    assert overlaps(bboxes(fig, labels)) == 0
    assert "MDS" in ax.get_xlabel()


# ---------------------------------------------------------------------------- svg, files, kinds
def test_figure_to_svg_is_inline_ready_with_prefixed_ids(fitted, iv):
    fig = plots.plot_leaderboard(fitted, iv).figure
    svg = plots.figure_to_svg(fig, prefix="lb-")
    assert svg.startswith("<svg") and "<?xml" not in svg and "<!DOCTYPE" not in svg
    ids = re.findall(r'\bid="([^"]+)"', svg)
    assert ids and all(i.startswith("lb-") for i in ids)
    refs = re.findall(r'(?:href="#|url\(#)([^")]+)', svg)
    assert refs and all(r.startswith("lb-") for r in refs)
    assert "aurora-70b" in svg  # text kept as text
    assert "sans-serif" in svg


def test_save_figure_formats(tmp_path, fitted, iv):
    fig = plots.plot_leaderboard(fitted, iv).figure
    png = plots.save_figure(fig, tmp_path / "lb.png")
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert plots.save_figure(fig, tmp_path / "lb.pdf").read_bytes()[:4] == b"%PDF"
    assert b"<svg" in plots.save_figure(fig, tmp_path / "lb.svg").read_bytes()[:400]
    with pytest.raises(InputError, match=r"\.png, \.svg or \.pdf"):
        plots.save_figure(fig, tmp_path / "lb.jpg")


def test_figure_unknown_kind(fitted):
    with pytest.raises(InputError, match="unknown figure kind"):
        plots.figure("pie", fitted)


def test_colours_are_okabe_ito(fitted, iv, amelo):
    palette = {c.lower() for c in plots.OKABE_ITO.values()}
    ax = plots.plot_leaderboard(fitted, iv)
    bars = [c for c in ax.collections if isinstance(c, LineCollection)][0]
    assert matplotlib.colors.to_hex(bars.get_colors()[0]) in palette
    ax = plots.plot_annotators(amelo)
    markers = [line for line in ax.lines if line.get_marker() not in ("None", "", None)]
    colours = {matplotlib.colors.to_hex(line.get_color()) for line in markers}
    assert colours and colours <= palette | {"#8c8c8c"}  # grey: left out of the fit


# ---------------------------------------------------------------------------- the CLI
def _png(path: Path) -> np.ndarray:
    from PIL import Image

    return np.asarray(Image.open(path).convert("RGB"))


@pytest.mark.parametrize("kind", plots.KINDS)
def test_plot_command_every_kind(cli, tmp_path, kind):
    out = tmp_path / f"{kind}.png"
    code, _, err = cli("plot", "--kind", kind, "-o", out)
    assert code == 0, err
    assert f"wrote {out}" in err.replace("\n", "")
    img = _png(out)
    assert img.shape[0] > 300 and img.shape[1] > 300
    assert np.any(img < 235, axis=2).mean() > 0.02


def test_plot_command_svg_and_method(cli, tmp_path):
    out = tmp_path / "lb.svg"
    code, _, err = cli("plot", "-k", "leaderboard", "--method", "bt", "--ci", "sandwich", "-o", out)
    assert code == 0, err
    svg = out.read_text()
    assert "bt ratings with 95% sandwich intervals" in svg


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--kind", "pie"], "--kind must be one of"),
        (["-o", "x.jpg"], r"must end in \.png, \.svg or \.pdf"),
        (["--dpi", "5"], "--dpi must lie between 20 and 600"),
        (["--ci", "bogus"], "--ci must be"),
        (["--method", "nope"], "unknown --method"),
    ],
)
def test_plot_command_bad_input(cli, tmp_path, args, message):
    code, _, err = cli("plot", *args)
    assert code == 2
    assert re.search(message, err)


def test_plot_annotators_without_annotator_ids(cli, tmp_path):
    log = tmp_path / "votes.csv"
    log.write_text("model_a,model_b,winner\na,b,model_a\nb,c,model_b\nc,a,tie\na,b,model_b\n")
    code, _, err = cli("plot", log, "--kind", "annotators", "-o", tmp_path / "a.png")
    assert code == 2 and "annotator ids" in err


def test_plot_annotators_llmfao(cli, tmp_path, llmfao_path):
    out = tmp_path / "ann.svg"
    code, _, err = cli("plot", llmfao_path, "--kind", "annotators", "--method", "am-elo", "-o", out)
    assert code == 0, err
    svg = out.read_text()
    assert svg.count("flagged: ability") >= 4  # LLMFAO's workers 11, 15, 20, 70 and others


def test_svg_text_is_escaped(tmp_path):
    names = ["<b>bold</b>", "a&b", "x$y$z"]
    battles = simulate_battles([1050, 1000, 950], 900, models=names, seed=0)
    fit = get_rater("m-elo").fit(battles)
    svg = plots.figure_to_svg(plots.plot_leaderboard(fit, intervals(fit, "fisher")).figure)
    assert "<b>bold</b>" not in svg and "&lt;b&gt;bold&lt;/b&gt;" in svg
    assert "x$y$z" in svg  # not read as mathtext
    buf = io.StringIO(svg)
    assert buf.read(4) == "<svg"
