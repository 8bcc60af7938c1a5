"""One ``openai-compatible`` job: POST, read the SSE stream, enforce deadlines, retry, clean up.

The runner is the HTTP sibling of :class:`~olp.actors.CliRunner` and keeps its deadline
semantics, plus the transport's own; every expiry is an ``unavailable`` error with its code:

* ``connect_s`` (httpx's connect timeout) → ``CONNECT_TIMEOUT``;
* ``first_byte_s``, from the start of each attempt to the response headers →
  ``FIRST_BYTE_TIMEOUT``;
* ``first_output_s``, from the start of the *hop* (retries included) to the first content →
  ``FIRST_OUTPUT_TIMEOUT``; role-only chunks, reasoning deltas and ``: keepalive`` comments
  are not content;
* ``idle_s``, once content has flowed, restarted by every SSE event (not by comments) →
  ``IDLE_TIMEOUT``;
* ``total_s``, the whole hop → ``TOTAL_TIMEOUT``.

A failure before any content may be retried on the same hop (:mod:`._retry`), announced by a
:class:`Retrying` event, unless the retry could not even start before the first-output
deadline, or the upstream stayed silent (a timeout, or a connection closed or reset after it
held the request ``retry.silent_after_s`` without a byte): a silent route is left for the
next hop at once; after content, every failure is terminal.

Every path closes its response (and finishes httpx's body iterator) before it returns or
re-raises: see :mod:`._body`.
"""

from __future__ import annotations

import dataclasses
import logging
import time
from collections.abc import Awaitable, Callable
from typing import Final

import httpx
import trio

from olp.actors._deadline import DeadlineClock, TimeoutWording
from olp.failures import Code, failure
from olp.ir import ChatRequest, Error, Event, Retrying, Start, Stop, is_content

from ._body import Body
from ._chunks import ChunkReader
from ._classify import classify, classify_stream_error, cut, parse_error_body
from ._config import HttpConfig
from ._cork import cork
from ._pool import stack_pool
from ._request import encode_chat_request
from ._retry import RetryKind, plan_retry
from ._sse import SSEDecoder, SSETooLarge
from ._upstream import Upstream

log = logging.getLogger("olp.providers.openai_compat")

Emit = Callable[[Event], Awaitable[None]]
Terminal = Stop | Error

#: After ``[DONE]``, how long to wait for the body's end so the connection can be reused.
DRAIN_S: Final = 0.5
#: A provider's connections: httpx's limit on those in use (a request past it waits), and as
#: many kept idle, so a busy provider's jobs (up to its ``max_concurrent``) find theirs again
#: instead of connecting anew (httpx keeps 20 by default and closes the rest as they return).
LIMITS: Final = httpx.Limits(max_connections=100, max_keepalive_connections=100)
_USER_AGENT: Final = "olp (openai-compatible provider)"
#: How this runner words its timeout errors; each job prefixes the provider's name.
_WORDING: Final = TimeoutWording(
    first_output="no output within {first_output_s:g} s",
    idle="the stream went silent for {idle_s:g} s",
    total="no complete answer within {total_s:g} s",
)


class OpenAICompatRunner:
    """Runs jobs for one OpenAI-compatible upstream; the actor owns concurrency.

    One ``httpx.AsyncClient`` serves every job of the provider: pass one in (the caller then
    closes it), or let the runner make its own and close it with :meth:`aclose`.
    """

    def __init__(self, config: HttpConfig, *, client: httpx.AsyncClient | None = None) -> None:
        self.config = config
        self._owns_client = client is None
        self.client = client if client is not None else make_client(config)
        self._upstream: Upstream | None = None  # made at the first request
        self.wording = dataclasses.replace(_WORDING, prefix=f"{config.name}: ")

    def preflight(self) -> Error | None:
        """``AUTH_MISSING`` when a key was expected (``api_key_env``) but is not set."""
        if self.config.api_key_env and not (self.config.api_key or "").strip():
            return failure(Code.AUTH_MISSING, f"{self.config.name}: no API key: set the "
                           f"environment variable {self.config.api_key_env}")
        return None

    async def aclose(self) -> None:
        """Close the client's connections (only a client the runner made itself)."""
        if self._owns_client:
            await self.client.aclose()

    async def run(self, request: ChatRequest, model: str, emit: Emit, *,
                  owner: str | None = None) -> None:
        """Run one job, emitting IR events and always, last, exactly one terminal event.

        On cancellation the response in flight is closed before the cancellation
        propagates, and no terminal event is sent.
        """
        missing = self.preflight()
        terminal = missing if missing is not None else await _Job(
            self, request, model, emit).run()
        await emit(terminal)

    def build_request(self, body: bytes) -> httpx.Request:
        """The request for one attempt; raises ``ValueError`` for a header value that cannot
        be sent (a key that is not ASCII, say)."""
        return self.upstream.build(body)

    async def send(self, request: httpx.Request) -> httpx.Response:
        """Send one attempt's request; its body is left to stream (see :mod:`._upstream`)."""
        return await self.upstream.send(request)

    @property
    def upstream(self) -> Upstream:
        """The prepared request; raises ``ValueError`` for a header value that is not
        ASCII. A configured header replaces OLP's own of the same name, in any case."""
        if self._upstream is None:
            headers = httpx.Headers({
                "content-type": "application/json",
                "accept": "text/event-stream",
                "accept-encoding": "identity",  # compression would hold back a stream
                "user-agent": _USER_AGENT,
            })
            headers.update(self.config.headers)
            key = (self.config.api_key or "").strip()
            if key:  # update(), not []=: it refuses a value that is not ASCII
                headers.update({"authorization": f"Bearer {key}"})
            self._upstream = Upstream(self.client, self.config.url, headers)
        return self._upstream


