"""gemini credential discovery, the auth choice, the spawn environment, the AUTH_MISSING
pre-flight check, and what the runner really prepares for a gemini spawn (scripted spawner)."""

from __future__ import annotations

import json
import os
from pathlib import Path

from olp.actors import CliConfig, CliRunner
from olp.actors._process import SpawnSpec
from olp.actors.testing import Exit, FakeSpawner, Line, Step
from olp.ir import ChatRequest, Error, Event, Message, Stop, TextDelta, TextPart, Usage
from olp.providers.gemini import ADAPTER, SPEC
from olp.providers.gemini import _credentials as creds

FIXTURES = (Path(__file__).resolve().parents[2] / "fixtures" / "cli-reference" / "gemini"
            / "transcripts")
OAUTH = {"access_token": "ya29.x", "refresh_token": "1//r", "token_type": "Bearer",
         "expiry_date": 1}


def make_oauth(home: Path, content: object = OAUTH) -> Path:
    (home / ".gemini").mkdir(parents=True, exist_ok=True)
    path = home / ".gemini" / "oauth_creds.json"
    path.write_text(json.dumps(content), encoding="utf-8")
    (home / ".gemini" / "google_accounts.json").write_text('{"active": "a@b.c"}')
    return path


def test_a_proxy_key_is_handed_on_as_gemini_api_key(tmp_path: Path) -> None:
    make_oauth(tmp_path)  # a key wins over a Google-account login
    env = {"HOME": str(tmp_path), "GEMINI_API_KEY": "k1", "GOOGLE_API_KEY": "k2"}
    assert creds.spawn_env(env) == {"GEMINI_API_KEY": "k1"}
    assert creds.spawn_env({"GOOGLE_API_KEY": "k2"}) == {"GEMINI_API_KEY": "k2"}
    assert creds.spawn_env({"GEMINI_API_KEY": " ", "HOME": "/nonexistent"}) == {}


def test_a_google_account_login_selects_oauth(tmp_path: Path) -> None:
    make_oauth(tmp_path)
    assert creds.spawn_env({"HOME": str(tmp_path)}) == {"OLP_GEMINI_AUTH_TYPE": "oauth-personal"}
    other = tmp_path / "gch"
    make_oauth(other)
    assert creds.spawn_env({"HOME": "/nonexistent", "GEMINI_CLI_HOME": str(other)}) == {
        "OLP_GEMINI_AUTH_TYPE": "oauth-personal"}
    assert creds.spawn_env({"HOME": str(tmp_path / "empty")}) == {}


def test_links_only_for_the_google_account_login(tmp_path: Path) -> None:
    path = make_oauth(tmp_path)
    oauth = {"OLP_GEMINI_AUTH_TYPE": "oauth-personal"}
    assert creds.home_links(oauth, tmp_path) == {
        ".gemini/oauth_creds.json": path,
        ".gemini/google_accounts.json": tmp_path / ".gemini" / "google_accounts.json"}
    assert creds.home_links({"GEMINI_API_KEY": "k"}, tmp_path) == {}  # no Google token at all


def test_preflight(tmp_path: Path) -> None:
    assert creds.preflight({"GEMINI_API_KEY": "k"}, tmp_path) is None
    missing = creds.preflight({}, tmp_path)
    assert isinstance(missing, Error) and (missing.code, missing.category) == (
        "AUTH_MISSING", "auth")
    assert "GEMINI_API_KEY" in missing.message and "gemini" in missing.message
    google_only = creds.preflight({"GOOGLE_API_KEY": "k"}, tmp_path)
    assert isinstance(google_only, Error) and "GEMINI_API_KEY" in google_only.message
    oauth = {"OLP_GEMINI_AUTH_TYPE": "oauth-personal"}
    assert isinstance(creds.preflight(oauth, tmp_path), Error)
    make_oauth(tmp_path, {"token_type": "Bearer"})  # no token in it
    assert isinstance(creds.preflight(oauth, tmp_path), Error)
    make_oauth(tmp_path)
    assert creds.preflight(oauth, tmp_path) is None
    bogus = creds.preflight({"OLP_GEMINI_AUTH_TYPE": "vertex-ai"}, tmp_path)
    assert isinstance(bogus, Error) and "OLP_GEMINI_AUTH_TYPE" in bogus.message


def test_an_api_key_is_metered_and_a_google_login_is_not(tmp_path: Path) -> None:
    assert SPEC.metered_by({"GEMINI_API_KEY": "k"}, {}) == "GEMINI_API_KEY in providers.gemini.env"
    assert SPEC.metered_by({}, {"GOOGLE_API_KEY": "k"}) == (
        "GEMINI_API_KEY in the proxy's environment")
    make_oauth(tmp_path)
    assert SPEC.metered_by({}, {"HOME": str(tmp_path)}) is None
    assert (SPEC.risk_tier, SPEC.warm, SPEC.command, SPEC.binary_env) == (
        "C", None, "gemini", "OLP_GEMINI_BIN")
    assert SPEC.warm_reason and SPEC.max_idle_s == 300.0 and SPEC.timeouts.idle_s < 300.0


