"""A loopback mock of the OpenAI Responses API that the real ``codex`` CLI accepts.

In-process (trio)::

    mock = await nursery.start(serve_mock, scenario="success")
    # codex config.toml: [model_providers.mock] base_url = mock.base_url  (ends in /v1),
    #                    wire_api = "responses", env_key = "MOCK_OPENAI_API_KEY"
    mock.set_scenario("rate_limit", retry_after=1)
    mock.set_scenario("success", response_headers={  # the rate-limit snapshot codex reads
        "x-codex-primary-used-percent": "42", "x-codex-primary-window-minutes": "300"})
    assert mock.request_count == 1 and mock.requests[0]["body"]["model"] == "gpt-mock"
    mock.set_scenario("reasoning")  # a reasoning item first (a summary when one is asked for)

As a process: ``PYTHONPATH=tests/support python -m mock_openai_responses --port 0`` prints
``LISTENING http://127.0.0.1:PORT/v1`` once bound and serves until SIGTERM/SIGINT;
``POST /_mock/scenario {"scenario": "slow", "interval": 0.5}`` switches scenario and
``GET /_mock/requests`` returns ``{"count": N, "requests": [...]}``. Scenarios and options are
in ``_server.py``; records and the control API are those of ``mock_anthropic``
(``tests/support/README.md``).
"""

from mockhttp.scenario import DEFAULT_DELTAS
from mockhttp.weather import WEATHER_ANSWER_PREFIX, WEATHER_TOOL_SUFFIX

from ._server import (
    INPUT_TOKENS,
    OUTPUT_TOKENS,
    SCENARIOS,
    MockResponses,
    Scenario,
    offered_tools,
    serve_mock,
    weather_answer,
)

__all__ = [
    "DEFAULT_DELTAS",
    "INPUT_TOKENS",
    "OUTPUT_TOKENS",
    "SCENARIOS",
    "MockResponses",
    "Scenario",
    "WEATHER_ANSWER_PREFIX",
    "WEATHER_TOOL_SUFFIX",
    "offered_tools",
    "serve_mock",
    "weather_answer",
]
