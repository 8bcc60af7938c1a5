"""Accounts with the REAL CLIs (issue #30): two logins of claude and two of codex, each in its
own account home, through ``olp start`` with the official ``openai`` SDK. Each key is bound
to one login, and the loopback mock records which credential each upstream request carried
(as a SHA-256): every request of a key carries its own login's token, never the other's.

Needs ``OLP_REAL_CLAUDE`` and ``OLP_REAL_CODEX`` (printed by ``scripts/install-real-clis``):
skips without them, fails in CI (``CI=true``).
"""

from __future__ import annotations

import functools
import hashlib
import json
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import httpx
import trio
from mock_anthropic import MockAnthropic
from mock_anthropic import serve_mock as serve_anthropic
from mock_openai_responses import MockResponses
from mock_openai_responses import serve_mock as serve_responses
from olp_harness import Proxy, in_thread, real_cli, run_proxy
from test_codex_rate_limits import _jwt
from test_proxy_real_codex import codex_config_toml

MESSAGES: list[Any] = [{"role": "user", "content": "Say hello in four words."}]


def sha(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


def claude_login(home: Path, token: str) -> None:
    """A claude login as ``/login`` keeps one under ``CLAUDE_CONFIG_DIR`` (fake, unexpired)."""
    home.mkdir(parents=True, mode=0o700)
    expires = (int(time.time()) + 30 * 86400) * 1000
    (home / ".credentials.json").write_text(json.dumps({"claudeAiOauth": {
        "accessToken": token, "refreshToken": f"rt-{token}", "expiresAt": expires,
        "scopes": ["user:inference", "user:profile"], "subscriptionType": "max"}}))


def codex_login(home: Path, account: str) -> str:
    """A ChatGPT login as ``codex login`` keeps one in ``$CODEX_HOME/auth.json`` (fake
    unsigned tokens that need no refresh); returns its access token."""
    home.mkdir(parents=True, mode=0o700)
    now = int(time.time())
    auth = {"chatgpt_plan_type": "plus", "chatgpt_account_id": f"acct-{account}",
            "chatgpt_user_id": f"user-{account}"}
    claims = {"exp": now + 30 * 86400, "iat": now, "https://api.openai.com/auth": auth}
    token = _jwt(claims)
    (home / "auth.json").write_text(json.dumps({
        "auth_mode": "chatgpt", "OPENAI_API_KEY": None,
        "tokens": {"id_token": _jwt({"email": f"{account}@example.com", **claims}),
                   "access_token": token, "refresh_token": f"rt-{account}",
                   "account_id": f"acct-{account}"},
        "last_refresh": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(now))}))
    return token


def new_key(home: Path, name: str, binding: str) -> str:
    done = subprocess.run([sys.executable, "-m", "olp", "keys", "create", name, "--json",
                           "--accounts", binding],
                          env={"PATH": "/usr/bin:/bin", "OLP_HOME": str(home)},
                          capture_output=True, text=True, timeout=30, check=True)
    return str(json.loads(done.stdout)["key"])


def ask(proxy: Proxy, key: str, model: str, text: str) -> tuple[str, dict[str, str]]:
    raw = proxy.client(key).chat.completions.with_raw_response.create(
        model=model, messages=[{"role": "user", "content": text}])
    answer = raw.parse()
    return answer.choices[0].message.content or "", dict(raw.headers)


def write_config(home: Path, config: dict[str, Any]) -> None:
    home.mkdir(parents=True, exist_ok=True)
    (home / "config.json").write_text(json.dumps(config))


async def test_two_claude_logins_each_serve_only_their_own_key(tmp_path: Path,
                                                                nursery: trio.Nursery) -> None:
    claude = real_cli("OLP_REAL_CLAUDE")
    mock: MockAnthropic = await nursery.start(functools.partial(serve_anthropic,
                                                                scenario="success"))
    home = tmp_path / "olp"
    claude_login(home / "accounts" / "anthropic" / "alice", "sk-ant-oat01-alice")
    claude_login(home / "accounts" / "anthropic" / "bob", "sk-ant-oat01-bob")
    config = {
        "auth": {"fallback_detail_header_policy": "all"},
        "providers": {
            "enabled": {"openai": False, "mistral": False},
            "anthropic": {"binary": claude, "max_concurrent": 2,
                          "env": {"ANTHROPIC_BASE_URL": mock.base_url,
                                  "CLAUDE_CODE_MAX_RETRIES": "1"},
                          "accounts": {"alice": {}, "bob": {}},
                          "timeouts": {"first_output_s": 45, "idle_s": 20, "total_s": 55}}},
        "routing": {"chains": {"c": [{"provider": "anthropic", "model": "claude-sonnet-4-6"}]}},
        "server": {"kill_grace_s": 1}}
    write_config(home, config)
    alice = new_key(home, "alice", "anthropic:alice")
    bob = new_key(home, "bob", "anthropic:bob")
    owner_home = tmp_path / "owner"  # no login of the owner's: the default account has none
    owner_home.mkdir()
    with trio.fail_after(150):
        async with run_proxy(home, config, env={"HOME": str(owner_home)}) as proxy:
            for n, (key, account) in enumerate([(alice, "alice"), (bob, "bob"),
                                                (bob, "bob"), (alice, "alice")]):
                mock.clear_requests()
                text, headers = await in_thread(
                    lambda key=key, n=n: ask(proxy, key, "c", f"Say hello, {n}."))
                assert text == "Hello from the mock upstream."
                assert headers["x-olp-account"] == account
                requests = mock.requests
                assert requests, "no upstream request"
                assert {r["credential_sha256"] for r in requests} == {
                    sha(f"sk-ant-oat01-{account}")}
            health = await in_thread(lambda: proxy.get("/health").json())
    logins = health["providers"]["anthropic"]["accounts"]
    assert {n: a["credentials"] for n, a in logins.items()} == {
        "default": False, "alice": True, "bob": True}
    assert health["providers"]["anthropic@alice"]["sandbox"] == "bubblewrap"


