"""The REAL `claude` turns Anthropic's subscription rate-limit headers
(``anthropic-ratelimit-unified-*``, sent by the mock's ``ratelimit_headers`` option) into a
``rate_limit_event`` stdout line, but only when signed in with an OAuth token: the shape, the
timing and the rejected case are in ``tests/fixtures/cli-reference/claude/rate_limit_event/``.

Needs ``OLP_REAL_CLAUDE`` (printed by ``scripts/install-real-clis``): skips without it, fails in
CI (``CI=true``).
"""

from __future__ import annotations

import functools
import json
import os
import time
from pathlib import Path
from typing import Any

import pytest
import trio
from mock_anthropic import MockAnthropic, serve_mock
from olp_harness import real_cli

MODEL = "claude-sonnet-4-6"
U = "anthropic-ratelimit-unified-"
HANG_GUARD_S = 60


def unified(status: str, five_hour: tuple[str, str, int], seven_day: tuple[str, str, int],
            claim: str = "five_hour") -> dict[str, str]:
    """The headers the Anthropic API sends a subscriber: each window as (status, utilization,
    reset in Unix seconds); the overall reset is the claimed window's."""
    (status_5h, util_5h, reset_5h), (status_7d, util_7d, reset_7d) = five_hour, seven_day
    return {
        U + "status": status,
        U + "5h-status": status_5h, U + "5h-utilization": util_5h, U + "5h-reset": str(reset_5h),
        U + "7d-status": status_7d, U + "7d-utilization": util_7d, U + "7d-reset": str(reset_7d),
        U + "representative-claim": claim,
        U + "reset": str(reset_5h if claim == "five_hour" else reset_7d),
        U + "fallback-percentage": "0.5",
        U + "overage-status": "rejected",
        U + "overage-disabled-reason": "org_level_disabled",
    }


async def run_claude(claude: str, mock: MockAnthropic, tmp_path: Path,
                     credential: dict[str, str]) -> tuple[int, list[dict[str, Any]]]:
    """claude -p, stream-json, prompt on stdin, a fresh HOME; (exit code, stdout objects)."""
    home = tmp_path / "home"
    (home / "tmp").mkdir(parents=True)
    env = {
        "PATH": os.environ.get("PATH", "/usr/local/bin:/usr/bin:/bin"),
        "HOME": str(home), "TMPDIR": str(home / "tmp"), "LANG": "C.UTF-8", "TERM": "dumb",
        "ANTHROPIC_BASE_URL": mock.base_url,
        "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1", "DISABLE_AUTOUPDATER": "1",
        "CLAUDE_CODE_MAX_RETRIES": "2",
        **credential,
    }
    argv = [claude, "-p", "--output-format", "stream-json", "--verbose",
            "--include-partial-messages", "--tools", "", "--strict-mcp-config",
            "--setting-sources", "", "--no-session-persistence", "--model", MODEL]
    proc = await trio.run_process(argv, stdin=b"Say hello in four words.", capture_stdout=True,
                                  capture_stderr=True, check=False, cwd=home, env=env)
    assert proc.stderr == b""
    return proc.returncode, [json.loads(line) for line in proc.stdout.splitlines()]


async def serve(nursery: trio.Nursery, scenario: str, headers: dict[str, str]) -> MockAnthropic:
    mock: MockAnthropic = await nursery.start(
        functools.partial(serve_mock, scenario=scenario, ratelimit_headers=headers))
    return mock


def kinds(objs: list[dict[str, Any]]) -> list[str]:
    return [o["event"]["type"] if o["type"] == "stream_event" else o["type"] for o in objs]


OAUTH = {"CLAUDE_CODE_OAUTH_TOKEN": "sk-ant-oat01-mock"}


