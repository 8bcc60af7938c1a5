"""Accounts at start-up (issue #30): an actor per login of a CLI provider, each finding its
login only in its own home (never the owner's, never another account's), reported one by
one, and routed only where it can serve."""

from __future__ import annotations

import json
import stat
from pathlib import Path
from typing import Any

import pytest

from olp.actors import CliRunner
from olp.config import ConfigError, load_registry, load_settings
from olp.runtime import provider_actors
from olp.runtime.routing import build_router

CLAUDE = "anthropic"


def _login(home: Path, token: str) -> None:
    home.mkdir(parents=True, exist_ok=True)
    (home / ".credentials.json").write_text(json.dumps({"claudeAiOauth": {"accessToken": token}}))


def _settings(tmp_path: Path, block: dict[str, Any], chains: dict[str, Any] | None = None,
              ) -> Any:
    olp_home = tmp_path / "olp"
    olp_home.mkdir(exist_ok=True)
    config = {"providers": {CLAUDE: {"binary": "/bin/true", "sandbox": False, **block},
                            "enabled": {"openai": False, "gemini": False, "qwen": False,
                                        "mistral": False}},
              "routing": {"chains": chains or {"c": [{"provider": CLAUDE, "model": "sonnet"}]}}}
    (olp_home / "config.json").write_text(json.dumps(config))
    return load_settings({"OLP_HOME": str(olp_home)})


def _environ(tmp_path: Path, **extra: str) -> dict[str, str]:
    owner = tmp_path / "owner"
    _login(owner / ".claude", "owner-token")
    return {"HOME": str(owner), "PATH": "/usr/bin:/bin", **extra}


def test_each_account_is_an_actor_that_finds_only_its_own_login(tmp_path: Path) -> None:
    settings = _settings(tmp_path, {
        "env": {"CLAUDE_CODE_OAUTH_TOKEN": "owner-config-token", "ANTHROPIC_BASE_URL": "u"},
        "accounts": {"alice": {}, "bob": {"serves": "*",
                                          "env": {"CLAUDE_CODE_OAUTH_TOKEN": "bob-token"}}}})
    _login(settings.account_home(CLAUDE, "alice"), "alice-token")
    environ = _environ(tmp_path, CLAUDE_CODE_OAUTH_TOKEN="owner-env-token",
                       CLAUDE_CONFIG_DIR=str(tmp_path / "owner" / ".claude"))
    runtime = provider_actors.build(settings, environ)
    assert list(runtime.actors) == ["anthropic", "anthropic@alice", "anthropic@bob"]
    report = runtime.reports[CLAUDE]
    assert {n: (a.credentials, a.serves_all) for n, a in report.accounts.items()} == {
        "default": (True, True), "alice": (True, False), "bob": (True, True)}
    alice = runtime.actors["anthropic@alice"].runner
    assert isinstance(alice, CliRunner)
    home = tmp_path / "spawn-home"
    env = alice.environment(home)
    # The owner's token and config dir never reach another account's spawn, and the
    # account's own home is not handed to the CLI: its spawn keeps a private home.
    assert "CLAUDE_CODE_OAUTH_TOKEN" not in env and "CLAUDE_CONFIG_DIR" not in env
    assert env["ANTHROPIC_BASE_URL"] == "u"  # the provider's settings are inherited
    bob = runtime.actors["anthropic@bob"].runner
    assert isinstance(bob, CliRunner)
    assert bob.environment(home)["CLAUDE_CODE_OAUTH_TOKEN"] == "bob-token"  # its own
    links = alice.adapter.home_links(env, alice.config.real_home)
    assert links == {".claude/.credentials.json":
                     settings.account_home(CLAUDE, "alice") / ".credentials.json"}
    owner = runtime.actors["anthropic"].runner
    assert isinstance(owner, CliRunner)
    assert owner.environment(home)["CLAUDE_CODE_OAUTH_TOKEN"] == "owner-config-token"


def test_a_hop_uses_only_the_logins_it_can(tmp_path: Path) -> None:
    settings = _settings(tmp_path, {"accounts": {
        "alice": {}, "bob": {"serves": "*"},
        "metered": {"env": {"ANTHROPIC_API_KEY": "sk-test"}, "serves": "*"}}})
    _login(settings.account_home(CLAUDE, "alice"), "alice-token")
    runtime = provider_actors.build(settings, _environ(tmp_path))
    assert runtime.reports[CLAUDE].accounts["metered"].metered
    router = build_router(settings, load_registry(), runtime.providers)
    [hop] = router.resolve("c").hops
    # bob has no login; the metered account needs the entry's consent.
    assert (hop.accounts, hop.shared) == (("default", "alice"), ("default",))
    consented = _settings(tmp_path, {"accounts": {
        "metered": {"env": {"ANTHROPIC_API_KEY": "sk-test"}, "serves": "*"}}},
        chains={"c": [{"provider": CLAUDE, "model": "sonnet", "metered": True}]})
    runtime = provider_actors.build(consented, _environ(tmp_path))
    [hop] = build_router(consented, load_registry(), runtime.providers).resolve("c").hops
    assert hop.accounts == ("default", "metered")


def test_a_provider_with_no_login_anywhere_is_reported_once(tmp_path: Path) -> None:
    settings = _settings(tmp_path, {"accounts": {"alice": {}}})
    runtime = provider_actors.build(settings, {"HOME": str(tmp_path / "nobody"),
                                               "PATH": "/usr/bin:/bin"})
    report = runtime.reports[CLAUDE]
    assert not report.credentials and report.problems == ["no credentials found"]
    assert build_router(settings, load_registry(), runtime.providers).unusable_chains == {
        "c": "anthropic:sonnet: no credentials"}


