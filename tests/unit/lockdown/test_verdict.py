"""The lockdown verdict (ADR 0024): :func:`judge` per vendor dialect, on hand-built recorded
requests shaped like the real APIs' (anthropic ``tools[].name`` and ``system`` blocks;
openai-responses ``tools[]`` and ``input`` developer messages; gemini
``tools[].functionDeclarations`` and hosted tools; openai-chat / mistral
``tools[].function.name`` and system messages)."""

from __future__ import annotations

from typing import Any

import pytest

from olp.lockdown import TARGETS, Finding, judge
from olp.lockdown._vendor_mock import Recorded
from olp.lockdown._verdict import SYSTEM_SLACK, system_text, tools_offered

SYSTEM = "OLP lockdown check 0123456789abcdef: you are a model, reply in one word."
CANARY = "OLP-LOCKDOWN-CANARY-0123456789abcdef"
USER = "Reply with the single word: OK"
NO_MODEL = "the CLI sent the mock no model request, so nothing could be checked"
NOT_SYSTEM = "OLP's system text did not reach the model as the system text"
INLINED = "a file from the CLI's home was inlined into the prompt"
#: An agent prompt as codex (21,500 characters) and vibe (16,000) send theirs.
AGENT_PROMPT = "You are a coding agent running in a terminal. " * 400

CLAUDE = TARGETS["claude"]
CODEX = TARGETS["codex"]
GEMINI = TARGETS["gemini"]
QWEN = TARGETS["qwen"]
VIBE = TARGETS["vibe"]


def post(target: str, body: Any, *, host: str = "127.0.0.1:4000") -> Recorded:
    return Recorded("POST", target, host, body, False)


# --- bodies as each vendor's API spells them -------------------------------------------------

def anthropic(*, system: Any = None, tools: list[Any] | None = None,
              user: str = USER) -> dict[str, Any]:
    blocks = system if system is not None else [
        {"type": "text", "text": "x-anthropic-billing-header: cc_version=2.1.332;"},
        {"type": "text", "text": SYSTEM, "cache_control": {"type": "ephemeral"}}]
    return {"model": "claude-sonnet-4-5", "max_tokens": 32000, "stream": True,
            "system": blocks, "tools": tools or [],
            "messages": [{"role": "user", "content": [{"type": "text", "text": user}]}]}


def claude_request(body: dict[str, Any]) -> Recorded:
    return post("/v1/messages?beta=true", body)


def responses(*, developer: str = AGENT_PROMPT, user: str = f"{SYSTEM}\n\n{USER}",
              tools: list[Any] | None = None, instructions: str | None = None
              ) -> dict[str, Any]:
    body: dict[str, Any] = {
        "model": "gpt-5.1-codex", "stream": True, "tools": tools or [],
        "input": [
            {"type": "message", "role": "developer",
             "content": [{"type": "input_text", "text": developer}]},
            {"type": "message", "role": "user",
             "content": [{"type": "input_text", "text": user}]}]}
    if instructions is not None:
        body["instructions"] = instructions
    return body


def gemini(*, system: str = SYSTEM, tools: list[Any] | None = None) -> dict[str, Any]:
    body: dict[str, Any] = {
        "contents": [{"role": "user", "parts": [{"text": USER}]}],
        "systemInstruction": {"role": "user", "parts": [{"text": system}]},
        "generationConfig": {"temperature": 0}}
    if tools is not None:
        body["tools"] = tools
    return body


GEMINI_ROUTE = "/v1beta/models/gemini-2.5-pro:streamGenerateContent?alt=sse"


def chat(*, system: str | None = SYSTEM, user: str = USER,
         tools: list[Any] | None = None) -> dict[str, Any]:
    messages: list[dict[str, Any]] = []
    if system is not None:
        messages.append({"role": "system", "content": system})
    messages.append({"role": "user", "content": user})
    body: dict[str, Any] = {"model": "m", "stream": True, "messages": messages}
    if tools is not None:
        body["tools"] = tools
    return body


def functions(*names: str) -> list[dict[str, Any]]:
    return [{"type": "function", "function": {"name": n, "parameters": {"type": "object"}}}
            for n in names]


