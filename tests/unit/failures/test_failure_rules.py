"""The shared failure helpers: message cutting, reset-time parsing and the rule tables."""

from __future__ import annotations

import email.utils
import re
from dataclasses import dataclass
from datetime import UTC, timedelta, timezone
from types import ModuleType

import pytest

from olp.failures import (
    MESSAGE_LIMIT,
    Code,
    Rule,
    always,
    classify_by,
    clock_reset,
    cut,
    epoch_delta,
    first_match,
    has_any,
    number,
    parse_duration,
    parse_reset,
    parse_retry_after,
    seconds_until,
    sum_durations,
    unit_seconds,
    zone_named,
)
from olp.providers.anthropic import _classify as anthropic
from olp.providers.codex import _classify as codex
from olp.providers.openai_compat import _classify as openai_compat
from olp.providers.vibe import _classify as vibe

NOW = 1767225600.0  # 2026-01-01T00:00:00Z, a Thursday

# --- text ------------------------------------------------------------------------------------


def test_cut_keeps_a_short_text_on_one_line() -> None:
    assert cut("  hello  ") == "hello"
    assert cut("a\n b\tc\r\n") == "a b c"
    assert cut("") == ""
    assert cut(" \n ") == ""


def test_cut_bounds_the_length_with_an_ellipsis() -> None:
    assert MESSAGE_LIMIT == 300
    assert cut("x" * 300) == "x" * 300
    assert cut("x" * 301) == "x" * 299 + "…"
    assert len(cut("y" * 5000)) == 300
    assert cut("abcdef", 4) == "abc…"


def test_has_any() -> None:
    assert has_any("you hit your usage limit", ("rate limit", "usage limit"))
    assert not has_any("all fine", ("rate limit", "usage limit"))
    assert not has_any("anything", ())
    assert not has_any("USAGE LIMIT", ("usage limit",))  # callers lower-case the text


# --- rules -----------------------------------------------------------------------------------


@dataclass(frozen=True)
class Facts:
    text: str
    status: int | None = None


calls: list[str] = []


def _delay(f: Facts) -> float | None:
    calls.append(f.text)
    return 42.0


TABLE: tuple[Rule[Facts], ...] = (
    Rule(Code.AUTH_MISSING, "auth", lambda f: "login" in f.text),
    Rule(Code.RATE_LIMITED, "rate_limited", lambda f: f.status == 429, retry_after=_delay),
    Rule(Code.UPSTREAM_CLIENT_ERROR, "client_error", lambda f: "bad" in f.text,
         status=lambda f: f.status or 400),
    Rule(Code.UPSTREAM_5XX, "unavailable", lambda f: "login" in f.text or "down" in f.text),
)
DEFAULT: Rule[Facts] = Rule(Code.UPSTREAM_ERROR, "unknown", always)


def run(facts: Facts, message: str = "msg") -> tuple[str, str, int | None, float | None, str]:
    error = classify_by(TABLE, facts, default=DEFAULT, message=message,
                        fallback=lambda code: f"fallback {code}", status=facts.status)
    return error.code, error.category, error.status, error.retry_after_s, error.message


def test_the_first_matching_rule_wins() -> None:
    assert first_match(TABLE, Facts("please login, server down"), default=DEFAULT) is TABLE[0]
    assert first_match(TABLE, Facts("server down"), default=DEFAULT) is TABLE[3]
    assert first_match(TABLE, Facts("quiet"), default=DEFAULT) is DEFAULT
    assert first_match((), Facts("x"), default=DEFAULT) is DEFAULT


def test_classify_by_builds_the_error_of_the_rule() -> None:
    assert run(Facts("please login", 500)) == ("AUTH_MISSING", "auth", 500, None, "msg")
    assert run(Facts("quiet")) == ("UPSTREAM_ERROR", "unknown", None, None, "msg")