def test_an_account_may_name_its_own_home(tmp_path: Path) -> None:
    elsewhere = tmp_path / "claude-work"
    _login(elsewhere, "work-token")
    settings = _settings(tmp_path, {"accounts": {"work": {"home": str(elsewhere)}}})
    runtime = provider_actors.build(settings, _environ(tmp_path))
    assert runtime.reports[CLAUDE].accounts["work"].home == str(elsewhere)
    assert runtime.reports[CLAUDE].accounts["work"].credentials


@pytest.mark.parametrize(("block", "why"), [
    ({"accounts": {"Alice": {}}}, "is not an account name"),
    ({"accounts": {"a": {"home": "relative/dir"}}}, "must be an absolute path"),
    ({"accounts": {"a": {"serves": "bob"}}}, r"accounts\[...\]\.serves: Invalid enum"),
])
def test_a_bad_account_is_a_config_error_naming_it(tmp_path: Path, block: dict[str, Any],
                                                  why: str) -> None:
    with pytest.raises(ConfigError, match=why):
        _settings(tmp_path, block)


def test_accounts_are_refused_on_an_http_provider(tmp_path: Path) -> None:
    olp_home = tmp_path / "olp"
    olp_home.mkdir()
    (olp_home / "config.json").write_text(json.dumps({"providers": {"local": {
        "kind": "openai-compatible", "base_url": "http://127.0.0.1:9/v1",
        "accounts": {"a": {}}}}}))
    with pytest.raises(ConfigError, match="accounts are logins of a CLI provider"):
        load_settings({"OLP_HOME": str(olp_home)})


def test_the_default_account_keeps_todays_meaning(tmp_path: Path) -> None:
    settings = _settings(tmp_path, {})
    [default] = settings.provider(CLAUDE).accounts
    assert (default.name, default.home, default.serves_all) == ("default", None, True)
    written = _settings(tmp_path, {"accounts": {"default": {}}})
    [default] = written.provider(CLAUDE).accounts
    assert not default.serves_all  # written without serves: only keys bound to it
    assert stat.S_ISDIR((tmp_path / "olp").stat().st_mode)


def test_a_reload_keeps_the_actors_of_unchanged_accounts(tmp_path: Path) -> None:
    from olp.runtime.reload import _same
    before = _settings(tmp_path, {"accounts": {"alice": {}}})
    after = _settings(tmp_path, {"accounts": {"alice": {}, "bob": {"serves": "*"}}})
    assert _same(before, after, "anthropic") and _same(before, after, "anthropic@alice")
    assert not _same(before, after, "anthropic@bob")  # new: started
    changed = _settings(tmp_path, {"accounts": {"alice": {"env": {"X": "1"}}}})
    assert not _same(before, changed, "anthropic@alice")
    assert _same(before, changed, "anthropic")
    removed = _settings(tmp_path, {})
    assert not _same(before, removed, "anthropic@alice")


def test_an_expired_login_is_named_and_not_routed_to(tmp_path: Path) -> None:
    settings = _settings(tmp_path, {"accounts": {"alice": {}, "bob": {}}})
    stale = {"claudeAiOauth": {"accessToken": "t", "expiresAt": 1_000}}  # 1970, no refresh
    for name, oauth in (("alice", stale),
                        ("bob", {"claudeAiOauth": {**stale["claudeAiOauth"],
                                                   "refreshToken": "r"}})):
        home = settings.account_home(CLAUDE, name)
        home.mkdir(parents=True)
        (home / ".credentials.json").write_text(json.dumps(oauth))
    runtime = provider_actors.build(settings, _environ(tmp_path))
    alice, bob = (runtime.reports[CLAUDE].accounts[n] for n in ("alice", "bob"))
    assert alice.expired and not alice.credentials and "expired" in alice.problem
    assert not bob.expired and bob.credentials  # claude refreshes a token it can
    [hop] = build_router(settings, load_registry(), runtime.providers).resolve("c").hops
    assert hop.accounts == ("default", "bob")


@pytest.mark.parametrize("provider", ["codex", "gemini"])
def test_expiry_is_read_from_codex_and_gemini_logins(tmp_path: Path, provider: str) -> None:
    import base64

    from olp.providers.codex import _credentials as codex
    from olp.providers.gemini import _credentials as gemini

    if provider == "codex":
        def jwt(exp: int) -> str:
            claims = base64.urlsafe_b64encode(json.dumps({"exp": exp}).encode()).decode()
            return f"e30.{claims.rstrip('=')}.c2ln"
        (tmp_path / ".codex").mkdir()
        path = tmp_path / ".codex" / "auth.json"
        path.write_text(json.dumps({"tokens": {"access_token": jwt(100)}}))
        assert codex.login_expired({}, tmp_path, now=200.0) is not None
        assert codex.login_expired({}, tmp_path, now=50.0) is None
        path.write_text(json.dumps({"tokens": {"access_token": jwt(100), "refresh_token": "r"}}))
        assert codex.login_expired({}, tmp_path, now=200.0) is None
        assert codex.login_expired({"OPENAI_API_KEY": "k"}, tmp_path, now=200.0) is None
    else:
        (tmp_path / ".gemini").mkdir()
        path = tmp_path / ".gemini" / "oauth_creds.json"
        path.write_text(json.dumps({"access_token": "a", "expiry_date": 100_000}))
        oauth = {"OLP_GEMINI_AUTH_TYPE": "oauth-personal"}
        assert gemini.login_expired(oauth, tmp_path, now=200.0) is not None
        assert gemini.login_expired(oauth, tmp_path, now=50.0) is None
        assert gemini.login_expired({}, tmp_path, now=200.0) is None  # an API key
