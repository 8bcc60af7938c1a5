"""The owner's dashboard in a real browser: Debian's ``chromium``, headless, driven by
Playwright's Python package with ``executable_path``, against a running ``olp start``.

Login with one password field (a guest key refused, the owner's accepted), a session cookie
that is ``HttpOnly`` and ``SameSite=Strict`` and expires, the key never in a URL; every panel
filled with live data; one action (revoking a guest key) that takes effect; a POST without
the CSRF token refused; prompt-cache reuse per key and per provider, from a ledger row the
test seeds (1,000 input tokens, 600 of them cached: "60 %"). Screenshots go to the test's
directory (and, with ``OLP_DASHBOARD_SCREENSHOT=PATH``, the picture in docs/command-line.md is
refreshed).

In CI (``CI=true``) a missing chromium fails the test; elsewhere it skips with the reason
(``./dev`` installs chromium when it runs as root).
"""

from __future__ import annotations

import json
import os
import shutil
import sqlite3
import subprocess
import sys
import time
from contextlib import closing
from pathlib import Path
from typing import Any

import httpx
import pytest
import trio
from olp_harness import FAKE_CLAUDE, Proxy, in_thread, run_proxy

from olp.accounting import day_of
from olp.logins import EndedLogins, fingerprint

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")


def _need_chromium() -> str:
    if CHROMIUM is None:
        if os.environ.get("CI") == "true":
            pytest.fail("chromium is not installed (./dev installs it as root: apt-get "
                        "install chromium)")
        pytest.skip("chromium is not installed (apt-get install chromium)")
    return CHROMIUM


def config() -> dict[str, Any]:
    return {"providers": {"enabled": {"openai": False, "mistral": False},
                          # the fake sends the lockdown check's mock what claude would
                          "anthropic": {"binary": str(FAKE_CLAUDE), "warm": 1,
                                        "lockdown_check": True,
                                        "env": {"CLAUDE_CODE_OAUTH_TOKEN": "oauth-fake",
                                                "FAKE_CLAUDE_UPSTREAM": "1"}}},
            "routing": {"chains": {"smart": [
                {"name": "sub", "provider": "anthropic", "model": "claude-sonnet-4-6"}]}}}


def browse(proxy: Proxy, chromium: str, guest: str, shots: Path) -> dict[str, Any]:
    """Everything the browser saw (sync Playwright, run in a worker thread)."""
    from playwright.sync_api import sync_playwright

    seen: dict[str, Any] = {}
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=chromium, headless=True,
                                     args=["--no-sandbox", "--disable-gpu"])
        try:
            context = browser.new_context(viewport={"width": 1280, "height": 1000})
            page = context.new_page()
            page.goto(f"{proxy.url}/dashboard")
            page.fill("#key", guest)
            page.click("button[type=submit]")
            seen["guest_error"] = page.text_content("#error")
            page.fill("#key", proxy.token)
            page.click("button[type=submit]")
            # the page runs under its own CSP (no eval): wait with locators, not scripts
            page.wait_for_selector("#providers tbody tr")
            page.locator("#recent tbody tr").nth(1).wait_for()
            seen["url"] = page.url
            seen["cookies"] = context.cookies()
            for panel in ("providers", "quota", "chains", "prompt-cache", "usage", "recent"):
                seen[panel] = page.inner_text(f"#{panel} tbody")
            seen["hit_rate"] = page.text_content("#hit-rate")
            seen["bars"] = page.locator("#trend svg rect").count()
            page.screenshot(path=str(shots / "dashboard.png"), full_page=True)
            page.on("dialog", lambda dialog: dialog.accept())
            page.click("button[data-act=revoke_key][data-key='kid']")
            page.wait_for_selector("#flash:has-text('Revoked')")
            # the table is drawn again after the flash: wait for the row to go
            page.locator("#usage tbody tr", has_text="kid").wait_for(state="detached")
            seen["flash"] = page.text_content("#flash")
            seen["usage_after"] = page.inner_text("#usage tbody")
            # measuring needs a script: this context alone lets the test's own run
            phone = browser.new_context(viewport={"width": 390, "height": 844},
                                        storage_state=context.storage_state(), bypass_csp=True)
            small = phone.new_page()
            small.goto(f"{proxy.url}/dashboard")
            small.wait_for_selector("#providers tbody tr")
            seen["phone_overflow"] = small.evaluate(
                "document.documentElement.scrollWidth > window.innerWidth + 1")
            small.screenshot(path=str(shots / "dashboard-phone.png"), full_page=True)
            seen["cut"] = {}
            for width in (1280, 1440):  # a laptop: every column of every panel readable
                desk = browser.new_context(viewport={"width": width, "height": 900},
                                           storage_state=context.storage_state(),
                                           bypass_csp=True)
                wide = desk.new_page()
                wide.goto(f"{proxy.url}/dashboard")
                wide.locator("#recent tbody tr").nth(1).wait_for()
                seen["cut"][width] = wide.evaluate(
                    "Array.from(document.querySelectorAll('section'))"
                    ".filter(s => s.scrollWidth > s.clientWidth + 1).map(s => s.id)")
                wide.screenshot(path=str(shots / f"dashboard-{width}.png"), full_page=True)
            seen["session"] = next(c["value"] for c in context.cookies()
                                   if c["name"] == "olp_session")
        finally:
            browser.close()
    return seen


