"""The vibe argv/stdin/env: exact argv, no client text on argv, system text at the head of the
prompt, the model, a per-spawn VIBE_HOME and every tool off in the env, images refused."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from olp.actors import CapabilityMissing, CliAdapter
from olp.ir import ChatRequest, ImagePart, Message, TextPart
from olp.providers.vibe import ADAPTER
from olp.providers.vibe._invocation import TOOLS_OFF_ENV

BASE = Path("/tmp/olp-job-x")
WORKDIR = BASE / "work"
USER_TEXT = "Tell me a secret about ünïcode ✓ and $HOME `rm -rf`"
SYSTEM = "You are terse."
DEVELOPER = "Answer in French."


def msg(role: str, text: str) -> Message:
    return Message(role=role, content=(TextPart(text=text),))  # type: ignore[arg-type]


def request(*messages: Message, **kw: object) -> ChatRequest:
    return ChatRequest(model="devstral", messages=messages, **kw)  # type: ignore[arg-type]


def invoke(req: ChatRequest, extra_args: tuple[str, ...] = (), model: str = "devstral-2-25-12",
           ) -> tuple[list[str], str, dict[str, str]]:
    inv = ADAPTER.invocation(req, binary="/opt/vibe/bin/vibe", model=model,
                                   workdir=WORKDIR, extra_args=extra_args)
    assert inv.files == {} and inv.binary_files == {}
    return list(inv.argv), inv.stdin.decode("utf-8"), dict(inv.env)


def test_adapter_satisfies_the_protocol() -> None:
    adapter: CliAdapter = ADAPTER
    assert adapter.name == "mistral"


def test_argv_is_exact_and_prompt_goes_on_stdin() -> None:
    argv, stdin, env = invoke(request(msg("user", USER_TEXT)), extra_args=("--max-turns", "1"))
    assert argv == ["/opt/vibe/bin/vibe", "-p", "--output", "streaming",
                    "--output-dir", str(WORKDIR / "out"), "--disabled-tools", "*",
                    "--max-turns", "1"]
    assert stdin == USER_TEXT


def test_model_and_vibe_home_are_in_the_spawn_env() -> None:
    _, _, env = invoke(request(msg("user", "hi")), model="devstral-2-25-12")
    assert env["VIBE_HOME"] == str(BASE / "home" / ".vibe")
    assert env["VIBE_ACTIVE_MODEL"] == "devstral-2-25-12"
    # vibe falls back silently to its default for an alias it does not know: define it
    assert json.loads(env["VIBE_MODELS"]) == [
        {"alias": "devstral-2-25-12", "name": "devstral-2-25-12", "provider": "mistral"}]
    assert set(env) == {"VIBE_HOME", "VIBE_ACTIVE_MODEL", "VIBE_MODELS", *TOOLS_OFF_ENV}


def test_every_tool_is_off_in_the_spawn_env() -> None:
    """vibe as a model, not an agent: every tool out of the catalogue (so the runtime denies
    its builtins), no subagents, processes, MCP servers, connectors, bypass or git context."""
    _, _, env = invoke(request(msg("user", "hi")))
    assert json.loads(env["VIBE_DISABLED_TOOLS"]) == ["*"]
    assert json.loads(env["VIBE_DISABLED_SKILLS"]) == ["*"]
    for name in ("VIBE_ENABLE_SUBAGENTS", "VIBE_ENABLE_BACKGROUND_PROCESSES", "VIBE_ENABLE_MCP",
                 "VIBE_ENABLE_CONNECTORS", "VIBE_BYPASS_TOOL_PERMISSIONS",
                 "VIBE_EXPERIMENTAL_ENABLE_REGISTRY_SKILLS", "VIBE_INCLUDE_PROJECT_CONTEXT"):
        assert env[name] == "false", name
    # off, vibe refuses to start for an owner whose config picks the auto-approve agent
    assert "VIBE_ENABLE_AUTO_APPROVE" not in env


def test_extra_args_cannot_displace_the_tool_settings() -> None:
    """The owner's extra_args come after OLP's ``--disabled-tools *`` (a list vibe
    concatenates across layers, so a later flag adds to it) and leave the env alone."""
    argv, _, env = invoke(request(msg("user", "hi")),
                          extra_args=("--enabled-tools", "bash", "--yolo"))
    assert argv[-5:] == ["--disabled-tools", "*", "--enabled-tools", "bash", "--yolo"]
    assert {k: env[k] for k in TOOLS_OFF_ENV} == TOOLS_OFF_ENV


def test_system_text_heads_the_prompt() -> None:
    _, stdin, _ = invoke(request(msg("system", SYSTEM), msg("developer", DEVELOPER),
                                 msg("user", USER_TEXT)))
    assert stdin.startswith(f"System instructions:\n{SYSTEM}\n\n{DEVELOPER}\n\n")
    assert USER_TEXT in stdin
    assert stdin.index(SYSTEM) < stdin.index(USER_TEXT)


def test_no_client_text_on_argv_or_env_for_a_conversation() -> None:
    req = request(msg("system", SYSTEM), msg("developer", DEVELOPER), msg("user", USER_TEXT),
                  msg("assistant", "ASSISTANT-TURN"), msg("user", "SECOND-QUESTION"),
                  response_format={"type": "json_schema",
                                   "json_schema": {"name": "n", "schema": {"title": "SCHEMA"}}})
    argv, stdin, env = invoke(req)
    for needle in (USER_TEXT, SYSTEM, DEVELOPER, "ASSISTANT-TURN", "SECOND-QUESTION", "SCHEMA",
                   "secret", "French"):
        assert not any(needle in a for a in argv), needle
        assert not any(needle in v for v in env.values()), needle
        assert needle in stdin, needle
    assert stdin.startswith("Respond with a single JSON object only")
    assert stdin.index("ASSISTANT-TURN") < stdin.index("SECOND-QUESTION")


def test_a_huge_prompt_stays_off_argv() -> None:
    big = "x" * (300 * 1024)
    argv, stdin, _ = invoke(request(msg("user", big)))
    assert sum(len(a) for a in argv) < 300
    assert stdin == big


def test_images_are_a_missing_capability() -> None:
    req = request(Message(role="user", content=(TextPart(text="what is this?"),
                                                ImagePart(url="data:image/png;base64,AAAA"))))
    with pytest.raises(CapabilityMissing) as info:
        invoke(req)
    assert info.value.capability == "images"
