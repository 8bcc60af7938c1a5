"""``python -m <mock>``: run a mock as a process until SIGTERM or SIGINT."""

from __future__ import annotations

import argparse
import dataclasses
import json
import signal
from collections.abc import Callable, Iterable, Sequence
from typing import Any

import trio

_COMMON = ("host", "port", "scenario")


@dataclasses.dataclass(frozen=True)
class Option:
    """A command-line option of a mock: it sets the scenario option of the same name."""

    flag: str
    help: str
    type: Callable[[str], Any] | None = None
    metavar: str | None = None


#: the options several mocks take, with their usual help; a mock names them by flag
OPTIONS: dict[str, Option] = {o.flag: o for o in (
    Option("--retry-after", "error scenarios: retry-after header", float),
    Option("--interval", "slow: seconds between chunks", float),
    Option("--count", "slow: number of chunks (default: forever)", int),
    Option("--delay", "success: seconds before each delta", float),
    Option("--times", "then revert to success", int),
    Option("--status", "error: HTTP status", int),
    Option("--message", "error message text"),
)}


def run_mock(serve: Callable[..., Any], build: Callable[..., Any], *, module: str,
             description: str | None, scenarios: Iterable[str], options: Sequence[str | Option],
             argv: list[str] | None = None) -> int:
    """Parse ``--host --port --scenario``, the mock's ``options`` (a flag of :data:`OPTIONS`
    or an :class:`Option`; every one not given is left out) and ``--deltas`` (JSON); check
    them with ``build(scenario, **options)``; then serve. Prints ``LISTENING
    <handle.base_url>`` (flushed) once bound and blocks until SIGTERM or SIGINT, then
    returns 0."""
    parser = argparse.ArgumentParser(prog=f"python -m {module}", description=description)
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--scenario", default="success", choices=sorted(scenarios))
    for option in options:
        spec = OPTIONS[option] if isinstance(option, str) else option
        parser.add_argument(spec.flag, type=spec.type, metavar=spec.metavar, help=spec.help)
    parser.add_argument("--deltas", type=json.loads,
                        help="success: the text deltas as a JSON list")
    args = parser.parse_args(argv)
    given = {k: v for k, v in vars(args).items() if k not in _COMMON and v is not None}
    build(args.scenario, **given)  # fail fast on bad options
    trio.run(_serve, serve, args, given)
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
