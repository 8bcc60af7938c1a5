"""The red team's auth findings (#29), through the app's test client under MockClock: a
dashboard session dies with its key; the Host rule; cross-site dashboard posts; the back-off
on wrong keys; no anonymous guest for credentials OLP does not take; the body timeout."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pytest
import trio
import trio.testing
from quart_trio import QuartTrio

from olp.engine import Engine, Router
from olp.http import Services, create_app
from olp.http._auth_throttle import FREE_FAILURES, MAX_BACKOFF_S

OWNER, GUEST = "olp_owner_token_for_the_hardening_tests", "olp_guest_token_for_the_tests"


@dataclass(frozen=True)
class _Principal:
    name: str
    tier: str
    key_id: int


class _Keys:
    """A key store whose keys the test revokes and rotates."""

    def __init__(self) -> None:
        self.active = {OWNER: _Principal("owner", "owner", 1), GUEST: _Principal("kid", "guest", 2)}
        self.lookups = 0

    async def authenticate(self, token: str) -> _Principal | None:
        await trio.lowlevel.checkpoint()
        self.lookups += 1
        return self.active.get(token)

    def rotate(self, old: str, new: str) -> None:
        self.active[new] = self.active.pop(old)


def make_app(keys: _Keys, **settings: Any) -> QuartTrio:
    services = Services(engine=Engine(Router(lambda m: None, providers=[]), {}), keys=keys,
                        models=lambda: [], dashboard="on", **settings)
    return create_app(services)


async def login(client: Any, key: str = OWNER, **kw: Any) -> tuple[int, str | None]:
    """Log in; the session's CSRF token from the page, or ``None``."""
    resp = await client.post("/dashboard/login", form={"key": key}, **kw)
    if resp.status_code != 303:
        return resp.status_code, None
    page = await (await client.get("/dashboard")).get_data(as_text=True)
    return 303, page.split('const CSRF = "', 1)[1].split('"', 1)[0]


@pytest.mark.parametrize("change", ["revoke", "rotate", "demote"])
async def test_a_dashboard_session_ends_with_its_key(autojump_clock: trio.testing.MockClock,
                                                     change: str) -> None:
    keys = _Keys()
    client = make_app(keys).test_client()
    status, _ = await login(client)
    assert status == 303
    assert (await client.get("/dashboard/api/state")).status_code != 401
    if change == "revoke":
        del keys.active[OWNER]
    elif change == "rotate":
        keys.rotate(OWNER, "olp_the_new_owner_token_after_rotation")
    else:
        keys.active[OWNER] = _Principal("owner", "guest", 1)
    gone = await client.get("/dashboard/api/state")
    assert gone.status_code == 401 and (await gone.get_json())["error"]["code"] == "no_session"
    action = await client.post("/dashboard/api/action", json={"action": "revoke_key",
                                                               "key": "bob"})
    assert action.status_code in (401, 403)
    keys.active[OWNER] = _Principal("owner", "owner", 1)  # even if the key comes back,
    assert (await client.get("/dashboard/api/state")).status_code == 401  # the session is over
    page = await (await client.get("/dashboard")).get_data(as_text=True)
    assert 'type="password"' in page  # the login page again


@pytest.mark.parametrize(("host", "served"), [
    ("localhost", True), ("localhost:4567", True), ("127.0.0.1:4567", True),
    ("[::1]:4567", True), ("192.168.1.20:4567", True), ("LOCALHOST.", True),
    ("attacker.example:4567", False), ("attacker.example", False),
    ("localhost.attacker.example", False), ("127.0.0.1.nip.io:4567", False),
    ("[::1]x", False), ("", False),
])
async def test_only_loopback_and_ip_host_names_are_served(
        autojump_clock: trio.testing.MockClock, host: str, served: bool) -> None:
    client = make_app(_Keys(), allow_anonymous=True, metrics_access="loopback").test_client()
    for path in ("/v1/models", "/health", "/dashboard"):
        resp = await client.get(path, headers={"Host": host})
        if served:
            assert resp.status_code == 200, (path, host)
        else:
            assert resp.status_code == 403, (path, host)
            assert (await resp.get_json())["error"]["code"] == "host_not_allowed"


async def test_allowed_hosts_adds_names(autojump_clock: trio.testing.MockClock) -> None:
    client = make_app(_Keys(), allow_anonymous=True,
                      allowed_hosts=("olp.home.arpa", ".lan")).test_client()
    for host, status in [("olp.home.arpa:4567", 200), ("box.lan", 200), ("lan", 200),
                         ("evil-lan", 403), ("olp.home.arpa.evil", 403)]:
        assert (await client.get("/v1/models", headers={"Host": host})).status_code == status
    anyone = make_app(_Keys(), allow_anonymous=True, allowed_hosts=("*",)).test_client()
    assert (await anyone.get("/v1/models", headers={"Host": "a.example"})).status_code == 200


