"""The mock's weather model (scenario ``weather``): a well-behaved tool-using Gemini model.

When the request declares a function whose name ends with ``get_weather`` (gemini-cli
declares a bridge tool as ``mcp_olp_get_weather``):

- and the conversation holds no result for it yet, the answer is a text preamble
  (:data:`PREAMBLE`, its own chunk) and one ``functionCall`` part per city the user turns
  name (two cities → two parts in one chunk, for the parallel test; none → ``Paris``),
  ``finishReason: "STOP"`` (what Gemini sends after function calls);
- once a result is there — a ``functionResponse`` part, or OLP's rendering of the client's
  history (``[get_weather returned] ...``) in the prompt text — the answer is text quoting
  every result (:data:`RESULT_PREFIX` + the results joined by ``" | "``).

Without such a declaration the scenario answers like ``success``.
"""

from __future__ import annotations

import json
from typing import Any

from mockhttp.weather import PREAMBLE, RESULT_PREFIX, named_cities, returned_results
from mockhttp.weather import WEATHER_TOOL_SUFFIX as SUFFIX


def weather_function(body: Any) -> str | None:
    """The declared function whose name ends with ``get_weather``, or None."""
    tools = body.get("tools") if isinstance(body, dict) else None
    for tool in tools if isinstance(tools, list) else []:
        declarations = tool.get("functionDeclarations") if isinstance(tool, dict) else None
        for declaration in declarations if isinstance(declarations, list) else []:
            name = declaration.get("name") if isinstance(declaration, dict) else None
            if isinstance(name, str) and name.endswith(SUFFIX):
                return name
    return None


def _parts(body: Any) -> list[dict[str, Any]]:
    contents = body.get("contents") if isinstance(body, dict) else None
    out: list[dict[str, Any]] = []
    for content in contents if isinstance(contents, list) else []:
        parts = content.get("parts") if isinstance(content, dict) else None
        out += [p for p in parts if isinstance(p, dict)] if isinstance(parts, list) else []
    return out


def results(body: Any) -> list[str]:
    """The weather results the conversation holds: ``functionResponse`` parts and rendered
    ones in the text."""
    found: list[str] = []
    for part in _parts(body):
        response = part.get("functionResponse")
        if isinstance(response, dict):
            found.append(json.dumps(response.get("response"), sort_keys=True))
        text = part.get("text")
        if isinstance(text, str):
            found += returned_results(text)
    return found


def cities(body: Any) -> list[str]:
    """The known cities the text parts name, in order of appearance (default Paris)."""
    return named_cities("\n".join(p["text"] for p in _parts(body)
                                   if isinstance(p.get("text"), str)))


def weather_chunks(body: Any, extra_args: dict[str, Any] | None = None,
                   ) -> list[list[dict[str, Any]]] | None:
    """The parts of each streamed chunk of the weather model's answer, or None when no
    ``get_weather`` function is declared. ``extra_args`` (the scenario's option) are merged
    into every call's ``args`` (e.g. gemini's own ``wait_for_previous``)."""
    function = weather_function(body)
    if function is None:
        return None
    seen = results(body)
    if seen:
        return [[{"text": RESULT_PREFIX + " | ".join(seen)}]]
    calls = [{"functionCall": {"name": function,
                               "args": {"city": city, **(extra_args or {})}}}
             for city in cities(body)]
    return [[{"text": PREAMBLE}], calls]
