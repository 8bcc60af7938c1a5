"""The chat views' answers (``/v1/chat/completions``, ``/v1/messages``): the engine's answer as
SSE or JSON in the request's dialect (:mod:`._dialect`), with OLP's headers."""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass, replace
from urllib.parse import quote

import trio
from quart import Response, g, request

from olp.engine import (
    Answer,
    CacheMode,
    ChainFailed,
    Completion,
    Engine,
    Hop,
    HopRecord,
    RequestContext,
    detail_header,
)
from olp.ir import ChatRequest
from olp.store import UNRESTRICTED, KeyPolicy

from ._chat_stream import ChatStream, PendingAnswer
from ._dialect import OPENAI, Dialect
from ._errors import ApiError, chain_error

log = logging.getLogger("olp.http")

SSE_HEADERS = {"Cache-Control": "no-cache", "X-Accel-Buffering": "no"}
_VISIBLE = "".join(chr(c) for c in range(0x21, 0x7F) if chr(c) != "%")


@dataclass(frozen=True, slots=True)
class HeaderPolicy:
    """Who sees ``X-OLP-Fallback-Detail`` (``owner_only``, ``all`` or ``none``) and which
    providers are metered (for ``X-OLP-Credential``)."""

    detail: str = "owner_only"
    metered: frozenset[str] = frozenset()

    def detail_allowed(self, tier: str) -> bool:
        return self.detail == "all" or (self.detail == "owner_only" and tier == "owner")


def header_value(text: str) -> str:
    """``text`` as an ASCII header value: every character outside visible ASCII (controls,
    space, DEL, non-ASCII) and ``%`` itself percent-encoded as UTF-8 (RFC 3986), so any URL
    unquote gives the name back. Names made of visible ASCII other than ``%`` are unchanged."""
    if text.isascii() and text.isprintable() and " " not in text and "%" not in text:
        return text
    return quote(text, safe=_VISIBLE)


def _elapsed_ms(t0: float) -> str:
    return str(round((trio.current_time() - t0) * 1000))


def _headers(chat: ChatRequest, hop: Hop, index: int, records: list[HopRecord],
             ignored: tuple[str, ...], policy: HeaderPolicy, cache: str) -> dict[str, str]:
    headers = {
        "X-OLP-Requested-Model": header_value(chat.model),
        "X-OLP-Provider-Used": header_value(hop.provider),
        "X-OLP-Model-Used": header_value(hop.model),
        "X-OLP-Served-By": header_value(hop.name),
        "X-OLP-Fallback-Hops": str(index),
        "X-OLP-Cache": cache,
        "X-OLP-Credential": "metered" if hop.provider in policy.metered else "subscription",
        "X-OLP-Latency-Ms": _elapsed_ms(g.t0),
    }
    if ignored:
        headers["X-OLP-Ignored-Params"] = ",".join(ignored)
    if records and policy.detail_allowed(g.principal.tier):
        headers["X-OLP-Fallback-Detail"] = detail_header(records)
    return headers


def exhausted(chat: ChatRequest, exc: ChainFailed, policy: HeaderPolicy) -> ApiError:
    """The response when no hop answered (see :func:`._errors.chain_error`), with OLP's
    headers; logs the request."""
    failure = chain_error(chat, exc, public=_public())
    hop = failure.hop
    tried = exc.tried or [h.provider for h in exc.route.hops]
    headers = {**failure.error.headers,
               "X-OLP-Requested-Model": header_value(chat.model),
               "X-OLP-Provider-Used": header_value(hop.provider),
               "X-OLP-Model-Used": header_value(hop.model),
               "X-OLP-Fallback-Hops": str(max(0, len(exc.records) - 1)),
               "X-OLP-Cache": "bypass",
               "X-OLP-Fallback-Exhausted": ",".join(map(header_value, tried)),
               "X-OLP-Latency-Ms": _elapsed_ms(g.t0)}
    if exc.records and policy.detail_allowed(g.principal.tier):
        headers["X-OLP-Fallback-Detail"] = detail_header(exc.records)
    error = replace(failure.error, headers=headers)
    log_request(chat, hop.provider, hop.model, error.status, failure.log_code,
                error=failure.detail)
    return error


def _public() -> bool:
    """Whether this request's key is not the owner's: its errors carry no upstream text."""
    return bool(g.principal.tier != "owner")


#: Told how a stream ended: its outcome, the answer that streamed, a pending chain's failure.
StreamEnd = Callable[[str, Answer | None, ChainFailed | None], None]


def _ignore_end(outcome: str, answer: Answer | None, failure: ChainFailed | None) -> None:
    pass


