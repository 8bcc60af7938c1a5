"""The fault soak (``bench/soak/``, ``./dev soak``) at 1,000 requests, and its classifier.

The soak starts ``olp start`` with fake CLIs and mock upstreams that fail at every stage, sends
requests with clients that disconnect or read slowly, then checks that no process, limiter
slot, flight or cache entry from a failed answer is left and that every client got a complete
answer or a clear error. It runs as a child process (it has its own ``trio.run``); the only
time bound is the hang guard, never an assertion.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import trio

REPO = Path(__file__).resolve().parents[2]
if str(REPO) not in sys.path:  # `bench` is not installed; `python -m pytest` has it already
    sys.path.insert(0, str(REPO))

from bench.soak.__main__ import rss_baseline_at  # noqa: E402
from bench.soak.client import classify  # noqa: E402
from bench.soak.scenarios import DISPATCHER, Kind, Planned, plan  # noqa: E402
from bench.soak.upstreams import proxy_config  # noqa: E402
from olp.config import Config, load_config  # noqa: E402


async def test_a_thousand_requests_with_faults_leave_nothing_behind() -> None:
    with trio.fail_after(900):  # ~1 min on an idle 2-core machine; a hang guard only
        done = await trio.run_process(
            [sys.executable, "-m", "bench.soak", "--requests", "1000", "--concurrency", "16"],
            cwd=REPO, capture_stdout=True, capture_stderr=True, check=False)
    report = done.stdout.decode(errors="replace")
    assert done.returncode == 0, report + done.stderr.decode(errors="replace")[-3000:]
    assert "**Result: PASS**" in report


def _req(stream: bool = True, must_fail: bool = False) -> Planned:
    return Planned(0, Kind("k", "m", must_fail=must_fail), "p", stream, "normal")


def _sse(*events: object) -> bytes:
    return b"".join(b"data: " + (e if isinstance(e, bytes) else json.dumps(e).encode())
                    + b"\n\n" for e in events)


CHUNK = {"choices": [{"index": 0, "delta": {"content": "Hi"}, "finish_reason": None}]}
FINISH = {"choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]}
ERROR = {"error": {"message": "the CLI crashed", "type": "server_error", "code": "cli_failed"}}
COMPLETION = {"choices": [{"index": 0, "message": {"role": "assistant", "content": "Hi"},
                           "finish_reason": "stop"}]}


def test_a_stream_with_finish_and_done_is_complete() -> None:
    assert classify(_req(), 200, _sse(CHUNK, FINISH, b"[DONE]"), False, "").outcome \
        == "complete"


def test_a_200_stream_cut_without_done_or_error_is_bad_unless_the_client_left() -> None:
    body = _sse(CHUNK)
    assert classify(_req(), 200, body, False, "RemoteProtocolError").outcome == "BAD"
    assert classify(_req(), 200, body, True, "").outcome == "disconnected"


def test_an_in_stream_error_event_is_a_clear_error_and_done_after_it_is_bad() -> None:
    assert classify(_req(), 200, _sse(CHUNK, ERROR), False, "").outcome == "error"
    assert classify(_req(), 200, _sse(CHUNK, ERROR, b"[DONE]"), False, "").outcome == "BAD"


def test_an_error_status_needs_an_openai_error_body() -> None:
    assert classify(_req(), 503, json.dumps(ERROR).encode(), False, "").detail \
        == "503 cli_failed"
    assert classify(_req(), 502, b"Bad Gateway", False, "").outcome == "BAD"


def test_json_partial_text_counts_as_an_error_only_when_marked_truncated() -> None:
    partial = {"choices": [{**COMPLETION["choices"][0], "finish_reason": "length"}]}
    body = json.dumps(partial).encode()
    assert classify(_req(stream=False), 200, body, False, "", truncated=True).outcome \
        == "error"
    whole = json.dumps(COMPLETION).encode()
    assert classify(_req(stream=False), 200, whole, False, "").outcome == "complete"


def test_a_complete_answer_from_a_route_that_always_fails_is_bad() -> None:
    body = _sse(CHUNK, FINISH, b"[DONE]")
    assert classify(_req(must_fail=True), 200, body, False, "").outcome == "BAD"


def test_the_same_seed_plans_the_same_run() -> None:
    assert plan(300, 5) == plan(300, 5)
    assert plan(300, 5) != plan(300, 6)


def test_the_dispatcher_picks_the_scenario_from_the_prompt(tmp_path: Path) -> None:
    script = tmp_path / "soak-cli"
    script.write_text(DISPATCHER)
    script.chmod(0o755)
    echo = tmp_path / "echo"
    echo.write_text("#!/usr/bin/env bash\necho \"$FAKE_X_SCENARIO|$FAKE_X_HOLD_FILE|$*\"; cat\n")
    echo.chmod(0o755)
    env = {"PATH": "/usr/bin:/bin", "SOAK_FAKE": str(echo), "SOAK_PREFIX": "X"}

    def run(prompt: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([str(script), "-p", "--json"], input=prompt, env=env,
                              capture_output=True, text=True, timeout=30, check=False)

    hang = run("Say hi [soak-scenario=hang variant=1]")
    assert hang.stdout == "hang||-p --json\nSay hi [soak-scenario=hang variant=1]\n"
    assert run("x soak-scenario=stall").stdout.startswith("success|/nonexistent/soak-hold|")
    assert run("x soak-scenario=exit_nonzero").returncode == 2
    assert run("x soak-scenario=crash_before").returncode == -11  # SIGSEGV


def test_the_proxy_config_loads_and_keeps_idle_connections_past_the_default(
        tmp_path: Path) -> None:
    """A client starved for more than the default keep-alive (5 s) between two requests would
    race the server closing its connection: not a fault the soak is about."""
    config = proxy_config(tmp_path, {"ok": "http://127.0.0.1:9/v1"}, "OLP_SOAK_RUN=x", 32)
    path = tmp_path / "config.json"
    path.write_text(json.dumps(config))
    assert load_config(path).server.keep_alive_s > Config().server.keep_alive_s


def test_rss_growth_is_measured_from_half_the_run_after_the_warm_up() -> None:
    """docs/adr/0013-memory-over-months.md: the proxy's memory settles until about request
    5,000 of 10,000, so growth before it is warm-up, not a leak."""
    assert rss_baseline_at(10_000) == 5_000
    assert rss_baseline_at(1_000) == 500
