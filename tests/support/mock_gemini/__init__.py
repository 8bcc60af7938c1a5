"""A loopback mock of the Gemini API that the real ``gemini`` CLI accepts.

In-process (trio)::

    mock = await nursery.start(serve_mock)          # or partial(serve_mock, scenario="slow")
    env = {"GOOGLE_GEMINI_BASE_URL": mock.base_url, "GEMINI_API_KEY": "fake"}
    mock.set_scenario("rate_limit", retry_delay="3s")
    assert mock.generate_requests()[0]["tool_declarations"] == []

As a process: ``PYTHONPATH=tests/support python -m mock_gemini --port 0 --scenario success``
prints ``LISTENING http://127.0.0.1:PORT`` once bound and serves until SIGTERM/SIGINT;
``POST /_mock/scenario {"scenario": "slow", "interval": 0.5}`` switches scenario;
``GET /_mock/requests`` returns ``{"count": N, "requests": [...]}``. See ``_server.py``.
"""

from ._server import (
    DEFAULT_DELTAS,
    ERROR_SCENARIOS,
    INPUT_TOKENS,
    OUTPUT_TOKENS,
    SCENARIOS,
    MockGemini,
    Scenario,
    error_body,
    serve_mock,
    tool_declarations,
)

__all__ = ["DEFAULT_DELTAS", "ERROR_SCENARIOS", "INPUT_TOKENS", "OUTPUT_TOKENS", "SCENARIOS",
           "MockGemini", "Scenario", "error_body", "serve_mock", "tool_declarations"]
