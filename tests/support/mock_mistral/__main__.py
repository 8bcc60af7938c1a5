"""``python -m mock_mistral``: run the mock as a process (cwd ``tests/support/``
or PYTHONPATH=tests/support).

Prints ``LISTENING http://HOST:PORT`` (flushed) once bound; serves until SIGTERM or SIGINT,
then exits 0.
"""

from __future__ import annotations

import sys

from mockhttp import Option, run_mock

from ._server import SCENARIOS, Scenario, serve_mock

_OPTIONS = [
    "--retry-after", "--interval", "--count",
    Option("--delay", "success/stall: seconds before each delta", float),
    "--times", "--status", Option("--error-type", "error: Mistral error type"), "--message",
    Option("--command", "tool_attack: the shell command a shell tool gets"),
    Option("--path", "tool_attack: the file a file-reading tool gets"),
]

if __name__ == "__main__":
    sys.exit(run_mock(serve_mock, Scenario.build, module="mock_mistral", description=__doc__,
                      scenarios=SCENARIOS, options=_OPTIONS))
