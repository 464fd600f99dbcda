"""Vision battles (issue 42 item 4; docs/guides/arena-page.md, "Images"): an image attached to
a battle's first prompt is checked (type by its bytes, size, pixels), re-encoded without its
metadata, moderated with the prompt, sent to both models — only models with ``vision = true``
are drawn — as OpenAI-compatible ``image_url`` content parts at every turn, shown to the judges
that take images, stored once with the battle and exported in FastChat's vision schema
(conversations ``[text, [image_hash]]`` and a ``serve_images/`` folder); its category is
``vision``. In-process arena (FastAPI's TestClient) against the demo server process, which
decodes and records every image part it receives; the store on SQLite and PostgreSQL."""

from __future__ import annotations

import base64
import hashlib
import io
import json
import os
import re
import time
import uuid
import zipfile

import pytest
import sqlalchemy as sa
from fastapi.testclient import TestClient
from PIL import Image, PngImagePlugin
from test_service import db_url  # noqa: F401  (the fixture: SQLite and PostgreSQL)

from stablearena.judging.endpoints.demo_server import DemoServer
from stablearena.service import store
from stablearena.service.app import create_app
from stablearena.service.images import ImageRefused, clean_image, sniff
from stablearena.service.settings import Settings

MIB = 1024 * 1024


# ---------------------------------------------------------------------------------- images
def png(width: int = 64, height: int = 48, text: dict[str, str] | None = None) -> bytes:
    """A PNG of a gradient (``text``: tEXt chunks, e.g. a camera's or a location)."""
    im = Image.new("RGB", (width, height))
    im.putdata([(x * 4 % 256, y * 5 % 256, 128) for y in range(height) for x in range(width)])
    info = PngImagePlugin.PngInfo()
    for k, v in (text or {}).items():
        info.add_text(k, v)
    out = io.BytesIO()
    im.save(out, "PNG", pnginfo=info)
    return out.getvalue()


def noise(width: int, height: int) -> bytes:
    """A PNG of random pixels (it does not compress: 3 bytes a pixel)."""
    out = io.BytesIO()
    Image.frombytes("RGB", (width, height), os.urandom(width * height * 3)).save(out, "PNG")
    return out.getvalue()


def jpeg_with_exif(orientation: int = 6) -> bytes:
    """A 40×20 JPEG whose EXIF names a camera and a GPS position and says it is rotated."""
    im = Image.new("RGB", (40, 20), (200, 30, 30))
    exif = Image.Exif()
    exif[0x010F] = "SecretCam"  # Make
    exif[0x0112] = orientation  # Orientation: 6 = rotate 90° clockwise to view
    exif[0x8825] = {1: "N", 2: (52.0, 31.0, 12.0)}  # GPSInfo
    out = io.BytesIO()
    im.save(out, "JPEG", exif=exif, quality=95)
    return out.getvalue()


def url(data: bytes, media: str = "image/png") -> str:
    return f"data:{media};base64," + base64.b64encode(data).decode()


def test_the_type_is_read_from_the_bytes_not_the_declared_type():
    text = b"#!/bin/sh\necho this is not a picture\n"
    with pytest.raises(ImageRefused) as got:
        clean_image(url(text, "image/png"), 5 * MIB, 4096)  # declared PNG, is a script
    assert got.value.status == 415 and got.value.code == "unsupported_image"
    bmp = io.BytesIO()
    Image.new("RGB", (8, 8)).save(bmp, "BMP")  # a real image of a type not taken
    with pytest.raises(ImageRefused, match="not a PNG, JPEG, WebP or GIF"):
        clean_image(url(bmp.getvalue(), "image/png"), 5 * MIB, 4096)
    # a PNG declared as a JPEG is taken, as the PNG it is
    got = clean_image(url(png(), "image/jpeg"), 5 * MIB, 4096)
    assert got.media_type == "image/png" and sniff(got.data) == "image/png"
    assert [sniff(b) for b in (b"GIF89a....", b"RIFF\0\0\0\0WEBPVP8 ", b"\xff\xd8\xff\xe0")] == [
        "image/gif",
        "image/webp",
        "image/jpeg",
    ]


