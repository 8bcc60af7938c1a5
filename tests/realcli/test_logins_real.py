"""Logins that last, with the REAL claude and codex through ``olp start`` (issue #41).

The vendors are played as the public reports describe them: a refresh token works once (a
reused one is refused: claude ``invalid_grant``, codex ``refresh_token_reused``) and the API
takes only the newest, unexpired access token. Their token endpoints are reached, by OLP and by
the CLIs alike, through the TLS interceptor in ``tests/support/vendor_logins`` with the CLIs'
own proxy and CA variables; the API is the loopback mock with the vendor's bearer check as its
gate. OLP refreshes a token 390 s before it ends (the CLI's 300 s margin + the 30 s a spawn
may take + 60 s): where a test crosses expiries, tokens live :data:`LIFETIME_S`, so OLP
refreshes every 15 s; elsewhere an hour.

Each test shows: every request served, one refresh per expiry per login and every refresh
made by OLP (no spawn ever called the token endpoint), and afterwards the owner's own CLI
working with the file as OLP left it, without a refresh of its own.

Needs ``OLP_REAL_CLAUDE`` and ``OLP_REAL_CODEX`` (printed by ``scripts/install-real-clis``).
"""

from __future__ import annotations

import functools
import json
import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest
import trio
from mock_anthropic import serve_mock as serve_anthropic
from mock_openai_responses import serve_mock as serve_responses
from mockhttp import RequestLog
from olp_harness import OWNER_TOKEN, Proxy, in_thread, real_cli, run_proxy, wait_until
from vendor_logins import Family, Interceptor, Vendor, serve_interceptor

LIFETIME_S = 405.0
TOTAL_S = 30
ANSWER = "Hello from the mock upstream."
MODELS = {"claude": "claude-sonnet-4-6", "codex": "gpt-5.5"}
PROVIDER = {"claude": "anthropic", "codex": "openai"}


@dataclass(frozen=True)
class Ran:
    returncode: int
    stdout: str
    stderr: str


