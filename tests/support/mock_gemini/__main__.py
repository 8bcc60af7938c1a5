"""``python -m mock_gemini``: run the mock as a process (cwd ``tests/support/``
or PYTHONPATH=tests/support).

Prints ``LISTENING http://HOST:PORT`` (flushed) once bound; serves until SIGTERM or SIGINT,
then exits 0.
"""

from __future__ import annotations

import argparse
import sys

from mockhttp import run_mock

from ._server import SCENARIOS, Scenario, serve_mock


def _options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--delay", type=float, help="success: seconds before each delta")
    parser.add_argument("--interval", type=float, help="slow: seconds between chunks")
    parser.add_argument("--count", type=int, help="slow: number of chunks (default: forever)")
    parser.add_argument("--retry-delay", help='rate_limit: RetryInfo.retryDelay, e.g. "2s"')
    parser.add_argument("--times", type=int, help="then revert to success")


def main(argv: list[str] | None = None) -> int:
    return run_mock(serve_mock, Scenario.build, prog="python -m mock_gemini",
                    description=__doc__, scenarios=SCENARIOS, add_options=_options, argv=argv)


if __name__ == "__main__":
    sys.exit(main())
