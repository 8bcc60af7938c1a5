"""The hot path's shortcuts give exactly what the long way gives (ADR 0028).

A header value that needs no encoding is returned as it is; the UTC day and the limit
windows are computed once a day; the ``Host`` rule remembers the last verdicts. Each is
checked against the long way over many generated inputs, edge cases included.
"""

from __future__ import annotations

import datetime as dt
import random
from urllib.parse import quote

import pytest

from olp.accounting._windows import day_of, window_start
from olp.http import _chat
from olp.http._chat import header_list, header_value
from olp.http._host_check import REMEMBERED, HostRule

ALPHABET = [chr(c) for c in range(0x80)] + ["é", "\u2026", "模", "\U0001f600", "\ud800"]


def encode_the_long_way(text: str, cap: int, safe: frozenset[str]) -> str:
    """The encoder without its shortcut: character by character."""
    out: list[str] = []
    size = fits = 0
    for c in text:
        piece = c if c in safe else quote(c, safe="", errors="surrogatepass")
        size += len(piece)
        if size > cap:
            return "".join(out[:fits]) + _chat.CUT
        out.append(piece)
        if size + len(_chat.CUT) <= cap:
            fits = len(out)
    return "".join(out)


def generated_texts(seed: int, count: int) -> list[str]:
    rng = random.Random(seed)
    texts = ["", "claude-sonnet-4-6", "a b", "50%", "a,b", "x" * 256, "x" * 257, "é" * 90]
    for _ in range(count):
        text = "".join(rng.choice(ALPHABET) for _ in range(rng.randint(0, 300)))
        if rng.random() < 0.6:  # mostly the usual case: visible ASCII
            text = "".join(c for c in text if "!" <= c <= "~")
        texts.append(text)
    return texts


@pytest.mark.parametrize("cap", [256, 12, 1024])
def test_a_value_is_encoded_as_the_long_way_would(cap: int) -> None:
    for text in generated_texts(cap, 3000):
        assert header_value(text, cap) == encode_the_long_way(text, cap, _chat._VISIBLE)


def list_the_long_way(items: list[str], cap: int = _chat.LIST_CAP) -> str:
    """:func:`header_list` over :func:`encode_the_long_way`."""
    out: list[str] = []
    size = fits = 0
    for item in items:
        piece = encode_the_long_way(item, _chat.VALUE_CAP, _chat._IN_LIST)
        size += len(piece) + (1 if out else 0)
        if size > cap:
            return ",".join([*out[:fits], _chat.CUT])
        out.append(piece)
        if size + 1 + len(_chat.CUT) <= cap:
            fits = len(out)
    return ",".join(out)


def test_a_list_is_encoded_as_the_long_way_would() -> None:
    texts = generated_texts(7, 2000)
    for i in range(0, len(texts) - 3, 3):
        assert header_list(texts[i:i + 3]) == list_the_long_way(texts[i:i + 3])


def test_the_day_and_the_windows_match_the_calendar() -> None:
    rng = random.Random(31)
    stamps = [0.0, -0.5, 86_399.999, 86_400.0, 951_782_400.0, 1_796_022_526.0,
              *(rng.uniform(-2e9, 5e9) for _ in range(20_000))]
    for ts in stamps:
        day = dt.datetime.fromtimestamp(ts, dt.UTC).date()
        assert day_of(ts) == day.isoformat()
        assert window_start("day", ts) == day
        assert window_start("week", ts) == day - dt.timedelta(days=day.weekday())
        assert window_start("month", ts) == day.replace(day=1)


def test_the_host_rule_remembers_verdicts_without_changing_them() -> None:
    rule, fresh = HostRule([".example.lan", "box"]), HostRule([".example.lan", "box"])
    hosts = ["localhost:8080", "127.0.0.1", "[::1]:80", "box", "a.example.lan", "evil.com",
             "example.lan.", "bad:port", "", "[::1", *(f"h{i}.example.com" for i in range(200))]
    for _ in range(2):  # the second round answers from what was remembered, or after a reset
        for host in hosts:
            assert rule.allows(host) == HostRule([".example.lan", "box"]).allows(host)
    assert len(rule._seen) <= REMEMBERED
    assert fresh.allows(None) and not fresh.allows("evil.com")
