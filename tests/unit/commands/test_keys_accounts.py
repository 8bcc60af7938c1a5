"""``olp keys create|update --accounts`` (issue #30): a key bound to accounts the config
declares, shown by ``keys list`` (text and ``--json``), replaced and cleared; an unknown
provider or account, a malformed pair, or an account of an excluded provider is a usage
error naming what is known."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from olp.commands.main import main
from olp.store import Database, KeyStore

CONFIG = {"providers": {"anthropic": {"accounts": {
    "alice": {}, "alice-work": {"serves": "*"}}}}}


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    for name in ("OLP_OWNER_TOKEN", "OLP_PORT", "OLP_BIND", "OLP_LOG_LEVEL"):
        monkeypatch.delenv(name, raising=False)
    home = tmp_path / "olp"
    home.mkdir()
    (home / "config.json").write_text(json.dumps(CONFIG))
    monkeypatch.setenv("OLP_HOME", str(home))
    return home


def _json(capsys: pytest.CaptureFixture[str], *args: str) -> object:
    assert main([*args, "--json"]) == 0
    return json.loads(capsys.readouterr().out)


def _stored(home: Path) -> tuple[tuple[str, str], ...]:
    with Database(home / "olp.db") as db:
        [record] = KeyStore(db).list()
    return record.policy.accounts


def test_create_binds_in_order_and_says_so(home: Path,
                                          capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["keys", "create", "alice", "--accounts",
                 "anthropic:alice-work, anthropic:alice,openai:default"]) == 0
    out = capsys.readouterr().out
    assert ("Created guest key 1 (alice), bound to accounts "
            "anthropic:alice-work,anthropic:alice,openai:default:") in out
    assert _stored(home) == (("anthropic", "alice-work"), ("anthropic", "alice"),
                             ("openai", "default"))


def test_create_without_accounts_has_no_binding(home: Path,
                                                capsys: pytest.CaptureFixture[str]) -> None:
    made = _json(capsys, "keys", "create", "bob")
    assert isinstance(made, dict) and made["accounts"] == []
    assert main(["keys", "create", "carol"]) == 0
    assert "Created guest key 2 (carol):" in capsys.readouterr().out


def test_list_shows_the_binding(home: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["keys", "create", "alice", "--accounts", "anthropic:alice"]) == 0
    assert main(["keys", "create", "bob"]) == 0
    capsys.readouterr()
    assert main(["keys", "list"]) == 0
    header, alice, bob = capsys.readouterr().out.splitlines()
    assert header.split()[4:7] == ["PROVIDERS", "ACCOUNTS", "LIMITS"]
    assert alice.split()[4:7] == ["all", "anthropic:alice", "none"]
    assert bob.split()[4:7] == ["all", "-", "none"]
    listed = _json(capsys, "keys", "list")
    assert isinstance(listed, list)
    assert [k["accounts"] for k in listed] == [["anthropic:alice"], []]


def test_update_replaces_keeps_and_clears(home: Path,
                                          capsys: pytest.CaptureFixture[str]) -> None:
    made = _json(capsys, "keys", "create", "alice", "--accounts", "anthropic:alice")
    assert isinstance(made, dict) and made["accounts"] == ["anthropic:alice"]
    updated = _json(capsys, "keys", "update", "alice", "--accounts",
                    "anthropic:alice-work,anthropic:alice")
    assert isinstance(updated, dict)
    assert updated["accounts"] == ["anthropic:alice-work", "anthropic:alice"]
    assert main(["keys", "update", "alice", "--per-day", "9"]) == 0  # kept
    assert ("Updated key 1 (alice): providers all, limits 9/day, accounts "
            "anthropic:alice-work,anthropic:alice.") in capsys.readouterr().out
    assert main(["keys", "update", "1", "--accounts", ""]) == 0
    assert "limits 9/day, accounts none." in capsys.readouterr().out
    assert _stored(home) == ()


@pytest.mark.parametrize(("args", "message"), [
    (["--accounts", "anthropic:bob"],
     "anthropic has no account 'bob' (anthropic has accounts: default, alice, alice-work)"),
    (["--accounts", "openai:alice"], "openai has accounts: default"),
    (["--accounts", "nobody:alice"], "nobody is not a provider (known: anthropic, "),
    (["--accounts", "anthropic"], "is not PROVIDER:ACCOUNT"),
    (["--accounts", "anthropic:Alice"], "is not PROVIDER:ACCOUNT"),
    (["--providers", "openai", "--accounts", "anthropic:alice"],
     "anthropic:alice is an account of anthropic, which --providers excludes"),
])
@pytest.mark.parametrize("command", ["create", "update"])
def test_bad_accounts_are_usage_errors(home: Path, capsys: pytest.CaptureFixture[str],
                                       command: str, args: list[str], message: str) -> None:
    assert main(["keys", "create", "x"]) == 0
    capsys.readouterr()
    assert main(["keys", command, "x" if command == "update" else "y", *args]) == 2
    err = capsys.readouterr().err
    assert "configuration error: --accounts: " in err and message in err
    with Database(home / "olp.db") as db:
        assert [k.name for k in KeyStore(db).list()] == ["x"]
        assert KeyStore(db).list()[0].policy.accounts == ()


def test_an_allow_list_that_would_exclude_a_bound_provider_is_refused(
        home: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["keys", "create", "alice", "--accounts", "anthropic:alice"]) == 0
    capsys.readouterr()
    assert main(["keys", "update", "alice", "--providers", "openai"]) == 2
    assert "anthropic:alice: the key's providers exclude" in capsys.readouterr().err
    assert main(["keys", "update", "alice", "--providers", "openai", "--accounts", ""]) == 0
    capsys.readouterr()
    assert _stored(home) == ()
    assert main(["keys", "update", "alice", "--all-providers", "--accounts",
                 "anthropic:alice"]) == 0
    assert _stored(home) == (("anthropic", "alice"),)


def test_printed_text_is_inert(home: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["keys", "create", "x", "--accounts", "anthropic:alice\x1b[2J"]) == 2
    err = capsys.readouterr().err
    assert "\x1b" not in err and "\\x1b" in err
