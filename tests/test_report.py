"""The one-file HTML report: its content (table = the rank payload, figures, annotator screening,
notes), that it is self-contained, and ``stablearena report`` end to end. The browser checks are
in test_report_browser.py."""

from __future__ import annotations

import re
from html import escape
from html.parser import HTMLParser

import pytest

from stablearena.data.datasets import EXAMPLE_SOURCE, example_arena
from stablearena.figures.report import build_report, method_text, template_environment
from stablearena.raters import get_rater


class Page(HTMLParser):
    """A small DOM summary: rows of each table (by class), figures, scripts, external links."""

    def __init__(self) -> None:
        super().__init__()
        self.table: str | None = None
        self.rows: dict[str, int] = {}
        self.figures: list[str] = []
        self.svgs = 0
        self.scripts = 0
        self.external: list[str] = []
        self.ids: list[str] = []
        self.in_tbody = False

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        if "id" in a and tag in ("section", "figure", "input", "div", "table"):
            self.ids.append(a["id"])
        if tag == "table":
            self.table = a.get("class", "")
        elif tag == "tbody":
            self.in_tbody = True
        elif tag == "tr" and self.in_tbody and self.table is not None:
            self.rows[self.table] = self.rows.get(self.table, 0) + 1
        elif tag == "figure":
            self.figures.append(a.get("data-figure", ""))
        elif tag == "svg":
            self.svgs += 1
        elif tag == "script":
            self.scripts += 1
        for key in ("src", "href"):
            value = a.get(key) or ""
            if value and not value.startswith(("#", "data:")):
                self.external.append(value)
        if tag == "link":
            self.external.append(a.get("href", "link"))

    def handle_endtag(self, tag):
        if tag == "tbody":
            self.in_tbody = False
        elif tag == "table":
            self.table = None


def parse(html: str) -> Page:
    page = Page()
    page.feed(html)
    return page


@pytest.fixture(scope="module")
def example():
    return example_arena().battles


@pytest.fixture(scope="module")
def report(example):
    fitted = get_rater("m-elo").fit(example)
    return build_report(
        fitted, example, source=EXAMPLE_SOURCE, simulated=True, ci="fisher", command="x y"
    )


def test_report_table_is_the_rank_payload(report):
    html = report.html()
    page = parse(html)
    assert page.rows["leaderboard"] == 12
    models = report.payload["models"]
    assert [e["model"] for e in models][:3] == ["aurora-70b", "basalt-34b", "cirrus-8x7b"]
    for e in models:  # every model's row carries its interval, rank interval and tier
        row = re.search(rf'data-model="{re.escape(e["model"])}">(.*?)</tr>', html, re.S).group(1)
        cells = re.findall(r"<td[^>]*>(.*?)</td>", row, re.S)
        assert f"{e['rating']:.1f}" in cells[2]
        assert f"{e['ci_low']:.1f}–{e['ci_high']:.1f}" in cells[3]
        ranks = (
            str(e["rank_low"])
            if e["rank_low"] == e["rank_high"]
            else f"{e['rank_low']}–{e['rank_high']}"
        )
        assert cells[4].strip() == ranks
        assert f">{e['tier']}<" in cells[5]
        assert cells[6].strip() == f"{e['battles']:,}"


def test_report_has_every_figure_and_is_self_contained(report):
    html = report.html()
    page = parse(html)
    assert page.figures == [
        "leaderboard",
        "winrate",
        "observed",
        "battles",
        "ties",
        "map",
        "annotators",
    ]
    assert page.svgs == 7
    assert page.scripts == 0
    assert page.external == []  # nothing fetched: no stylesheet, image, font or script URL
    assert "<style>" in html and "@import" not in html and "url(http" not in html
    assert len(page.ids) == len(set(page.ids))  # anchors unique
    svg_ids = re.findall(r"<svg[^>]*>.*?</svg>", html, re.S)
    all_ids = [i for s in svg_ids for i in re.findall(r'\bid="([^"]+)"', s)]
    assert len(all_ids) == len(set(all_ids))  # figures' ids do not collide on one page
    assert "Simulated data" in html


def test_report_annotator_section_lists_flagged_with_reasons(report, example):
    section = report.annotators
    assert section is not None and section["flagged"] == 5 and section["total"] == 40
    html = report.html()
    assert html.count('class="flagged-annotator"') == 5
    for row in section["rows"]:
        assert row["reason"].startswith("flagged: ability")
        assert escape(row["reason"], quote=False) in html
    assert {r["annotator"] for r in section["rows"]} >= {
        "annotator-38",
        "annotator-39",
        "annotator-40",
    }  # the three flippers
    # and it says where the abilities come from, since the leaderboard is m-elo's
    assert any("am-ELO fit with default screening" in n for n in report.notes)


