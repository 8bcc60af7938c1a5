"""Settings: environment, config.json decoding, error paths, defaults and binary resolution."""

from __future__ import annotations

import json
import os
import stat
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from olp.config import (
    ChainEntry,
    Config,
    ConfigError,
    Settings,
    Timeouts,
    load_config,
    load_settings,
    resolve_binary,
)

# A config using every section (re-wrapped to fit 100 columns).
FULL_EXAMPLE = """
{
  "auth": {"allow_anonymous": false, "fallback_detail_header_policy": "owner_only"},
  "providers": {
    "enabled": {"anthropic": true, "openai": true, "mistral": false, "router": true},
    "anthropic": {"binary": "claude", "max_concurrent": 4, "extra_args": [], "home_files": {},
                  "env": {"ANTHROPIC_BASE_URL": "http://127.0.0.1:9000", "ANTHROPIC_API_KEY": "…"},
                  "timeouts": {"first_output_s": 60, "idle_s": 120, "total_s": 600}},
    "router": {"kind": "openai-compatible", "base_url": "https://example/v1",
               "api_key_env": "ROUTER_KEY", "metered": true, "max_concurrent": 8}
  },
  "routing": {
    "chains": {"sonnet": [{"name": "sub", "provider": "anthropic", "model": "claude-sonnet-4-6"},
                          {"name": "api", "provider": "router",
                           "model": "anthropic/claude-sonnet-4.6", "metered": true,
                           "on": ["usage_window", "unavailable"]}]},
    "soft_triggers": {"anthropic": {"daily_request_count_threshold": 1000}}
  },
  "streaming": {"heartbeat_interval_ms": 0}
}
"""


@pytest.fixture
def home(tmp_path: Path) -> Path:
    return tmp_path / "olp-home"


def _settings(home: Path, config: str | dict[str, Any] | None = None,
              **env: str) -> Settings:
    if config is not None:
        home.mkdir(parents=True, exist_ok=True)
        text = config if isinstance(config, str) else json.dumps(config)
        (home / "config.json").write_text(text, encoding="utf-8")
    return load_settings({"OLP_HOME": str(home), **env})


def _error(home: Path, config: str | dict[str, Any]) -> str:
    with pytest.raises(ConfigError) as info:
        _settings(home, config)
    return str(info.value)


# -- environment ----------------------------------------------------------------------------


def test_defaults_without_a_config_file(home: Path) -> None:
    s = _settings(home)
    assert s.home == home and home.is_dir()
    assert stat.S_IMODE(home.stat().st_mode) == 0o700
    assert s.db_path == home / "olp.db"
    assert s.config_path == home / "config.json"
    assert (s.port, s.bind, s.log_level, s.owner_token) == (4567, "127.0.0.1", "info", None)
    assert s.config == Config()
    assert not s.config.auth.allow_anonymous
    assert s.config.auth.fallback_detail_header_policy == "owner_only"
    assert s.config.server.max_body_bytes == 5242880
    assert (s.config.server.drain_grace_s, s.config.server.kill_grace_s) == (30, 3)
    assert s.config.streaming.heartbeat_interval_ms == 0
    assert s.enabled_providers() == ("anthropic", "openai", "mistral")
    assert not s.forbid_metered_fallback


def test_default_home_is_dot_olp_under_home(tmp_path: Path) -> None:
    s = load_settings({"HOME": str(tmp_path)})
    assert s.home == tmp_path / ".olp" and s.home.is_dir()


def test_environment_overrides(home: Path) -> None:
    token = "owner-token-from-the-environment-0123"
    s = _settings(home, OLP_PORT="8080", OLP_BIND="0.0.0.0", OLP_LOG_LEVEL="WARN",
                  OLP_OWNER_TOKEN=token, OLP_FORBID_METERED_FALLBACK="1")
    assert (s.port, s.bind, s.log_level, s.owner_token) == (8080, "0.0.0.0", "warning", token)
    assert s.forbid_metered_fallback
    assert token not in repr(s) and token not in str(s)


@pytest.mark.parametrize(("name", "value"), [
    ("OLP_PORT", "http"), ("OLP_PORT", "70000"), ("OLP_PORT", "-1"),
    ("OLP_LOG_LEVEL", "loud"), ("OLP_OWNER_TOKEN", "short-secret"),
])
def test_bad_environment_is_reported_by_name(home: Path, name: str, value: str) -> None:
    with pytest.raises(ConfigError, match=name) as info:
        _settings(home, **{name: value})
    if name == "OLP_OWNER_TOKEN":
        assert value not in str(info.value)


