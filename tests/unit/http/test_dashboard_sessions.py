"""Dashboard sessions: random cookie values, an expiry, a bound on how many live at once."""

from __future__ import annotations

from olp.http._dashboard import MAX_SESSIONS, Sessions


def test_a_session_expires_and_is_then_forgotten() -> None:
    now = [1000.0]
    sessions = Sessions(ttl_s=60, clock=lambda: now[0])
    token, session = sessions.create("owner")
    assert len(token) >= 40 and len(session.csrf) >= 30 and token != session.csrf
    assert sessions.get(token) is session
    now[0] += 59
    assert sessions.get(token) is session
    now[0] += 2
    assert sessions.get(token) is None and sessions.get(token) is None
    assert sessions.get(None) is None and sessions.get("") is None


def test_logging_out_ends_one_session_and_old_ones_make_room() -> None:
    now = [0.0]
    sessions = Sessions(ttl_s=3600, clock=lambda: now[0])
    tokens = []
    for _ in range(MAX_SESSIONS + 3):
        now[0] += 1
        tokens.append(sessions.create("owner")[0])
    assert sessions.get(tokens[0]) is None  # the oldest made room
    assert sessions.get(tokens[-1]) is not None
    sessions.end(tokens[-1])
    assert sessions.get(tokens[-1]) is None
    assert sessions.get(tokens[-2]) is not None
