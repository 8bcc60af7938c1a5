"""The floor for a pass-through: a bare Quart-Trio app that forwards to the upstream.

    python -m bench.floor_app --upstream URL [--key KEY] [--port 0] [--stream-upstream]

``POST /v1/chat/completions`` reads the body, looks at ``"stream"``, and sends the same bytes
to ``{URL}/chat/completions`` with one shared ``httpx.AsyncClient`` (``Authorization: Bearer
KEY``). A JSON answer is read whole and returned with the upstream's status; a streamed answer
is passed through as its bytes arrive. Nothing else: no key check, no routing, no accounting,
no headers of its own, no logging. Any proxy built on this stack pays at least this much, so
``bench.hot_path`` judges OLP's pass-through against it.

``--stream-upstream`` (the *streamed floor*) asks the upstream for a stream for a JSON request
too, as OLP does to keep its first-output and idle deadlines, and assembles the answer from
the SSE lines with the stdlib's ``json`` (text, finish reason and usage; tool calls are not
assembled). ``bench.hot_path`` runs it next to the floor to show what that stream costs a
bare app.

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
from collections.abc import AsyncIterator, Sequence
from functools import partial
from typing import Any

import httpx
import hypercorn.config
import hypercorn.trio
import trio
from quart import Response, request
from quart_trio import QuartTrio

#: Response headers that belong to the upstream connection, not to the answer.
HOP_HEADERS = frozenset({"content-length", "transfer-encoding", "connection", "keep-alive",
                         "date", "server"})


def create_app(upstream: str, key: str, *, stream_upstream: bool = False) -> QuartTrio:
    """The forwarding app; its one ``AsyncClient`` lives from start-up to shutdown."""
    app = QuartTrio("olp-floor")
    url = upstream.rstrip("/") + "/chat/completions"
    headers = {"Authorization": f"Bearer {key}", "Content-Type": "application/json"}
    clients: list[httpx.AsyncClient] = []

    @app.before_serving
    async def _open() -> None:
        clients.append(httpx.AsyncClient(
            trust_env=False, timeout=30.0,
            limits=httpx.Limits(max_connections=256, max_keepalive_connections=256)))

    @app.after_serving
    async def _close() -> None:
        await clients.pop().aclose()

    @app.post("/v1/chat/completions")
    async def chat() -> Response:
        body = await request.get_data()
        client = clients[0]
        payload = json.loads(body)
        if not payload.get("stream") and stream_upstream:
            return await _assembled(client, url, headers, payload)
        upstream_request = client.build_request("POST", url, content=body, headers=headers)
        if not payload.get("stream"):
            answer = await client.send(upstream_request)
            return Response(answer.content, status=answer.status_code,
                            content_type=answer.headers.get("content-type"))
        answer = await client.send(upstream_request, stream=True)

        async def relay() -> AsyncIterator[bytes]:
            try:
                async for chunk in answer.aiter_raw():
                    yield chunk
            finally:
                await answer.aclose()

        kept = {k: v for k, v in answer.headers.items() if k.lower() not in HOP_HEADERS}
        response = Response(relay(), status=answer.status_code, headers=kept)
        response.timeout = None  # as OLP: a stream is not cut by Quart's response timeout
        return response

    return app


async def _assembled(client: httpx.AsyncClient, url: str, headers: dict[str, str],
                     payload: dict[str, Any]) -> Response:
    """A JSON answer made from the upstream's stream (``--stream-upstream``)."""
    payload = {**payload, "stream": True, "stream_options": {"include_usage": True}}
    answer = await client.send(client.build_request(
        "POST", url, content=json.dumps(payload).encode(), headers=headers), stream=True)
    try:
        if answer.status_code != 200:
            await answer.aread()
            return Response(answer.content, status=answer.status_code,
                            content_type=answer.headers.get("content-type"))
        text: list[str] = []
        head: dict[str, Any] = {}
        finish, usage, rest = None, None, b""
        async for chunk in answer.aiter_raw():
            *lines, rest = (rest + chunk).split(b"\n")
            for line in lines:
                if not line.startswith(b"data: ") or line.startswith(b"data: [DONE]"):
                    continue
                event = json.loads(line[6:])
                head = head or event
                usage = event.get("usage") or usage
                for choice in event.get("choices") or ():
                    text.append(choice.get("delta", {}).get("content") or "")
                    finish = choice.get("finish_reason") or finish
    finally:
        await answer.aclose()
    message = {"role": "assistant", "content": "".join(text)}
    completion = {"id": head.get("id"), "object": "chat.completion",
                  "created": head.get("created"), "model": head.get("model"),
                  "choices": [{"index": 0, "message": message, "finish_reason": finish}],
                  "usage": usage}
    return Response(json.dumps(completion).encode(), status=200,
                    content_type="application/json")


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m bench.floor_app", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--upstream", required=True, help="the upstream's base URL (…/v1)")
    parser.add_argument("--key", default="sk-bench-router", help="the upstream's API key")
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--stream-upstream", action="store_true",
                        help="ask the upstream for a stream for JSON requests too, and "
                             "assemble the answer (the streamed floor)")
    return parser.parse_args(argv)


async def serve(args: argparse.Namespace) -> None:
    config = hypercorn.config.Config()
    config.bind = [f"127.0.0.1:{args.port}"]
    config.graceful_timeout = 2
    config.accesslog = None
    config.errorlog = logging.getLogger("hypercorn.error")
    shutdown = trio.Event()
    async with trio.open_nursery() as nursery:
        nursery.start_soon(_watch_signals, shutdown)
        urls: list[str] = await nursery.start(partial(
            hypercorn.trio.serve,
            create_app(args.upstream, args.key, stream_upstream=args.stream_upstream), config,
            shutdown_trigger=shutdown.wait))
        print(f"LISTENING {urls[0]}", flush=True)


async def _watch_signals(shutdown: trio.Event) -> None:
    with trio.open_signal_receiver(signal.SIGTERM, signal.SIGINT) as signals:
        async for _ in signals:
            shutdown.set()
            return


def main(argv: Sequence[str] | None = None) -> int:
    logging.basicConfig(level=logging.WARNING, stream=sys.stderr)
    trio.run(serve, parse_args(argv))
    return 0


if __name__ == "__main__":
    sys.exit(main())
