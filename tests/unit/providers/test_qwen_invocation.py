"""The qwen argv/stdin/env/home files: the no-tools recipe of cli-reference/qwen (every
built-in tool denied, compared with capture.py's list), no client text on argv, system text in
a file of the private home named by QWEN_SYSTEM_MD, a stdin that never starts with "/", an
empty working directory, images refused."""

from __future__ import annotations

import ast
import json
from pathlib import Path
from typing import Any

import pytest

from olp.actors import CapabilityMissing, CliAdapter
from olp.ir import ChatRequest, ImagePart, Message, TextPart
from olp.providers.qwen import ADAPTER, SPEC
from olp.providers.qwen._invocation import (
    ALL_TOOLS,
    COMMAND_GUARD,
    DEFAULT_SYSTEM,
    SETTINGS_FILE,
    SLASH_COMMANDS,
    SYSTEM_FILE,
    guard_prompt,
)

CAPTURE = Path(__file__).resolve().parents[2] / "fixtures/cli-reference/qwen/capture.py"
TRANSCRIPTS = CAPTURE.parent / "transcripts"
BASE = Path("/tmp/olp-job-q")
WORKDIR = BASE / "work"
HOME = BASE / "home"
USER_TEXT = "USER-MARKER: tell me about ünïcode ✓ and $HOME `rm -rf`"
SYSTEM = "SYSTEM-MARKER: you are terse."


def _capture_constant(name: str) -> Any:
    """A literal constant of capture.py, read without running it."""
    tree = ast.parse(CAPTURE.read_text(encoding="utf-8"))
    for node in tree.body:
        if isinstance(node, ast.AnnAssign | ast.Assign):
            targets = [node.target] if isinstance(node, ast.AnnAssign) else node.targets
            if any(isinstance(t, ast.Name) and t.id == name for t in targets):
                assert node.value is not None
                return ast.literal_eval(node.value)
    raise AssertionError(f"{name} not in capture.py")


def msg(role: str, text: str) -> Message:
    return Message(role=role, content=(TextPart(text=text),))  # type: ignore[arg-type]


def request(*messages: Message, **kw: object) -> ChatRequest:
    return ChatRequest(model="qwen", messages=messages, **kw)  # type: ignore[arg-type]


def invoke(req: ChatRequest, extra_args: tuple[str, ...] = (), model: str = "qwen3-coder-plus",
           ) -> tuple[list[str], str, dict[str, str], dict[str, str]]:
    inv = ADAPTER.invocation(req, binary="/opt/qwen/bin/qwen", model=model,
                                   workdir=WORKDIR, extra_args=extra_args)
    assert inv.files == {} and inv.binary_files == {}  # the working directory stays empty
    return list(inv.argv), inv.stdin.decode("utf-8"), dict(inv.env), dict(inv.home_files)


def test_adapter_satisfies_the_protocol_and_the_spec_is_discovered() -> None:
    adapter: CliAdapter = ADAPTER
    assert adapter.name == "qwen" == SPEC.name
    assert SPEC.command == "qwen" and SPEC.binary_env == "OLP_QWEN_BIN"
    assert SPEC.risk_tier == "B" and SPEC.warm is None and SPEC.warm_reason
    assert SPEC.max_idle_s == 240.0 and SPEC.timeouts.idle_s < 240.0
    from olp.providers import kit
    assert kit.find("qwen") is SPEC


def test_argv_is_the_recipe_and_carries_no_client_text() -> None:
    argv, stdin, _, _ = invoke(request(msg("system", SYSTEM), msg("user", USER_TEXT)))
    assert argv == ["/opt/qwen/bin/qwen", "-o", "stream-json", "--include-partial-messages",
                    "--approval-mode", "default", "--max-tool-calls", "0",
                    "--exclude-tools", ",".join(ALL_TOOLS), "--chat-recording", "false",
                    "-m", "qwen3-coder-plus"]
    joined = " ".join(argv)
    assert "MARKER" not in joined and "--system-prompt" not in joined and "-p" not in argv
    assert stdin == USER_TEXT  # one user message: verbatim


def test_extra_args_come_last() -> None:
    argv, _, _, _ = invoke(request(msg("user", "hi")), extra_args=("--debug",))
    assert argv[-3:] == ["-m", "qwen3-coder-plus", "--debug"]


def test_tool_lists_match_the_capture() -> None:
    assert ALL_TOOLS == _capture_constant("ALL_TOOLS")
    assert SLASH_COMMANDS == _capture_constant("SLASH_COMMANDS")
    assert len(ALL_TOOLS) == 67


