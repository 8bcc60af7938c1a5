"""A loopback mock of the Anthropic Messages API that the real ``claude`` CLI accepts.

In-process (trio)::

    mock = await nursery.start(serve_mock, scenario="success")
    env["ANTHROPIC_BASE_URL"] = mock.base_url          # http://127.0.0.1:PORT, no /v1
    mock.set_scenario("rate_limit", retry_after=1)
    mock.set_scenario("success", ratelimit_headers={  # Anthropic's subscription limits
        "anthropic-ratelimit-unified-status": "allowed",
        "anthropic-ratelimit-unified-5h-utilization": "0.42"})
    assert mock.request_count == 1 and mock.requests[0]["body"]["model"] == "claude-sonnet-4-6"
    mock.set_scenario("thinking")  # a thinking block first, as the request's `thinking` asks

As a process: ``PYTHONPATH=tests/support python -m mock_anthropic --port 0 --scenario success``
prints ``LISTENING http://127.0.0.1:PORT`` once bound and serves until SIGTERM/SIGINT;
``POST /_mock/scenario {"scenario": "slow", "interval": 0.5}`` switches scenario and
``GET /_mock/requests`` returns ``{"count": N, "requests": [...]}``. See ``_server.py``.
"""

from mockhttp.scenario import DEFAULT_DELTAS

from ._server import (
    NO_TOOL_TEXT,
    SCENARIOS,
    TOOL_RESULT_PREFIX,
    MockAnthropic,
    Scenario,
    serve_mock,
)

__all__ = ["DEFAULT_DELTAS", "NO_TOOL_TEXT", "SCENARIOS", "TOOL_RESULT_PREFIX", "MockAnthropic",
           "Scenario", "serve_mock"]
