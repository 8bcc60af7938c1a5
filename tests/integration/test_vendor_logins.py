"""The interceptor of ``tests/support/vendor_logins`` is a faithful stand-in for the vendors'
token endpoints: reached through a real HTTPS proxy tunnel with the test CA, a refresh token
works once and is then refused the vendor's way (Google's works again), unknown hosts get no
tunnel, and the API check takes only the newest unexpired access token."""

from __future__ import annotations

import ssl
from pathlib import Path

import httpx
import pytest
import trio
from olp_harness import in_thread
from vendor_logins import Interceptor, serve_interceptor


def client(interceptor: Interceptor) -> httpx.Client:
    return httpx.Client(proxy=interceptor.proxy_url, timeout=10, trust_env=False,
                        verify=ssl.create_default_context(cafile=str(interceptor.ca.ca_file)))


async def test_a_claude_refresh_token_works_once(tmp_path: Path, nursery: trio.Nursery) -> None:
    interceptor: Interceptor = await nursery.start(serve_interceptor, tmp_path)
    family = interceptor.claude.login("owner", expires_in=60)
    first_access, first_refresh = family.access, family.refresh
    body = {"grant_type": "refresh_token", "refresh_token": first_refresh, "client_id": "c"}

    def refresh_twice() -> tuple[httpx.Response, httpx.Response]:
        with client(interceptor) as http:
            url = "https://platform.claude.com/v1/oauth/token"
            return http.post(url, json=body), http.post(url, json=body)

    with trio.fail_after(30):
        ok, again = await in_thread(refresh_twice)
    assert ok.status_code == 200
    answer = ok.json()
    assert answer["access_token"] == family.access != first_access
    assert answer["refresh_token"] == family.refresh != first_refresh
    assert answer["expires_in"] == 3600
    assert again.status_code == 400 and again.json()["error"] == "invalid_grant"
    assert [r["outcome"] for r in interceptor.claude.refreshes] == ["ok", "reused"]
    assert interceptor.claude.check_bearer(f"Bearer {family.access}") is None
    refused = interceptor.claude.check_bearer(f"Bearer {first_access}")
    assert refused is not None and refused[0] == 401
    assert interceptor.claude.api_refusals[-1]["why"] == "superseded"


async def test_a_codex_refresh_token_reused_is_refresh_token_reused(
        tmp_path: Path, nursery: trio.Nursery) -> None:
    interceptor: Interceptor = await nursery.start(serve_interceptor, tmp_path)
    family = interceptor.codex.login("owner")
    body = {"client_id": "c", "grant_type": "refresh_token", "refresh_token": family.refresh}

    def refresh_twice() -> tuple[httpx.Response, httpx.Response]:
        with client(interceptor) as http:
            url = "https://auth.openai.com/oauth/token"
            return http.post(url, json=body), http.post(url, json=body)

    with trio.fail_after(30):
        ok, again = await in_thread(refresh_twice)
    assert ok.status_code == 200 and set(ok.json()) == {"id_token", "access_token",
                                                        "refresh_token"}
    assert again.status_code == 401
    assert again.json()["error"]["code"] == "refresh_token_reused"
    expired = interceptor.codex.login("later", expires_in=-1)
    refused = interceptor.codex.check_bearer(f"Bearer {expired.access}")
    assert refused is not None and refused[1]["error"]["code"] == "token_expired"


async def test_no_tunnel_to_another_host(tmp_path: Path, nursery: trio.Nursery) -> None:
    interceptor: Interceptor = await nursery.start(serve_interceptor, tmp_path)

    def elsewhere() -> None:
        with client(interceptor) as http:
            http.get("https://example.org/")

    with trio.fail_after(30), pytest.raises(httpx.ProxyError):
        await in_thread(elsewhere)
    assert interceptor.connects[-1]["target"] == "example.org:443"


async def test_a_google_refresh_token_works_again_and_code_assist_takes_the_newest(
        tmp_path: Path, nursery: trio.Nursery) -> None:
    interceptor: Interceptor = await nursery.start(serve_interceptor, tmp_path)
    google = interceptor.google
    family = google.login("owner", expires_in=60)
    first_access, refresh = family.access, family.refresh
    form = {"refresh_token": refresh, "client_id": "c", "client_secret": "s",
            "grant_type": "refresh_token"}

    def refresh_twice_then_generate() -> list[httpx.Response]:
        with client(interceptor) as http:
            def generate(access: str) -> httpx.Response:
                return http.post("https://cloudcode-pa.googleapis.com/v1internal:"
                                 "streamGenerateContent", params={"alt": "sse"},
                                 json={"model": "gemini-2.5-pro"},
                                 headers={"Authorization": f"Bearer {access}"})

            url = "https://oauth2.googleapis.com/token"
            ok, again = http.post(url, data=form), http.post(url, data=form)
            return [ok, again, generate(again.json()["access_token"]), generate(first_access)]

    with trio.fail_after(30):
        ok, again, fresh, stale = await in_thread(refresh_twice_then_generate)
    assert ok.status_code == again.status_code == 200
    assert "refresh_token" not in again.json() and again.json()["expires_in"] == 3599
    assert again.json()["access_token"] == family.access != ok.json()["access_token"]
    assert family.refresh == refresh  # reusable: never rotated
    assert [r["outcome"] for r in google.refreshes] == ["ok", "ok"]
    assert len(interceptor.token_requests("google")) == 2
    assert fresh.status_code == 200 and fresh.headers["content-type"].startswith(
        "text/event-stream")
    assert google.answer in fresh.text
    assert stale.status_code == 401 and stale.json()["error"]["status"] == "UNAUTHENTICATED"
    assert [r["why"] for r in google.api_refusals] == ["superseded"]
