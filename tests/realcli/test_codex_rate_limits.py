"""The REAL ``codex`` (0.171.0) reads the rate-limit snapshot headers of a Responses API answer
(``x-codex-primary-used-percent`` & co., sent by the mock's ``response_headers`` option) in both
auth modes, but ``codex exec --json`` prints none of it: no stdout line and nothing on stderr
carries a used percent, a window or a reset. The snapshot only reaches the session rollout
file (an ``event_msg`` ``token_count`` with ``rate_limits``; not written under ``--ephemeral``,
which OLP passes) and ``codex app-server``'s ``account/rateLimits/updated``. Captures and
details: ``tests/fixtures/cli-reference/codex/rate_limits/``.

If a future codex surfaces the snapshot on ``exec --json`` stdout, the "no figures" tests fail
loudly: that is the moment to parse it. The rollout test is the positive control (the headers
were sent, and codex still reads them under these names).

Needs ``OLP_REAL_CODEX`` (printed by ``scripts/install-real-clis``): skips without it, fails in
CI (``CI=true``).
"""

from __future__ import annotations

import base64
import functools
import json
import re
import time
from pathlib import Path
from typing import Any

import pytest
import trio
from mock_openai_responses import MockResponses, offered_tools, serve_mock
from olp_harness import real_cli
from test_proxy_real_codex import KEY, codex_config_toml

from olp.ir import ChatRequest, Message, TextPart
from olp.providers.codex import ADAPTER

MODEL = "gpt-5.5"
HANG_GUARD_S = 60
#: the exec --json line types of a plain answer on fallback metadata (no others, ever)
SUCCESS_TYPES = ["thread.started", "item.completed", "turn.started", "item.completed",
                 "turn.completed"]
USAGE_KEYS = {"input_tokens", "cached_input_tokens", "cache_write_input_tokens", "output_tokens",
              "reasoning_output_tokens"}
#: a key a rate-limit snapshot would bring (codex's own names, snake or camel case)
SNAPSHOT_KEY = re.compile(r"rate|limit|window|reset|percent|primary|secondary|credit", re.I)


def snapshot_headers(now: int, primary: int, secondary: int) -> dict[str, str]:
    """What the backend sends a ChatGPT-plan account: the 5-hour window (300 minutes, resets
    in 3 h) and the weekly one (10080 minutes, resets in 4 days), resets in Unix seconds."""
    return {
        "x-codex-primary-used-percent": str(primary),
        "x-codex-primary-window-minutes": "300",
        "x-codex-primary-reset-at": str(now + 3 * 3600),
        "x-codex-secondary-used-percent": str(secondary),
        "x-codex-secondary-window-minutes": "10080",
        "x-codex-secondary-reset-at": str(now + 4 * 86400),
    }


def _jwt(claims: dict[str, Any]) -> str:
    def part(obj: dict[str, Any]) -> str:
        return base64.urlsafe_b64encode(json.dumps(obj).encode()).rstrip(b"=").decode()

    return f"{part({'alg': 'none', 'typ': 'JWT'})}.{part(claims)}.c2ln"


def chatgpt_auth(now: int) -> str:
    """A ``codex login`` ChatGPT auth.json with fake unsigned tokens that need no refresh."""
    auth = {"chatgpt_plan_type": "plus", "chatgpt_account_id": "acct-mock",
            "chatgpt_user_id": "user-mock"}
    claims = {"exp": now + 30 * 86400, "iat": now, "https://api.openai.com/auth": auth}
    return json.dumps({
        "auth_mode": "chatgpt",
        "OPENAI_API_KEY": None,
        "tokens": {"id_token": _jwt({"email": "mock@example.com", **claims}),
                   "access_token": _jwt(claims), "refresh_token": "rt-mock",
                   "account_id": "acct-mock"},
        "last_refresh": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(now)),
    })


async def serve(nursery: trio.Nursery, scenario: str, headers: dict[str, str],
                **options: Any) -> MockResponses:
    mock: MockResponses = await nursery.start(functools.partial(
        serve_mock, scenario=scenario, response_headers=headers, **options))
    return mock


async def run_codex(tmp_path: Path, mock: MockResponses, auth: str, *,
                    ephemeral: bool = True) -> tuple[int, list[dict[str, Any]], str, Path]:
    """One real ``codex exec --json`` with OLP's exact invocation (prompt on stdin), a fresh
    HOME; ``auth`` is ``api_key`` (OPENAI_API_KEY) or ``chatgpt`` (a ChatGPT auth.json, the
    provider marked ``requires_openai_auth``). (exit code, stdout objects, stderr with
    ``tmp_path`` written as ``<tmp>``, HOME)."""
    codex = real_cli("OLP_REAL_CODEX")
    home, workdir = tmp_path / "home", tmp_path / "work"
    (home / ".codex").mkdir(parents=True)
    workdir.mkdir()
    toml = codex_config_toml(mock)
    env = {"PATH": "/usr/bin:/bin", "HOME": str(home), "LANG": "C.UTF-8"}
    if auth == "chatgpt":
        toml = toml.replace('env_key = "OPENAI_API_KEY"\n', "requires_openai_auth = true\n")
        (home / ".codex" / "auth.json").write_text(chatgpt_auth(int(time.time())))
    else:
        env["OPENAI_API_KEY"] = KEY
    (home / ".codex" / "config.toml").write_text(toml)
    request = ChatRequest(model=MODEL, messages=(
        Message(role="user", content=(TextPart(text="Say hello in four words."),)),))
    invocation = ADAPTER.invocation(request, binary=codex, model=MODEL, workdir=workdir)
    for name, content in invocation.files.items():
        (workdir / name).write_text(content)
    argv = [a for a in invocation.argv if ephemeral or a != "--ephemeral"]
    proc = await trio.run_process(argv, stdin=invocation.stdin, capture_stdout=True,
                                  capture_stderr=True, check=False, cwd=workdir, env=env)
    objs = [json.loads(line) for line in proc.stdout.splitlines()]
    # codex names its home in a warning ("could not create PATH aliases"): not a figure
    return proc.returncode, objs, proc.stderr.decode().replace(str(tmp_path), "<tmp>"), home