def judged(target: Any, *requests: Recorded) -> Finding:
    return judge(target, list(requests), system=SYSTEM, canary=CANARY)


# --- clean requests ---------------------------------------------------------------------------

@pytest.mark.parametrize(("target", "request_"), [
    (CLAUDE, claude_request(anthropic())),
    (CODEX, post("/v1/responses", responses())),
    (GEMINI, post(GEMINI_ROUTE, gemini())),
    (QWEN, post("/v1/chat/completions", chat(system=SYSTEM + "\n" + "Reply in English. " * 50))),
    (VIBE, post("/v1/chat/completions", chat(system=AGENT_PROMPT, user=f"{SYSTEM}\n{USER}",
                                             tools=functions(*sorted(VIBE.floor))))),
], ids=["claude", "codex", "gemini", "qwen", "vibe"])
def test_a_clean_request_is_verified(target: Any, request_: Recorded) -> None:
    assert judged(target, request_) == Finding(offered=(), problems=(), checked=True)


# --- tools ------------------------------------------------------------------------------------

def test_anthropic_tools_are_named_sorted_and_first() -> None:
    body = anthropic(tools=[{"name": "Read", "input_schema": {}},
                            {"name": "Bash", "input_schema": {}},
                            {"type": "web_search_20250305", "name": "web_search"}])
    finding = judged(CLAUDE, claude_request(body))
    assert finding.offered == ("Bash", "Read", "web_search")
    assert finding.problems == ("offers Bash, Read, web_search",)
    assert finding.checked


def test_tools_of_every_model_request_are_merged_once() -> None:
    # claude sends more than one model request (a title or quota probe, then the answer)
    first = anthropic(tools=[{"name": "Read"}])
    second = anthropic(tools=[{"name": "Read"}, {"name": "Agent"}])
    finding = judged(CLAUDE, claude_request(first), claude_request(second))
    assert finding.offered == ("Agent", "Read")
    assert finding.problems == ("offers Agent, Read",)


def test_responses_tools_by_name_or_hosted_type() -> None:
    body = responses(tools=[{"type": "function", "name": "shell", "parameters": {}},
                            {"type": "web_search"},
                            {"type": "custom", "name": "apply_patch"}])
    finding = judged(CODEX, post("/v1/responses", body))
    assert finding.offered == ("apply_patch", "shell", "web_search")
    assert finding.problems == ("offers apply_patch, shell, web_search",)


def test_gemini_function_declarations_and_hosted_tools() -> None:
    body = gemini(tools=[{"functionDeclarations": [{"name": "run_shell_command"},
                                                   {"name": "read_file"}]},
                         {"googleSearch": {}},
                         {"codeExecution": {}, "functionDeclarations": []}])
    finding = judged(GEMINI, post(GEMINI_ROUTE, body))
    assert finding.offered == ("codeExecution", "googleSearch", "read_file",
                               "run_shell_command")
    assert finding.problems == (
        "offers codeExecution, googleSearch, read_file, run_shell_command",)


def test_gemini_whole_answer_route_is_judged_too() -> None:
    body = gemini(tools=[{"functionDeclarations": [{"name": "glob"}]}])
    finding = judged(GEMINI, post("/v1beta/models/gemini-2.5-flash:generateContent", body))
    assert finding.offered == ("glob",)


def test_openai_chat_tools_by_function_name() -> None:
    body = chat(tools=[*functions("write_file", "run_shell_command"),
                       {"type": "web_search_preview"}])
    finding = judged(QWEN, post("/v1/chat/completions", body))
    assert finding.offered == ("run_shell_command", "web_search_preview", "write_file")
    assert finding.problems == ("offers run_shell_command, web_search_preview, write_file",)


def test_vibe_floor_is_not_reported_but_a_tool_beyond_it_is() -> None:
    assert VIBE.floor == {"search_tool_functions", "run_typescript", "read_file",
                          "write_file", "edit", "bash", "skill"}
    body = chat(system=AGENT_PROMPT, user=f"{SYSTEM}\n{USER}",
                tools=functions(*sorted(VIBE.floor), "web_fetch", "grep"))
    finding = judged(VIBE, post("/v1/chat/completions", body))
    assert finding.offered == ("grep", "web_fetch")
    assert finding.problems == ("offers grep, web_fetch",)


