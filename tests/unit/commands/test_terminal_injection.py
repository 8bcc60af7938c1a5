"""Issue #29: text a client, a stored row or the server supplied reaches a person's terminal
escaped in every human-readable view, while ``--json`` keeps it exactly as stored.

Each test drives the command through :func:`olp.commands.main.main`, the real printing
path; only the running proxy's answer (``Proxy.call``) is stood in for where a command
needs one, and the audit and usage readers' text (:func:`_hostile`)."""

from __future__ import annotations

import json
import re
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest
import trio

from olp import accounting
from olp.accounting import AuditRow, Recorder, UsageDelta, quota_view
from olp.commands._proxy_client import Proxy
from olp.commands.main import main
from olp.store import HEALTH_STATE, Database, ImportedKey, KeyPolicy, KeyStore, StateStore

#: Clears the screen, starts a forged row and flips what follows right to left.
EVIL = "\x1b[2J\r\nFAKE ROW\u202e"
SHOWN = r"\x1b[2J\r\nFAKE ROW\u202e"
#: Anything a terminal acts on, but the newline that ends a printed line.
RAW = re.compile("[\x00-\x09\x0b-\x1f\x7f-\x9f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]")


def assert_inert(out: str) -> None:
    """No raw control character in ``out``, and every forged row shown escaped in place."""
    assert RAW.search(out) is None, out
    assert "FAKE ROW" in out
    assert out.count("FAKE ROW") == out.count(SHOWN), out
    assert not any(line.startswith("FAKE ROW") for line in out.splitlines())


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    for name in ("OLP_OWNER_TOKEN", "OLP_PORT", "OLP_BIND", "OLP_LOG_LEVEL"):
        monkeypatch.delenv(name, raising=False)
    home = tmp_path / "olp"
    home.mkdir()
    monkeypatch.setenv("OLP_HOME", str(home))
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.setenv("PATH", str(tmp_path / "no-bin"))  # no vendor CLI is found
    return home


def _answer(monkeypatch: pytest.MonkeyPatch, body: Mapping[str, Any]) -> None:
    """The running proxy answers ``body`` to whatever the command asks."""
    monkeypatch.setattr(Proxy, "call", lambda self, method, path: dict(body))


def _run(capsys: pytest.CaptureFixture[str], *argv: str) -> str:
    main(list(argv))
    captured = capsys.readouterr()
    assert captured.err == ""
    return captured.out


#: What a guest controls in a request's row (``key_name`` and ``outcome`` for good measure).
HOSTILE_ROW = {"request_id": "req_" + EVIL, "key_name": "kid" + EVIL, "endpoint": "GET /" + EVIL,
               "requested_model": "smart" + EVIL, "provider": "anthropic" + EVIL,
               "model": "m" + EVIL, "outcome": "refused" + EVIL}


def _record_a_request(home: Path) -> None:
    with Database(home / "olp.db") as db:
        recorder = Recorder(db)
        recorder.record(AuditRow(
            at=time.time(), request_id="req_1", key="1", key_name="kid",
            endpoint="GET /", requested_model="smart", provider="anthropic", model="m",
            entry=None, hops=1, status=404, cache=None, stream=False, latency_ms=3,
            prompt_tokens=None, completion_tokens=None, outcome="refused"),
            [UsageDelta("anthropic", "m", requests=1, refused=1)])
        trio.run(recorder.flush)


def _hostile(monkeypatch: pytest.MonkeyPatch, reader: str) -> None:
    """``olp.accounting.<reader>`` answers its real rows with the text a guest chose: the
    store may clean text as it keeps it (ADR 0021); the command must not depend on that."""
    real = getattr(accounting, reader)

    def rows_with_hostile_text(*args: Any, **kwargs: Any) -> Any:
        answer = real(*args, **kwargs)
        rows = answer[0] if isinstance(answer, tuple) else answer
        rows[:] = [{**row, **{k: v for k, v in HOSTILE_ROW.items() if k in row}}
                   for row in rows]
        return answer

    monkeypatch.setattr(accounting, reader, rows_with_hostile_text)


def test_audit(home: Path, capsys: pytest.CaptureFixture[str],
               monkeypatch: pytest.MonkeyPatch) -> None:
    _record_a_request(home)
    _hostile(monkeypatch, "audit_page")
    out = _run(capsys, "audit")
    assert_inert(out)
    assert len(out.splitlines()) == 2  # the header and the one row, no forged one
    assert "GET:/" + SHOWN.replace(" ", ":") in out and "smart" + SHOWN in out
    [row] = [json.loads(line) for line in _run(capsys, "audit", "--json").splitlines()]
    assert {k: row[k] for k in HOSTILE_ROW} == HOSTILE_ROW


def test_usage(home: Path, capsys: pytest.CaptureFixture[str],
               monkeypatch: pytest.MonkeyPatch) -> None:
    _record_a_request(home)
    _hostile(monkeypatch, "usage_report")
    out = _run(capsys, "usage")
    assert_inert(out)
    assert len(out.splitlines()) == 3  # header, row, total
    [row] = json.loads(_run(capsys, "usage", "--json"))
    assert (row["key_name"], row["provider"], row["model"]) == \
        ("kid" + EVIL, "anthropic" + EVIL, "m" + EVIL)


