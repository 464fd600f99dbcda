"""The /arena page renders answers as Markdown while they stream (headless Chromium,
tests/chromium.py): headings, lists, tables, highlighted code and KaTeX math (as MathML) from the
``demo-markdown`` model, while ``demo-hostile``'s HTML, javascript:/data: links, remote images,
SVG and unterminated fences never become live markup. At phone width the vote bar stays on screen
beside long answers and the keyboard hints are hidden on touch screens. With
STABLEARENA_DOCS_SCREENSHOTS=docs the screenshots of a rendered battle at 1280 and 390 px are
written to docs/arena-1280.png and docs/arena-390.png."""

from __future__ import annotations

import re
import time

import httpx
import pytest
from arena_process import page_server
from chromium import errors, requested, wait_loaded
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from test_arena_browser import save_docs, state, wait_for

from stablearena.judging.endpoints.demo_server import DemoServer, tokens

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")

#: Each hostile construct would set this global if it ran.
FLAG = "__pwned"

#: The page's hostile-markup audit, run in the browser: everything that would be live.
AUDIT = """
const answers = [...document.querySelectorAll('.answer')];
const inside = answers.flatMap(a => [a, ...a.querySelectorAll('*')]);
const all = [...document.querySelectorAll('*')];
const onAttrs = all.filter(e => [...e.attributes].some(a => /^on/i.test(a.name)))
  .map(e => e.outerHTML.slice(0, 80));
// the page's own pictures (the image a visitor attaches, shown above the battle) are not the
// answers'; every other image counts
const imgs = [...document.images].filter(i => !i.closest('#image-preview, #battle-image'))
  .map(i => i.getAttribute('src'))
  .filter(s => !s || new URL(s, location.href).origin !== location.origin);
const hrefs = [...document.querySelectorAll('[href]')].map(e => e.getAttribute('href'))
  .filter(h => !/^(https?:|mailto:|#|\\/)/i.test(h.trim()));
const live = inside.filter(e => /^(script|iframe|img|svg|style|object|embed|form|input)$/i
  .test(e.tagName)).map(e => e.tagName);
inside.forEach(e => ['mouseover', 'focus', 'load', 'error'].forEach(
  t => e.dispatchEvent(new Event(t))));
return {flag: window.__pwned === undefined ? null : String(window.__pwned),
        onAttrs, imgs, hrefs, live, styled: inside.filter(e => e.hasAttribute('style')).length,
        scripts: [...document.scripts].map(s => s.getAttribute('src')),
        bodyShown: getComputedStyle(document.body).display !== 'none'};
"""


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("arena-markdown")
    with DemoServer(seed=0) as demo:
        with page_server(
            tmp,
            demo.base_url,
            ("demo-markdown", "demo-hostile"),
            0.01,
            "[arena]\nmin_records = 0\n\n",
        ) as server:
            yield server


def battle(driver, url: str, width: int, height: int, audits: list | None = None) -> dict:
    """Open the page at ``width``, send a prompt, audit while streaming; the final state."""
    driver.set_window_size(width, height)
    driver.get(url + "/arena")
    wait_loaded(driver)
    for _ in range(200):
        if driver.execute_script("return document.body.dataset.ready || null"):
            break
        time.sleep(0.02)
    driver.find_element("id", "prompt").send_keys("Explain Euler's identity.")
    driver.find_element("id", "send").click()
    while audits is not None and state(driver)["state"] is None:
        audits.append(driver.execute_script(AUDIT))
        time.sleep(0.05)
    done = wait_for(driver, lambda s: s["state"] in ("complete", "failed"))
    for _ in range(400):  # KaTeX and the highlighted languages load on first use
        if driver.execute_script("return document.body.dataset.loading") == "0":
            break
        time.sleep(0.02)
    return done


def markdown_side(driver) -> str:
    return driver.execute_script(
        "return document.getElementById('answer-a').textContent.includes('Euler') ? 'a' : 'b'"
    )


def clean(audit: dict) -> None:
    assert audit["flag"] is None, audit
    assert audit["onAttrs"] == [] and audit["imgs"] == [] and audit["hrefs"] == [], audit
    assert audit["live"] == [] and audit["styled"] == 0 and audit["bodyShown"], audit
    assert all(s is None or s.startswith("/arena/") for s in audit["scripts"]), audit


