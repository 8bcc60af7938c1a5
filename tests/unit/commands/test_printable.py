"""``printable``: stored and client-supplied text made inert for a terminal (issue #29)."""

from __future__ import annotations

import pytest

from olp.commands._tables import printable


@pytest.mark.parametrize(("raw", "shown"), [
    ("\x00\x07\x08", r"\x00\x07\x08"),
    ("a\tb", r"a\tb"),
    ("row\r\nFAKE ROW", r"row\r\nFAKE ROW"),
    ("\x1b[2J\x1b[31mPWNED", r"\x1b[2J\x1b[31mPWNED"),
    ("\x1b]0;title\x07", r"\x1b]0;title\x07"),  # set the window title
    ("\x1f", r"\x1f"),
    ("del\x7f", r"del\x7f"),
    ("\x80\x9b2J\x9d", r"\x80\x9b2J\x9d"),  # C1, CSI among them
    ("abc\u202edcba", r"abc\u202edcba"),  # right-to-left override
    ("\u202a\u202b\u202c\u202d", r"\u202a\u202b\u202c\u202d"),
    ("\u2066\u2067\u2068\u2069", r"\u2066\u2067\u2068\u2069"),
    ("\u200e\u200f\u061c", r"\u200e\u200f\u061c"),
])
def test_control_characters_are_shown_escaped(raw: str, shown: str) -> None:
    assert printable(raw) == shown


@pytest.mark.parametrize("text", [
    "", "plain ascii: POST:/v1/chat/completions", "café é", "日本語のモデル", "emoji 🚀👍🏽",
    "Ünïcödé ‑ ‒ – — « » ¡ ¿", "\u00a0non-breaking", "a\\x1b stays as typed", "ﺏ عربي",
])
def test_ordinary_text_is_unchanged(text: str) -> None:
    assert printable(text) == text


def test_nothing_raw_survives_in_the_whole_dangerous_range() -> None:
    dangerous = [*range(0x20), *range(0x7f, 0xa0), 0x061c, 0x200e, 0x200f,
                 *range(0x202a, 0x202f), *range(0x2066, 0x206a)]
    shown = printable("".join(map(chr, dangerous)))
    assert shown.isascii() and shown.isprintable()
    assert shown.count("\\") == len(dangerous)