def test_the_rule_category_wins_over_the_default_category() -> None:
    table = (Rule(Code.CONFIG_ERROR, "unknown", always),)
    error = classify_by(table, Facts("x"), default=DEFAULT, message="m", fallback=str)
    assert (error.code, error.category) == ("CONFIG_ERROR", "unknown")


def test_retry_after_is_read_only_for_the_matching_rule() -> None:
    calls.clear()
    assert run(Facts("login", 429))[3] is None
    assert calls == []
    assert run(Facts("slow", 429))[3] == 42.0
    assert calls == ["slow"]


def test_a_rule_may_override_the_status() -> None:
    assert run(Facts("bad request"))[2] == 400
    assert run(Facts("bad request", 422))[2] == 422


def test_message_is_cut_and_falls_back_by_code() -> None:
    assert run(Facts("x"), message="a\nb")[4] == "a b"
    assert len(run(Facts("x"), message="z" * 999)[4]) == 300
    assert run(Facts("down"), message="  ")[4] == "fallback UPSTREAM_5XX"


# --- every provider's docstring lists its table ----------------------------------------------

_ITEM = re.compile(r"^(\d+)\. (.*?)(?=^\d+\. |\n\n|\Z)", re.MULTILINE | re.DOTALL)


@pytest.mark.parametrize("module", [anthropic, codex, vibe, openai_compat],
                         ids=lambda m: m.__name__.split(".")[2])
def test_the_docstring_lists_the_rule_table(module: ModuleType) -> None:
    items = [(int(n), " ".join(text.split())) for n, text in _ITEM.findall(module.__doc__)]
    rules = [*module.RULES, module._OTHERWISE]
    assert [n for n, _ in items] == list(range(1, len(rules) + 1))
    for (n, text), rule in zip(items, rules, strict=True):
        assert f"``{rule.category}`` / ``{rule.code}``" in text, f"rule {n}: {text}"
    assert module._OTHERWISE.code == Code.UPSTREAM_ERROR


# --- numbers, epochs and headers -------------------------------------------------------------


@pytest.mark.parametrize(("value", "seconds"), [
    (3, 3.0), (2.5, 2.5), ("7", 7.0), (" 1.5 ", 1.5), (-3, 0.0), ("inf", None),
    ("nan", None), (float("inf"), None), (True, None), ("soon", None), (None, None),
    ([1], None),
])
def test_number(value: object, seconds: float | None) -> None:
    assert number(value) == seconds


def test_epochs() -> None:
    assert seconds_until(NOW + 60, NOW) == 60.0
    assert seconds_until(NOW - 60, NOW) == 0.0
    assert epoch_delta((NOW + 60) * 1000, NOW) == 60.0  # milliseconds
    assert epoch_delta(NOW + 90, NOW) == 90.0  # seconds
    assert epoch_delta(NOW - 90, NOW) == 0.0
    assert epoch_delta(30, NOW) == 30.0  # already a delay


def test_parse_retry_after() -> None:
    assert parse_retry_after("3", NOW) == 3.0
    assert parse_retry_after(email.utils.formatdate(NOW + 30, usegmt=True), NOW) == 30.0
    assert parse_retry_after(email.utils.formatdate(NOW - 30, usegmt=True), NOW) == 0.0
    assert parse_retry_after("soon", NOW) is None
    assert parse_retry_after(None, NOW) is None


# --- durations -------------------------------------------------------------------------------


@pytest.mark.parametrize(("unit", "seconds"), [
    ("ms", 0.001), ("s", 1.0), ("secs", 1.0), ("Seconds", 1.0), ("m", 60.0), ("mins", 60.0),
    ("minute", 60.0), ("h", 3600.0), ("hrs", 3600.0), ("HOURS", 3600.0), ("d", 86400.0),
    ("days", 86400.0),
])
def test_unit_seconds(unit: str, seconds: float) -> None:
    assert unit_seconds(unit) == seconds