def seed_cached_usage(db: Path, key: str) -> None:
    """One ledger row of today, as the recorder writes it: key ``cachey`` sent 1,000 input
    tokens to openai (not enabled here: no request of the test reaches it), 600 of them read
    from the vendor's prompt cache."""
    with closing(sqlite3.connect(db, timeout=10)) as c, c:
        c.execute("INSERT INTO usage (day, key, key_name, provider, model, requests, served, "
                  "prompt_tokens, completion_tokens, cached_tokens) VALUES "
                  "(?, ?, 'cachey', 'openai', 'gpt-5.5', 1, 1, 1000, 10, 600)",
                  (day_of(time.time()), key))


async def test_the_dashboard_in_chromium(tmp_path: Path) -> None:
    chromium = _need_chromium()
    home = tmp_path / "home"
    cfg = config()  # and a second login of claude's: a row of its own (issue #30)
    cfg["providers"]["anthropic"]["accounts"] = {"alice": {}, "bob": {}}
    alice = home / "accounts" / "anthropic" / "alice"
    alice.mkdir(parents=True)
    (alice / ".credentials.json").write_text('{"claudeAiOauth": {"accessToken": "a"}}')
    # and a third, kept by OLP (issue #41), whose refresh was refused at an earlier start
    bob = home / "accounts" / "anthropic" / "bob"
    bob.mkdir(parents=True)
    (bob / ".credentials.json").write_text(json.dumps({"claudeAiOauth": {
        "accessToken": "b", "refreshToken": "rb", "expiresAt": int(time.time() + 3600) * 1000}}))
    EndedLogins(home / "logins.json").record(
        bob / ".credentials.json", fingerprint(bob / ".credentials.json"),
        "the refresh token was refused (invalid_grant): log in again with "
        "`olp login anthropic --account bob`")
    with trio.fail_after(120):
        async with run_proxy(home, cfg) as proxy:
            made = [await in_thread(lambda n=name: subprocess.run(
                [sys.executable, "-m", "olp", "keys", "create", n, "--json"],
                env={"PATH": "/usr/bin:/bin", "OLP_HOME": str(home)}, capture_output=True,
                text=True, timeout=30, check=True)) for name in ("kid", "cachey")]
            kid = json.loads(made[0].stdout)["key"]
            cachey = str(json.loads(made[1].stdout)["id"])
            await in_thread(lambda: seed_cached_usage(home / "olp.db", cachey))
            for key in (kid, kid, proxy.token):  # usage, a cache hit, recent requests
                assert (await in_thread(lambda k=key: httpx.post(
                    f"{proxy.url}/v1/chat/completions", timeout=30,
                    headers={"Authorization": f"Bearer {k}"},
                    json={"model": "smart", "messages": [{"role": "user", "content": "hi"}]}
                ))).status_code == 200
            await trio.sleep(0.6)  # the recorder commits every 250 ms
            seen = await in_thread(lambda: browse(proxy, chromium, kid, tmp_path))
            csrf_less = await in_thread(lambda: httpx.post(
                f"{proxy.url}/dashboard/api/action", json={"action": "reset_cooldowns"},
                cookies={"olp_session": seen["session"]}, timeout=10))
            guest_after = await in_thread(lambda: httpx.get(
                f"{proxy.url}/v1/models", headers={"Authorization": f"Bearer {kid}"},
                timeout=10))
    assert "guest key" in seen["guest_error"]
    assert proxy.token not in seen["url"] and seen["url"].endswith("/dashboard")
    [cookie] = [c for c in seen["cookies"] if c["name"] == "olp_session"]
    assert cookie["httpOnly"] and cookie["sameSite"] == "Strict"
    assert time.time() + 3600 < cookie["expires"] < time.time() + 13 * 3600
    assert "anthropic" in seen["providers"] and "ready" in seen["providers"]
    assert "/1 warm" in seen["providers"] and "misses" in seen["providers"]  # its warm pool
    assert "lockdown verified (claude" in seen["providers"]  # its self-check passed
    assert "anthropic" in seen["quota"] and "ok" in seen["quota"]
    alice_row = seen["providers"].split("account alice", 1)[1].split("account bob", 1)[0]
    assert "subscription" in alice_row and "ready" in alice_row  # the second login, found
    assert "login ok" in alice_row  # kept by OLP: spawns get its token, not its file
    bob_row = seen["providers"].split("account bob", 1)[1].split("gemini", 1)[0]
    assert "login expired" in bob_row and bob_row.count("(invalid_grant)") == 1
    assert "log in again with `olp login anthropic --account bob`" in bob_row
    assert "account default" in seen["providers"]
    assert "account alice" in seen["quota"]
    assert "smart" in seen["chains"] and "anthropic/claude-sonnet-4-6" in seen["chains"]
    assert "kid" in seen["usage"] and "owner-env" in seen["usage"]
    keys = {line.split("\t")[0]: line.split("\t")[1:] for line in seen["usage"].splitlines()}
    assert keys["cachey"][2:4] == ["1,010", "600 (60 %)"]  # tokens; cached (share of input)
    assert keys["kid"][3] == "0 (0 %)"  # the fake CLI reads nothing from a prompt cache
    reuse = {line.split("\t")[0]: line.split("\t")[1:]
             for line in seen["prompt-cache"].splitlines()}
    assert reuse["openai"] == ["1,000", "600", "60 %"]  # the seeded row: every key's today
    assert reuse["anthropic"][1:] == ["0", "0 %"] and int(reuse["anthropic"][0]) > 0
    assert reuse["mistral"] == ["–", "–", "–"]  # no traffic today
    assert "smart" in seen["recent"] and "anthropic/claude-sonnet-4-6" in seen["recent"]
    assert seen["hit_rate"].endswith("%")
    assert seen["bars"] == 30
    assert "Revoked the key kid" in seen["flash"] and "kid" not in seen["usage_after"]
    assert guest_after.status_code == 401  # the revoked key no longer works
    assert csrf_less.status_code == 403
    assert not seen["phone_overflow"]  # readable on a phone: nothing wider than the screen
    assert seen["cut"] == {1280: [], 1440: []}  # no panel scrolls sideways on a laptop
    assert (tmp_path / "dashboard.png").stat().st_size > 10_000
    target = os.environ.get("OLP_DASHBOARD_SCREENSHOT")
    if target:
        shutil.copy(tmp_path / "dashboard.png", target)


