"""The claude argv/stdin/files: exact argv, no client text on argv, images refused."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from olp.actors import CapabilityMissing, CliAdapter
from olp.actors.anthropic import AnthropicAdapter
from olp.ir import ChatRequest, ImagePart, Message, TextPart

WORKDIR = Path("/tmp/olp-job-x/work")
USER_TEXT = "Tell me a secret about ünïcode ✓ and $HOME `rm -rf`"
SYSTEM = "You are terse."
DEVELOPER = "Answer in French."


def msg(role: str, text: str) -> Message:
    return Message(role=role, content=(TextPart(text=text),))  # type: ignore[arg-type]


def request(*messages: Message, **kw: object) -> ChatRequest:
    return ChatRequest(model="sonnet", messages=messages, **kw)  # type: ignore[arg-type]


def invoke(req: ChatRequest, extra_args: tuple[str, ...] = ()) -> tuple[list[str], str, dict[
        str, str]]:
    inv = AnthropicAdapter().invocation(req, binary="/usr/bin/claude", model="claude-x",
                                        workdir=WORKDIR, extra_args=extra_args)
    return list(inv.argv), inv.stdin.decode("utf-8"), dict(inv.files)


def test_adapter_satisfies_the_protocol() -> None:
    adapter: CliAdapter = AnthropicAdapter()
    assert adapter.name == "anthropic"


def test_argv_is_exact_and_prompt_goes_on_stdin() -> None:
    argv, stdin, files = invoke(request(msg("system", SYSTEM), msg("user", USER_TEXT)),
                                extra_args=("--effort", "low"))
    assert argv == [
        "/usr/bin/claude", "-p", "--output-format", "stream-json", "--verbose",
        "--include-partial-messages", "--tools", "", "--strict-mcp-config",
        "--setting-sources", "", "--disable-slash-commands", "--safe-mode",
        "--no-session-persistence",
        "--model", "claude-x", "--system-prompt-file", str(WORKDIR / "system-prompt.txt"),
        "--effort", "low",
    ]
    assert stdin == USER_TEXT
    assert files == {"system-prompt.txt": SYSTEM}


def test_every_tool_and_outside_source_is_kept_away() -> None:
    """claude is a model, not an agent: no built-in tool, no MCP server, no settings, skills,
    commands or CLAUDE.md from anywhere (see the module docstring for how each was verified)."""
    argv, _, _ = invoke(request(msg("user", "hi")))
    assert argv[argv.index("--tools") + 1] == ""
    assert argv[argv.index("--setting-sources") + 1] == ""
    for flag in ("--strict-mcp-config", "--disable-slash-commands", "--safe-mode"):
        assert flag in argv
    for widening in ("--mcp-config", "--settings", "--add-dir", "--plugin-dir", "--agents",
                     "--allowedTools", "--permission-mode", "--dangerously-skip-permissions"):
        assert widening not in argv


def test_extra_args_come_after_the_lockdown() -> None:
    """An owner's ``extra_args`` are the deliberate way to widen a spawn: they come last, so a
    repeated option (``--tools Bash``) wins over OLP's."""
    argv, _, _ = invoke(request(msg("user", "hi")), extra_args=("--tools", "Bash"))
    assert argv[-2:] == ["--tools", "Bash"]
    assert argv.index("--safe-mode") < len(argv) - 2


def test_no_client_text_on_argv_for_a_conversation() -> None:
    req = request(msg("system", SYSTEM), msg("developer", DEVELOPER), msg("user", USER_TEXT),
                  msg("assistant", "ASSISTANT-TURN"), msg("user", "SECOND-QUESTION"),
                  response_format={"type": "json_schema",
                                   "json_schema": {"name": "n", "schema": {"title": "SCHEMA"}}})
    argv, stdin, files = invoke(req)
    for needle in (USER_TEXT, SYSTEM, DEVELOPER, "ASSISTANT-TURN", "SECOND-QUESTION", "SCHEMA",
                   "secret", "French"):
        assert not any(needle in arg for arg in argv), needle
    for needle in (USER_TEXT, "ASSISTANT-TURN", "SECOND-QUESTION", "SCHEMA"):
        assert needle in stdin
    assert SYSTEM not in stdin and DEVELOPER not in stdin  # system text is in the file only
    assert files == {"system-prompt.txt": f"{SYSTEM}\n\n{DEVELOPER}"}


def test_default_system_prompt_when_none_given() -> None:
    _, _, files = invoke(request(msg("user", "hi")))
    assert files == {"system-prompt.txt": "You are a helpful assistant."}
    _, _, blank = invoke(request(msg("system", "  \n"), msg("user", "hi")))
    assert blank == files


def test_stdin_is_utf8_of_the_flattened_prompt() -> None:
    req = request(msg("user", "a"), msg("assistant", "b"), msg("user", "c"))
    inv = AnthropicAdapter().invocation(req, binary="claude", model="m", workdir=WORKDIR)
    assert inv.stdin.decode("utf-8").startswith("The conversation so far is below.")
    assert inv.stdin.decode("utf-8").endswith("with no label.")


@pytest.mark.parametrize("where", ["user", "system", "assistant"])
def test_images_anywhere_raise_capability_missing(where: str) -> None:
    image = Message(role=where, content=(TextPart(text="look"),  # type: ignore[arg-type]
                                         ImagePart(url="data:image/png;base64,AAAA")))
    messages = [msg("user", "hi"), image] if where != "user" else [image]
    with pytest.raises(CapabilityMissing) as info:
        invoke(request(*messages))
    assert info.value.capability == "images"


def test_json_object_instruction_heads_the_prompt() -> None:
    _, stdin, _ = invoke(request(msg("user", "list three fruits"),
                                 response_format={"type": "json_object"}))
    head, rest = stdin.split("\n\n", 1)
    assert head.startswith("Respond with a single JSON object only")
    assert rest == "list three fruits"


def test_json_schema_instruction_includes_the_schema() -> None:
    schema = {"type": "object", "properties": {"b": {"type": "string"}, "a": {"type": "integer"}},
              "required": ["a"]}
    _, stdin, _ = invoke(request(msg("user", "go"), response_format={
        "type": "json_schema", "json_schema": {"name": "x", "strict": True, "schema": schema}}))
    head, rest = stdin.rsplit("\n\n", 1)
    assert head.startswith("Respond with a single JSON object only")
    assert json.loads(head.split("JSON Schema:\n", 1)[1]) == schema
    assert rest == "go"


def test_text_response_format_adds_nothing() -> None:
    _, stdin, _ = invoke(request(msg("user", "go"), response_format={"type": "text"}))
    assert stdin == "go"
