"""The codex argv/stdin/files: exact argv, no client text on argv, images as files."""

from __future__ import annotations

import base64
import json
from pathlib import Path

import pytest

from olp.actors import CapabilityMissing, CliAdapter
from olp.ir import ChatRequest, ImagePart, Message, TextPart
from olp.providers._images import decode_image_url
from olp.providers._prompt import json_instruction
from olp.providers.codex import ADAPTER

WORKDIR = Path("/tmp/olp-job-x/work")
USER_TEXT = "Tell me a secret about ünïcode ✓ and $HOME `rm -rf`"
SYSTEM = "You are terse."
DEVELOPER = "Answer in French."
#: every built-in tool codex lets us switch off, off (verified against the real 0.171.0:
#: tests/realcli/test_security_real_codex.py, tests/fixtures/security/codex-tools-*.json)
TOOLS_OFF = ["-c", "features.shell_tool=false", "-c", "features.unified_exec=false",
             "-c", "features.view_image=false", "-c", "features.goals=false",
             "-c", "features.multi_agent=false", "-c", "features.multi_agent_v2=false",
             "-c", "features.apps=false", "-c", "features.plugins=false",
             "-c", "features.hooks=false", "-c", "features.shell_snapshot=false",
             "-c", "features.image_generation=false",
             "-c", "tools.experimental_request_user_input={enabled=false}",
             "-c", 'web_search="disabled"', "-c", "project_doc_max_bytes=0",
             "-c", "analytics.enabled=false"]
BASE = ["/usr/bin/codex", "exec", "--json", "--skip-git-repo-check", "--ephemeral",
        "--sandbox", "read-only", "--ignore-rules", *TOOLS_OFF,
        "-c", f'model_catalog_json="{WORKDIR}/model-catalog.json"', "-m", "gpt-5.5"]
CATALOG = "model-catalog.json"
PNG = base64.b64decode("iVBORw0KGgoAAAANSUhEUgAAAAIAAAACCAIAAAD91JpzAAAAEElEQVR4nGP4z8AARAwQ"
                       "CgAf7gP9i18U1AAAAABJRU5ErkJggg==")
PNG_URL = "data:image/png;base64," + base64.b64encode(PNG).decode()


def msg(role: str, *parts: str | ImagePart) -> Message:
    content = tuple(TextPart(text=p) if isinstance(p, str) else p for p in parts)
    return Message(role=role, content=content)  # type: ignore[arg-type]


def request(*messages: Message, **kw: object) -> ChatRequest:
    return ChatRequest(model="gpt-5.5", messages=messages, **kw)  # type: ignore[arg-type]


def invoke(req: ChatRequest, extra_args: tuple[str, ...] = ()) -> tuple[
        list[str], str, dict[str, str], dict[str, bytes], dict[str, str]]:
    inv = ADAPTER.invocation(req, binary="/usr/bin/codex", model="gpt-5.5",
                                    workdir=WORKDIR, extra_args=extra_args)
    return (list(inv.argv), inv.stdin.decode("utf-8"), dict(inv.files),
            dict(inv.binary_files), dict(inv.env))


def test_adapter_satisfies_the_protocol() -> None:
    adapter: CliAdapter = ADAPTER
    assert adapter.name == "openai"


def test_argv_is_exact_and_prompt_goes_on_stdin() -> None:
    argv, stdin, files, binary_files, env = invoke(
        request(msg("user", USER_TEXT)), extra_args=("-c", "model_reasoning_effort=low"))
    assert argv == [*BASE, "-c", "model_reasoning_effort=low", "-"]
    assert stdin == USER_TEXT
    assert (set(files), binary_files, env) == ({CATALOG}, {}, {})  # CODEX_HOME: HOME/.codex


def test_system_text_is_at_the_head_of_the_prompt() -> None:
    argv, stdin, files, _, _ = invoke(request(msg("system", SYSTEM), msg("developer", DEVELOPER),
                                              msg("user", USER_TEXT)))
    assert argv == [*BASE, "-"]
    assert stdin.startswith(f"System instructions:\n{SYSTEM}\n\n{DEVELOPER}\n\n")
    assert stdin.index(SYSTEM) < stdin.index(USER_TEXT)
    assert set(files) == {CATALOG}  # no model_instructions_file: the ChatGPT backend refuses it


def test_no_client_text_on_argv_for_a_conversation() -> None:
    schema = {"type": "object", "title": "SCHEMA", "properties": {"a": {"type": "string"}},
              "required": ["a"], "additionalProperties": False}
    req = request(msg("system", SYSTEM), msg("developer", DEVELOPER), msg("user", USER_TEXT),
                  msg("assistant", "ASSISTANT-TURN"), msg("user", "SECOND-QUESTION", PNG_URL),
                  response_format={"type": "json_schema",
                                   "json_schema": {"name": "n", "strict": True,
                                                   "schema": schema}})
    argv, stdin, files, _, _ = invoke(req)
    for needle in (USER_TEXT, SYSTEM, DEVELOPER, "ASSISTANT-TURN", "SECOND-QUESTION", "SCHEMA",
                   "secret", "French", "base64"):
        assert not any(needle in a for a in argv), needle
    for needle in (USER_TEXT, SYSTEM, DEVELOPER, "ASSISTANT-TURN", "SECOND-QUESTION", "SCHEMA"):
        assert needle in stdin or needle in files["output-schema.json"], needle