def test_olp_home_must_be_a_directory(tmp_path: Path) -> None:
    (tmp_path / "file").write_text("")
    with pytest.raises(ConfigError, match="not a directory"):
        load_settings({"OLP_HOME": str(tmp_path / "file")})


# -- the config file ------------------------------------------------------------------------


def test_a_full_example_decodes(home: Path) -> None:
    s = _settings(home, FULL_EXAMPLE)
    cfg = s.config
    assert cfg.providers.enabled == {"anthropic": True, "openai": True, "mistral": False,
                                     "router": True}
    assert s.enabled_providers() == ("anthropic", "openai", "router")
    sonnet = cfg.routing.chains["sonnet"]
    assert [e.label for e in sonnet] == ["sub", "api"]
    assert sonnet[0].on is None and not sonnet[0].metered
    assert sonnet[0].unsupported == "degrade"  # reasoning degrades; tools, images skip (#44)
    assert sonnet[1].on == ("usage_window", "unavailable") and sonnet[1].metered
    assert cfg.routing.soft_triggers["anthropic"].daily_request_count_threshold == 1000

    anthropic = s.provider("anthropic")
    assert anthropic.kind == "cli" and anthropic.binary == "claude" and not anthropic.metered
    assert anthropic.env["ANTHROPIC_BASE_URL"] == "http://127.0.0.1:9000"
    assert anthropic.timeouts == Timeouts(first_output_s=60, idle_s=120, total_s=600)
    router = s.provider("router")
    assert (router.kind, router.base_url, router.api_key_env) == (
        "openai-compatible", "https://example/v1", "ROUTER_KEY")
    assert router.metered and router.max_concurrent == 8
    assert "…" not in repr(s) and "…" not in repr(cfg.providers.blocks["anthropic"])


@pytest.mark.parametrize("value", ["degrade", "skip", "ignore"])
def test_every_unsupported_value_decodes(home: Path, value: str) -> None:
    # "skip" and "ignore" are what configs before issue #44 could say: still valid
    entry = {"provider": "anthropic", "model": "x", "unsupported": value}
    s = _settings(home, {"routing": {"chains": {"fast": [entry]}}})
    assert s.config.routing.chains["fast"][0].unsupported == value


def test_provider_defaults(home: Path) -> None:
    s = _settings(home, {"providers": {"openai": {"timeouts": {"idle_s": 30}}}})
    assert s.provider("anthropic").timeouts == Timeouts(first_output_s=60, idle_s=120,
                                                        total_s=600)
    assert s.provider("openai").timeouts == Timeouts(first_output_s=600, idle_s=30,
                                                     total_s=600)
    assert s.provider("mistral").timeouts == Timeouts(first_output_s=600, idle_s=120,
                                                      total_s=600)
    mistral = s.provider("mistral")
    assert mistral.max_concurrent == 4 and mistral.binary is None and mistral.enabled
    assert mistral.extra_args == () and dict(mistral.env) == {}
    with pytest.raises(KeyError):
        s.provider("router")


def test_metered_defaults_by_kind_and_can_be_declared(home: Path) -> None:
    s = _settings(home, {"providers": {
        "local": {"kind": "openai-compatible", "base_url": "http://127.0.0.1:8000/v1",
                  "metered": False},
        "paid": {"kind": "openai-compatible", "base_url": "https://x/v1"},
        "anthropic": {"metered": True}}})
    assert not s.provider("local").metered
    assert s.provider("paid").metered
    assert s.provider("anthropic").metered and not s.provider("openai").metered
    assert s.provider_names() == ("anthropic", "openai", "gemini", "qwen", "mistral", "local",
                                  "paid")


def test_chain_entry_label_defaults_to_provider_and_model() -> None:
    assert ChainEntry(provider="anthropic", model="claude-haiku-4-5").label == (
        "anthropic:claude-haiku-4-5")


def test_server_block(home: Path) -> None:
    s = _settings(home, {"server": {"max_body_bytes": 1024, "drain_grace_s": 5,
                                    "kill_grace_s": 0.5}})
    assert (s.config.server.max_body_bytes, s.config.server.drain_grace_s,
            s.config.server.kill_grace_s) == (1024, 5, 0.5)


