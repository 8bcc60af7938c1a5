"""The gemini spawn: argv without client text, the prompt on stdin (never a slash command),
the recipe's settings, policy and system-prompt files in the private home, nothing in the
working directory."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from olp.actors import CapabilityMissing, Invocation
from olp.ir import ChatRequest, ImagePart, Message, TextPart
from olp.providers.gemini import ADAPTER
from olp.providers.gemini._invocation import (
    COMMAND_GUARD,
    POLICY_FILE,
    SETTINGS_FILE,
    SYSTEM_FILE,
    guard_prompt,
)

WORKDIR = Path("/run/olp/jobs/j1/work")
PNG_URL = "data:image/png;base64,iVBORw0KGgo="


def request(*messages: tuple[str, str],
            response_format: dict[str, Any] | None = None) -> ChatRequest:
    return ChatRequest(model="gemini", messages=tuple(
        Message(role=role, content=(TextPart(text=text),)) for role, text in messages),
        response_format=response_format)


def invoke(req: ChatRequest, extra_args: tuple[str, ...] = ()) -> Invocation:
    return ADAPTER.invocation(req, binary="/opt/gemini", model="gemini-2.5-pro",
                                      workdir=WORKDIR, extra_args=extra_args)


def test_the_recipe_argv_and_env_carry_no_client_text() -> None:
    inv = invoke(request(("system", "SYS-SECRET"), ("user", "USER-SECRET")), ("--debug",))
    assert list(inv.argv) == ["/opt/gemini", "-p", "", "-o", "stream-json", "-m",
                              "gemini-2.5-pro", "--skip-trust", "--debug"]
    assert not any("SECRET" in a for a in inv.argv)
    assert not any("SECRET" in v for v in inv.env.values())
    assert inv.env["GEMINI_CLI_NO_RELAUNCH"] == "true"
    assert inv.env["GEMINI_SYSTEM_MD"] == str(WORKDIR.parent / "home" / SYSTEM_FILE)
    assert inv.files == {} and inv.binary_files == {}  # the working directory stays empty


def test_system_text_goes_to_the_system_file_and_the_turn_to_stdin() -> None:
    inv = invoke(request(("system", "Be terse."), ("developer", "No emoji."),
                         ("user", "Say hi.")))
    assert inv.home_files[SYSTEM_FILE] == "Be terse.\n\nNo emoji."
    assert inv.stdin == b"Say hi."
    # no system text: an empty file, i.e. an empty system instruction (not the CLI's own)
    assert invoke(request(("user", "hi"))).home_files[SYSTEM_FILE] == ""


def test_the_settings_and_the_deny_all_policy() -> None:
    inv = invoke(request(("user", "hi")))
    settings = json.loads(inv.home_files[SETTINGS_FILE])
    assert settings["tools"]["core"] == []
    assert settings["mcp"]["allowed"] == ["olp-no-mcp-server"]
    assert settings["general"]["maxAttempts"] == 1
    assert settings["privacy"]["usageStatisticsEnabled"] is False
    assert settings["telemetry"]["enabled"] is False
    assert settings["advanced"]["ignoreLocalEnv"] is True
    assert settings["context"]["includeDirectoryTree"] is False
    assert settings["context"]["memoryBoundaryMarkers"] == []
    assert settings["security"]["auth"]["selectedType"] == (
        "${OLP_GEMINI_AUTH_TYPE:-gemini-api-key}")
    assert inv.home_files[POLICY_FILE] == (
        '[[rule]]\ntoolName = "*"\ndecision = "deny"\npriority = 999\n')


@pytest.mark.parametrize("text", ["/init", "/docs", "  /bug x", "\n/init", "\t\n /pwn",
                                  "\ufeff/about", "/"])
def test_a_slash_command_reaches_the_model_as_text(text: str) -> None:
    stdin = invoke(request(("user", text))).stdin.decode()
    assert stdin == COMMAND_GUARD + text
    assert not stdin.strip().startswith("/")


def test_other_prompts_are_unchanged() -> None:
    for text in ["hello /init", "@notes.txt", "a/b", "!ls"]:
        assert invoke(request(("user", text))).stdin.decode() == text


@given(st.text())
def test_stdin_never_begins_with_a_slash(text: str) -> None:
    guarded = guard_prompt(text)
    assert not guarded.strip().lstrip("\ufeff").lstrip().startswith("/")
    assert guarded.removeprefix(COMMAND_GUARD) == text


def test_a_conversation_is_flattened_and_guarded() -> None:
    # a tool result keeps the flattened prompt (plain text turns: test_gemini_history.py)
    stdin = invoke(request(("system", "S"), ("user", "/init"), ("assistant", "ok"),
                           ("tool", "42"), ("user", "again"))).stdin.decode()
    assert stdin.startswith("The conversation so far is below.")
    assert "User:\n/init" in stdin and "S" not in stdin.split("\n", 1)[0]


def test_json_mode_is_an_instruction_at_the_head_and_still_guarded() -> None:
    inv = invoke(request(("user", "list"), response_format={"type": "json_object"}))
    assert inv.stdin.decode().startswith("Respond with a single JSON object only")
    assert inv.stdin.decode().endswith("\n\nlist")


def test_images_are_a_missing_capability() -> None:
    req = ChatRequest(model="gemini", messages=(
        Message(role="user", content=(TextPart(text="what is this"), ImagePart(url=PNG_URL))),))
    with pytest.raises(CapabilityMissing) as info:
        invoke(req)
    assert info.value.capability == "images"


def test_a_command_behind_any_mix_of_blanks_and_byte_order_marks_is_guarded() -> None:
    from olp.providers.gemini._invocation import COMMAND_GUARD, guard_prompt

    for text in ("\ufeff/init", " \ufeff\n /init", "\u00a0\u2028/docs"):
        assert guard_prompt(text) == COMMAND_GUARD + text
    assert guard_prompt("say /init") == "say /init"