def test_the_floor_is_per_cli() -> None:
    # vibe's floor tools offered by qwen are not excused
    body = chat(tools=functions("bash", "read_file"))
    assert judged(QWEN, post("/v1/chat/completions", body)).offered == ("bash", "read_file")


def test_tools_that_are_not_a_list_are_a_problem() -> None:
    body = anthropic()
    body["tools"] = {"name": "Bash"}
    assert judged(CLAUDE, claude_request(body)).problems == ("offers <tools is not a list>",)


def test_tools_offered_spells_names_as_the_api_does() -> None:
    assert tools_offered(CLAUDE, {"tools": [{"name": "Bash"}, {"type": "bash_20250124"}]}) == [
        "Bash", "bash_20250124"]
    assert tools_offered(QWEN, {"tools": functions("a") + [{"type": "x"}]}) == ["a", "x"]
    assert tools_offered(GEMINI, {"tools": [{"functionDeclarations": [{"name": "a"}],
                                             "googleSearch": {}}]}) == ["a", "googleSearch"]
    assert tools_offered(CODEX, {}) == []
    assert tools_offered(CODEX, {"tools": None}) == []


# --- the system text --------------------------------------------------------------------------

def test_claude_without_olps_system_text_fails() -> None:
    body = anthropic(system=[{"type": "text", "text": "You are Claude Code."}])
    finding = judged(CLAUDE, claude_request(body))
    assert finding.problems == (NOT_SYSTEM,)
    assert finding.checked and finding.offered == ()


def test_claude_with_olps_text_only_in_the_prompt_fails() -> None:
    # for a CLI that does not send its own prompt, the marker must be the system text
    body = anthropic(system=[{"type": "text", "text": "You are Claude Code."}],
                     user=f"{SYSTEM}\n{USER}")
    assert judged(CLAUDE, claude_request(body)).problems == (NOT_SYSTEM,)


def test_system_text_as_a_plain_string() -> None:
    assert judged(CLAUDE, claude_request(anthropic(system=SYSTEM))).problems == ()


@pytest.mark.parametrize(("target", "request_"), [
    (GEMINI, post(GEMINI_ROUTE, gemini(system="You are Gemini CLI."))),
    (QWEN, post("/v1/chat/completions", chat(system=None, user=f"{SYSTEM}\n{USER}"))),
], ids=["gemini", "qwen"])
def test_missing_system_marker_per_dialect(target: Any, request_: Recorded) -> None:
    assert judged(target, request_).problems == (NOT_SYSTEM,)


def test_one_model_request_without_the_marker_is_enough_to_fail() -> None:
    bad = anthropic(system=[{"type": "text", "text": "Generate a title."}])
    finding = judged(CLAUDE, claude_request(anthropic()), claude_request(bad))
    assert finding.problems == (NOT_SYSTEM,)


def test_claude_agent_prompt_beyond_the_slack_fails() -> None:
    extra = "x" * SYSTEM_SLACK  # joined to OLP's block with a newline: SLACK + 1 besides
    body = anthropic(system=[{"type": "text", "text": SYSTEM}, {"type": "text", "text": extra}])
    finding = judged(CLAUDE, claude_request(body))
    assert finding.problems == (
        f"the CLI sent its own agent prompt ({SYSTEM_SLACK + 1} characters besides OLP's "
        "system text)",)


def test_claude_system_text_within_the_slack_passes() -> None:
    extra = "x" * (SYSTEM_SLACK - 1)  # plus the joining newline: exactly SYSTEM_SLACK
    body = anthropic(system=[{"type": "text", "text": SYSTEM}, {"type": "text", "text": extra}])
    assert judged(CLAUDE, claude_request(body)).problems == ()


def test_an_agent_prompt_with_tools_lists_both_tools_first() -> None:
    body = anthropic(system=[{"type": "text", "text": AGENT_PROMPT},
                             {"type": "text", "text": SYSTEM}],
                     tools=[{"name": "Bash"}])
    problems = judged(CLAUDE, claude_request(body)).problems
    assert problems[0] == "offers Bash"
    assert len(problems) == 2 and problems[1].startswith("the CLI sent its own agent prompt (")