@pytest.mark.parametrize(("text", "seconds"), [
    ("2 hours 5 minutes", 7500.0), ("2 hours and 5 minutes", 7500.0), ("1d 3h", 97200.0),
    ("250ms", 0.25), ("20s.", 20.0), ("1.5 hrs", 5400.0), ("later", None), ("5 seats", None),
])
def test_sum_durations(text: str, seconds: float | None) -> None:
    assert sum_durations(text) == seconds


@pytest.mark.parametrize(("raw", "seconds"), [
    ("20ms", 0.02), ("1.5s", 1.5), ("6m0s", 360.0), ("1h2m3s", 3723.0), ("7", 7.0),
    ("20seconds", 20.0), ("nonsense", None), ("5 s", None), ("1h x", None), ("-3", 0.0),
    ("inf", None), ("", None),
])
def test_parse_duration_is_strict(raw: str, seconds: float | None) -> None:
    assert parse_duration(raw) == seconds


# --- clock times and prose -------------------------------------------------------------------

_CLOCK = re.compile(r"(?:(?P<mon>[a-z]{3}) (?P<day>\d+) (?:(?P<year>\d{4}) )?)?"
                    r"(?P<hour>\d+)(?::(?P<min>\d\d))?(?P<ampm>am|pm)?(?: (?P<tz>\S+))?")


def clock(text: str, tz: timezone | None = UTC) -> float | None:
    m = _CLOCK.fullmatch(text)
    assert m is not None
    return clock_reset(m, NOW, tz)


@pytest.mark.parametrize(("text", "seconds"), [
    ("3pm", 15 * 3600.0), ("3:30pm", 15.5 * 3600.0), ("12am", 86400.0),  # the next midnight
    ("12pm", 12 * 3600.0), ("00:00", 86400.0), ("08:01", 8 * 3600.0 + 60),
    ("1am Europe/Paris", 86400.0),  # 00:00Z is 01:00 in Paris: now is not "next", tomorrow is
    ("2am Europe/Paris", 3600.0), ("2am Nowhere/Atlantis", 2 * 3600.0),  # unknown: UTC
    ("jan 2 10am", 34 * 3600.0), ("dec 31 1am", 364 * 86400.0 + 3600.0),  # next such date
    ("dec 31 2025 1am", 0.0),  # a dated reset in the past
    ("3", None), ("13pm", None), ("0am", None), ("24:00", None), ("10:60", None),
    ("feb 30 1am", None),
])
def test_clock_reset(text: str, seconds: float | None) -> None:
    assert clock(text) == seconds


def test_clock_reset_zones() -> None:
    plus_one = timezone(timedelta(hours=1))  # 00:00Z is 01:00 there
    assert clock("2am", plus_one) == 3600.0
    assert clock("2am UTC", plus_one) == 2 * 3600.0  # a named zone wins
    assert zone_named(None) is None
    assert zone_named("gmt") is UTC and zone_named("Z") is UTC
    assert zone_named("Not/AZone") is UTC
    assert str(zone_named("Europe/Paris")) == "Europe/Paris"


@pytest.mark.parametrize(("text", "seconds"), [
    ("usage limit reached|1767229200", 3600.0),
    ("usage limit reached|1767000000", 0.0),
    ("try again in 2 hours", 7200.0),
    ("resets after 2 hrs and 30 mins", 9000.0),
    ("resets in 45 minutes", 2700.0),
    ("resets at 3pm (UTC)", 15 * 3600.0),
    ("resets Jan 2, 10am (UTC)", 34 * 3600.0),
    ("resets in 1 day", None),  # days are not part of this phrasing
    ("resets 3 (UTC)", None),
    ("no reset here", None),
])
def test_parse_reset_prose(text: str, seconds: float | None) -> None:
    assert parse_reset(text, now=NOW) == seconds


def test_parse_reset_prose_uses_tz_without_a_named_zone() -> None:
    plus_one = timezone(timedelta(hours=1))
    assert parse_reset("resets at 2am", now=NOW, tz=plus_one) == 3600.0
    assert parse_reset("resets at 2am (UTC)", now=NOW, tz=plus_one) == 2 * 3600.0
