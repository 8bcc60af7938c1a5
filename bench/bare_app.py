"""The floor for a cache hit: a bare Quart-Trio app on Hypercorn's trio worker, canned answer.

    python -m bench.bare_app [--port 0] [--payloads PATH|-] [--token TOKEN]

``POST /v1/chat/completions`` checks ``Authorization: Bearer <token>`` against a constant (no
database), reads and parses the JSON body, and answers with a fixed ``chat.completion`` JSON
body, or, when the body has ``"stream": true``, fixed SSE frames, written in the same pieces
OLP's SSE writer uses (a frame with content or tool calls ends a write; the role frame rides
with the first content and ``finish`` with ``[DONE]``). Each answer carries the same
``X-OLP-*`` headers as OLP's. ``bench.cache_hits`` passes the exact bodies and headers of a
real OLP cache hit captured at start-up (``--payloads -``: JSON on stdin); without it, built-in
copies of such a capture (the fake ``claude``'s "Hello from the mock upstream.") are served.

Served like :mod:`olp.runtime.server` serves OLP: ``hypercorn.trio.serve``, bind
``127.0.0.1:<port>``, access log off. Prints ``LISTENING <url>`` (flushed) once bound;
SIGTERM/SIGINT stop it.
"""

from __future__ import annotations

import argparse
import json
import logging
import signal
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import partial
from typing import Any

import hypercorn.config
import hypercorn.trio
import trio
from quart import Response, request
from quart_trio import QuartTrio

TOKEN = "olp_bench_owner_token_0123456789abcdef"
JSON = "application/json"
SSE_HEADERS = {"Cache-Control": "no-cache", "X-Accel-Buffering": "no"}
#: What OLP sent with a cache hit of the fake (X-OLP-Latency-Ms varies; the rest is fixed).
OLP_HEADERS = {
    "X-OLP-Requested-Model": "claude-sonnet-4-6", "X-OLP-Provider-Used": "anthropic",
    "X-OLP-Model-Used": "claude-sonnet-4-6", "X-OLP-Served-By": "anthropic:claude-sonnet-4-6",
    "X-OLP-Fallback-Hops": "0", "X-OLP-Cache": "hit", "X-OLP-Credential": "subscription",
    "X-OLP-Latency-Ms": "1",
}
#: Response headers that belong to the connection or the server, not to the payload.
TRANSPORT_HEADERS = frozenset({"content-length", "content-type", "date", "server",
                               "transfer-encoding", "connection", "keep-alive"})


def _default_json() -> bytes:
    return json.dumps({
        "id": "chatcmpl-ece05ada2951b6adbaa5c8fc", "object": "chat.completion",
        "created": 1796022526, "model": "claude-sonnet-4-6",
        "choices": [{"index": 0, "message": {"role": "assistant",
                                             "content": "Hello from the mock upstream.",
                                             "refusal": None},
                     "logprobs": None, "finish_reason": "stop"}],
        "usage": {"prompt_tokens": 25, "completion_tokens": 7, "total_tokens": 32},
    }, separators=(",", ":")).encode()


def _default_sse() -> bytes:
    def frame(delta: dict[str, str], finish: str | None = None) -> bytes:
        chunk = {"id": "chatcmpl-574e31d71b9cf9ce7c101ffa", "object": "chat.completion.chunk",
                 "created": 1796022526, "model": "claude-sonnet-4-6",
                 "choices": [{"index": 0, "delta": delta, "logprobs": None,
                              "finish_reason": finish}]}
        return b"data: " + json.dumps(chunk, separators=(",", ":")).encode() + b"\n\n"

    return b"".join([frame({"role": "assistant", "content": ""}),
                     *(frame({"content": t}) for t in ("Hello", " from", " the mock",
                                                       " upstream.")),
                     frame({}, "stop"), b"data: [DONE]\n\n"])


@dataclass(frozen=True, slots=True)
class Payloads:
    """The two canned answers: a JSON body, and an SSE body split into OLP's writes."""

    json_body: bytes
    json_headers: Mapping[str, str]
    sse_chunks: tuple[bytes, ...]
    sse_headers: Mapping[str, str]

    @classmethod
    def default(cls) -> Payloads:
        return cls(_default_json(), OLP_HEADERS, tuple(sse_chunks(_default_sse())),
                   {**SSE_HEADERS, **OLP_HEADERS})

    @classmethod
    def from_capture(cls, capture: Mapping[str, Any]) -> Payloads:
        """``{"json": {"body": str, "headers": {...}}, "sse": {"body": str, "headers":
        {...}}}``, as :mod:`bench.cache_hits` captures them from OLP; transport headers
        (length, date, server, ...) are dropped: Hypercorn writes its own."""
        def headers(part: Mapping[str, Any]) -> dict[str, str]:
            return {str(k): str(v) for k, v in part.get("headers", {}).items()
                    if str(k).lower() not in TRANSPORT_HEADERS}

        return cls(str(capture["json"]["body"]).encode(), headers(capture["json"]),
                   tuple(sse_chunks(str(capture["sse"]["body"]).encode())),
                   headers(capture["sse"]))