@dataclass
class World:
    """One vendor, its API mock, the owner's home holding its login, and OLP's config."""

    cli: str  # "claude" or "codex"
    binary: str
    interceptor: Interceptor
    vendor: Vendor
    mock: RequestLog[Any]
    owner: Path  # the owner's HOME
    home: Path  # OLP_HOME

    @property
    def login_file(self) -> Path:
        return self.file_in(self.owner / (".claude" if self.cli == "claude" else ".codex"))

    def file_in(self, directory: Path) -> Path:
        return directory / (".credentials.json" if self.cli == "claude" else "auth.json")

    def write_login(self, directory: Path, family: Family) -> None:
        directory.mkdir(parents=True, exist_ok=True, mode=0o700)
        path = self.file_in(directory)
        path.write_text(json.dumps(self.vendor.login_file(family)))
        path.chmod(0o600)

    def access_in(self, path: Path) -> str:
        data = json.loads(path.read_text())
        return str(data["claudeAiOauth"]["accessToken"] if self.cli == "claude"
                   else data["tokens"]["access_token"])

    def config(self, *, warm: int = 0, accounts: dict[str, Any] | None = None
               ) -> dict[str, Any]:
        """OLP's config; ``warm`` > 0 runs codex as ``codex exec`` (its app-server, the
        default, has no pool: its own test)."""
        block: dict[str, Any] = {
            "binary": self.binary, "max_concurrent": 8, "warm": warm,
            "env": self.interceptor.env_for(self.cli),
            "timeouts": {"first_output_s": 25, "idle_s": 20, "total_s": TOTAL_S}}
        if self.cli == "claude":
            block["env"].update(ANTHROPIC_BASE_URL=self.mock._url(), CLAUDE_CODE_MAX_RETRIES="0")
        else:
            block["home_files"] = {".codex/config.toml": codex_toml(self.mock)}
            block["codex_mode"] = "exec" if warm else "app-server"
        if accounts is not None:
            block["accounts"] = accounts
        others = {p: False for p in ("anthropic", "openai", "mistral", "gemini", "qwen")
                  if p != PROVIDER[self.cli]}
        return {"providers": {"enabled": others, PROVIDER[self.cli]: block},
                "routing": {"chains": {"c": [{"provider": PROVIDER[self.cli],
                                              "model": MODELS[self.cli]}]}},
                "server": {"kill_grace_s": 1}}

    def proxy_env(self) -> dict[str, str]:
        return {"HOME": str(self.owner), **self.interceptor.env_for("olp")}

    def refreshes(self) -> list[dict[str, Any]]:
        return self.vendor.refreshes

    def assert_every_refresh_was_olps_and_spent_a_live_token(self) -> None:
        assert self.refreshes(), "no refresh at all"
        for refresh in self.refreshes():
            assert refresh["outcome"] == "ok", refresh
            assert refresh["headers"]["user-agent"].startswith("olp/"), refresh["headers"]

    async def owners_cli(self, login_dir: Path | None = None) -> Ran:
        """The owner's own CLI, as they run it at home (its own login file, its own
        variables), answering one prompt against the same vendor; ``login_dir``: an account's
        home instead (as ``CLAUDE_CONFIG_DIR`` / ``CODEX_HOME``: that person's own CLI)."""
        env = {"PATH": os.environ["PATH"], "HOME": str(self.owner), "LANG": "C.UTF-8",
               **self.interceptor.env_for(self.cli)}
        if self.cli == "claude":
            argv = [self.binary, "-p", "--output-format", "stream-json", "--verbose",
                    "--model", MODELS["claude"]]
            env.update(ANTHROPIC_BASE_URL=self.mock._url(), CLAUDE_CODE_MAX_RETRIES="0",
                       CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC="1", DISABLE_AUTOUPDATER="1")
            if login_dir is not None:
                env["CLAUDE_CONFIG_DIR"] = str(login_dir)
            config = None
        else:
            argv = [self.binary, "exec", "--json", "--skip-git-repo-check", "--ephemeral",
                    "-m", MODELS["codex"], "-"]
            if login_dir is not None:
                env["CODEX_HOME"] = str(login_dir)
            config = (login_dir or self.owner / ".codex") / "config.toml"
            config.write_text(codex_toml(self.mock))
        try:
            done = await trio.run_process(argv, stdin=b"Say hello.", capture_stdout=True,
                                          capture_stderr=True, env=env, check=False,
                                          cwd=str(self.owner))
            return Ran(done.returncode, done.stdout.decode(), done.stderr.decode())
        finally:
            if config is not None:
                config.unlink()


def codex_toml(mock: RequestLog[Any]) -> str:
    """codex pointed at the mock with its ChatGPT login (``requires_openai_auth``)."""
    return ('model_provider = "mock"\ncheck_for_update_on_startup = false\n\n'
            '[model_providers.mock]\nname = "Mock upstream"\n'
            f'base_url = "{mock._url("/v1")}"\nrequires_openai_auth = true\n'
            'wire_api = "responses"\nrequest_max_retries = 0\nstream_max_retries = 0\n\n'
            "[analytics]\nenabled = false\n")


async def make_world(nursery: trio.Nursery, tmp_path: Path, cli: str, *,
                     expires_in: float, lifetime_s: float = 3600.0) -> tuple[World, Family]:
    """The vendor (its tokens living ``lifetime_s`` once refreshed), its API mock, and the
    owner's login expiring in ``expires_in`` seconds."""
    binary = real_cli("OLP_REAL_CLAUDE" if cli == "claude" else "OLP_REAL_CODEX")
    interceptor: Interceptor = await nursery.start(serve_interceptor, tmp_path / "ca")
    vendor = interceptor.claude if cli == "claude" else interceptor.codex
    vendor.lifetime_s = lifetime_s
    serve = serve_anthropic if cli == "claude" else serve_responses
    mock: RequestLog[Any] = await nursery.start(functools.partial(serve, scenario="success"))
    mock.gate = vendor.gate
    world = World(cli, binary, interceptor, vendor, mock, tmp_path / "owner", tmp_path / "olp")
    family = vendor.login("owner", expires_in=expires_in)
    world.write_login(world.login_file.parent, family)
    return world, family


