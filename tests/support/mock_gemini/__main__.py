"""``python -m mock_gemini``: run the mock as a process (cwd ``tests/support/``
or PYTHONPATH=tests/support).

Prints ``LISTENING http://HOST:PORT`` (flushed) once bound; serves until SIGTERM or SIGINT,
then exits 0.
"""

from __future__ import annotations

import sys

from mockhttp import Option, run_mock

from ._server import SCENARIOS, Scenario, serve_mock

_OPTIONS = ["--delay", "--interval", "--count",
            Option("--retry-delay", 'rate_limit: RetryInfo.retryDelay, e.g. "2s"'), "--times"]

if __name__ == "__main__":
    sys.exit(run_mock(serve_mock, Scenario.build, module="mock_gemini", description=__doc__,
                      scenarios=SCENARIOS, options=_OPTIONS))