def sse_chunks(body: bytes) -> list[bytes]:
    """An SSE body cut where OLP's ``SseBody`` ends a write: after a frame that carries
    content or tool calls, and after ``[DONE]`` (finish and usage frames ride with it)."""
    chunks: list[bytes] = []
    pending = bytearray()
    for frame in body.split(b"\n\n"):
        if not frame:
            continue
        pending += frame + b"\n\n"
        data = frame.removeprefix(b"data:").strip()
        if data == b"[DONE]" or _carries_content(data):
            chunks.append(bytes(pending))
            pending.clear()
    if pending:
        chunks.append(bytes(pending))
    return chunks


def _carries_content(data: bytes) -> bool:
    try:
        obj = json.loads(data)
    except ValueError:
        return False
    if not isinstance(obj, dict):
        return False
    return any((choice.get("delta") or {}).get("content")
               or (choice.get("delta") or {}).get("tool_calls")
               for choice in obj.get("choices") or [])


class Frames:
    """The canned SSE writes as an async iterator (a class, like OLP's ``SseBody``)."""

    def __init__(self, chunks: Sequence[bytes]) -> None:
        self._chunks = chunks
        self._next = 0

    def __aiter__(self) -> Frames:
        return self

    async def __anext__(self) -> bytes:
        await trio.lowlevel.checkpoint()  # OLP's replay checkpoints once per event too
        if self._next >= len(self._chunks):
            raise StopAsyncIteration
        chunk = self._chunks[self._next]
        self._next += 1
        return chunk


def create_app(payloads: Payloads, token: str) -> QuartTrio:
    app = QuartTrio("bench_bare_app")
    app.config["PROVIDE_AUTOMATIC_OPTIONS"] = False
    expected = f"Bearer {token}"
    unauthorized = json.dumps({"error": {"message": "Invalid API key.",
                                         "type": "invalid_request_error",
                                         "code": "invalid_api_key"}})

    @app.post("/v1/chat/completions")
    async def chat_completions() -> Response:
        if request.headers.get("Authorization") != expected:
            return Response(unauthorized, status=401, content_type=JSON)
        body = await request.get_data(cache=False)
        try:
            stream = json.loads(body).get("stream") is True
        except (ValueError, AttributeError):
            return Response('{"error":{"message":"bad JSON"}}', status=400, content_type=JSON)
        if stream:
            response = Response(Frames(payloads.sse_chunks), status=200,
                                headers=dict(payloads.sse_headers),
                                content_type="text/event-stream")
            response.timeout = None  # as OLP does for its streams
            return response
        return Response(payloads.json_body, status=200, headers=dict(payloads.json_headers),
                        content_type=JSON)

    return app


async def serve(app: QuartTrio, port: int) -> None:
    config = hypercorn.config.Config()
    config.bind = [f"127.0.0.1:{port}"]
    config.graceful_timeout = 2
    config.accesslog = None
    config.errorlog = logging.getLogger("hypercorn.error")
    shutdown = trio.Event()
    async with trio.open_nursery() as nursery:
        nursery.start_soon(_watch_signals, shutdown)
        urls: list[str] = await nursery.start(partial(
            hypercorn.trio.serve, app, config, shutdown_trigger=shutdown.wait))
        print(f"LISTENING {urls[0]}", flush=True)
        # the nursery waits for serve(), which returns once the signal watcher set
        # `shutdown` and the open connections closed (or graceful_timeout passed)


async def _watch_signals(shutdown: trio.Event) -> None:
    with trio.open_signal_receiver(signal.SIGTERM, signal.SIGINT) as signals:
        async for _ in signals:  # the first one drains; a second one gets the default
            shutdown.set()
            return


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m bench.bare_app",
                                     description=__doc__.split("\n")[0] if __doc__ else None)
    parser.add_argument("--port", type=int, default=0, help="port on 127.0.0.1 (default 0: "
                        "any free one; the URL is printed as `LISTENING <url>`)")
    parser.add_argument("--payloads", metavar="PATH",
                        help="JSON capture of an OLP hit to serve (`-`: read it from stdin); "
                             "default: the built-in copy")
    parser.add_argument("--token", default=TOKEN,
                        help="the bearer token to accept (default: the benchmarks' token)")
    return parser.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    logging.basicConfig(level=logging.WARNING, stream=sys.stderr)
    if args.payloads is None:
        payloads = Payloads.default()
    elif args.payloads == "-":
        payloads = Payloads.from_capture(json.load(sys.stdin))
    else:
        with open(args.payloads, encoding="utf-8") as f:
            payloads = Payloads.from_capture(json.load(f))
    trio.run(serve, create_app(payloads, args.token), args.port)
    return 0


if __name__ == "__main__":
    sys.exit(main())
