"""An image battle on /arena in headless Chromium (issue 42 item 4), at 390 and 1280 px: a
``serve`` process whose two models take images (``vision = true``) on the demo server process,
which decodes every image part it receives. The visitor attaches a PNG carrying a text chunk
with a location, sends a prompt; both models received the cleaned image (the file the arena
stored and exports, with no metadata left) and say what they saw; the image shows above the
conversation; nothing covers the composer or the votes (tests/test_arena_layout_browser.py's
geometry) and the page does not scroll sideways. A file that is not an image is refused with
the reason, the prompt and the attachment kept."""

from __future__ import annotations

import hashlib
import io
import zipfile

import httpx
import pytest
from arena_process import ServerProcess
from chromium import wait_loaded
from test_arena_browser import wait_for
from test_arena_layout_browser import GEOMETRY
from test_arena_vision import png

from stablearena.judging.endpoints.demo_server import DemoServer

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")

MODELS = ("demo-ace", "demo-wild")


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("arena-vision")
    with DemoServer(seed=0) as demo:
        toml = tmp / "arena.toml"
        toml.write_text(
            "[arena]\nmin_records = 0\n\n"
            + "".join(
                f'[[models]]\nname = "{m}"\nbase_url = "{demo.base_url}"\n'
                f'model = "{m}+vision"\nvision = true\n\n'
                for m in MODELS
            )
        )
        server = ServerProcess(f"sqlite:///{tmp / 'arena.db'}", "--config", str(toml), cwd=tmp)
        server.start()
        try:
            yield demo, server, tmp
        finally:
            server.stop()


def images_seen(demo: DemoServer) -> dict[str, dict]:
    return {k.split("+")[0]: v for k, v in demo.stats().items() if k.endswith("+vision")}


SHOWN = """
const img = document.getElementById('battle-image-img'), fig = document.getElementById('battle-image');
const r = fig.getBoundingClientRect();
return {hidden: fig.hidden, natural: [img.naturalWidth, img.naturalHeight], width: r.width,
        attach: getComputedStyle(document.getElementById('attach')).display,
        status: document.getElementById('status').textContent,
        prompt: document.getElementById('prompt').value,
        preview: !document.getElementById('image-preview').hidden};
"""


@pytest.mark.parametrize("width", [390, 1280])
def test_an_image_battle_in_the_browser(served, browser, width):
    demo, server, tmp = served
    photo = tmp / f"holiday-{width}.png"
    photo.write_bytes(png(64, 48, {"Comment": "our flat, 52.5200N 13.4050E"}))
    before = {m: v["image_requests"] for m, v in images_seen(demo).items()}
    browser.set_window_size(width, 800)
    try:
        browser.get(server.url + "/arena")
        wait_loaded(browser)
        browser.find_element("id", "image").send_keys(str(photo))
        browser.find_element("id", "prompt").send_keys("What is in this picture?")
        wait_for(browser, lambda s: browser.execute_script(SHOWN)["preview"], 10)
        before_send = browser.execute_script(GEOMETRY)
        assert before_send["covered"] == [] and before_send["overlaps"] == [], before_send
        assert before_send["scroll"][0] <= before_send["scroll"][1], before_send
        browser.find_element("id", "send").click()
        done = wait_for(browser, lambda s: s["state"] in ("complete", "failed"))
        assert done["state"] == "complete", done
        for side in ("a", "b"):
            assert done[side].startswith("I see a 64×48 PNG image."), done
        shown = browser.execute_script(SHOWN)
        assert not shown["hidden"] and shown["natural"] == [64, 48], shown
        assert shown["attach"] == "none" and not shown["preview"], shown  # first prompt only
        assert 0 < shown["width"] <= width
        got = browser.execute_script(GEOMETRY)
        assert got["value"] == "" and got["covered"] == [] and got["overlaps"] == [], got
        assert got["scroll"][0] <= got["scroll"][1], got
        # what both models received is the file the arena stored and exports: no metadata
        seen = images_seen(demo)
        key = httpx.get(
            server.url + "/v1/export/images",
            headers={"Authorization": f"Bearer {server.admin_key}"},
        )
        files = {
            n.split("/")[1].split(".")[0]: zipfile.ZipFile(io.BytesIO(key.content)).read(n)
            for n in zipfile.ZipFile(io.BytesIO(key.content)).namelist()
        }
        for m in MODELS:
            assert seen[m]["image_requests"] == before.get(m, 0) + 1
            (img,) = seen[m]["last_images"]
            assert img["metadata"] == [] and img["format"] == "PNG", img
            assert img["sha256"] in files
            assert hashlib.sha256(files[img["sha256"]]).hexdigest() == img["sha256"]
            assert b"52.5200N" not in files[img["sha256"]]
    finally:
        browser.set_window_size(1280, 900)


def test_a_file_that_is_not_an_image_is_refused_on_the_page(served, browser):
    demo, server, tmp = served
    fake = tmp / "cat.png"
    fake.write_bytes(b"<svg xmlns='http://www.w3.org/2000/svg'></svg>\n")
    calls = sum(v["requests"] for v in images_seen(demo).values())
    browser.set_window_size(1280, 900)
    browser.get(server.url + "/arena")
    wait_loaded(browser)
    browser.find_element("id", "image").send_keys(str(fake))
    browser.find_element("id", "prompt").send_keys("Describe it.")
    wait_for(browser, lambda s: browser.execute_script(SHOWN)["preview"], 10)
    browser.find_element("id", "send").click()
    s = wait_for(browser, lambda s: "not a PNG, JPEG, WebP or GIF" in s["status"])
    assert s["battle"] is None
    shown = browser.execute_script(SHOWN)
    assert shown["prompt"] == "Describe it." and shown["preview"], shown  # kept for a retry
    assert sum(v["requests"] for v in images_seen(demo).values()) == calls  # no model called