@pytest.mark.parametrize("headers", [
    {"Origin": "http://attacker.example:4567"}, {"Origin": "null"},
    {"Origin": "http://localhost:9999"},  # another port: another origin
    {"Sec-Fetch-Site": "cross-site"}, {"Sec-Fetch-Site": "same-site"},
    {"Sec-Fetch-Site": "cross-site", "Origin": "http://localhost"},
])
async def test_cross_site_dashboard_posts_are_refused(autojump_clock: trio.testing.MockClock,
                                                     headers: dict[str, str]) -> None:
    keys = _Keys()
    client = make_app(keys).test_client()
    refused = await client.post("/dashboard/login", form={"key": OWNER}, headers=headers)
    assert refused.status_code == 403
    assert (await refused.get_json())["error"]["code"] == "cross_origin"
    # what Chromium sends for a form posted from a no-referrer page: believed by Sec-Fetch-Site
    status, _ = await login(client, headers={"Origin": "null", "Sec-Fetch-Site": "same-origin"})
    assert status == 303
    _, csrf = await login(client, headers={"Origin": "http://localhost"})
    assert csrf
    action = await client.post("/dashboard/api/action", json={"action": "nothing"},
                               headers={"X-CSRF-Token": csrf, **headers})
    assert action.status_code == 403
    assert (await action.get_json())["error"]["code"] == "cross_origin"


async def test_wrong_keys_back_off_per_source(autojump_clock: trio.testing.MockClock) -> None:
    keys = _Keys()
    client = make_app(keys).test_client()
    here, there = {"client": ("10.0.0.5", 5000)}, {"client": ("10.0.0.6", 5000)}

    async def status(token: str, source: dict[str, Any]) -> tuple[int, str | None]:
        resp = await client.get("/v1/models", headers={"Authorization": f"Bearer {token}"},
                                scope_base=source)
        return resp.status_code, resp.headers.get("Retry-After")

    assert await status(GUEST, here) == (200, None)  # a key known good from here
    for n in range(FREE_FAILURES):
        assert await status(f"olp_wrong_{n}", here) == (401, None)
    assert await status("olp_wrong_x", here) == (401, None)  # counted: now closed 1 s
    assert await status("olp_wrong_y", here) == (429, "1")
    assert await status(OWNER, here) == (200, None)  # a correct key, never used from here
    assert await status(GUEST, here) == (200, None)  # a correct key: never slowed
    assert await status("olp_wrong_y", here) == (429, "1")  # a wrong one still is
    assert await status(OWNER, there) == (200, None)  # another source: never slowed
    assert await status("olp_wrong_z", there) == (401, None)
    await trio.sleep(1)
    assert await status("olp_wrong_1", here) == (401, None)  # open again, and closed 2 s
    assert await status("olp_wrong_2", here) == (429, "2")
    for _ in range(20):  # the back-off doubles up to its cap
        await trio.sleep(MAX_BACKOFF_S)
        assert (await status("olp_wrong", here))[0] == 401
    assert await status("olp_wrong", here) == (429, str(int(MAX_BACKOFF_S)))


async def test_the_login_form_backs_off_too(autojump_clock: trio.testing.MockClock) -> None:
    client = make_app(_Keys()).test_client()
    for n in range(FREE_FAILURES + 1):
        assert (await client.post("/dashboard/login", form={"key": f"x{n}"})).status_code == 401
    closed = await client.post("/dashboard/login", form={"key": "a wrong one"})
    assert closed.status_code == 429 and closed.headers["Retry-After"] == "1"
    assert "try again in 1 s" in await closed.get_data(as_text=True)
    # the owner's key logs in at once, whatever the back-off (issue #42)
    assert (await client.post("/dashboard/login", form={"key": OWNER})).status_code == 303
    await trio.sleep(1)
    assert (await client.post("/dashboard/login", form={"key": "x"})).status_code == 401


@pytest.mark.parametrize("headers", [
    {"Authorization": "Basic b3duZXI6cGFzcw=="}, {"Authorization": "Bearer"},
    {"Authorization": "Token abc"}, {"x-api-key": ""},
])
async def test_credentials_olp_does_not_take_are_not_anonymous(
        autojump_clock: trio.testing.MockClock, headers: dict[str, str]) -> None:
    client = make_app(_Keys(), allow_anonymous=True).test_client()
    assert (await client.get("/v1/models")).status_code == 200  # no credentials: the guest
    resp = await client.get("/v1/models", headers=headers)
    assert resp.status_code == 401
    assert (await resp.get_json())["error"]["code"] == "invalid_api_key"


async def test_a_body_that_never_finishes_is_a_408(autojump_clock: trio.testing.MockClock) -> None:
    app = make_app(_Keys(), body_timeout_s=3.0)
    assert app.config["BODY_TIMEOUT"] == 3.0
    client = app.test_client()
    t0 = trio.current_time()
    async with client.request("/v1/chat/completions", method="POST", headers={
            "Authorization": f"Bearer {OWNER}", "Content-Type": "application/json",
            "Content-Length": "100"}) as connection:
        await connection.send(b'{"model": "x", ')
        resp = await connection.as_response()
    assert resp.status_code == 408
    assert (await resp.get_json())["error"]["code"] == "request_timeout"
    assert trio.current_time() - t0 == pytest.approx(3.0, abs=0.01)


@pytest.mark.parametrize("data", [b"[" * 5000 + b"]" * 5000,
                                  b'{"action": ' + b"[" * 5000 + b"]" * 5000 + b"}",
                                  b"not json", b'["revoke_key"]'])
async def test_a_bad_dashboard_action_body_is_a_400(autojump_clock: trio.testing.MockClock,
                                                    data: bytes) -> None:
    client = make_app(_Keys()).test_client()
    _, csrf = await login(client)
    resp = await client.post("/dashboard/api/action", data=data, headers={
        "X-CSRF-Token": csrf or "", "Content-Type": "application/json"})
    assert resp.status_code == 400
    assert (await resp.get_json())["error"]["code"] == "invalid_action"