def test_settings_in_the_home_deny_every_tool() -> None:
    _, _, _, home_files = invoke(request(msg("user", "hi")))
    settings = json.loads(home_files[SETTINGS_FILE])
    assert settings["$version"] == 4  # else qwen rewrites the file on every start
    assert settings["permissions"]["deny"] == list(ALL_TOOLS)
    assert settings["tools"]["disabled"] == list(ALL_TOOLS)
    assert settings["tools"]["approvalMode"] == "default"
    assert settings["memory"]["enableManagedAutoMemory"] is False
    assert settings["mcp"] == {"excluded": ["*"]} and settings["mcpServers"] == {}
    assert settings["slashCommands"]["disabled"] == list(SLASH_COMMANDS)
    assert settings["security"] == {"auth": {"selectedType": "openai"},
                                    "folderTrust": {"enabled": True}}
    assert settings["model"]["generationConfig"] == {"maxRetries": 0}
    assert settings["general"]["chatRecording"] is False
    assert settings["privacy"]["usageStatisticsEnabled"] is False


def test_settings_are_the_captured_recipe_plus_max_retries_0() -> None:
    captured = json.loads((TRANSCRIPTS / "success.meta.json").read_text())["settings_json"]
    _, _, _, home_files = invoke(request(msg("user", "hi")))
    ours = json.loads(home_files[SETTINGS_FILE])
    assert ours["model"].pop("generationConfig") == {"maxRetries": 0}
    assert ours == captured


def test_system_text_goes_to_a_home_file_named_by_env() -> None:
    _, stdin, env, home_files = invoke(request(msg("system", SYSTEM),
                                               msg("developer", "Answer in French."),
                                               msg("user", USER_TEXT)))
    assert home_files[SYSTEM_FILE] == f"{SYSTEM}\n\nAnswer in French."
    assert env["QWEN_SYSTEM_MD"] == str(HOME / SYSTEM_FILE)
    assert "SYSTEM-MARKER" not in stdin and USER_TEXT in stdin


def test_no_system_text_gets_the_neutral_default_not_the_agent_prompt() -> None:
    _, _, env, home_files = invoke(request(msg("user", "hi")))
    assert home_files[SYSTEM_FILE] == DEFAULT_SYSTEM
    assert env["QWEN_SYSTEM_MD"] == str(HOME / SYSTEM_FILE)


def test_env_switches_off_statistics_telemetry_cron_and_the_relaunch() -> None:
    _, _, env, _ = invoke(request(msg("user", "hi")))
    assert env["QWEN_USAGE_STATISTICS_ENABLED"] == "false"
    assert env["QWEN_TELEMETRY_ENABLED"] == "false"
    assert env["QWEN_CODE_DISABLE_CRON"] == "1"
    assert env["QWEN_CODE_NO_RELAUNCH"] == "true"
    assert env["QWEN_CODE_UNATTENDED_RETRY"] == "false"
    assert not any("MARKER" in v for v in env.values())


@pytest.mark.parametrize("text", ["/init", "/stats please", "  /init", "\n/init", "/", "//x"])
def test_stdin_never_starts_with_a_slash(text: str) -> None:
    _, stdin, _, _ = invoke(request(msg("user", text)))
    assert not stdin.lstrip().startswith("/")
    assert stdin == COMMAND_GUARD + text


@pytest.mark.parametrize("text", ["hello /init", "@notes.txt", "?btw hi", " x /y"])
def test_other_prompts_are_unchanged(text: str) -> None:
    assert guard_prompt(text) == text


def test_a_conversation_is_flattened_and_guarded() -> None:
    _, stdin, _, _ = invoke(request(msg("user", "/init"), msg("assistant", "ok"),
                                    msg("user", "again")))
    assert stdin.startswith("The conversation so far")
    assert "User:\n/init" in stdin


def test_json_response_format_is_an_instruction_at_the_head() -> None:
    _, stdin, _, _ = invoke(request(msg("user", "/list"),
                                    response_format={"type": "json_object"}))
    assert stdin.startswith("Respond with a single JSON object only")
    assert stdin.endswith("/list")


def test_images_are_refused() -> None:
    req = request(Message(role="user", content=(TextPart(text="see"),
                                                ImagePart(url="data:image/png;base64,AAAA"))))
    with pytest.raises(CapabilityMissing) as info:
        invoke(req)
    assert info.value.capability == "images"


def test_the_spawn_is_the_same_for_the_same_request() -> None:
    req = request(msg("system", SYSTEM), msg("user", "hi"))
    assert invoke(req) == invoke(req)


def test_a_command_behind_any_mix_of_blanks_and_byte_order_marks_is_guarded() -> None:
    from olp.providers.qwen._invocation import COMMAND_GUARD, guard_prompt

    for text in ("\ufeff/init", " \ufeff\n /init", "\u00a0\u2028/docs"):
        assert guard_prompt(text) == COMMAND_GUARD + text
    assert guard_prompt("say /init") == "say /init"
