"""The lingering close (olp.http._linger), with a fake ASGI server on MockClock: an answer
given before the request body has ended holds back its last message until that body has
ended, the client has gone, the byte cap is read or the time bound is over; at exact
virtual times."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

import pytest
import trio
import trio.testing

from olp.http._linger import LINGER_MAX_S, linger_on_early_answer

Message = dict[str, Any]
App = Callable[[Any, Any, Any], Awaitable[None]]

ANSWER: list[Message] = [
    {"type": "http.response.start", "status": 413, "headers": [(b"connection", b"close")]},
    {"type": "http.response.body", "body": b"too large", "more_body": False}]


def scope(headers: list[tuple[bytes, bytes]]) -> Message:
    return {"type": "http", "method": "POST", "path": "/v1/chat/completions",
            "headers": headers}


def chunk(data: bytes, more: bool = True) -> Message:
    return {"type": "http.request", "body": data, "more_body": more}


async def answer_at_once(scope: Any, receive: Any, send: Any) -> None:
    """An app that refuses without reading the body."""
    for message in ANSWER:
        await send(message)


class Server:
    """The ASGI server's side: what the client sends arrives at the given virtual times on
    ``receive``; what the app sends is kept with the time it was sent."""

    def __init__(self) -> None:
        self.incoming, self._out = trio.open_memory_channel[Message](10)
        self.sent: list[tuple[float, Message]] = []

    async def receive(self) -> Message:
        return await self._out.receive()

    async def send(self, message: Message) -> None:
        self.sent.append((trio.current_time(), message))

    async def client(self, script: list[tuple[float, Message]]) -> None:
        """Send each message at its time (none after the script: the client stalls)."""
        for at, message in script:
            await trio.sleep_until(at)
            await self.incoming.send(message)

    async def run(self, app: App, headers: list[tuple[bytes, bytes]],
                  script: list[tuple[float, Message]], **bounds: Any) -> None:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(self.client, script)
            await linger_on_early_answer(app, **bounds)(scope(headers), self.receive, self.send)
            nursery.cancel_scope.cancel()

    def times(self) -> list[tuple[float, bool, bytes]]:
        """(when, more_body, body) of each body message sent."""
        return [(at, bool(m.get("more_body")), m["body"]) for at, m in self.sent
                if m["type"] == "http.response.body"]


LENGTH_30 = [(b"content-length", b"30")]
CHUNKED = [(b"transfer-encoding", b"chunked")]


async def test_the_answer_goes_out_at_once_and_ends_when_the_body_has(
        autojump_clock: trio.testing.MockClock) -> None:
    server = Server()
    await server.run(answer_at_once, LENGTH_30, [
        (1.0, chunk(b"x" * 10)), (2.0, chunk(b"x" * 10)), (3.5, chunk(b"x" * 10, more=False))])
    assert server.sent[0] == (0.0, ANSWER[0])
    assert server.times() == [(0.0, True, b"too large"), (3.5, False, b"")]


async def test_a_client_that_stalls_is_closed_at_the_time_bound(
        autojump_clock: trio.testing.MockClock) -> None:
    server = Server()
    with trio.fail_after(LINGER_MAX_S + 1):
        await server.run(answer_at_once, LENGTH_30, [(1.0, chunk(b"x" * 10))])
    assert server.times() == [(0.0, True, b"too large"), (LINGER_MAX_S, False, b"")]


async def test_the_time_bound_counts_from_the_answer(
        autojump_clock: trio.testing.MockClock) -> None:
    async def answer_later(scope: Any, receive: Any, send: Any) -> None:
        await trio.sleep(2.0)
        await answer_at_once(scope, receive, send)

    server = Server()
    await server.run(answer_later, LENGTH_30, [], max_s=3.0)
    assert server.times() == [(2.0, True, b"too large"), (5.0, False, b"")]


async def test_a_chunked_body_is_read_up_to_the_byte_cap(
        autojump_clock: trio.testing.MockClock) -> None:
    server = Server()
    await server.run(answer_at_once, CHUNKED,
                     [(t, chunk(b"x" * 10)) for t in (1.0, 2.0, 3.0, 4.0)], max_bytes=25)
    assert server.times() == [(0.0, True, b"too large"), (3.0, False, b"")]


async def test_a_client_that_goes_away_ends_the_wait(
        autojump_clock: trio.testing.MockClock) -> None:
    server = Server()
    await server.run(answer_at_once, LENGTH_30,
                     [(1.0, chunk(b"x" * 10)), (1.5, {"type": "http.disconnect"})])
    assert server.times() == [(0.0, True, b"too large"), (1.5, False, b"")]


@pytest.mark.parametrize("headers", [
    [], [(b"content-length", b"0")], [(b"content-length", b"31")]], ids=str)
async def test_no_wait_without_a_body_or_for_one_over_the_cap(
        autojump_clock: trio.testing.MockClock, headers: list[tuple[bytes, bytes]]) -> None:
    """Reading a body longer than the cap could not save the answer: not waited for."""
    server = Server()
    await server.run(answer_at_once, headers, [(1.0, chunk(b"x" * 10))], max_bytes=30)
    assert server.sent == [(0.0, m) for m in ANSWER]


async def test_a_408_is_not_held_back(autojump_clock: trio.testing.MockClock) -> None:
    """The body was too slow already: its time is over (Quart's ``BODY_TIMEOUT``)."""
    timeout = [{**ANSWER[0], "status": 408}, ANSWER[1]]

    async def answer_408(scope: Any, receive: Any, send: Any) -> None:
        for message in timeout:
            await send(message)

    server = Server()
    await server.run(answer_408, LENGTH_30, [(1.0, chunk(b"x" * 10))])
    assert server.sent == [(0.0, m) for m in timeout]


async def test_a_body_read_whole_before_the_answer_changes_nothing(
        autojump_clock: trio.testing.MockClock) -> None:
    async def read_then_answer(scope: Any, receive: Any, send: Any) -> None:
        while (await receive()).get("more_body"):
            pass
        await answer_at_once(scope, receive, send)

    server = Server()
    await server.run(read_then_answer, LENGTH_30, [
        (1.0, chunk(b"x" * 20)), (2.0, chunk(b"x" * 10, more=False))])
    assert server.sent == [(2.0, m) for m in ANSWER]


async def test_an_app_still_receiving_gets_no_more_bytes_and_its_last_message_ends_the_wait(
        autojump_clock: trio.testing.MockClock) -> None:
    """Like Quart-Trio, whose task keeps receiving while its view answers: the two share
    the messages; the one the app's task receives last ends the linger all the same."""
    got: list[tuple[float, bytes, bool]] = []

    async def quart_like(scope: Any, receive: Any, send: Any) -> None:
        async def handle_messages() -> None:
            while True:
                message = await receive()
                got.append((trio.current_time(), message.get("body", b""),
                            bool(message.get("more_body"))))
                if message["type"] == "http.disconnect":
                    return

        async with trio.open_nursery() as nursery:
            nursery.start_soon(handle_messages)
            await trio.sleep(0.5)
            await answer_at_once(scope, receive, send)
            nursery.cancel_scope.cancel()

    server = Server()
    await server.run(quart_like, LENGTH_30, [
        (0.25, chunk(b"a" * 10)), (1.0, chunk(b"b" * 5)), (1.5, chunk(b"c" * 5)),
        (2.0, chunk(b"d" * 10, more=False))])
    assert server.times() == [(0.5, True, b"too large"), (2.0, False, b"")]
    # Trio hands each message to the longest waiter: a, b and d to the app's task (a before
    # the answer, as sent; the others without their bytes), c to the linger.
    assert got == [(0.25, b"a" * 10, True), (1.0, b"", True), (2.0, b"", False)]


async def test_cancelled_while_waiting_the_last_message_is_not_sent(
        autojump_clock: trio.testing.MockClock) -> None:
    server = Server()
    with trio.move_on_after(1.0) as cancelled:
        await server.run(answer_at_once, LENGTH_30, [])
    assert cancelled.cancelled_caught
    assert server.times() == [(0.0, True, b"too large")]


async def test_other_scopes_pass_through(autojump_clock: trio.testing.MockClock) -> None:
    seen: list[Any] = []

    async def app(scope: Any, receive: Any, send: Any) -> None:
        seen.append((scope, receive, send))

    server = Server()
    lifespan = {"type": "lifespan"}
    await linger_on_early_answer(app)(lifespan, server.receive, server.send)
    assert seen == [(lifespan, server.receive, server.send)]