@pytest.mark.parametrize(("config", "expected"), [
    ({"providers": {"anthropic": {"max_concurrent": "4"}}},
     "providers.anthropic.max_concurrent: Expected int, got str"),
    ({"providers": {"anthropic": {"max_concurrent": 0}}},
     "providers.anthropic.max_concurrent: Expected int >= 1"),
    ({"auth": {"allow_anonymus": True}}, "auth.allow_anonymus: unknown field"),
    ({"routng": {}}, "routng: unknown field"),
    ({"auth": {"fallback_detail_header_policy": "everyone"}},
     "auth.fallback_detail_header_policy: Invalid enum value 'everyone'"),
    ({"providers": {"enabled": {"openai": "yes"}}},
     "providers.enabled.openai: Expected bool, got str"),
    ({"providers": {"anthropic": {"env": {"KEY": 1}}}},
     "providers.anthropic.env.KEY: Expected str, got int"),
    ({"providers": {"openai": {"timeouts": {"total_s": 0}}}},
     "providers.openai.timeouts.total_s: Expected float > 0.0"),
    ({"routing": {"chains": {"fast": [{"provider": "anthropic", "modle": "x"}]}}},
     "routing.chains.fast[0].modle: unknown field"),
    ({"routing": {"chains": {"fast": [{"provider": "anthropic", "model": "x",
                                       "on": ["sometimes"]}]}}},
     "routing.chains.fast[0].on[0]: Invalid enum value 'sometimes'"),
    ({"routing": {"chains": {"fast": [{"provider": "anthropic", "model": "x",
                                       "unsupported": "drop"}]}}},
     "routing.chains.fast[0].unsupported: Invalid enum value 'drop'"),
    ({"routing": {"chains": {"fast": []}}}, "routing.chains.fast: a chain needs at least one"),
    ({"routing": {"default_fallbacks": [{"provider": "openai"}]}},
     "routing.default_fallbacks[0]: Object missing required field model"),
    ({"routing": {"soft_triggers": {"openai": {"daily_request_count_threshold": -1}}}},
     "routing.soft_triggers.openai.daily_request_count_threshold: Expected int >= 1"),
    ({"streaming": {"heartbeat_interval_ms": 1.5}},
     "streaming.heartbeat_interval_ms: Expected int, got float"),
    ({"server": {"max_body_bytes": "5MB"}}, "server.max_body_bytes: Expected int, got str"),
    ([1, 2], "(top level): Expected object, got array"),
    ({"providers": {"router": {"base_url": "https://x/v1"}}},
     "providers.router.kind: required for a provider that is not built in"),
    ({"providers": {"router": {"kind": "grpc", "base_url": "x"}}},
     "providers.router.kind: Invalid enum value 'grpc'"),
    ({"providers": {"router": {"kind": "openai-compatible"}}},
     "providers.router.base_url: required"),
    ({"providers": {"anthropic": {"kind": "openai-compatible"}}},
     "providers.anthropic.kind: anthropic is a built-in CLI provider"),
    ({"providers": {"enabled": {"rotuer": True}}}, "providers.enabled.rotuer: unknown provider"),
    ({"providers": {"anthropic": {"timeouts": {"idle_s": 300}}}},
     "providers.anthropic.timeouts.idle_s: must be below 300"),
    ({"providers": {"openai": {"home_files": {"../.bashrc": "x"}}}},
     "providers.openai.home_files: '../.bashrc' must be a relative path"),
    ({"providers": {"openai": {"home_files": {"/etc/passwd": "x"}}}},
     "providers.openai.home_files: '/etc/passwd' must be a relative path"),
    *[({"providers": {"openai": {"home_files": {key: "x"}}}},
       f"providers.openai.home_files: {key!r} names a directory")
      for key in (".", "./", "a/", "a/.", ".codex/", ".codex//", "tmp", "./tmp")],
    ({"providers": {"openai": {"home_files": {"": "x"}}}},
     "providers.openai.home_files: '' must be a relative path"),
    ({"providers": {"openai": {"home_files": {"a\x00b": "x"}}}},
     "providers.openai.home_files: 'a\\x00b' must be a relative path"),
    ({"providers": {"openai": {"home_files": {".codex": "x", ".codex/config.toml": "y"}}}},
     "providers.openai.home_files: '.codex' names a directory (it holds '.codex/config.toml')"),
    *[({"providers": {"router": {"kind": "openai-compatible", "base_url": url}}},
       f"providers.router.base_url: {url!r} must be an http:// or https:// URL")
      for url in ("file:///etc/passwd", "ftp://example.com/v1", "javascript:alert(1)",
                  "example.com/v1", "not a url")],
    *[({"providers": {"router": {"kind": "openai-compatible", "base_url": url}}},
       f"providers.router.base_url: {url!r} must be an http(s) URL with a host")
      for url in ("http://", "https:///v1", "http://:8000/v1", "http://host:0/v1",
                  "https://exa mple.com/v1")],
    ({"providers": {"router": {"kind": "openai-compatible", "base_url": "http://h:99999/"}}},
     "providers.router.base_url: 'http://h:99999/' is not a URL"),
    ({"providers": {"anthropic": {"base_url": "file:///x"}}},
     "providers.anthropic.base_url: 'file:///x' must be an http:// or https:// URL"),
])
def test_errors_name_the_path(home: Path, config: Any, expected: str) -> None:
    message = _error(home, config)
    assert message.startswith(f"{home / 'config.json'}: ")
    assert expected in message
    assert "`" not in message