def test_json_object_is_an_instruction_at_the_head() -> None:
    rf = {"type": "json_object"}
    argv, stdin, files, _, _ = invoke(request(msg("user", "list three colours"),
                                              response_format=rf))
    instruction = json_instruction(rf)
    assert instruction is not None
    assert stdin == f"{instruction}\n\nlist three colours"
    assert argv == [*BASE, "-"] and set(files) == {CATALOG}


def test_strict_json_schema_also_goes_to_output_schema_file() -> None:
    schema = {"type": "object", "properties": {"a": {"type": "string"}}, "required": ["a"],
              "additionalProperties": False}
    rf = {"type": "json_schema", "json_schema": {"name": "n", "strict": True, "schema": schema}}
    argv, stdin, files, _, _ = invoke(request(msg("user", "hi"), response_format=rf))
    assert argv == [*BASE, "--output-schema", str(WORKDIR / "output-schema.json"), "-"]
    assert json.loads(files["output-schema.json"]) == schema
    assert stdin.startswith(json_instruction(rf) or "?")


def test_non_strict_json_schema_is_only_an_instruction() -> None:
    rf = {"type": "json_schema", "json_schema": {"name": "n", "schema": {"type": "object"}}}
    argv, stdin, files, _, _ = invoke(request(msg("user", "hi"), response_format=rf))
    assert argv == [*BASE, "-"] and set(files) == {CATALOG}
    assert stdin.startswith(json_instruction(rf) or "?")


def test_images_become_files_passed_with_image_equals() -> None:
    jpeg_url = "data:image/jpeg;base64," + base64.b64encode(b"\xff\xd8\xff-jpeg").decode()
    req = request(msg("system", SYSTEM),
                  msg("user", "what is this?", ImagePart(url=PNG_URL)),
                  msg("assistant", "a square"),
                  msg("user", ImagePart(url=jpeg_url, detail="low"), "and this?"))
    argv, stdin, files, binary_files, _ = invoke(req, extra_args=("-c", "x=1"))
    assert argv == [*BASE, f"--image={WORKDIR / 'image-1.png'}",
                    f"--image={WORKDIR / 'image-2.jpg'}", "-c", "x=1", "-"]
    assert binary_files == {"image-1.png": PNG, "image-2.jpg": b"\xff\xd8\xff-jpeg"}
    assert stdin.count("[image]") == 2 and "what is this?" in stdin


@pytest.mark.parametrize(("url", "capability"), [
    ("https://example.com/cat.png", "remote images"),
    ("http://127.0.0.1/cat.png", "remote images"),
    ("file:///etc/passwd", "images that are not data: URLs"),
    ("/etc/passwd", "images that are not data: URLs"),
    ("data:text/html;base64,PGI+", "images of type text/html"),
    ("data:image/svg+xml,<svg/>", "images of type image/svg+xml"),
    ("data:image/png;base64", "undecodable image data"),
    ("data:image/png;base64,", "undecodable image data"),
    ("data:image/png;base64,A", "undecodable image data"),
])
def test_unusable_images_are_a_capability_miss(url: str, capability: str) -> None:
    with pytest.raises(CapabilityMissing) as info:
        invoke(request(msg("user", "look", ImagePart(url=url))))
    assert info.value.capability.startswith(capability)


def test_data_urls_decode() -> None:
    assert decode_image_url(PNG_URL) == ("image/png", PNG)
    assert decode_image_url("data:image/jpg;base64,/9j/") == ("image/jpeg", b"\xff\xd8\xff")
    assert decode_image_url("data:IMAGE/GIF,GIF89a%00") == ("image/gif", b"GIF89a\x00")
    assert decode_image_url("data:image/webp;charset=x;base64,UklGRg==") == (
        "image/webp", b"RIFF")


def test_extra_args_come_before_the_stdin_marker() -> None:
    argv, *_ = invoke(request(msg("user", "hi")), extra_args=("-c", 'model_provider="mock"'))
    assert argv[-3:] == ["-c", 'model_provider="mock"', "-"]


def test_the_model_catalog_enables_no_tool_for_any_model() -> None:
    """codex gets a catalog holding only a hidden placeholder, so every requested model runs
    on fallback metadata: no apply_patch, no tool_search, no code mode (exec + spawn_agent)."""
    _, _, files, _, _ = invoke(request(msg("user", "hi")))
    [entry] = json.loads(files[CATALOG])["models"]
    assert entry["slug"] == "olp-placeholder" and entry["slug"] != "gpt-5.5"
    assert entry["visibility"] == "hide"
    assert entry["apply_patch_tool_type"] is None and entry["supports_search_tool"] is False
    assert "tool_mode" not in entry and entry["experimental_supported_tools"] == []


def test_extra_args_come_after_the_switches() -> None:
    """An owner may switch a tool back on deliberately (``--enable X`` beats ``-c
    features.X=false`` in codex 0.171.0); nothing OLP adds comes after ``extra_args``."""
    argv, _, _, _, _ = invoke(request(msg("user", "hi")), extra_args=("--enable", "shell_tool"))
    assert argv[-3:] == ["--enable", "shell_tool", "-"]
    assert argv.index("features.shell_tool=false") < argv.index("--enable")
