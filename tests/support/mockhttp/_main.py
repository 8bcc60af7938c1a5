"""``python -m <mock>``: run a mock as a process until SIGTERM or SIGINT."""

from __future__ import annotations

import argparse
import json
import signal
from collections.abc import Callable, Iterable
from typing import Any

import trio

_COMMON = ("host", "port", "scenario")


def run_mock(serve: Callable[..., Any], build: Callable[..., Any], *, prog: str,
             description: str | None, scenarios: Iterable[str],
             add_options: Callable[[argparse.ArgumentParser], None],
             argv: list[str] | None = None) -> int:
    """Parse ``--host --port --scenario``, the mock's own options (``add_options``; every one
    not given is left out) and ``--deltas`` (JSON); check them with ``build(scenario,
    **options)``; then serve. Prints ``LISTENING <handle.base_url>`` (flushed) once bound and
    blocks until SIGTERM or SIGINT, then returns 0."""
    parser = argparse.ArgumentParser(prog=prog, description=description)
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--scenario", default="success", choices=sorted(scenarios))
    add_options(parser)
    parser.add_argument("--deltas", type=json.loads,
                        help="success: the text deltas as a JSON list")
    args = parser.parse_args(argv)
    options = {k: v for k, v in vars(args).items() if k not in _COMMON and v is not None}
    build(args.scenario, **options)  # fail fast on bad options
    trio.run(_serve, serve, args, options)
    return 0


async def _serve(serve: Callable[..., Any], args: argparse.Namespace,
                 options: dict[str, Any]) -> None:
    with trio.open_signal_receiver(signal.SIGTERM, signal.SIGINT) as signals:
        async with trio.open_nursery() as nursery:
            handle = await nursery.start(
                lambda task_status: serve(scenario=args.scenario, host=args.host,
                                          port=args.port, task_status=task_status, **options))
            print(f"LISTENING {handle.base_url}", flush=True)
            async for _ in signals:
                nursery.cancel_scope.cancel()
                break