def test_keys_list(home: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Key names are checked (printable only); an imported key's prefix and a provider
    allow-list written to the store are not."""
    with Database(home / "olp.db") as db:
        KeyStore(db).import_keys([ImportedKey(
            name="imported", token="ocp_" + EVIL, created_at=time.time(), origin="ocp:1",
            policy=KeyPolicy(frozenset({EVIL})))])
    out = _run(capsys, "keys", "list")
    assert_inert(out)
    assert len(out.splitlines()) == 2
    assert r"ocp_\x1b[2J\r\nFA..." in out
    [key] = json.loads(_run(capsys, "keys", "list", "--json"))
    assert (key["prefix"], key["providers"]) == ("ocp_" + EVIL[:8] + "...", [EVIL])


HEALTH: dict[str, Any] = {
    "version": "1.0" + EVIL, "uptime_s": 5,
    "providers": {
        "anthropic" + EVIL: {"running": True, "in_flight": 0, "max_concurrent": 2,
                             "jobs_started": 1, "metered": False, "risk_tier": "D" + EVIL,
                             "cooling": [{"reason": EVIL, "remaining_s": 30}]},
        "qwen": {"running": False, "problems": ["`qwen` " + EVIL]}},
    "chains": {"smart" + EVIL: {"usable": False, "reason": EVIL}}}


def test_status(home: Path, capsys: pytest.CaptureFixture[str],
                monkeypatch: pytest.MonkeyPatch) -> None:
    _answer(monkeypatch, HEALTH)
    out = _run(capsys, "status")
    assert_inert(out)
    assert f"  anthropic{SHOWN} 0/2 in flight" in out
    assert f"chain smart{SHOWN}: UNUSABLE: {SHOWN}" in out
    assert json.loads(_run(capsys, "status", "--json")) == HEALTH


def test_quota(home: Path, capsys: pytest.CaptureFixture[str],
               monkeypatch: pytest.MonkeyPatch) -> None:
    now = time.time()
    name = "local" + EVIL
    view = quota_view([name], health={"cooldowns": [
        {"provider": name, "until": now + 600, "reason": "limit" + EVIL}]},
        reported={name: {"five_hour" + EVIL: {"status": EVIL, "utilization": 0.5}}},
        soft={}, unavailable={}, figures={}, now=now)
    _answer(monkeypatch, view)
    out = _run(capsys, "quota")
    assert_inert(out)
    assert f"{name}: limit{EVIL}".replace(EVIL, SHOWN) in out
    assert json.loads(_run(capsys, "quota", "--json")) == view


CONFIG = {"providers": {
    "enabled": {"openai": False, "mistral": False, "local": True},
    "anthropic": {"binary": "/nowhere/" + EVIL},
    "local": {"kind": "openai-compatible", "base_url": "http://127.0.0.1:9/v1"}},
    "routing": {"chains": {
        "broken" + EVIL: [{"provider": "anthropic", "model": "m" + EVIL}],
        "fine" + EVIL: [{"provider": "local", "model": "m" + EVIL, "name": "e" + EVIL,
                         "metered": True}]}}}


def _configure(home: Path) -> None:
    (home / "config.json").write_text(json.dumps(CONFIG))


def test_chain_show(home: Path, capsys: pytest.CaptureFixture[str]) -> None:
    _configure(home)
    with Database(home / "olp.db") as db:  # what a stopped proxy saved
        trio.run(StateStore(db).save_async, HEALTH_STATE, {"cooldowns": [
            {"provider": "local", "until": time.time() + 600, "reason": "quota" + EVIL}]})
    out = _run(capsys, "chain", "show")
    assert_inert(out)
    assert f"  0. e{SHOWN} -> local/m{SHOWN} metered: cooling (quota{SHOWN}) for" in out
    assert f"  pruned: anthropic:m{SHOWN}: `/nowhere/{SHOWN}` not found on PATH" in out
    routes = json.loads(_run(capsys, "chain", "show", "--json"))["routes"]
    [hop] = routes["fine" + EVIL]["hops"]
    assert (hop["entry"], hop["model"]) == ("e" + EVIL, "m" + EVIL)
    assert hop["resting"][0].startswith(f"cooling (quota{EVIL}) for ")
    assert routes["broken" + EVIL]["pruned"] == \
        [f"anthropic:m{EVIL}: `/nowhere/{EVIL}` not found on PATH"]


def test_doctor(home: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """``olp doctor`` has no ``--json``: only its report for a person is checked."""
    _configure(home)
    assert main(["doctor"]) == 1  # the broken chain
    out = capsys.readouterr().out
    assert_inert(out)
    assert f"  problem:     `/nowhere/{SHOWN}` not found on PATH" in out
    assert f"chain broken{SHOWN}: PROBLEM no usable entry" in out