def ask(proxy: Proxy, key: str = OWNER_TOKEN, text: str = "Say hello.") -> httpx.Response:
    return httpx.post(f"{proxy.url}/v1/chat/completions", timeout=60,
                      headers={"Authorization": f"Bearer {key}"},
                      json={"model": "c", "messages": [{"role": "user", "content": text}]})


def answered(response: httpx.Response) -> bool:
    return response.status_code == 200 and \
        response.json()["choices"][0]["message"]["content"] == ANSWER


def new_key(home: Path, binding: str) -> str:
    done = subprocess.run([sys.executable, "-m", "olp", "keys", "create", "alice", "--json",
                           "--accounts", binding],
                          env={"PATH": "/usr/bin:/bin", "OLP_HOME": str(home)},
                          capture_output=True, text=True, timeout=30, check=True)
    return str(json.loads(done.stdout)["key"])


def health(proxy: Proxy) -> dict[str, Any]:
    return dict(httpx.get(f"{proxy.url}/health", timeout=10,
                          headers={"Authorization": f"Bearer {OWNER_TOKEN}"}).json())


CLIS = pytest.mark.parametrize("cli", ["claude", "codex"])


@CLIS
async def test_one_request_on_an_expired_token_then_the_owners_own_cli(
        tmp_path: Path, nursery: trio.Nursery, cli: str) -> None:
    world, family = await make_world(nursery, tmp_path, cli, expires_in=-10)
    with trio.fail_after(60):
        async with run_proxy(world.home, world.config(), env=world.proxy_env()) as proxy:
            response = await in_thread(lambda: ask(proxy))
        assert answered(response), response.text
        assert world.vendor.ok_refreshes() == 1
        world.assert_every_refresh_was_olps_and_spent_a_live_token()
        assert world.access_in(world.login_file) == family.access  # the newest pair, at once
        assert world.login_file.stat().st_mode & 0o777 == 0o600
        own = await world.owners_cli()
    assert own.returncode == 0, own.stderr[-2000:]
    assert ANSWER in own.stdout
    assert world.vendor.ok_refreshes() == 1 and len(world.refreshes()) == 1  # none of its own
    assert world.access_in(world.login_file) == family.access


@CLIS
async def test_eight_concurrent_requests_on_an_expired_token_share_one_refresh(
        tmp_path: Path, nursery: trio.Nursery, cli: str) -> None:
    world, _ = await make_world(nursery, tmp_path, cli, expires_in=-10)
    responses: list[httpx.Response] = []
    with trio.fail_after(60):
        async with run_proxy(world.home, world.config(), env=world.proxy_env()) as proxy:
            async def one(n: int) -> None:
                responses.append(await in_thread(lambda: ask(proxy, text=f"Say hello, {n}.")))
            async with trio.open_nursery() as requests:
                for n in range(8):
                    requests.start_soon(one, n)
    assert len(responses) == 8 and all(answered(r) for r in responses), \
        [r.text for r in responses if not answered(r)]
    assert len(world.refreshes()) == 1
    world.assert_every_refresh_was_olps_and_spent_a_live_token()
    with trio.fail_after(30):
        own = await world.owners_cli()
    assert own.returncode == 0 and ANSWER in own.stdout, own.stderr[-2000:]
    assert len(world.refreshes()) == 1  # none of its own


