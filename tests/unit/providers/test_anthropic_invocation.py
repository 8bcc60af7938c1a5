"""The claude argv/stdin/files: exact argv, no client text on argv, the turn as one stream-json
line on stdin (text, then images)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from olp.actors import CapabilityMissing, CliAdapter
from olp.ir import ChatRequest, ImagePart, Message, TextPart
from olp.providers.anthropic import ADAPTER

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
    inv = ADAPTER.invocation(req, binary="/usr/bin/claude", model="claude-x",
                                        workdir=WORKDIR, extra_args=extra_args)
    return list(inv.argv), turn_text(inv.stdin), dict(inv.files)


def turn(stdin: bytes) -> list[dict[str, object]]:
    """The content blocks of the one stream-json user line on stdin."""
    assert stdin.endswith(b"\n") and stdin.count(b"\n") == 1
    line = json.loads(stdin)
    assert line["type"] == "user" and line["message"]["role"] == "user"
    blocks: list[dict[str, object]] = line["message"]["content"]
    return blocks


def turn_text(stdin: bytes) -> str:
    return "".join(str(b["text"]) for b in turn(stdin) if b["type"] == "text")


def test_adapter_satisfies_the_protocol() -> None:
    adapter: CliAdapter = ADAPTER
    assert adapter.name == "anthropic"


def test_argv_is_exact_and_prompt_goes_on_stdin() -> None:
    argv, stdin, files = invoke(request(msg("system", SYSTEM), msg("user", USER_TEXT)),
                                extra_args=("--effort", "low"))
    assert argv == [
        "/usr/bin/claude", "-p", "--input-format", "stream-json", "--output-format",
        "stream-json", "--verbose",
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
    inv = ADAPTER.invocation(req, binary="claude", model="m", workdir=WORKDIR)
    assert turn_text(inv.stdin).startswith("The conversation so far is below.")
    assert turn_text(inv.stdin).endswith("with no label.")


def test_images_become_base64_blocks_after_the_text_in_message_order() -> None:
    first = Message(role="user", content=(TextPart(text="look"),
                                          ImagePart(url="data:image/png;base64,iVBORw0=")))
    second = Message(role="user", content=(ImagePart(url="data:image/jpg;base64,/9j/"),))
    inv = ADAPTER.invocation(request(first, msg("assistant", "ok"), second),
                                        binary="claude", model="m", workdir=WORKDIR)
    blocks = turn(inv.stdin)
    assert blocks[0]["type"] == "text" and "[image]" in str(blocks[0]["text"])
    assert blocks[1:] == [
        {"type": "image", "source": {"type": "base64", "media_type": "image/png",
                                     "data": "iVBORw0="}},
        {"type": "image", "source": {"type": "base64", "media_type": "image/jpeg",
                                     "data": "/9j/"}},
    ]
    assert "iVBORw0" not in " ".join(inv.argv)


def test_an_image_alone_is_a_turn_without_text() -> None:
    only = Message(role="user", content=(ImagePart(url="data:image/gif;base64,R0lGODlh"),))
    inv = ADAPTER.invocation(request(only), binary="claude", model="m",
                                        workdir=WORKDIR)
    assert [b["type"] for b in turn(inv.stdin)] == ["image"]


@pytest.mark.parametrize(("url", "says"), [
    ("https://example.com/cat.png", "does not fetch"),
    ("file:///etc/passwd", "not data: URLs"),
    ("data:image/tiff;base64,AAAA", "image/tiff"),
    ("data:image/png;base64,", "undecodable"),
])
def test_images_claude_cannot_take_raise_capability_missing(url: str, says: str) -> None:
    image = Message(role="user", content=(TextPart(text="look"), ImagePart(url=url)))
    with pytest.raises(CapabilityMissing) as info:
        invoke(request(image))
    assert says in str(info.value)


def test_the_spawn_depends_on_the_system_text_and_model_never_on_the_conversation() -> None:
    """What a warm claude is started with (argv, files, env) is the same for every request
    sharing the system text, model and tools: only stdin carries the conversation."""
    def spawn(*messages: Message) -> tuple[object, ...]:
        inv = ADAPTER.invocation(request(*messages), binary="claude", model="m",
                                            workdir=WORKDIR)
        return tuple(inv.argv), dict(inv.files), dict(inv.env), dict(inv.binary_files)

    one = spawn(msg("system", SYSTEM), msg("user", "first question"))
    two = spawn(msg("system", SYSTEM), msg("user", "other"), msg("assistant", "x"),
                msg("user", "more"))
    other_system = spawn(msg("system", "You are verbose."), msg("user", "first question"))
    assert one == two
    assert one != other_system


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
