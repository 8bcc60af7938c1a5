"""What the mocks' weather models (a well-behaved tool-using model, for the tool-calling
tests) share, whatever the vendor's wire format.

Two models: ``mock_anthropic`` and ``mock_gemini`` answer a text :data:`PREAMBLE` and one call
per known city the user turns name, then :data:`RESULT_PREFIX` + the results;
``mock_openai_responses``, ``mock_mistral`` and ``mock_openai_upstream`` call the tool for the
cities of "weather in X (and Y)", then answer :data:`WEATHER_ANSWER_PREFIX` + the results.
Both join the results with ``" | "``.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Any

WEATHER_TOOL_SUFFIX = "get_weather"
DEFAULT_CITY = "Paris"
PREAMBLE = "Let me check the weather."
RESULT_PREFIX = "The weather tool said: "
CITIES = ("Paris", "Oslo", "Tokyo", "London", "Berlin", "Lima")
WEATHER_ANSWER_PREFIX = "Weather report: "
_ASKED = re.compile(r"weather in ([A-Z][\w-]*)(?:,? and (?:in )?([A-Z][\w-]*))?")
#: a rendered tool result: "Tool result:" or "Tool result (<id>):", then the text (after an
#: optional "[<name> returned] " tag) up to a blank line
RENDERED_RESULT = re.compile(
    r"^Tool result(?: \([^)\n]*\))?[^\n]*:\n(?:\[[^\]\n]* returned\] )?(.*?)(?=\n\n|\Z)",
    re.MULTILINE | re.DOTALL)


def named_cities(text: str) -> list[str]:
    """The :data:`CITIES` ``text`` names, in order of appearance (default Paris)."""
    named = sorted((text.find(c), c) for c in CITIES if c in text)
    return [c for _, c in named] or [DEFAULT_CITY]


def returned_results(text: str, suffix: str = WEATHER_TOOL_SUFFIX) -> list[str]:
    """The results OLP rendered into a prompt as ``[<...suffix> returned] <result>``."""
    pattern = re.compile(r"\[[\w.-]*" + re.escape(suffix) + r" returned\] ?(.*)")
    return [m.group(1).strip() for m in pattern.finditer(text)]


def asked_cities(text: str) -> list[str]:
    """The one or two cities of "weather in X (and Y)" in ``text`` (default Paris)."""
    match = _ASKED.search(text)
    return [c for c in match.groups() if c] if match else [DEFAULT_CITY]


def weather_report(results: Iterable[str]) -> str:
    """The answer that quotes the tool's results."""
    return WEATHER_ANSWER_PREFIX + " | ".join(results)


def report_or_cities(text: str, results: list[str],
                     rendered: re.Pattern[str] = RENDERED_RESULT) -> str | list[str]:
    """The "weather in X" model's next move, given the last user text and the tool results
    the request carries: the report quoting those and the ones ``rendered`` in ``text``, or
    (none yet) the cities to call the tool for."""
    found = results + [r.strip() for r in rendered.findall(text)]
    return weather_report(found) if found else asked_cities(text)


def chat_weather_tool(payload: dict[str, Any]) -> str | None:
    """The offered chat-completions function whose name ends with ``get_weather`` (any MCP
    prefix), or None."""
    for tool in payload.get("tools") or []:
        function = tool.get("function") if isinstance(tool, dict) else None
        name = function.get("name") if isinstance(function, dict) else None
        if isinstance(name, str) and name.endswith(WEATHER_TOOL_SUFFIX):
            return name
    return None
