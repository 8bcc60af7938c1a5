"""The floor for a pass-through: a bare Quart-Trio app that forwards to the upstream.

    python -m bench.floor_app --upstream URL [--key KEY] [--port 0]

``POST /v1/chat/completions`` reads the body, looks at ``"stream"``, and sends the same bytes
to ``{URL}/chat/completions`` with one shared ``httpx.AsyncClient`` (``Authorization: Bearer
KEY``). A JSON answer is read whole and returned with the upstream's status; a streamed answer
is passed through as its bytes arrive. Nothing else: no key check, no routing, no accounting,
no headers of its own, no logging. Any proxy built on this stack pays at least this much, so
``bench.hot_path`` judges OLP's pass-through against it.

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

import httpx
import hypercorn.config
import hypercorn.trio
import trio
from quart import Response, request
from quart_trio import QuartTrio

#: Response headers that belong to the upstream connection, not to the answer.
HOP_HEADERS = frozenset({"content-length", "transfer-encoding", "connection", "keep-alive",
                         "date", "server"})


def create_app(upstream: str, key: str) -> QuartTrio:
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
        upstream_request = client.build_request("POST", url, content=body, headers=headers)
        if not json.loads(body).get("stream"):
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


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m bench.floor_app", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--upstream", required=True, help="the upstream's base URL (…/v1)")
    parser.add_argument("--key", default="sk-bench-router", help="the upstream's API key")
    parser.add_argument("--port", type=int, default=0)
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
            hypercorn.trio.serve, create_app(args.upstream, args.key), config,
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
