"""The mock's weather model: a well-behaved tool-using model for the tool-calling tests.

In the ``success`` scenario, when the request offers a tool whose name ends with
``get_weather`` (claude offers a client's tool as ``mcp__olp__get_weather``; the scenario's
``tool_suffix`` and ``tool_input`` options pick another tool and its input):

- and the conversation holds no result for it yet, the answer is a short text preamble
  (:data:`PREAMBLE`) and one ``tool_use`` block per city the prompt names (two cities → two
  blocks, for the parallel test; none named → ``Paris``), ``stop_reason: "tool_use"``;
- once a result is there — a ``tool_result`` block, or OLP's rendering of the client's history
  (``[get_weather returned] ...``) in the prompt text — the answer is text quoting every result
  (:data:`RESULT_PREFIX` + the results joined by ``" | "``), ``stop_reason: "end_turn"``.
"""

from __future__ import annotations

from typing import Any

from mockhttp.weather import PREAMBLE, RESULT_PREFIX, named_cities, returned_results
from mockhttp.weather import WEATHER_TOOL_SUFFIX as SUFFIX


def weather_tool(payload: dict[str, Any], suffix: str = SUFFIX) -> str | None:
    """The offered tool whose name ends with ``suffix`` (``get_weather``), or None."""
    tools = payload.get("tools")
    if not isinstance(tools, list):
        return None
    for tool in tools:
        name = tool.get("name") if isinstance(tool, dict) else None
        if isinstance(name, str) and name.endswith(suffix):
            return name
    return None


def _texts(payload: dict[str, Any]) -> list[str]:
    """Every text of the user turns (string content and text blocks)."""
    out: list[str] = []
    for message in payload.get("messages") or ():
        if not isinstance(message, dict) or message.get("role") != "user":
            continue
        content = message.get("content")
        if isinstance(content, str):
            out.append(content)
        elif isinstance(content, list):
            out += [b["text"] for b in content if isinstance(b, dict)
                    and b.get("type") == "text" and isinstance(b.get("text"), str)]
    return out


def results(payload: dict[str, Any], suffix: str = SUFFIX) -> list[str]:
    """The weather results the conversation holds: ``tool_result`` blocks and rendered ones."""
    found: list[str] = []
    for message in payload.get("messages") or ():
        content = message.get("content") if isinstance(message, dict) else None
        if not isinstance(content, list):
            continue
        for block in content:
            if isinstance(block, dict) and block.get("type") == "tool_result":
                inner = block.get("content")
                if isinstance(inner, str):
                    found.append(inner)
                elif isinstance(inner, list):
                    found += [b["text"] for b in inner if isinstance(b, dict)
                              and isinstance(b.get("text"), str)]
    for text in _texts(payload):
        found += returned_results(text, suffix)
    return found


def cities(payload: dict[str, Any]) -> list[str]:
    """The known cities the user turns name, in the order they appear (default Paris)."""
    return named_cities("\n".join(_texts(payload)))


def weather_blocks(payload: dict[str, Any], n: int, *, suffix: str = SUFFIX,
                   tool_input: dict[str, Any] | None = None,
                   ) -> tuple[list[dict[str, Any]], str] | None:
    """``(content blocks, stop_reason)`` of the weather model's answer, or None when no
    tool ending with ``suffix`` is offered. Tool-use ids are ``toolu_mock<n>_<i>``. With
    ``tool_input`` (the scenario's option, e.g. to call a client's own ``exec_command``):
    one call with that input instead of one ``{"city": ...}`` call per city."""
    tool = weather_tool(payload, suffix)
    if tool is None:
        return None
    seen = results(payload, suffix)
    if seen:
        return [{"type": "text", "text": RESULT_PREFIX + " | ".join(seen)}], "end_turn"
    inputs = [tool_input] if tool_input is not None else [
        {"city": city} for city in cities(payload)]
    blocks: list[dict[str, Any]] = [{"type": "text", "text": PREAMBLE}]
    blocks += [{"type": "tool_use", "id": f"toolu_mock{n:06d}_{i}", "name": tool,
                "input": value} for i, value in enumerate(inputs)]
    return blocks, "tool_use"
