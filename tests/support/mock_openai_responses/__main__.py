"""``python -m mock_openai_responses``: the mock as a process (cwd ``tests/support/`` or
PYTHONPATH=tests/support).

Prints ``LISTENING http://HOST:PORT/v1`` (flushed) once bound; serves until SIGTERM or SIGINT,
then exits 0.
"""

from __future__ import annotations

import json
import sys

from mockhttp import Option, run_mock

from ._server import SCENARIOS, Scenario, serve_mock

_OPTIONS = [
    "--retry-after", "--interval", "--count", "--delay", "--times", "--status",
    Option("--error-type", "error: OpenAI error type"),
    Option("--code", "error: OpenAI error code"),
    "--message",
    Option("--resets-in-seconds", "usage_limit: reset in the body", int),
    Option("--served-model", "the response's model (default: the request's)"),
    Option("--cached-tokens", "success: cached input tokens", int),
    Option("--command", "tool_attack: the shell string for shell tools"),
    Option("--path", "tool_attack: the file for view_image"),
    Option("--marker", "tool_attack: the file an apply_patch call adds"),
    Option("--preamble", "get_weather: a text message before the call(s)"),
    Option("--tool-arguments", "get_weather: each call's arguments, verbatim"),
    Option("--response-headers",
           'more response headers, e.g. \'{"x-codex-primary-used-percent": "42"}\'',
           json.loads, "JSON"),
    Option("--reasoning-summary", "reasoning: the summary's parts as a JSON list", json.loads,
           "JSON"),
]

if __name__ == "__main__":
    sys.exit(run_mock(serve_mock, Scenario.build, module="mock_openai_responses",
                      description=__doc__, scenarios=SCENARIOS, options=_OPTIONS))