async def test_two_codex_homes_each_serve_only_their_own_key(tmp_path: Path,
                                                              nursery: trio.Nursery) -> None:
    codex = real_cli("OLP_REAL_CODEX")
    mock: MockResponses = await nursery.start(functools.partial(serve_responses,
                                                                scenario="success"))
    home = tmp_path / "olp"
    tokens = {a: codex_login(home / "accounts" / "openai" / a, a) for a in ("alice", "bob")}
    toml = codex_config_toml(mock).replace('env_key = "OPENAI_API_KEY"\n',
                                           "requires_openai_auth = true\n")
    config = {
        "auth": {"fallback_detail_header_policy": "all"},
        "providers": {
            "enabled": {"openai": True, "anthropic": False, "mistral": False},
            "openai": {"binary": codex, "max_concurrent": 2,
                       "home_files": {".codex/config.toml": toml},
                       "accounts": {"alice": {}, "bob": {}},
                       "timeouts": {"first_output_s": 45, "idle_s": 20, "total_s": 55}}},
        "routing": {"chains": {"c": [{"provider": "openai", "model": "gpt-5.5"}]}},
        "server": {"kill_grace_s": 1}}
    write_config(home, config)
    keys = {a: new_key(home, a, f"openai:{a}") for a in ("alice", "bob")}
    owner_home = tmp_path / "owner"
    owner_home.mkdir()
    with trio.fail_after(150):
        async with run_proxy(home, config, env={"HOME": str(owner_home)}) as proxy:
            for n, account in enumerate(["alice", "bob", "alice"]):
                mock.clear_requests()
                text, headers = await in_thread(
                    lambda account=account, n=n: ask(proxy, keys[account], "c",
                                                     f"Say hello, {n}."))
                assert text == "Hello from the mock upstream."
                assert headers["x-olp-account"] == account
                assert headers["x-olp-credential"] == "subscription"
                requests = [r for r in mock.requests if r.get("credential_sha256")]
                assert requests, "no upstream request"
                assert {r["credential_sha256"] for r in requests} == {sha(tokens[account])}


async def test_a_continued_conversation_stays_on_the_login_holding_its_session(
        tmp_path: Path, nursery: trio.Nursery) -> None:
    """Turn 1 goes to bob's login (alice's rests), so bob keeps claude's session; once
    alice's rest is over, turn 2 still goes to bob and resumes that session, where the
    vendor's prompt cache is warm, rather than starting afresh on alice's login."""
    from olp.store import HEALTH_STATE, Database, StateStore

    claude = real_cli("OLP_REAL_CLAUDE")
    mock: MockAnthropic = await nursery.start(functools.partial(serve_anthropic,
                                                                scenario="success"))
    home = tmp_path / "olp"
    claude_login(home / "accounts" / "anthropic" / "alice", "sk-ant-oat01-alice")
    claude_login(home / "accounts" / "anthropic" / "bob", "sk-ant-oat01-bob")
    config = {
        "auth": {"fallback_detail_header_policy": "all"},
        "cache": {"enabled": False},
        "providers": {
            "enabled": {"openai": False, "mistral": False},
            "anthropic": {"binary": claude, "sessions": True,
                          "env": {"ANTHROPIC_BASE_URL": mock.base_url,
                                  "CLAUDE_CODE_MAX_RETRIES": "1"},
                          "accounts": {"alice": {}, "bob": {}},
                          "timeouts": {"first_output_s": 45, "idle_s": 20, "total_s": 55}}},
        "routing": {"chains": {"c": [{"provider": "anthropic", "model": "claude-sonnet-4-6"}]}},
        "server": {"kill_grace_s": 1}}
    write_config(home, config)
    key = new_key(home, "both", "anthropic:alice,anthropic:bob")
    with Database(home / "olp.db") as db:
        await StateStore(db).save_async(HEALTH_STATE, {"circuits": [], "cooldowns": [{
            "provider": "anthropic@alice", "model": None, "category": "usage_window",
            "reason": "USAGE_WINDOW", "until": time.time() + 3600}]})
    owner_home = tmp_path / "owner"
    owner_home.mkdir()
    with trio.fail_after(150):
        async with run_proxy(home, config, env={"HOME": str(owner_home)}) as proxy:
            client = proxy.client(key)
            messages: list[Any] = [{"role": "system", "content": "You are terse."},
                                   {"role": "user", "content": "Turn 1. Say hello."}]

            def turn() -> dict[str, str]:
                raw = client.chat.completions.with_raw_response.create(model="c",
                                                                       messages=messages)
                messages.append({"role": "assistant",
                                 "content": raw.parse().choices[0].message.content})
                return dict(raw.headers)

            first = await in_thread(turn)
            reset = await in_thread(lambda: httpx.post(
                f"{proxy.url}/v0/management/cooldowns/reset", timeout=10,
                headers={"Authorization": f"Bearer {proxy.token}"}))
            messages.append({"role": "user", "content": "Turn 2. Say hello again."})
            mock.clear_requests()
            second = await in_thread(turn)
    assert (first["x-olp-account"], first["x-olp-session"]) == ("bob", "new")
    assert reset.status_code == 200 and reset.json()["reset"]  # alice may serve again
    assert (second["x-olp-account"], second["x-olp-session"]) == ("bob", "resumed")
    assert {r["credential_sha256"] for r in mock.requests} == {sha("sk-ant-oat01-bob")}
