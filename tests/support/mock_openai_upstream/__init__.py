"""A loopback mock of an OpenAI-compatible chat completions API with scripted faults."""

from mockhttp.weather import WEATHER_ANSWER_PREFIX, WEATHER_TOOL_SUFFIX

from ._server import (
    DEFAULT_DELTAS,
    PROMPT_TOKENS,
    READ_ANSWER_PREFIX,
    SCENARIOS,
    MockOpenAI,
    Scenario,
    serve_mock,
)

__all__ = ["DEFAULT_DELTAS", "PROMPT_TOKENS", "READ_ANSWER_PREFIX", "SCENARIOS",
           "WEATHER_ANSWER_PREFIX",
           "WEATHER_TOOL_SUFFIX", "MockOpenAI", "Scenario", "serve_mock"]
