"""The quota view with the REAL claude through ``olp start``: the mock sends Anthropic's
subscription rate-limit headers, claude (signed in with an OAuth token, as a subscriber is)
turns them into its ``rate_limit_event``, and ``GET /v0/management/quota`` and ``olp quota``
show its five-hour and weekly windows; a five-hour soft trigger then rests the provider until
the window claude reported resets.

Needs ``OLP_REAL_CLAUDE`` (printed by ``scripts/install-real-clis``).
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import httpx
import pytest
import trio
from mock_anthropic import MockAnthropic, serve_mock
from olp_harness import OWNER_TOKEN, Proxy, in_thread, real_cli, run_proxy

U = "anthropic-ratelimit-unified-"


def headers(util_5h: str, reset_5h: int, reset_7d: int) -> dict[str, str]:
    return {U + "status": "allowed", U + "5h-status": "allowed",
            U + "5h-utilization": util_5h, U + "5h-reset": str(reset_5h),
            U + "7d-status": "allowed", U + "7d-utilization": "0.13",
            U + "7d-reset": str(reset_7d), U + "representative-claim": "five_hour",
            U + "reset": str(reset_5h)}


def config(claude: str, mock: MockAnthropic, threshold: float | None) -> dict[str, Any]:
    cfg: dict[str, Any] = {
        "providers": {
            "enabled": {"openai": False, "mistral": False},
            "anthropic": {
                "binary": claude, "max_concurrent": 2,
                # an OAuth token: the subscription (claude emits rate_limit_event only so)
                "env": {"ANTHROPIC_BASE_URL": mock.base_url,
                        "CLAUDE_CODE_OAUTH_TOKEN": "sk-ant-oat01-mock",
                        "CLAUDE_CODE_MAX_RETRIES": "0"},
                "timeouts": {"first_output_s": 45, "idle_s": 20, "total_s": 55}}},
        "server": {"kill_grace_s": 1}}
    if threshold is not None:
        cfg["routing"] = {"soft_triggers": {"anthropic": {
            "five_hour_window_percent_threshold": threshold}}}
    return cfg


def chat(proxy: Proxy, text: str) -> httpx.Response:
    return httpx.post(f"{proxy.url}/v1/chat/completions", timeout=60,
                      headers={"Authorization": f"Bearer {proxy.token}"},
                      json={"model": "claude-sonnet-4-6",
                            "messages": [{"role": "user", "content": text}]})


async def test_the_windows_claude_reports_show_in_the_quota_view(
        tmp_path: Path, nursery: trio.Nursery) -> None:
    claude = real_cli("OLP_REAL_CLAUDE")
    reset_5h, reset_7d = int(time.time()) + 3 * 3600, int(time.time()) + 4 * 86400
    mock: MockAnthropic = await nursery.start(lambda task_status: serve_mock(
        scenario="success", ratelimit_headers=headers("0.42", reset_5h, reset_7d),
        task_status=task_status))
    home = tmp_path / "home"
    with trio.fail_after(60):
        async with run_proxy(home, config(claude, mock, threshold=90)) as proxy:
            first = await in_thread(lambda: chat(proxy, "Say hello."))
            view = await _quota_once_recorded(proxy)
            printed = await in_thread(lambda: subprocess.run(
                [sys.executable, "-m", "olp", "quota"], capture_output=True, text=True,
                timeout=30, check=True, env={"PATH": "/usr/bin:/bin", "OLP_HOME": str(home),
                                             "OLP_OWNER_TOKEN": OWNER_TOKEN,
                                             "OLP_PORT": proxy.url.rsplit(":", 1)[1]}).stdout)
            guest = await in_thread(lambda: proxy.get("/v0/management/quota", "olp_nobody"))
    assert first.status_code == 200
    anthropic = view["providers"]["anthropic"]
    assert anthropic["state"] == "ok"
    windows = {w: (r["status"], r["utilization"], r["resets_at"])
               for w, r in anthropic["reported"].items()}
    assert windows == {"five_hour": ("allowed", 0.42, reset_5h),
                       "seven_day": ("allowed", 0.13, reset_7d)}
    assert anthropic["next_reset"] == reset_5h and view["soonest_reset"] == reset_5h
    assert anthropic["ledger"]["five_hour"]["requests"] == 1
    assert "five_hour:allowed@42%" in printed and "seven_day:allowed@13%" in printed
    assert guest.status_code == 401


async def test_a_reported_window_over_the_threshold_rests_the_provider_until_its_reset(
        tmp_path: Path, nursery: trio.Nursery) -> None:
    claude = real_cli("OLP_REAL_CLAUDE")
    reset_5h = int(time.time()) + 2 * 3600
    mock: MockAnthropic = await nursery.start(lambda task_status: serve_mock(
        scenario="success", ratelimit_headers=headers("0.95", reset_5h, reset_5h + 86400),
        task_status=task_status))
    with trio.fail_after(60):
        async with run_proxy(tmp_path / "home", config(claude, mock, threshold=90)) as proxy:
            first = await in_thread(lambda: chat(proxy, "Say hello."))
            spawned = len(mock.requests)
            second = await in_thread(lambda: chat(proxy, "Say hello again."))
            view = (await in_thread(lambda: proxy.get("/v0/management/quota"))).json()
    assert first.status_code == 200
    assert second.status_code == 429  # the only hop rests: every hop is resting
    assert second.json()["error"]["code"] == "all_hops_cooling"
    retry_after = int(second.headers["retry-after"])
    assert reset_5h - time.time() - 60 <= retry_after <= reset_5h - time.time() + 60
    assert len(mock.requests) == spawned  # no spawn for the second request
    detail = json.loads(second.headers["x-olp-fallback-detail"])
    assert [(d["code"], d["trigger_type"]) for d in detail] == [("SOFT_TRIGGER", "soft")]
    anthropic = view["providers"]["anthropic"]
    assert anthropic["state"] == "soft_budget_spent"
    assert anthropic["until"] == pytest.approx(reset_5h, abs=60)


async def _quota_once_recorded(proxy: Proxy) -> dict[str, Any]:
    """The quota view once the answered request is in the trail (the recorder commits every
    250 ms: a view read at once may not count it yet)."""
    with trio.move_on_after(10):
        while True:
            view: dict[str, Any] = (await in_thread(
                lambda: proxy.get("/v0/management/quota"))).json()
            if view["providers"]["anthropic"]["ledger"]["five_hour"]["requests"]:
                return view
            await trio.sleep(0.1)
    raise AssertionError("the request never reached the audit trail")
