"""codex credential discovery, spawn environment, the AUTH_MISSING pre-flight check, and what
the runner really prepares for a codex spawn (env, home, files) with a scripted spawner."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from olp.actors import CliConfig, CliRunner
from olp.actors._process import SpawnSpec
from olp.actors.testing import Exit, FakeSpawner, Line, Step
from olp.ir import ChatRequest, Error, Event, ImagePart, Message, Stop, TextDelta, TextPart, Usage
from olp.providers.codex import ADAPTER
from olp.providers.codex import _credentials as creds

CHATGPT_LOGIN = {"OPENAI_API_KEY": None, "tokens": {"id_token": "i", "access_token": "a",
                                                    "refresh_token": "r", "account_id": "x"}}
API_KEY_LOGIN = {"OPENAI_API_KEY": "sk-login"}


def make_auth(directory: Path, content: object = CHATGPT_LOGIN) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / "auth.json"
    path.write_text(json.dumps(content), encoding="utf-8")
    return path


def test_spawn_env_passes_no_keys_and_no_codex_home() -> None:
    proxy_env = {"OPENAI_API_KEY": "sk-metered", "CODEX_API_KEY": "k", "PATH": "/bin",
                 "OPENAI_BASE_URL": "http://evil", "HOME": "/root"}
    assert ADAPTER.spawn_env(proxy_env) == {}
    assert ADAPTER.spawn_env({"CODEX_HOME": "/srv/codex"}) == {
        "OPENAI_CODEX_AUTH_PATH": "/srv/codex/auth.json"}
    assert ADAPTER.spawn_env({"CODEX_HOME": "/srv/codex",
                                     "OPENAI_CODEX_AUTH_PATH": "/a/auth.json"}) == {
        "OPENAI_CODEX_AUTH_PATH": "/a/auth.json"}
    assert ADAPTER.spawn_env({"CODEX_HOME": "", "OPENAI_CODEX_AUTH_PATH": ""}) == {}


def test_auth_file_discovery_order(tmp_path: Path) -> None:
    home = tmp_path / "home"
    assert creds.auth_file({}, home) == home / ".codex" / "auth.json"
    assert creds.auth_file({"CODEX_HOME": "/c"}, home) == Path("/c/auth.json")
    assert creds.auth_file({"CODEX_HOME": "/c", "OPENAI_CODEX_AUTH_PATH": "/f.json"},
                           home) == Path("/f.json")
    assert creds.auth_file({"OPENAI_CODEX_AUTH_PATH": "~/x.json"}, home) == Path(
        "~/x.json").expanduser()


def test_home_links_the_auth_file_into_the_spawn_home(tmp_path: Path) -> None:
    adapter = ADAPTER
    assert adapter.home_links({}, tmp_path) == {}
    path = make_auth(tmp_path / ".codex")
    assert adapter.home_links({}, tmp_path) == {".codex/auth.json": path}
    other = make_auth(tmp_path / "elsewhere", API_KEY_LOGIN)
    assert adapter.home_links({"OPENAI_CODEX_AUTH_PATH": str(other)}, tmp_path) == {
        ".codex/auth.json": other}
    (tmp_path / "dir-home" / "auth.json").mkdir(parents=True)  # a directory is no file
    assert adapter.home_links({"CODEX_HOME": str(tmp_path / "dir-home")}, tmp_path) == {}


@pytest.mark.parametrize("var", ["OPENAI_API_KEY", "CODEX_API_KEY"])
def test_preflight_accepts_a_key_in_the_provider_env(tmp_path: Path, var: str) -> None:
    assert creds.preflight({var: "sk-x"}, tmp_path) is None
    assert isinstance(creds.preflight({var: "  "}, tmp_path), Error)


@pytest.mark.parametrize("content", [CHATGPT_LOGIN, API_KEY_LOGIN])
def test_preflight_accepts_a_login_file(tmp_path: Path, content: object) -> None:
    make_auth(tmp_path / ".codex", content)
    assert creds.preflight({}, tmp_path) is None
    custom = make_auth(tmp_path / "custom", content)
    assert creds.preflight({"OPENAI_CODEX_AUTH_PATH": str(custom)}, tmp_path / "nobody") is None
    assert creds.preflight({"CODEX_HOME": str(tmp_path / "custom")}, tmp_path / "nobody") is None


@pytest.mark.parametrize("content", [
    {"OPENAI_API_KEY": None, "tokens": None}, {"OPENAI_API_KEY": ""},
    {"tokens": {"access_token": ""}}, [1, 2], "just a string",
])
def test_preflight_refuses_an_auth_file_without_a_login(tmp_path: Path, content: object) -> None:
    make_auth(tmp_path / ".codex", content)
    error = creds.preflight({}, tmp_path)
    assert isinstance(error, Error) and error.code == "AUTH_MISSING"
    assert "codex login" in error.message and str(tmp_path) not in error.message


def test_preflight_refuses_garbage_and_nothing(tmp_path: Path) -> None:
    error = creds.preflight({}, tmp_path)
    assert error == Error(code="AUTH_MISSING", category="auth", message=creds.MISSING_MESSAGE)
    (tmp_path / ".codex").mkdir()
    (tmp_path / ".codex" / "auth.json").write_bytes(b"\xff not json")
    assert isinstance(creds.preflight({}, tmp_path), Error)


# --- through the real runner (scripted spawner, real temp dirs) ------------------------------

PNG_URL = "data:image/png;base64,iVBORw0KGgo="
SUCCESS_LINES = [
    b'{"type":"thread.started","thread_id":"t"}', b'{"type":"turn.started"}',
    b'{"type":"item.completed","item":{"id":"item_0","type":"agent_message","text":"Hi."}}',
    b'{"type":"turn.completed","usage":{"input_tokens":25,"cached_input_tokens":0,'
    b'"cache_write_input_tokens":0,"output_tokens":7,"reasoning_output_tokens":0}}',
]


async def test_runner_prepares_an_isolated_codex_spawn(tmp_path: Path) -> None:
    real_home = tmp_path / "real-home"
    auth = make_auth(real_home / ".codex")
    seen: dict[str, object] = {}

    def script(spec: SpawnSpec) -> list[Step]:
        home = Path(spec.env["HOME"])
        seen["env"] = dict(spec.env)
        seen["argv"] = list(spec.argv)
        seen["stdin"] = spec.stdin
        seen["cwd"] = spec.cwd
        seen["link"] = os.readlink(home / ".codex" / "auth.json")
        seen["config"] = (home / ".codex" / "config.toml").read_text()
        seen["image"] = (spec.cwd / "image-1.png").read_bytes()
        return [*(Line(0.0, line) for line in SUCCESS_LINES), Exit(0.0, 0)]

    config = CliConfig(
        binary="/opt/codex", extra_args=["-c", "model_reasoning_effort=low"],
        env={"OPENAI_API_KEY": "sk-provider"},
        home_files={".codex/config.toml": 'model_provider = "mock"\n'},
        real_home=real_home,
        proxy_env={"PATH": "/usr/bin", "CODEX_HOME": "", "OPENAI_API_KEY": "sk-proxy",
                   "OPENAI_BASE_URL": "http://leak"})
    runner = CliRunner(ADAPTER, FakeSpawner(script), config)
    request = ChatRequest(model="gpt-5.5", messages=(
        Message(role="system", content=(TextPart(text="Be terse."),)),
        Message(role="user", content=(TextPart(text="Hello?"), ImagePart(url=PNG_URL)))))
    events: list[Event] = []

    async def emit(event: Event) -> None:
        events.append(event)

    await runner.run(request, "gpt-5.5", emit)
    assert events == [TextDelta(text="Hi."), Usage(prompt_tokens=25, completion_tokens=7),
                      Stop()]
    env = seen["env"]
    assert isinstance(env, dict)
    assert "CODEX_HOME" not in env  # codex uses the spawn's own $HOME/.codex
    assert env["OPENAI_API_KEY"] == "sk-provider"  # from the provider's env, not the proxy's
    assert "OPENAI_BASE_URL" not in env
    assert Path(env["HOME"]).parent == Path(str(seen["cwd"])).parent  # base/home, base/work
    assert seen["link"] == str(auth)  # symlinked, so codex's token refresh persists
    assert seen["config"] == 'model_provider = "mock"\n'
    assert seen["image"] == b"\x89PNG\r\n\x1a\n"
    argv = seen["argv"]
    assert isinstance(argv, list)
    assert argv[-1] == "-" and argv[-3:-1] == ["-c", "model_reasoning_effort=low"]
    assert f"--image={Path(str(seen['cwd'])) / 'image-1.png'}" in argv
    assert seen["stdin"] == b"System instructions:\nBe terse.\n\n" + b"\n\n".join([
        b'The conversation so far is below. Each turn starts with a label line: "User:", '
        b'"Assistant:" or "Tool result:".',
        b"User:\nHello?[image]",
        b"---\nReply to the last User message above as the Assistant. Write only the reply "
        b"itself, with no label."])
    assert not (Path(env["HOME"]).parent).exists()  # the job's directories are gone


async def test_runner_refuses_to_spawn_without_credentials(tmp_path: Path) -> None:
    spawner = FakeSpawner(lambda spec: [Exit(0.0, 0)])
    runner = CliRunner(ADAPTER, spawner, CliConfig(
        binary="codex", real_home=tmp_path, proxy_env={"OPENAI_API_KEY": "sk-proxy-only"}))
    events: list[Event] = []

    async def emit(event: Event) -> None:
        events.append(event)

    await runner.run(ChatRequest(model="m", messages=(
        Message(role="user", content=(TextPart(text="hi"),)),)), "m", emit)
    assert [(e.code, e.category) for e in events if isinstance(e, Error)] == [
        ("AUTH_MISSING", "auth")]
    assert spawner.runs == []