def test_markdown_renders_and_hostile_html_stays_text(served, browser, tmp_path):
    url = served.url
    page = httpx.get(url + "/arena")
    csp = page.headers["content-security-policy"]
    script_src = re.search(r"script-src ([^;]*)", csp).group(1)
    assert script_src.strip() == "'self'" and "unsafe-eval" not in csp
    browser.get_log("performance")
    audits: list[dict] = []
    s = battle(browser, url, 1280, 900, audits)
    assert s["state"] == "complete", s
    assert len(audits) >= 3  # audited while the answers streamed in
    for audit in audits:
        clean(audit)
    md = markdown_side(browser)
    hostile = "b" if md == "a" else "a"
    got = browser.execute_script(
        """
        const a = document.getElementById('answer-' + arguments[0]);
        const code = a.querySelector('pre code.language-python');
        return {h2: a.querySelector('h2') && a.querySelector('h2').textContent,
                strong: [...a.querySelectorAll('strong')].map(e => e.textContent),
                items: a.querySelectorAll('ul > li').length,
                mono: code && getComputedStyle(code).fontFamily,
                keywords: code ? [...code.querySelectorAll('.hljs-keyword')]
                  .map(e => e.textContent) : [],
                strings: code ? code.querySelectorAll('.hljs-string').length : 0,
                cells: [...a.querySelectorAll('table th, table td')].map(e => e.textContent),
                right: a.querySelector('table td:nth-child(2)') &&
                  getComputedStyle(a.querySelector('table td:nth-child(2)')).textAlign,
                inlineMath: a.querySelectorAll('p math:not([display=block]), li math').length,
                blockMath: a.querySelectorAll('math[display=block]').length,
                mathText: [...a.querySelectorAll('math')].map(m => m.textContent).join(' '),
                link: a.querySelector('a') && a.querySelector('a').getAttribute('href'),
                dollars: a.textContent.includes('$')};
        """,
        md,
    )
    assert got["h2"] == "Euler's identity" and got["strong"] == ["short"]
    assert got["items"] == 3
    assert "monospace" in got["mono"]
    assert {"import", "def", "return"} <= set(got["keywords"]) and got["strings"] >= 1
    assert got["cells"] == ["constant", "value", "e", "2.718", "pi", "3.142"]
    assert got["right"] == "right"
    assert got["inlineMath"] >= 5 and got["blockMath"] == 1
    assert "π" in got["mathText"] and "∑" in got["mathText"]
    assert not got["dollars"]  # every $…$ became math
    assert got["link"] == "https://docs.python.org/3/library/cmath.html"
    final = browser.execute_script(AUDIT)
    clean(final)
    shown = browser.execute_script(
        "return document.getElementById('answer-' + arguments[0]).textContent", hostile
    )
    # the hostile HTML is shown as the text it is, the remote image as a link, nothing live
    assert "<script>window.__pwned = 'script'</script>" in shown
    assert "<iframe" in shown and "onerror" in shown and "[image: tracker]" in shown
    assert "fence that never closes" in shown
    urls = [u for u in requested(browser) if not u.startswith("data:")]
    assert urls and all(u.startswith(url + "/") for u in urls), urls
    assert not errors(browser)
    from stablearena.judging.endpoints.demo import FORMATTED_REPLIES

    n = len(tokens(FORMATTED_REPLIES["demo-markdown"])) + len(
        tokens(FORMATTED_REPLIES["demo-hostile"])
    )
    cost = browser.execute_script("return window.arenaRenderCost")
    ms = cost["a"]["ms"] + cost["b"]["ms"]
    calls = cost["a"]["calls"] + cost["b"]["calls"]
    print(
        f"render: {ms:.1f} ms in {calls} renders for {n} streamed tokens "
        f"({1000 * ms / n:.0f} us per token)"
    )
    save_docs(browser, tmp_path / "arena-1280.png", "arena-1280.png", 1280)