async def test_runner_prepares_an_isolated_gemini_spawn(tmp_path: Path) -> None:
    real_home = tmp_path / "real-home"
    make_oauth(real_home)  # not linked: the provider's key is the login
    seen: dict[str, object] = {}
    lines = (FIXTURES / "success.recipe.stdout.jsonl").read_bytes().splitlines()

    def script(spec: SpawnSpec) -> list[Step]:
        home = Path(spec.env["HOME"])
        seen["env"] = dict(spec.env)
        seen["argv"] = list(spec.argv)
        seen["stdin"] = spec.stdin
        seen["workdir"] = sorted(os.listdir(spec.cwd))
        seen["settings"] = json.loads((home / ".gemini" / "settings.json").read_text())
        seen["system"] = Path(spec.env["GEMINI_SYSTEM_MD"]).read_text()
        seen["links"] = sorted(p.name for p in (home / ".gemini").iterdir() if p.is_symlink())
        return [*(Line(0.0, line) for line in lines), Exit(0.0, 0)]

    config = CliConfig(
        binary="/opt/gemini", env={"GEMINI_API_KEY": "provider-key",
                                   "GOOGLE_GEMINI_BASE_URL": "http://127.0.0.1:9"},
        # the owner's settings lose to the adapter's
        home_files={".gemini/settings.json": '{"tools": {"core": ["run_shell_command"]}}'},
        real_home=real_home,
        proxy_env={"PATH": "/usr/bin", "HOME": str(tmp_path / "nobody"),
                   "GOOGLE_GEMINI_BASE_URL": "http://leak", "GEMINI_CLI_HOME": "/leak"})
    runner = CliRunner(ADAPTER, FakeSpawner(script), config)
    request = ChatRequest(model="gemini-2.5-pro", messages=(
        Message(role="system", content=(TextPart(text="Be terse."),)),
        Message(role="user", content=(TextPart(text="/init"),))))
    events: list[Event] = []

    async def emit(event: Event) -> None:
        events.append(event)

    await runner.run(request, "gemini-2.5-pro", emit)
    assert events == [TextDelta(text="Hello"), TextDelta(text=" from"),
                      TextDelta(text=" the mock"), TextDelta(text=" upstream."),
                      Usage(prompt_tokens=25, completion_tokens=7), Stop()]
    env = seen["env"]
    assert isinstance(env, dict)
    assert env["GEMINI_API_KEY"] == "provider-key"
    assert env["GOOGLE_GEMINI_BASE_URL"] == "http://127.0.0.1:9"  # configured, not leaked
    assert "GEMINI_CLI_HOME" not in env and "OLP_GEMINI_AUTH_TYPE" not in env
    assert env["GEMINI_CLI_NO_RELAUNCH"] == "true"
    assert env["TMPDIR"].startswith(env["HOME"])  # error reports stay in the private home
    assert seen["workdir"] == []
    assert seen["settings"]["tools"]["core"] == []  # type: ignore[index]
    assert seen["system"] == "Be terse."
    assert seen["links"] == []
    assert seen["stdin"] == "\u200b/init".encode()
    assert not any("init" in a or "terse" in a for a in seen["argv"])  # type: ignore[attr-defined]


async def test_a_google_login_is_linked_into_the_spawn(tmp_path: Path) -> None:
    real_home = tmp_path / "real-home"
    oauth = make_oauth(real_home)
    seen: dict[str, object] = {}

    def script(spec: SpawnSpec) -> list[Step]:
        home = Path(spec.env["HOME"])
        seen["auth"] = spec.env.get("OLP_GEMINI_AUTH_TYPE")
        seen["link"] = os.readlink(home / ".gemini" / "oauth_creds.json")
        return [Exit(0.0, 0)]

    runner = CliRunner(ADAPTER, FakeSpawner(script), CliConfig(
        binary="gemini", real_home=real_home, proxy_env={"HOME": str(real_home)}))
    events: list[Event] = []

    async def emit(event: Event) -> None:
        events.append(event)

    await runner.run(ChatRequest(model="m", messages=(
        Message(role="user", content=(TextPart(text="hi"),)),)), "m", emit)
    assert seen == {"auth": "oauth-personal", "link": str(oauth)}
    # exit 0 without a result line is never a success
    assert isinstance(events[-1], Error) and events[-1].code == "CLI_TERMINATED"


async def test_no_credentials_means_no_spawn(tmp_path: Path) -> None:
    spawner = FakeSpawner(lambda spec: [Exit(0.0, 0)])
    runner = CliRunner(ADAPTER, spawner, CliConfig(
        binary="gemini", real_home=tmp_path, proxy_env={"HOME": str(tmp_path)}))
    events: list[Event] = []

    async def emit(event: Event) -> None:
        events.append(event)

    await runner.run(ChatRequest(model="m", messages=(
        Message(role="user", content=(TextPart(text="hi"),)),)), "m", emit)
    assert [(e.code, e.category) for e in events if isinstance(e, Error)] == [
        ("AUTH_MISSING", "auth")]
    assert spawner.runs == []
