"""The ``olp`` CLI: keys create/list/rotate/revoke (text and ``--json``), start, and error
exits."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import types
from pathlib import Path

import pytest

from olp.commands.main import main
from olp.config import Settings
from olp.store import Database, KeyStore

REPO = Path(__file__).resolve().parents[3]


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    for name in ("OLP_OWNER_TOKEN", "OLP_PORT", "OLP_BIND", "OLP_LOG_LEVEL"):
        monkeypatch.delenv(name, raising=False)
    home = tmp_path / "olp"
    monkeypatch.setenv("OLP_HOME", str(home))
    return home


def _create(capsys: pytest.CaptureFixture[str], *args: str) -> str:
    assert main(["keys", "create", *args]) == 0
    out = capsys.readouterr().out
    tokens: list[str] = re.findall(r"olp_[A-Za-z0-9_-]{43}", out)
    assert len(tokens) == 1
    assert "will not be shown again" in out
    return tokens[0]


def _principal_tier(home: Path, token: str) -> str | None:
    with Database(home / "olp.db") as db:
        principal = KeyStore(db).authenticate(token)
    return None if principal is None else principal.tier


def test_create_prints_the_key_once(home: Path, capsys: pytest.CaptureFixture[str]) -> None:
    guest = _create(capsys, "alice")
    owner = _create(capsys, "me", "--owner")
    assert _principal_tier(home, guest) == "guest"
    assert _principal_tier(home, owner) == "owner"


def test_list_never_shows_secrets(home: Path, capsys: pytest.CaptureFixture[str]) -> None:
    token = _create(capsys, "alice")
    assert main(["keys", "list"]) == 0
    out = capsys.readouterr().out
    header, row = out.splitlines()
    assert header.split() == ["ID", "NAME", "TIER", "PREFIX", "PROVIDERS", "ACCOUNTS", "LIMITS",
                              "TODAY", "CREATED", "REVOKED"]
    assert row.split()[:8] == ["1", "alice", "guest", f"{token[:12]}...", "all", "-", "none",
                               "0req/0tok"]
    assert row.split()[-1] == "-"
    assert token not in out and token[12:20] not in out


def test_json_create_rotate_and_list(home: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["keys", "create", "bob", "--json"]) == 0
    created = json.loads(capsys.readouterr().out)
    assert {k: created[k] for k in ("id", "name", "tier")} == {"id": 1, "name": "bob",
                                                               "tier": "guest"}
    old = created["key"]
    assert _principal_tier(home, old) == "guest"
    assert main(["keys", "rotate", "bob", "--json"]) == 0
    rotated = json.loads(capsys.readouterr().out)
    assert (rotated["id"], rotated["name"]) == (1, "bob") and rotated["key"] != old
    assert _principal_tier(home, old) is None  # the old secret stopped working
    assert _principal_tier(home, rotated["key"]) == "guest"
    assert main(["keys", "list", "--json"]) == 0
    [listed] = json.loads(capsys.readouterr().out)
    assert listed["prefix"] == rotated["key"][:12] + "..."
    assert "key" not in listed and rotated["key"] not in json.dumps(listed)


def test_rotate_text_unknown_and_env_owner(home: Path, capsys: pytest.CaptureFixture[str],
                                           monkeypatch: pytest.MonkeyPatch) -> None:
    old = _create(capsys, "carol")
    assert main(["keys", "rotate", "carol"]) == 0
    out = capsys.readouterr().out
    [new] = re.findall(r"olp_[A-Za-z0-9_-]{43}", out)
    assert new != old and "Rotated guest key 1 (carol)" in out
    assert main(["keys", "rotate", "nobody"]) == 1
    assert "no active key" in capsys.readouterr().err
    with Database(home / "olp.db") as db:
        KeyStore(db).ensure_owner("olp_env_owner_token_for_the_test_0123456789ab")
        env_key = next(r for r in KeyStore(db).list() if r.source == "env")
    assert main(["keys", "rotate", str(env_key.id)]) == 1
    assert "OLP_OWNER_TOKEN" in capsys.readouterr().err


def test_list_when_empty(home: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["keys", "list"]) == 0
    assert "No keys yet" in capsys.readouterr().out


def test_revoke(home: Path, capsys: pytest.CaptureFixture[str]) -> None:
    alice = _create(capsys, "alice")
    bob = _create(capsys, "bob")
    assert main(["keys", "revoke", "alice"]) == 0
    assert main(["keys", "revoke", "2"]) == 0
    capsys.readouterr()
    assert _principal_tier(home, alice) is None and _principal_tier(home, bob) is None
    assert main(["keys", "revoke", "alice"]) == 1
    assert "no active key" in capsys.readouterr().err
    assert main(["keys", "revoke", "nobody"]) == 1
    assert main(["keys", "list"]) == 0
    rows = capsys.readouterr().out.splitlines()[1:]
    assert all(row.split()[-1] != "-" for row in rows)  # both show a revocation time


def test_duplicate_and_bad_names(home: Path, capsys: pytest.CaptureFixture[str]) -> None:
    _create(capsys, "alice")
    assert main(["keys", "create", "alice"]) == 1
    assert main(["keys", "create", "42"]) == 1
    err = capsys.readouterr().err
    assert "already exists" in err and "digits" in err


def test_config_errors_exit_2_without_a_traceback(
        home: Path, capsys: pytest.CaptureFixture[str]) -> None:
    home.mkdir()
    (home / "config.json").write_text('{"providers": {"anthropic": {"max_concurrent": "x"}}}')
    assert main(["keys", "list"]) == 2
    err = capsys.readouterr().err
    assert "providers.anthropic.max_concurrent: Expected int, got str" in err
    assert str(home / "config.json") in err and "Traceback" not in err


def test_environment_errors_exit_2(home: Path, capsys: pytest.CaptureFixture[str],
                                   monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OLP_PORT", "nope")
    assert main(["start"]) == 2
    assert "OLP_PORT" in capsys.readouterr().err


def test_usage(home: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main([]) == 2
    assert main(["keys"]) == 2
    assert main(["keys", "create"]) == 2
    assert main(["--help"]) == 0
    assert "keys" in capsys.readouterr().out


def test_start_runs_the_server_with_the_settings(
        home: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    seen: list[Settings] = []
    fake = types.ModuleType("olp.runtime.server")
    fake.run = lambda settings: seen.append(settings) or 0  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "olp.runtime.server", fake)
    assert main(["start"]) == 0
    assert [s.home for s in seen] == [home]


def test_python_dash_m_olp(home: Path) -> None:
    env = {**os.environ, "OLP_HOME": str(home)}
    proc = subprocess.run([sys.executable, "-m", "olp", "keys", "list"], cwd=REPO, env=env,
                          capture_output=True, text=True, timeout=60, check=False)
    assert proc.returncode == 0, proc.stderr
    assert "No keys yet" in proc.stdout


def test_create_and_update_limits_and_allow_lists(home: Path,
                                                  capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["keys", "create", "kid", "--providers", "anthropic", "--per-minute", "5",
                 "--tokens-per-day", "9000", "--json"]) == 0
    made = json.loads(capsys.readouterr().out)
    assert made["providers"] == ["anthropic"]
    assert made["limits"] == {"per_minute": 5, "tokens_per_day": 9000}
    assert main(["keys", "update", "kid", "--per-day", "100", "--json"]) == 0
    updated = json.loads(capsys.readouterr().out)
    assert updated["limits"] == {"per_minute": 5, "per_day": 100, "tokens_per_day": 9000}
    assert main(["keys", "update", "kid", "--clear-limits", "--per-week", "7",
                 "--all-providers", "--json"]) == 0
    cleared = json.loads(capsys.readouterr().out)
    assert cleared["limits"] == {"per_week": 7} and cleared["providers"] is None
    assert main(["keys", "update", "kid", "--providers", "openai,anthropic"]) == 0
    assert "providers anthropic,openai, limits 7/week" in capsys.readouterr().out
    with Database(home / "olp.db") as db:
        [record] = KeyStore(db).list()
    assert record.policy.providers == frozenset({"anthropic", "openai"})
    assert record.policy.limits.per_week == 7


@pytest.mark.parametrize("args", [
    ["keys", "create", "x", "--providers", "nobody"],
    ["keys", "create", "x", "--providers", ","],
    ["keys", "create", "x", "--per-minute", "0"],
    ["keys", "create", "x", "--per-day", "many"],
    ["keys", "update", "x", "--providers", "anthropic", "--all-providers"],
])
def test_bad_limit_or_provider_flags_are_usage_errors(home: Path, args: list[str],
                                                      capsys: pytest.CaptureFixture[str]) -> None:
    assert main(args) == 2
    assert capsys.readouterr().err


def test_update_of_an_unknown_key_fails(home: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["keys", "update", "ghost", "--per-day", "3"]) == 1
    assert "no active key" in capsys.readouterr().err


def test_usage_and_audit_read_the_database(home: Path,
                                           capsys: pytest.CaptureFixture[str]) -> None:
    import time as _time

    import trio as _trio

    from olp.accounting import AuditRow, Recorder, UsageDelta

    with Database(home / "olp.db") as db:
        recorder = Recorder(db)
        recorder.record(AuditRow(
            at=_time.time(), request_id="req_abc", key="1", key_name="kid",
            endpoint="POST /v1/chat/completions", requested_model="smart",
            provider="anthropic", model="m", entry="sub", hops=1, status=200, cache="miss",
            stream=True, latency_ms=40, prompt_tokens=3, completion_tokens=4, outcome="ok"),
            [UsageDelta("anthropic", "m", requests=1, served=1, prompt_tokens=3,
                        cached_tokens=2, completion_tokens=4, spawn_seconds=0.4)])
        _trio.run(recorder.flush)
    assert main(["usage", "--json"]) == 0
    [row] = json.loads(capsys.readouterr().out)
    assert (row["key_name"], row["requests"], row["completion_tokens"]) == ("kid", 1, 4)
    assert (row["prompt_tokens"], row["cached_tokens"]) == (3, 2)
    assert main(["usage", "--key", "kid"]) == 0
    out = capsys.readouterr().out
    header, *_, total = out.splitlines()
    assert header.split()[:5] == ["DAY", "KEY", "PROVIDER", "ACCOUNT", "MODEL"]
    assert total.split()[:3] == ["total", "1", "1"]
    figures = dict(zip(header.split()[5:], total.split()[1:], strict=True))
    assert (figures["PROMPT_TOK"], figures["CACHED_TOK"], figures["COMPL_TOK"]) == (
        "3", "2", "4")
    assert main(["audit", "--json", "--since", "2020-01-01"]) == 0
    [line] = [json.loads(x) for x in capsys.readouterr().out.splitlines()]
    assert line["request_id"] == "req_abc" and line["stream"] is True
    assert main(["audit", "--key", "nobody"]) == 0
    assert "No audit rows" in capsys.readouterr().out
    assert main(["audit", "--since", "last tuesday"]) == 2


def test_audit_shows_actions_and_how_many_rows_a_summary_stands_for(
        home: Path, capsys: pytest.CaptureFixture[str]) -> None:
    import time as _time

    import trio as _trio

    from olp.accounting import AuditRow, Recorder

    base = dict(key=None, key_name=None, requested_model=None, provider=None, model=None,
                entry=None, hops=0, cache=None, stream=False, latency_ms=1,
                prompt_tokens=None, completion_tokens=None)
    with Database(home / "olp.db") as db:
        recorder = Recorder(db)
        recorder.record(AuditRow(at=_time.time(), request_id="req_a", status=200,
                                 endpoint="POST /dashboard/api/action", outcome="ok",
                                 action="revoke_key bob", **base), [])
        recorder.record(AuditRow(at=_time.time(), request_id="sup_b", status=401,
                                 endpoint="GET /v1/models", outcome="suppressed",
                                 suppressed=990, **base), [])
        _trio.run(recorder.flush)
    assert main(["audit"]) == 0
    header, first, second = capsys.readouterr().out.splitlines()
    assert header.split()[-2:] == ["OUTCOME", "ACTION"]
    assert first.split()[-3:] == ["ok", "revoke_key", "bob"]
    assert second.split()[-4:] == ["suppressed", "(990", "rows)", "-"]