def test_phone_votes_stay_reachable_and_hints_hide_on_touch(served, browser, tmp_path):
    browser.execute_cdp_cmd(
        "Emulation.setTouchEmulationEnabled", {"enabled": True, "maxTouchPoints": 5}
    )
    try:
        s = battle(browser, served.url, 390, 844)
        assert s["state"] == "complete", s
        assert "keys" not in s["status"]
        got = browser.execute_script(
            """
            const md = document.getElementById('answer-a').textContent.includes('Euler')
              ? 'answer-a' : 'answer-b';
            const a = document.getElementById(md);
            const pre = a.querySelector('pre');
            pre.scrollIntoView({block: 'start'});
            const v = document.querySelector('.votes').getBoundingClientRect();
            const kbd = [...document.querySelectorAll('kbd')].map(
              k => getComputedStyle(k).display);
            return {scroll: document.documentElement.scrollWidth, inner: window.innerWidth,
                    height: window.innerHeight, page: document.documentElement.scrollHeight,
                    top: v.top, bottom: v.bottom, kbd,
                    touch: matchMedia('(pointer: coarse)').matches,
                    under: [...document.querySelectorAll('button.vote')].every(b => {
                      const r = b.getBoundingClientRect();
                      return document.elementFromPoint(r.x + r.width / 2, r.y + r.height / 2)
                        .closest('button.vote') === b; })};
            """
        )
        assert got["touch"] and set(got["kbd"]) == {"none"}
        assert got["scroll"] <= got["inner"]  # no sideways scrolling (code and tables scroll)
        assert got["page"] > 1.5 * got["height"]  # long answers: the bar would be off screen
        assert 0 <= got["top"] and got["bottom"] <= got["height"] and got["under"], got
        browser.execute_script(
            "for (const h of document.querySelectorAll('.answer h2')) h.scrollIntoView()"
        )
        save_docs(browser, tmp_path / "arena-390.png", "arena-390.png", 390)
    finally:
        browser.execute_cdp_cmd("Emulation.setTouchEmulationEnabled", {"enabled": False})
        browser.set_window_size(1280, 900)


def luminance(rgb: str) -> float:
    def channel(v: float) -> float:
        v /= 255
        return v / 12.92 if v <= 0.03928 else ((v + 0.055) / 1.055) ** 2.4

    r, g, b = (float(x) for x in re.findall(r"[\d.]+", rgb)[:3])
    return 0.2126 * channel(r) + 0.7152 * channel(g) + 0.0722 * channel(b)


def test_disabled_votes_look_disabled_but_stay_legible(served, browser):
    browser.set_window_size(390, 844)
    browser.get(served.url + "/arena")
    wait_loaded(browser)
    got = browser.execute_script(
        """
        const b = document.querySelector('button.vote');
        const st = getComputedStyle(b);
        const send = getComputedStyle(document.getElementById('send'));
        return {disabled: b.disabled, color: st.color, bg: st.backgroundColor,
                border: st.borderTopStyle, opacity: st.opacity, cursor: st.cursor,
                sendBorder: send.borderTopStyle, kbd: getComputedStyle(b.querySelector('kbd')).display,
                ids: ['prompt', 'send', 'answer-a', 'answer-b'].every(
                  i => document.getElementById(i)),
                outcomes: [...document.querySelectorAll('button.vote[data-outcome]')].map(
                  v => v.dataset.outcome)};
        """
    )
    assert got["ids"] and got["outcomes"] == ["model_a", "model_b", "tie", "both_bad"]
    assert got["kbd"] != "none"  # no touch screen: the keyboard hints show
    assert got["disabled"] and got["cursor"] == "not-allowed"
    assert got["border"] == "dashed" and got["sendBorder"] == "solid"  # looks different
    assert float(got["opacity"]) == 1.0
    light, dark = sorted((luminance(got["color"]), luminance(got["bg"])), reverse=True)
    assert (light + 0.05) / (dark + 0.05) >= 4.5  # WCAG AA contrast for the label
    browser.set_window_size(1280, 900)


#: Stream ``text`` token by token through the page's renderer, painting after every token (no
#: frame coalescing: the worst case), both ways: the completed blocks once + the open block
#: again (what the page does), and the whole answer again each time.
BENCH = """
const [text, rounds] = arguments, M = window.arenaMarkdown;
const toks = text.match(/\\S+\\s*/g);
function incremental() {
  let acc = '', cut = 0, html = '';
  for (const t of toks) {
    acc += t;
    const c = M.settled(acc, cut);
    if (c > cut) { html += M.render(acc.slice(cut, c)); cut = c; }
    M.render(acc.slice(cut));
  }
}
function full() { let acc = ''; for (const t of toks) { acc += t; M.render(acc); } }
const out = {tokens: toks.length, chars: text.length};
let t0 = performance.now(), html;
for (let k = 0; k < 20; k++) { html = M.md.render(text); }
out.markdown = (performance.now() - t0) / 20; t0 = performance.now();
for (let k = 0; k < 20; k++) { DOMPurify.sanitize(html, {USE_PROFILES: {html: true, mathMl: true}}); }
out.purify = (performance.now() - t0) / 20;
for (const [name, f] of [['incremental', incremental], ['full', full]]) {
  f();  // warm up
  const t0 = performance.now();
  for (let k = 0; k < rounds; k++) { f(); }
  out[name] = (performance.now() - t0) / rounds;
}
return out;
"""