def assert_no_figures(objs: list[dict[str, Any]], stderr: str, headers: dict[str, str]) -> None:
    """No stdout key names a snapshot field, no stdout number or text and no stderr text
    carries a figure the headers sent."""
    figures = {float(v) for v in headers.values()}
    resets = [v for k, v in headers.items() if k.endswith("-reset-at")] + ["10080"]

    def walk(value: Any, path: str) -> None:
        if isinstance(value, dict):
            for key, inner in value.items():
                assert not SNAPSHOT_KEY.search(key), f"{path}.{key}: a rate-limit field?"
                walk(inner, f"{path}.{key}")
        elif isinstance(value, list):
            for i, inner in enumerate(value):
                walk(inner, f"{path}[{i}]")
        elif isinstance(value, int | float) and not isinstance(value, bool):
            assert float(value) not in figures, f"{path} = {value}: a rate-limit figure?"
        elif isinstance(value, str):
            assert not any(r in value for r in resets), f"{path}: {value!r}"

    for i, obj in enumerate(objs):
        walk(obj, f"line{i + 1}")
    assert not any(r in stderr for r in resets)
    assert "%" not in stderr and not SNAPSHOT_KEY.search(stderr), stderr


@pytest.mark.parametrize("auth", ["api_key", "chatgpt"])
@pytest.mark.parametrize("primary", [42, 95], ids=["normal", "near_limit"])
async def test_exec_json_prints_no_snapshot(tmp_path: Path, nursery: trio.Nursery, auth: str,
                                            primary: int) -> None:
    headers = snapshot_headers(int(time.time()), primary, 13)
    with trio.fail_after(HANG_GUARD_S):
        mock = await serve(nursery, "success", headers)
        code, objs, stderr, _ = await run_codex(tmp_path, mock, auth)
    assert code == 0
    [request] = mock.requests
    # the auth mode really was the one asked for: ChatGPT sends the account id
    assert request["headers"].get("chatgpt-account-id") == \
        ("acct-mock" if auth == "chatgpt" else None)
    # no tool in either mode: a ChatGPT login offered image_gen until it was switched off
    assert offered_tools(request["body"]) == []
    assert [o["type"] for o in objs] == SUCCESS_TYPES
    assert objs[3]["item"] == {"id": "item_1", "type": "agent_message",
                               "text": "Hello from the mock upstream."}
    assert set(objs[-1]) == {"type", "usage"} and set(objs[-1]["usage"]) == USAGE_KEYS
    assert_no_figures(objs, stderr, headers)


@pytest.mark.parametrize("auth", ["api_key", "chatgpt"])
async def test_usage_limit_429_prints_no_snapshot(tmp_path: Path, nursery: trio.Nursery,
                                                  auth: str) -> None:
    """A 429 ``usage_limit_reached`` with the headers at 100 %: one request, the usual
    usage-limit message, its reset taken from the error body, not from the headers (no body
    reset: "try again later." although ``x-codex-primary-reset-at`` is 3 h ahead)."""
    headers = snapshot_headers(int(time.time()), 100, 13)
    with trio.fail_after(HANG_GUARD_S):
        mock = await serve(nursery, "usage_limit", headers, resets_in_seconds=None)
        code, objs, stderr, _ = await run_codex(tmp_path, mock, auth)
    assert code == 1
    assert mock.request_count == 1  # never retried
    assert [o["type"] for o in objs] == ["thread.started", "item.completed", "turn.started",
                                         "error", "turn.failed"]
    message = ("You’ve hit your usage limit. Upgrade to Pro (https://chatgpt.com/explore/pro), "
               "visit https://chatgpt.com/settings/usage to purchase more credits or try again "
               "later.")
    assert objs[3] == {"type": "error", "message": message}
    assert objs[4] == {"type": "turn.failed", "error": {"message": message}}
    assert_no_figures(objs, stderr, headers)
    assert not any(v in message for v in headers.values())


async def test_codex_reads_the_headers_into_the_rollout(tmp_path: Path,
                                                        nursery: trio.Nursery) -> None:
    """The positive control: without ``--ephemeral`` the session rollout records the snapshot
    (an API key suffices), with the header values: percent as a float, minutes, Unix seconds."""
    now = int(time.time())
    headers = snapshot_headers(now, 42, 13)
    with trio.fail_after(HANG_GUARD_S):
        mock = await serve(nursery, "success", headers)
        code, objs, _, home = await run_codex(tmp_path, mock, "api_key", ephemeral=False)
    assert code == 0 and [o["type"] for o in objs] == SUCCESS_TYPES
    [rollout] = (home / ".codex" / "sessions").rglob("rollout-*.jsonl")
    counts = [e["payload"] for line in rollout.read_text().splitlines()
              if (e := json.loads(line)).get("type") == "event_msg"
              and e["payload"].get("type") == "token_count"]
    [count] = counts
    assert count["rate_limits"] == {
        "limit_id": "codex", "limit_name": None,
        "primary": {"used_percent": 42.0, "window_minutes": 300, "resets_at": now + 3 * 3600},
        "secondary": {"used_percent": 13.0, "window_minutes": 10080,
                      "resets_at": now + 4 * 86400},
        "credits": None, "individual_limit": None, "spend_control_reached": None,
        "plan_type": None, "rate_limit_reached_type": None,
    }
