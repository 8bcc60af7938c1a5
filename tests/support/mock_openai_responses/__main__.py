"""``python -m mock_openai_responses``: the mock as a process (cwd ``tests/support/`` or
PYTHONPATH=tests/support).

Prints ``LISTENING http://HOST:PORT/v1`` (flushed) once bound; serves until SIGTERM or SIGINT,
then exits 0.
"""

from __future__ import annotations

import argparse
import json
import sys

from mockhttp import run_mock

from ._server import SCENARIOS, Scenario, serve_mock


def _options(parser: argparse.ArgumentParser) -> None:
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
    parser.add_argument("--command", help="tool_attack: the shell string for shell tools")
    parser.add_argument("--path", help="tool_attack: the file for view_image")
    parser.add_argument("--marker", help="tool_attack: the file an apply_patch call adds")
    parser.add_argument("--preamble", help="get_weather: a text message before the call(s)")
    parser.add_argument("--tool-arguments", help="get_weather: each call's arguments, verbatim")
    parser.add_argument("--response-headers", type=json.loads, metavar="JSON",
                        help='more response headers, e.g. '
                             '\'{"x-codex-primary-used-percent": "42"}\'')


def main(argv: list[str] | None = None) -> int:
    return run_mock(serve_mock, Scenario.build, prog="python -m mock_openai_responses",
                    description=__doc__, scenarios=SCENARIOS, add_options=_options, argv=argv)


if __name__ == "__main__":
    sys.exit(main())