@pytest.mark.slow
def test_render_cost_per_streamed_token(served, browser):
    """The figures in docs/guides/arena-page.md (run with -m slow -s)."""
    from stablearena.judging.endpoints.demo import FORMATTED_REPLIES

    battle(browser, served.url, 1280, 900)  # KaTeX and Python highlighting loaded
    one = FORMATTED_REPLIES["demo-markdown"]
    for copies, rounds in ((1, 5), (4, 1)):
        got = browser.execute_script(BENCH, "\n".join([one] * copies), rounds)
        print(
            f"{got['tokens']} tokens ({got['chars']} chars): incremental {got['incremental']:.1f} ms"
            f" ({1000 * got['incremental'] / got['tokens']:.0f} us/token), full re-render "
            f"{got['full']:.1f} ms ({1000 * got['full'] / got['tokens']:.0f} us/token); one "
            f"render of it: markdown-it {got['markdown']:.2f} ms, DOMPurify {got['purify']:.2f} ms"
        )
        assert got["incremental"] < got["full"] or copies == 1


#: Pieces of hostile answers and of the Markdown around them, joined at random by the fuzz test.
PIECES = [
    "<script>window.__pwned='s'</script>",
    "<img src=x onerror=\"window.__pwned='i'\">",
    "<svg onload=\"window.__pwned='v'\">",
    '<iframe src="javascript:window.__pwned=1">',
    '<a href="javascript:window.__pwned=1">a</a>',
    "[l](javascript:window.__pwned=1)",
    "[d](data:text/html,<script>x</script>)",
    "![i](http://elsewhere.invalid/p.png)",
    "![j](//elsewhere.invalid/p.png)",
    '<details open ontoggle="window.__pwned=1">',
    "<style>*{display:none}</style>",
    '<div style="position:fixed;inset:0">',
    "&lt;b&gt;",
    "&#x3C;script&#x3E;",
    "$\\href{javascript:window.__pwned=1}{x}$",
    "$$\\url{javascript:x}$$",
    "\\(",
    "\\)",
    "\\[",
    "\\]",
    "$",
    "$$",
    "```",
    "```html\n",
    "~~~",
    "\n",
    "\n\n",
    "    ",
    "- ",
    "1. ",
    "> ",
    "| a | b |\n|---|---|\n",
    "**",
    "_",
    "`",
    "# ",
    "x",
    "e^{i\\pi}",
    "\\frac{1}{2}",
    "<",
    ">",
    '"',
    "'",
    "=",
    "javascript:",
    "on",
    "src=",
    "href=",
]

FUZZ = """
const [pieces, cuts] = arguments, M = window.arenaMarkdown;
const text = pieces.join(''), el = document.getElementById('answer-a');
const done = document.createElement('div'), tail = document.createElement('div');
el.replaceChildren(done, tail);
let cut = 0;
const audits = [];
for (const end of [...cuts.filter(c => c < text.length).sort((a, b) => a - b), text.length]) {
  const acc = text.slice(0, end), c = M.settled(acc, cut);
  if (c > cut) { done.insertAdjacentHTML('beforeend', M.render(acc.slice(cut, c))); cut = c; }
  tail.innerHTML = M.render(acc.slice(cut));
  audits.push((new Function(arguments[2]))());
}
el.innerHTML = M.render(text);
audits.push((new Function(arguments[2]))());
return audits;
"""


@pytest.fixture(scope="module")
def fuzz_page(served, browser):
    battle(browser, served.url, 1280, 900)  # KaTeX and Python highlighting loaded
    return browser


@settings(
    max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    pieces=st.lists(st.sampled_from(PIECES), min_size=1, max_size=25),
    cuts=st.lists(st.integers(0, 400), max_size=6),
)
def test_fuzz_no_answer_becomes_live_markup_while_streaming(fuzz_page, pieces, cuts):
    """Random answers of hostile and Markdown pieces, streamed in random cuts: after every
    render nothing is live (no flag set, no on* attribute, no foreign image, no unsafe href)."""
    for audit in fuzz_page.execute_script(FUZZ, pieces, cuts, AUDIT):
        clean(audit)