@CLIS
async def test_a_warm_pool_across_two_expiries(tmp_path: Path, nursery: trio.Nursery,
                                               cli: str) -> None:
    """Warm processes are retired at every refresh and started again with the new token:
    a request every 3 s until OLP has refreshed twice (about 30 s), then one more, all
    served."""
    world, family = await make_world(nursery, tmp_path, cli, expires_in=LIFETIME_S,
                                     lifetime_s=LIFETIME_S)
    served: list[bool] = []
    with trio.fail_after(60):
        async with run_proxy(world.home, world.config(warm=1),
                             env=world.proxy_env()) as proxy:
            while True:
                done = world.vendor.ok_refreshes() >= 2
                n = len(served)
                response = await in_thread(lambda n=n: ask(proxy, text=f"Say hello, {n}."))
                served.append(answered(response))
                if done:
                    break
                await trio.sleep(3)
            stats = health(proxy)["providers"][PROVIDER[cli]]
        own = await world.owners_cli()
    assert all(served) and len(served) >= 6, served
    assert world.vendor.ok_refreshes() == 2
    world.assert_every_refresh_was_olps_and_spent_a_live_token()
    assert world.access_in(world.login_file) == family.access
    assert stats["warm"]["hits"] >= 1, stats
    assert own.returncode == 0 and ANSWER in own.stdout


@CLIS
async def test_an_idle_proxy_across_an_expiry_keeps_the_owners_cli_logged_in(
        tmp_path: Path, nursery: trio.Nursery, cli: str) -> None:
    world, family = await make_world(nursery, tmp_path, cli, expires_in=LIFETIME_S - 5,
                                     lifetime_s=LIFETIME_S)
    first = family.access
    with trio.fail_after(60):
        before = await world.owners_cli()  # 400 s left: above its margin, it does not refresh
        assert before.returncode == 0 and not world.refreshes()
        async with run_proxy(world.home, world.config(warm=1),
                             env=world.proxy_env()) as proxy:
            # the refresh is OLP's once the file holds its answer
            assert await wait_until(lambda: world.access_in(world.login_file) != first,
                                    within=30)
            login = health(proxy)["providers"][PROVIDER[cli]]["login"]
        after = await world.owners_cli()
    assert login["state"] == "ok" and login["refreshes"] >= 1, login
    assert after.returncode == 0, after.stderr[-2000:]
    assert ANSWER in after.stdout
    world.assert_every_refresh_was_olps_and_spent_a_live_token()
    assert world.access_in(world.login_file) == family.access


@CLIS
async def test_a_second_account_is_kept_in_its_own_home(tmp_path: Path, nursery: trio.Nursery,
                                                        cli: str) -> None:
    world, owners = await make_world(nursery, tmp_path, cli, expires_in=3 * 3600)
    alice = world.vendor.login("alice", expires_in=-10)
    alice_home = world.home / "accounts" / PROVIDER[cli] / "alice"
    world.write_login(alice_home, alice)
    owners_file = world.login_file.read_bytes()
    config = {**world.config(accounts={"alice": {}}),
              "auth": {"fallback_detail_header_policy": "all"}}
    world.home.mkdir(parents=True, exist_ok=True)
    (world.home / "config.json").write_text(json.dumps(config))
    key = await in_thread(lambda: new_key(world.home, f"{PROVIDER[cli]}:alice"))
    with trio.fail_after(60):
        async with run_proxy(world.home, config, env=world.proxy_env()) as proxy:
            response = await in_thread(lambda: ask(proxy, key))
            owner = await in_thread(lambda: ask(proxy))
    assert answered(response) and response.headers["x-olp-account"] == "alice"
    assert answered(owner)
    assert [r["family"] for r in world.refreshes()] == ["alice"]
    world.assert_every_refresh_was_olps_and_spent_a_live_token()
    assert world.access_in(world.file_in(alice_home)) == alice.access
    assert world.login_file.read_bytes() == owners_file and owners.generation == 1
    with trio.fail_after(30):  # alice's own CLI, on the file OLP left in her home
        own = await world.owners_cli(alice_home)
    assert own.returncode == 0 and ANSWER in own.stdout, own.stderr[-2000:]
    assert [r["family"] for r in world.refreshes()] == ["alice"]  # none of its own


