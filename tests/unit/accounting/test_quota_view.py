"""The quota view: each provider's state (unavailable, cooling, circuit open, soft budget
spent, ok), the windows its CLI reported, OLP's own counts over five hours and today, and the
soonest reset; ``olp quota`` shows what a stopped proxy saved."""

from __future__ import annotations

import dataclasses
import json
import time
from pathlib import Path

import pytest
import trio

from olp.accounting import AuditRow, Recorder, UsageDelta, quota_figures, quota_view
from olp.commands.main import main
from olp.store import HEALTH_STATE, LEDGER_STATE, Database, StateStore

NOW = 1_800_000_000.0


def test_states_in_order_of_precedence_and_the_soonest_reset() -> None:
    health = {"cooldowns": [{"provider": "a", "model": None, "category": "usage_window",
                             "reason": "USAGE_WINDOW", "until": NOW + 600},
                            {"provider": "z", "model": None, "category": "usage_window",
                             "reason": "old", "until": NOW - 1}],
              "circuits": [{"provider": "b", "open_until": NOW + 60, "wait_s": 60,
                            "recent_failures": 3}]}
    reported = {"d": {"five_hour": {"status": "allowed", "utilization": 0.4,
                                    "resets_at": NOW + 3000, "seen_at": NOW - 10}}}
    view = quota_view(["a", "b", "c", "d", "e", "z"], health=health, reported=reported,
                      soft={"c": ("c: 1000 requests today", 120.0)},
                      unavailable={"e": "claude not found on PATH"},
                      figures={"d": {"five_hour": {"requests": 4, "tokens": 99},
                                     "day": {"requests": 6, "failed_hops": 1, "tokens": 120}}},
                      now=NOW)
    states = {n: (p["state"], p["until"]) for n, p in view["providers"].items()}
    assert states == {"a": ("cooling", NOW + 600), "b": ("circuit_open", NOW + 60),
                      "c": ("soft_budget_spent", NOW + 120), "d": ("ok", None),
                      "e": ("unavailable", None), "z": ("ok", None)}
    assert view["providers"]["e"]["reason"] == "claude not found on PATH"
    assert view["providers"]["d"]["next_reset"] == NOW + 3000
    assert view["providers"]["d"]["ledger"]["five_hour"]["requests"] == 4
    assert view["providers"]["a"]["ledger"]["day"]["requests"] == 0
    assert view["soonest_reset"] == NOW + 60


def test_figures_come_from_the_trail_for_five_hours_and_the_ledger_for_today(
        tmp_path: Path) -> None:
    now = time.time()
    with Database(tmp_path / "olp.db") as db:
        recorder = Recorder(db)
        for at, tokens in ((now - 6 * 3600, 5), (now - 60, 7), (now - 30, 11)):
            recorder.record(_row(at, tokens), [UsageDelta("anthropic", "m", requests=1,
                                                          prompt_tokens=tokens)])
        trio.run(recorder.flush)
        figures = quota_figures(db, now)
    assert figures["anthropic"]["five_hour"] == {"requests": 2, "tokens": 18}
    assert figures["anthropic"]["day"]["requests"] >= 2  # the 6 h old one may be yesterday


def test_olp_quota_shows_what_a_stopped_proxy_saved(tmp_path: Path,
                                                    monkeypatch: pytest.MonkeyPatch,
                                                    capsys: pytest.CaptureFixture[str]) -> None:
    home = tmp_path / "home"
    monkeypatch.setenv("OLP_HOME", str(home))
    monkeypatch.setenv("OLP_PORT", "9")  # nothing listens: the offline view
    monkeypatch.setenv("OLP_OWNER_TOKEN", "olp_test_owner_token_0123456789abcdef")
    later = time.time() + 3600
    health = {"cooldowns": [{"provider": "anthropic", "model": None,
                             "category": "usage_window", "reason": "claude: usage limit",
                             "until": later}], "circuits": []}
    ledger = {"reported": {"anthropic": {"five_hour": {
        "status": "rejected", "utilization": 1.0, "resets_at": later, "seen_at": time.time()}}}}
    with Database(home / "olp.db") as db:
        trio.run(StateStore(db).save_async, HEALTH_STATE, health)
        trio.run(StateStore(db).save_async, LEDGER_STATE, ledger)
    assert main(["quota", "--json"]) == 0
    view = json.loads(capsys.readouterr().out)
    assert view["running"] is False
    assert view["providers"]["anthropic"]["state"] == "cooling"
    assert view["providers"]["anthropic"]["reported"]["five_hour"]["status"] == "rejected"
    assert view["soonest_reset"] == pytest.approx(later)
    assert main(["quota"]) == 0
    out = capsys.readouterr().out
    assert "five_hour:rejected@100%" in out and "anthropic: claude: usage limit" in out


