"""The argv, stdin and files for one ``codex exec`` spawn. No client text ever goes on argv.

``codex exec --json --skip-git-repo-check --ephemeral --sandbox read-only -m MODEL
[--image=<workdir>/image-N.EXT ...] [--output-schema <workdir>/output-schema.json]
[extra_args ...] -`` with the prompt on stdin (``-``: the whole prompt is read from stdin; the
runner closes stdin after it — an open stdin blocks codex).

* **System/developer text** goes at the head of the prompt (:func:`flatten_prompt` with
  ``include_system=True``). codex has no system-prompt flag; ``-c developer_instructions=...``
  would put client text on argv, and ``-c model_instructions_file=<file>`` (which works, and
  would replace codex's own coding-agent instructions) is refused by the ChatGPT-login backend
  ("Instructions are not valid", openai/codex#3376) — the subscription path must keep working.
* **response_format** ``json_object``/``json_schema`` → an instruction at the head of the
  prompt (:func:`json_instruction`). A ``json_schema`` with ``"strict": true`` is also written
  to ``output-schema.json`` in the workdir and passed as ``--output-schema`` (codex then sends
  it as the request's strict ``text.format``; verified with the real CLI) — only when strict,
  because codex always marks it strict and OpenAI then rejects schemas that are not.
* **Images**: each ``data:`` URL is decoded into ``image-N.<ext>`` in the workdir and passed
  as ``--image=<path>`` (the ``=`` form: ``-i`` takes several values and would swallow the
  ``-``). Remote URLs → :class:`CapabilityMissing` ``("remote images")``; any other scheme
  (``file:``...) or an undecodable/unsupported data URL → ``CapabilityMissing`` too.
"""

from __future__ import annotations

import base64
import binascii
import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, Final
from urllib.parse import unquote_to_bytes

from olp.actors._adapter import CapabilityMissing, Invocation
from olp.actors._prompt import flatten_prompt, json_instruction
from olp.ir import ChatRequest, ImagePart

SCHEMA_FILE: Final = "output-schema.json"
BASE_ARGS: Final = ("exec", "--json", "--skip-git-repo-check", "--ephemeral",
                    "--sandbox", "read-only")
#: The image types codex (and the Responses API) accept, by MIME type → file extension.
IMAGE_TYPES: Final = {"image/png": "png", "image/jpeg": "jpg", "image/jpg": "jpg",
                      "image/gif": "gif", "image/webp": "webp"}


def build_invocation(request: ChatRequest, *, binary: str, model: str, workdir: Path,
                     extra_args: Sequence[str] = ()) -> Invocation:
    """The spawn for one request (details in the module docstring). Tools in the request are
    not looked at: the actor/engine decide on that capability."""
    images = _images(request)
    prompt = flatten_prompt(request.messages, include_system=True)
    instruction = json_instruction(request.response_format)
    if instruction is not None:
        prompt = f"{instruction}\n\n{prompt}" if prompt else instruction
    argv = [binary, *BASE_ARGS, "-m", model]
    binary_files: dict[str, bytes] = {}
    for name, data in images:
        binary_files[name] = data
        argv.append(f"--image={workdir / name}")
    files: dict[str, str] = {}
    schema = strict_schema(request.response_format)
    if schema is not None:
        files[SCHEMA_FILE] = json.dumps(schema, ensure_ascii=False, sort_keys=True)
        argv += ["--output-schema", str(workdir / SCHEMA_FILE)]
    argv += [*extra_args, "-"]
    return Invocation(argv=argv, stdin=prompt.encode("utf-8"), files=files,
                      binary_files=binary_files)


def strict_schema(response_format: Mapping[str, Any] | None) -> Mapping[str, Any] | None:
    """The schema of a ``json_schema`` response format whose ``strict`` is true, else None."""
    if not isinstance(response_format, Mapping) or response_format.get("type") != "json_schema":
        return None
    spec = response_format.get("json_schema")
    if not isinstance(spec, Mapping) or spec.get("strict") is not True:
        return None
    schema = spec.get("schema")
    return schema if isinstance(schema, Mapping) else None


def _images(request: ChatRequest) -> list[tuple[str, bytes]]:
    """``(file name, bytes)`` for every image part, in message order."""
    out: list[tuple[str, bytes]] = []
    for message in request.messages:
        for part in message.content:
            if isinstance(part, ImagePart):
                mime, data = decode_image_url(part.url)
                out.append((f"image-{len(out) + 1}.{IMAGE_TYPES[mime]}", data))
    return out


def decode_image_url(url: str) -> tuple[str, bytes]:
    """``(mime type, bytes)`` of a ``data:`` image URL; raises :class:`CapabilityMissing`
    for remote URLs, other schemes, unsupported types and undecodable data."""
    scheme = url.split(":", 1)[0].strip().lower() if ":" in url else ""
    if scheme in ("http", "https"):
        raise CapabilityMissing("remote images")
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