async def stream(engine: Engine, chat: ChatRequest, context: RequestContext,
                 policy: HeaderPolicy, *, heartbeat_s: float = 0.0,
                 background: trio.Nursery | None = None,
                 dialect: Dialect = OPENAI, on_end: StreamEnd = _ignore_end) -> Response:
    """The answer as SSE, returned once its first content is in hand (so a failure before
    that is still a status; raises :class:`ChainFailed` or ``UnknownModel``). ``on_end`` is
    called once when the stream ends (after its log line), however it ends.

    With ``heartbeat_s`` > 0 and a ``background`` nursery for the engine's work: if no
    content came within one interval, a 200 is committed instead and keep-alives flow until
    it does (see :mod:`._chat_stream`).
    """
    if heartbeat_s <= 0 or background is None:
        return _answer_response(chat, await engine.open(chat, context), policy, None,
                                dialect, on_end)
    pending = PendingAnswer(engine, chat, context)
    background.start_soon(pending.run)
    try:
        with trio.move_on_after(heartbeat_s):
            return _answer_response(chat, await pending.result(), policy, heartbeat_s,
                                    dialect, on_end)
    except BaseException:
        pending.cancel()
        raise
    headers = {**SSE_HEADERS, "X-OLP-Requested-Model": header_value(chat.model),
               "X-OLP-Heartbeat": "true",
               "X-OLP-Latency-Ms": _elapsed_ms(g.t0)}
    return _sse_response(ChatStream(chat, pending, _stream_logger(chat, on_end),
                                    heartbeat_s=heartbeat_s, public_errors=_public(),
                                    dialect=dialect), headers)


def _answer_response(chat: ChatRequest, answer: Answer, policy: HeaderPolicy,
                     heartbeat_s: float | None, dialect: Dialect,
                     on_end: StreamEnd) -> Response:
    headers = {**SSE_HEADERS, **_headers(chat, answer.hop, answer.index, answer.records,
                                         answer.ignored_params, policy, answer.cache)}
    return _sse_response(ChatStream(chat, answer, _stream_logger(chat, on_end),
                                    heartbeat_s=heartbeat_s, public_errors=_public(),
                                    dialect=dialect), headers)


def _sse_response(body: ChatStream, headers: dict[str, str]) -> Response:
    response = Response(body, status=200, headers=headers, content_type="text/event-stream")
    response.timeout = None  # Quart's RESPONSE_TIMEOUT (60 s) would silently cut the stream
    return response


def _stream_logger(chat: ChatRequest, then: StreamEnd) -> ChatStream.OnEnd:
    t0, key = g.t0, g.principal.name  # the request context is gone while the body streams

    def on_end(outcome: str, answer: Answer | None, failure: ChainFailed | None) -> None:
        log_request(chat, answer.hop.provider if answer else "-",
                    answer.model if answer else "-", 200, outcome, key=key,
                    seconds=trio.current_time() - t0)
        then(outcome, answer, failure)

    return on_end


def complete(chat: ChatRequest, done: Completion, policy: HeaderPolicy,
             dialect: Dialect = OPENAI) -> Response:
    body = dialect.complete(done.events, done.model)
    headers = _headers(chat, done.hop, done.index, done.records, done.ignored_params, policy,
                       done.cache)
    if done.truncated:
        headers["X-OLP-Truncated"] = "true"
    log_request(chat, done.hop.provider, done.model, 200, "truncated" if done.truncated
                else "ok")
    return Response(body, status=200, content_type="application/json",
                    headers=headers)


def context() -> RequestContext:
    """The engine's view of this request: the caller's cache namespace (its key's id) and
    the client's ``Cache-Control`` (``no-store`` wins over ``no-cache``), and the key's
    provider allow-list."""
    directives = {d.strip().lower() for d in
                  request.headers.get("Cache-Control", "").split(",")}
    mode: CacheMode = "no-store" if "no-store" in directives else \
        "no-cache" if "no-cache" in directives else "default"
    return RequestContext(namespace=str(g.principal.key_id), cache_mode=mode,
                          providers=key_policy(g.principal).providers)


def key_policy(principal: object) -> KeyPolicy:
    """The principal's :class:`~olp.store.KeyPolicy` (one without, such as the anonymous
    guest, is unrestricted)."""
    policy = getattr(principal, "policy", UNRESTRICTED)
    return policy if isinstance(policy, KeyPolicy) else UNRESTRICTED


def log_request(chat: ChatRequest, provider: str, model: str, status: int, outcome: str,
                *, key: str | None = None, seconds: float | None = None,
                error: str | None = None) -> None:
    """One line per chat request: who, which hop, how it ended, and for a failure what the
    hop said (``error``, whatever the client was told). Never the prompt."""
    elapsed = seconds if seconds is not None else trio.current_time() - g.t0
    extra = {"event": "chat", "key": key or g.principal.name, "requested_model": chat.model,
             "provider": provider, "model": model, "stream": chat.stream, "status": status,
             "outcome": outcome, "ms": round(elapsed * 1000)}
    if error:
        extra["error"] = error
    log.info("chat completion", extra=extra)