def test_too_large_too_many_pixels_and_broken_images_are_refused():
    big = png(600, 600)
    with pytest.raises(ImageRefused) as got:
        clean_image(url(big), len(big) - 1, 4096)
    assert got.value.status == 413 and "max_image_bytes" in got.value.message
    with pytest.raises(ImageRefused) as got:  # a base64 body far over the limit: not decoded
        clean_image("data:image/png;base64," + "A" * (4 * MIB), MIB, 4096)
    assert got.value.status == 413
    with pytest.raises(ImageRefused) as got:  # 5000 px wide, a few KB
        clean_image(url(png(5000, 2)), 5 * MIB, 4096)
    assert got.value.status == 422 and got.value.code == "image_too_big"
    assert "5000×2" in got.value.message
    with pytest.raises(ImageRefused) as got:  # the header of a PNG, its pixels cut off
        clean_image(url(png()[:60]), 5 * MIB, 4096)
    assert got.value.code == "invalid_image"
    with pytest.raises(ImageRefused, match="base64"):
        clean_image("data:image/png;base64,@@@@", 5 * MIB, 4096)
    with pytest.raises(ImageRefused, match="data: URL"):
        clean_image("https://example.com/cat.png", 5 * MIB, 4096)


def test_metadata_is_stripped_and_the_picture_kept():
    raw = png(text={"Comment": "taken at 52.5N 13.4E by Alice", "Software": "SecretCam"})
    assert b"Alice" in raw and b"tEXt" in raw
    got = clean_image(url(raw), 5 * MIB, 4096)
    assert b"Alice" not in got.data and b"SecretCam" not in got.data
    assert b"tEXt" not in got.data and b"iTXt" not in got.data and b"zTXt" not in got.data
    with Image.open(io.BytesIO(got.data)) as im, Image.open(io.BytesIO(raw)) as before:
        assert im.info == {} and im.tobytes() == before.convert("RGB").tobytes()
    assert got.hash == hashlib.sha256(got.data).hexdigest()
    # a JPEG's EXIF (camera, GPS) goes; its orientation is applied first
    raw = jpeg_with_exif()
    assert b"SecretCam" in raw
    got = clean_image(url(raw, "image/jpeg"), 5 * MIB, 4096)
    assert b"SecretCam" not in got.data and b"Exif" not in got.data
    assert got.media_type == "image/jpeg" and (got.width, got.height) == (20, 40)  # upright
    with Image.open(io.BytesIO(got.data)) as im:
        assert not im.getexif() and "exif" not in im.info
    # a GIF: its first frame as a PNG
    frames = [Image.new("P", (10, 10), c) for c in (1, 2)]
    gif = io.BytesIO()
    frames[0].save(gif, "GIF", save_all=True, append_images=frames[1:], comment=b"hello there")
    got = clean_image(url(gif.getvalue(), "image/gif"), 5 * MIB, 4096)
    assert got.media_type == "image/png" and b"hello there" not in got.data


# ---------------------------------------------------------------------------------- the arena
@pytest.fixture(scope="module")
def demo():
    with DemoServer(seed=0) as server:
        yield server


def settings(db: str, base_url: str, tag: str, models: dict[str, bool], **more) -> Settings:
    """An arena of demo models (name → takes images), each with its own request counter."""
    return Settings(
        db=db,
        fit_in_process=False,
        poll_seconds=0.05,
        seed=0,
        rate_limit=1e6,
        rate_burst=1_000_000,
        arena={"min_records": 0, "refit_votes": 1, "refit_seconds": 0.2},
        models=[
            {
                "name": m,
                "base_url": base_url,
                "model": f"{m}+id={tag}" + ("+vision" if v else ""),
                "vision": v,
            }
            for m, v in models.items()
        ],
        **more,
    )


def admin(tc: TestClient) -> dict[str, str]:
    return {"Authorization": f"Bearer {tc.app.state.admin_key}"}


def page(tc: TestClient) -> tuple[dict[str, str], str]:
    r = tc.get("/arena")
    assert r.status_code == 200
    csrf = re.search(r'name="csrf-token" content="([0-9a-f]+)"', r.text).group(1)
    return {"X-CSRF-Token": csrf}, r.text


def lines(r) -> list[dict]:
    assert r.status_code == 200, r.text
    return [json.loads(x) for x in r.text.splitlines()]


def answers(got: list[dict]) -> dict[str, str]:
    return {s: "".join(x["delta"] for x in got if x.get("side") == s) for s in "ab"}


def received(demo: DemoServer, tag: str) -> dict[str, dict]:
    """Per model of this test (its name without modes): what the demo server recorded."""
    return {k.split("+")[0]: v for k, v in demo.stats().items() if f"+id={tag}" in k}


def settle(tc: TestClient) -> None:
    deadline = time.time() + 60
    while time.time() < deadline and tc.app.state.holder.tasks:
        time.sleep(0.05)