def test_codex_and_vibe_may_send_their_own_prompt() -> None:
    assert CODEX.own_system_prompt and VIBE.own_system_prompt
    assert not CLAUDE.own_system_prompt
    codex = judged(CODEX, post("/v1/responses", responses(instructions=AGENT_PROMPT)))
    assert codex.problems == ()
    vibe = judged(VIBE, post("/v1/chat/completions",
                             chat(system=AGENT_PROMPT, user=f"{SYSTEM}\n{USER}")))
    assert vibe.problems == ()


def test_codex_and_vibe_still_need_olps_text_somewhere() -> None:
    codex = judged(CODEX, post("/v1/responses", responses(user=USER)))
    assert codex.problems == (NOT_SYSTEM,)
    vibe = judged(VIBE, post("/v1/chat/completions", chat(system=AGENT_PROMPT, user=USER)))
    assert vibe.problems == (NOT_SYSTEM,)


def test_system_text_per_dialect() -> None:
    assert system_text(CLAUDE, anthropic(system=[{"type": "text", "text": "a"},
                                                 {"type": "text", "text": "b"}])) == "a\nb"
    body = responses(developer="dev", instructions="inst")
    assert system_text(CODEX, body) == "inst\ndev"
    assert system_text(GEMINI, gemini(system="g")) == "g"
    two = {"messages": [{"role": "system", "content": "s1"}, {"role": "user", "content": "u"},
                        {"role": "system", "content": [{"type": "text", "text": "s2"}]}]}
    assert system_text(QWEN, two) == "s1\ns2"
    assert system_text(CLAUDE, {}) == ""
    assert system_text(GEMINI, {}) == ""


# --- canaries ---------------------------------------------------------------------------------

def test_a_canary_in_the_prompt_fails() -> None:
    body = anthropic(user=f"Contents of CLAUDE.md:\n{CANARY}\n\n{USER}")
    assert judged(CLAUDE, claude_request(body)).problems == (INLINED,)


def test_a_canary_in_the_system_text_fails_codex() -> None:
    body = responses(developer=f"{AGENT_PROMPT}\n# AGENTS.md\n{CANARY}")
    assert judged(CODEX, post("/v1/responses", body)).problems == (INLINED,)


def test_a_canary_in_any_request_counts_even_one_not_judged_for_tools() -> None:
    count = post("/v1/messages/count_tokens", anthropic(user=CANARY))
    finding = judged(CLAUDE, claude_request(anthropic()), count)
    assert finding.problems == (INLINED,)
    deep = post("/v1/telemetry", {"events": [{"payload": {"memory": [CANARY]}}]})
    assert judged(QWEN, post("/v1/chat/completions", chat()), deep).problems == (INLINED,)


def test_a_canary_in_a_foreign_request_counts() -> None:
    leak = Recorded("POST", "http://collector.example/v1", "collector.example",
                    {"note": CANARY}, True)
    finding = judged(GEMINI, post(GEMINI_ROUTE, gemini()), leak)
    assert finding.problems == (INLINED, "contacted another host: collector.example")


# --- other hosts ------------------------------------------------------------------------------

def test_a_connect_to_another_host_fails() -> None:
    connect = Recorded("CONNECT", "ab.chatgpt.com:443", "ab.chatgpt.com:443", None, True)
    finding = judged(CODEX, connect, post("/v1/responses", responses()))
    assert finding.problems == ("contacted another host: ab.chatgpt.com:443",)
    assert finding.checked


def test_an_absolute_form_request_names_its_host() -> None:
    with_host = Recorded("GET", "http://example.com/x", "example.com", None, True)
    without_host = Recorded("GET", "http://other.example/y", "", None, True)
    finding = judged(CLAUDE, claude_request(anthropic()), with_host, without_host)
    assert finding.problems == ("contacted another host: example.com, http://other.example/y",)


def test_other_hosts_are_deduplicated_sorted_and_capped_at_five() -> None:
    hosts = [f"h{i}.example:443" for i in (6, 3, 1, 5, 2, 4)]
    requests = [Recorded("CONNECT", h, h, None, True) for h in hosts + hosts]
    finding = judged(QWEN, post("/v1/chat/completions", chat()), *requests)
    assert finding.problems == ("contacted another host: h1.example:443, h2.example:443, "
                                "h3.example:443, h4.example:443, h5.example:443",)