def test_invalid_json_reports_line_and_column(home: Path) -> None:
    message = _error(home, '{\n  "auth": {\n    "allow_anonymous": true,\n  }\n}\n')
    assert "config.json: invalid JSON at line 4, column 3" in message
    assert "invalid JSON" in _error(home, "")


@pytest.mark.parametrize("url", ["http://127.0.0.1:8000/v1", "https://example/v1",
                                 "https://api.example.com", "http://[::1]:9/v1",
                                 "HTTPS://Example.COM/v1"])
def test_http_base_urls_pass(home: Path, url: str) -> None:
    s = _settings(home, {"providers": {"router": {"kind": "openai-compatible",
                                                  "base_url": url}}})
    assert s.provider("router").base_url == url


def test_home_files_that_name_files_pass(home: Path) -> None:
    files = {".codex/config.toml": "a", "./.vibe/config.toml": "b", ".netrc": "c",
             "tmp/x": "d", ".codex/sub/f": "e"}
    s = _settings(home, {"providers": {"openai": {"home_files": files}}})
    assert dict(s.provider("openai").home_files) == files


@pytest.mark.parametrize("data", [b"[" * 100_000 + b"]" * 100_000,
                                  b'{"providers": ' + b'{"a": ' * 50_000 + b"1"
                                  + b"}" * 50_001])
def test_deep_nesting_is_a_config_error(home: Path, data: bytes) -> None:
    home.mkdir(parents=True)
    (home / "config.json").write_bytes(data)
    with pytest.raises(ConfigError) as info:
        load_settings({"OLP_HOME": str(home)})
    assert str(info.value).startswith(f"{home / 'config.json'}: ")
    assert "nested too deeply" in str(info.value)


def test_unreadable_config_is_a_config_error(home: Path) -> None:
    (home / "config.json").mkdir(parents=True)
    with pytest.raises(ConfigError, match="cannot read"):
        load_settings({"OLP_HOME": str(home)})


@pytest.fixture(scope="module")
def fuzz_path() -> Iterator[Path]:
    with tempfile.TemporaryDirectory() as tmp:
        yield Path(tmp) / "config.json"


_JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner,
                                                                 max_size=4),
    max_leaves=20)
_KEYS = st.sampled_from(["auth", "providers", "routing", "streaming", "server", "enabled",
                         "anthropic", "router", "chains", "kind", "timeouts", "idle_s"])


@settings(max_examples=200, deadline=None)
@given(doc=st.dictionaries(_KEYS, _JSON | st.dictionaries(_KEYS, _JSON), max_size=4))
def test_any_json_document_is_a_config_or_a_config_error(fuzz_path: Path,
                                                         doc: dict[str, Any]) -> None:
    fuzz_path.write_text(json.dumps(doc), encoding="utf-8")
    try:
        load_config(fuzz_path)
    except ConfigError as exc:
        assert str(exc).startswith(f"{fuzz_path}: ")


# -- binaries -------------------------------------------------------------------------------


def _exe(directory: Path, name: str) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / name
    path.write_text("#!/bin/sh\nexit 0\n")
    path.chmod(0o755)
    return path