def test_report_notes_say_when_a_prior_was_needed():
    from stablearena import Battles

    # "a" never loses: its rating MLE is infinite, the fit uses its weak prior and must say so
    a = ["a", "a", "a", "b", "b", "c", "c"]
    b = ["b", "c", "b", "c", "c", "b", "a"]
    winner = ["model_a", "model_a", "model_a", "model_a", "model_b", "model_a", "model_b"]
    battles = Battles.from_arrays(a, b, winner, source="planted")
    with pytest.warns(Warning):
        fitted = get_rater("m-elo").fit(battles)
    assert fitted.notes
    rep = build_report(fitted, battles, source="planted", ci="fisher")
    html = rep.html()
    for note in fitted.notes:
        assert note in rep.notes
    assert re.search(r'<section id="notes">.*?<li>', html, re.S)
    assert "No warnings" not in html


def test_report_without_intervals(example):
    fitted = get_rater("m-elo").fit(example)
    rep = build_report(fitted, example, source=EXAMPLE_SOURCE, ci="none", kinds=("leaderboard",))
    html = rep.html()
    assert "ci" not in rep.payload
    assert "interval" not in re.search(r"<thead>(.*?)</thead>", html, re.S).group(1)
    assert "No intervals were computed" in html
    assert parse(html).rows["leaderboard"] == 12


def test_report_tie_model_notes_missing_win_probability_intervals(example):
    rk = get_rater("rao-kupper").fit(example)
    rep = build_report(rk, example, source=EXAMPLE_SOURCE, ci="fisher", kinds=("winrate", "ties"))
    assert [f.key for f in rep.figures] == ["winrate", "ties"]
    assert any("win-probability intervals are not shown" in n for n in rep.notes)
    assert "Rao–Kupper" in method_text(rep.payload)


def test_components_render_alone():
    """The dashboard imports the macros: a table from a bare payload renders on its own."""
    env = template_environment()
    tpl = env.from_string(
        '{% import "components.html.j2" as c %}{{ c.leaderboard_table(p, bars=True) }}'
    )
    payload = {
        "models": [
            {
                "rank": 1,
                "model": "x<y",
                "rating": 1010.0,
                "battles": 5,
                "ci_low": 1000.0,
                "ci_high": 1020.0,
                "rank_low": 1,
                "rank_high": 2,
                "displayed_rank": 1,
                "tier": 1,
            },
            {
                "rank": 2,
                "model": "z",
                "rating": 990.0,
                "battles": 5,
                "ci_low": 980.0,
                "ci_high": 1000.0,
                "rank_low": 1,
                "rank_high": 2,
                "displayed_rank": 1,
                "tier": 1,
            },
        ],
        "ci": {"level": 0.9},
    }
    html = tpl.render(p=payload)
    assert "x&lt;y" in html and "x<y" not in html  # names are escaped
    assert html.count('class="ci-bar"') == 2 and "90% interval" in html


# ---------------------------------------------------------------------------- the CLI
def test_report_command_example(cli, tmp_path):
    out = tmp_path / "r.html"
    code, _, err = cli("report", "-o", out, "--ci", "sandwich")
    assert code == 0, err
    assert "wrote" in err and "12 models" in err
    html = out.read_text()
    assert parse(html).rows["leaderboard"] == 12
    assert "95% sandwich intervals" in html
    assert "stablearena report --output" in html and "--ci sandwich" in html  # how to reproduce
    assert out.stat().st_size < 3_000_000


def test_report_command_bad_options(cli, tmp_path):
    code, _, err = cli(
        "report", "--ci", "fisher", "--cluster", "annotator", "-o", tmp_path / "r.html"
    )
    assert code == 2 and "--cluster applies to the bootstrap" in err
    code, _, err = cli("report", "--k-tie", "2", "-o", tmp_path / "r.html")
    assert code == 2 and "does not apply to --method m-elo" in err


def test_report_command_llmfao_am_elo_annotators(cli, tmp_path, llmfao_path):
    """Acceptance: `stablearena report llmfao.csv --method am-elo` has the annotator section with
    the flagged annotators and their reasons."""
    out = tmp_path / "llmfao.html"
    code, _, err = cli("report", llmfao_path, "--method", "am-elo", "-o", out)
    assert code == 0, err
    html = out.read_text()
    fitted = get_rater("am-elo").fit(
        __import__("stablearena.data.io").data.io.read_battles(llmfao_path)
    )
    flagged = fitted.annotator_table().query("flagged")
    assert len(flagged) >= 4
    assert 'id="annotators"' in html
    assert html.count('class="flagged-annotator"') == len(flagged)
    for name, reason in zip(flagged["annotator"], flagged["reason"], strict=True):
        assert f'data-annotator="{name}"' in html and escape(reason, quote=False) in html
    for worker in ("15", "20", "70"):  # the workers with many records below 0 (README)
        assert f'data-annotator="{worker}"' in html
    assert parse(html).rows["leaderboard"] == 59


def test_report_command_chatbot_arena(cli, tmp_path, chatbot_arena_path):
    out = tmp_path / "cba.html"
    code, _, err = cli(
        "report", chatbot_arena_path, "--ci", "bootstrap", "--rounds", "50", "-o", out
    )
    assert code == 0, err
    html = out.read_text()
    page = parse(html)
    assert page.rows["leaderboard"] == 129
    assert page.svgs == 6  # no annotators in pair counts
    assert "annotators" not in page.figures
    assert out.stat().st_size < 3_000_000
    assert "50 rounds, resampling battles" in html