def test_an_image_battle_end_to_end(db_url, demo, tmp_path):  # noqa: F811
    """Both models get the cleaned image at every turn; a vision judge sees it and a text-only
    judge sits the battle out; it is stored once, exported in FastChat's vision schema and has
    its own board tab."""
    tag = "e2e" + uuid.uuid4().hex[:8]  # own counters: both backends share the demo server
    cfg = settings(
        db_url,
        demo.base_url,
        tag,
        {"demo-ace": True, "demo-wild": True, "demo-solid": False},
        judges=[
            {
                "name": "judge-keen",
                "base_url": demo.base_url,
                "model": f"judge-keen+vision+id={tag}",
                "vision": True,
            },
            {"name": "judge-fair", "base_url": demo.base_url, "model": f"judge-fair+id={tag}"},
        ],
    )
    raw = png(text={"Comment": "at home, 52.5N 13.4E"})
    with TestClient(create_app(cfg)) as tc:
        csrf, html = page(tc)
        assert 'id="image"' in html  # two models take images: the page offers the control
        got = lines(
            tc.post(
                "/arena/battles",
                json={"prompt": "What is in this picture?", "image": url(raw)},
                headers=csrf,
            )
        )
        bid = got[0]["battle_id"]
        assert got[-1]["status"] == "complete", got[-1]
        for side, text in answers(got).items():
            assert text.startswith("I see a 64×48 PNG image."), (side, text)
        seen = received(demo, tag)
        assert "demo-solid" not in seen  # the text-only model was never drawn
        with tc.app.state.engine.connect() as conn:
            stored = conn.execute(sa.select(store.tables.images)).all()
            held = conn.execute(
                sa.select(
                    store.tables.held_battles.c.image_hash, store.tables.held_battles.c.category
                )
            ).all()
        assert len(stored) == 1 and held == [(stored[0].hash, "vision")]
        assert (
            b"52.5N" not in stored[0].data
            and stored[0].hash == hashlib.sha256(stored[0].data).hexdigest()
        )
        for name in ("demo-ace", "demo-wild"):
            (img,) = seen[name]["last_images"]
            assert img["message"] == 0 and img["role"] == "user" and img["format"] == "PNG"
            assert img["sha256"] == stored[0].hash and img["metadata"] == []
            assert seen[name]["last_messages"][0]["content"] == "What is in this picture?"
        # a follow-up: the image goes again with the first prompt, the new one is text
        got = lines(
            tc.post(
                f"/arena/battles/{bid}/turns", json={"prompt": "And its colours?"}, headers=csrf
            )
        )
        assert got[-1]["status"] == "complete"
        seen = received(demo, tag)
        for name in ("demo-ace", "demo-wild"):
            (img,) = seen[name]["last_images"]
            assert img["message"] == 0 and img["sha256"] == stored[0].hash
            assert seen[name]["image_requests"] == 2
            assert [m["role"] for m in seen[name]["last_messages"]] == ["user", "assistant", "user"]
        tc.app.state.holder.convs.clear()  # a worker that did not generate it reads the image
        tc.app.state.holder.images.clear()
        got = lines(tc.post(f"/arena/battles/{bid}/regenerate", headers=csrf))
        assert got[-1]["status"] == "complete"
        assert received(demo, tag)["demo-ace"]["last_images"][0]["sha256"] == stored[0].hash
        r = tc.post(f"/arena/battles/{bid}/vote", json={"outcome": "model_a"}, headers=csrf)
        assert r.status_code == 200, r.text
        settle(tc)
        seen = received(demo, tag)
        assert seen["judge-keen"]["image_requests"] == 2  # both orders, with the image
        assert seen["judge-keen"]["last_images"][0]["sha256"] == stored[0].hash
        assert "judge-fair" not in seen  # it cannot see the image: it does not judge
        # the export: FastChat's vision schema, and the images folder
        ex = tc.get("/v1/export", params={"texts": "true"}, headers=admin(tc))
        rows = [json.loads(x) for x in ex.text.splitlines()]
        assert {r["annotator"] if "annotator" in r else r["judge"] for r in rows} >= {"judge-keen"}
        for r in rows:
            assert r["category"] == "vision" and r["image_hash"] == stored[0].hash
            first = r["conversation_a"][0]
            assert first == {
                "role": "user",
                "content": ["What is in this picture?", [stored[0].hash]],
            }
            assert r["conversation_b"][0] == first and r["turn"] == 2
        zf = zipfile.ZipFile(io.BytesIO(tc.get("/v1/export/images", headers=admin(tc)).content))
        assert zf.namelist() == [f"serve_images/{stored[0].hash}.png"]
        assert zf.read(zf.namelist()[0]) == stored[0].data
        assert tc.get("/v1/export/images").status_code == 401
        # a text battle beside it: drawn among all three, category from the rules
        got = lines(tc.post("/arena/battles", json={"prompt": "What is 2+2?"}, headers=csrf))
        assert got[-1]["status"] == "complete"
        assert not any(t.startswith("I see") for t in answers(got).values())
        r = tc.post(
            f"/arena/battles/{got[0]['battle_id']}/vote", json={"outcome": "tie"}, headers=csrf
        )
        assert r.status_code == 200
        settle(tc)
        boards = tc.get("/v1/leaderboard", params={"by": "category"}).json()["boards"]
        assert "vision" in boards and "other" in boards