@pytest.mark.parametrize("warning", [False, True], ids=["allowed", "allowed_warning"])
async def test_oauth_event_carries_the_headers(tmp_path: Path, nursery: trio.Nursery,
                                               warning: bool) -> None:
    claude = real_cli("OLP_REAL_CLAUDE")
    now = int(time.time())
    reset_5h, reset_7d = now + 3 * 3600, now + 4 * 86400
    headers = unified("allowed_warning" if warning else "allowed",
                      ("allowed_warning" if warning else "allowed", "0.91" if warning else "0.42",
                       reset_5h), ("allowed", "0.13", reset_7d))
    if warning:
        headers[U + "5h-surpassed-threshold"] = "0.9"
    with trio.fail_after(HANG_GUARD_S):
        mock = await serve(nursery, "success", headers)
        code, objs = await run_claude(claude, mock, tmp_path, OAUTH)
    assert code == 0
    (event,) = [o for o in objs if o["type"] == "rate_limit_event"]
    assert set(event) == {"type", "rate_limit_info", "uuid", "session_id"}
    assert event["session_id"] == objs[0]["session_id"]
    five_hour = {"utilization": 0.91 if warning else 0.42, "resetsAt": reset_5h,
                 "status": "allowed_warning" if warning else "allowed"}
    expected: dict[str, Any] = {
        "status": "allowed_warning" if warning else "allowed",
        "resetsAt": reset_5h,
        "rateLimitType": "five_hour",
        "overageStatus": "rejected",
        "overageDisabledReason": "org_level_disabled",
        "isUsingOverage": False,
        "unifiedWindows": {
            "five_hour": {**five_hour, "surpassedThreshold": 0.9} if warning else five_hour,
            "seven_day": {"utilization": 0.13, "resetsAt": reset_7d, "status": "allowed"}},
    }
    if warning:
        expected |= {"utilization": 0.91, "surpassedThreshold": 0.9}
    assert event["rate_limit_info"] == expected
    # once the response has been read in full: after message_stop, just before the result
    assert kinds(objs)[-3:] == ["message_stop", "rate_limit_event", "result"]


async def test_oauth_rejected_429(tmp_path: Path, nursery: trio.Nursery) -> None:
    """A 429 saying ``rejected`` (the subscription limit is used up): the event first, then
    the usage-limit error, and no retry."""
    claude = real_cli("OLP_REAL_CLAUDE")
    now = int(time.time())
    headers = unified("rejected", ("rejected", "1.0", now + 3600), ("allowed", "0.13", now + 86400))
    with trio.fail_after(HANG_GUARD_S):
        mock = await serve(nursery, "rate_limit", headers)
        code, objs = await run_claude(claude, mock, tmp_path, OAUTH)
    assert code == 1
    assert mock.request_count == 1  # not retried although CLAUDE_CODE_MAX_RETRIES=2
    assert kinds(objs) == ["system", "system", "rate_limit_event", "assistant", "result"]
    info = objs[2]["rate_limit_info"]
    assert (info["status"], info["rateLimitType"], info["resetsAt"]) == \
        ("rejected", "five_hour", now + 3600)
    assert info["unifiedWindows"]["five_hour"] == \
        {"utilization": 1, "resetsAt": now + 3600, "status": "rejected"}
    result = objs[-1]
    assert result["is_error"] is True and result["api_error"] == "usage_limit_reached"
    assert (result["api_error_status"], result["api_error_type"]) == (429, "rate_limit_error")
    assert result["result"].startswith("You've hit your 5-hour limit · resets ")
    assert objs[-2]["api_error_params"]["rate_limit_info"] == {
        "status": "rejected", "resetsAt": now + 3600, "rateLimitType": "five_hour",
        "overageStatus": "rejected", "overageDisabledReason": "org_level_disabled",
        "isUsingOverage": False}


async def test_api_key_gets_no_event(tmp_path: Path, nursery: trio.Nursery) -> None:
    claude = real_cli("OLP_REAL_CLAUDE")
    now = int(time.time())
    headers = unified("allowed", ("allowed", "0.42", now + 3600), ("allowed", "0.13", now + 86400))
    with trio.fail_after(HANG_GUARD_S):
        mock = await serve(nursery, "success", headers)
        code, objs = await run_claude(claude, mock, tmp_path, {"ANTHROPIC_API_KEY": "sk-ant-mock"})
    assert code == 0
    assert objs[0]["apiKeySource"] == "ANTHROPIC_API_KEY"
    assert "rate_limit_event" not in kinds(objs)