@CLIS
async def test_a_login_refused_for_good_is_shown_expired_and_never_written(
        tmp_path: Path, nursery: trio.Nursery, cli: str) -> None:
    world, family = await make_world(nursery, tmp_path, cli, expires_in=-10)
    family.spent.add(family.refresh)  # another party spent it: the vendor refuses it now
    family.refresh = "rt-spent-elsewhere"
    before = world.login_file.read_bytes()
    with trio.fail_after(60):
        async with run_proxy(world.home, world.config(), env=world.proxy_env()) as proxy:
            first = await in_thread(lambda: ask(proxy))
            second = await in_thread(lambda: ask(proxy))
            login = health(proxy)["providers"][PROVIDER[cli]]["login"]
            status = await trio.run_process(
                [sys.executable, "-m", "olp", "status"], capture_stdout=True, check=False,
                env={"PATH": "/usr/bin:/bin", "OLP_HOME": str(world.home),
                     "OLP_OWNER_TOKEN": OWNER_TOKEN, "OLP_PORT": proxy.url.rsplit(":", 1)[1]})
    assert first.status_code == 502 and first.json()["error"]["code"] == "upstream_auth_failed"
    assert second.status_code in (502, 503), second.text
    assert world.login_file.read_bytes() == before  # never written
    assert len(world.refreshes()) == 1 and world.refreshes()[0]["outcome"] == "reused"
    fix = f"olp login {PROVIDER[cli]}"
    assert login["state"] == "expired" and login["fix"] == fix, login
    printed = status.stdout.decode()
    assert "EXPIRED" in printed and fix in printed, printed


@CLIS
async def test_olps_refresh_is_the_clis_own_request(tmp_path: Path, nursery: trio.Nursery,
                                                    cli: str) -> None:
    """The refresh OLP makes is the one the CLI makes: same host, path, content type and JSON
    fields (client id, grant, scopes, reason), only the refresh token differing. A CLI
    update that changes its refresh fails here."""
    world, _ = await make_world(nursery, tmp_path, cli, expires_in=60)
    with trio.fail_after(60):
        own = await world.owners_cli()  # within its margin: it refreshes itself
        assert own.returncode == 0, own.stderr[-2000:]
        world.write_login(world.login_file.parent,
                          world.vendor.login("later", expires_in=-10))
        async with run_proxy(world.home, world.config(), env=world.proxy_env()) as proxy:
            assert answered(await in_thread(lambda: ask(proxy)))
    theirs, ours = world.interceptor.token_requests(cli)
    assert not theirs["headers"]["user-agent"].startswith("olp/")
    assert ours["headers"]["user-agent"].startswith("olp/")
    for request in (theirs, ours):
        request["body"].pop("refresh_token")
    assert (ours["host"], ours["path"], ours["method"]) == \
        (theirs["host"], theirs["path"], theirs["method"])
    assert ours["headers"]["content-type"] == theirs["headers"]["content-type"]
    assert ours["body"] == theirs["body"]
    assert [r["outcome"] for r in world.refreshes()] == ["ok", "ok"]


async def test_codex_s_app_server_is_replaced_at_every_new_token(
        tmp_path: Path, nursery: trio.Nursery) -> None:
    """codex on its app-server (issue #43): the server holds the access token it started
    with, so it is retired at every refresh and the next request starts one with the new
    token; a request every 3 s until OLP has refreshed twice, all served, each upstream
    request carrying the newest token (the API takes no other)."""
    world, family = await make_world(nursery, tmp_path, "codex", expires_in=LIFETIME_S,
                                     lifetime_s=LIFETIME_S)
    served: list[bool] = []
    config = world.config()
    with trio.fail_after(60):
        async with run_proxy(world.home, config, env=world.proxy_env()) as proxy:
            while True:
                done = world.vendor.ok_refreshes() >= 2
                n = len(served)
                response = await in_thread(lambda n=n: ask(proxy, text=f"Say hello, {n}."))
                served.append(answered(response))
                if done:
                    break
                await trio.sleep(3)
            server = health(proxy)["providers"]["openai"]["app_server"]
        own = await world.owners_cli()
    assert all(served) and len(served) >= 6, served
    assert world.vendor.ok_refreshes() == 2
    world.assert_every_refresh_was_olps_and_spent_a_live_token()
    assert world.access_in(world.login_file) == family.access
    assert server["started"] == 3 and server["served"] == len(served), server
    assert own.returncode == 0 and ANSWER in own.stdout
