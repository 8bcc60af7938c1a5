"""``python -m mock_anthropic``: run the mock as a process (cwd ``tests/support/``
or PYTHONPATH=tests/support).

Prints ``LISTENING http://HOST:PORT`` (flushed) once bound; serves until SIGTERM or SIGINT,
then exits 0.
"""

from __future__ import annotations

import argparse
import json
import sys

from mockhttp import run_mock

from ._server import SCENARIOS, Scenario, serve_mock


def _bool(text: str) -> bool:
    if text not in ("true", "false"):
        raise argparse.ArgumentTypeError(f"invalid choice: {text!r} (choose from true, false)")
    return text == "true"


def _options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--retry-after", type=float, help="rate_limit/overloaded/error")
    parser.add_argument("--interval", type=float, help="slow: seconds between chunks")
    parser.add_argument("--count", type=int, help="slow: number of chunks (default: forever)")
    parser.add_argument("--delay", type=float, help="success: seconds before each delta")
    parser.add_argument("--times", type=int, help="then revert to success")
    parser.add_argument("--status", type=int, help="error: HTTP status")
    parser.add_argument("--error-type", help="error: Anthropic error type")
    parser.add_argument("--message", help="error message text")
    parser.add_argument("--should-retry", type=_bool, metavar="{true,false}",
                        help="error scenarios: send x-should-retry (auth sends false by default)")
    parser.add_argument("--command", help="tool_attack: the shell command given to Bash")
    parser.add_argument("--path", help="tool_attack: the file path given to Read")
    parser.add_argument("--ratelimit-headers", type=json.loads, metavar="JSON",
                        help='more response headers, e.g. '
                             '\'{"anthropic-ratelimit-unified-status": "allowed"}\'')


def main(argv: list[str] | None = None) -> int:
    return run_mock(serve_mock, Scenario.build, prog="python -m mock_anthropic",
                    description=__doc__, scenarios=SCENARIOS, add_options=_options, argv=argv)


if __name__ == "__main__":
    sys.exit(main())
