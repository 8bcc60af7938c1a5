"""``POST /v1/chat/completions``: the engine's answer as SSE or JSON, with OLP's headers."""

from __future__ import annotations

import logging
import math
import time
from collections.abc import Callable
from dataclasses import dataclass

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
from olp.failures import Code
from olp.ir import ChatRequest
from olp.ir.openai import ChunkEncoder, CompletionBuilder, completion_id

from ._errors import ApiError, upstream_error
from ._heartbeat import HeartbeatBody, Opening
from ._sse import SseBody

log = logging.getLogger("olp.http")

SSE_HEADERS = {"Cache-Control": "no-cache", "X-Accel-Buffering": "no"}


@dataclass(frozen=True, slots=True)
class HeaderPolicy:
    """Who sees ``X-OLP-Fallback-Detail`` (``owner_only``, ``all`` or ``none``) and which
    providers are metered (for ``X-OLP-Credential``)."""

    detail: str = "owner_only"
    metered: frozenset[str] = frozenset()

    def detail_allowed(self, tier: str) -> bool:
        return self.detail == "all" or (self.detail == "owner_only" and tier == "owner")


def _elapsed_ms(t0: float) -> str:
    return str(round((trio.current_time() - t0) * 1000))


def _headers(chat: ChatRequest, hop: Hop, index: int, records: list[HopRecord],
             ignored: tuple[str, ...], policy: HeaderPolicy, cache: str) -> dict[str, str]:
    headers = {
        "X-OLP-Requested-Model": chat.model,
        "X-OLP-Provider-Used": hop.provider,
        "X-OLP-Model-Used": hop.model,
        "X-OLP-Served-By": hop.name,
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
    """The response when no hop answered: the first attempted hop's error; if every hop was
    skipped, 429 with the soonest reset (cooling) or 400 (no hop can take the request)."""
    hops = exc.route.hops
    if exc.first is not None:
        hop, first = exc.first
        error = upstream_error(first, provider=hop.provider, model=hop.model)
        code = first.code
    elif exc.skip_codes <= {Code.CAPABILITY, Code.CONTEXT_WINDOW}:
        hop = hops[0]
        what = "tools" if chat.tools else "this request"
        error = ApiError(400, f"No hop of `{chat.model}` can take {what}: "
                         + "; ".join(r.error_message for r in exc.records),
                         "invalid_request_error",
                         "tools_unsupported" if chat.tools else "capability_unsupported")
        code = error.code or ""
    else:
        hop = hops[0]
        headers = {} if exc.retry_after_s is None else {
            "Retry-After": str(max(1, math.ceil(exc.retry_after_s)))}
        error = ApiError(429, f"Every hop of `{chat.model}` is resting: "
                         + "; ".join(r.error_message for r in exc.records),
                         "rate_limit_error", "all_hops_cooling", headers=headers)
        code = Code.ALL_HOPS_COOLING
    tried = exc.tried or [h.provider for h in hops]
    error.headers = {**error.headers,
                     "X-OLP-Requested-Model": chat.model,
                     "X-OLP-Provider-Used": hop.provider,
                     "X-OLP-Model-Used": hop.model,
                     "X-OLP-Fallback-Hops": str(max(0, len(exc.records) - 1)),
                     "X-OLP-Cache": "bypass",
                     "X-OLP-Fallback-Exhausted": ",".join(tried),
                     "X-OLP-Latency-Ms": _elapsed_ms(g.t0)}
    if exc.records and policy.detail_allowed(g.principal.tier):
        error.headers["X-OLP-Fallback-Detail"] = detail_header(exc.records)
    log_request(chat, hop.provider, hop.model, error.status, code)
    return error


def stream(chat: ChatRequest, answer: Answer, policy: HeaderPolicy, *,
           keepalive_s: float | None = None) -> Response:
    encoder = ChunkEncoder(id=completion_id(), created=int(time.time()), model=answer.model,
                           include_usage=chat.include_usage)
    headers = {**SSE_HEADERS, **_headers(chat, answer.hop, answer.index, answer.records,
                                         answer.ignored_params, policy, answer.cache)}
    return _sse_response(SseBody(answer, encoder, _stream_logger(chat, answer),
                                 keepalive_s=keepalive_s), headers)


async def stream_with_heartbeat(engine: Engine, chat: ChatRequest, context: RequestContext,
                                policy: HeaderPolicy, nursery: trio.Nursery,
                                interval: float) -> Response:
    """Like :func:`stream`, but if no content came within ``interval``, commit a 200 and
    send keep-alive comments until it does (see :mod:`._heartbeat`)."""
    opening = Opening(engine, chat, context)
    nursery.start_soon(opening.run)
    try:
        with trio.move_on_after(interval):
            return stream(chat, await opening.result(), policy, keepalive_s=interval)
    except BaseException:
        opening.cancel()
        raise
    headers = {**SSE_HEADERS, "X-OLP-Requested-Model": chat.model, "X-OLP-Heartbeat": "true",
               "X-OLP-Latency-Ms": _elapsed_ms(g.t0)}
    return _sse_response(HeartbeatBody(opening, chat, interval, _stream_logger(chat, None)),
                         headers)


def _sse_response(body: SseBody | HeartbeatBody, headers: dict[str, str]) -> Response:
    response = Response(body, status=200, headers=headers, content_type="text/event-stream")
    response.timeout = None  # Quart's RESPONSE_TIMEOUT (60 s) would silently cut the stream
    return response


def _stream_logger(chat: ChatRequest, answer: Answer | None) -> Callable[[str], None]:
    t0, key = g.t0, g.principal.name  # the request context is gone while the body streams

    def on_end(outcome: str) -> None:
        log_request(chat, answer.hop.provider if answer else "-",
                    answer.model if answer else "-", 200, outcome, key=key,
                    seconds=trio.current_time() - t0)

    return on_end


def complete(chat: ChatRequest, done: Completion, policy: HeaderPolicy) -> Response:
    builder = CompletionBuilder(id=completion_id(), created=int(time.time()), model=done.model)
    for event in done.events:
        builder.add(event)
    headers = _headers(chat, done.hop, done.index, done.records, done.ignored_params, policy,
                       done.cache)
    if done.truncated:
        headers["X-OLP-Truncated"] = "true"
    log_request(chat, done.hop.provider, done.model, 200, "truncated" if done.truncated
                else "ok")
    return Response(builder.body(), status=200, content_type="application/json",
                    headers=headers)


def context() -> RequestContext:
    """The engine's view of this request: the caller's cache namespace (its key's id) and
    the client's ``Cache-Control`` (``no-store`` wins over ``no-cache``)."""
    directives = {d.strip().lower() for d in
                  request.headers.get("Cache-Control", "").split(",")}
    mode: CacheMode = "no-store" if "no-store" in directives else \
        "no-cache" if "no-cache" in directives else "default"
    return RequestContext(namespace=str(g.principal.key_id), cache_mode=mode)


def log_request(chat: ChatRequest, provider: str, model: str, status: int, outcome: str,
                *, key: str | None = None, seconds: float | None = None) -> None:
    """One line per chat request: who, which hop, how it ended. Never the prompt."""
    elapsed = seconds if seconds is not None else trio.current_time() - g.t0
    log.info("chat completion", extra={
        "event": "chat", "key": key or g.principal.name, "requested_model": chat.model,
        "provider": provider, "model": model, "stream": chat.stream, "status": status,
        "outcome": outcome, "ms": round(elapsed * 1000)})

