"""``python -m mock_anthropic``: run the mock as a process (cwd ``tests/support/``
or PYTHONPATH=tests/support).

Prints ``LISTENING http://HOST:PORT`` (flushed) once bound; serves until SIGTERM or SIGINT,
then exits 0.
"""

from __future__ import annotations

import argparse
import json
import sys

from mockhttp import Option, run_mock

from ._server import SCENARIOS, Scenario, serve_mock


def _bool(text: str) -> bool:
    if text not in ("true", "false"):
        raise argparse.ArgumentTypeError(f"invalid choice: {text!r} (choose from true, false)")
    return text == "true"


_OPTIONS = [
    Option("--retry-after", "rate_limit/overloaded/error", float),
    "--interval", "--count", "--delay", "--times", "--status",
    Option("--error-type", "error: Anthropic error type"),
    "--message",
    Option("--should-retry",
           "error scenarios: send x-should-retry (auth sends false by default)", _bool,
           "{true,false}"),
    Option("--command", "tool_attack: the shell command given to Bash"),
    Option("--path", "tool_attack: the file path given to Read"),
    Option("--ratelimit-headers",
           'more response headers, e.g. \'{"anthropic-ratelimit-unified-status": "allowed"}\'',
           json.loads, "JSON"),
    Option("--thinking", "thinking: the thinking_delta texts as a JSON list", json.loads,
           "JSON"),
]

if __name__ == "__main__":
    sys.exit(run_mock(serve_mock, Scenario.build, module="mock_anthropic", description=__doc__,
                      scenarios=SCENARIOS, options=_OPTIONS))
