"""The X-OLP-Fallback-Detail header value: tuple schema, ASCII, the 4096-byte cap."""

from __future__ import annotations

import json

from hypothesis import given
from hypothesis import strategies as st

from olp.engine import HopRecord, detail_header


def record(i: int, message: str = "boom") -> HopRecord:
    return HopRecord(i, "anthropic", "claude-sonnet-4-6", "RATE_LIMITED", "rate_limited",
                     message, "hard", 12.0)


def test_tuple_schema() -> None:
    [item] = json.loads(detail_header([record(0)]))
    assert item == {"hop": 0, "provider": "anthropic", "account": "default",
                    "model": "claude-sonnet-4-6", "code": "RATE_LIMITED",
                    "category": "rate_limited", "error_message": "boom",
                    "trigger_type": "hard"}


def test_messages_are_cut_at_200_chars_with_an_ellipsis() -> None:
    [item] = json.loads(detail_header([record(0, "x" * 500)]))
    assert len(item["error_message"]) == 200 and item["error_message"].endswith("\u2026")


@given(st.lists(st.text(max_size=300), min_size=1, max_size=60))
def test_always_ascii_under_the_cap_and_round_trips(messages: list[str]) -> None:
    records = [record(i, m) for i, m in enumerate(messages)]
    value = detail_header(records)
    assert value.isascii() and len(value.encode()) <= 4096
    items = json.loads(value)
    if items[-1].get("truncated"):
        kept = items[:-1]
        assert items[-1]["omitted_hops"] == len(records) - len(kept)
    else:
        kept = items
        assert len(kept) == len(records)
    for item, rec in zip(kept, records, strict=False):
        assert item["error_message"] == rec.as_tuple()["error_message"]


def test_truncation_drops_tail_tuples_for_a_sentinel() -> None:
    items = json.loads(detail_header([record(i, "\u00e9" * 200) for i in range(40)]))
    assert items[-1]["truncated"] is True
    assert [i["hop"] for i in items[:-1]] == list(range(len(items) - 1))
    assert items[-1]["omitted_hops"] == 40 - (len(items) - 1)