def test_a_foreign_generation_request_is_not_a_model_request() -> None:
    # the model route of another host is not what the mock answered: nothing was judged
    away = Recorded("POST", "https://api.anthropic.com/v1/messages", "api.anthropic.com",
                    anthropic(tools=[{"name": "Bash"}]), True)
    finding = judged(CLAUDE, away)
    assert finding == Finding(offered=(), problems=(
        NO_MODEL, "contacted another host: api.anthropic.com"), checked=False)


# --- nothing to judge -------------------------------------------------------------------------

@pytest.mark.parametrize("requests", [
    [],
    [Recorded("GET", "/v1/models", "127.0.0.1:4000", None, False)],
    [post("/v1/messages", None)],  # not JSON
    [post("/v1/messages", ["not", "an", "object"])],
    [post("/v1/messages/count_tokens", anthropic())],
    [Recorded("GET", "/v1/messages", "127.0.0.1:4000", anthropic(), False)],
], ids=["none", "get", "not-json", "json-list", "count-tokens", "get-messages"])
def test_no_model_request_is_not_checked(requests: list[Recorded]) -> None:
    finding = judged(CLAUDE, *requests)
    assert finding == Finding(offered=(), problems=(NO_MODEL,), checked=False)


@pytest.mark.parametrize(("target", "route"), [
    (CODEX, "/v1/chat/completions"),  # codex speaks responses
    (QWEN, "/v1/responses"),
    (GEMINI, "/v1beta/models/gemini-2.5-pro:countTokens"),
    (VIBE, "/v1/messages"),
])
def test_another_dialects_route_is_not_a_model_request(target: Any, route: str) -> None:
    assert not judged(target, post(route, chat())).checked


def test_non_generation_routes_are_not_judged_for_tools() -> None:
    tools = [{"name": "Bash"}, {"name": "Read"}]
    count = post("/v1/messages/count_tokens", anthropic(tools=tools))
    models = Recorded("GET", "/v1/models?tools=1", "127.0.0.1:4000", {"tools": tools}, False)
    finding = judged(CLAUDE, count, models, claude_request(anthropic()))
    assert finding == Finding(offered=(), problems=(), checked=True)


def test_every_problem_at_once_in_order() -> None:
    body = anthropic(system=[{"type": "text", "text": "You are Claude Code."}],
                     tools=[{"name": "Write"}, {"name": "Bash"}], user=CANARY)
    connect = Recorded("CONNECT", "statsig.anthropic.com:443", "", None, True)
    finding = judged(CLAUDE, claude_request(body), connect)
    assert finding == Finding(offered=("Bash", "Write"), problems=(
        "offers Bash, Write", NOT_SYSTEM, INLINED,
        "contacted another host: statsig.anthropic.com:443"), checked=True)


# --- a Google login: Code Assist, and Google's identity host ------------------------------------

def code_assist(inner: dict[str, Any]) -> Recorded:
    return post("/v1internal:streamGenerateContent?alt=sse",
                {"model": "gemini-2.5-pro", "project": "p", "request": inner})


def test_code_assist_wraps_the_gemini_request() -> None:
    assert judged(GEMINI, code_assist(gemini())) == Finding()
    tooled = judged(GEMINI, code_assist(gemini(tools=[{"functionDeclarations": [
        {"name": "run_shell_command"}]}])))
    assert tooled.offered == ("run_shell_command",)


def test_the_identity_host_is_allowed_only_to_an_emulated_login() -> None:
    userinfo = Recorded("CONNECT", "www.googleapis.com:443", "www.googleapis.com:443", None,
                        True)
    requests = [userinfo, code_assist(gemini())]
    assert judge(GEMINI, requests, system=SYSTEM, canary=CANARY, login=True) == Finding()
    assert judge(GEMINI, requests, system=SYSTEM, canary=CANARY).problems == (
        "contacted another host: www.googleapis.com:443",)
    assert judge(CLAUDE, [userinfo, claude_request(anthropic())], system=SYSTEM,
                 canary=CANARY, login=True).problems == (
        "contacted another host: www.googleapis.com:443",)
