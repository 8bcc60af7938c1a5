"""Images a client sent as ``data:`` URLs, decoded for a CLI that takes image bytes.

Pure (no I/O): OLP never fetches a remote ``http(s)`` image — a CLI would have to, and a
proxy that fetches URLs a key holder chooses is a way into the owner's network — so those,
like any other scheme, are a :class:`~olp.actors.CapabilityMissing` whose message says so.
"""

from __future__ import annotations

import base64
import binascii
from typing import Final
from urllib.parse import unquote_to_bytes

from olp.actors import CapabilityMissing

#: The image types the CLIs (and the Anthropic and Responses APIs) accept: MIME type → file
#: extension.
IMAGE_TYPES: Final = {"image/png": "png", "image/jpeg": "jpg", "image/jpg": "jpg",
                      "image/gif": "gif", "image/webp": "webp"}

REMOTE_IMAGES: Final = ("remote images (OLP does not fetch http(s) image URLs; send the "
                        "image inline as a data: URL)")


def decode_image_url(url: str) -> tuple[str, bytes]:
    """``(mime type, bytes)`` of a ``data:`` image URL; raises :class:`CapabilityMissing`
    for remote URLs, other schemes, unsupported types and undecodable data."""
    scheme = url.split(":", 1)[0].strip().lower() if ":" in url else ""
    if scheme in ("http", "https"):
        raise CapabilityMissing(REMOTE_IMAGES)
    if scheme != "data":
        raise CapabilityMissing("images that are not data: URLs")
    header, sep, payload = url.partition(",")
    if not sep:
        raise CapabilityMissing("undecodable image data")
    params = [p.strip().lower() for p in header[len("data:"):].split(";")]
    mime = params[0] or "text/plain"
    if mime not in IMAGE_TYPES:
        raise CapabilityMissing(f"images of type {mime[:40]}")
    try:
        if "base64" in params[1:]:
            data = base64.b64decode(unquote_to_bytes(payload).strip(), validate=False)
        else:
            data = unquote_to_bytes(payload)
    except (binascii.Error, ValueError):
        raise CapabilityMissing("undecodable image data") from None
    if not data:
        raise CapabilityMissing("undecodable image data")
    return ("image/jpeg" if mime == "image/jpg" else mime), data
