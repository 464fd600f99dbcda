"""The HTML report as a person sees it: loaded in Debian's headless Chromium through selenium.

Checks the DOM (one table row per model, every figure present and drawn at a readable size),
that the browser logs no error, that nothing but the file itself is requested (the report opens
offline), that the CSS-only "show at full size" toggle works, and saves screenshots under the
test's tmp dir. The browser is the system one (tests/chromium.py: /usr/bin/chromium with
/usr/bin/chromedriver, no download; .ci/run installs it).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from chromium import HEIGHT, WIDTH, errors, requested, screenshot, wait_loaded

from stablearena.figures.report import REPORT_FIGURES


def load(driver, path: Path) -> None:
    driver.get_log("browser")  # drop anything left from an earlier page
    driver.get_log("performance")
    driver.set_window_size(WIDTH, HEIGHT)
    driver.get(path.resolve().as_uri())
    wait_loaded(driver)


def dom(driver) -> dict:
    return driver.execute_script(
        """
        const rows = document.querySelectorAll('table.leaderboard tbody tr');
        const figs = [...document.querySelectorAll('figure')].map(f => {
          const svg = f.querySelector('svg');
          const r = svg.getBoundingClientRect();
          return {key: f.dataset.figure, w: r.width, h: r.height,
                  natural: svg.width.baseVal.value, texts: svg.querySelectorAll('text').length};
        });
        const cell = document.querySelector('table.leaderboard td.model');
        return {rows: rows.length, figures: figs,
                font: parseFloat(getComputedStyle(cell).fontSize),
                flagged: document.querySelectorAll('tr.flagged-annotator').length,
                title: document.title};
        """
    )


@pytest.fixture(scope="module")
def example_report(tmp_path_factory):
    from stablearena.cli import main

    out = tmp_path_factory.mktemp("report") / "example.html"
    main(["report", "-o", str(out)])
    return out


def test_example_report_renders_offline_without_errors(browser, example_report, tmp_path):
    load(browser, example_report)
    info = dom(browser)
    assert info["rows"] == 12
    assert [f["key"] for f in info["figures"]] == list(REPORT_FIGURES)
    for f in info["figures"]:
        assert f["w"] > 250 and f["h"] > 150, f  # drawn, at a size one can read
        assert f["texts"] > 10, f  # labels are text, not blank
    assert info["flagged"] == 5
    assert errors(browser) == []
    urls = requested(browser)
    assert urls and all(u.startswith(("file://", "data:")) for u in urls), urls
    screenshot(browser, tmp_path / "example-top.png")
    screenshot(browser, tmp_path / "example-full.png", full=True)


def test_full_size_toggle_needs_no_script(browser, tmp_path):
    from stablearena.cli import main
    from stablearena.data.simulate import simulate_battles

    out = tmp_path / "big.html"
    # 59 models: the win-rate matrix is wider than the page and is fitted to it
    battles = simulate_battles(np.linspace(800, 1200, 59), 20_000, seed=0)
    csv = tmp_path / "votes.csv"
    battles.to_frame().to_csv(csv, index=False)
    main(["report", str(csv), "-o", str(out)])
    load(browser, out)
    before = {f["key"]: f for f in dom(browser)["figures"]}["winrate"]
    assert before["w"] < before["natural"]  # fitted to the page
    browser.find_element("css selector", "label[for=zoom-winrate]").click()
    after = {f["key"]: f for f in dom(browser)["figures"]}["winrate"]
    assert abs(after["w"] - after["natural"]) < 1.0  # now at full size
    assert errors(browser) == []


def test_llmfao_am_elo_report_shows_flagged_annotators(browser, tmp_path, llmfao_path):
    from selenium.webdriver.common.by import By

    from stablearena.cli import main

    out = tmp_path / "llmfao.html"
    main(["report", str(llmfao_path), "--method", "am-elo", "-o", str(out)])
    load(browser, out)
    info = dom(browser)
    assert info["rows"] == 59
    assert info["flagged"] >= 4
    section = browser.find_element(By.ID, "annotators")
    browser.execute_script("arguments[0].scrollIntoView()", section)
    rows = section.find_elements(By.CSS_SELECTOR, "tr.flagged-annotator")
    assert all(r.is_displayed() for r in rows)
    reasons = [r.find_element(By.CSS_SELECTOR, "td.reason").text for r in rows]
    assert all(t.startswith("flagged: ability") for t in reasons)
    assert "15" in [r.get_attribute("data-annotator") for r in rows]
    assert errors(browser) == []
    screenshot(browser, tmp_path / "llmfao-annotators.png")


def test_chatbot_arena_report_at_1280px_shows_table_and_interval_chart(
    browser, tmp_path, chatbot_arena_path
):
    """Acceptance (browser part): at 1280 px the leaderboard table and the interval chart sit side
    by side in the first screen of the leaderboard, at legible sizes."""
    from selenium.webdriver.common.by import By

    from stablearena.cli import main

    out = tmp_path / "cba.html"
    main(
        ["report", str(chatbot_arena_path), "--ci", "bootstrap", "--rounds", "100", "-o", str(out)]
    )
    assert out.stat().st_size <= 3_000_000
    load(browser, out)
    info = dom(browser)
    assert info["rows"] == 129
    assert info["font"] >= 12.0
    board = {f["key"]: f for f in info["figures"]}["leaderboard"]
    assert board["w"] / board["natural"] > 0.9  # the chart is drawn at (nearly) its own size
    browser.execute_script("document.getElementById('leaderboard').scrollIntoView()")
    table = browser.find_element(By.CSS_SELECTOR, "table.leaderboard")
    chart = browser.find_element(By.CSS_SELECTOR, "#fig-leaderboard svg")
    t, c = table.rect, chart.rect
    view = browser.execute_script("return [window.scrollY, window.innerHeight]")
    top, bottom = view[0], view[0] + view[1]
    assert t["x"] + t["width"] <= c["x"]  # side by side, not overlapping
    assert top <= t["y"] < bottom - 300 and top <= c["y"] < bottom - 300  # both in view
    first = table.find_element(By.CSS_SELECTOR, "tbody tr td.model")
    assert first.text == "chatgpt-4o-latest" and first.is_displayed()
    assert errors(browser) == []
    assert all(u.startswith(("file://", "data:")) for u in requested(browser))
    screenshot(browser, tmp_path / "chatbot-arena-1280.png")


def test_style_controlled_report_shows_the_gamma_table_within_the_page(browser, tmp_path):
    """``report --style`` at 1280 px: the Style section's γ table (one row per feature) and the
    leaderboard's raw-rank columns are drawn, nothing overflows the page width, no errors."""
    import json

    from test_style_features import _records

    from stablearena.cli import main

    _, recs = _records()
    log = tmp_path / "arena.jsonl"
    log.write_text("".join(json.dumps(r) + "\n" for r in recs))
    out = tmp_path / "style.html"
    main(["report", str(log), "--style", "-o", str(out)])
    load(browser, out)
    info = browser.execute_script(
        """
        const t = document.querySelector('#style table.style-coefficients');
        const r = t.getBoundingClientRect();
        const heads = [...document.querySelectorAll('table.leaderboard thead th')]
          .map(h => h.textContent.trim());
        return {features: t.querySelectorAll('tbody tr').length, right: r.right, width: r.width,
                page: document.documentElement.scrollWidth, view: window.innerWidth, heads};
        """
    )
    assert info["features"] == 4
    assert info["width"] > 300 and info["right"] <= info["view"] + 1, info
    assert info["page"] <= info["view"], info  # no horizontal scrolling
    assert "raw rank" in info["heads"] and "shift" in info["heads"]
    assert errors(browser) == []
    screenshot(browser, tmp_path / "style-full.png", full=True)
