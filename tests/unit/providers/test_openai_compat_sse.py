"""The tolerant SSE decoder: spec parsing, tolerances, and split-invariance (hypothesis)."""

from __future__ import annotations

import random

import pytest
from hypothesis import given
from hypothesis import strategies as st

from olp.providers.openai_compat import SSEDecoder, SSEEvent, SSETooLarge
from olp.providers.openai_compat._sse import _LINE_END


def decode_all(*chunks: bytes, max_event_bytes: int = 1 << 20) -> list[SSEEvent]:
    decoder = SSEDecoder(max_event_bytes=max_event_bytes)
    out: list[SSEEvent] = []
    for chunk in chunks:
        out += decoder.feed(chunk)
    return out + decoder.close()


def test_openai_stream() -> None:
    stream = (b'data: {"a": 1}\n\n'
              b": keepalive\n\n"
              b'data: {"b": 2}\n\n'
              b"data: [DONE]\n\n")
    decoder = SSEDecoder()
    assert decoder.feed(stream) == [SSEEvent('{"a": 1}'), SSEEvent('{"b": 2}'),
                                    SSEEvent("[DONE]")]
    assert decoder.close() == []
    assert decoder.comments == 1


@pytest.mark.parametrize("nl", [b"\n", b"\r\n", b"\r"])
def test_line_ends(nl: bytes) -> None:
    stream = b"event: delta" + nl + b"data: one" + nl + b"data: two" + nl + nl + b"data:x" + nl + nl
    assert decode_all(stream) == [SSEEvent("one\ntwo", "delta"), SSEEvent("x")]


def test_cr_then_lf_in_the_next_chunk_is_one_line_end() -> None:
    assert decode_all(b"data: a\r", b"\ndata: b\r", b"\n\r", b"\n") == [SSEEvent("a\nb")]


def test_cr_then_cr_is_two_line_ends() -> None:
    assert decode_all(b"data: a\r", b"\rdata: b\r\r") == [SSEEvent("a"), SSEEvent("b")]


def test_fields_and_spaces() -> None:
    stream = (b"id: 7\nretry: 1000\nunknown: field\ndata\ndata:  two spaces\n"
              b"event:custom\n\n")
    # "data" with no colon is a data line with an empty value; only one space is stripped
    assert decode_all(stream) == [SSEEvent("\n two spaces", "custom")]


def test_event_name_resets_after_dispatch() -> None:
    assert decode_all(b"event: error\ndata: 1\n\ndata: 2\n\n") == [
        SSEEvent("1", "error"), SSEEvent("2")]


def test_blank_lines_without_data_dispatch_nothing() -> None:
    assert decode_all(b"\n\n\nevent: ping\n\n: c\n\n") == []


def test_bom_is_stripped_once() -> None:
    bom = "\ufeff".encode()
    assert decode_all(bom[:1], bom[1:] + b"data: x\n\n") == [SSEEvent("x")]


def test_eof_delivers_a_trailing_event_without_its_blank_line() -> None:
    assert decode_all(b'data: {"x": 1}\n') == [SSEEvent('{"x": 1}')]
    assert decode_all(b'data: {"x": 1}') == [SSEEvent('{"x": 1}')]


def test_invalid_utf8_is_replaced() -> None:
    assert decode_all(b"data: \xff\xfe ok\n\n") == [SSEEvent("\ufffd\ufffd ok")]


def test_multibyte_split_across_chunks() -> None:
    data = "data: héllo ✓\n\n".encode()
    assert decode_all(data[:8], data[8:9], data[9:]) == [SSEEvent("héllo ✓")]


def test_too_large_line_without_end() -> None:
    decoder = SSEDecoder(max_event_bytes=100)
    decoder.feed(b"data: " + b"x" * 50)
    with pytest.raises(SSETooLarge):
        decoder.feed(b"x" * 60)


def test_too_large_event_over_many_lines() -> None:
    decoder = SSEDecoder(max_event_bytes=100)
    with pytest.raises(SSETooLarge):
        decoder.feed(b"data: xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx\n" * 5)


# --- split invariance ---

