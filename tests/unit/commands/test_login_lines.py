"""How ``olp status`` and ``olp doctor`` word a login OLP keeps (issue #41): its time left and
next refresh, a failing refresh, and an expired login with the fix to run."""

from __future__ import annotations

from typing import Any

from olp.commands.doctor import kept_login_line
from olp.commands.status import login_line
from olp.runtime.provider_actors import AccountReport

OK: dict[str, Any] = {"state": "ok", "cli": "claude", "file": "/h/.claude/.credentials.json",
                      "refreshes": 2, "refreshable": True, "expires_in_s": 27_600,
                      "refresh_in_s": 26_640}
EXPIRED: dict[str, Any] = {
    "state": "expired", "cli": "codex", "file": "/h/.codex/auth.json", "refreshes": 0,
    "refreshable": False, "expires_in_s": -10,
    "problem": "the refresh token was refused (refresh_token_reused): log in again with "
               "`olp login openai --account alice`", "fix": "olp login openai --account alice"}


def test_status_says_when_the_token_ends_and_when_olp_refreshes_it() -> None:
    assert login_line(OK) == ("login ok: token ends in 7h40m, refreshed by OLP in 7h24m "
                              "(2 refreshes since start)")
    failing = {**OK, "state": "failing", "problem": "the token endpoint answered HTTP 503"}
    assert login_line(failing).startswith(
        "login REFRESH FAILING (the token endpoint answered HTTP 503): token ends in 7h40m")


def test_status_names_an_expired_login_and_its_fix() -> None:
    assert login_line(EXPIRED) == (
        "login EXPIRED: the refresh token was refused (refresh_token_reused): log in again with "
        "`olp login openai --account alice` -> run: olp login openai --account alice")


def test_doctor_says_what_olp_does_with_the_login() -> None:
    owner = AccountReport("default", None, True, credentials=True, login=OK)
    assert kept_login_line(owner) == (
        "kept by OLP (claude login in /h/.claude/.credentials.json): its token ends in 7h40m; "
        "OLP refreshes it in 7h24m; spawns get only its access token")
    alice = AccountReport("alice", "/h", False, expired=True, login=EXPIRED)
    assert kept_login_line(alice).startswith("alice: EXPIRED: the refresh token was refused")
    assert kept_login_line(alice).endswith("-> run: olp login openai --account alice")
    due = AccountReport("default", None, True, login={**OK, "expires_in_s": -5,
                                                      "refresh_in_s": 0})
    assert kept_login_line(due).startswith("kept by OLP (claude login in")
    assert "its token has ended; OLP refreshes it at start" in kept_login_line(due)