def _row(at: float, tokens: int) -> AuditRow:
    return AuditRow(at=at, request_id=f"req_{at}", key="1", key_name="kid",
                    endpoint="POST /v1/chat/completions", requested_model="smart",
                    provider="anthropic", model="m", entry="sub", hops=1, status=200,
                    cache="miss", stream=False, latency_ms=1, prompt_tokens=tokens,
                    completion_tokens=0, outcome="ok")


def test_olp_quota_usage_and_audit_show_the_account(tmp_path: Path,
                                                    monkeypatch: pytest.MonkeyPatch,
                                                    capsys: pytest.CaptureFixture[str]) -> None:
    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setenv("OLP_HOME", str(home))
    monkeypatch.setenv("OLP_PORT", "9")  # nothing listens: the offline view
    monkeypatch.setenv("OLP_OWNER_TOKEN", "olp_test_owner_token_0123456789abcdef")
    (home / "config.json").write_text(json.dumps({"providers": {
        "enabled": {"openai": False, "mistral": False},
        "anthropic": {"accounts": {"bob": {"serves": "*"}}}}}))
    now, later = time.time(), time.time() + 3600
    health = {"cooldowns": [{"provider": "anthropic@bob", "model": None,
                             "category": "usage_window", "reason": "claude: usage limit",
                             "until": later}], "circuits": []}
    with Database(home / "olp.db") as db:
        trio.run(StateStore(db).save_async, HEALTH_STATE, health)
        recorder = Recorder(db)
        for n, account in enumerate(("default", "bob", "bob")):
            recorder.record(dataclasses.replace(_row(now, 5), request_id=f"req_{n}",
                                                account=account),
                            [UsageDelta("anthropic", "m", account=account, requests=1)])
        trio.run(recorder.flush)
    assert main(["quota", "--json"]) == 0
    view = json.loads(capsys.readouterr().out)
    bob = view["providers"]["anthropic@bob"]
    assert (bob["provider"], bob["account"], bob["state"]) == ("anthropic", "bob", "cooling")
    assert bob["ledger"]["day"]["requests"] == 2
    assert view["providers"]["anthropic"]["account"] == "default"
    assert main(["quota"]) == 0
    header, *rows = capsys.readouterr().out.splitlines()[1:]
    assert header.split()[:3] == ["PROVIDER", "ACCOUNT", "STATE"]
    assert any(r.split()[:3] == ["anthropic", "bob", "cooling"] for r in rows)
    assert main(["usage"]) == 0
    header, *rows, total = capsys.readouterr().out.splitlines()
    assert header.split()[:5] == ["DAY", "KEY", "PROVIDER", "ACCOUNT", "MODEL"]
    assert [r.split()[2:6] for r in rows] == [["anthropic", "bob", "m", "2"],
                                              ["anthropic", "default", "m", "1"]]
    assert total.split()[:2] == ["total", "3"]
    assert main(["usage", "--json"]) == 0
    assert {r["account"] for r in json.loads(capsys.readouterr().out)} == {"bob", "default"}
    assert main(["audit"]) == 0
    header, *rows = capsys.readouterr().out.splitlines()
    account = header.split().index("ACCOUNT")
    assert [r.split()[account] for r in rows] == ["default", "bob", "bob"]
    assert main(["audit", "--json"]) == 0
    assert [json.loads(x)["account"] for x in capsys.readouterr().out.splitlines()] == [
        "default", "bob", "bob"]
