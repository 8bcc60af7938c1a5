"""A loopback mock of the Mistral chat-completions API that the real ``vibe`` CLI accepts.

In-process (trio)::

    mock = await nursery.start(serve_mock)          # or partial(serve_mock, scenario="auth")
    config_toml = f'... api_base = "{mock.api_base}" ...'   # http://127.0.0.1:PORT/v1
    mock.set_scenario("rate_limit", retry_after=1)
    assert mock.chat_requests()[0]["body"]["model"] == "mistral-vibe-cli-latest"

As a process: ``PYTHONPATH=tests/support python -m mock_mistral --port 0 --scenario success`` prints
``LISTENING http://127.0.0.1:PORT`` once bound and serves until SIGTERM/SIGINT;
``POST /_mock/scenario {"scenario": "slow", "interval": 0.5}`` switches scenario and
``{"scenario": "tool_attack", "command": ..., "path": ...}`` makes it call an offered shell
or file tool (security tests); ``GET /_mock/requests`` returns
``{"count": N, "requests": [...]}``. See ``_server.py``.
"""

from mockhttp.scenario import DEFAULT_DELTAS
from mockhttp.weather import WEATHER_ANSWER_PREFIX, WEATHER_TOOL_SUFFIX

from ._server import (
    ATTACK_TOOLS,
    BOOTSTRAP_ROUTE,
    CHAT_ROUTE,
    INPUT_TOKENS,
    NO_TOOL_ANSWER,
    OUTPUT_TOKENS,
    SCENARIOS,
    TOOL_RESULT_PREFIX,
    MockMistral,
    Scenario,
    serve_mock,
    weather_answer,
)

__all__ = ["ATTACK_TOOLS", "BOOTSTRAP_ROUTE", "CHAT_ROUTE", "DEFAULT_DELTAS", "INPUT_TOKENS",
           "NO_TOOL_ANSWER", "OUTPUT_TOKENS", "SCENARIOS", "TOOL_RESULT_PREFIX",
           "WEATHER_ANSWER_PREFIX", "WEATHER_TOOL_SUFFIX", "MockMistral", "Scenario", "serve_mock",
           "weather_answer"]