def test_bad_images_and_a_pair_without_vision_are_refused(tmp_path, demo):
    cfg = settings(
        f"sqlite:///{tmp_path / 'arena.db'}",
        demo.base_url,
        "bad",
        {"demo-ace": True, "demo-wild": False, "demo-solid": False},
        arena_page={"max_image_bytes": 20_000},
    )
    with TestClient(create_app(cfg)) as tc:
        csrf, html = page(tc)
        assert 'id="image"' not in html  # one vision model: no attach control
        r = tc.post(
            "/arena/battles", json={"prompt": "Describe it.", "image": url(png())}, headers=csrf
        )
        assert r.status_code == 503, r.text
        err = r.json()["error"]
        assert err["code"] == "no_vision_models" and err["field"] == "image"
        assert "1 model(s) that take images" in err["message"] and "needs two" in err["message"]
        assert received(demo, "bad") == {}  # no model was called
        # two vision models: the checks answer, and nothing is stored of a refused image
        tc.put(
            "/v1/admin/models/demo-wild/endpoint",
            json={"base_url": demo.base_url, "model": "demo-wild+id=bad+vision", "vision": True},
            headers=admin(tc),
        ).raise_for_status()
        for image, status, code in [
            (url(b"GIF87a" + b"\0" * 10, "image/gif"), 422, "invalid_image"),
            (url(b"not an image at all", "image/png"), 415, "unsupported_image"),
            (url(noise(100, 100)), 413, "image_too_large"),
            (url(png(5000, 2)), 422, "image_too_big"),
        ]:
            r = tc.post(
                "/arena/battles", json={"prompt": "Describe it.", "image": image}, headers=csrf
            )
            assert (r.status_code, r.json()["error"]["code"]) == (status, code), r.text
        # a body over even the image's allowance: 413 before it is read
        r = tc.post(
            "/arena/battles",
            content=json.dumps({"prompt": "x", "image": "data:image/png;base64," + "A" * 200_000}),
            headers={**csrf, "Content-Type": "application/json"},
        )
        assert r.status_code == 413 and r.json()["error"]["code"] == "too_large"
        assert received(demo, "bad") == {}
        with tc.app.state.engine.connect() as conn:
            assert (
                conn.execute(sa.select(sa.func.count()).select_from(store.tables.images)).scalar()
                == 0
            )
        got = lines(
            tc.post(
                "/arena/battles", json={"prompt": "Describe it.", "image": url(png())}, headers=csrf
            )
        )
        assert got[-1]["status"] == "complete"
        assert set(received(demo, "bad")) == {"demo-ace", "demo-wild"}


def test_the_image_is_moderated_with_the_prompt(tmp_path, demo):
    cfg = settings(
        f"sqlite:///{tmp_path / 'arena.db'}",
        demo.base_url,
        "mod",
        {"demo-ace": True, "demo-wild": True},
        moderation={
            "endpoint": {"base_url": demo.base_url, "model": "omni-moderation-latest+id=mod"}
        },
    )
    with TestClient(create_app(cfg)) as tc:
        csrf, _ = page(tc)
        r = tc.post(
            "/arena/battles",
            json={"prompt": "Something forbidden about this person", "image": url(png())},
            headers=csrf,
        )
        assert r.status_code == 422 and r.json()["error"]["code"] == "moderated"
        got = lines(
            tc.post(
                "/arena/battles", json={"prompt": "Describe it.", "image": url(png())}, headers=csrf
            )
        )
        assert got[-1]["status"] == "complete"
        mod = demo.stats()["moderations:omni-moderation-latest+id=mod"]
        assert mod["requests"] == 2 and mod["image_requests"] == 2  # text and image, together
    # the rules read text only: an image without a moderation endpoint passes unchecked, counted
    cfg = settings(
        f"sqlite:///{tmp_path / 'rules.db'}",
        demo.base_url,
        "rules",
        {"demo-ace": True, "demo-wild": True},
        moderation={"words": ["voldemort"]},
    )
    with TestClient(create_app(cfg)) as tc:
        csrf, _ = page(tc)
        got = lines(
            tc.post(
                "/arena/battles", json={"prompt": "Describe it.", "image": url(png())}, headers=csrf
            )
        )
        assert got[-1]["status"] == "complete"
        counts = tc.get("/v1/admin/duties", headers=admin(tc)).json()["moderation"]
        assert counts["by_source"] == {"unchecked": 1}, counts