_text = st.text(st.characters(exclude_categories=["Cs"], exclude_characters="\r\n"),
                max_size=30)
_event = st.tuples(st.sampled_from(["", "message", "error", "delta"]),
                   st.lists(_text, min_size=1, max_size=3),
                   st.lists(_text, max_size=2))  # comments before the event


@st.composite
def streams(draw: st.DrawFn) -> tuple[bytes, list[SSEEvent]]:
    nl = draw(st.sampled_from(["\n", "\r\n", "\r"]))
    events = draw(st.lists(_event, max_size=8))
    out, expected = [], []
    for name, data_lines, comments in events:
        for c in comments:
            out.append(f":{c}{nl}")
        if name:
            out.append(f"event: {name}{nl}")
        for line in data_lines:
            out.append(f"data: {line}{nl}")
        out.append(nl)
        expected.append(SSEEvent("\n".join(data_lines), name or "message"))
    return "".join(out).encode(), expected


@given(streams(), st.lists(st.integers(min_value=0, max_value=10_000), max_size=20))
def test_any_byte_split_gives_the_same_events(
        case: tuple[bytes, list[SSEEvent]], cuts: list[int]) -> None:
    stream, expected = case
    points = sorted({c % (len(stream) + 1) for c in cuts})
    chunks = [stream[a:b] for a, b in zip([0, *points], [*points, len(stream)], strict=True)]
    assert decode_all(stream) == expected
    assert decode_all(*chunks) == expected
    assert decode_all(*(stream[i:i + 1] for i in range(len(stream)))) == expected


@given(st.binary(max_size=300), st.lists(st.integers(min_value=0, max_value=300), max_size=10))
def test_garbage_never_crashes_and_splits_do_not_matter(data: bytes, cuts: list[int]) -> None:
    points = sorted({c % (len(data) + 1) for c in cuts})
    chunks = [data[a:b] for a, b in zip([0, *points], [*points, len(data)], strict=True)]
    assert decode_all(*chunks) == decode_all(data)


class _RegexOnly(SSEDecoder):
    """The decoder without its shortcut for LF-only input: every line end found by the
    regular expression, as before ADR 0028."""

    def feed(self, chunk: bytes) -> list[SSEEvent]:
        if self._skip_lf and chunk:
            self._skip_lf = False
            if chunk[:1] == b"\n":
                chunk = chunk[1:]
        buf = self._buf
        buf += chunk
        out: list[SSEEvent] = []
        pos = 0
        while (m := _LINE_END.search(buf, pos)) is not None:
            end = m.start()
            line = bytes(buf[pos:end])
            if buf[end] == 0x0D:
                if end + 1 < len(buf):
                    pos = end + 2 if buf[end + 1] == 0x0A else end + 1
                else:
                    pos = end + 1
                    self._skip_lf = True
            else:
                pos = end + 1
            self._line(line, out)
        del buf[:pos]
        return out


def test_the_lf_shortcut_decodes_as_the_line_by_line_way_over_any_split() -> None:
    rng = random.Random(28)
    pieces = [b'data: {"a":1}\n\n', b"data: x\r\n\r\n", b": keepalive\n",
              b"event: e\ndata: y\n\n", b"data: z\rdata: w\r\r", b"\xef\xbb\xbfdata: bom\n\n",
              b"data:\n\n", b"id: 3\nretry: 1\n\n", b"data: \xff\xfe\n\n"]
    for _ in range(2000):
        stream = b"".join(rng.choice(pieces) for _ in range(rng.randint(1, 12)))
        if rng.random() < 0.5:
            stream = stream.replace(b"\r", b"")  # the shortcut's case
        cuts = sorted(rng.sample(range(len(stream) + 1), min(len(stream), rng.randint(0, 6))))
        chunks = [stream[a:b] for a, b in zip([0, *cuts], [*cuts, len(stream)], strict=True)]
        fast, slow = SSEDecoder(), _RegexOnly()
        got = [e for c in chunks for e in fast.feed(c)] + fast.close()
        want = [e for c in chunks for e in slow.feed(c)] + slow.close()
        assert got == want and fast.comments == slow.comments