async def test_a_guest_cannot_reach_the_dashboard_api_and_off_hides_it(tmp_path: Path) -> None:
    cfg = config()
    with trio.fail_after(60):
        async with run_proxy(tmp_path / "home", cfg) as proxy:
            login = await in_thread(lambda: httpx.get(f"{proxy.url}/dashboard", timeout=10))
            api = await in_thread(lambda: httpx.get(f"{proxy.url}/dashboard/api/state",
                                                    timeout=10))
            bearer = await in_thread(lambda: httpx.get(
                f"{proxy.url}/dashboard/api/state", timeout=10,
                headers={"Authorization": f"Bearer {proxy.token}"}))
        cfg["server"] = {"dashboard": "off"}
        async with run_proxy(tmp_path / "home2", cfg) as proxy:
            off = await in_thread(lambda: httpx.get(f"{proxy.url}/dashboard", timeout=10))
    assert login.status_code == 200 and 'type="password"' in login.text
    assert "cdn" not in login.text.lower() and "https://" not in login.text
    assert "default-src 'self'" in login.headers["content-security-policy"]
    assert "frame-ancestors 'none'" in login.headers["content-security-policy"]
    assert api.status_code == 401
    assert bearer.status_code == 401  # the API takes the session cookie, not the key
    assert off.status_code == 404
