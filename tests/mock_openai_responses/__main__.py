"""``python -m mock_openai_responses``: the mock as a process (cwd ``tests/`` or
PYTHONPATH=tests).

Prints ``LISTENING http://HOST:PORT/v1`` (flushed) once bound; serves until SIGTERM or SIGINT,
then exits 0.
"""

from __future__ import annotations

import argparse
import json
import signal
import sys
from typing import Any

import trio

from ._server import SCENARIOS, MockResponses, Scenario, serve_mock

_OPTIONS = ("retry_after", "interval", "count", "delay", "times", "status", "error_type",
            "code", "message", "resets_in_seconds", "served_model", "cached_tokens")


def _parse(argv: list[str] | None) -> tuple[argparse.Namespace, dict[str, Any]]:
    parser = argparse.ArgumentParser(prog="python -m mock_openai_responses",
                                     description=__doc__)
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--scenario", default="success", choices=sorted(SCENARIOS))
    parser.add_argument("--retry-after", type=float, help="error scenarios: retry-after header")
    parser.add_argument("--interval", type=float, help="slow: seconds between chunks")
    parser.add_argument("--count", type=int, help="slow: number of chunks (default: forever)")
    parser.add_argument("--delay", type=float, help="success: seconds before each delta")
    parser.add_argument("--times", type=int, help="then revert to success")
    parser.add_argument("--status", type=int, help="error: HTTP status")
    parser.add_argument("--error-type", help="error: OpenAI error type")
    parser.add_argument("--code", help="error: OpenAI error code")
    parser.add_argument("--message", help="error message text")
    parser.add_argument("--resets-in-seconds", type=int, help="usage_limit: reset in the body")
    parser.add_argument("--served-model", help="the response's model (default: the request's)")
    parser.add_argument("--cached-tokens", type=int, help="success: cached input tokens")
    parser.add_argument("--deltas", help="success: the text deltas as a JSON list")
    args = parser.parse_args(argv)
    options: dict[str, Any] = {}
    for name in _OPTIONS:
        value = getattr(args, name)
        if value is not None:
            options[name] = value
    if args.deltas is not None:
        options["deltas"] = json.loads(args.deltas)
    Scenario.build(args.scenario, **options)  # fail fast on bad options
    return args, options


async def _main(args: argparse.Namespace, options: dict[str, Any]) -> None:
    with trio.open_signal_receiver(signal.SIGTERM, signal.SIGINT) as signals:
        async with trio.open_nursery() as nursery:
            handle: MockResponses = await nursery.start(
                lambda task_status: serve_mock(
                    scenario=args.scenario,
                    host=args.host,
                    port=args.port,
                    task_status=task_status,
                    **options,
                )
            )
            print(f"LISTENING {handle.base_url}", flush=True)
            async for _ in signals:
                nursery.cancel_scope.cancel()
                break


def main(argv: list[str] | None = None) -> int:
    args, options = _parse(argv)
    trio.run(_main, args, options)
    return 0


if __name__ == "__main__":
    sys.exit(main())