def test_resolve_binary_order(home: Path, tmp_path: Path) -> None:
    on_path = _exe(tmp_path / "bin", "claude")
    env_bin = _exe(tmp_path / "elsewhere", "claude-env")
    cfg_bin = _exe(tmp_path / "configured", "claude-cfg")
    environ = {"PATH": str(tmp_path / "bin")}
    plain = _settings(home)
    assert resolve_binary("anthropic", plain, environ) == str(on_path)
    assert resolve_binary("openai", plain, environ) is None  # no codex on PATH
    assert resolve_binary("anthropic", plain, {**environ, "OLP_CLAUDE_BIN": str(env_bin)}) == (
        str(env_bin))
    configured = _settings(home, {"providers": {"anthropic": {"binary": str(cfg_bin)}}})
    assert resolve_binary("anthropic", configured,
                          {**environ, "OLP_CLAUDE_BIN": str(env_bin)}) == str(cfg_bin)


def test_resolve_binary_misses(home: Path, tmp_path: Path) -> None:
    not_executable = tmp_path / "bin" / "vibe"
    not_executable.parent.mkdir()
    not_executable.write_text("")
    s = _settings(home, {"providers": {"router": {"kind": "openai-compatible",
                                                  "base_url": "https://x/v1"}}})
    environ = {"PATH": str(not_executable.parent)}
    assert resolve_binary("mistral", s, environ) is None
    assert resolve_binary("mistral", s, {**environ, "OLP_VIBE_BIN": "/no/such/vibe"}) is None
    assert resolve_binary("router", s, environ) is None  # an HTTP provider has no binary
    assert resolve_binary("nope", s, environ) is None


def test_resolve_binary_returns_an_absolute_path(home: Path, tmp_path: Path,
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    _exe(tmp_path / "rel", "codex")
    monkeypatch.chdir(tmp_path)
    found = resolve_binary("openai", _settings(home), {"OLP_CODEX_BIN": "rel/codex",
                                                        "PATH": os.defpath})
    assert found == str(tmp_path / "rel" / "codex")


def test_the_configuration_page_example_loads(tmp_path: Path) -> None:
    """The full example in ``docs/configuration.md`` is a valid config.json (every section it
    shows, e.g. ``audit``, is read)."""
    page = (Path(__file__).parents[3] / "docs" / "configuration.md").read_text()
    start = page.index('```json\n{\n  "auth"') + len("```json\n")
    example = page[start:page.index("```", start)]
    path = tmp_path / "config.json"
    path.write_text(example)
    config = load_config(path)
    assert config.audit.max_age_days == 90 and config.audit.usage_days == 400
    assert config.providers.blocks["anthropic"].warm == 1


# -- warm pools -----------------------------------------------------------------------------


def test_warm_defaults_come_from_the_kit_and_can_be_overridden(home: Path) -> None:
    settings = _settings(home, {"providers": {"openai": {"warm": 3, "warm_ttl_s": 60}}})
    assert settings.provider("anthropic").warm == 1
    assert (settings.provider("openai").warm, settings.provider("openai").warm_ttl_s) == (3, 60)
    assert settings.provider("mistral").warm == 1  # sessions on a long-lived vibe-acp


def test_warm_for_a_provider_that_starts_no_process_says_why(home: Path) -> None:
    message = _error(home, {"providers": {"router": {
        "kind": "openai-compatible", "base_url": "https://example.com/v1", "warm": 1}}})
    assert "providers.router.warm" in message and "start no process" in message
    assert _settings(home, {"providers": {"mistral": {"warm": 0}}}).provider("mistral").warm == 0


@pytest.mark.parametrize("value", [-1, 17, 1.5, "1"])
def test_warm_must_be_a_small_count(home: Path, value: object) -> None:
    assert "providers.anthropic.warm" in _error(home, {"providers": {"anthropic": {
        "warm": value}}})


# -- codex's mode (issue #43) ---------------------------------------------------------------


def test_codex_mode_chooses_the_app_server_and_only_codex_takes_it(home: Path) -> None:
    assert _settings(home, {}).provider("openai").app_server is True  # the default
    chosen = _settings(home, {"providers": {"openai": {"codex_mode": "app-server"}}})
    assert chosen.provider("openai").app_server is True
    assert _settings(home, {"providers": {"openai": {"codex_mode": "exec"}}}).provider(
        "openai").app_server is False
    assert chosen.provider("anthropic").app_server is False
    message = _error(home, {"providers": {"anthropic": {"codex_mode": "app-server"}}})
    assert "providers.anthropic.codex_mode" in message and "only codex" in message
    assert "providers.openai.codex_mode" in _error(home, {"providers": {"openai": {
        "codex_mode": "server"}}})
