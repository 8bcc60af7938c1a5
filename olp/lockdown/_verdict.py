"""What a CLI sent the loopback mock during its self-check, judged (issue #26; ADR 0024).

:func:`judge` reads the recorded requests of one check and lists what is wrong:

* a built-in tool offered beyond the CLI's floor (by name, sorted: the failure names them);
* OLP's system text missing from the system text, or the CLI's own agent prompt sent with
  it (more than :data:`SYSTEM_SLACK` characters besides OLP's);
* a canary planted in the spawn's home found in a request (a file inlined);
* a request meant for another host (through the proxy variables the check sets);
* no request at all to the vendor's generation route (nothing to judge: not verified).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any, Final

from ._targets import Target
from ._vendor_mock import Recorded

#: Characters the system text may hold besides OLP's own (qwen's output-language note is
#: ~900); an agent prompt is far longer (codex 21,500, vibe 16,000).
SYSTEM_SLACK: Final = 2000


@dataclass(frozen=True, slots=True)
class Finding:
    """``offered``: built-in tools beyond the floor; ``problems``: every reason not to
    trust the CLI, the tools first."""

    offered: tuple[str, ...] = ()
    problems: tuple[str, ...] = ()
    checked: bool = True  # False: no model request reached the mock, so nothing was judged


def judge(target: Target, requests: Sequence[Recorded], *, system: str,
          canary: str, login: bool = False) -> Finding:
    """The finding for ``requests`` (everything the mock recorded, in order; ``login``: the
    CLI ran on an emulated login, whose identity hosts it may call)."""
    problems: list[str] = []
    allowed = target.login_hosts if login else frozenset()
    foreign = sorted({r.target if r.method == "CONNECT" else r.host or r.target
                      for r in requests if r.foreign} - allowed)
    model = [r for r in requests if not r.foreign and isinstance(r.body, dict)
             and _is_generation(target, r)]
    if not model:
        problems.append("the CLI sent the mock no model request, so nothing could be checked")
    offered = sorted({name for r in model for name in tools_offered(target, r.body)}
                     - target.floor)
    if offered:
        problems.append("offers " + ", ".join(offered))
    for r in model:
        text = system_text(target, r.body)
        if not (_holds(r.body, system) if target.own_system_prompt else system in text):
            problems.append("OLP's system text did not reach the model as the system text")
            break
        if not target.own_system_prompt and len(text) - len(system) > SYSTEM_SLACK:
            problems.append(f"the CLI sent its own agent prompt ({len(text) - len(system)} "
                            "characters besides OLP's system text)")
            break
    if any(_holds(r.body, canary) for r in requests):
        problems.append("a file from the CLI's home was inlined into the prompt")
    if foreign:
        problems.append("contacted another host: " + ", ".join(foreign[:5]))
    return Finding(tuple(offered), tuple(problems), checked=bool(model))


def _holds(value: Any, needle: str) -> bool:
    """Whether any string in the JSON ``value`` (keys too) contains ``needle``."""
    if isinstance(value, str):
        return needle in value
    if isinstance(value, dict):
        return any(_holds(k, needle) or _holds(v, needle) for k, v in value.items())
    if isinstance(value, list):
        return any(_holds(v, needle) for v in value)
    return False


def _is_generation(target: Target, r: Recorded) -> bool:
    if r.method != "POST":
        return False
    path = r.target.split("?", 1)[0]
    if target.dialect == "anthropic":
        return path.endswith("/messages")
    if target.dialect == "openai-responses":
        return path.endswith("/responses")
    if target.dialect == "gemini":
        return path.endswith((":streamGenerateContent", ":generateContent"))
    return path.endswith("/chat/completions")


def _inner(target: Target, body: dict[str, Any]) -> dict[str, Any]:
    """The Gemini API request in ``body``: Code Assist wraps it in ``request``."""
    inner = body.get("request")
    return inner if target.dialect == "gemini" and isinstance(inner, dict) else body


def tools_offered(target: Target, body: dict[str, Any]) -> list[str]:
    """The names of the tools a request offers the model, as its API spells them (a
    tool without a name, such as a hosted search, by its type or key)."""
    body = _inner(target, body)
    tools = body.get("tools") or []
    if not isinstance(tools, list):
        return ["<tools is not a list>"]
    names: list[str] = []
    for tool in tools:
        if not isinstance(tool, dict):
            names.append(str(tool)[:40])
        elif target.dialect == "gemini":
            for key, value in tool.items():
                if key == "functionDeclarations" and isinstance(value, list):
                    names += [str(d.get("name")) for d in value if isinstance(d, dict)]
                elif key != "functionDeclarations":
                    names.append(key)
        elif target.dialect in ("openai-chat", "mistral"):
            function = tool.get("function")
            names.append(str(function.get("name")) if isinstance(function, dict)
                         else str(tool.get("type")))
        else:
            names.append(str(tool.get("name") or tool.get("type")))
    return names


def system_text(target: Target, body: dict[str, Any]) -> str:
    """The system text of one request, its parts joined."""
    if target.dialect == "anthropic":
        return _texts(body.get("system"))
    if target.dialect == "openai-responses":
        developer = [_texts(item.get("content")) for item in body.get("input") or []
                     if isinstance(item, dict) and item.get("role") in ("system", "developer")]
        return "\n".join([_texts(body.get("instructions")), *developer])
    if target.dialect == "gemini":
        return _texts((_inner(target, body).get("systemInstruction") or {}).get("parts"))
    return "\n".join(_texts(m.get("content")) for m in body.get("messages") or []
                     if isinstance(m, dict) and m.get("role") == "system")


def _texts(value: Any) -> str:
    if isinstance(value, str):
        return value
    if isinstance(value, dict):
        return _texts(value.get("text"))
    if isinstance(value, Iterable):
        return "\n".join(t for t in (_texts(v) for v in value) if t)
    return ""