def make_client(config: HttpConfig) -> httpx.AsyncClient:
    """The provider's shared client: only the connect deadline is httpx's; the others are
    trio deadlines in the runner (httpx's read timeout would restart on every chunk)."""
    transport = httpx.AsyncHTTPTransport(trust_env=config.trust_env, limits=LIMITS)
    cork(transport)  # a request's head and body in one send (see ._cork)
    stack_pool(transport)  # the newest idle connection, in O(1) (see ._pool)
    return httpx.AsyncClient(
        transport=transport,
        timeout=httpx.Timeout(None, connect=config.connect_s),
        follow_redirects=False,
        trust_env=config.trust_env,
    )


class _Job:
    """The state of one job across its attempts."""

    def __init__(self, runner: OpenAICompatRunner, request: ChatRequest, model: str,
                 emit: Emit) -> None:
        self.runner = runner
        self.config = runner.config
        self.emit = emit
        self.body = encode_chat_request(request, model,
                                        max_tokens_field=self.config.max_tokens_field)
        self.clock = DeadlineClock(self.config.timeouts, wording=runner.wording)
        self.started = False
        self.retries: dict[RetryKind, int] = {}
        self.silent_s = 0.0  # how long the last attempt's upstream held it without a byte
        self.malformed = 0
        self.secret = (self.config.api_key or "").strip() or None  # masked in messages

    async def run(self) -> Terminal:
        attempt = 0
        while True:
            attempt += 1
            terminal = await self._attempt()
            if isinstance(terminal, Stop) or self.clock.content_seen:
                break
            plan = plan_retry(terminal, self.config.retry, self.retries, silent_s=self.silent_s)
            if plan is None:
                break
            kind, delay = plan
            resume = trio.current_time() + delay
            if resume >= self.clock.first_output_deadline:  # no time left to answer after it
                break
            self.retries[kind] = self.retries.get(kind, 0) + 1
            await self.emit(Retrying(attempt=attempt, category=terminal.category,
                                     max_retries=self.config.retry.budget(kind),
                                     delay_s=round(delay, 3), status=terminal.status,
                                     bounded=True))
            await trio.sleep_until(resume)
        if self.malformed:
            log.warning("skipped malformed stream events",
                        extra={"provider": self.config.name, "malformed_events": self.malformed})
        log.debug("openai-compatible job ended", extra={
            "provider": self.config.name, "attempts": attempt,
            "code": terminal.code if isinstance(terminal, Error) else "ok",
            "silent_s": round(self.silent_s, 3)})
        return terminal

    async def _send(self, event: Event) -> None:
        if isinstance(event, Start):
            if self.started:
                return
            self.started = True
        elif is_content(event):
            self.clock.content()
        await self.emit(event)

    # -- one attempt -------------------------------------------------------------------------

    async def _attempt(self) -> Terminal:
        attempt_start = trio.current_time()
        self.silent_s = 0.0
        headers_deadline = min(self.clock.first_output_deadline,
                               attempt_start + self.config.first_byte_s)
        try:
            request = self.runner.build_request(self.body)
        except (httpx.HTTPError, ValueError):  # e.g. a key that is not valid in a header
            return failure(Code.REQUEST_FAILED, f"{self.config.name}: the request could not "
                           "be built (check the base URL, the API key and extra headers)",
                           category="unknown")
        body: Body | None = None
        try:
            with trio.move_on_at(headers_deadline):
                try:
                    response = await self.runner.send(request)
                except httpx.HTTPError as exc:
                    if not isinstance(exc, (httpx.ConnectError, httpx.ConnectTimeout)):
                        self.silent_s = trio.current_time() - attempt_start  # it had the request
                    return _transport_error(exc)
                body = Body(response)
            if body is None:
                return self._timeout(headers_deadline, headers=True)
            status = body.response.status_code
            if not 200 <= status < 300:
                return await self._error_response(body)
            content_type = body.response.headers.get("content-type", "").lower()
            if "json" in content_type and "event-stream" not in content_type:
                return await self._whole(body)
            return await self._stream(body)
        finally:
            if body is not None:
                await body.discard()

    async def _error_response(self, body: Body) -> Error:
        """Classify a non-2xx answer from its status, headers and (bounded) body."""
        raw = b""
        with trio.move_on_at(min(self.clock.first_output_deadline, trio.current_time() + 10.0)):
            try:
                raw = await body.read(self.config.max_error_body_bytes)
            except httpx.HTTPError:
                pass
        response = body.response
        return classify(parse_error_body(response.status_code, raw), headers=response.headers,
                        now=time.time(), secret=self.secret)

    async def _whole(self, body: Body) -> Terminal:
        """A JSON body where a stream was asked for: one completion (or an error object)."""
        reader = self._reader()
        with trio.move_on_at(self.clock.first_output_deadline) as scope:
            try:
                raw = await body.read(self.config.max_json_body_bytes)
            except httpx.HTTPError as exc:
                return self._ended(reader, exc)
        if scope.cancelled_caught:
            return self._timeout(scope.deadline)
        if raw.lstrip()[:5] == b"data:" or raw.lstrip()[:1] == b":":
            # an SSE body under a JSON content type
            decoder = SSEDecoder(max_event_bytes=self.config.max_json_body_bytes)
            for sse in decoder.feed(raw) + decoder.close():
                for event in reader.feed(sse):
                    await self._send(event)
        else:
            for event in reader.feed_completion(raw):
                await self._send(event)
        return await self._finish(reader)

    async def _stream(self, body: Body) -> Terminal:
        decoder = SSEDecoder(max_event_bytes=self.config.max_event_bytes)
        reader = self._reader()
        # One scope for the whole stream, its deadline moved on as the clock's moves (a
        # scope per read cost a scope's set-up and tear-down per chunk: ADR 0028).
        with trio.CancelScope(deadline=self.clock.deadline) as scope:
            while True:
                try:
                    data = await body.receive()
                except httpx.HTTPError as exc:
                    return await self._finish(reader, cause=exc)
                try:
                    events = decoder.feed(data) if data is not None else decoder.close()
                except SSETooLarge as exc:
                    return failure(Code.OUTPUT_TOO_LONG, str(exc))
                for sse in events:
                    for event in reader.feed(sse):
                        await self._send(event)
                    if reader.done or reader.error is not None:
                        return await self._finish(reader, body=body)
                    self.clock.activity()  # after content, every event restarts idle
                if data is None:
                    return await self._finish(reader)
                scope.deadline = self.clock.deadline
        return self._timeout(scope.deadline)

    def _reader(self) -> ChunkReader:
        secret = self.secret

        def on_error(payload: dict[str, object] | str) -> Error:
            return classify_stream_error(payload, now=time.time(), secret=secret)

        return ChunkReader(on_error)

    async def _finish(self, reader: ChunkReader, *, cause: httpx.HTTPError | None = None,
                      body: Body | None = None) -> Terminal:
        """The attempt's terminal event, after its usage (a failed hop's usage counts too)."""
        self.malformed += reader.malformed
        if reader.usage is not None:
            await self._send(reader.usage)
        if reader.error is not None:
            return reader.error
        if reader.done and body is not None:
            await self._drain(body)
        if reader.finish_reason is not None or reader.done:
            return Stop(finish_reason=reader.finish_reason or "stop")
        return self._ended(reader, cause)

    async def _drain(self, body: Body) -> None:
        """Read to the end of the body after ``[DONE]`` so the connection can be reused."""
        with trio.move_on_at(min(self.clock.total_deadline, trio.current_time() + DRAIN_S)):
            try:
                while await body.receive() is not None:
                    pass
            except httpx.HTTPError:
                pass

    def _ended(self, reader: ChunkReader, cause: httpx.HTTPError | None) -> Error:
        why = f" ({cut(type(cause).__name__ + ': ' + str(cause), 120)})" if cause else ""
        if self.clock.content_seen:
            message = f"stream ended early: the upstream stopped mid-answer{why}"
        else:
            message = f"stream ended early: the upstream sent no answer{why}"
        return failure(Code.STREAM_ENDED_EARLY, message)

    def _timeout(self, deadline: float, *, headers: bool = False) -> Error:
        """The error for ``deadline`` that passed; ``headers``: it was the attempt's headers
        deadline, which is ``FIRST_BYTE_TIMEOUT`` when it came before the clock's own."""
        clock = self.clock
        if (headers and clock.expired(deadline) is Code.FIRST_OUTPUT_TIMEOUT
                and deadline < clock.first_output_deadline):
            return failure(Code.FIRST_BYTE_TIMEOUT, f"{self.config.name}: no response "
                           f"headers within {self.config.first_byte_s:g} s")
        return clock.timeout_error(deadline)


def _transport_error(exc: httpx.HTTPError) -> Error:
    """A failure before the response headers."""
    detail = cut(f"{type(exc).__name__}: {exc}", 200)
    if isinstance(exc, httpx.ConnectTimeout):
        return failure(Code.CONNECT_TIMEOUT, f"could not connect in time ({detail})")
    if isinstance(exc, (httpx.ConnectError, httpx.ReadError, httpx.WriteError,
                        httpx.RemoteProtocolError)):
        return failure(Code.CONNECTION_FAILED,
                       f"connection failed before a response ({detail})")
    if isinstance(exc, httpx.TimeoutException):
        return failure(Code.UPSTREAM_TIMEOUT, detail)
    return failure(Code.REQUEST_FAILED, f"the request could not be sent ({detail})",
                   category="unknown")
