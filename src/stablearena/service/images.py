"""Images of vision battles (docs/guides/arena-page.md, "Images"): what a visitor attaches to
a battle's first prompt, checked and cleaned before any model, judge or table sees it.

:func:`clean_image` takes the page's ``data:`` URL and returns a :class:`CleanImage` or raises
:class:`ImageRefused` (with the HTTP status, code and message the route answers):

- the type is read from the file's first bytes (PNG, JPEG, WebP, GIF), never from the name or
  the type the browser declared;
- the size is at most ``[arena_page] max_image_bytes`` and each side at most
  ``max_image_side`` pixels (read from the header, before anything is decoded: a small file
  that decodes to billions of pixels is refused unread);
- the image is decoded and encoded again by Pillow from its pixels alone: EXIF (camera, GPS
  position, time), XMP, PNG text chunks, comments and colour profiles are dropped; the EXIF
  orientation is applied first, so the picture stands as it did. PNG, JPEG and WebP keep their
  format; a GIF becomes a PNG of its first frame.

The cleaned file is stored once per content (``images``, keyed by the SHA-256 of the stored
bytes) and referred to by each battle that carries it (``held_battles.image_hash``).
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import io
import re
from dataclasses import dataclass

from ..errors import InputError

__all__ = ["CleanImage", "ImageRefused", "MEDIA_TYPES", "clean_image", "sniff", "data_url"]

#: The accepted types, by the magic bytes that start their files.
MEDIA_TYPES = ("image/png", "image/jpeg", "image/webp", "image/gif")

_DATA_URL = re.compile(r"data:([\w.+-]+/[\w.+-]+)?(;[\w=.+-]+)*;base64,", re.ASCII)


class ImageRefused(InputError):
    """An attached image the arena does not take: ``status`` (413 too big, 415 not an
    accepted type, 422 unreadable or too many pixels), ``code`` and the message say why."""

    def __init__(self, status: int, code: str, message: str) -> None:
        super().__init__(message)
        self.status, self.code, self.message = status, code, message


@dataclass(frozen=True)
class CleanImage:
    """An image as stored and sent: its bytes (re-encoded, no metadata), type, size in pixels
    and ``hash`` (SHA-256 hex of ``data``: its name in the store and the export)."""

    data: bytes
    media_type: str
    width: int
    height: int
    hash: str

    @property
    def url(self) -> str:
        """The ``data:`` URL of an OpenAI-compatible ``image_url`` content part."""
        return data_url(self.media_type, self.data)


def data_url(media_type: str, data: bytes) -> str:
    """``data:<media_type>;base64,<data>``."""
    return f"data:{media_type};base64," + base64.b64encode(data).decode("ascii")


def sniff(head: bytes) -> str | None:
    """The media type of a file from its first bytes (PNG, JPEG, WebP, GIF), else None."""
    if head.startswith(b"\x89PNG\r\n\x1a\n"):
        return "image/png"
    if head.startswith(b"\xff\xd8\xff"):
        return "image/jpeg"
    if head[:4] == b"RIFF" and head[8:12] == b"WEBP":
        return "image/webp"
    if head[:6] in (b"GIF87a", b"GIF89a"):
        return "image/gif"
    return None


def _decoded(url: str, max_bytes: int) -> bytes:
    m = _DATA_URL.match(url)
    if m is None:
        raise ImageRefused(
            422, "invalid_image", "the image must be sent as a data: URL with base64 content"
        )
    body = url[m.end() :]
    # 4 base64 characters carry 3 bytes: a body longer than that bound is refused undecoded
    if len(body) > (max_bytes + 2) // 3 * 4 + 4:
        raise ImageRefused(
            413,
            "image_too_large",
            f"the image is larger than arena_page.max_image_bytes = {max_bytes} bytes; "
            "send a smaller one",
        )
    try:
        raw = base64.b64decode(body, validate=True)
    except (binascii.Error, ValueError):
        raise ImageRefused(422, "invalid_image", "the image's base64 content is broken") from None
    if len(raw) > max_bytes:
        raise ImageRefused(
            413,
            "image_too_large",
            f"the image is {len(raw)} bytes, more than arena_page.max_image_bytes = "
            f"{max_bytes}; send a smaller one",
        )
    return raw


def clean_image(url: str, max_bytes: int, max_side: int) -> CleanImage:
    """The attached image of ``url`` (a ``data:`` URL) checked and re-encoded (module
    docstring); :class:`ImageRefused` when it is not taken."""
    raw = _decoded(url, max_bytes)
    kind = sniff(raw[:16])
    if kind is None:
        raise ImageRefused(
            415,
            "unsupported_image",
            "the file is not a PNG, JPEG, WebP or GIF image (its first bytes say so, whatever "
            "its name); convert it to one of those",
        )
    from PIL import Image, ImageOps, UnidentifiedImageError

    try:
        with Image.open(io.BytesIO(raw), formats=[kind.split("/")[1].upper()]) as im:
            w, h = im.size  # from the header: nothing decoded yet
            if w > max_side or h > max_side or w < 1 or h < 1:
                raise ImageRefused(
                    422,
                    "image_too_big",
                    f"the image is {w}×{h} pixels; each side may be at most "
                    f"arena_page.max_image_side = {max_side}; scale it down",
                )
            im.seek(0)  # a GIF's (or animated WebP's) first frame
            im.load()
            upright = ImageOps.exif_transpose(im)
            pixels = upright.copy()
    except ImageRefused:
        raise
    except (UnidentifiedImageError, OSError, ValueError, SyntaxError, EOFError) as exc:
        raise ImageRefused(
            422, "invalid_image", f"the image cannot be decoded ({type(exc).__name__}); re-save it"
        ) from None
    except Image.DecompressionBombError:
        raise ImageRefused(422, "image_too_big", "the image decodes to too many pixels") from None
    # no text chunks, EXIF, XMP, comments or colour profile go with it (a palette's
    # transparent colour is part of the picture: kept)
    pixels.info = {k: v for k, v in pixels.info.items() if k == "transparency"}
    out = io.BytesIO()
    if kind == "image/jpeg":
        if pixels.mode not in ("RGB", "L"):
            pixels = pixels.convert("RGB")
        pixels.save(out, "JPEG", quality=90, optimize=True)
    elif kind == "image/webp":
        if pixels.mode not in ("RGB", "RGBA"):
            pixels = pixels.convert("RGBA" if "A" in pixels.getbands() else "RGB")
        pixels.save(out, "WEBP", quality=90)
    else:  # PNG, and a GIF's first frame as a PNG
        if pixels.mode not in ("1", "L", "LA", "P", "RGB", "RGBA", "I", "I;16"):
            pixels = pixels.convert("RGBA")
        pixels.save(out, "PNG", optimize=False)
        kind = "image/png"
    data = out.getvalue()
    return CleanImage(data, kind, pixels.width, pixels.height, hashlib.sha256(data).hexdigest())
