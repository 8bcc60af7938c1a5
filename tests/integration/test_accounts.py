"""Several logins of one CLI through a running ``olp start`` (issue #30): each key served
only by the logins bound to it, a rate-limited login handing the request to the key's other
login before the next provider, and warm processes kept per login. The fake claude reports
which login reached it (``FAKE_CLAUDE_ECHO``: the token in its private home)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import httpx
import trio
from olp_harness import FAKE_CLAUDE, FAKES, Proxy, in_thread, run_proxy, wait_until

MODEL = "claude-sonnet-4-6"


def _login(home: Path, token: str) -> None:
    home.mkdir(parents=True, exist_ok=True, mode=0o700)
    (home / ".credentials.json").write_text(json.dumps({"claudeAiOauth": {"accessToken": token}}))


def config(alice_env: dict[str, str] | None = None, bob_env: dict[str, str] | None = None,
           **claude: Any) -> dict[str, Any]:
    return {
        "auth": {"fallback_detail_header_policy": "all"},
        "providers": {
            "enabled": {"mistral": False},
            "anthropic": {"binary": str(FAKE_CLAUDE), "max_concurrent": 4,
                          "env": {"FAKE_CLAUDE_ECHO": "1"},
                          "accounts": {"alice": {"env": alice_env or {}},
                                       "bob": {"env": bob_env or {}}}, **claude},
            "openai": {"binary": str(FAKES / "fake_codex.py"), "metered": True,
                       "env": {"OPENAI_API_KEY": "sk-fake"}}},
        "routing": {"chains": {"smart": [
            {"provider": "anthropic", "model": MODEL},
            {"provider": "openai", "model": "gpt-5.5", "metered": True}]}}}


def olp(home: Path, *args: str) -> str:
    done = subprocess.run([sys.executable, "-m", "olp", *args],
                          env={"PATH": "/usr/bin:/bin", "OLP_HOME": str(home)},
                          capture_output=True, text=True, timeout=30, check=True)
    return done.stdout


def new_key(home: Path, name: str, *args: str) -> str:
    made = json.loads(olp(home, "keys", "create", name, "--json", *args))
    return str(made["key"])


def ask(proxy: Proxy, key: str, text: str = "hi") -> httpx.Response:
    return httpx.post(f"{proxy.url}/v1/chat/completions", timeout=30,
                      headers={"Authorization": f"Bearer {key}"},
                      json={"model": "smart", "messages": [{"role": "user", "content": text}]})


def login_of(response: httpx.Response) -> str | None:
    assert response.status_code == 200, response.text
    digest = json.loads(response.json()["choices"][0]["message"]["content"])
    return digest["login"]


def homes(tmp_path: Path) -> tuple[Path, dict[str, str]]:
    """OLP's home with alice's and bob's logins, and an owner home with the owner's."""
    home = tmp_path / "olp"
    _login(home / "accounts" / "anthropic" / "alice", "alice-login")
    _login(home / "accounts" / "anthropic" / "bob", "bob-login")
    _login(tmp_path / "owner" / ".claude", "owner-login")
    return home, {"HOME": str(tmp_path / "owner")}


async def test_each_key_is_served_only_by_the_logins_bound_to_it(tmp_path: Path) -> None:
    home, env = homes(tmp_path)
    home.mkdir(exist_ok=True)
    (home / "config.json").write_text(json.dumps(config()))
    alice = new_key(home, "alice", "--accounts", "anthropic:alice")
    bob = new_key(home, "bob", "--accounts", "anthropic:bob")
    guest = new_key(home, "guest")
    with trio.fail_after(60):
        async with run_proxy(home, config(), env=env) as proxy:
            for n in range(2):
                a, b, g = await in_thread(lambda n=n: (ask(proxy, alice, f"hi {n}"),
                                                       ask(proxy, bob, f"hi {n}"),
                                                       ask(proxy, guest, f"hi {n}")))
                assert (login_of(a), login_of(b), login_of(g)) == (
                    "alice-login", "bob-login", "owner-login")
                assert a.headers["x-olp-account"] == "alice"
                assert b.headers["x-olp-account"] == "bob"
                assert "x-olp-account" not in g.headers  # a guest learns no shared login
            owner = await in_thread(lambda: ask(proxy, proxy.token))
            assert owner.headers["x-olp-account"] == "default"
            # A binding changed while OLP runs applies within the key memo's 2 s (each ask
            # is new text: an answer cached for the key would be served whoever's it was).
            olp(home, "keys", "update", "guest", "--accounts", "anthropic:bob")
            asked = iter(range(1000))
            assert await wait_until(
                lambda: login_of(ask(proxy, guest, f"again {next(asked)}")) == "bob-login",
                within=10, step=0.5)


async def test_a_rate_limited_login_hands_over_to_the_keys_other_login_then_codex(
        tmp_path: Path) -> None:
    home, env = homes(tmp_path)
    limited = {"FAKE_CLAUDE_SCENARIO": "rate_limit"}
    cfg = config(alice_env=limited)
    home.mkdir(exist_ok=True)
    (home / "config.json").write_text(json.dumps(cfg))
    both = new_key(home, "both", "--accounts", "anthropic:alice,anthropic:bob")
    with trio.fail_after(90):
        async with run_proxy(home, cfg, env=env) as proxy:
            answer = await in_thread(lambda: ask(proxy, both))
            assert login_of(answer) == "bob-login"
            assert answer.headers["x-olp-provider-used"] == "anthropic"
            detail = json.loads(answer.headers["x-olp-fallback-detail"])
            assert [(d["provider"], d["account"], d["category"]) for d in detail] == [
                ("anthropic", "alice", "rate_limited")]
    cfg = config(alice_env=limited, bob_env=limited)
    with trio.fail_after(90):
        async with run_proxy(home, cfg, env=env) as proxy:
            answer = await in_thread(lambda: ask(proxy, both, "not the cached one"))
            assert answer.status_code == 200, answer.text
            assert answer.headers["x-olp-provider-used"] == "openai"
            detail = json.loads(answer.headers["x-olp-fallback-detail"])
            assert [(d["account"], d["category"]) for d in detail] == [
                ("alice", "rate_limited"), ("bob", "rate_limited")]
            assert "x-olp-account" not in answer.headers or \
                answer.headers["x-olp-account"] == "default"


async def test_warm_processes_are_kept_per_login(tmp_path: Path) -> None:
    home, env = homes(tmp_path)
    cfg = config(warm=1)
    home.mkdir(exist_ok=True)
    (home / "config.json").write_text(json.dumps(cfg))
    alice = new_key(home, "alice", "--accounts", "anthropic:alice")
    bob = new_key(home, "bob", "--accounts", "anthropic:bob")
    with trio.fail_after(90):
        async with run_proxy(home, cfg, env=env) as proxy:
            # Once warm, every request of each key is answered by its own login, warm or not.
            for n in range(3):
                a, b = await in_thread(lambda n=n: (ask(proxy, alice, f"hi {n}"),
                                                    ask(proxy, bob, f"hi {n}")))
                assert (login_of(a), login_of(b)) == ("alice-login", "bob-login")
            health = proxy.get("/health").json()["providers"]
            assert health["anthropic@alice"]["warm"]["hits"] >= 1
            assert health["anthropic@bob"]["warm"]["hits"] >= 1
            # Each login is a row of its own: its account, its login found, whom it serves.
            alice_row = health["anthropic@alice"]
            assert (alice_row["provider"], alice_row["account"], alice_row["credentials"],
                    alice_row["serves"]) == ("anthropic", "alice", True, "bound keys")
            assert health["anthropic"]["account"] == "default"
            assert set(health["anthropic"]["accounts"]) == {"default", "alice", "bob"}


async def test_a_reload_adds_and_removes_logins_and_keeps_the_others(tmp_path: Path) -> None:
    from olp_harness import OWNER_TOKEN

    home, env = homes(tmp_path)
    only_alice = config()
    del only_alice["providers"]["anthropic"]["accounts"]["bob"]
    home.mkdir(exist_ok=True)
    (home / "config.json").write_text(json.dumps(only_alice))
    alice = new_key(home, "alice", "--accounts", "anthropic:alice")
    both = config()

    def reload() -> str:
        done = subprocess.run(
            [sys.executable, "-m", "olp", "reload"], capture_output=True, text=True,
            timeout=60, check=True,
            env={"PATH": "/usr/bin:/bin", "OLP_HOME": str(home), "OLP_OWNER_TOKEN": OWNER_TOKEN,
                 "OLP_PORT": proxy.url.rsplit(":", 1)[1]})
        return done.stdout

    with trio.fail_after(90):
        async with run_proxy(home, only_alice, env=env) as proxy:
            assert login_of(await in_thread(lambda: ask(proxy, alice, "one"))) == "alice-login"
            (home / "config.json").write_text(json.dumps(unchecked(both)))
            added = await in_thread(reload)
            olp(home, "keys", "create", "bob", "--accounts", "anthropic:bob")
            bob = json.loads(olp(home, "keys", "rotate", "bob", "--json"))["key"]
            assert login_of(await in_thread(lambda: ask(proxy, bob, "two"))) == "bob-login"
            (home / "config.json").write_text(json.dumps(unchecked(only_alice)))
            removed = await in_thread(reload)
            gone = await in_thread(lambda: ask(proxy, bob, "three"))
            assert login_of(await in_thread(lambda: ask(proxy, alice, "four"))) == "alice-login"
    assert "kept anthropic, anthropic@alice" in added and "started anthropic@bob" in added
    assert "retired anthropic@bob" in removed and "kept anthropic, anthropic@alice" in removed
    # bob's login is gone: his key, bound to it alone, is served by no other claude login,
    # only by the chain's next entry
    assert gone.status_code == 200 and gone.headers["x-olp-provider-used"] == "openai"
    detail = json.loads(gone.headers["x-olp-fallback-detail"])
    assert [(d["provider"], d["code"]) for d in detail] == [("anthropic", "KEY_POLICY")]


def unchecked(config: dict[str, Any]) -> dict[str, Any]:
    """A config as ``run_proxy`` writes it (the fakes need no lockdown check)."""
    from olp_harness import cold_by_default, fakes_on_exec, unchecked_by_default, unconfined_fakes

    return fakes_on_exec(unchecked_by_default(cold_by_default(unconfined_fakes(
        json.loads(json.dumps(config))))))
